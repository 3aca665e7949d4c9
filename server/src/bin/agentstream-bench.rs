//! `agentstream-bench`: how fast the engine persists and broadcasts, beside the machine's physical
//! limit (fsyncs per second) and the seed design (one SQLite transaction per event, DELETE
//! journal), all measured in the same run on the same disk.
//!
//! `cargo run --release -p server --bin agentstream-bench` prints the table; `--smoke` runs a
//! tiny version (the test command uses it so the benchmark keeps building and running). Not a
//! test: nothing here passes or fails on a number.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentstream_server::hub::Hub;
use agentstream_server::store::sqlite::SqliteStore;
use agentstream_server::store::{EventDraft, NewAgent, Store};
use agentstream_server::writer::{self, Writer};
use app::{DeltaAction, EventKind};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::ConnectOptions;
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

/// Appends one producer keeps unacknowledged, as a run does (`RUN_APPENDS_IN_FLIGHT_MAX`).
const PRODUCER_IN_FLIGHT_MAX: usize = 64;

struct Sizes {
    fsync_seconds: f64,
    baseline_events: u64,
    agents: u64,
    events_per_agent: u64,
}

fn main() {
    let smoke = std::env::args().any(|argument| argument == "--smoke");
    let sizes = if smoke {
        Sizes { fsync_seconds: 0.2, baseline_events: 50, agents: 4, events_per_agent: 200 }
    } else {
        Sizes { fsync_seconds: 2.0, baseline_events: 1_000, agents: 100, events_per_agent: 2_000 }
    };
    let directory = std::env::var_os("AGENTSTREAM_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("data/bench"));
    std::fs::create_dir_all(&directory).expect("the bench directory can be created");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(run(&directory, &sizes, smoke));
}

async fn run(directory: &Path, sizes: &Sizes, smoke: bool) {
    println!("agentstream-bench{} on {}", if smoke { " (smoke)" } else { "" }, directory.display());
    let fsyncs = fsync_rate(directory, sizes.fsync_seconds);
    println!("{:<58} {:>12.0} /s", "fsync (4 KiB write + fdatasync), the physical limit", fsyncs);
    let baseline = seed_design(directory, sizes.baseline_events).await;
    println!(
        "{:<58} {:>12.0} events/s",
        "baseline: one transaction per event, DELETE journal", baseline
    );
    let engine = engine(directory, sizes.agents, sizes.events_per_agent).await;
    println!(
        "{:<58} {:>12.0} events/s",
        format!("engine: persisted + broadcast, {} agents at once", sizes.agents),
        engine.events_per_second
    );
    println!(
        "{:<58} {:>12.1} ms / {:.1} ms / {:.1} ms",
        "  submit → received by a subscriber: p50 / p99 / max", engine.p50_ms, engine.p99_ms, engine.max_ms
    );
    println!("{:<58} {:>12.0} x", "engine / baseline", engine.events_per_second / baseline);
    println!("{:<58} {:>12.1} events", "  events per fsync (group commit)", engine.events_per_second / fsyncs);
}

/// Writes 4 KiB and `fdatasync`s it, over and over, for `seconds`: what one durable commit costs
/// at the least on this disk.
fn fsync_rate(directory: &Path, seconds: f64) -> f64 {
    use std::io::{Seek, Write};
    let path = directory.join("fsync.probe");
    let mut file = std::fs::File::create(&path).unwrap();
    let block = [7u8; 4096];
    let started = Instant::now();
    let mut count = 0u64;
    while started.elapsed().as_secs_f64() < seconds {
        file.seek(std::io::SeekFrom::Start(0)).unwrap();
        file.write_all(&block).unwrap();
        file.sync_data().unwrap();
        count += 1;
    }
    let rate = count as f64 / started.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(path);
    rate
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
    let pool = SqlitePoolOptions::new().max_connections(1).connect_with(options).await.unwrap();
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
        let next: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE agent_id = ?")
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

/// The real store, writer and hub: `agents` producers each append `events_per_agent` token
/// deltas, pipelined as runs do, while one subscriber per agent receives them from the hub.
/// The clock stops when every subscriber has its agent's last event.
async fn engine(directory: &Path, agents: u64, events_per_agent: u64) -> EngineFigures {
    let path = directory.join("engine.db");
    remove_database(&path);
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&format!("sqlite://{}", path.display())).await.unwrap(),
    );
    let hub = Arc::new(Hub::new(agentstream_server::hub::HUB_ROOM_BATCHES_MAX_DEFAULT));
    let writer = Writer::spawn(store.clone(), hub.clone());
    let mut agent_ids = Vec::new();
    for index in 0..agents {
        let agent = store
            .create_agent(NewAgent { name: format!("bench-{index}"), ..NewAgent::default() })
            .await
            .unwrap();
        agent_ids.push(agent.id);
    }
    // Submit times by (agent, seq), read by the subscribers to measure latency.
    let submitted: Arc<Vec<std::sync::Mutex<Vec<Instant>>>> =
        Arc::new((0..agents).map(|_| std::sync::Mutex::new(Vec::new())).collect());
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
    remove_database(&path);
    figures
}
