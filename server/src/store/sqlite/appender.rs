//! Appends on a thread of their own, with a connection of their own.
//!
//! Profiling the writer showed it bound by round trips, not by fsync: through sqlx every
//! statement of a group commit (`BEGIN`, the head bump, the inserts, `COMMIT`) is a hop to
//! sqlx's SQLite worker thread and back. Here a whole group is one hop: the writer hands the
//! group to this thread, which runs the transaction with cached prepared statements and
//! answers once. Reads stay on sqlx's pool; WAL lets them run beside this connection.

use super::convert::sqlite_error;
use crate::store::StoreResult;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::Duration;

use app::{AgentEvent, EventKind};
use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};
use uuid::Uuid;

use super::known::{Commit, Known};
use super::recent::{Recent, RecentIndex, FOLD_STEP_ROWS_MAX};
use super::turns::WriteTurns;
use super::write::{blob, events_upsert_sql, recent_insert_sql, write_chunk, write_event};
use crate::store::chunk::{self, Form, OpenChunks, Written};
use crate::store::pipeline::{AppendPipeline, Chain, Link, Piped, PipedReceipt};
use crate::store::rows::SeqCursors;
use crate::store::{AppendBatch, ProducerPosition, ProducerStamp, StoreError};
use staged::{Staged, Unwritten};

/// Groups waiting for the append thread from callers that append directly (the writer's own
/// groups, at most two sent at a time, do not count).
const APPEND_QUEUE_GROUPS_MAX: usize = 16;

/// The append connection's page cache. SQLite's default (2 MiB) made the writer re-read the
/// indexes' pages from the OS on every commit (`pread` was the top kernel symbol of its thread;
/// that was with random ids, whose index took a random page per event). Not larger: when a
/// commit splits a leaf, SQLite renumbers the new pages through a scratch page number (the
/// page of the 1 GiB lock byte), and at the commit's end it then walks the cache's whole hash
/// table (a bucket per cached page) to drop pages past the database's end. With 64 MiB that
/// walk over 16 384 buckets was 6 % of the server's CPU under 64-message appends; at 16 MiB it
/// is 1.7 %, and the thread's reads from the OS stay at 0.2 % (`perf`, the same load).
const APPEND_CACHE_KIB: u32 = 16 * 1024;

/// Prepared statements the append connection keeps (see [`Appender::start`]).
const APPEND_STATEMENTS_CACHED_MAX: usize = 32;

struct Job {
    batches: Vec<AppendBatch>,
    /// Its place in the writer's order (see [`crate::store::pipeline`]); `None` for a direct
    /// append.
    link: Option<Link>,
    reply: oneshot::Sender<Piped>,
    /// One of [`APPEND_QUEUE_GROUPS_MAX`], given back when the thread takes the job (none for a
    /// linked job: the writer keeps at most two of those sent).
    _queued: Option<OwnedSemaphorePermit>,
}

/// The handle to the append thread; the thread ends (and closes its connection) when this is
/// dropped. A std channel (the thread waits on it with a timeout, to fold when appends pause),
/// bounded by a semaphore the async side waits on.
pub(super) struct Appender {
    jobs: std::sync::mpsc::Sender<Job>,
    queue_room: Arc<Semaphore>,
}

/// Bytes of text from which a row of stream messages (a Durable Streams append of many) goes
/// straight into `events` when its log has nothing live in `recent`: such a row fills much of a
/// leaf by itself, and through `recent` it was written twice (64-message appends: 434 → 370
/// thousand messages/s).
const DIRECT_ROW_BYTES_MIN: usize = 1024;

/// How long the append thread waits for the next group before it moves what `recent` holds into
/// `events`, a step at a time ([`Recent::step`]): under load groups come every millisecond or
/// two, and moving rows then would write each log's leaf for a handful of rows.
pub(super) const FOLD_WHEN_IDLE_MS: u64 = 20;

/// What the append thread starts with.
pub(super) struct Setup {
    /// The database file (it exists and is migrated).
    pub(super) path: PathBuf,
    pub(super) busy_timeout_ms: u64,
    /// How long appends pause before it folds ([`FOLD_WHEN_IDLE_MS`] unless a test holds folds).
    pub(super) fold_when_idle_ms: u64,
    pub(super) wal: WalRestart,
    pub(super) index: RecentIndex,
    pub(super) turns: WriteTurns,
    /// Where each commit notes its logs' new heads and producers' positions.
    pub(super) known: Known,
}

