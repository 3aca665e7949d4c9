//! Asking a run to stop, wherever it executes: this server's registry first, then (with several
//! servers on one PostgreSQL) the cluster's run slot and a cancel notice to the server that holds
//! it. Every surface's cancel (REST, Letta, the WebSocket) goes through here.

use uuid::Uuid;

use super::registry::{Cancelling, Runs};
use crate::store::{ClusterStore, EventLog, StoreError};

/// Who was asked to stop.
pub enum CancelRequested {
    /// A run of this server: the handle waits for its end.
    Here(Cancelling),
    /// A run of another server, told through the database; its end reaches the log from there.
    Elsewhere(Uuid),
}

impl CancelRequested {
    pub fn run_id(&self) -> Uuid {
        match self {
            CancelRequested::Here(cancelling) => cancelling.run_id,
            CancelRequested::Elsewhere(run_id) => *run_id,
        }
    }
}

/// Asks the agent's run to stop, if one is going and (when `run_ids` is given) it is one of them.
pub async fn request_cancel(
    runs: &Runs,
    cluster: Option<&dyn ClusterStore>,
    agent_id: Uuid,
    run_ids: Option<&[Uuid]>,
) -> Result<Option<CancelRequested>, StoreError> {
    if let Some(cancelling) = runs.cancel(agent_id, run_ids) {
        return Ok(Some(CancelRequested::Here(cancelling)));
    }
    let Some(cluster) = cluster else {
        return Ok(None);
    };
    let Some(run_id) = cluster.active_run(agent_id).await? else {
        return Ok(None);
    };
    if run_ids.is_some_and(|run_ids| !run_ids.contains(&run_id)) {
        return Ok(None);
    }
    cluster.send_cancel(agent_id, run_id).await?;
    Ok(Some(CancelRequested::Elsewhere(run_id)))
}

/// How long a cancel request waits for the run to write its last event before answering. A run
/// stops within one provider step; this only bounds a stuck one.
pub const CANCEL_WAIT_MS_MAX: u64 = 5_000;
/// How often a cancel of a run on another server looks in the log for the run's end.
const CANCEL_POLL_INTERVAL_MS: u64 = 20;

/// Asks the agent's run to stop (as [`request_cancel`]) and waits, at most `wait`, for its end
/// to be in the log; the run asked, if one was going. A run that does not end in time is
/// logged, not an error: it stops within one provider step, the wait only bounds a stuck one.
pub async fn cancel_and_wait(
    runs: &Runs,
    cluster: Option<&dyn ClusterStore>,
    store: &dyn EventLog,
    agent_id: Uuid,
    run_ids: Option<&[Uuid]>,
    wait: std::time::Duration,
) -> Result<Option<Uuid>, StoreError> {
    let Some(requested) = request_cancel(runs, cluster, agent_id, run_ids).await? else {
        return Ok(None);
    };
    let run_id = requested.run_id();
    let ended = match requested {
        CancelRequested::Here(cancelling) => cancelling.ended_within(wait).await,
        // On another server: its end reaches the log from there.
        CancelRequested::Elsewhere(run_id) => run_ended_within(store, run_id, wait).await?,
    };
    if !ended {
        tracing::warn!(%agent_id, %run_id, "run did not end within the cancel wait");
    }
    Ok(Some(run_id))
}

/// Waits (at most `wait`) until the log holds the end of `run_id`.
async fn run_ended_within(
    store: &dyn EventLog,
    run_id: Uuid,
    wait: std::time::Duration,
) -> Result<bool, StoreError> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let outline = store.run_outline(run_id).await?;
        if outline.iter().any(|event| event.kind.is_run_end()) {
            return Ok(true);
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(std::time::Duration::from_millis(CANCEL_POLL_INTERVAL_MS)).await;
    }
}
