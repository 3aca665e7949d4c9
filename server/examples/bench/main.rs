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
//! API beside our own loop (`producer.rs`), `--streams` only durable streams (`streams.rs`). Not
//! a test:
//! nothing here passes or fails on a number.
//!
//! With `AGENTSTREAM_BENCH_POSTGRES_URL=postgres://…/postgres` (any database on the server; the
//! bench creates its own beside it), the engine, stream latency, resume and history figures are
//! measured on PostgreSQL too, with PostgreSQL's own one-transaction-per-event baseline.
//! `scripts/bench.sh` starts a throwaway PostgreSQL for that.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentstream_server::delivery::hub::Hub;
use agentstream_server::delivery::writer::{self, Writer};
use agentstream_server::store::postgres::PgStore;
use agentstream_server::store::sqlite::SqliteStore;
use agentstream_server::store::{EventDraft, NewAgent, Store};
use app::{DeltaAction, EventKind};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::ConnectOptions;
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

mod first_open;
mod log_size;
mod observability;
mod producer;
#[path = "../peers/stream_client.rs"]
mod stream_client;
mod streams;

/// Appends one producer keeps unacknowledged, as a run does (`RUN_APPENDS_IN_FLIGHT_MAX`).
const PRODUCER_IN_FLIGHT_MAX: usize = 64;

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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
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
    if std::env::args().any(|argument| argument == "--streams") {
        println!("agentstream-bench --streams: durable streams beside our own loop");
        streams::measure(directory, sizes).await;
        return;
    }
    println!(
        "agentstream-bench{} on {}",
        if smoke { " (smoke)" } else { "" },
        directory.display()
    );
    let fsync = fsync_rate(directory, sizes.fsync_seconds);
    let fsyncs = fsync.per_second;
    println!(
        "{:<66} {:>12.0} /s",
        "fsync (4 KiB write + fdatasync), the physical limit", fsyncs
    );
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
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&format!("sqlite://{}", path.display()))
            .await
            .unwrap(),
    );
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
    report_live(
        "",
        &sqlite_url("streams"),
        &sqlite_url("gap"),
        Some(&sqlite_url("slow")),
        sizes,
    )
    .await;
    observability::traces(directory, sizes).await;
    producer::measure(directory, sizes).await;
    log_size::measure(
        &directory.join("size.db"),
        sizes.size_agents,
        sizes.size_reply_tokens,
    )
    .await
    .print();
    first_open::measure(
        &directory.join("open.db"),
        sizes.open_tokens,
        sizes.open_run_tokens,
    )
    .await
    .print();
    match live::idle_memory(directory, sizes.idle_sockets).await {
        Some((sockets, bytes_each)) => println!(
            "{:<66} {:>12.1} KB each",
            format!("{sockets} idle subscribed WebSockets, server memory"),
            bytes_each / 1024.0
        ),
        None => println!(
            "{:<66} {:>12}",
            "idle WebSockets: no release server binary to run", "skipped"
        ),
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
    let mut connection = sqlx::PgConnection::connect(admin)
        .await
        .expect("PostgreSQL answers");
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
    println!(
        "{:<66} {:>12.0} events/s",
        "postgres baseline: one transaction per event", baseline
    );
    let url = create_postgres_database(admin, "engine").await;
    let store: Arc<dyn Store> = Arc::new(
        PgStore::open(&url, &agentstream_server::store::ClusterOptions::default())
            .await
            .unwrap(),
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

/// One transaction per event on PostgreSQL: `BEGIN; next seq; INSERT; COMMIT`.
async fn seed_design_postgres(url: &str, events: u64) -> f64 {
    use sqlx::Connection;
    let mut connection = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query(
        "CREATE TABLE events (id uuid PRIMARY KEY, agent_id uuid NOT NULL, seq bigint NOT NULL, \
         content text NOT NULL, UNIQUE (agent_id, seq))",
    )
    .execute(&mut connection)
    .await
    .unwrap();
    let agent = Uuid::new_v4();
    let started = Instant::now();
    for _ in 0..events {
        let mut transaction = connection.begin().await.unwrap();
        let next: i64 =
            sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE agent_id = $1")
                .bind(agent)
                .fetch_one(&mut *transaction)
                .await
                .unwrap();
        sqlx::query("INSERT INTO events (id, agent_id, seq, content) VALUES ($1, $2, $3, $4)")
            .bind(Uuid::new_v4())
            .bind(agent)
            .bind(next)
            .bind(r#"{"text":"token "}"#)
            .execute(&mut *transaction)
            .await
            .unwrap();
        transaction.commit().await.unwrap();
    }
    events as f64 / started.elapsed().as_secs_f64()
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
        format!(
            "{label}resume a {}-event gap over WebSocket: first / all",
            gap.events
        ),
        gap.ws_first_ms,
        gap.ws_all_ms
    );
    println!(
        "{:<66} {:>12.1} ms / {:.1} ms",
        format!(
            "{label}resume a {}-event gap over REST (pages of 1000): first / all",
            gap.events
        ),
        gap.rest_first_ms,
        gap.rest_all_ms
    );
    println!(
        "{:<66} {:>12.1} ms / {:.1} ms",
        format!(
            "{label}  same, {} pages in flight (as the live view reads): first / all",
            4
        ),
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
                if coalesce {
                    ", coalesced"
                } else {
                    ", every event"
                }
            ),
            slow.behind_at_end_ms,
            slow.bytes as f64 / 1000.0,
            slow.frames,
            slow.events
        );
    }
}

