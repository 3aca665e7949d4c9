//! Appends on a thread of their own, with a connection of their own.
//!
//! Profiling the writer showed it bound by round trips, not by fsync: through sqlx every
//! statement of a group commit (`BEGIN`, the head bump, the inserts, `COMMIT`) is a hop to
//! sqlx's SQLite worker thread and back. Here a whole group is one hop: the writer hands the
//! group to this thread, which runs the transaction with cached prepared statements and
//! answers once. Reads stay on sqlx's pool; WAL lets them run beside this connection.

use std::path::PathBuf;
use std::time::Duration;

use app::{AgentEvent, DeltaAction};
use rusqlite::{params, Connection, ErrorCode, OptionalExtension};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::store::rows::{json_text, totals, SeqCursors};
use crate::store::{AppendBatch, StoreError};

/// Groups waiting for the append thread. The writer sends one group at a time; the bound only
/// matters for callers that append directly.
const APPEND_QUEUE_GROUPS_MAX: usize = 16;

/// The append connection's page cache. SQLite's default (2 MiB) made the writer re-read the
/// indexes' pages from the OS on every commit (`pread` was the top kernel symbol of its thread).
const APPEND_CACHE_KIB: u32 = 64 * 1024;

struct Job {
    batches: Vec<AppendBatch>,
    reply: oneshot::Sender<Result<Vec<Vec<AgentEvent>>, StoreError>>,
}

/// The handle to the append thread; the thread ends (and closes its connection) when this is
/// dropped.
pub(super) struct Appender {
    jobs: mpsc::Sender<Job>,
}

impl Appender {
    /// Opens the connection (the file exists and is migrated) and starts the thread.
    pub(super) fn start(path: PathBuf, busy_timeout_ms: u64) -> Result<Appender, StoreError> {
        let connection = Connection::open(&path).map_err(sqlite_error)?;
        connection
            .busy_timeout(Duration::from_millis(busy_timeout_ms))
            .map_err(sqlite_error)?;
        connection
            .execute_batch(&format!(
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; \
                 PRAGMA cache_size = -{APPEND_CACHE_KIB}; PRAGMA wal_autocheckpoint = 0;"
            ))
            .map_err(sqlite_error)?;
        connection.set_prepared_statement_cache_capacity(16);
        let checkpointer = start_checkpointer(&path, busy_timeout_ms)?;
        let (jobs, mut queue) = mpsc::channel::<Job>(APPEND_QUEUE_GROUPS_MAX);
        std::thread::Builder::new()
            .name("sqlite-append".into())
            .spawn(move || {
                let mut connection = connection;
                while let Some(job) = queue.blocking_recv() {
                    let outcome = append(&mut connection, job.batches);
                    let _ = job.reply.send(outcome);
                }
                // Dropping the sender stops the checkpointer.
                drop(checkpointer);
            })
            .map_err(|error| StoreError::Unavailable(format!("cannot start the append thread: {error}")))?;
        Ok(Appender { jobs })
    }

    pub(super) async fn append(
        &self,
        batches: Vec<AppendBatch>,
    ) -> Result<Vec<Vec<AgentEvent>>, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job { batches, reply })
            .await
            .map_err(|_| StoreError::Unavailable("the append thread has stopped".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Unavailable("the append thread has stopped".into()))?
    }
}

/// How often the checkpointer moves committed WAL frames into the database file.
const CHECKPOINT_INTERVAL_MS: u64 = 200;

