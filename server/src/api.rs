//! The REST surface: agents, the paged log, runs.

use app::protocol::{
    CancelRequest, CancelResponse, CreateAgentRequest, CreateRunRequest, RunAccepted,
};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use uuid::Uuid;

use crate::agent::RunOptions;
use crate::error::{ApiError, ApiJson};
use crate::store::{EventJson, NewAgent};
use crate::AppState;

/// Events per page when the client does not say.
pub const EVENTS_PAGE_LIMIT_DEFAULT: u32 = 100;
/// Events per page at most: one page stays a few hundred kilobytes.
pub const EVENTS_PAGE_LIMIT_MAX: u32 = 1000;
/// Agents listed at most (and the most a list's cursors reach back).
pub const AGENTS_LIST_LIMIT_MAX: u32 = 1000;
/// Agents listed when the client does not say.
pub const AGENTS_LIST_LIMIT_DEFAULT: u32 = 100;
/// A user message longer than this is refused; the request body limit is a little above it.
pub const RUN_CONTENT_BYTES_MAX: usize = 32 * 1024;
/// Agent names longer than this are refused.
pub const AGENT_NAME_CHARS_MAX: usize = 200;

/// Parses a path id, with an error that says which id was wrong.
pub fn parse_agent_id(text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text).map_err(|_| {
        ApiError::bad_request("invalid_id", format!("agent id {text:?} is not a UUID"))
    })
}

/// Parses a non-negative integer query parameter, naming it in the error.
fn parse_count(name: &str, text: Option<&str>) -> Result<Option<u64>, ApiError> {
    let Some(text) = text else { return Ok(None) };
    text.parse::<u64>().map(Some).map_err(|_| {
        ApiError::bad_request(
            "invalid_query",
            format!("{name}={text:?} is not a non-negative integer"),
        )
    })
}

/// Query parameters are taken as text and parsed here, so every bad value gets a sentence that
/// names it.
#[derive(Debug, Deserialize)]
pub struct CountQuery {
    since: Option<String>,
    limit: Option<String>,
    coalesce: Option<String>,
}

impl CountQuery {
    /// `since`, parsed, if given.
    pub fn since_value(&self) -> Result<Option<u64>, ApiError> {
        parse_count("since", self.since.as_deref())
    }

    /// `coalesce=true|false` (also `1|0`): merge runs of token appends ([`app::coalesce`]).
    /// Off when absent.
    pub fn coalesce_value(&self) -> Result<bool, ApiError> {
        match self.coalesce.as_deref() {
            None | Some("false" | "0") => Ok(false),
            Some("true" | "1") => Ok(true),
            Some(other) => Err(ApiError::bad_request(
                "invalid_query",
                format!("coalesce={other:?} is not true or false"),
            )),
        }
    }
}

fn page_limit(text: Option<&str>, default: u32, max: u32) -> Result<u32, ApiError> {
    match parse_count("limit", text)? {
        None => Ok(default),
        Some(0) => Err(ApiError::bad_request(
            "invalid_query",
            "limit must be at least 1",
        )),
        Some(limit) if limit > max as u64 => Err(ApiError::bad_request(
            "limit_too_large",
            format!("limit={limit} is over the maximum of {max}"),
        )),
        Some(limit) => Ok(limit as u32),
    }
}

pub async fn create_agent(
    State(state): State<AppState>,
    ApiJson(request): ApiJson<CreateAgentRequest>,
) -> Result<impl IntoResponse, ApiError> {
    create_agent_inner(&state, request).await
}

