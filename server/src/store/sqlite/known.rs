//! What commits left, in memory: each log's head and its producers' positions. Every read asks
//! `head_seq` (a stream's tail, where a catch-up ends, whether a long-poll has news) and every
//! append of an idempotent producer asks `producer_position`; through sqlx's pool each ask was a
//! hop to a connection's thread and back. On a catch-up of a small stream those threads'
//! wake-ups were half the server's CPU (`perf`: `finish_task_switch` 30 %, the sqlx worker 32 %
//! of the samples); a producer's append cost 140–155 µs of CPU against 84 without its headers.
//!
//! On SQLite one thread of this process writes both: the append thread, which notes what each
//! commit left right after it and before anyone learns of the commit, so the maps never lag what
//! was acknowledged. What the maps do not hold is read from the database and noted. Deletes of
//! logs (which cascade to a root's branches, ids unknown here) clear both maps, and a commit
//! that forgets a log's oldest producers drops that log's positions; a fill or a note begun
//! before either ended is not kept (`changes` counts them), so nothing gone is noted again.
//! Heads only grow, and a producer's position only moves on (a later epoch, or the next seq of
//! its epoch): a fill that read the database before a commit noted a newer one keeps the newer.
//! (SQLite is the store of one server: another process writing the same file is not seen here.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use uuid::Uuid;

use crate::store::ProducerPosition;

/// Logs whose heads are kept (~40 bytes each), and logs whose producers' positions are kept;
/// past it a log is forgotten for each new one (the next ask of it reads the database).
pub(super) const KNOWN_LOGS_MAX: usize = 65_536;

/// The shared maps (the store's readers and the append thread).
#[derive(Clone, Default)]
pub(super) struct Known {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    heads: HashMap<Uuid, u64>,
    /// Per log, its producers' positions (at most `PRODUCERS_PER_AGENT_MAX` are stored).
    producers: HashMap<Uuid, HashMap<String, ProducerPosition>>,
    /// Deletes and forgets so far: a fill or a note taken before one ended is dropped.
    changes: u64,
}

/// Makes room for one more key in `map` when it is at the bound (any one goes).
fn room_for<V>(map: &mut HashMap<Uuid, V>, key: &Uuid) {
    if map.len() >= KNOWN_LOGS_MAX && !map.contains_key(key) {
        if let Some(any) = map.keys().next().copied() {
            map.remove(&any);
        }
    }
}

/// Whether `newer` is at or past `kept` (the same producer).
fn moved_on(kept: &ProducerPosition, newer: &ProducerPosition) -> bool {
    (newer.stamp.epoch, newer.stamp.seq) > (kept.stamp.epoch, kept.stamp.seq)
}

impl Inner {
    fn raise(&mut self, log: Uuid, head: u64) {
        room_for(&mut self.heads, &log);
        let kept = self.heads.entry(log).or_insert(head);
        *kept = (*kept).max(head);
    }

    fn advance(&mut self, log: Uuid, position: ProducerPosition) {
        room_for(&mut self.producers, &log);
        let producers = self.producers.entry(log).or_default();
        match producers.get_mut(&position.stamp.producer_id) {
            Some(kept) if !moved_on(kept, &position) => {}
            Some(kept) => *kept = position,
            None => {
                producers.insert(position.stamp.producer_id.clone(), position);
            }
        }
    }
}

/// What one commit left: heads, positions, and the logs whose oldest producers it forgot.
#[derive(Default)]
pub(super) struct Commit {
    pub(super) heads: Vec<(Uuid, u64)>,
    pub(super) positions: Vec<(Uuid, ProducerPosition)>,
    pub(super) forgot: Vec<Uuid>,
}

impl Known {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The maps hold no invariant a panic could break halfway: a poisoned lock is still good.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The log's head, when known.
    pub(super) fn head(&self, log: Uuid) -> Option<u64> {
        self.inner().heads.get(&log).copied()
    }

