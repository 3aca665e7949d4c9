//! The newest rows of every log in commit order (the `recent` table), and the fold that moves
//! them into `events` in bulk.
//!
//! **Why.** `events` was one B-tree keyed by `(agent_id, first_seq)` (since migration 15 its key
//! index is), so a commit of single appends to 25 logs wrote into 25 leaves: 25 pages of 4 KiB to
//! the WAL (and through `pwrite`, the WAL checksum and `fdatasync`) for 25 rows of ~150 bytes. The
//! append thread spent most of its time there. A commit now appends its rows to the end of `recent`
//! (a page or two). Once `recent` holds more than [`RECENT_ROWS_MAX`] rows, each commit also moves
//! the oldest logs' rows into `events` (at most [`FOLD_STEP_ROWS_MAX`], in the commit's own
//! transaction: no extra `fsync`, no stall), and when appends pause the append thread moves the
//! rest the same way, a step at a time. A log's leaf is then written once per ~`RECENT_ROWS_MAX /
//! logs` rows instead of once per commit, and runs of string appends that several commits wrote in
//! pieces become one run row again.
//!
//! **Invariants.**
//! - In every snapshot each event is in exactly one of the two tables: a fold step inserts into
//!   `events` and deletes from `recent` in one transaction, and nothing else moves rows.
//! - For each log, every seq in `recent` is above every seq in `events`: a step moves a log's
//!   oldest rows (a prefix of its rows in `recent`, which are in seq order), and appends only add
//!   seqs above the head.
//! - `n` only grows, across processes too: `recent_next` holds the next `n` any writer may use;
//!   a commit reads it before it inserts and raises it before it commits (under SQLite's write
//!   lock, so two processes on one file never give one `n` twice or go back).
//! - [`RecentIndex`] tells a reader where its log's rows in `recent` start: for each log this
//!   process wrote or listed, an `n` at or below its first row there (added inside the commit's
//!   transaction, before the commit; removed only after a step that moved the log's last row
//!   committed), and for every log, the `n` this process last committed through, above which
//!   only rows it has not listed can be (another process's). A reader that reads the index
//!   before its statement starts therefore finds every row its snapshot holds in `recent` (a row
//!   committed after the index was read may be missed: the read is then a shorter prefix of the
//!   log, never one with a hole).
//! - A second process writing the same file (SQLite is the store of one server; tests and
//!   mistakes do this) is safe: each lists the other's rows when it next commits or steps
//!   ([`Recent::catch_up`]), so either can move any row.

use crate::store::StoreResult;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use uuid::Uuid;

use super::convert::sqlite_error;
use crate::limits::{
    RECENT_BYTES_HARD_MAX, RECENT_BYTES_MAX, RECENT_ROWS_HARD_MAX, RECENT_ROWS_MAX,
};
use crate::store::chunk::OpenChunks;

mod fold;

/// Rows one step moves at most: the work a commit past the bound takes on beside its own rows
/// (a commit of single appends is ~25 rows, a step the ~64 rows of one of 64 busy logs), and the
/// longest an append waits behind a step when appends pause.
pub(super) const FOLD_STEP_ROWS_MAX: usize = 256;

/// Where each log's rows in `recent` start (see the module's invariants). Shared by the append
/// thread (which writes it) and the reads; its size is bounded by the rows in `recent`.
#[derive(Clone)]
pub(super) struct RecentIndex(Arc<IndexInner>);

struct IndexInner {
    firsts: Mutex<HashMap<Uuid, i64>>,
    /// The `n` this process committed through: rows at or above it that a log's entry does not
    /// cover are another process's, written since.
    committed: AtomicI64,
    /// Rows not yet moved, as of the last commit or step (for the metrics).
    live_rows: AtomicUsize,
}

impl Default for RecentIndex {
    fn default() -> RecentIndex {
        RecentIndex(Arc::new(IndexInner {
            firsts: Mutex::new(HashMap::new()),
            committed: AtomicI64::new(1),
            live_rows: AtomicUsize::new(0),
        }))
    }
}

impl RecentIndex {
    /// An `n` at or below the log's first row in `recent` (a rowid range that holds them all).
    pub(super) fn first_row(&self, agent_id: Uuid) -> i64 {
        let committed = self.0.committed.load(Ordering::Acquire);
        self.lock().get(&agent_id).map_or(committed, |first| (*first).min(committed))
    }

