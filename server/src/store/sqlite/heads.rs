//! Each log's head as last committed, in memory. `head_seq` is asked by every read (a stream's
//! tail, where a catch-up ends, whether a long-poll has news); through sqlx's pool each ask was
//! a hop to a connection's thread and back, and on a catch-up of a small stream those threads'
//! wake-ups were half the server's CPU (`perf`: `finish_task_switch` 30 %, the sqlx worker 32 %
//! of the samples).
//!
//! On SQLite one thread of this process moves heads: the append thread, which notes each log's
//! new head right after its commit and before anyone learns of the commit, so the map never
//! lags what was acknowledged. A log the map does not hold is read from the database and noted.
//! Deletes (which cascade to a root's branches, ids unknown here) clear the map; a fill or a
//! note that began before a delete ended is not kept (`deletes` counts them), so a deleted log
//! is never noted again. Heads only grow: a fill that read the database before a commit noted a
//! newer head keeps the newer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use uuid::Uuid;

/// Logs whose heads are kept (~40 bytes each); past it a log is forgotten for each new one
/// (the next ask of a forgotten log reads the database).
pub(super) const HEADS_KEPT_MAX: usize = 65_536;

/// The shared map (the store's readers and the append thread).
#[derive(Clone, Default)]
pub(super) struct Heads {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    heads: HashMap<Uuid, u64>,
    /// Deletes so far: a fill or a note taken before one ended is dropped.
    deletes: u64,
}

impl Inner {
    fn raise(&mut self, log: Uuid, head: u64) {
        if self.heads.len() >= HEADS_KEPT_MAX && !self.heads.contains_key(&log) {
            if let Some(any) = self.heads.keys().next().copied() {
                self.heads.remove(&any);
            }
        }
        let kept = self.heads.entry(log).or_insert(head);
        *kept = (*kept).max(head);
    }
}

impl Heads {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The map holds no invariant a panic could break halfway: a poisoned lock is still good.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The log's head, when known.
    pub(super) fn get(&self, log: Uuid) -> Option<u64> {
        self.inner().heads.get(&log).copied()
    }

    /// The deletes so far: taken before reading a head from the database (or, on the append
    /// thread, once the write lock is held), handed back to [`Heads::fill`] or
    /// [`Heads::committed`].
    pub(super) fn deletes(&self) -> u64 {
        self.inner().deletes
    }

    /// Notes a head read from the database after [`Heads::deletes`] said `deletes`.
    pub(super) fn fill(&self, log: Uuid, head: u64, deletes: u64) {
        let mut inner = self.inner();
        if inner.deletes == deletes {
            inner.raise(log, head);
        }
    }

    /// Notes the heads a commit left (the append thread, after the commit, before it answers).
    pub(super) fn committed(&self, heads: &[(Uuid, u64)], deletes: u64) {
        let mut inner = self.inner();
        if inner.deletes != deletes {
            // A delete ended meanwhile: these logs may be gone. The map was cleared then.
            return;
        }
        for &(log, head) in heads {
            inner.raise(log, head);
        }
    }

    /// Forgets `logs` (a commit whose outcome is unknown: the next ask reads the database).
    pub(super) fn forget(&self, logs: impl IntoIterator<Item = Uuid>) {
        let mut inner = self.inner();
        for log in logs {
            inner.heads.remove(&log);
        }
    }

    /// After a delete of logs (called once it ended, whether it succeeded or not).
    pub(super) fn deleted(&self) {
        let mut inner = self.inner();
        inner.deletes += 1;
        inner.heads.clear();
    }

    /// Logs held now.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.inner().heads.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    #[test]
    fn heads_only_grow_whoever_notes_them_first() {
        let heads = Heads::default();
        let deletes = heads.deletes();
        heads.committed(&[(log(1), 7), (log(2), 3)], deletes);
        // A fill that read the database before that commit comes late: the newer head stays.
        heads.fill(log(1), 5, deletes);
        heads.fill(log(2), 4, deletes);
        assert_eq!(heads.get(log(1)), Some(7));
        assert_eq!(heads.get(log(2)), Some(4));
        assert_eq!(heads.get(log(3)), None);
    }

    #[test]
    fn nothing_begun_before_a_delete_is_kept_after_it() {
        let heads = Heads::default();
        let before = heads.deletes();
        heads.fill(log(1), 2, before);
        heads.deleted();
        assert_eq!(heads.get(log(1)), None, "a delete clears every log (it cascades)");
        heads.fill(log(1), 2, before);
        heads.committed(&[(log(2), 9)], before);
        assert_eq!((heads.get(log(1)), heads.get(log(2))), (None, None));
        let after = heads.deletes();
        heads.fill(log(1), 2, after);
        assert_eq!(heads.get(log(1)), Some(2));
    }

    #[test]
    fn a_commit_of_unknown_outcome_is_forgotten() {
        let heads = Heads::default();
        let deletes = heads.deletes();
        heads.committed(&[(log(1), 7), (log(2), 3)], deletes);
        heads.forget([log(1)]);
        assert_eq!((heads.get(log(1)), heads.get(log(2))), (None, Some(3)));
    }

    #[test]
    fn the_map_stays_within_its_bound() {
        let heads = Heads::default();
        let deletes = heads.deletes();
        for n in 0..(HEADS_KEPT_MAX as u128 + 10) {
            heads.fill(log(n), 1, deletes);
        }
        assert_eq!(heads.len(), HEADS_KEPT_MAX);
        // A log it holds is raised in place, nothing else forgotten.
        let held = (0..HEADS_KEPT_MAX as u128 + 10).map(log).find(|id| heads.get(*id).is_some());
        let held = held.expect("some log is held");
        heads.fill(held, 2, deletes);
        assert_eq!((heads.len(), heads.get(held)), (HEADS_KEPT_MAX, Some(2)));
    }
}