struct Fsync {
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    max_ms: f64,
}

/// Writes 4 KiB and `fdatasync`s it, over and over, for `seconds`: what one durable commit costs
/// at the least on this disk, and how long the disk itself sometimes stalls (the floor under
/// any durable latency percentile).
fn fsync_rate(directory: &Path, seconds: f64) -> Fsync {
    use std::io::{Seek, Write};
    let path = directory.join("fsync.probe");
    let mut file = std::fs::File::create(&path).unwrap();
    let block = [7u8; 4096];
    let started = Instant::now();
    let mut each_ms = Vec::new();
    while started.elapsed().as_secs_f64() < seconds {
        let one = Instant::now();
        file.seek(std::io::SeekFrom::Start(0)).unwrap();
        file.write_all(&block).unwrap();
        file.sync_data().unwrap();
        each_ms.push(one.elapsed().as_secs_f64() * 1000.0);
    }
    let per_second = each_ms.len() as f64 / started.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(path);
    each_ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |p: f64| each_ms[((each_ms.len() - 1) as f64 * p).round() as usize];
    Fsync {
        per_second,
        p50_ms: at(0.5),
        p99_ms: at(0.99),
        p999_ms: at(0.999),
        max_ms: at(1.0),
    }
}

/// Lets the disk finish writing back what a phase left behind (the engine phase writes about
/// 100 MB), so the next phase's fsyncs do not queue behind it: without this the stream-latency
/// p99 after the engine phase measured the previous phase's writeback (60 ms against 6–20 ms
/// measured alone, same binary).
fn settle_disk() {
    let _ = std::process::Command::new("sync").status();
    std::thread::sleep(std::time::Duration::from_millis(500));
}

fn remove_database(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let _ = std::fs::remove_file(file);
    }
}