    /// Rows not yet moved into `events`, as of the last commit or step: the backlog that reaches
    /// [`RECENT_ROWS_HARD_MAX`] only while steps fail.
    pub(super) fn live_rows(&self) -> usize {
        self.0.live_rows.load(Ordering::Relaxed)
    }

    fn note(&self, agent_id: Uuid, n: i64) {
        self.lock().entry(agent_id).or_insert(n);
    }

    fn forget(&self, agent_id: Uuid) {
        self.lock().remove(&agent_id);
    }

    fn committed_through(&self, n: i64) {
        self.0.committed.store(n, Ordering::Release);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, i64>> {
        self.0.firsts.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The append thread's side of `recent`: its rows in `n` order, each log's rows not yet moved,
/// and each log's open run row in `events` (which the next step extends).
pub(super) struct Recent {
    index: RecentIndex,
    open_chunks: OpenChunks,
    /// `(n, log)` of each row still in the table, moved or not, oldest first.
    listed: VecDeque<(i64, Uuid)>,
    logs: HashMap<Uuid, Log>,
    /// Rows and bytes of text not yet moved.
    live_rows: usize,
    live_bytes: usize,
    /// The next row's `n` (above every `n` given or found).
    next_n: i64,
    /// `recent_next` as this process last read or committed it: every row below it is listed.
    committed: i64,
    /// Rows and bytes past which appends are refused ([`RECENT_ROWS_HARD_MAX`],
    /// [`RECENT_BYTES_HARD_MAX`]; tests use smaller ones).
    hard_rows_max: usize,
    hard_bytes_max: usize,
    /// After a failed step, no step before this time (a step that keeps failing is retried
    /// once per [`STEP_RETRY_AFTER_MS`], not with every commit).
    retry_at: Option<std::time::Instant>,
}

/// How long after a failed step the append thread waits before it tries another.
const STEP_RETRY_AFTER_MS: u64 = 1_000;

/// One log's rows in `recent`.
#[derive(Default)]
struct Log {
    /// `(n, bytes)` of its rows not yet moved, oldest first.
    live: VecDeque<(i64, usize)>,
    /// The newest `n` moved: its rows at or below are dead (in `events` too; reads skip them).
    moved_through: i64,
    /// Its rows still in the table, moved or not.
    listed: usize,
}

/// What a step moved, to apply once its transaction committed ([`Recent::moved`]).
pub(super) struct Step {
    /// Per log: how many of its oldest live rows moved, and the newest `n` among them.
    moves: Vec<(Uuid, usize, i64)>,
    /// Rows at the front of the table deleted (all dead): how many, through which `n`.
    deleted: usize,
    open_after: HashMap<Uuid, crate::store::chunk::Chunk>,
}

impl Step {
    /// Whether it moved or deleted any row (else there was nothing to do).
    pub(super) fn did_anything(&self) -> bool {
        !self.moves.is_empty() || self.deleted > 0
    }
}

#[cfg(test)]
impl Step {
    /// The rows the step moved (listed rows whose commit failed included).
    fn rows(&self) -> usize {
        self.moves.iter().map(|(_, count, _)| count).sum()
    }
}

impl Recent {
    pub(super) fn new(index: RecentIndex) -> Recent {
        Recent {
            index,
            open_chunks: OpenChunks::default(),
            listed: VecDeque::new(),
            logs: HashMap::new(),
            live_rows: 0,
            live_bytes: 0,
            next_n: 1,
            committed: 1,
            hard_rows_max: RECENT_ROWS_HARD_MAX,
            hard_bytes_max: RECENT_BYTES_HARD_MAX,
            retry_at: None,
        }
    }

    /// A `Recent` that is full at `rows` rows, for tests of what comes then.
    #[cfg(test)]
    pub(super) fn full_at(index: RecentIndex, rows: usize) -> Recent {
        Recent { hard_rows_max: rows, ..Recent::new(index) }
    }

    /// Lists the rows of `recent` that are not listed yet: at start, the rows a stop left there;
    /// later, the rows another process wrote since this one last looked (two servers on one file).
    /// Called before a commit or a step writes, with the write lock held: one look at
    /// `recent_next` when nobody else wrote.
    pub(super) fn catch_up(&mut self, connection: &Connection) -> StoreResult<()> {
        self.forget_uncommitted();
        // Cached: every commit asks (a statement prepared per commit was ~4 % of the append
        // thread's CPU under single appends).
        let next: i64 = connection
            .prepare_cached("SELECT n FROM recent_next")
            .and_then(|mut select| select.query_row([], |row| row.get(0)))
            .map_err(sqlite_error)?;
        if next != self.committed {
            let mut select = connection
                .prepare(
                    "SELECT n, agent_id, length(content) + coalesce(length(delta), 0) \
                     FROM recent WHERE n >= ?1 ORDER BY n",
                )
                .map_err(sqlite_error)?;
            let mut rows = select.query([self.committed]).map_err(sqlite_error)?;
            while let Some(row) = rows.next().map_err(sqlite_error)? {
                let (n, agent_id, bytes): (i64, String, i64) = (
                    row.get(0).map_err(sqlite_error)?,
                    row.get(1).map_err(sqlite_error)?,
                    row.get(2).map_err(sqlite_error)?,
                );
                let agent_id = super::convert::parse_uuid(&agent_id)?;
                self.index.note(agent_id, n);
                self.wrote(agent_id, n, bytes as usize);
            }
        }
        self.next_n = self.next_n.max(next);
        self.committed = next;
        self.index.committed_through(next);
        self.publish();
        Ok(())
    }

    /// Drops the listed rows of commits that failed: every row this process committed is below
    /// `committed`, so those at or above it never reached the file, and another process may give
    /// their `n`s to rows of its own (listed twice, one row would be moved twice).
    fn forget_uncommitted(&mut self) {
        while let Some((n, agent_id)) = self.listed.back().copied() {
            if n < self.committed {
                break;
            }
            self.listed.pop_back();
            let gone = self.logs.get_mut(&agent_id).is_some_and(|log| {
                if let Some((_, bytes)) = log.live.pop_back() {
                    self.live_rows -= 1;
                    self.live_bytes -= bytes;
                }
                log.listed -= 1;
                log.listed == 0
            });
            if gone {
                self.logs.remove(&agent_id);
                self.index.forget(agent_id);
            }
        }
    }

    /// Raises `recent_next` past the rows this transaction inserted; [`Recent::sealed`] once it
    /// committed.
    pub(super) fn seal(&self, connection: &Connection) -> StoreResult<()> {
        if self.next_n > self.committed {
            connection
                .prepare_cached("UPDATE recent_next SET n = ?1 WHERE n < ?1")
                .and_then(|mut update| update.execute([self.next_n]))
                .map_err(sqlite_error)?;
        }
        Ok(())
    }

    /// The sealed transaction committed.
    pub(super) fn sealed(&mut self) {
        self.committed = self.next_n;
        self.index.committed_through(self.next_n);
        self.publish();
    }

    /// Tells the index how many rows are live (for the metrics).
    fn publish(&self) {
        self.index.0.live_rows.store(self.live_rows, Ordering::Relaxed);
    }

    /// The `n` of the next row a commit inserts for `agent_id`, noted in the index (before the
    /// row's commit, as the reads need).
    pub(super) fn next_row(&mut self, agent_id: Uuid) -> i64 {
        let n = self.next_n;
        self.next_n += 1;
        self.index.note(agent_id, n);
        n
    }

    /// Row `n` of `agent_id`, `bytes` of text, was inserted (not yet committed: a row whose
    /// commit failed stays listed, and a step finds nothing for it). Rows are listed in `n`
    /// order: this process's own as it gives them, another's (all above what this one
    /// committed) when it catches up before its next commit.
    pub(super) fn wrote(&mut self, agent_id: Uuid, n: i64, bytes: usize) {
        self.listed.push_back((n, agent_id));
        let log = self.logs.entry(agent_id).or_default();
        log.live.push_back((n, bytes));
        log.listed += 1;
        self.live_rows += 1;
        self.live_bytes += bytes;
    }

    /// Whether the log has rows in `recent` not moved yet (listed ones, failed commits' too).
    pub(super) fn has_live(&self, agent_id: Uuid) -> bool {
        self.logs.get(&agent_id).is_some_and(|log| !log.live.is_empty())
    }

    /// Whether `recent` holds more than it should: a commit then takes a step.
    pub(super) fn over(&self) -> bool {
        self.live_rows > RECENT_ROWS_MAX || self.live_bytes > RECENT_BYTES_MAX
    }

    /// Whether `recent` is at its hard bound: appends are refused until a step moves rows.
    pub(super) fn full(&self) -> bool {
        self.live_rows >= self.hard_rows_max || self.live_bytes >= self.hard_bytes_max
    }

    /// Rows not yet moved.
    pub(super) fn live_rows(&self) -> usize {
        self.live_rows
    }

    /// Whether a step may be taken now (none for a while after one failed).
    pub(super) fn may_step(&self) -> bool {
        self.retry_at.is_none_or(|at| std::time::Instant::now() >= at)
    }

    /// A step failed (its transaction or savepoint rolled back).
    pub(super) fn step_failed(&mut self) {
        self.retry_at =
            Some(std::time::Instant::now() + std::time::Duration::from_millis(STEP_RETRY_AFTER_MS));
    }

    /// Whether anything is left to move or delete (when appends pause).
    pub(super) fn any(&self) -> bool {
        !self.listed.is_empty()
    }

    /// Moves the rows of the logs whose rows are oldest into `events` (all of each log's, up to
    /// `rows_max` in all: [`FOLD_STEP_ROWS_MAX`], or a commit's own rows when it added more), then deletes the run of dead rows at the front of the
    /// table, inside the caller's transaction; what to apply once it committed
    /// ([`Recent::moved`]). A log's rows go together, so its leaf in `events` is written once
    /// for all of them; the moved rows are left in place (dead: reads skip them) until the front
    /// of the table is all dead, so a delete frees whole pages instead of a row in each.
    pub(super) fn step(&mut self, connection: &Connection, rows_max: usize) -> StoreResult<Step> {
        let mut moves: Vec<(Uuid, usize, i64)> = Vec::new();
        let mut ns: Vec<i64> = Vec::new();
        for (n, agent_id) in &self.listed {
            if ns.len() >= rows_max {
                break;
            }
            let Some(log) = self.logs.get(agent_id) else {
                continue;
            };
            if *n <= log.moved_through || moves.iter().any(|(id, _, _)| id == agent_id) {
                continue;
            }
            let count = log.live.len().min(rows_max - ns.len());
            let taken = log.live.iter().take(count).map(|(n, _)| *n);
            let start = ns.len();
            ns.extend(taken);
            if let Some(last) = ns.get(start..).and_then(<[i64]>::last) {
                moves.push((*agent_id, count, *last));
            }
        }
        let open_after = fold::move_rows(connection, &ns, &mut self.open_chunks)?;
        // The front rows that are dead once these moves commit.
        let moved_through = |agent_id: &Uuid| {
            let moved = moves.iter().find(|(id, _, _)| id == agent_id);
            moved
                .map(|(_, _, last)| *last)
                .or_else(|| self.logs.get(agent_id).map(|log| log.moved_through))
                .unwrap_or(i64::MAX)
        };
        let deleted =
            self.listed.iter().take_while(|(n, agent_id)| *n <= moved_through(agent_id)).count();
        if let Some((through, _)) = deleted.checked_sub(1).and_then(|at| self.listed.get(at)) {
            fold::delete_through(connection, *through)?;
        }
        Ok(Step { moves, deleted, open_after })
    }

    /// A step's transaction committed: its rows are in `events` now, the dead front deleted.
    pub(super) fn moved(&mut self, step: Step) {
        self.retry_at = None;
        for (agent_id, count, last) in step.moves {
            let Some(log) = self.logs.get_mut(&agent_id) else {
                continue;
            };
            for (_, bytes) in log.live.drain(..count.min(log.live.len())) {
                self.live_rows -= 1;
                self.live_bytes -= bytes;
            }
            log.moved_through = last;
            if log.live.is_empty() {
                self.index.forget(agent_id);
            }
        }
        for (_, agent_id) in self.listed.drain(..step.deleted.min(self.listed.len())) {
            let gone = self.logs.get_mut(&agent_id).is_some_and(|log| {
                log.listed -= 1;
                log.listed == 0 && log.live.is_empty()
            });
            if gone {
                self.logs.remove(&agent_id);
            }
        }
        self.open_chunks.keep(step.open_after);
        self.publish();
    }
}

#[cfg(test)]
mod tests;
