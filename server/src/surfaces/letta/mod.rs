//! Letta's agent-message API, in Letta's wire format, as one more view of the one log.
//!
//! A Letta request starts a run like any other (the run writes `AgentEvent`s to the log); the
//! answer is cut from the log by [`mapping`]: streamed as SSE (`POST …/messages/stream`, or
//! `POST …/messages` with `streaming: true`), or collected when the run ends (non-streaming).
//! `POST /v1/runs/{run_id}/stream` replays a run from a `starting_after` cursor and tails it;
//! `seq_id` is the log's seq, so the cursor is the same one the WebSocket and native SSE use.
//!
//! Disconnecting from a stream that started a run cancels the run, unless the request said
//! `background: true`. A message's `otid` makes the send idempotent: a retry re-attaches to the
//! first request's run instead of starting another.

pub mod mapping;

use std::sync::Arc;
use std::time::Duration;

use app::{AgentEvent, EventKind};
use axum::extract::FromRef;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::stream;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::agent::start::Starter;
use crate::agent::start::IDEMPOTENCY_KEY_CHARS_MAX;
use crate::agent::{RunOptions, Runs};
use crate::delivery::hub::Hub;
use crate::delivery::subscription::{self, FollowError, Form, Outbound};
use crate::http::error::{ApiError, ApiJson};
use crate::http::params::{parse_agent_id, ListQuery};
use crate::state::AppState;
use crate::store::Store;
use crate::surfaces::native::sse::SSE_KEEPALIVE_INTERVAL_MS;
use mapping::{Cut, LettaItem, LettaMapper};

/// What Letta's handlers use of the server: the log, the live rooms, the runs and how to start
/// one, and the ping interval of streams that ask for pings.
#[derive(Clone)]
pub struct LettaState {
    pub store: Arc<dyn Store>,
    pub hub: Arc<Hub>,
    pub runs: Arc<Runs>,
    pub starter: Starter,
    pub ping_interval: Duration,
}

impl FromRef<AppState> for LettaState {
    fn from_ref(state: &AppState) -> Self {
        LettaState {
            store: state.store.clone(),
            hub: state.hub.clone(),
            runs: state.runs.clone(),
            starter: state.starter.clone(),
            ping_interval: state.letta_ping_interval,
        }
    }
}

/// Letta items queued between a run's feed and its HTTP response. A slower reader makes the feed
/// wait; the feed's log subscription then lags and catches up from the store, so the agent never
/// waits for a reader and nothing is lost.
pub const LETTA_FEED_ITEMS_MAX: usize = 64;
/// Log messages queued between the subscription and the feed that cuts them into Letta items.
const FEED_LOG_MESSAGES_MAX: usize = 16;
/// How long a retried send waits for the first request's run to appear in the log.
pub const RUN_ATTACH_WAIT_MS_MAX: u64 = 5_000;
/// Letta messages per page of `GET /v1/agents/{id}/messages` when the client does not say.
pub const MESSAGES_PAGE_LIMIT_DEFAULT: u32 = 100;
/// Letta messages per page at most.
pub const MESSAGES_PAGE_LIMIT_MAX: u32 = 1000;
/// Events of one agent's log the message list folds at most; a longer log answers 413 (use the
/// native paged `GET /v1/agents/{id}/events`).
pub const MESSAGES_LOG_EVENTS_MAX: usize = 200_000;
/// The otid is the idempotency key of a send (prefixed, to keep it apart from the native key).
const OTID_KEY_PREFIX: &str = "otid:";

/// The body of `POST /v1/agents/{id}/messages` and `…/messages/stream`. Fields Letta has that
/// are not listed (`assistant_message_tool_name`, `enable_thinking`, `client_tools`, …) are
/// accepted and ignored.
#[derive(Debug, Deserialize)]
pub struct LettaRequest {
    #[serde(default)]
    messages: Option<Vec<MessageCreate>>,
    /// Shorthand for one user message.
    #[serde(default)]
    input: Option<Content>,
    #[serde(default)]
    streaming: Option<bool>,
    #[serde(default)]
    stream_tokens: Option<bool>,
    #[serde(default)]
    background: Option<bool>,
    #[serde(default)]
    include_pings: Option<bool>,
    #[serde(default)]
    max_steps: Option<u32>,
    #[serde(default)]
    include_return_message_types: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
struct MessageCreate {
    role: String,
    content: Content,
    #[serde(default)]
    otid: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Deserialize)]
