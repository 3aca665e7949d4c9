//! The benchmark: how fast the engine persists and broadcasts, beside the machine's physical
//! limit (fsyncs per second) and the seed design (one SQLite transaction per event, DELETE
//! journal), all measured in the same run on the same disk; then the real server over real
//! sockets: latency of 100 paced streams, resuming a 10 000-event gap, idle WebSocket memory,
//! what the log costs on disk per streamed token (`log_size.rs`), and the first open of a
//! million-token conversation after a restart (`first_open.rs`).
//!
//! `cargo run --release -p server --example bench` prints the table; `--smoke` runs a tiny
//! version (the test command uses it so the benchmark keeps building and running); `--cost`
//! runs only what metrics and traces cost (`observability.rs`), `--producer` only the producer
//! API beside our own loop (`producer.rs`), `--streams` only durable streams (`streams.rs`),
//! `--branches` only what a fork costs (`branches.rs`), `--engine` only the engine, in rounds
//! (`engine.rs`: to profile it or to compare two builds). Not a test: nothing here passes or fails
//! on a number.
//!
//! With `AGENTSTREAM_BENCH_POSTGRES_URL=postgres://…/postgres` (any database on the server; the
//! bench creates its own beside it), the engine, stream latency, resume and history figures are
//! measured on PostgreSQL too, with PostgreSQL's own one-transaction-per-event baseline.
//! `scripts/bench.sh` starts a throwaway PostgreSQL for that.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentstream_server::store::postgres::PgStore;
use agentstream_server::store::sqlite::SqliteStore;
use agentstream_server::store::Store;

mod baseline;
mod branches;
mod engine;
mod first_open;
mod live;
mod log_size;
mod observability;
mod producer;
/// The tests' short way of sending a request and reading its JSON.
#[allow(dead_code)]
#[path = "../../tests/common/requests.rs"]
mod requests;
#[path = "../peers/stream_client.rs"]
mod stream_client;
mod streams;

/// The server binary's allocator (`server/src/main.rs`), so the engine measured in this process
/// allocates as the product does: with the system's, `malloc` and `free` were a quarter of the
/// engine's CPU.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use baseline::{fsync_rate, remove_database, seed_design, seed_design_postgres, settle_disk};
use engine::engine;

struct Sizes {
    fsync_seconds: f64,
    baseline_events: u64,
    agents: u64,
    events_per_agent: u64,
    /// Paced streams at once, their events each, and the pause between events.
    streams: u64,
    stream_events: u32,
    stream_delay_ms: u64,
    gap_events: u32,
    idle_sockets: usize,
    /// The slow reader: a reply of this many unpaced-ish tokens (1 ms apart), read at this rate.
    slow_reply_tokens: u32,
    slow_read_bytes_per_second: u64,
    /// The log's size: this many agents each stream one reply of this many tokens.
    size_agents: u64,
    size_reply_tokens: u32,
    /// The long conversation opened after a restart: tokens in all, per run.
    open_tokens: u64,
    open_run_tokens: u64,
    /// The producer API's rate: this many agents, each one run of this many events.
    producer_agents: u64,
    producer_events: u64,
}

