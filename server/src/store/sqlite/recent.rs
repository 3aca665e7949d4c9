//! The newest rows of every log in commit order (the `recent` table), and the fold that moves
//! them into `events` in bulk.
//!
//! **Why.** `events` is one B-tree keyed by `(agent_id, first_seq)`, so a commit of single
//! appends to 25 logs wrote into 25 leaves: 25 pages of 4 KiB to the WAL (and through
//! `pwrite`, the WAL checksum and `fdatasync`) for 25 rows of ~150 bytes. The append thread spent
//! most of its time there. A commit now appends its rows to the end of `recent` (a page or two),
//! and every [`RECENT_ROWS_MAX`] rows (or when the writer is idle) one transaction moves them all
//! into `events`: each log's leaf is written once per fold instead of once per commit, and runs
//! of string appends that several commits wrote in pieces become one run row again.
//!
//! **Invariants.**
//! - In every snapshot each event is in exactly one of the two tables: a fold inserts into
//!   `events` and deletes from `recent` in one transaction, and nothing else moves rows.
//! - For each log, every seq in `recent` is above every seq in `events`: a fold moves all of
//!   `recent`, and appends only add seqs above the head.
//! - [`RecentIndex`] holds, for each log, the smallest `n` it may have in `recent`. An entry is
//!   added inside the commit's transaction, before the commit, and the index is cleared only
//!   after a fold committed; `n` is never reused (AUTOINCREMENT). A reader that reads the index
//!   before its statement starts therefore finds every row its snapshot holds in `recent` (a row
//!   committed after the index was read may be missed: the read is then a shorter prefix of the
//!   log, never one with a hole).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use app::AgentEvent;
use rusqlite::Connection;
use uuid::Uuid;

use super::convert::sqlite_error;
use super::reader::expand;
use super::sql::EVENT_COLUMNS;
use super::write::{events_upsert_sql, write_chunk, write_event};
use crate::store::chunk::{Chunk, GroupRows, OpenChunks, Pick, Written};
use crate::store::StoreError;

/// Rows in `recent` at which the append thread folds it after a commit. A read of a busy log
/// scans its part of `recent`; a fold writes each log's leaf once for this many rows.
pub(super) const RECENT_ROWS_MAX: usize = 4_096;

/// Bytes of text in `recent` at which the append thread folds it (a few large messages must not
/// make every read of their log scan megabytes).
pub(super) const RECENT_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Rows in `recent` at which an idle writer (no group waiting) folds it. Below it, a quiet log's
/// newest rows stay in `recent`, a scan of at most this many rows per read.
pub(super) const RECENT_ROWS_IDLE_FOLD_MIN: usize = 256;

/// For each log with rows in `recent`, the smallest `n` it may have there (see the module's
/// invariants). Shared by the append thread (which writes it) and the reads; its size is bounded
/// by the rows in `recent` between two folds.
#[derive(Clone, Default)]
pub(super) struct RecentIndex(Arc<Mutex<HashMap<Uuid, i64>>>);

impl RecentIndex {
    /// The smallest `n` the log may have in `recent`; `i64::MAX` (an empty rowid range) when it
    /// has none.
    pub(super) fn first_row(&self, agent_id: Uuid) -> i64 {
        self.lock().get(&agent_id).copied().unwrap_or(i64::MAX)
    }

    fn note(&self, agent_id: Uuid, n: i64) {
        self.lock().entry(agent_id).or_insert(n);
    }

    fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, i64>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The append thread's side of `recent`: what it wrote since the last fold, and each log's open
/// run row in `events` (extended by the next fold).
pub(super) struct Recent {
    index: RecentIndex,
    open_chunks: OpenChunks,
    /// The next row's `n`: above every `n` this process gave or found.
    next_n: i64,
    rows: usize,
    bytes: usize,
}

impl Recent {
    pub(super) fn new(index: RecentIndex) -> Recent {
        Recent {
            index,
            open_chunks: OpenChunks::default(),
            next_n: 1,
            rows: 0,
            bytes: 0,
        }
    }

    /// The `n` of the next row a commit inserts, noted in the index for `agent_id` (before the
    /// row's commit, as the reads need).
    pub(super) fn next_row(&mut self, agent_id: Uuid) -> i64 {
        let n = self.next_n;
        self.next_n += 1;
        self.index.note(agent_id, n);
        n
    }

