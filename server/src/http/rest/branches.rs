//! Branches over REST: fork a conversation (or a branch) after a seq, list a conversation's
//! branches, switch the one its clients follow, delete one. A branch's id is an agent id for
//! everything else: its events, its stream, its runs, its messages.

use app::protocol::{Agent, BranchList, ForkRequest, SwitchBranchRequest};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use std::sync::Arc;

use super::delete::{remove_branch, unknown_branch, Deletion};
use crate::agent::branch::{branch_list, conversation_of, fork_at, ForkError};
use crate::http::error::{ApiError, ApiJson};
use crate::http::params::parse_agent_id;
use crate::store::Store;

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
            store.set_current_branch(origin.root, Some(branch.id)).await?;
        }
    }
    Ok((StatusCode::CREATED, Json(branch)))
}

/// `GET /v1/agents/{id}/branches` (`{id}`: the conversation or any of its branches).
pub async fn list_branches(
    State(store): State<Arc<dyn Store>>,
    Path(log): Path<String>,
) -> Result<Json<BranchList>, ApiError> {
    let log = parse_agent_id(&log)?;
    let agent = store.get_agent(log).await?;
    let agent = agent.ok_or_else(|| ApiError::unknown_agent(log))?;
    let list = branch_list(store.as_ref(), &agent).await?;
    Ok(Json(list.ok_or_else(|| ApiError::unknown_agent(log))?))
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
    Ok(Json(now.ok_or_else(|| ApiError::unknown_agent(conversation.id))?))
}

/// `DELETE /v1/agents/{id}/branches/{branch}`: 204; its parent and siblings stay whole.
pub async fn delete_branch(
    State(state): State<Deletion>,
    Path((log, branch)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let conversation = conversation_row(state.store.as_ref(), &log).await?;
    let branch = parse_agent_id(&branch)?;
    match state.store.get_agent(branch).await? {
        Some(agent) if agent.branch.is_some_and(|origin| origin.root == conversation.id) => {
            remove_branch(&state, branch).await
        }
        _ => Err(unknown_branch(branch)),
    }
}

async fn conversation_row(store: &dyn Store, log: &str) -> Result<Agent, ApiError> {
    let log = parse_agent_id(log)?;
    let agent = store.get_agent(log).await?.ok_or_else(|| ApiError::unknown_agent(log))?;
    let conversation = conversation_of(&agent);
    if conversation == agent.id {
        return Ok(agent);
    }
    let row = store.get_agent(conversation).await?;
    row.ok_or_else(|| ApiError::unknown_agent(conversation))
}
