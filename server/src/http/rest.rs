//! The REST surface: agents, the paged log, runs.

mod branches;
mod delete;
mod runs;
use app::protocol::CreateAgentRequest;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
pub use branches::{delete_branch, fork_branch, list_branches, switch_branch};
pub use delete::{delete_agent, Deletion};
pub(crate) use runs::create_run_inner;
pub use runs::{answer_approval, answer_tool_result, cancel_run, create_run, get_run};
use serde::Deserialize;

use uuid::Uuid;

use super::caller::Caller;
use super::error::{ApiError, ApiJson};
use super::params::{head_for_cursor, parse_agent_id, CountQuery, ListQuery};
use super::token::TOKEN_SUB_CHARS_MAX;
use crate::limits::Limits;
use std::sync::Arc;

use crate::agent::Runs;
use crate::cluster::Cluster;
use crate::store::Store;
use crate::store::{EventJson, JsonPage, NewAgent};

/// Events per page when the client does not say.
pub const EVENTS_PAGE_LIMIT_DEFAULT: u32 = 100;
/// Agents listed at most (and the most a list's cursors reach back).
pub const AGENTS_LIST_LIMIT_MAX: u32 = 1000;
/// Agents listed when the client does not say.
pub const AGENTS_LIST_LIMIT_DEFAULT: u32 = 100;
/// Agent names longer than this are refused.
pub const AGENT_NAME_CHARS_MAX: usize = 200;

pub async fn create_agent(
    State(store): State<Arc<dyn Store>>,
    State(runs): State<Arc<Runs>>,
    caller: Caller,
    ApiJson(request): ApiJson<CreateAgentRequest>,
) -> Result<impl IntoResponse, ApiError> {
    caller.require_operator()?;
    create_agent_inner(store.as_ref(), &runs, request).await
}

pub(super) async fn create_agent_inner(
    store: &dyn Store,
    runs: &Runs,
    request: CreateAgentRequest,
) -> Result<(StatusCode, Json<app::protocol::Agent>), ApiError> {
    let name = request.name.unwrap_or_default().trim().to_owned();
    if name.chars().count() > AGENT_NAME_CHARS_MAX {
        return Err(ApiError::bad_request(
            "invalid_body",
            format!("name is longer than {AGENT_NAME_CHARS_MAX} characters"),
        ));
    }
    let name = if name.is_empty() {
        format!("agent-{}", &Uuid::new_v4().simple().to_string()[..8])
    } else {
        name
    };
    let mut metadata = request.metadata.unwrap_or(serde_json::Value::Null);
    if let Some(budget) =
        request.llm_config.as_ref().and_then(crate::provider::anthropic::letta_thinking_budget)
    {
        if metadata.is_null() {
            metadata = serde_json::json!({});
        }
        if let Some(fields) = metadata.as_object_mut() {
            fields
                .entry(crate::provider::anthropic::THINKING_BUDGET_FIELD)
                .or_insert(serde_json::json!(budget));
        }
    }
    if let Some(owner) = &request.owner {
        if owner.is_empty() || owner.chars().count() > TOKEN_SUB_CHARS_MAX {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_body",
                format!("owner must be 1–{TOKEN_SUB_CHARS_MAX} characters (a token's sub)"),
            ));
        }
    }
    if metadata.get("provider").is_some_and(|provider| provider.as_str().is_none()) {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "metadata.provider must be a string",
        ));
    }
    crate::agent::approval::check_agent_approvals(&metadata).map_err(|message| {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", message)
    })?;
    crate::agent::approval_timeout::check_agent_timeout(&metadata).map_err(|message| {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", message)
    })?;
    crate::provider::anthropic::check_thinking_budget(&metadata).map_err(|message| {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", message)
    })?;
    crate::mcp::check_agent_servers(runs.mcp(), &metadata).map_err(|message| {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", message)
    })?;
    // Refused now, not at its first run: an agent whose provider or model this server cannot
    // serve.
    let probe = app::protocol::Agent {
        id: Uuid::nil(),
        name: String::new(),
        system: None,
        description: None,
        model: request.model.clone(),
        metadata: metadata.clone(),
        tags: Vec::new(),
        head_seq: 0,
        created_at: Default::default(),
        owner: None,
        branch: None,
        current_branch: None,
    };
    runs.check_provider(&probe)?;
    let agent = store
        .create_agent(NewAgent {
            name,
            system: request.system,
            description: request.description,
            model: request.model,
            metadata,
            tags: request.tags.unwrap_or_default(),
            owner: request.owner,
        })
        .await?;
    Ok((StatusCode::CREATED, Json(agent)))
}