fn main() {
    // The engine runs in this process: set up as the server binary sets up its own.
    agentstream_server::process::no_huge_pages();
    let smoke = std::env::args().any(|argument| argument == "--smoke");
    let sizes = if smoke {
        Sizes {
            fsync_seconds: 0.2,
            baseline_events: 50,
            agents: 4,
            events_per_agent: 200,
            streams: 4,
            stream_events: 20,
            stream_delay_ms: 20,
            gap_events: 300,
            idle_sockets: 20,
            slow_reply_tokens: 200,
            slow_read_bytes_per_second: 250_000,
            size_agents: 2,
            size_reply_tokens: 200,
            open_tokens: 20_000,
            open_run_tokens: 2_000,
            producer_agents: 2,
            producer_events: 200,
        }
    } else {
        Sizes {
            fsync_seconds: 2.0,
            baseline_events: 1_000,
            agents: 100,
            events_per_agent: 2_000,
            streams: 100,
            stream_events: 250,
            stream_delay_ms: 20,
            gap_events: 10_000,
            idle_sockets: 10_000,
            slow_reply_tokens: 2_000,
            slow_read_bytes_per_second: 250_000,
            size_agents: 16,
            size_reply_tokens: 5_000,
            open_tokens: 1_000_000,
            open_run_tokens: 5_000,
            producer_agents: 50,
            producer_events: 2_000,
        }
    };
    let directory = std::env::var_os("AGENTSTREAM_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("data/bench"));
    std::fs::create_dir_all(&directory).expect("the bench directory can be created");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(run(&directory, &sizes, smoke));
}

async fn run(directory: &Path, sizes: &Sizes, smoke: bool) {
    if std::env::args().any(|argument| argument == "--cost") {
        println!("agentstream-bench --cost: what metrics and traces cost");
        observability::metrics(directory, sizes).await;
        observability::traces(directory, sizes).await;
        return;
    }
    if std::env::args().any(|argument| argument == "--producer") {
        println!("agentstream-bench --producer: the producer API beside our own loop");
        producer::measure(directory, sizes).await;
        streams::measure(directory, sizes).await;
        return;
    }
    if std::env::args().any(|argument| argument == "--branches") {
        println!("agentstream-bench --branches: what a fork costs");
        let events = if smoke { 10_000 } else { 1_000_000 };
        let path = directory.join("branches.db");
        remove_database(&path);
        let url = format!("sqlite://{}", path.display());
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&url).await.unwrap());
        branches::measure(store, events, "").await;
        remove_database(&path);
        if let Ok(admin) = std::env::var("AGENTSTREAM_BENCH_POSTGRES_URL") {
            let url = create_postgres_database(&admin, "branches").await;
            let options = agentstream_server::store::ClusterOptions::default();
            let store: Arc<dyn Store> = Arc::new(PgStore::open(&url, &options).await.unwrap());
            branches::measure(store, events, "postgres: ").await;
        }
        return;
    }
    if std::env::args().any(|argument| argument == "--resume") {
        println!("agentstream-bench --resume: the WebSocket resume of a long gap, in rounds");
        let path = directory.join("resume.db");
        remove_database(&path);
        let rounds = if smoke { 2 } else { 7 };
        let url = format!("sqlite://{}", path.display());
        live::resume_rounds(&url, sizes.gap_events, rounds).await;
        remove_database(&path);
        return;
    }
    if std::env::args().any(|argument| argument == "--engine") {
        println!("agentstream-bench --engine: the engine alone, in rounds");
        let rounds = if smoke { 1 } else { 5 };
        for round in 1..=rounds {
            let path = directory.join("engine.db");
            remove_database(&path);
            let url = format!("sqlite://{}", path.display());
            let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&url).await.unwrap());
            let figures = engine(store, sizes.agents, sizes.events_per_agent).await;
            remove_database(&path);
            figures.print_round(&format!("round {round}: "), sizes.agents);
            settle_disk();
        }
        let admin = std::env::var("AGENTSTREAM_BENCH_POSTGRES_URL").unwrap_or_default();
        if !admin.trim().is_empty() {
            for round in 1..=rounds {
                let url = create_postgres_database(&admin, &format!("engine_{round}")).await;
                let options = agentstream_server::store::ClusterOptions::default();
                let store: Arc<dyn Store> = Arc::new(PgStore::open(&url, &options).await.unwrap());
                let figures = engine(store, sizes.agents, sizes.events_per_agent).await;
                figures.print_round(&format!("postgres round {round}: "), sizes.agents);
            }
        }
        return;
    }
    if std::env::args().any(|argument| argument == "--streams") {
        println!("agentstream-bench --streams: durable streams beside our own loop");
        streams::measure(directory, sizes).await;
        return;
    }
    println!("agentstream-bench{} on {}", if smoke { " (smoke)" } else { "" }, directory.display());
    let fsync = fsync_rate(directory, sizes.fsync_seconds);
    let fsyncs = fsync.per_second;
    println!("{:<66} {:>12.0} /s", "fsync (4 KiB write + fdatasync), the physical limit", fsyncs);
    println!(
        "{:<66} {:>12.2} ms / {:.2} ms / {:.2} ms / {:.1} ms",
        "  one fsync: p50 / p99 / p99.9 / max (the disk's own stalls)",
        fsync.p50_ms,
        fsync.p99_ms,
        fsync.p999_ms,
        fsync.max_ms
    );
    let baseline = seed_design(directory, sizes.baseline_events).await;
    println!(
        "{:<66} {:>12.0} events/s",
        "baseline: one transaction per event, DELETE journal", baseline
    );
    let path = directory.join("engine.db");
    remove_database(&path);
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&format!("sqlite://{}", path.display())).await.unwrap());
    let engine = engine(store, sizes.agents, sizes.events_per_agent).await;
    remove_database(&path);
    settle_disk();
    engine.print("", sizes.agents, baseline);
    observability::metrics(directory, sizes).await;
    println!(
        "{:<66} {:>12.1} events",
        "  events per fsync (group commit)",
        engine.events_per_second / fsyncs
    );

    let sqlite_url = |name: &str| {
        let path = directory.join(format!("{name}.db"));
        remove_database(&path);
        format!("sqlite://{}", path.display())
    };
    report_live("", &sqlite_url("streams"), &sqlite_url("gap"), Some(&sqlite_url("slow")), sizes)
        .await;
    observability::traces(directory, sizes).await;
    producer::measure(directory, sizes).await;
    log_size::measure(&directory.join("size.db"), sizes.size_agents, sizes.size_reply_tokens)
        .await
        .print();
    first_open::measure(&directory.join("open.db"), sizes.open_tokens, sizes.open_run_tokens)
        .await
        .print();
    match live::idle_memory(directory, sizes.idle_sockets).await {
        Some((sockets, bytes_each)) => println!(
            "{:<66} {:>12.1} KB each",
            format!("{sockets} idle subscribed WebSockets, server memory"),
            bytes_each / 1024.0
        ),
        None => {
            println!("{:<66} {:>12}", "idle WebSockets: no release server binary to run", "skipped")
        }
    }
    match std::env::var("AGENTSTREAM_BENCH_POSTGRES_URL") {
        Ok(admin) if !admin.trim().is_empty() => postgres(&admin, sizes, baseline).await,
        _ => println!(
            "PostgreSQL: skipped (set AGENTSTREAM_BENCH_POSTGRES_URL, or run scripts/bench.sh)"
        ),
    }
}