impl Appender {
    /// Opens the connection (the file exists and is migrated) and starts the thread.
    pub(super) fn start(setup: Setup) -> StoreResult<Appender> {
        let Setup { path, busy_timeout_ms, fold_when_idle_ms, wal, index, turns, known } = setup;
        let connection = Connection::open(&path).map_err(sqlite_error)?;
        connection.busy_timeout(Duration::from_millis(busy_timeout_ms)).map_err(sqlite_error)?;
        // `temp_store = MEMORY`: a fold's `INSERT … SELECT` keeps a statement journal (to undo
        // the statement alone), which went to a temporary file, a `write` per page.
        connection
            .execute_batch(&format!(
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; \
                 PRAGMA cache_size = -{APPEND_CACHE_KIB}; PRAGMA wal_autocheckpoint = 0; \
                 PRAGMA journal_size_limit = {WAL_FILE_BYTES_KEPT_MAX}; \
                 PRAGMA temp_store = MEMORY;"
            ))
            .map_err(sqlite_error)?;
        // Room for every statement the thread runs (a commit's ten, `recent`'s and a fold step's
        // six): one pushed out is parsed again at its next use.
        connection.set_prepared_statement_cache_capacity(APPEND_STATEMENTS_CACHED_MAX);
        let reset_wanted = Arc::new(AtomicBool::new(false));
        let checkpointer =
            start_checkpointer(&path, busy_timeout_ms, wal.reset_pages, reset_wanted.clone())?;
        // The rows a stop left in `recent`, listed before the store answers its first read.
        let mut recent = Recent::new(index);
        recent.catch_up(&connection)?;
        let busy_timeout = Duration::from_millis(busy_timeout_ms);
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("sqlite-append".into())
            .spawn(move || {
                let mut connection = connection;
                let mut restart_tries = 0;
                let idle = Duration::from_millis(fold_when_idle_ms);
                let mut stepping = false;
                // Set when an idle step could not put `synchronous` back to FULL: no group
                // commits until it is back.
                let mut unsynced = false;
                let mut chain = Chain::default();
                loop {
                    let next = if recent.any() {
                        // Between steps, only a glance: a group that came goes first.
                        queue.recv_timeout(if stepping { Duration::ZERO } else { idle })
                    } else {
                        queue.recv().map_err(|_| RecvTimeoutError::Disconnected)
                    };
                    let job = match next {
                        Ok(job) => job,
                        Err(RecvTimeoutError::Timeout) => {
                            turns.let_pool_writers_go();
                            stepping = recent.may_step()
                                && idle_fold_step(&mut recent, &mut connection, &mut unsynced);
                            continue;
                        }
                        Err(RecvTimeoutError::Disconnected) => break,
                    };
                    stepping = false;
                    if reset_wanted.load(Ordering::Relaxed) {
                        restart_tries += 1;
                        if wal.restart_when_reads_pause(&connection, busy_timeout, restart_tries) {
                            reset_wanted.store(false, Ordering::Relaxed);
                            restart_tries = 0;
                        }
                    }
                    // A group whose writer has gone (the process is stopping, or its runtime
                    // is) is not committed: nobody would learn that it was, and a run whose
                    // events committed after recovery looked at the log would stay open.
                    let abandoned = || job.reply.is_closed();
                    if abandoned() || !chain.may_try(job.link) {
                        chain.took(job.link, false);
                        let _ = job.reply.send(Piped::NotTried(job.batches));
                        continue;
                    }
                    if unsynced {
                        if let Err(error) = set_synchronous(&connection, "FULL") {
                            chain.took(job.link, false);
                            let _ = job.reply.send(Piped::Failed(error, job.batches));
                            continue;
                        }
                        unsynced = false;
                    }
                    turns.let_pool_writers_go();
                    let outcome =
                        append(&mut connection, job.batches, abandoned, &mut recent, &known);
                    chain.took(job.link, outcome.is_ok());
                    match outcome {
                        Ok(committed) => {
                            let _ = job.reply.send(Piped::Committed(committed));
                        }
                        Err(Unwritten { error, batches, panic }) => {
                            let _ = job.reply.send(Piped::Failed(error, batches));
                            if let Some(panic) = panic {
                                // The connection and `recent` may be anywhere: the thread ends
                                // (later appends are refused) once the writer has its group.
                                std::panic::resume_unwind(panic);
                            }
                        }
                    }
                }
                // Dropping the sender stops the checkpointer.
                drop(checkpointer);
            })
            .map_err(|error| {
                StoreError::Unavailable(format!("cannot start the append thread: {error}"))
            })?;
        Ok(Appender { jobs, queue_room: Arc::new(Semaphore::new(APPEND_QUEUE_GROUPS_MAX)) })
    }