async fn create_agent_inner(
    state: &AppState,
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
    let metadata = request.metadata.unwrap_or(serde_json::Value::Null);
    if let Some(provider) = metadata.get("provider") {
        let probe = app::protocol::Agent {
            id: Uuid::nil(),
            name: String::new(),
            system: None,
            description: None,
            model: None,
            metadata: serde_json::json!({ "provider": provider }),
            tags: Vec::new(),
            head_seq: 0,
            created_at: Default::default(),
        };
        if provider.as_str().is_none() {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_body",
                "metadata.provider must be a string",
            ));
        }
        state.runs.check_provider(&probe)?;
    }
    let agent = state
        .store
        .create_agent(NewAgent {
            name,
            system: request.system,
            description: request.description,
            model: request.model,
            metadata,
            tags: request.tags.unwrap_or_default(),
        })
        .await?;
    Ok((StatusCode::CREATED, Json(agent)))
}

/// `GET /v1/agents` takes Letta's list parameters; others Letta has (filters by project,
/// template, tags …) are accepted and ignored.
#[derive(Debug, Deserialize)]
pub struct ListQuery {
    limit: Option<String>,
    after: Option<String>,
    before: Option<String>,
    order: Option<String>,
}

impl ListQuery {
    /// True for newest first: Letta's default.
    pub fn descending(&self) -> Result<bool, ApiError> {
        match self.order.as_deref() {
            None | Some("desc") => Ok(true),
            Some("asc") => Ok(false),
            Some(other) => Err(ApiError::bad_request(
                "invalid_query",
                format!("order={other:?}: use asc or desc"),
            )),
        }
    }

    /// One page of `items` (in list order): after the item `after`, before the item `before`,
    /// at most `limit` — Letta's id cursors.
    pub fn page<T>(
        &self,
        mut items: Vec<T>,
        id: impl Fn(&T) -> String,
        default: u32,
        max: u32,
    ) -> Result<Vec<T>, ApiError> {
        let limit = page_limit(self.limit.as_deref(), default, max)? as usize;
        let position = |cursor: &str, name: &str| {
            items
                .iter()
                .position(|item| id(item) == cursor)
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "invalid_cursor",
                        format!("{name}={cursor:?} is not in this list"),
                    )
                })
        };
        let end = match &self.before {
            Some(before) => position(before, "before")?,
            None => items.len(),
        };
        let start = match &self.after {
            Some(after) => position(after, "after")? + 1,
            None => 0,
        };
        items.truncate(end);
        let mut page: Vec<T> = items.into_iter().skip(start).collect();
        if self.before.is_some() && self.after.is_none() {
            // Paging backwards: the `limit` items nearest the cursor.
            let skip = page.len().saturating_sub(limit);
            page.drain(..skip);
        }
        page.truncate(limit);
        Ok(page)
    }
}

/// `GET /v1/agents` (and `/v1/agents/`): Letta's bare array of agents, newest first.
pub async fn list_agents(
    State(state): State<AppState>,
    Query(query): Query<ListQuery>,
) -> Result<Json<Vec<app::protocol::Agent>>, ApiError> {
    let mut agents = state.store.list_agents(AGENTS_LIST_LIMIT_MAX).await?;
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
    State(state): State<AppState>,
    Path(agent_id): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    let agent_id = parse_agent_id(&agent_id)?;
    let agent = state
        .store
        .get_agent(agent_id)
        .await?
        .ok_or_else(|| ApiError::unknown_agent(agent_id))?;
    Ok(Json(agent))
}