/// A fresh database beside `admin`'s on the same PostgreSQL server; its URL.
async fn create_postgres_database(admin: &str, name: &str) -> String {
    PgStore::create_database(admin, &format!("agentstream_bench_{name}"))
        .await
        .expect("the benchmark's database is created")
}

/// The same figures on PostgreSQL (the server's settings as they are; durable commits unless
/// the server was told otherwise).
async fn postgres(admin: &str, sizes: &Sizes, sqlite_baseline: f64) {
    use sqlx::Connection;
    let mut connection = sqlx::PgConnection::connect(admin).await.expect("PostgreSQL answers");
    let settings: (String, String, String) = sqlx::query_as(
        "SELECT current_setting('server_version'), current_setting('fsync'), \
         current_setting('synchronous_commit')",
    )
    .fetch_one(&mut connection)
    .await
    .unwrap();
    println!(
        "PostgreSQL {} on loopback (fsync={}, synchronous_commit={})",
        settings.0, settings.1, settings.2
    );
    let baseline = seed_design_postgres(
        &create_postgres_database(admin, "baseline").await,
        sizes.baseline_events,
    )
    .await;
    println!("{:<66} {:>12.0} events/s", "postgres baseline: one transaction per event", baseline);
    let url = create_postgres_database(admin, "engine").await;
    let store: Arc<dyn Store> = Arc::new(
        PgStore::open(&url, &agentstream_server::store::ClusterOptions::default()).await.unwrap(),
    );
    let engine = engine(store, sizes.agents, sizes.events_per_agent).await;
    // The same for PostgreSQL: its checkpoint of the engine phase's writes now, not mid-stream
    // (it needs a superuser or pg_checkpoint; without, PostgreSQL checkpoints when it will).
    let _ = sqlx::query("CHECKPOINT").execute(&mut connection).await;
    settle_disk();
    engine.print("postgres ", sizes.agents, baseline);
    println!(
        "{:<66} {:>12.0} x",
        "postgres engine / SQLite seed-design baseline",
        engine.events_per_second / sqlite_baseline
    );
    report_live(
        "postgres ",
        &create_postgres_database(admin, "streams").await,
        &create_postgres_database(admin, "gap").await,
        // The slow reader measures delivery, not the store: once, on SQLite.
        None,
        sizes,
    )
    .await;
    let (tokens, bytes) = log_size::measure_postgres(
        &create_postgres_database(admin, "size").await,
        sizes.size_agents,
        sizes.size_reply_tokens,
    )
    .await;
    println!(
        "{:<66} {:>12.0} bytes",
        format!("postgres log per streamed token (table + indexes after VACUUM; {tokens} tokens)"),
        bytes as f64 / tokens.max(1) as f64
    );
}

