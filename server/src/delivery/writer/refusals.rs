//! Runs the writer refused an event of, and the refusals it answers with.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use uuid::Uuid;

use super::request::Outcome;
use crate::store::{AppendBatch, StoreError};

/// Runs whose events the writer refused, remembered so their later events (already in flight)
/// are refused too: a run's log never has a hole in the middle. Bounded: a forgotten run is long
/// over, and its ids never come again.
pub const REFUSED_RUNS_REMEMBERED_MAX: usize = 1024;

#[derive(Default)]
pub(super) struct RefusedRuns {
    order: VecDeque<Uuid>,
    set: HashSet<Uuid>,
}

impl RefusedRuns {
    pub(super) fn insert(&mut self, run_id: Uuid) {
        if self.set.insert(run_id) {
            self.order.push_back(run_id);
            if self.order.len() > REFUSED_RUNS_REMEMBERED_MAX {
                if let Some(oldest) = self.order.pop_front() {
                    self.set.remove(&oldest);
                }
            }
        }
    }

    pub(super) fn remove(&mut self, run_id: Uuid) {
        if self.set.remove(&run_id) {
            self.order.retain(|id| *id != run_id);
        }
    }

    /// No run is refused (the usual state: only then does the writer send a group ahead).
    pub(super) fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

pub(super) fn behind_a_refusal() -> StoreError {
    StoreError::Unavailable("an earlier event of this run was refused".into())
}

pub(super) fn run_of(batch: &AppendBatch) -> Option<Uuid> {
    batch.drafts.first().and_then(|draft| draft.run_id)
}

/// Whether a refusal leaves the run with a hole its later events must not go past. An external
/// producer's batch never does: it is whole, and fenced by the producer's position, so the batch
/// after a refused one is its retry (or refused as a gap).
pub(super) fn leaves_a_hole(batch: &AppendBatch) -> bool {
    batch.producer.is_none()
}

/// Whether a request continues a run the writer refused an event of (and is not a producer's
/// fenced batch, which cannot leave a hole).
pub(super) fn behind_a_hole(
    continues_run: bool,
    batch: &AppendBatch,
    refused: &RefusedRuns,
) -> bool {
    continues_run
        && batch.producer.is_none()
        && run_of(batch).is_some_and(|run| refused.set.contains(&run))
}

/// The same refusal for each of `count` requests (the first gets the error itself).
pub(super) fn refusal_for_all(error: StoreError, count: usize) -> Vec<Outcome> {
    let message = error.to_string();
    let mut first = Some(error);
    (0..count)
        .map(|_| {
            Err(Arc::new(first.take().unwrap_or_else(|| StoreError::Unavailable(message.clone()))))
        })
        .collect()
}
