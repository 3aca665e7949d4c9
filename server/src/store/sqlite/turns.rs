//! Turns at SQLite's one write lock, between the append thread and the writes beside the log.
//!
//! **Why.** Writes beside the log (a new agent, a fork, a run's key, a stream's row) run on
//! sqlx's pool; appends run on their own thread. SQLite lets one connection write at a time, and
//! a connection that finds the lock taken sleeps and looks again (its busy handler: after 1, 2,
//! 5 … then every 100 ms). The append thread's transactions follow one another with microseconds
//! between them while appends keep coming, so those looks almost never found the lock free: such
//! a write waited out its whole busy timeout and failed (4 of 10 new agents beside steady appends
//! in the test; a fork after a burst). Now a pool writer says it waits before it asks for the
//! lock, and the append thread, before it takes the lock, lets waiting writers go first, for at
//! most [`POOL_WRITE_TURN_MS_MAX`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The longest the append thread leaves the lock to waiting pool writers before it takes it
/// anyway: above the busy handler's longest sleep (100 ms), so a waiting writer looks at least
/// once while the lock is free.
pub(super) const POOL_WRITE_TURN_MS_MAX: u64 = 250;

/// Shared by the store (its pool writes) and the append thread.
#[derive(Clone, Default)]
pub(super) struct WriteTurns(Arc<Inner>);

#[derive(Default)]
struct Inner {
    waiting: AtomicUsize,
    lock: Mutex<()>,
    done: Condvar,
}

/// A pool writer's place: held from before its statement (or transaction) until it ended.
pub(super) struct Turn<'a>(&'a Inner);

impl WriteTurns {
    /// Holds a place for a write on the pool; the append thread waits while any is held.
    pub(super) fn wait(&self) -> Turn<'_> {
        self.0.waiting.fetch_add(1, Ordering::AcqRel);
        Turn(&self.0)
    }

    /// On the append thread, before it takes the write lock: lets the waiting pool writers have
    /// it first (one atomic load when none waits).
    pub(super) fn let_pool_writers_go(&self) {
        if self.0.waiting.load(Ordering::Acquire) == 0 {
            return;
        }
        let guard = self.0.lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let _ = self.0.done.wait_timeout_while(
            guard,
            Duration::from_millis(POOL_WRITE_TURN_MS_MAX),
            |_| self.0.waiting.load(Ordering::Acquire) > 0,
        );
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        if self.0.waiting.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Under the lock, so the append thread cannot miss it between its look and its wait.
            let _guard = self.0.lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            self.0.done.notify_all();
        }
    }
}
