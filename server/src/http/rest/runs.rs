//! The native API's runs: start one, answer its approvals and client tools, cancel it, read
//! one back.

use std::sync::Arc;

use app::protocol::{CancelRequest, CancelResponse, CreateRunRequest, RunAccepted};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use uuid::Uuid;

use crate::agent::approval::ApprovalDecision;
use crate::agent::cancel::cancel_and_wait;
use crate::agent::cancel::CANCEL_WAIT_MS_MAX;
use crate::agent::start::Starter;
use crate::agent::start::NATIVE_KEY_PREFIX;
use crate::agent::RunOptions;
use crate::agent::Runs;
use crate::cluster::Cluster;
use crate::http::error::{ApiError, ApiJson};
use crate::http::params::{optional_json_body, parse_agent_id};
use crate::limits::CLIENT_IDEMPOTENCY_KEY_CHARS_MAX;
use crate::store::Store;

pub async fn create_run(
    State(starter): State<Starter>,
    Path(agent_id): Path<String>,
    headers: axum::http::HeaderMap,
    ApiJson(mut request): ApiJson<CreateRunRequest>,
) -> Result<impl IntoResponse, ApiError> {
    let agent_id = parse_agent_id(&agent_id)?;
    // The `Idempotency-Key` header and the body's `idempotency_key` mean the same; the header wins.
    if let Some(header) = headers.get("idempotency-key") {
        let key = header.to_str().map_err(|_| {
            ApiError::bad_request(
                "invalid_idempotency_key",
                "Idempotency-Key must be visible ASCII",
            )
        })?;
        request.idempotency_key = Some(key.to_owned());
    }
    create_run_inner(&starter, agent_id, request).await
}

pub(crate) async fn create_run_inner(
    starter: &Starter,
    agent_id: Uuid,
    request: CreateRunRequest,
) -> Accepted {
    // Prefixed: a native key never names another surface's message or an approval.
    let key = request.idempotency_key.as_deref().map(str::trim).filter(|key| !key.is_empty());
    if key.is_some_and(|key| key.chars().count() > CLIENT_IDEMPOTENCY_KEY_CHARS_MAX) {
        return Err(crate::agent::start::StartError::KeyTooLong.into());
    }
    let key = key.map(|key| format!("{NATIVE_KEY_PREFIX}{key}"));
    let client_tools = match &request.client_tools {
        Some(tools) => crate::agent::client_tools::parse(tools)
            .map_err(|why| ApiError::bad_request("invalid_client_tools", why))?,
        None => Vec::new(),
    };
    let options = RunOptions { client_tools, ..RunOptions::default() };
    let started = starter.start_run(agent_id, request.content, key.as_deref(), options).await?;
    Ok(accepted(agent_id, started.run_id))
}

/// 202 with the run that was started, or why none was.
type Accepted = Result<(StatusCode, Json<RunAccepted>), ApiError>;

/// 202 with the run that was started.
fn accepted(agent_id: Uuid, run_id: Uuid) -> (StatusCode, Json<RunAccepted>) {
    (StatusCode::ACCEPTED, Json(RunAccepted { run_id, agent_id }))
}

/// An answer to a call that waits (a person's decision, a client tool's result): the run that
/// carries it out.
async fn answer(starter: &Starter, agent_id: &str, decision: ApprovalDecision) -> Accepted {
    let agent_id = parse_agent_id(agent_id)?;
    let started = starter.answer_approval(agent_id, decision, RunOptions::default()).await?;
    Ok(accepted(agent_id, started.run_id))
}

/// `POST /v1/agents/{id}/approvals {call_id, approve, reason?}`: a person's answer to an
/// approval request. 202 with the run that carries it out; 409 when the request was already
/// answered (exactly one answer wins) or a run of the agent is going; 404 when no approval was
/// asked for that call.
pub async fn answer_approval(
    State(starter): State<Starter>,
    Path(agent_id): Path<String>,
    ApiJson(request): ApiJson<app::protocol::ApprovalRequest>,
) -> Accepted {
    let decision = ApprovalDecision {
        tool_call_id: request.call_id,
        approve: request.approve,
        reason: request.reason,
        output: None,
    };
    answer(&starter, &agent_id, decision).await
}