pub async fn delete_agent(
    State(state): State<AppState>,
    Path(agent_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let agent_id = parse_agent_id(&agent_id)?;
    state.runs.cancel(agent_id, None);
    if !state.store.delete_agent(agent_id).await? {
        return Err(ApiError::unknown_agent(agent_id));
    }
    state.hub.close(agent_id);
    state.snapshots.remove(agent_id);
    Ok(StatusCode::NO_CONTENT)
}

/// The agent's head seq, after checking that `since` can be resumed from: the agent exists and
/// the cursor is not beyond its log (a cursor from another log, or a reset database).
pub async fn head_for_cursor(
    state: &AppState,
    agent_id: Uuid,
    since: u64,
) -> Result<u64, ApiError> {
    let head_seq = state
        .store
        .head_seq(agent_id)
        .await?
        .ok_or_else(|| ApiError::unknown_agent(agent_id))?;
    if since > head_seq {
        return Err(ApiError::bad_request(
            "since_beyond_head",
            format!("since={since} is beyond the newest event of this agent (seq {head_seq})"),
        ));
    }
    Ok(head_seq)
}

pub async fn list_events(
    State(state): State<AppState>,
    Path(agent_id): Path<String>,
    Query(query): Query<CountQuery>,
) -> Result<Response, ApiError> {
    let agent_id = parse_agent_id(&agent_id)?;
    let since = parse_count("since", query.since.as_deref())?.unwrap_or(0);
    let limit = page_limit(
        query.limit.as_deref(),
        EVENTS_PAGE_LIMIT_DEFAULT,
        state.limits.events_page_limit_max,
    )?;
    // The head is read first: events read after it may be newer, never older, so `has_more` is
    // never falsely false for the events that existed when the request came in.
    let coalesce = query.coalesce_value()?;
    let head_seq = head_for_cursor(&state, agent_id, since).await?;
    let mut events = state.store.read_events_json(agent_id, since, limit).await?;
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
    Ok(events_page_response(
        agent_id, &events, head_seq, next_since,
    ))
}

/// An [`app::protocol::EventsPage`] as serde writes it, around events that are JSON already.
fn events_page_response(
    agent_id: Uuid,
    events: &[EventJson],
    head_seq: u64,
    next_since: u64,
) -> Response {
    use std::fmt::Write as _;
    let mut body = String::with_capacity(EventJson::array_len(events) + 160);
    let _ = write!(body, r#"{{"agent_id":"{agent_id}","events":"#);
    EventJson::write_array(events, &mut body);
    let has_more = next_since < head_seq;
    let _ = write!(
        body,
        r#","head_seq":{head_seq},"next_since":{next_since},"has_more":{has_more}}}"#
    );
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// Idempotency keys longer than this are refused.
pub const IDEMPOTENCY_KEY_CHARS_MAX: usize = 200;

pub async fn create_run(
    State(state): State<AppState>,
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
    create_run_inner(&state, agent_id, request).await
}

async fn create_run_inner(
    state: &AppState,
    agent_id: Uuid,
    request: CreateRunRequest,
) -> Result<(StatusCode, Json<RunAccepted>), ApiError> {
    let key = request.idempotency_key.as_deref();
    let started = start_run(state, agent_id, request.content, key, RunOptions::default()).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(RunAccepted {
            run_id: started.run_id,
            agent_id,
        }),
    ))
}

/// A run that a request started, or found when it was a retry.
#[derive(Clone, Copy, Debug)]
pub struct StartedRun {
    pub run_id: Uuid,
    /// The seq of the log's head just before this request started the run: every event of the
    /// run has a greater seq. `None` when the request was a retry and found an earlier run.
    pub after_seq: Option<u64>,
}

/// Starts a run of `agent_id` for the user message `content`, from any surface (native REST,
/// Letta, the page form). With an idempotency `key`, a retry of the same request starts nothing
/// and gets the first request's run back.
pub async fn start_run(
    state: &AppState,
    agent_id: Uuid,
    content: String,
    key: Option<&str>,
    options: RunOptions,
) -> Result<StartedRun, ApiError> {
    if content.trim().is_empty() {
        return Err(ApiError::bad_request(
            "invalid_body",
            "content must not be empty",
        ));
    }
    if content.len() > RUN_CONTENT_BYTES_MAX {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "content_too_large",
            format!("content is over {RUN_CONTENT_BYTES_MAX} bytes"),
        ));
    }
    let agent = state
        .store
        .get_agent(agent_id)
        .await?
        .ok_or_else(|| ApiError::unknown_agent(agent_id))?;
    // v7 (time-ordered) like event ids: the run index grows at its end.
    let run_id = Uuid::now_v7();
    let key = key.map(str::trim).filter(|key| !key.is_empty());
    if let Some(key) = key {
        if key.chars().count() > IDEMPOTENCY_KEY_CHARS_MAX {
            return Err(ApiError::bad_request(
                "invalid_idempotency_key",
                format!(
                    "the idempotency key is longer than {IDEMPOTENCY_KEY_CHARS_MAX} characters"
                ),
            ));
        }
        let holder = state.store.claim_run_key(agent_id, key, run_id).await?;
        if holder != run_id {
            // A retry: the first request's run, started or finished, is the answer.
            return Ok(StartedRun {
                run_id: holder,
                after_seq: None,
            });
        }
    }
    match start_claimed_run(state, &agent, run_id, content, options).await {
        Ok(after_seq) => Ok(StartedRun {
            run_id,
            after_seq: Some(after_seq),
        }),
        Err(error) => {
            if let Some(key) = key {
                // The run never started: a retry with this key may try again.
                state.store.release_run_key(agent_id, key).await?;
            }
            Err(error)
        }
    }
}

