//! A new produced run's hold on its agent: the slot here and, with PostgreSQL, the database's
//! claim — and the race where the claim's holder is this very batch, opened a moment earlier by
//! another server that took its retry.

use tokio::time::Instant;
use uuid::Uuid;

use super::answer::ProduceError;
use crate::agent::registry::{ProducedSlot, Runs};
use crate::store::{ClusterStore, Store, StoreError};

/// How long a batch that opens a run waits, at most, to learn whether the run holding the agent
/// is its own retry, opened by another server and not yet committed.
pub const PRODUCER_OPENING_WAIT_MS_MAX: u64 = 1_000;
/// How often the producer's position is read meanwhile.
const PRODUCER_OPENING_POLL_MS: u64 = 20;

/// What a new produced run's slot touches: the runs here, the log, and (PostgreSQL) the
/// database's claims.
pub(super) struct Slots<'a> {
    pub(super) runs: &'a Runs,
    pub(super) store: &'a dyn Store,
    pub(super) cluster: Option<&'a dyn ClusterStore>,
}

impl Slots<'_> {
    /// The agent's run slot for a new produced run (and, with PostgreSQL, the database's).
    pub(super) async fn take_slot(
        &self,
        agent_id: Uuid,
        run_id: Uuid,
        producer_id: &str,
        stored: Option<(u64, u64)>,
    ) -> Result<ProducedSlot, ProduceError> {
        if let Some(running) = self.runs.active_run_after_ending(agent_id).await {
            return Err(ProduceError::RunInProgress { agent_id, run_id: running });
        }
        if let Some(tool_call_id) = self.store.waiting_call(agent_id).await? {
            return Err(ProduceError::CallWaiting { tool_call_id });
        }
        if let Some(cluster) = self.cluster {
            if let Some(running) = cluster.claim_agent_run(agent_id, run_id).await? {
                self.opened_elsewhere(agent_id, running, producer_id, stored).await?;
                return Err(ProduceError::RunInProgress { agent_id, run_id: running });
            }
        }
        match self.runs.reserve_produced(agent_id, run_id) {
            Ok(slot) => Ok(slot),
            Err(error) => {
                self.release_cluster(agent_id, run_id).await;
                Err(error.into())
            }
        }
    }

    /// The run holding the agent may be this very batch, opened by another server that took
    /// its retry a moment earlier and has not committed yet: while the holder has not started
    /// in the log, the producer's position is watched (at most
    /// [`PRODUCER_OPENING_WAIT_MS_MAX`]); when it moves, the batch is fenced again
    /// (`ProducerMoved`) and turns out a duplicate.
    async fn opened_elsewhere(
        &self,
        agent_id: Uuid,
        holder: Uuid,
        producer_id: &str,
        stored: Option<(u64, u64)>,
    ) -> Result<(), ProduceError> {
        let moved = || {
            ProduceError::Store(StoreError::ProducerMoved {
                agent_id,
                producer_id: producer_id.to_owned(),
            })
        };
        let deadline =
            Instant::now() + std::time::Duration::from_millis(PRODUCER_OPENING_WAIT_MS_MAX);
        loop {
            // The holder's start first, the position after: they commit together, so a start
            // seen here means the position read next shows whether it was this batch.
            let started = !self.store.run_outline(holder).await?.is_empty();
            let position = self.store.producer_position(agent_id, producer_id).await?;
            if position.map(|position| (position.stamp.epoch, position.stamp.seq)) != stored {
                return Err(moved());
            }
            if started || Instant::now() >= deadline {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(PRODUCER_OPENING_POLL_MS)).await;
        }
    }

    /// A slot taken for a run whose opening did not commit.
    pub(super) async fn give_back(&self, agent_id: Uuid, run_id: Uuid, slot: ProducedSlot) {
        drop(slot);
        self.release_cluster(agent_id, run_id).await;
    }

    async fn release_cluster(&self, agent_id: Uuid, run_id: Uuid) {
        if let Some(cluster) = self.cluster {
            if let Err(error) = cluster.release_agent_run(agent_id, run_id).await {
                tracing::warn!(%agent_id, %run_id, %error, "could not free the run slot");
            }
        }
    }
}
