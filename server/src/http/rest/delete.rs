//! Deleting: an agent (its log and its branches) or one branch — each log's run cancelled
//! and its end written first.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use std::sync::Arc;
use uuid::Uuid;

use crate::agent::cancel::CANCEL_WAIT_MS_MAX;
use crate::http::error::ApiError;
use crate::http::params::parse_agent_id;
use crate::store::{BranchDeletion, Store};

/// What deleting an agent touches: its run (cancelled first), its log, its live room and its
/// folded timeline.
#[derive(Clone)]
pub struct Deletion {
    pub store: Arc<dyn Store>,
    pub runs: Arc<crate::agent::Runs>,
    pub hub: Arc<crate::delivery::hub::Hub>,
    pub snapshots: Arc<crate::agent::history::Snapshots>,
}

/// `DELETE /v1/agents/{id}`: the agent, its log and its branches; a branch's id deletes that
/// branch alone (refused while others fork from it).
pub async fn delete_agent(
    State(state): State<Deletion>,
    Path(agent_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let agent_id = parse_agent_id(&agent_id)?;
    let agent = state.store.get_agent(agent_id).await?;
    if agent.as_ref().is_some_and(|agent| agent.branch.is_some()) {
        return remove_branch(&state, agent_id).await;
    }
    let mut logs = vec![agent_id];
    logs.extend(state.store.list_branches(agent_id).await?.iter().map(|branch| branch.id));
    for log in &logs {
        stop_run(&state, *log).await?;
    }
    if !state.store.delete_agent(agent_id).await? {
        return Err(ApiError::unknown_agent(agent_id));
    }
    for log in logs {
        state.hub.close(log);
        state.snapshots.remove(log);
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Deletes a branch: its run, if one goes, cancelled and ended first (as an agent's is).
pub(super) async fn remove_branch(state: &Deletion, branch: Uuid) -> Result<StatusCode, ApiError> {
    stop_run(state, branch).await?;
    match state.store.delete_branch(branch).await? {
        BranchDeletion::Deleted => {
            state.hub.close(branch);
            state.snapshots.remove(branch);
            Ok(StatusCode::NO_CONTENT)
        }
        BranchDeletion::HasBranches => Err(ApiError::new(
            StatusCode::CONFLICT,
            "branch_has_branches",
            format!("other branches fork from branch {branch}: delete them first"),
        )),
        BranchDeletion::Unknown => Err(unknown_branch(branch)),
    }
}

/// Cancels the log's run, if one goes, and waits for its end to be written: deleted under it,
/// a run's last events are refused and its subscribers never see it end.
pub(super) async fn stop_run(state: &Deletion, log: Uuid) -> Result<(), ApiError> {
    let Some(cancelling) = state.runs.cancel(log, None) else {
        return Ok(());
    };
    let run_id = cancelling.run_id;
    let wait = std::time::Duration::from_millis(CANCEL_WAIT_MS_MAX);
    if cancelling.ended_within(wait).await {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::CONFLICT,
        "run_in_progress",
        format!("run {run_id} did not stop within {CANCEL_WAIT_MS_MAX} ms; nothing was deleted"),
    ))
}

pub(super) fn unknown_branch(branch: Uuid) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "unknown_branch",
        format!("no branch {branch} in this conversation"),
    )
}
