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
mod request;
mod state;
mod stream;
pub mod wire;

use crate::surfaces::run_feed::ForegroundGuard;
use request::unprocessable;
pub use request::{parse_request, ApprovalTarget, LettaAsked, LettaRequest};
use stream::{feed, sse_response, wanted, Shape};

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::agent::approval::ApprovalDecision;
use crate::agent::branch::followed_log;
use crate::agent::history::fold_log;
use crate::agent::RunOptions;
use crate::http::caller::Caller;
use crate::http::error::{ApiError, ApiJson};
use crate::http::params::{parse_agent_id, ListQuery};
use crate::http::token::Scope;
use crate::limits::CLIENT_IDEMPOTENCY_KEY_CHARS_MAX;
use crate::surfaces::run_feed::run_start_seq;
use mapping::{Cut, LettaItem};
pub use state::LettaState;

/// Letta messages per page of `GET /v1/agents/{id}/messages` when the client does not say.
pub const MESSAGES_PAGE_LIMIT_DEFAULT: u32 = 100;
/// Letta messages per page at most.
pub const MESSAGES_PAGE_LIMIT_MAX: u32 = 1000;
/// The otid is the idempotency key of a send (prefixed, to keep it apart from the native key).
const OTID_KEY_PREFIX: &str = "otid:";

/// The log a send to `agent_id` goes to: a conversation's id follows its current branch (a
/// branch's id names that branch).
async fn followed(state: &LettaState, agent_id: &str) -> Result<Uuid, ApiError> {
    Ok(followed_log(state.store.as_ref(), parse_agent_id(agent_id)?).await?)
}

/// `POST /v1/agents/{id}/messages`: the run's messages when it ends, or with `streaming: true`
/// the same as `…/messages/stream`.
pub async fn send_message(
    State(state): State<LettaState>,
    caller: Caller,
    Path(agent_id): Path<String>,
    ApiJson(request): ApiJson<LettaRequest>,
) -> Result<Response, ApiError> {
    let agent_id = followed(&state, &agent_id).await?;
    if request.streaming.unwrap_or(false) {
        return stream_run_request(state, &caller, agent_id, request).await;
    }
    // Waiting for the run's end holds a connection like a stream does.
    let _slot = crate::surfaces::stream_slot(&state.sse_streams, state.sse_streams_max)?;
    let attached = attach(&state, &caller, agent_id, &request).await?;
    // Dropped if the client goes away before the run ends: a foreground run is then cancelled.
    let mut guard = attached.guard;
    let mut items =
        feed(state.clone(), agent_id, attached.run_id, attached.after_seq, Cut::Steps, 0);
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
    Ok(Json(json!({ "messages": messages, "stop_reason": stop_reason, "usage": usage }))
        .into_response())
}

/// `POST /v1/agents/{id}/messages/stream`: `…/messages` with `streaming: true`.
pub async fn stream_messages(
    state: State<LettaState>,
    caller: Caller,
    agent_id: Path<String>,
    ApiJson(mut request): ApiJson<LettaRequest>,
) -> Result<Response, ApiError> {
    request.streaming = Some(true);
    send_message(state, caller, agent_id, ApiJson(request)).await
}