/// The seed design: every token its own transaction (`BEGIN; next seq; INSERT; COMMIT`) in
/// SQLite's default DELETE journal mode with synchronous=FULL.
async fn seed_design(directory: &Path, events: u64) -> f64 {
    let path = directory.join("baseline.db");
    remove_database(&path);
    let options = SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Delete)
        .synchronous(SqliteSynchronous::Full)
        .disable_statement_logging();
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .unwrap();
    sqlx::query(
        "CREATE TABLE events (id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, seq INTEGER NOT NULL, \
         content TEXT NOT NULL, UNIQUE (agent_id, seq))",
    )
    .execute(&pool)
    .await
    .unwrap();
    let agent = Uuid::new_v4().to_string();
    let started = Instant::now();
    for _ in 0..events {
        let mut transaction = pool.begin().await.unwrap();
        let next: i64 =
            sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE agent_id = ?")
                .bind(&agent)
                .fetch_one(&mut *transaction)
                .await
                .unwrap();
        sqlx::query("INSERT INTO events (id, agent_id, seq, content) VALUES (?, ?, ?, ?)")
            .bind(Uuid::new_v4().to_string())
            .bind(&agent)
            .bind(next)
            .bind(r#"{"text":"token "}"#)
            .execute(&mut *transaction)
            .await
            .unwrap();
        transaction.commit().await.unwrap();
    }
    let rate = events as f64 / started.elapsed().as_secs_f64();
    pool.close().await;
    remove_database(&path);
    rate
}

struct EngineFigures {
    events_per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
}

impl EngineFigures {
    /// Throughput, latency, and the ratio to the same backend's per-event baseline.
    fn print(&self, label: &str, agents: u64, baseline: f64) {
        println!(
            "{:<66} {:>12.0} events/s",
            format!("{label}engine: persisted + broadcast, {agents} agents at once"),
            self.events_per_second
        );
        println!(
            "{:<66} {:>12.1} ms / {:.1} ms / {:.1} ms",
            "  submit → received by a subscriber: p50 / p99 / max",
            self.p50_ms,
            self.p99_ms,
            self.max_ms
        );
        println!(
            "{:<66} {:>12.0} x",
            format!("{label}engine / {label}baseline"),
            self.events_per_second / baseline
        );
    }
}

/// The real store, writer and hub: `agents` producers each append `events_per_agent` token
/// deltas, pipelined as runs do, while one subscriber per agent receives them from the hub.
/// The clock stops when every subscriber has its agent's last event.
async fn engine(store: Arc<dyn Store>, agents: u64, events_per_agent: u64) -> EngineFigures {
    engine_counting(store, agents, events_per_agent, false).await
}

/// [`engine`], with the writer counting into the server's metrics when `counting`.
async fn engine_counting(
    store: Arc<dyn Store>,
    agents: u64,
    events_per_agent: u64,
    counting: bool,
) -> EngineFigures {
    let hub = Arc::new(Hub::new(
        agentstream_server::limits::HUB_ROOM_BATCHES_MAX_DEFAULT,
    ));
    let writer = if counting {
        Writer::spawn_observed(
            store.clone(),
            hub.clone(),
            agentstream_server::limits::WRITER_COMMIT_RETRIES_MAX_DEFAULT,
            Arc::new(agentstream_server::metrics::Metrics::new()),
        )
    } else {
        Writer::spawn(store.clone(), hub.clone())
    };
    let mut agent_ids = Vec::new();
    for index in 0..agents {
        let agent = store
            .create_agent(NewAgent {
                name: format!("bench-{index}"),
                ..NewAgent::default()
            })
            .await
            .unwrap();
        agent_ids.push(agent.id);
    }
    // Submit times by (agent, seq), read by the subscribers to measure latency.
    let submitted: Arc<Vec<std::sync::Mutex<Vec<Instant>>>> = Arc::new(
        (0..agents)
            .map(|_| std::sync::Mutex::new(Vec::new()))
            .collect(),
    );
    let mut subscribers = Vec::new();
    for (index, &agent_id) in agent_ids.iter().enumerate() {
        let mut live = hub.subscribe(agent_id);
        let submitted = submitted.clone();
        subscribers.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(events_per_agent as usize);
            let mut last = 0u64;
            while last < events_per_agent {
                match live.recv().await {
                    Ok(batch) => {
                        let now = Instant::now();
                        let sent = submitted[index].lock().unwrap();
                        for event in batch.iter() {
                            if let Some(at) = sent.get(event.seq as usize - 1) {
                                latencies.push(now.duration_since(*at));
                            }
                            last = event.seq;
                        }
                    }
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => break,
                }
            }
            latencies
        }));
    }
    let started = Instant::now();
    let mut producers = Vec::new();
    for (index, &agent_id) in agent_ids.iter().enumerate() {
        let writer = writer.clone();
        let submitted = submitted.clone();
        producers.push(tokio::spawn(async move {
            let message_id = Uuid::new_v4();
            let mut in_flight = std::collections::VecDeque::new();
            for _ in 0..events_per_agent {
                if in_flight.len() >= PRODUCER_IN_FLIGHT_MAX {
                    writer::wait(in_flight.pop_front().unwrap()).await.unwrap();
                }
                let mut draft = EventDraft::new(EventKind::Text);
                draft.message_id = Some(message_id);
                draft.delta = Some(serde_json::Value::String("token ".into()));
                draft.delta_path = Some("text".into());
                draft.delta_action = Some(DeltaAction::Append);
                submitted[index].lock().unwrap().push(Instant::now());
                in_flight.push_back(writer.submit(agent_id, vec![draft]).await.unwrap());
            }
            for receipt in in_flight {
                writer::wait(receipt).await.unwrap();
            }
        }));
    }
    for producer in producers {
        producer.await.unwrap();
    }
    let mut latencies: Vec<Duration> = Vec::new();
    for subscriber in subscribers {
        latencies.extend(subscriber.await.unwrap());
    }
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    let percentile = |p: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * p).round() as usize)
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    let figures = EngineFigures {
        events_per_second: (agents * events_per_agent) as f64 / elapsed.as_secs_f64(),
        p50_ms: percentile(0.50),
        p99_ms: percentile(0.99),
        max_ms: percentile(1.0),
    };
    drop(writer);
    figures
}