/// Starts the run; returns the head seq just before it (one run per agent: nothing else writes
/// to this log until the run ends).
async fn start_claimed_run(
    state: &AppState,
    agent: &app::protocol::Agent,
    run_id: Uuid,
    content: String,
    options: RunOptions,
) -> Result<u64, ApiError> {
    let agent_id = agent.id;
    if let Some(running) = state.runs.active_run_after_ending(agent_id).await {
        return Err(crate::agent::StartRunError::RunInProgress {
            agent_id,
            run_id: running,
        }
        .into());
    }
    // With several servers on one database, the agent's one run slot is taken in the database
    // (this server owns the run; the slot goes with the run's terminal event).
    let cluster = state.cluster.as_ref().map(|cluster| &cluster.store);
    if let Some(cluster) = cluster {
        if let Some(running) = cluster.claim_agent_run(agent_id, run_id).await? {
            return Err(crate::agent::StartRunError::RunInProgress {
                agent_id,
                run_id: running,
            }
            .into());
        }
    }
    let started = async {
        // The model sees the conversation so far, rebuilt from the log by the shared reducer.
        let timeline =
            crate::history::fold_log(state.store.as_ref(), &state.snapshots, agent_id).await?;
        let (prior, warnings) = crate::history::conversation_from_timeline(&timeline);
        for warning in warnings {
            tracing::warn!(%agent_id, "history for the next turn: {warning}");
        }
        // The fold read the whole log: its last seq is the head the run's events come after.
        let head_seq = timeline.last_seq();
        state.runs.start(agent, run_id, prior, content, options)?;
        Ok::<u64, ApiError>(head_seq)
    }
    .await;
    if let (Err(_), Some(cluster)) = (&started, cluster) {
        // The run never started: free the slot now rather than when its lease runs out.
        if let Err(error) = cluster.release_agent_run(agent_id, run_id).await {
            tracing::warn!(%agent_id, %run_id, %error, "could not free the run slot");
        }
    }
    started
}

/// A JSON body that may be left out (empty or blank = all defaults), with the same errors as
/// [`ApiJson`] for what is there.
pub fn optional_json_body<T: serde::de::DeserializeOwned + Default>(
    body: &[u8],
    what: &str,
) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|error| body_error(&error, what))
}

/// The answer to a JSON body that did not parse: 400 when it is not JSON, 422 when it is JSON of
/// the wrong shape — the same as [`ApiJson`]'s.
pub fn body_error(error: &serde_json::Error, what: &str) -> ApiError {
    let (status, code) = if error.is_data() {
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid_body")
    } else {
        (StatusCode::BAD_REQUEST, "malformed_json")
    };
    ApiError::new(status, code, format!("cannot read the {what}: {error}"))
}

/// How long a cancel request waits for the run to write its last event before answering. A run
/// stops within one provider step; this only bounds a stuck one.
pub const CANCEL_WAIT_MS_MAX: u64 = 5_000;