struct ContentPart {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

impl Content {
    fn text(&self) -> Result<String, ApiError> {
        match self {
            Content::Text(text) => Ok(text.clone()),
            Content::Parts(parts) => parts
                .iter()
                .map(|part| match (part.kind.as_str(), &part.text) {
                    ("text", Some(text)) => Ok(text.as_str()),
                    (kind, _) => Err(unprocessable(format!(
                        "content of type {kind:?} is not supported; send text"
                    ))),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(|texts| texts.join("\n")),
        }
    }
}

fn unprocessable(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", message)
}

impl LettaRequest {
    /// The user's text and the client's otid for it.
    fn user_message(&self) -> Result<(String, Option<String>), ApiError> {
        if let Some(messages) = self
            .messages
            .as_ref()
            .filter(|messages| !messages.is_empty())
        {
            let mut texts = Vec::with_capacity(messages.len());
            for message in messages {
                if message.role != "user" {
                    return Err(unprocessable(format!(
                        "role {:?}: only user messages can be sent",
                        message.role
                    )));
                }
                texts.push(message.content.text()?);
            }
            let otid = messages.iter().find_map(|message| message.otid.clone());
            return Ok((texts.join("\n\n"), otid));
        }
        match &self.input {
            Some(input) => Ok((input.text()?, None)),
            None => Err(unprocessable("messages (or input) is required")),
        }
    }

    fn cut(&self) -> Cut {
        if self.stream_tokens.unwrap_or(false) {
            Cut::Tokens
        } else {
            Cut::Steps
        }
    }
}

/// Reads a Letta send body as the handlers do: the user's text and the client's otid, or the
/// error the client would get. (The fuzz targets drive this with arbitrary bytes.)
pub fn parse_request(body: &[u8]) -> Result<(String, Option<String>), ApiError> {
    let request: LettaRequest = serde_json::from_slice(body)
        .map_err(|error| crate::http::params::body_error(&error, "request"))?;
    request.user_message()
}

/// `POST /v1/agents/{id}/messages`: the run's messages when it ends, or with `streaming: true`
/// the same as `…/messages/stream`.
pub async fn send_message(
    State(state): State<LettaState>,
    Path(agent_id): Path<String>,
    ApiJson(request): ApiJson<LettaRequest>,
) -> Result<Response, ApiError> {
    let agent_id = parse_agent_id(&agent_id)?;
    if request.streaming.unwrap_or(false) {
        return stream_run_request(state, agent_id, request).await;
    }
    let attached = attach(&state, agent_id, &request).await?;
    // Dropped if the client goes away before the run ends: a foreground run is then cancelled.
    let mut guard = attached.guard;
    let mut items = feed(
        state.clone(),
        agent_id,
        attached.run_id,
        attached.after_seq,
        Cut::Steps,
        0,
    );
    let mut messages = Vec::new();
    let mut stop_reason = json!({ "message_type": "stop_reason", "stop_reason": "error" });
    let mut usage = json!({ "message_type": "usage_statistics" });
    while let Some(item) = items.recv().await {
        let item = item.map_err(|error| ApiError::internal(format!("run feed: {error}")))?;
        match &item {
            LettaItem::Message(message)
                if message.body_type() != "user_message"
                    && wanted(&request.include_return_message_types, message.body_type()) =>
            {
                messages.push(item.to_json())
            }
            LettaItem::Message(_) => {}
            LettaItem::StopReason { .. } => stop_reason = item.to_json(),
            LettaItem::Usage(_) => usage = item.to_json(),
        }
    }
    ForegroundGuard::disarm(&mut guard);
    Ok(
        Json(json!({ "messages": messages, "stop_reason": stop_reason, "usage": usage }))
            .into_response(),
    )
}

/// `POST /v1/agents/{id}/messages/stream`.
pub async fn stream_messages(
    State(state): State<LettaState>,
    Path(agent_id): Path<String>,
    ApiJson(request): ApiJson<LettaRequest>,
) -> Result<Response, ApiError> {
    let agent_id = parse_agent_id(&agent_id)?;
    stream_run_request(state, agent_id, request).await
}

async fn stream_run_request(
    state: LettaState,
    agent_id: Uuid,
    request: LettaRequest,
) -> Result<Response, ApiError> {
    let attached = attach(&state, agent_id, &request).await?;
    let items = feed(
        state.clone(),
        agent_id,
        attached.run_id,
        attached.after_seq,
        request.cut(),
        0,
    );
    Ok(sse_response(
        &state,
        items,
        attached.run_id,
        request.include_pings.unwrap_or(true),
        request.include_return_message_types,
        attached.guard,
    ))
}

/// The run a Letta send belongs to: started now, or found again for a retried otid.
struct Attached {
    run_id: Uuid,
    /// Every event of the run has a greater seq.
    after_seq: u64,
    /// Cancels the run when dropped, unless the request asked for `background`.
    guard: Option<ForegroundGuard>,
}

async fn attach(
    state: &LettaState,
    agent_id: Uuid,
    request: &LettaRequest,
) -> Result<Attached, ApiError> {
    let (text, otid) = request.user_message()?;
    if let Some(otid) = &otid {
        if otid.chars().count() > IDEMPOTENCY_KEY_CHARS_MAX - OTID_KEY_PREFIX.len() {
            return Err(ApiError::bad_request("invalid_otid", "otid is too long"));
        }
    }
    if request.max_steps == Some(0) {
        return Err(unprocessable("max_steps must be at least 1"));
    }
    let background = request.background.unwrap_or(false);
    let options = RunOptions {
        background,
        otid: otid.clone(),
        stream_tokens: Some(request.stream_tokens.unwrap_or(false)),
        iterations_max: request.max_steps,
    };
    let key = otid.as_ref().map(|otid| format!("{OTID_KEY_PREFIX}{otid}"));
    let started = state
        .starter
        .start_run(agent_id, text, key.as_deref(), options)
        .await?;
    let after_seq = match started.after_seq {
        Some(after_seq) => after_seq,
        None => run_start_seq(state, started.run_id).await? - 1,
    };
    Ok(Attached {
        run_id: started.run_id,
        after_seq,
        guard: (!background).then(|| ForegroundGuard {
            runs: state.runs.clone(),
            agent_id,
            run_id: started.run_id,
            armed: true,
        }),
    })
}

/// The seq of a run's `run_started`, waiting briefly for a run a concurrent request is starting.
async fn run_start_seq(state: &LettaState, run_id: Uuid) -> Result<u64, ApiError> {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(RUN_ATTACH_WAIT_MS_MAX);
    loop {
        let outline = state.store.run_outline(run_id).await?;
        if let Some(started) = outline
            .iter()
            .find(|event| event.kind == EventKind::RunStarted)
        {
            return Ok(started.seq);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "run_not_started",
                format!("the first request with this otid has not started run {run_id}; retry"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Cancels a foreground run when the request that started it goes away before it ends (the
/// response body, or the waiting handler, is dropped). Harmless after the run ended.
struct ForegroundGuard {
    runs: std::sync::Arc<Runs>,
    agent_id: Uuid,
    run_id: Uuid,
    /// False once the client has had the whole run: dropping then cancels nothing.
    armed: bool,
}

impl ForegroundGuard {
    fn disarm(guard: &mut Option<ForegroundGuard>) {
        if let Some(guard) = guard {
            guard.armed = false;
        }
    }
}

impl Drop for ForegroundGuard {
    fn drop(&mut self) {
        if self.armed
            && self
                .runs
                .cancel(self.agent_id, Some(&[self.run_id]))
                .is_some()
        {
            tracing::info!(agent_id = %self.agent_id, run_id = %self.run_id, "client left a foreground run: cancelled");
        }
    }
}

/// Aborts a task when dropped, so a feed that ends (or is dropped) takes its log subscription
/// with it.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Follows run `run_id` in the log from `after_seq` and cuts it into Letta items with
/// `seq_id > starting_after`. The channel closes after the run's last item (its usage), or after
/// an error item when the log cannot be followed.
fn feed(
    state: LettaState,
    agent_id: Uuid,
    run_id: Uuid,
    after_seq: u64,
    cut: Cut,
    starting_after: u64,
) -> mpsc::Receiver<Result<LettaItem, FollowError>> {
    let (items, receiver) = mpsc::channel(LETTA_FEED_ITEMS_MAX);
    tokio::spawn(async move {
        let (log_out, mut log) = mpsc::channel::<Outbound>(FEED_LOG_MESSAGES_MAX);
        let mut follower = {
            let state = state.clone();
            AbortOnDrop(tokio::spawn(async move {
                let store = state.store.as_ref();
                subscription::follow(
                    store,
                    &state.hub,
                    agent_id,
                    after_seq,
                    Form::Values,
                    &log_out,
                )
                .await
            }))
        };
        let mut mapper = LettaMapper::new(cut);
        loop {
            let Some(message) = log.recv().await else {
                let error = match (&mut follower.0).await {
                    Ok(Err(error)) => error,
                    _ => FollowError::SubscriberGone,
                };
                let _ = items.send(Err(error)).await;
                return;
            };
            let Outbound::Values { events, .. } = message else {
                // `lagged` notices: the subscription catches up from the store by itself.
                continue;
            };
            for event in events.iter().filter(|event| event.run_id == Some(run_id)) {
                for item in mapper.push(event) {
                    if item.seq_id() > starting_after && items.send(Ok(item)).await.is_err() {
                        return;
                    }
                }
                if event.kind.is_run_end() {
                    return;
                }
            }
        }
    });
    receiver
}

fn wanted(types: &Option<Vec<String>>, message_type: &str) -> bool {
    types
        .as_ref()
        .is_none_or(|types| types.iter().any(|wanted| wanted == message_type))
}

/// What the SSE response is doing.
struct Streaming {
    items: mpsc::Receiver<Result<LettaItem, FollowError>>,
    ping: Option<tokio::time::Interval>,
    run_id: Uuid,
    types: Option<Vec<String>>,
    finished: bool,
    guard: Option<ForegroundGuard>,
}

/// The Letta SSE framing: bare `data: {json}` lines, `ping`s between them when asked, a named
/// `error` event if the log cannot be followed, and `data: [DONE]` at the end.
fn sse_response(
    state: &LettaState,
    items: mpsc::Receiver<Result<LettaItem, FollowError>>,
    run_id: Uuid,
    include_pings: bool,
    types: Option<Vec<String>>,
    guard: Option<ForegroundGuard>,
) -> Response {
    let ping = include_pings.then(|| {
        let period = state.ping_interval;
        let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval
    });
    let streaming = Streaming {
        items,
        ping,
        run_id,
        types,
        finished: false,
        guard,
    };
    let events = stream::unfold(streaming, |mut streaming| async move {
        if streaming.finished {
            return None;
        }
        loop {
            let next = tokio::select! {
                item = streaming.items.recv() => Some(item),
                _ = next_ping(&mut streaming.ping) => None,
            };
            let event = match next {
                None => ping_event(streaming.run_id),
                Some(Some(Ok(item))) => {
                    if let LettaItem::Message(message) = &item {
                        if !wanted(&streaming.types, message.body_type()) {
                            continue;
                        }
                    }
                    Event::default().data(item.to_json().to_string())
                }
                Some(Some(Err(error))) => {
                    streaming.finished = true;
                    let body = json!({
                        "message_type": "error_message",
                        "error_type": error.code(),
                        "message": error.to_string(),
                        "run_id": streaming.run_id,
                    });
                    Event::default().event("error").data(body.to_string())
                }
                Some(None) => {
                    streaming.finished = true;
                    ForegroundGuard::disarm(&mut streaming.guard);
                    Event::default().data("[DONE]")
                }
            };
            return Some((Ok::<Event, std::convert::Infallible>(event), streaming));
        }
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_millis(SSE_KEEPALIVE_INTERVAL_MS)))
        .into_response()
}

async fn next_ping(ping: &mut Option<tokio::time::Interval>) {
    match ping {
        Some(interval) => {
            interval.tick().await;
        }
        None => std::future::pending().await,
    }
}

fn ping_event(run_id: Uuid) -> Event {
    let ping = json!({
        "id": format!("ping-{}", Uuid::new_v4()),
        "date": chrono::Utc::now(),
        "message_type": "ping",
        "run_id": run_id,
    });
    Event::default().data(ping.to_string())
}

/// The body of `POST /v1/runs/{run_id}/stream`; Letta's `poll_interval` and `batch_size` are
/// accepted and ignored (the stream is pushed, not polled).
#[derive(Debug, Default, Deserialize)]
pub struct ResumeRequest {
    #[serde(default)]
    starting_after: Option<u64>,
    #[serde(default)]
    include_pings: Option<bool>,
}

/// `POST /v1/runs/{run_id}/stream`: the run's items after `starting_after` (a `seq_id`), then
/// live until the run ends. Any run can be resumed, finished or not, background or not; resuming
/// never cancels.
pub async fn resume_run(
    State(state): State<LettaState>,
    Path(run_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let run_id = Uuid::parse_str(&run_id).map_err(|_| {
        ApiError::bad_request("invalid_id", format!("run id {run_id:?} is not a UUID"))
    })?;
    let request: ResumeRequest = crate::http::params::optional_json_body(&body, "resume request")?;
    let outline = state.store.run_outline(run_id).await?;
    let started = outline
        .iter()
        .find(|event| event.kind == EventKind::RunStarted)
        .ok_or_else(|| ApiError::unknown_run(run_id))?;
    let agent_id = started.agent_id;
    let starting_after = request.starting_after.unwrap_or(0);
    crate::http::params::head_for_cursor(state.store.as_ref(), agent_id, starting_after).await?;
    let cut = match started
        .metadata
        .get("stream_tokens")
        .and_then(Value::as_bool)
    {
        Some(false) => Cut::Steps,
        _ => Cut::Tokens,
    };
    let items = feed(
        state.clone(),
        agent_id,
        run_id,
        started.seq - 1,
        cut,
        starting_after,
    );
    Ok(sse_response(
        &state,
        items,
        run_id,
        request.include_pings.unwrap_or(true),
        None,
        None,
    ))
}

/// `GET /v1/agents/{id}/messages`: the conversation as whole Letta messages, newest first unless
/// `order=asc`, paged by message id (`after`, `before`, `limit`).
pub async fn list_messages(
    State(state): State<LettaState>,
    Path(agent_id): Path<String>,
    Query(query): Query<ListQuery>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let agent_id = parse_agent_id(&agent_id)?;
    let descending = query.descending()?;
    if state.store.head_seq(agent_id).await?.is_none() {
        return Err(ApiError::unknown_agent(agent_id));
    }
    let events = read_log(&state, agent_id).await?;
    let mut messages: Vec<Value> = mapping::map_all(Cut::Steps, &events)
        .into_iter()
        .filter(|item| matches!(item, LettaItem::Message(_)))
        .map(|item| item.to_json())
        .collect();
    if descending {
        messages.reverse();
    }
    let page = query.page(
        messages,
        |message| message["id"].as_str().unwrap_or_default().to_owned(),
        MESSAGES_PAGE_LIMIT_DEFAULT,
        MESSAGES_PAGE_LIMIT_MAX,
    )?;
    Ok(Json(page))
}

async fn read_log(state: &LettaState, agent_id: Uuid) -> Result<Vec<AgentEvent>, ApiError> {
    const PAGE_EVENTS: u32 = 1000;
    let mut events: Vec<AgentEvent> = Vec::new();
    loop {
        let since = events.last().map_or(0, |event| event.seq);
        let page = state
            .store
            .read_events(agent_id, since, PAGE_EVENTS)
            .await?;
        let full = page.len() as u32 == PAGE_EVENTS;
        events.extend(page);
        if events.len() > MESSAGES_LOG_EVENTS_MAX {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "log_too_long",
                format!(
                    "this agent's log has over {MESSAGES_LOG_EVENTS_MAX} events; page it with GET /v1/agents/{agent_id}/events"
                ),
            ));
        }
        if !full {
            return Ok(events);
        }
    }
}