    pub(super) async fn append(
        &self,
        batches: Vec<AppendBatch>,
    ) -> StoreResult<Vec<Vec<AgentEvent>>> {
        let queued = self.queue_room.clone().acquire_owned().await.map_err(|_| stopped())?;
        let (reply, answer) = oneshot::channel();
        let job = Job { batches, link: None, reply, _queued: Some(queued) };
        self.jobs.send(job).map_err(|_| stopped())?;
        match answer.await.map_err(|_| stopped())? {
            Piped::Committed(committed) => Ok(committed),
            Piped::Failed(error, _) => Err(error),
            // Only a linked job, or one nobody waits for, is not tried.
            Piped::NotTried(_) => Err(stopped()),
        }
    }
}

fn stopped() -> StoreError {
    StoreError::Unavailable("the append thread has stopped".into())
}

impl AppendPipeline for Appender {
    fn send(&self, batches: Vec<AppendBatch>, link: Link) -> PipedReceipt {
        let (reply, answer) = oneshot::channel();
        // A send that fails (the thread has stopped) drops the reply: the receipt then says so.
        let _ = self.jobs.send(Job { batches, link: Some(link), reply, _queued: None });
        answer
    }
}

/// One group in one transaction ([`write_group`]); the events of each batch when it committed,
/// else the batches as they came ([`staged`]), also when the commit panicked.
fn append(
    connection: &mut Connection,
    batches: Vec<AppendBatch>,
    abandoned: impl Fn() -> bool,
    recent: &mut Recent,
    known: &Known,
) -> Result<Vec<Vec<AgentEvent>>, Unwritten> {
    staged::write_staged(batches, |totals, staged| {
        write_group(connection, totals, staged, abandoned, recent, known)
    })
}

