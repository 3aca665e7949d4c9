//! The floor and the ceiling the engine is measured between: the disk's fsyncs per second and
//! the seed design (one transaction per event), on SQLite and PostgreSQL.

use std::path::Path;
use std::time::Instant;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::ConnectOptions;
use uuid::Uuid;

pub(crate) struct Fsync {
    pub(crate) per_second: f64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) p999_ms: f64,
    pub(crate) max_ms: f64,
}

/// Writes 4 KiB and `fdatasync`s it, over and over, for `seconds`: what one durable commit costs
/// at the least on this disk, and how long the disk itself sometimes stalls (the floor under
/// any durable latency percentile).
pub(crate) fn fsync_rate(directory: &Path, seconds: f64) -> Fsync {
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
    Fsync { per_second, p50_ms: at(0.5), p99_ms: at(0.99), p999_ms: at(0.999), max_ms: at(1.0) }
}

/// Lets the disk finish writing back what a phase left behind (the engine phase writes about
/// 100 MB), so the next phase's fsyncs do not queue behind it: without this the stream-latency
/// p99 after the engine phase measured the previous phase's writeback (60 ms against 6–20 ms
/// measured alone, same binary).
pub(crate) fn settle_disk() {
    let _ = std::process::Command::new("sync").status();
    std::thread::sleep(std::time::Duration::from_millis(500));
}

pub(crate) fn remove_database(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let _ = std::fs::remove_file(file);
    }
}

/// The seed design: every token its own transaction (`BEGIN; next seq; INSERT; COMMIT`) in
/// SQLite's default DELETE journal mode with synchronous=FULL.
pub(crate) async fn seed_design(directory: &Path, events: u64) -> f64 {
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

/// One transaction per event on PostgreSQL: `BEGIN; next seq; INSERT; COMMIT`.
pub(crate) async fn seed_design_postgres(url: &str, events: u64) -> f64 {
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