    /// The producer's position on the log, when known (a producer with none is never known).
    pub(super) fn position(&self, log: Uuid, producer_id: &str) -> Option<ProducerPosition> {
        self.inner().producers.get(&log)?.get(producer_id).cloned()
    }

    /// The deletes and forgets so far: taken before reading the database (or, on the append
    /// thread, once the write lock is held), handed back with what was read or committed.
    pub(super) fn changes(&self) -> u64 {
        self.inner().changes
    }

    /// Notes a head read from the database after [`Known::changes`] said `changes`.
    pub(super) fn fill_head(&self, log: Uuid, head: u64, changes: u64) {
        let mut inner = self.inner();
        if inner.changes == changes {
            inner.raise(log, head);
        }
    }

    /// Notes a position read from the database after [`Known::changes`] said `changes`.
    pub(super) fn fill_position(&self, log: Uuid, position: ProducerPosition, changes: u64) {
        let mut inner = self.inner();
        if inner.changes == changes {
            inner.advance(log, position);
        }
    }

    /// Notes what a commit left (the append thread, after the commit, before it answers).
    pub(super) fn committed(&self, commit: Commit, changes: u64) {
        let mut inner = self.inner();
        // A delete ended meanwhile: these logs may be gone (the maps were cleared then).
        let stale = inner.changes != changes;
        if !commit.forgot.is_empty() {
            inner.changes += 1;
            for log in &commit.forgot {
                inner.producers.remove(log);
            }
        }
        if stale {
            return;
        }
        for (log, head) in commit.heads {
            inner.raise(log, head);
        }
        for (log, position) in commit.positions {
            if !commit.forgot.contains(&log) {
                inner.advance(log, position);
            }
        }
    }

    /// Forgets `logs` (a commit whose outcome is unknown: the next ask reads the database).
    pub(super) fn forget(&self, logs: impl IntoIterator<Item = Uuid>) {
        let mut inner = self.inner();
        for log in logs {
            inner.heads.remove(&log);
            inner.producers.remove(&log);
        }
    }

    /// After a delete of logs (called once it ended, whether it succeeded or not).
    pub(super) fn deleted(&self) {
        let mut inner = self.inner();
        inner.changes += 1;
        inner.heads.clear();
        inner.producers.clear();
    }

    /// Logs whose heads are held now.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.inner().heads.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ProducerStamp;