/// The real server over real sockets.
pub(crate) mod live {
    use std::path::Path;
    use std::time::{Duration, Instant};

    use agentstream_server::config::Config;
    use app::protocol::{ClientMessage, EventsPage, ServerMessage};
    use futures::{SinkExt, StreamExt};
    use serde_json::{json, Value};
    use tokio_tungstenite::tungstenite::Message;
    use uuid::Uuid;

    use super::Sizes;

    pub struct Server {
        pub base: String,
        _stop: tokio::sync::oneshot::Sender<()>,
    }

    impl Server {
        /// The server in this process on port 0 on `database_url`, with the scripted provider
        /// paced as asked.
        pub async fn start(database_url: &str, token_delay_ms: u64, reply_tokens: u32) -> Server {
            Server::start_traced(database_url, token_delay_ms, reply_tokens, None).await
        }

        /// [`Server::start`], exporting traces to `otlp_traces_endpoint` when given.
        pub async fn start_traced(
            database_url: &str,
            token_delay_ms: u64,
            reply_tokens: u32,
            otlp_traces_endpoint: Option<String>,
        ) -> Server {
            let mut config = Config {
                database_url: database_url.to_owned(),
                otlp_traces_endpoint,
                ..Config::default()
            };
            config.scripted.token_delay_ms = token_delay_ms;
            config.scripted.reply_tokens = reply_tokens;
            config.limits.ws_connections_max = 20_000;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let base = format!("http://{}", listener.local_addr().unwrap());
            let options = leptos::prelude::get_configuration(None)
                .unwrap()
                .leptos_options;
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            tokio::spawn(agentstream_server::serve(
                listener,
                config,
                options,
                async {
                    let _ = stopped.await;
                },
            ));
            let http = reqwest::Client::new();
            while http.get(format!("{base}/healthz")).send().await.is_err() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Server { base, _stop: stop }
        }

        /// Stops the server and waits while it lets go of its database (the next server, or
        /// the measurement, opens the same file).
        pub async fn stop(self) {
            drop(self);
            tokio::time::sleep(Duration::from_millis(500)).await;
        }

        pub async fn agent(&self) -> Uuid {
            let body: Value = reqwest::Client::new()
                .post(format!("{}/v1/agents", self.base))
                .json(&json!({ "name": "bench" }))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            Uuid::parse_str(body["id"].as_str().unwrap()).unwrap()
        }

