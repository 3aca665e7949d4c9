//! What the log costs on disk: long scripted replies through the real server (runs, tokens,
//! everything a run writes), then the SQLite database and its WAL after a checkpoint, divided by
//! the streamed tokens (`text` events) — with where a token's bytes go, column by column.

use crate::requests::RequestExt;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Row};

use super::live::Server;

/// What one measurement found.
pub struct LogSize {
    pub tokens: u64,
    /// Rows the tokens take (runs of appends share one).
    pub text_rows: u64,
    pub events: u64,
    pub bytes_on_disk: u64,
    /// Stored bytes per token, per column of the rows holding tokens, in schema order.
    pub token_columns: Vec<(String, f64)>,
}

impl LogSize {
    pub fn print(&self) {
        println!(
            "{:<66} {:>12.0} bytes",
            format!(
                "log on disk per streamed token (db + WAL after checkpoint; {} tokens, {} events)",
                self.tokens, self.events
            ),
            self.bytes_on_disk as f64 / self.tokens.max(1) as f64
        );
        let columns: Vec<String> = self
            .token_columns
            .iter()
            .filter(|(_, bytes)| *bytes > 0.0)
            .map(|(name, bytes)| format!("{name} {bytes:.0}"))
            .collect();
        let stored: f64 = self.token_columns.iter().map(|(_, bytes)| bytes).sum();
        println!(
            "  per token: {stored:.0} bytes of values in {} rows for {} tokens ({}); the rest is \
             row, page and index overhead",
            self.text_rows,
            self.tokens,
            columns.join(", ")
        );
    }
}

/// `agents` agents each stream one reply of `reply_tokens` tokens, unpaced, at once, through a
/// server on `url`, which is stopped after.
async fn stream_replies(url: &str, agents: u64, reply_tokens: u32) {
    let server = Server::start(url, 0, reply_tokens).await;
    let http = agentstream_server::http_client::client();
    let mut runs = Vec::new();
    for _ in 0..agents {
        let agent_id = server.agent().await;
        runs.push(server.run(agent_id, "a long answer, please").await);
    }
    for run_id in runs {
        loop {
            let run: Value = http.get(format!("{}/v1/runs/{run_id}", server.base)).answer().await;
            if run["status"] != "running" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    server.stop().await;
}

/// The same streams into a fresh PostgreSQL database at `url`: the `events` table with its
/// indexes and TOAST after a `VACUUM` (PostgreSQL's WAL is recycled, not kept), per token.
pub async fn measure_postgres(url: &str, agents: u64, reply_tokens: u32) -> (u64, u64) {
    use sqlx::Connection;
    stream_replies(url, agents, reply_tokens).await;
    let mut connection = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query("VACUUM events").execute(&mut connection).await.unwrap();
    let (tokens, bytes): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT sum(last_seq - first_seq + 1) FROM events WHERE kind = 'text')::bigint, \
         pg_total_relation_size('events')",
    )
    .fetch_one(&mut connection)
    .await
    .unwrap();
    (tokens as u64, bytes as u64)
}

/// [`stream_replies`] into a fresh SQLite database at `path`, then its size.
pub async fn measure(path: &Path, agents: u64, reply_tokens: u32) -> LogSize {
    crate::baseline::remove_database(path);
    let url = format!("sqlite://{}", path.display());
    stream_replies(&url, agents, reply_tokens).await;
    let mut connection = SqliteConnectOptions::new().filename(path).connect().await.unwrap();
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&mut connection).await.unwrap();
    // Events, not rows: a run row holds `last_seq - first_seq + 1` of them.
    let count = |kind: Option<&str>| {
        let sql = match kind {
            Some(_) => "SELECT sum(last_seq - first_seq + 1) FROM events WHERE kind = ?",
            None => "SELECT sum(last_seq - first_seq + 1) FROM events WHERE ? IS NULL",
        };
        sqlx::query_scalar::<_, i64>(sql).bind(kind.map(str::to_owned))
    };
    let tokens = count(Some("text")).fetch_one(&mut connection).await.unwrap() as u64;
    let events = count(None).fetch_one(&mut connection).await.unwrap() as u64;
    let text_rows: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE kind = 'text'")
        .fetch_one(&mut connection)
        .await
        .unwrap();
    let columns: Vec<String> = sqlx::query("SELECT name FROM pragma_table_info('events')")
        .fetch_all(&mut connection)
        .await
        .unwrap()
        .iter()
        .map(|row| row.get::<String, _>(0))
        .collect();
    let averages = columns
        .iter()
        .map(|name| format!("sum(coalesce(length(\"{name}\"), 0)) * 1.0 / {}", tokens.max(1)))
        .collect::<Vec<_>>()
        .join(", ");
    let row = sqlx::query(&format!("SELECT {averages} FROM events WHERE kind = 'text'"))
        .fetch_one(&mut connection)
        .await
        .unwrap();
    let token_columns = columns
        .iter()
        .enumerate()
        .map(|(index, name)| (name.clone(), row.try_get::<f64, _>(index).unwrap_or(0.0)))
        .collect();
    drop(connection);
    let size = |suffix: &str| {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        std::fs::metadata(file).map_or(0, |metadata| metadata.len())
    };
    let bytes_on_disk = size("") + size("-wal");
    crate::baseline::remove_database(path);
    LogSize { tokens, text_rows: text_rows as u64, events, bytes_on_disk, token_columns }
}
