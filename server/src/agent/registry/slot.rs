//! A run's hold on its agent's slot in the registry: [`Slot`] for our own runs' tasks, and
//! [`ProducedSlot`] for the runs an external producer writes (`agent::produce`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// A produced run's hold on its agent (see [`Runs::reserve_produced`]).
pub struct ProducedSlot {
    pub(super) cancel: CancellationToken,
    pub(super) interrupted: Arc<AtomicBool>,
    pub(super) ending: Arc<AtomicBool>,
    pub(super) _slot: Slot,
}

impl ProducedSlot {
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// The run's cancel, to wait on without holding the slot.
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// True when the cancel is the server's shutdown, not a person's.
    pub fn is_interrupted(&self) -> bool {
        self.interrupted.load(Ordering::Acquire)
    }

    /// The run is writing its end: a start arriving now waits for it (see
    /// [`RUN_ENDING_WAIT_MS_MAX`]).
    pub fn ending(&self) {
        self.ending.store(true, Ordering::Release);
    }
}

/// A run's hold on its agent: dropped when the run's task ends (normally, or by a panic), it frees
/// the agent's slot if `run_id` still holds it and tells whoever waits for the run's end.
pub(super) struct Slot {
    pub(super) active: Arc<Mutex<HashMap<Uuid, ActiveRun>>>,
    pub(super) agent_id: Uuid,
    pub(super) run_id: Uuid,
    pub(super) finished: watch::Sender<bool>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        {
            let mut active = self.active.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if active.get(&self.agent_id).is_some_and(|run| run.run_id == self.run_id) {
                active.remove(&self.agent_id);
            }
        }
        let _ = self.finished.send(true);
    }
}

pub(super) struct ActiveRun {
    pub(super) run_id: Uuid,
    pub(super) cancel: CancellationToken,
    /// Turns true when the run's task has written its last event.
    pub(super) finished: watch::Receiver<bool>,
    /// True once the run has begun writing its end (see [`RUN_ENDING_WAIT_MS_MAX`]).
    pub(super) ending: Arc<AtomicBool>,
    /// Set with the cancel when the server shuts down: the run ends `interrupted`, not
    /// `cancelled` (nobody asked it to stop).
    pub(super) interrupted: Arc<AtomicBool>,
    /// An external producer's run: a shutdown lets go of it at once (it stays the producer's)
    /// instead of waiting the drain for it.
    pub(super) produced: bool,
}