/// Checkpoints on a thread of their own. With SQLite's automatic checkpoint, every 1000th page
/// the commit that crossed the line also copied the WAL into the database and synced it — a
/// stall of milliseconds for every event in that commit (the stream latency's p99). The append
/// connection does not checkpoint; this thread does, in PASSIVE mode (it never blocks the
/// writer or readers), until the returned sender is dropped.
fn start_checkpointer(
    path: &std::path::Path,
    busy_timeout_ms: u64,
) -> Result<std::sync::mpsc::Sender<()>, StoreError> {
    let connection = Connection::open(path).map_err(sqlite_error)?;
    connection
        .busy_timeout(Duration::from_millis(busy_timeout_ms))
        .map_err(sqlite_error)?;
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("sqlite-checkpoint".into())
        .spawn(move || {
            let interval = Duration::from_millis(CHECKPOINT_INTERVAL_MS);
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                if let Err(error) = connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
                    tracing::warn!(%error, "WAL checkpoint failed; trying again later");
                }
            }
        })
        .map_err(|error| StoreError::Unavailable(format!("cannot start the checkpoint thread: {error}")))?;
    Ok(stop)
}

/// SQLite's error as the store's: busy, locked and I/O trouble may pass if tried again.
pub(super) fn sqlite_error(error: rusqlite::Error) -> StoreError {
    let transient = matches!(
        &error,
        rusqlite::Error::SqliteFailure(failure, _)
            if matches!(failure.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked | ErrorCode::SystemIoFailure)
    );
    if transient {
        StoreError::Unavailable(error.to_string())
    } else {
        StoreError::Failed(format!("SQLite: {error}"))
    }
}

/// One group in one transaction: per agent, the head bump (which also finds an unknown agent
/// before anything is inserted), then the events. All or nothing.
fn append(
    connection: &mut Connection,
    batches: Vec<AppendBatch>,
) -> Result<Vec<Vec<AgentEvent>>, StoreError> {
    let totals = totals(&batches);
    // IMMEDIATE: take the write lock now, so a busy database is found before any work.
    let transaction = connection
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(sqlite_error)?;
    let mut heads: Vec<(Uuid, i64)> = Vec::with_capacity(totals.len());
    {
        let mut bump = transaction
            .prepare_cached("UPDATE agents SET head_seq = head_seq + ?2 WHERE id = ?1 RETURNING head_seq")
            .map_err(sqlite_error)?;
        for (agent_id, total) in &totals {
            let head: Option<i64> = bump
                .query_row(params![agent_id.to_string(), *total as i64], |row| row.get(0))
                .optional()
                .map_err(sqlite_error)?;
            heads.extend(head.map(|head| (*agent_id, head)));
        }
    }
    let mut cursors = SeqCursors::new(&totals, |agent_id| {
        heads.iter().find(|(id, _)| *id == agent_id).map(|(_, head)| *head)
    })?;
    let mut committed = Vec::with_capacity(batches.len());
    {
        let mut insert = transaction
            .prepare_cached(
                "INSERT INTO agent_events (id, agent_id, seq, run_id, thread_id, block_id, \
                 message_id, kind, delta, delta_path, delta_action, content, raw, metadata, \
                 created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            )
            .map_err(sqlite_error)?;
        for batch in batches {
            let agent_id = batch.agent_id;
            let agent_text = agent_id.to_string();
            let mut events = Vec::with_capacity(batch.drafts.len());
            for draft in batch.drafts {
                let event = draft.into_event(agent_id, cursors.take(agent_id));
                insert
                    .execute(params![
                        event.id.to_string(),
                        agent_text,
                        event.seq as i64,
                        event.run_id.map(|id| id.to_string()),
                        event.thread_id.map(|id| id.to_string()),
                        event.block_id.map(|id| id.to_string()),
                        event.message_id.map(|id| id.to_string()),
                        event.kind.as_str(),
                        event.delta.as_ref().map(json_text),
                        event.delta_path,
                        event.delta_action.map(DeltaAction::as_str),
                        json_text(&event.content),
                        event.raw.as_ref().map(json_text),
                        json_text(&event.metadata),
                        event.created_at.to_rfc3339(),
                    ])
                    .map_err(sqlite_error)?;
                events.push(event);
            }
            committed.push(events);
        }
    }
    transaction.commit().map_err(sqlite_error)?;
    Ok(committed)
}