async fn stream_run_request(
    state: LettaState,
    caller: &Caller,
    agent_id: Uuid,
    request: LettaRequest,
) -> Result<Response, ApiError> {
    // The stream's slot first: refused, nothing starts.
    let slot = crate::surfaces::stream_slot(&state.sse_streams, state.sse_streams_max)?;
    let attached = attach(&state, caller, agent_id, &request).await?;
    let items =
        feed(state.clone(), agent_id, attached.run_id, attached.after_seq, request.cut(), 0);
    Ok(sse_response(
        &state,
        items,
        attached.run_id,
        Shape {
            include_pings: request.include_pings.unwrap_or(true),
            types: request.include_return_message_types,
        },
        attached.guard,
        slot,
        caller.expires_at(),
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
    caller: &Caller,
    agent_id: Uuid,
    request: &LettaRequest,
) -> Result<Attached, ApiError> {
    let asked = request.asked()?;
    // A new turn, or the client's own tools' results, need `write`; a person's answer
    // `approve`; a request with both needs both.
    match &asked {
        LettaAsked::Approvals(answers) => {
            if answers.iter().any(|answer| answer.returned.is_none()) {
                caller.require(Scope::Approve)?;
            }
            if answers.iter().any(|answer| answer.returned.is_some()) {
                caller.require(Scope::Write)?;
            }
        }
        _ => caller.require(Scope::Write)?,
    }
    if let LettaAsked::Message { otid: Some(otid), .. } = &asked {
        if otid.chars().count() > CLIENT_IDEMPOTENCY_KEY_CHARS_MAX {
            return Err(ApiError::bad_request("invalid_otid", "otid is too long"));
        }
    }
    if request.max_steps == Some(0) {
        return Err(unprocessable("max_steps must be at least 1"));
    }
    let background = request.background.unwrap_or(false);
    let otid = match &asked {
        LettaAsked::Message { otid, .. } => otid.clone(),
        LettaAsked::Approvals(_) => None,
    };
    let options = RunOptions {
        background,
        otid: otid.clone(),
        stream_tokens: Some(request.stream_tokens.unwrap_or(false)),
        iterations_max: request.max_steps,
        client: None,
        run_id: None,
        client_tools: request.client_tools()?,
        answered_by_server: false,
        instructions: None,
    };
    let started = match asked {
        LettaAsked::Message { text, .. } => {
            let key = otid.as_ref().map(|otid| format!("{OTID_KEY_PREFIX}{otid}"));
            state.starter.start_run(agent_id, text, key.as_deref(), options).await?
        }
        LettaAsked::Approvals(answers) => {
            let mut decisions = Vec::with_capacity(answers.len());
            for answer in answers {
                let tool_call_id = match answer.target {
                    ApprovalTarget::CallId(id) => id,
                    ApprovalTarget::RequestId(id) => call_of_request(state, agent_id, id).await?,
                };
                decisions.push(ApprovalDecision {
                    tool_call_id,
                    approve: answer.approve,
                    reason: answer.reason,
                    output: answer.returned,
                });
            }
            state.starter.answer_approvals(agent_id, decisions, options).await?
        }
    };
    let after_seq = match started.after_seq {
        Some(after_seq) => after_seq,
        None => run_start_seq(state.store.as_ref(), started.run_id).await? - 1,
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

/// The call an `approval_request_id` (an `approval_request_message`'s id) asks about; the id
/// itself when no request has it (the answer is then refused as unknown).
async fn call_of_request(
    state: &LettaState,
    agent_id: Uuid,
    request_id: String,
) -> Result<String, ApiError> {
    let timeline = fold_log(state.store.as_ref(), &state.starter.snapshots, agent_id).await?;
    let call = app::approvals::approvals(&timeline)
        .into_iter()
        .find(|approval| {
            app::approvals::letta_request_id(approval.request.message_id) == request_id
        })
        .map(|approval| approval.tool_call_id.to_owned());
    Ok(call.unwrap_or(request_id))
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
    caller: Caller,
    Path(run_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let run_id = Uuid::parse_str(&run_id).map_err(|_| {
        ApiError::bad_request("invalid_id", format!("run id {run_id:?} is not a UUID"))
    })?;
    let request: ResumeRequest = crate::http::params::optional_json_body(&body, "resume request")?;
    let started =
        state.store.run_start(run_id).await?.ok_or_else(|| ApiError::unknown_run(run_id))?;
    let agent_id = started.agent_id;
    let starting_after = request.starting_after.unwrap_or(0);
    crate::http::params::head_for_cursor(state.store.as_ref(), agent_id, starting_after).await?;
    let cut = match started.metadata.get("stream_tokens").and_then(Value::as_bool) {
        Some(false) => Cut::Steps,
        _ => Cut::Tokens,
    };
    let slot = crate::surfaces::stream_slot(&state.sse_streams, state.sse_streams_max)?;
    let items = feed(state.clone(), agent_id, run_id, started.seq - 1, cut, starting_after);
    Ok(sse_response(
        &state,
        items,
        run_id,
        Shape { include_pings: request.include_pings.unwrap_or(true), types: None },
        None,
        slot,
        caller.expires_at(),
    ))
}

/// `GET /v1/agents/{id}/messages`: the conversation as whole Letta messages, newest first unless
/// `order=asc`, paged by message id (`after`, `before`, `limit`). The log is read page by page
/// through the mapper and only the page being built is held (at most `limit` messages), however
/// long the log; oldest-first pages stop reading once they are full.
pub async fn list_messages(
    State(state): State<LettaState>,
    Path(agent_id): Path<String>,
    Query(query): Query<ListQuery>,
) -> Result<Json<Vec<Value>>, ApiError> {
    const PAGE_EVENTS: u32 = 1000;
    let agent_id = followed(&state, &agent_id).await?;
    let mut pager = query.pager(MESSAGES_PAGE_LIMIT_DEFAULT, MESSAGES_PAGE_LIMIT_MAX)?;
    if state.store.head_seq(agent_id).await?.is_none() {
        return Err(ApiError::unknown_agent(agent_id));
    }
    let mut mapper = mapping::LettaMapper::new(Cut::Steps);
    let mut offer = |items: Vec<LettaItem>| {
        items.into_iter().filter(|item| matches!(item, LettaItem::Message(_))).all(|item| {
            let message = item.to_json();
            let id = message["id"].as_str().unwrap_or_default().to_owned();
            pager.offer(&id, message)
        })
    };
    let mut since = 0;
    let read_all = loop {
        let events = state.store.read_events(agent_id, since, PAGE_EVENTS).await?;
        if !events.iter().all(|event| offer(mapper.push(event))) {
            break false;
        }
        match events.last() {
            Some(last) if events.len() as u32 == PAGE_EVENTS => since = last.seq,
            _ => break true,
        }
    };
    if read_all {
        offer(mapper.finish());
    }
    let page = pager.finish().map_err(|unknown| {
        ApiError::bad_request(
            "invalid_cursor",
            format!("{}={:?} is not in this list", unknown.name, unknown.cursor),
        )
    })?;
    Ok(Json(page))
}