/// One group in one transaction (refused while `recent` is full): per agent, the head bump
/// (which also finds an unknown agent before anything is inserted), then the events (numbered
/// here), as rows at the end of `recent` (a string append continues a run row of this group
/// only: moving them joins the groups' pieces). All or nothing; nothing when `abandoned` says,
/// just before the commit, that nobody waits for the answer any more.
fn write_group(
    connection: &mut Connection,
    totals: &[(Uuid, u64)],
    staged: &mut [Staged],
    abandoned: impl Fn() -> bool,
    recent: &mut Recent,
    known: &Known,
) -> StoreResult<()> {
    if recent.full() {
        // Steps have kept failing (else commits would have kept `recent` near its bound): one
        // more try, whenever it was last tried, so appends come back as soon as steps do.
        fold_step(recent, connection);
        if recent.full() {
            return Err(StoreError::Unavailable(format!(
                "the newest {} rows cannot be moved into the log (see the warnings before); \
                 appends are refused until they can",
                recent.live_rows()
            )));
        }
    }
    // IMMEDIATE: take the write lock now, so a busy database is found before any work.
    let mut transaction = connection
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(sqlite_error)?;
    recent.catch_up(&transaction)?;
    // Taken with the write lock held: no delete can end between this and the commit.
    let changes = known.changes();
    let mut noted = Commit::default();
    let mut heads: Vec<(Uuid, i64)> = Vec::with_capacity(totals.len());
    {
        // Read, then written by rowid: `UPDATE … RETURNING` kept its answer in a temporary
        // B-tree, opened and dropped per statement (~1 µs of this thread per single append).
        let mut find = transaction
            .prepare_cached("SELECT rowid, head_seq FROM agents WHERE id = ?1")
            .map_err(sqlite_error)?;
        let mut bump = transaction
            .prepare_cached("UPDATE agents SET head_seq = ?2 WHERE rowid = ?1")
            .map_err(sqlite_error)?;
        for (agent_id, total) in totals {
            let found: Option<(i64, i64)> = find
                .query_row(params![agent_id.to_string()], |row| Ok((row.get(0)?, row.get(1)?)))
                .optional()
                .map_err(sqlite_error)?;
            if let Some((rowid, head)) = found {
                let head = head + *total as i64;
                bump.execute(params![rowid, head]).map_err(sqlite_error)?;
                heads.push((*agent_id, head));
            }
        }
    }
    let mut cursors = SeqCursors::new(totals, |agent_id| {
        heads.iter().find(|(id, _)| *id == agent_id).map(|(_, head)| *head)
    })?;
    let mut rows = OpenChunks::default().take([]);
    // Rows this group inserts into `recent`.
    let mut added_rows = 0usize;
    {
        let mut insert = transaction.prepare_cached(&recent_insert_sql()).map_err(sqlite_error)?;
        let mut insert_direct =
            transaction.prepare_cached(&events_upsert_sql()).map_err(sqlite_error)?;
        let mut write = |row: Written<'_>| {
            let agent_id = match row {
                Written::Event(event) => event.agent_id,
                Written::Chunk(chunk) => chunk.head.agent_id,
            };
            // A large row of messages pays for its own leaf: straight into `events` when its log
            // has nothing live in `recent` (whose seqs must stay above those in `events`).
            if let Written::Chunk(chunk) = row {
                let large = chunk.form == Form::Messages && chunk.bytes() >= DIRECT_ROW_BYTES_MIN;
                if large && !recent.has_live(agent_id) {
                    write_chunk(&mut insert_direct, chunk, None)?;
                    return Ok(());
                }
            }
            added_rows += 1;
            let n = recent.next_row(agent_id);
            let bytes = match row {
                Written::Event(event) => write_event(&mut insert, event, Some(n))?,
                Written::Chunk(chunk) => write_chunk(&mut insert, chunk, Some(n))?,
            };
            recent.wrote(agent_id, n, bytes);
            Ok(())
        };
        // The open-runs table follows the log in the same transaction (see `unfinished_runs`).
        let mut open = transaction
            .prepare_cached(
                "INSERT INTO open_runs (run_id, agent_id, started_seq) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (run_id) DO NOTHING",
            )
            .map_err(sqlite_error)?;
        let mut close = transaction
            .prepare_cached("DELETE FROM open_runs WHERE run_id = ?1")
            .map_err(sqlite_error)?;
        // So does the open-approvals table (see `open_approvals`).
        let mut ask = transaction
            .prepare_cached(
                "INSERT INTO open_approvals (agent_id, tool_call_id, requested_at) \
                 VALUES (?1, ?2, ?3) ON CONFLICT (agent_id, tool_call_id) DO NOTHING",
            )
            .map_err(sqlite_error)?;
        let mut answer = transaction
            .prepare_cached("DELETE FROM open_approvals WHERE agent_id = ?1 AND tool_call_id = ?2")
            .map_err(sqlite_error)?;
        // And an external producer's position goes with its batch.
        let mut position = transaction
            .prepare_cached(
                "INSERT INTO producers (agent_id, producer_id, epoch, seq, run_id, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (agent_id, producer_id) DO UPDATE \
                 SET epoch = excluded.epoch, seq = excluded.seq, run_id = excluded.run_id, \
                 updated_at = excluded.updated_at",
            )
            .map_err(sqlite_error)?;
        let mut fenced = transaction
            .prepare_cached(
                "SELECT epoch, seq FROM producers WHERE agent_id = ?1 AND producer_id = ?2",
            )
            .map_err(sqlite_error)?;
        let mut forget = transaction
            .prepare_cached(
                "DELETE FROM producers WHERE agent_id = ?1 AND producer_id NOT IN \
                 (SELECT producer_id FROM producers WHERE agent_id = ?1 \
                 ORDER BY updated_at DESC LIMIT ?2)",
            )
            .map_err(sqlite_error)?;
        for one in staged.iter_mut() {
            let agent_id = one.agent_id;
            let agent_text = agent_id.to_string();
            for event in one.events.iter_mut() {
                event.seq = cursors.take(agent_id);
                let event = &*event;
                rows.add(event, &mut write)?;
                match (event.kind, event.run_id) {
                    (EventKind::RunStarted, Some(run_id)) => {
                        open.execute(params![run_id.to_string(), agent_text, event.seq as i64])
                            .map_err(sqlite_error)?;
                    }
                    (kind, Some(run_id)) if kind.is_run_end() => {
                        close.execute(params![run_id.to_string()]).map_err(sqlite_error)?;
                    }
                    _ => {}
                }
                match (event.kind, crate::store::rows::approval_call_id(event)) {
                    (EventKind::ApprovalRequested, Some(call_id)) => {
                        let requested_at = chunk::time_nanos(event.created_at)?;
                        ask.execute(params![agent_text, call_id, requested_at])
                            .map_err(sqlite_error)?;
                    }
                    (EventKind::ApprovalResponse | EventKind::ToolResult, Some(call_id)) => {
                        answer.execute(params![agent_text, call_id]).map_err(sqlite_error)?;
                    }
                    _ => {}
                }
            }
            if let Some(stamp) = &one.producer {
                // The position the batch was fenced against must still be the stored one.
                let stored: Option<(i64, i64)> = fenced
                    .query_row(params![agent_text, stamp.producer_id], |row| {
                        Ok((row.get(0)?, row.get(1)?))
                    })
                    .optional()
                    .map_err(sqlite_error)?;
                let stored = stored.map(|(epoch, seq)| (epoch as u64, seq as u64));
                if stored != stamp.fenced_at {
                    return Err(StoreError::ProducerMoved {
                        agent_id,
                        producer_id: stamp.producer_id.clone(),
                    });
                }
                let now = chunk::time_nanos(chrono::Utc::now())?;
                position
                    .execute(params![
                        agent_text,
                        stamp.producer_id,
                        stamp.epoch as i64,
                        stamp.seq as i64,
                        blob(stamp.run_id),
                        now
                    ])
                    .map_err(sqlite_error)?;
                noted.positions.push((
                    agent_id,
                    ProducerPosition {
                        stamp: ProducerStamp { fenced_at: None, ..stamp.clone() },
                        updated_at: chunk::time_from_nanos(now),
                    },
                ));
                if stamp.seq == 0 {
                    let forgotten = forget
                        .execute(params![
                            agent_text,
                            i64::from(crate::store::PRODUCERS_PER_AGENT_MAX)
                        ])
                        .map_err(sqlite_error)?;
                    if forgotten > 0 {
                        noted.forgot.push(agent_id);
                    }
                }
            }
        }
        // The group's run rows are written whole; the next fold continues them.
        rows.finish(&mut write)?;
    }
    // Past its bound, `recent`'s oldest rows move into `events` in this same commit, at least as
    // many as the group added (a group of thousands of rows would otherwise outgrow the steps
    // and fill `recent` to its hard bound); a step that fails is undone alone (a savepoint) and
    // the group commits without it.
    let mut step = None;
    if recent.over() && recent.may_step() {
        let mut savepoint = transaction.savepoint().map_err(sqlite_error)?;
        match recent.step(&savepoint, FOLD_STEP_ROWS_MAX.max(added_rows)) {
            Ok(moved) => {
                savepoint.commit().map_err(sqlite_error)?;
                step = Some(moved);
            }
            Err(error) => {
                savepoint.rollback().map_err(sqlite_error)?;
                tracing::warn!(%error, "moving the newest rows into the log failed; trying later");
                recent.step_failed();
            }
        }
    }
    recent.seal(&transaction)?;
    if abandoned() {
        // Dropping the transaction rolls it back.
        return Err(StoreError::Unavailable("the writer went away before the commit".into()));
    }
    if let Err(error) = transaction.commit() {
        // Whether it committed is not known: the next ask of these heads reads the database.
        known.forget(totals.iter().map(|(agent_id, _)| *agent_id));
        return Err(sqlite_error(error));
    }
    // Before anyone learns of the commit, so a read after the answer sees what it left.
    noted.heads = heads.iter().map(|&(log, head)| (log, head as u64)).collect();
    known.committed(noted, changes);
    recent.sealed();
    if let Some(step) = step {
        recent.moved(step);
    }
    Ok(())
}

#[cfg(test)]
mod tests;

mod staged;
mod steps;
mod wal;
use steps::{fold_step, idle_fold_step, set_synchronous};
#[cfg(test)]
use wal::{passive_checkpoint, restart_wal};
use wal::{start_checkpointer, WAL_FILE_BYTES_KEPT_MAX};
pub(super) use wal::{WalRestart, WAL_RESET_PAGES};