pub async fn cancel_run(
    State(state): State<AppState>,
    Path(agent_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<CancelResponse>, ApiError> {
    let agent_id = parse_agent_id(&agent_id)?;
    let request: CancelRequest = optional_json_body(&body, "cancel request")?;
    if state.store.head_seq(agent_id).await?.is_none() {
        return Err(ApiError::unknown_agent(agent_id));
    }
    let mut cancelled_run_ids = Vec::new();
    let wait = std::time::Duration::from_millis(CANCEL_WAIT_MS_MAX);
    if let Some(cancelling) = state.runs.cancel(agent_id, request.run_ids.as_deref()) {
        let run_id = cancelling.run_id;
        if !cancelling.ended_within(wait).await {
            tracing::warn!(%agent_id, %run_id, "run did not end within the cancel wait");
        }
        cancelled_run_ids.push(run_id);
    } else if let Some(cluster) = &state.cluster {
        // The run may execute on another server: ask every server, then wait for its end to
        // reach the log.
        if let Some(run_id) = cluster.store.active_run(agent_id).await? {
            if request
                .run_ids
                .as_ref()
                .is_none_or(|run_ids| run_ids.contains(&run_id))
            {
                cluster.store.send_cancel(agent_id, run_id).await?;
                if !run_ended_within(state.store.as_ref(), run_id, wait).await? {
                    tracing::warn!(%agent_id, %run_id, "run did not end within the cancel wait");
                }
                cancelled_run_ids.push(run_id);
            }
        }
    }
    Ok(Json(CancelResponse {
        agent_id,
        cancelled_run_ids,
    }))
}

/// How often a cancel of a run on another server looks in the log for the run's end.
const CANCEL_POLL_INTERVAL_MS: u64 = 20;

/// Waits (at most `wait`) until the log holds the end of `run_id`.
async fn run_ended_within(
    store: &dyn crate::store::Store,
    run_id: Uuid,
    wait: std::time::Duration,
) -> Result<bool, ApiError> {
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

pub async fn get_run(
    State(state): State<AppState>,
    Path(run_id): Path<String>,
) -> Result<Json<app::protocol::RunInfo>, ApiError> {
    let run_id = Uuid::parse_str(&run_id).map_err(|_| {
        ApiError::bad_request("invalid_id", format!("run id {run_id:?} is not a UUID"))
    })?;
    let outline = state.store.run_outline(run_id).await?;
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
            _ => event
                .content
                .get("usage")
                .filter(|usage| !usage.is_null())
                .cloned(),
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

pub async fn healthz() -> &'static str {
    "ok"
}

/// The page forms, for browsers without (or not yet running) the WebAssembly app: a plain HTML
/// form POST does the same as the API call and redirects to the page to look at next.
pub mod forms {
    use axum::extract::{Path, State};
    use axum::response::Redirect;
    use axum::Form;
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    pub struct CreateAgentForm {
        #[serde(default)]
        name: String,
    }

    /// `POST /agents` from the agents page.
    pub async fn create_agent(
        State(state): State<AppState>,
        Form(form): Form<CreateAgentForm>,
    ) -> Result<Redirect, ApiError> {
        let request = CreateAgentRequest {
            name: Some(form.name),
            ..Default::default()
        };
        let (_, Json(agent)) = super::create_agent_inner(&state, request).await?;
        Ok(Redirect::to(&format!("/agents/{}", agent.id)))
    }

    #[derive(Debug, Deserialize)]
    pub struct SendForm {
        #[serde(default)]
        content: String,
    }

    /// `POST /agents/{id}/runs` from the live view's composer.
    pub async fn send(
        State(state): State<AppState>,
        Path(agent_id): Path<String>,
        Form(form): Form<SendForm>,
    ) -> Result<Redirect, ApiError> {
        let agent_id = parse_agent_id(&agent_id)?;
        let request = CreateRunRequest {
            content: form.content,
            idempotency_key: None,
        };
        let _accepted = super::create_run_inner(&state, agent_id, request).await?;
        Ok(Redirect::to(&format!("/agents/{agent_id}")))
    }
}
