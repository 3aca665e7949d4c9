//! Branches over REST: fork a conversation (or a branch) after a seq, list a conversation's
//! branches, switch the one its clients follow, delete one. A branch's id is an agent id for
//! everything else: its events, its stream, its runs, its messages.

use app::protocol::{Agent, BranchList, ForkRequest, SwitchBranchRequest};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use std::sync::Arc;
use uuid::Uuid;

use super::Deletion;
use crate::agent::branch::{conversation_of, fork_at, ForkError};
use crate::agent::cancel::CANCEL_WAIT_MS_MAX;
use crate::http::error::{ApiError, ApiJson};
use crate::http::params::parse_agent_id;
use crate::store::{BranchDeletion, Store};

impl From<ForkError> for ApiError {
    fn from(error: ForkError) -> ApiError {
        let message = error.to_string();
        let (status, code) = match error {
            ForkError::Unknown(log) => return ApiError::unknown_agent(log),
            ForkError::Store(error) => return error.into(),
            ForkError::PastHead { .. } => (StatusCode::BAD_REQUEST, "after_seq_beyond_head"),
            ForkError::InsideRun(_) => (StatusCode::CONFLICT, "fork_inside_run"),
            ForkError::Waits(_) => (StatusCode::CONFLICT, "fork_after_waiting_run"),
            ForkError::TooManyBranches => (StatusCode::CONFLICT, "too_many_branches"),
            ForkError::TooDeep => (StatusCode::CONFLICT, "branches_too_deep"),
        };
        ApiError::new(status, code, message)
    }
}

/// `POST /v1/agents/{id}/branches`: 201 and the new branch.
pub async fn fork_branch(
    State(store): State<Arc<dyn Store>>,
    Path(log): Path<String>,
    ApiJson(request): ApiJson<ForkRequest>,
) -> Result<(StatusCode, Json<Agent>), ApiError> {
    let log = parse_agent_id(&log)?;
    let branch = fork_at(store.as_ref(), log, request.after_seq).await?;
    if request.current {
        if let Some(origin) = branch.branch {
            store
                .set_current_branch(origin.root, Some(branch.id))
                .await?;
        }
    }
    Ok((StatusCode::CREATED, Json(branch)))
}

/// `GET /v1/agents/{id}/branches` (`{id}`: the conversation or any of its branches).
pub async fn list_branches(
    State(store): State<Arc<dyn Store>>,
    Path(log): Path<String>,
) -> Result<Json<BranchList>, ApiError> {
    let conversation = conversation_row(store.as_ref(), &log).await?;
    let branches = store.list_branches(conversation.id).await?;
    Ok(Json(BranchList {
        current_branch: conversation.current_branch.unwrap_or(conversation.id),
        agent: conversation,
        branches,
    }))
}

/// `PUT /v1/agents/{id}/current-branch`: the conversation, as it is now.
pub async fn switch_branch(
    State(store): State<Arc<dyn Store>>,
    Path(log): Path<String>,
    ApiJson(request): ApiJson<SwitchBranchRequest>,
) -> Result<Json<Agent>, ApiError> {
    let conversation = conversation_row(store.as_ref(), &log).await?;
    let branch = request.branch.filter(|branch| *branch != conversation.id);
    if !store.set_current_branch(conversation.id, branch).await? {
        return Err(unknown_branch(branch.unwrap_or(conversation.id)));
    }
    let now = store.get_agent(conversation.id).await?;
    Ok(Json(
        now.ok_or_else(|| ApiError::unknown_agent(conversation.id))?,
    ))
}

/// `DELETE /v1/agents/{id}/branches/{branch}`: 204; its parent and siblings stay whole.
pub async fn delete_branch(
    State(state): State<Deletion>,
    Path((log, branch)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let conversation = conversation_row(state.store.as_ref(), &log).await?;
    let branch = parse_agent_id(&branch)?;
    match state.store.get_agent(branch).await? {
        Some(agent)
            if agent
                .branch
                .is_some_and(|origin| origin.root == conversation.id) =>
        {
            remove_branch(&state, branch).await
        }
        _ => Err(unknown_branch(branch)),
    }
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

async fn conversation_row(store: &dyn Store, log: &str) -> Result<Agent, ApiError> {
    let log = parse_agent_id(log)?;
    let agent = store
        .get_agent(log)
        .await?
        .ok_or_else(|| ApiError::unknown_agent(log))?;
    let conversation = conversation_of(&agent);
    if conversation == agent.id {
        return Ok(agent);
    }
    let row = store.get_agent(conversation).await?;
    row.ok_or_else(|| ApiError::unknown_agent(conversation))
}

fn unknown_branch(branch: Uuid) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "unknown_branch",
        format!("no branch {branch} in this conversation"),
    )
}