    fn log(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn at(producer: &str, epoch: u64, seq: u64) -> ProducerPosition {
        ProducerPosition {
            stamp: ProducerStamp {
                producer_id: producer.into(),
                epoch,
                seq,
                run_id: None,
                fenced_at: None,
            },
            updated_at: chrono::DateTime::from_timestamp(1_700_000_000 + seq as i64, 0)
                .unwrap_or_default(),
        }
    }

    fn heads(heads: &[(Uuid, u64)]) -> Commit {
        Commit { heads: heads.to_vec(), ..Commit::default() }
    }

    #[test]
    fn heads_only_grow_whoever_notes_them_first() {
        let known = Known::default();
        let changes = known.changes();
        known.committed(heads(&[(log(1), 7), (log(2), 3)]), changes);
        // A fill that read the database before that commit comes late: the newer head stays.
        known.fill_head(log(1), 5, changes);
        known.fill_head(log(2), 4, changes);
        assert_eq!(known.head(log(1)), Some(7));
        assert_eq!(known.head(log(2)), Some(4));
        assert_eq!(known.head(log(3)), None);
    }

    #[test]
    fn positions_only_move_on_whoever_notes_them_first() {
        let known = Known::default();
        let changes = known.changes();
        let commit = Commit { positions: vec![(log(1), at("p", 0, 4))], ..Commit::default() };
        known.committed(commit, changes);
        known.fill_position(log(1), at("p", 0, 3), changes);
        assert_eq!(known.position(log(1), "p"), Some(at("p", 0, 4)));
        // A new epoch starts its seqs over and is still ahead.
        known.fill_position(log(1), at("p", 1, 0), changes);
        assert_eq!(known.position(log(1), "p"), Some(at("p", 1, 0)));
        known.fill_position(log(1), at("q", 0, 0), changes);
        assert_eq!(known.position(log(1), "q"), Some(at("q", 0, 0)));
        assert_eq!((known.position(log(2), "p"), known.position(log(1), "r")), (None, None));
    }

    #[test]
    fn nothing_begun_before_a_delete_is_kept_after_it() {
        let known = Known::default();
        let before = known.changes();
        known.fill_head(log(1), 2, before);
        known.fill_position(log(1), at("p", 0, 1), before);
        known.deleted();
        assert_eq!(known.head(log(1)), None, "a delete clears every log (it cascades)");
        assert_eq!(known.position(log(1), "p"), None);
        known.fill_head(log(1), 2, before);
        known.fill_position(log(1), at("p", 0, 1), before);
        known.committed(heads(&[(log(2), 9)]), before);
        assert_eq!((known.head(log(1)), known.head(log(2))), (None, None));
        assert_eq!(known.position(log(1), "p"), None);
        let after = known.changes();
        known.fill_head(log(1), 2, after);
        assert_eq!(known.head(log(1)), Some(2));
    }

    /// A commit that forgot a log's oldest producers drops the log's positions, and a fill
    /// that read one of them before is not kept (it may be gone); its heads are noted.
    #[test]
    fn a_commit_that_forgets_producers_drops_the_logs_positions() {
        let known = Known::default();
        let before = known.changes();
        known.fill_position(log(1), at("old", 0, 9), before);
        known.fill_position(log(2), at("p", 0, 1), before);
        let commit = Commit {
            heads: vec![(log(1), 12)],
            positions: vec![(log(1), at("new", 0, 0)), (log(2), at("p", 0, 2))],
            forgot: vec![log(1)],
        };
        known.committed(commit, before);
        assert_eq!(known.position(log(1), "old"), None);
        assert_eq!(known.position(log(1), "new"), None, "read from the database next");
        assert_eq!(known.position(log(2), "p"), Some(at("p", 0, 2)));
        assert_eq!(known.head(log(1)), Some(12));
        known.fill_position(log(1), at("old", 0, 9), before);
        assert_eq!(known.position(log(1), "old"), None, "begun before the forget");
    }

    #[test]
    fn a_commit_of_unknown_outcome_is_forgotten() {
        let known = Known::default();
        let changes = known.changes();
        let commit = Commit {
            heads: vec![(log(1), 7), (log(2), 3)],
            positions: vec![(log(1), at("p", 0, 0))],
            forgot: Vec::new(),
        };
        known.committed(commit, changes);
        known.forget([log(1)]);
        assert_eq!((known.head(log(1)), known.head(log(2))), (None, Some(3)));
        assert_eq!(known.position(log(1), "p"), None);
    }

    #[test]
    fn the_maps_stay_within_their_bound() {
        let known = Known::default();
        let changes = known.changes();
        for n in 0..(KNOWN_LOGS_MAX as u128 + 10) {
            known.fill_head(log(n), 1, changes);
            known.fill_position(log(n), at("p", 0, 0), changes);
        }
        assert_eq!(known.len(), KNOWN_LOGS_MAX);
        assert_eq!(known.inner().producers.len(), KNOWN_LOGS_MAX);
        // A log it holds is raised in place, nothing else forgotten.
        let all = 0..KNOWN_LOGS_MAX as u128 + 10;
        let held = all.map(log).find(|id| known.head(*id).is_some()).expect("some log is held");
        known.fill_head(held, 2, changes);
        assert_eq!((known.len(), known.head(held)), (KNOWN_LOGS_MAX, Some(2)));
    }
}