/// The real server over real sockets on two fresh databases: paced-stream latency on the
/// first; resume of a long gap and the history page on the second.
async fn report_live(
    label: &str,
    streams_url: &str,
    gap_url: &str,
    slow_url: Option<&str>,
    sizes: &Sizes,
) {
    let server = live::Server::start(streams_url, sizes.stream_delay_ms, sizes.stream_events).await;
    let latency = live::stream_latency(&server, sizes).await;
    drop(server);
    // A second server whose scripted replies are the gap's length, unpaced.
    let server = live::Server::start(gap_url, 0, sizes.gap_events).await;
    println!(
        "{:<66} {:>12.1} ms / {:.1} ms / {:.1} ms",
        format!(
            "{label}{} streams x {} events/s: event made -> WS frame p50/p99/max",
            sizes.streams,
            1000 / sizes.stream_delay_ms.max(1)
        ),
        latency.0,
        latency.1,
        latency.2
    );
    let gap = live::resume_gap(&server).await;
    println!(
        "{:<66} {:>12.1} ms / {:.1} ms",
        format!("{label}resume a {}-event gap over WebSocket: first / all", gap.events),
        gap.ws_first_ms,
        gap.ws_all_ms
    );
    println!(
        "{:<66} {:>12.1} ms / {:.1} ms",
        format!("{label}resume a {}-event gap over REST (pages of 1000): first / all", gap.events),
        gap.rest_first_ms,
        gap.rest_all_ms
    );
    println!(
        "{:<66} {:>12.1} ms / {:.1} ms",
        format!("{label}  same, {} pages in flight (as the live view reads): first / all", 4),
        gap.rest_parallel_first_ms,
        gap.rest_parallel_all_ms
    );
    let coalesced = live::resume_gap_coalesced(&server).await;
    println!(
        "{:<66} {:>12.1} ms / {:.1} ms",
        format!(
            "{label}  WS, coalesced ({} events for {} seqs): first / all",
            coalesced.ws_events, gap.events
        ),
        coalesced.ws_first_ms,
        coalesced.ws_all_ms
    );
    println!(
        "{:<66} {:>12.1} ms / {:.1} ms",
        format!(
            "{label}  REST as the live view: 4 in flight, coalesced ({} events)",
            coalesced.rest_events
        ),
        coalesced.rest_first_ms,
        coalesced.rest_all_ms
    );
    let (events, cold_ms, warm_ms) = live::history_page(&server).await;
    println!(
        "{:<66} {:>12.1} ms / {:.1} ms",
        format!("{label}history page of {events} events: first / from snapshot"),
        cold_ms,
        warm_ms
    );
    drop(server);
    let Some(slow_url) = slow_url else { return };
    // A third: one fast stream and a reader on a slow link, without and with coalescing.
    let server = live::Server::start(slow_url, 1, sizes.slow_reply_tokens).await;
    for coalesce in [false, true] {
        let slow = live::slow_reader(&server, sizes.slow_read_bytes_per_second, coalesce).await;
        println!(
            "{:<66} {:>12.0} ms behind, {:.0} KB, {} frames, {} events",
            format!(
                "{label}reader at {} KB/s, {}-token reply at ~1/ms{}",
                sizes.slow_read_bytes_per_second / 1000,
                slow.seqs,
                if coalesce { ", coalesced" } else { ", every event" }
            ),
            slow.behind_at_end_ms,
            slow.bytes as f64 / 1000.0,
            slow.frames,
            slow.events
        );
    }
}