/// `POST /v1/agents/{id}/tool-results {call_id, output | error}`: the client's result of a call
/// of one of its tools. 202 with the run that goes on with it; 409 when the call was already
/// answered (exactly one answer wins); 404 when no such call waits; 422 when the call waits
/// for a person's approval instead.
pub async fn answer_tool_result(
    State(starter): State<Starter>,
    Path(agent_id): Path<String>,
    ApiJson(request): ApiJson<app::protocol::ToolResultRequest>,
) -> Accepted {
    let output = match (request.output, request.error) {
        (Some(output), None) => Ok(output),
        (None, Some(error)) => Err(error),
        _ => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_body",
                "give the call's output or its error (one of them)",
            ))
        }
    };
    answer(&starter, &agent_id, ApprovalDecision::returned(request.call_id, output)).await
}

pub async fn cancel_run(
    State(store): State<Arc<dyn Store>>,
    State(runs): State<Arc<Runs>>,
    State(cluster): State<Option<Arc<Cluster>>>,
    Path(agent_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<CancelResponse>, ApiError> {
    let agent_id = parse_agent_id(&agent_id)?;
    let request: CancelRequest = optional_json_body(&body, "cancel request")?;
    if store.head_seq(agent_id).await?.is_none() {
        return Err(ApiError::unknown_agent(agent_id));
    }
    let cluster_store = cluster.as_ref().map(|cluster| cluster.store.as_ref());
    let wait = std::time::Duration::from_millis(CANCEL_WAIT_MS_MAX);
    let cancelled = cancel_and_wait(
        &runs,
        cluster_store,
        store.as_ref(),
        agent_id,
        request.run_ids.as_deref(),
        wait,
    )
    .await?;
    let cancelled_run_ids: Vec<Uuid> = cancelled.into_iter().collect();
    Ok(Json(CancelResponse { agent_id, cancelled_run_ids }))
}

pub async fn get_run(
    State(store): State<Arc<dyn Store>>,
    Path(run_id): Path<String>,
) -> Result<Json<app::protocol::RunInfo>, ApiError> {
    let run_id = Uuid::parse_str(&run_id).map_err(|_| {
        ApiError::bad_request("invalid_id", format!("run id {run_id:?} is not a UUID"))
    })?;
    let outline = store.run_outline(run_id).await?;
    let unknown = || ApiError::unknown_run(run_id);
    let started = outline
        .iter()
        .find(|event| event.kind == app::EventKind::RunStarted)
        .ok_or_else(unknown)?;
    let end = outline.iter().find(|event| event.kind.is_run_end());
    let usage = outline
        .iter()
        .rev()
        .find_map(|event| match event.kind {
            app::EventKind::Usage => Some(event.content.clone()),
            _ => event.content.get("usage").filter(|usage| !usage.is_null()).cloned(),
        })
        .unwrap_or(serde_json::Value::Null);
    let mut metadata = serde_json::json!({ "usage": usage });
    if let Some(error) = end.and_then(|end| end.content.get("error")) {
        metadata["error"] = error.clone();
    }
    Ok(Json(app::protocol::RunInfo {
        id: run_id,
        agent_id: started.agent_id,
        status: match end.map(|end| end.kind) {
            Some(app::EventKind::RunCompleted) => "completed",
            Some(app::EventKind::RunFailed) => "failed",
            Some(app::EventKind::RunCancelled) => "cancelled",
            _ => "running",
        }
        .to_owned(),
        created_at: started.created_at,
        completed_at: end.map(|end| end.created_at),
        stop_reason: end
            .and_then(|end| end.content.get("stop_reason"))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned),
        background: started
            .metadata
            .get("background")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false),
        metadata,
    }))
}