/// `GET /v1/agents?owner=`.
#[derive(Debug, Deserialize)]
pub struct OwnerQuery {
    #[serde(default)]
    owner: Option<String>,
}

/// `GET /v1/tools?agent_id=`.
#[derive(Debug, Deserialize)]
pub struct ToolsQuery {
    #[serde(default)]
    agent_id: Option<String>,
}

/// `GET /v1/tools?agent_id=…`: the tools that agent can use — the built-ins and its MCP
/// servers' (a server that cannot be reached now is left out) — in Letta's tool shape, with
/// where each comes from. Without `agent_id`: the built-ins and every configured server's.
pub async fn list_tools(
    State(store): State<Arc<dyn Store>>,
    State(runs): State<Arc<Runs>>,
    Query(query): Query<ToolsQuery>,
) -> Result<Json<Vec<serde_json::Value>>, ApiError> {
    let metadata = match &query.agent_id {
        Some(agent_id) => {
            let agent_id = parse_agent_id(agent_id)?;
            let agent = store.get_agent(agent_id).await?;
            agent.ok_or_else(|| ApiError::unknown_agent(agent_id))?.metadata
        }
        None => serde_json::json!({ "mcp_servers": runs.mcp().server_names() }),
    };
    let tools = runs.tools_for(&metadata).await;
    Ok(Json(
        tools
            .iter()
            .map(|visible| {
                let spec = visible.tool.spec();
                serde_json::json!({
                    "id": format!("tool-{}", spec.name),
                    "name": spec.name,
                    "description": spec.description,
                    "json_schema": {
                        "name": spec.name,
                        "description": spec.description,
                        "parameters": spec.input_schema,
                    },
                    "tool_type": if visible.server.is_some() { "external_mcp" } else { "builtin" },
                    "mcp_server_name": visible.server,
                })
            })
            .collect(),
    ))
}

/// `GET /v1/agents` (and `/v1/agents/`): Letta's bare array of agents, newest first — a scoped
/// token's agents only; the operator's `?owner=` lists one user's.
pub async fn list_agents(
    State(store): State<Arc<dyn Store>>,
    caller: Caller,
    Query(query): Query<ListQuery>,
    Query(owner): Query<OwnerQuery>,
) -> Result<Json<Vec<app::protocol::Agent>>, ApiError> {
    if owner.owner.is_some() {
        caller.require_operator()?;
    }
    let mut agents =
        caller.agents(store.as_ref(), owner.owner.as_deref(), AGENTS_LIST_LIMIT_MAX).await?;
    if !query.descending()? {
        agents.reverse();
    }
    let agents = query.page(
        agents,
        |agent| agent.id.to_string(),
        AGENTS_LIST_LIMIT_DEFAULT,
        AGENTS_LIST_LIMIT_MAX,
    )?;
    Ok(Json(agents))
}

pub async fn get_agent(
    State(store): State<Arc<dyn Store>>,
    Path(agent_id): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    let agent_id = parse_agent_id(&agent_id)?;
    let agent =
        store.get_agent(agent_id).await?.ok_or_else(|| ApiError::unknown_agent(agent_id))?;
    Ok(Json(agent))
}

pub async fn list_events(
    State(store): State<Arc<dyn Store>>,
    State(limits): State<Arc<Limits>>,
    Path(agent_id): Path<String>,
    Query(query): Query<CountQuery>,
) -> Result<Response, ApiError> {
    let agent_id = parse_agent_id(&agent_id)?;
    let since = query.since_value()?.unwrap_or(0);
    let limit = query.limit_value(EVENTS_PAGE_LIMIT_DEFAULT, limits.events_page_limit_max)?;
    // The head is read first: events read after it may be newer, never older, so `has_more` is
    // never falsely false for the events that existed when the request came in.
    let coalesce = query.coalesce_value()?;
    let head_seq = head_for_cursor(store.as_ref(), agent_id, since).await?;
    if !coalesce {
        // The page as one text, the response's head written into the room at its front.
        let page = store.read_events_page(agent_id, since, limit, EVENTS_PAGE_HEAD_BYTES).await?;
        let next_since = page.last_seq().unwrap_or(since);
        let tail = events_page_tail(head_seq.max(next_since), next_since);
        return Ok(json_response(page.into_framed(&events_page_head(agent_id), &tail)));
    }
    let mut events = store.read_events_json(agent_id, since, limit).await?;
    let next_since = events.last().map_or(since, |event| event.seq);
    let head_seq = head_seq.max(next_since);
    if coalesce {
        // `limit` counts seqs read; the page may hold fewer, merged events, and ends at the
        // same seq.
        let page: Vec<&EventJson> = events.iter().collect();
        let merged = crate::delivery::subscription::coalesce_json(&page).map_err(|error| {
            ApiError::internal(format!("cannot read events back to coalesce them: {error}"))
        })?;
        if let Some(merged) = merged {
            events = merged;
        }
    }
    Ok(events_page_response(agent_id, &events, head_seq, next_since))
}

