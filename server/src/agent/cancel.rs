//! Asking a run to stop, wherever it executes: this server's registry first, then (with several
//! servers on one PostgreSQL) the cluster's run slot and a cancel notice to the server that holds
//! it. Every surface's cancel (REST, Letta, the WebSocket) goes through here.

use uuid::Uuid;

use super::registry::{Cancelling, Runs};
use crate::store::{ClusterStore, StoreError};

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