        /// Starts a run of `agent_id` for `content`; its id.
        pub async fn run(&self, agent_id: Uuid, content: &str) -> Uuid {
            let response = reqwest::Client::new()
                .post(format!("{}/v1/agents/{agent_id}/runs", self.base))
                .json(&json!({ "content": content }))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 202);
            let accepted: Value = response.json().await.unwrap();
            Uuid::parse_str(accepted["run_id"].as_str().unwrap()).unwrap()
        }

        pub fn ws_url(&self) -> String {
            format!("{}/v1/ws", self.base.replace("http://", "ws://"))
        }
    }

    pub fn percentiles(mut samples: Vec<f64>) -> (f64, f64, f64) {
        samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let at = |p: f64| {
            samples
                .get(((samples.len() as f64 - 1.0) * p).round() as usize)
                .copied()
                .unwrap_or(0.0)
        };
        (at(0.5), at(0.99), at(1.0))
    }

    /// `streams` agents, each with a subscribed WebSocket client, each running a paced run at
    /// once. Latency: the event's `created_at` (stamped when the provider's event reached the
    /// run) to the moment its frame is read by the client.
    pub async fn stream_latency(server: &Server, sizes: &Sizes) -> (f64, f64, f64) {
        let mut clients = Vec::new();
        let mut agents = Vec::new();
        for _ in 0..sizes.streams {
            let agent_id = server.agent().await;
            clients.push(subscriber(server, agent_id).await);
            agents.push(agent_id);
        }
        for &agent_id in &agents {
            server.run(agent_id, "stream at a steady pace").await;
        }
        let mut samples = Vec::new();
        for client in clients {
            samples.extend(client.await.unwrap());
        }
        percentiles(samples)
    }

    /// A WebSocket client subscribed to `agent_id` that reads until the run ends; per event, the
    /// milliseconds from when it was made — `metadata.sent_at_ns` when a producer stamped it,
    /// else its `created_at` — to the moment its frame is read.
    pub async fn subscriber(server: &Server, agent_id: Uuid) -> tokio::task::JoinHandle<Vec<f64>> {
        let (mut socket, _) = tokio_tungstenite::connect_async(server.ws_url())
            .await
            .unwrap();
        let subscribe = serde_json::to_string(&ClientMessage::Subscribe {
            agent_id,
            since: 0,
            coalesce: false,
        })
        .unwrap();
        socket.send(Message::Text(subscribe.into())).await.unwrap();
        tokio::spawn(async move {
            let mut latencies = Vec::new();
            while let Some(Ok(frame)) = socket.next().await {
                let Message::Text(text) = frame else { continue };
                let now = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0);
                let Ok(ServerMessage::Events { events, .. }) = serde_json::from_str(text.as_str())
                else {
                    continue;
                };
                let mut ended = false;
                for event in events {
                    let made = event
                        .metadata
                        .get("sent_at_ns")
                        .and_then(Value::as_i64)
                        .unwrap_or_else(|| event.created_at.timestamp_nanos_opt().unwrap_or(0));
                    latencies.push((now - made) as f64 / 1e6);
                    ended |= event.kind.is_run_end();
                }
                if ended {
                    break;
                }
            }
            latencies
        })
    }

    pub struct Gap {
        pub events: u64,
        pub ws_first_ms: f64,
        pub ws_all_ms: f64,
        pub rest_first_ms: f64,
        pub rest_all_ms: f64,
        /// The same, read as the live view reads it: the first page, then the rest
        /// [`PAGES_IN_FLIGHT`] at a time (seqs have no holes, so every page's cursor is known).
        pub rest_parallel_first_ms: f64,
        pub rest_parallel_all_ms: f64,
    }

    /// Pages the live view reads at once while catching up (`FILL_PAGES_IN_FLIGHT_MAX`).
    const PAGES_IN_FLIGHT: usize = 4;

    /// Reads the whole log of `agent_id` from seq 0 as the live view does; the time to the first
    /// page and to the last.
    async fn rest_pages_in_flight(
        server: &Server,
        agent_id: Uuid,
        coalesce: bool,
    ) -> (Duration, Duration, usize) {
        let http = reqwest::Client::new();
        let page = |since: u64| {
            let http = http.clone();
            let url = format!(
                "{}/v1/agents/{agent_id}/events?since={since}&limit=1000{}",
                server.base,
                if coalesce { "&coalesce=true" } else { "" }
            );
            async move {
                http.get(url)
                    .send()
                    .await
                    .unwrap()
                    .json::<EventsPage>()
                    .await
                    .unwrap()
            }
        };
        let started = Instant::now();
        let first = page(0).await;
        let first_ms = started.elapsed();
        let (mut newest, head, mut events) = (first.next_since, first.head_seq, first.events.len());
        if first.has_more {
            let cursors: Vec<u64> = (newest..head).step_by(1000).collect();
            let mut pages = futures::stream::iter(cursors)
                .map(page)
                .buffered(PAGES_IN_FLIGHT);
            while let Some(page) = pages.next().await {
                newest = page.next_since;
                events += page.events.len();
            }
        }
        assert_eq!(newest, head, "the pages in flight did not reach the head");
        (first_ms, started.elapsed(), events)
    }

    /// A log of at least `gap_events` events, then a client that resumes from seq 0.
    pub async fn resume_gap(server: &Server) -> Gap {
        let agent_id = server.agent().await;
        // This server's scripted replies are `gap_events` tokens long, one event each; wait for
        // the run to end.
        server.run(agent_id, "a very long answer").await;
        let http = reqwest::Client::new();
        let head = wait_for_run_end(server, agent_id, 0).await;
        let (mut socket, _) = tokio_tungstenite::connect_async(server.ws_url())
            .await
            .unwrap();
        let subscribe = serde_json::to_string(&ClientMessage::Subscribe {
            agent_id,
            since: 0,
            coalesce: false,
        })
        .unwrap();
        let started = Instant::now();
        socket.send(Message::Text(subscribe.into())).await.unwrap();
        let (mut first, mut seen) = (None, 0u64);
        while seen < head {
            let Some(Ok(Message::Text(text))) = socket.next().await else {
                break;
            };
            if let Ok(ServerMessage::Events { events, .. }) = serde_json::from_str(text.as_str()) {
                first.get_or_insert_with(|| started.elapsed());
                seen = events.last().map_or(seen, |event| event.seq);
            }
        }
        let ws_all = started.elapsed();
        let started = Instant::now();
        let (mut rest_first, mut since) = (None, 0u64);
        loop {
            // Read into the page type, as the live view's client does.
            let page: EventsPage = http
                .get(format!(
                    "{}/v1/agents/{agent_id}/events?since={since}&limit=1000",
                    server.base
                ))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            rest_first.get_or_insert_with(|| started.elapsed());
            since = page.next_since;
            if !page.has_more {
                break;
            }
        }
        let rest_all = started.elapsed();
        let (parallel_first, parallel_all, _) = rest_pages_in_flight(server, agent_id, false).await;
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        Gap {
            events: head,
            ws_first_ms: ms(first.unwrap_or_default()),
            ws_all_ms: ms(ws_all),
            rest_first_ms: ms(rest_first.unwrap_or_default()),
            rest_all_ms: ms(rest_all),
            rest_parallel_first_ms: ms(parallel_first),
            rest_parallel_all_ms: ms(parallel_all),
        }
    }

    pub struct CoalescedGap {
        pub ws_events: usize,
        pub ws_first_ms: f64,
        pub ws_all_ms: f64,
        pub rest_events: usize,
        pub rest_first_ms: f64,
        pub rest_all_ms: f64,
    }

    /// The same resume as [`resume_gap`], by a client that asks for coalescing (as the live
    /// view does): runs of appends arrive merged.
    pub async fn resume_gap_coalesced(server: &Server) -> CoalescedGap {
        let agent_id = server.agent().await;
        server.run(agent_id, "a very long answer").await;
        let head = wait_for_run_end(server, agent_id, 0).await;
        let (mut socket, _) = tokio_tungstenite::connect_async(server.ws_url())
            .await
            .unwrap();
        let subscribe = serde_json::to_string(&ClientMessage::Subscribe {
            agent_id,
            since: 0,
            coalesce: true,
        })
        .unwrap();
        let started = Instant::now();
        socket.send(Message::Text(subscribe.into())).await.unwrap();
        let (mut first, mut seen, mut ws_events) = (None, 0u64, 0);
        while seen < head {
            let Some(Ok(Message::Text(text))) = socket.next().await else {
                break;
            };
            if let Ok(ServerMessage::Events { events, .. }) = serde_json::from_str(text.as_str()) {
                first.get_or_insert_with(|| started.elapsed());
                seen = events.last().map_or(seen, |event| event.seq);
                ws_events += events.len();
            }
        }
        let ws_all = started.elapsed();
        let (rest_first, rest_all, rest_events) =
            rest_pages_in_flight(server, agent_id, true).await;
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        CoalescedGap {
            ws_events,
            ws_first_ms: ms(first.unwrap_or_default()),
            ws_all_ms: ms(ws_all),
            rest_events,
            rest_first_ms: ms(rest_first),
            rest_all_ms: ms(rest_all),
        }
    }

    pub struct SlowReader {
        /// Seqs the run wrote.
        pub seqs: u64,
        /// From the run's last event being made to this reader having it.
        pub behind_at_end_ms: f64,
        pub bytes: usize,
        pub frames: usize,
        pub events: usize,
    }

    /// A reader on a slow link (a small socket buffer, reading `bytes_per_second`) following one
    /// fast stream live: how far behind it is when the run ends, and what it had to read.
    pub async fn slow_reader(server: &Server, bytes_per_second: u64, coalesce: bool) -> SlowReader {
        let agent_id = server.agent().await;
        let address = server.base.trim_start_matches("http://").parse().unwrap();
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let tcp = socket.connect(address).await.unwrap();
        let (mut socket, _) = tokio_tungstenite::client_async(server.ws_url(), tcp)
            .await
            .unwrap();
        let subscribe = serde_json::to_string(&ClientMessage::Subscribe {
            agent_id,
            since: 0,
            coalesce,
        })
        .unwrap();
        socket.send(Message::Text(subscribe.into())).await.unwrap();
        server.run(agent_id, "a fast answer").await;
        let (mut bytes, mut frames, mut events) = (0, 0, 0);
        loop {
            let Some(Ok(Message::Text(text))) = socket.next().await else {
                panic!("the slow reader's socket ended early")
            };
            // The link's pace: this frame's bytes take this long to arrive.
            tokio::time::sleep(Duration::from_secs_f64(
                text.len() as f64 / bytes_per_second as f64,
            ))
            .await;
            bytes += text.len();
            frames += 1;
            let Ok(ServerMessage::Events { events: batch, .. }) =
                serde_json::from_str(text.as_str())
            else {
                continue;
            };
            events += batch.len();
            if let Some(end) = batch.iter().find(|event| event.kind.is_run_end()) {
                let behind = chrono::Utc::now() - end.created_at;
                return SlowReader {
                    seqs: end.seq,
                    behind_at_end_ms: behind.num_microseconds().unwrap_or(0) as f64 / 1000.0,
                    bytes,
                    frames,
                    events,
                };
            }
        }
    }

    /// Waits until the agent's newest event, past seq `after`, ends a run; returns the head seq.
    async fn wait_for_run_end(server: &Server, agent_id: Uuid, after: u64) -> u64 {
        let http = reqwest::Client::new();
        loop {
            let first: Value = http
                .get(format!(
                    "{}/v1/agents/{agent_id}/events?since=0&limit=1",
                    server.base
                ))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let head = first["head_seq"].as_u64().unwrap();
            let last: Value = http
                .get(format!(
                    "{}/v1/agents/{agent_id}/events?since={}&limit=1",
                    server.base,
                    head.saturating_sub(1)
                ))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let kind = last["events"][0]["kind"].as_str().unwrap_or("");
            if head > after && kind.starts_with("run_") && kind != "run_started" {
                return head;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A conversation of two long replies (about 20 000 events), then its history page,
    /// rendered on the server from the log: the first full response (the whole log folded)
    /// and the median of three more (folded from the snapshot the first kept).
    pub async fn history_page(server: &Server) -> (u64, f64, f64) {
        let agent_id = server.agent().await;
        server.run(agent_id, "a very long answer").await;
        let first = wait_for_run_end(server, agent_id, 0).await;
        server.run(agent_id, "and another one").await;
        let head = wait_for_run_end(server, agent_id, first).await;
        let http = reqwest::Client::new();
        let mut times = Vec::new();
        for _ in 0..4 {
            let started = Instant::now();
            let response = http
                .get(format!("{}/agents/{agent_id}/history", server.base))
                .send()
                .await
                .unwrap();
            assert!(
                response.status().is_success(),
                "history page: {}",
                response.status()
            );
            let _body = response.bytes().await.unwrap();
            times.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        // The first load folds the whole log; later ones start from the snapshot it kept.
        let cold = times[0];
        let mut warm = times.split_off(1);
        warm.sort_by(|a, b| a.partial_cmp(b).unwrap());
        (head, cold, warm[1])
    }

    fn rss_bytes(pid: u32) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
        let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024.0)
    }

    /// The release server binary in its own process (so only its memory is counted), `sockets`
    /// WebSockets each subscribed to an agent and then idle: the server's resident memory
    /// growth per socket.
    pub async fn idle_memory(directory: &Path, sockets: usize) -> Option<(usize, f64)> {
        let target = std::env::var("CARGO_TARGET_DIR").ok().or_else(|| {
            std::env::var("HOME")
                .ok()
                .map(|home| format!("{home}/.cache/agentstream/target"))
        })?;
        let binary =
            std::env::var("AGENTSTREAM_SERVER_BIN").unwrap_or(format!("{target}/release/server"));
        if !Path::new(&binary).exists() {
            return None;
        }
        let path = directory.join("idle.db");
        super::remove_database(&path);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let mut child = tokio::process::Command::new(&binary)
            .env("LEPTOS_SITE_ADDR", format!("127.0.0.1:{port}"))
            .env("DATABASE_URL", format!("sqlite://{}", path.display()))
            .env("AGENTSTREAM_WS_CONNECTIONS_MAX", (sockets + 16).to_string())
            .env("RUST_LOG", "error")
            .kill_on_drop(true)
            .spawn()
            .ok()?;
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        while http.get(format!("{base}/healthz")).send().await.is_err() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let body: Value = http
            .post(format!("{base}/v1/agents"))
            .json(&json!({ "name": "idle" }))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        let agent_id = Uuid::parse_str(body["id"].as_str()?).ok()?;
        let pid = child.id()?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = rss_bytes(pid)?;
        let url = format!("ws://127.0.0.1:{port}/v1/ws");
        let subscribe = serde_json::to_string(&ClientMessage::Subscribe {
            agent_id,
            since: 0,
            coalesce: false,
        })
        .unwrap();
        let mut open = Vec::with_capacity(sockets);
        for _ in 0..sockets {
            let Ok((mut socket, _)) = tokio_tungstenite::connect_async(&url).await else {
                break;
            };
            socket
                .send(Message::Text(subscribe.clone().into()))
                .await
                .ok()?;
            let _subscribed = socket.next().await;
            open.push(socket);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after = rss_bytes(pid)?;
        let count = open.len();
        drop(open);
        let _ = child.kill().await;
        super::remove_database(&path);
        Some((count, (after - before) / count.max(1) as f64))
    }
}