/// An [`app::protocol::EventsPage`] as serde writes it, around events that are JSON already.
fn events_page_response(
    agent_id: Uuid,
    events: &[EventJson],
    head_seq: u64,
    next_since: u64,
) -> Response {
    let page = JsonPage::from_events(EVENTS_PAGE_HEAD_BYTES, events);
    json_response(
        page.into_framed(&events_page_head(agent_id), &events_page_tail(head_seq, next_since)),
    )
}

/// `{"agent_id":"…","events":[`: an events page up to its first event.
const EVENTS_PAGE_HEAD_BYTES: usize = r#"{"agent_id":""#.len() + 36 + r#"","events":["#.len();

fn events_page_head(agent_id: Uuid) -> String {
    let mut head = String::with_capacity(EVENTS_PAGE_HEAD_BYTES);
    head.push_str(r#"{"agent_id":""#);
    head.push_str(agent_id.hyphenated().encode_lower(&mut Uuid::encode_buffer()));
    head.push_str(r#"","events":["#);
    head
}

/// An events page from the end of its array on.
fn events_page_tail(head_seq: u64, next_since: u64) -> String {
    let has_more = next_since < head_seq;
    format!(r#"],"head_seq":{head_seq},"next_since":{next_since},"has_more":{has_more}}}"#)
}

fn json_response(body: String) -> Response {
    ([(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub use crate::agent::cancel::CANCEL_WAIT_MS_MAX;
/// Any other `/v1/…` path: a JSON 404 rather than the HTML page-not-found.
pub async fn unknown_route() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "unknown_route", "no such API path")
}

/// A known `/v1/…` path with a method it does not take: a JSON 405 rather than an empty one.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this API path does not take that method",
    )
}

/// Liveness: the process answers. Nothing else is looked at (see [`readyz`]).
pub async fn healthz() -> &'static str {
    "ok"
}

/// How long `/readyz` waits for the database before calling it down.
pub const READYZ_DATABASE_WAIT_MS: u64 = 2_000;

/// Readiness: the database answers a real query, the writer is running and (PostgreSQL) the
/// notice listener is up. 200 with each part's state, or 503 naming what is down.
pub async fn readyz(State(readiness): State<Readiness>) -> Response {
    let wait = std::time::Duration::from_millis(READYZ_DATABASE_WAIT_MS);
    let database = match tokio::time::timeout(wait, readiness.store.head_seq(Uuid::nil())).await {
        Ok(Ok(_)) => "ok".to_owned(),
        // The error itself goes to the operator's log: it may name hosts, users or paths,
        // and this route answers without a token.
        Ok(Err(error)) => {
            tracing::warn!(%error, "readiness: the database did not answer");
            "down: the database did not answer (the server's log says why)".to_owned()
        }
        Err(_) => format!("down: no answer within {READYZ_DATABASE_WAIT_MS} ms"),
    };
    let writer = if readiness.writer.is_running() { "ok" } else { "down: the writer has stopped" };
    let mut checks = serde_json::json!({ "database": database, "writer": writer });
    if let Some(cluster) = &readiness.cluster {
        checks["listener"] = serde_json::json!(if cluster.is_listening() {
            "ok"
        } else {
            "down: not listening for other servers' commits (reconnecting)"
        });
    }
    let ready = checks.as_object().is_some_and(|checks| checks.values().all(|state| state == "ok"));
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let body = serde_json::json!({ "ready": ready, "checks": checks });
    (status, Json(body)).into_response()
}

/// What `/readyz` looks at: the database, the writer and (PostgreSQL) the notice listener.
#[derive(Clone)]
pub struct Readiness {
    pub store: Arc<dyn Store>,
    pub writer: crate::delivery::writer::Writer,
    pub cluster: Option<Arc<Cluster>>,
}