    /// A row of `bytes` of text was inserted (not yet committed).
    pub(super) fn wrote(&mut self, bytes: usize) {
        self.rows += 1;
        self.bytes += bytes;
    }

    /// Whether to fold now; `idle` when no group came for a while.
    pub(super) fn due(&self, idle: bool) -> bool {
        self.rows >= RECENT_ROWS_MAX
            || self.bytes >= RECENT_BYTES_MAX
            || (idle && self.rows >= RECENT_ROWS_IDLE_FOLD_MIN)
    }

    /// Moves every row of `recent` into `events` in one transaction; the rows moved. Rows that
    /// no later row can continue (single events, a stream append's messages) are copied by one
    /// statement. Run rows (string appends, which several commits may have written in pieces)
    /// are expanded into their events and written as the commit path would have written them had
    /// the commits been one, so the pieces of one run share a row again (a row continues only
    /// the run whose last event is its first's predecessor: seq and id).
    pub(super) fn fold(&mut self, connection: &mut Connection) -> Result<usize, StoreError> {
        let transaction = connection
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(sqlite_error)?;
        let last_n: i64 = transaction
            .query_row("SELECT COALESCE(MAX(n), 0) FROM recent", [], |row| {
                row.get(0)
            })
            .map_err(sqlite_error)?;
        let copied = transaction
            .execute(
                &format!(
                    "INSERT INTO events ({EVENT_COLUMNS}) SELECT {EVENT_COLUMNS} FROM recent \
                     WHERE n <= ?1 AND NOT ({RUN_ROW}) ORDER BY agent_id, first_seq"
                ),
                [last_n],
            )
            .map_err(sqlite_error)?;
        let (joined, open_after) = join_runs(&transaction, last_n, &mut self.open_chunks)?;
        transaction
            .execute("DELETE FROM recent WHERE n <= ?1", [last_n])
            .map_err(sqlite_error)?;
        transaction.commit().map_err(sqlite_error)?;
        self.open_chunks.keep(open_after);
        self.index.clear();
        self.next_n = self.next_n.max(last_n + 1);
        self.rows = 0;
        self.bytes = 0;
        Ok(copied + joined)
    }
}

/// A run row of string appends (a row of stream messages has no `delta`).
const RUN_ROW: &str = "pieces IS NOT NULL AND delta IS NOT NULL";

/// The run rows of `recent` up to `last_n`, per log in seq order, written into `events` joined
/// with each other and with the log's open run row ([`OpenChunks`]); the rows read, and the
/// run rows left open.
fn join_runs(
    transaction: &rusqlite::Transaction<'_>,
    last_n: i64,
    open_chunks: &mut OpenChunks,
) -> Result<(usize, HashMap<Uuid, Chunk>), StoreError> {
    let mut select = transaction
        .prepare_cached(&format!(
            "SELECT {EVENT_COLUMNS} FROM recent WHERE n <= ?1 AND {RUN_ROW} \
             ORDER BY agent_id, first_seq"
        ))
        .map_err(sqlite_error)?;
    let mut insert = transaction
        .prepare_cached(&events_upsert_sql())
        .map_err(sqlite_error)?;
    let mut write = |row: Written<'_>| match row {
        Written::Event(event) => write_event(&mut insert, event, None).map(drop),
        Written::Chunk(chunk) => write_chunk(&mut insert, chunk, None).map(drop),
    };
    let mut open_after = HashMap::new();
    let mut current: Option<(Uuid, GroupRows)> = None;
    let mut events: Vec<AgentEvent> = Vec::new();
    let mut read = 0;
    let mut rows = select.query([last_n]).map_err(sqlite_error)?;
    while let Some(row) = rows.next().map_err(sqlite_error)? {
        read += 1;
        events.clear();
        expand(row, Pick::All, |event| event.to_event(), &mut events)?;
        for event in &events {
            let agent_id = event.agent_id;
            if !matches!(&current, Some((open, _)) if *open == agent_id) {
                if let Some((_, ended)) = current.take() {
                    open_after.extend(ended.finish(&mut write)?);
                }
                current = Some((agent_id, open_chunks.take([agent_id])));
            }
            if let Some((_, group)) = current.as_mut() {
                group.add(event, &mut write)?;
            }
        }
    }
    if let Some((_, ended)) = current.take() {
        open_after.extend(ended.finish(&mut write)?);
    }
    Ok((read, open_after))
}

#[cfg(test)]
mod tests;
