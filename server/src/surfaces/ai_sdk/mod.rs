//! The AI SDK's UI message stream (v1, what `useChat` reads) as another view of the log.
//! `chunks.rs` is the pure mapping from a run's events to the stream's chunks; `messages.rs`
//! the conversation as `UIMessage[]` from the folded log; `request.rs` reads the transport's
//! request body; `stream.rs` frames a run's chunks as SSE.
//!
//! - `POST /v1/ai-sdk/chat`: the last user message starts a run (its id is the idempotency key:
//!   a retry re-attaches to the first run's stream from its start); the answer streams.
//! - `GET /v1/ai-sdk/chat/{id}/stream`: the run in flight, replayed from its start (same
//!   `messageId`, so the client replaces what it holds) and followed live; 204 when none is.
//!   A `Last-Event-ID` (a frame's id) skips what the client already has.
//! - `POST /v1/ai-sdk/chat/{id}/stop`: cancels the run in flight. A client going away never
//!   does: every run of this surface outlives its request.
//! - `GET /v1/ai-sdk/chat/{id}/messages`: the conversation for `useChat({ messages })`, without
//!   the answer in flight.
//!
//! A chat id is an agent's id, or a name given an agent of its own on first use.

pub mod chunks;
pub mod messages;
pub mod request;
mod stream;
#[cfg(test)]
mod test_log;

use std::sync::Arc;

use app::EventKind;
use axum::extract::{FromRef, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::agent::cancel::{cancel_and_wait, CANCEL_WAIT_MS_MAX};
use crate::agent::history::{fold_log, Snapshots};
use crate::agent::start::{StartError, Starter, RUN_CONTENT_BYTES_MAX};
use crate::agent::{RunOptions, Runs};
use crate::cluster::Cluster;
use crate::delivery::hub::Hub;
use crate::http::error::{ApiError, ApiJson};
use crate::state::AppState;
use crate::store::{agent_for_chat, NewAgent, Store};
use crate::surfaces::run_feed::run_start_seq;
use request::{chat_id, ChatBody, ChatId, Trigger};

/// What the AI SDK's handlers use of the server.
#[derive(Clone)]
pub struct AiSdkState {
    pub store: Arc<dyn Store>,
    pub hub: Arc<Hub>,
    pub runs: Arc<Runs>,
    pub starter: Starter,
    pub cluster: Option<Arc<Cluster>>,
    pub snapshots: Arc<Snapshots>,
    /// Cancelled when the server shuts down: open streams end (their runs go on).
    pub shutdown: tokio_util::sync::CancellationToken,
    /// Slots for open streams (shared with the other SSE surfaces), and how many there are.
    pub sse_streams: Arc<tokio::sync::Semaphore>,
    pub sse_streams_max: usize,
}

impl FromRef<AppState> for AiSdkState {
    fn from_ref(state: &AppState) -> Self {
        AiSdkState {
            store: state.store.clone(),
            hub: state.hub.clone(),
            runs: state.runs.clone(),
            starter: state.starter.clone(),
            cluster: state.cluster.clone(),
            snapshots: state.snapshots.clone(),
            shutdown: state.shutdown.clone(),
            sse_streams: state.sse_streams.clone(),
            sse_streams_max: state.limits.sse_streams_max,
        }
    }
}

/// A chat request's body at most: the transport sends the whole conversation every time (the
/// server reads only its last user message, and keeps the rest unparsed), so a long chat needs
/// more than the API's usual limit. An app can send just the last message instead (the
/// transport's `prepareSendMessagesRequest`).
pub const AI_SDK_CHAT_BODY_BYTES_MAX: usize = 4 * 1024 * 1024;

/// The idempotency key of a submit is the user message's id, kept apart from the other
/// surfaces' keys.
const MESSAGE_KEY_PREFIX: &str = "ai-sdk:";

/// The agent a chat id names: an agent id must exist; a name is found, or given an agent now
/// when `create` (a first message), or `None`.
async fn chat_agent(
    state: &AiSdkState,
    chat: &ChatId,
    create: bool,
) -> Result<Option<Uuid>, ApiError> {
    match chat {
        ChatId::Agent(agent_id) => match state.store.head_seq(*agent_id).await? {
            Some(_) => Ok(Some(*agent_id)),
            None => Err(ApiError::unknown_agent(agent_id)),
        },
        ChatId::Named(name) if create => {
            let template = NewAgent {
                name: format!("chat {name}"),
                metadata: json!({ "ai_sdk_chat_id": name }),
                ..NewAgent::default()
            };
            Ok(Some(
                agent_for_chat(state.store.as_ref(), name, template)
                    .await?
                    .id,
            ))
        }
        ChatId::Named(name) => Ok(state.store.chat_agent(name).await?),
    }
}

/// `POST /v1/ai-sdk/chat`.
pub async fn chat(
    State(state): State<AiSdkState>,
    ApiJson(body): ApiJson<ChatBody>,
) -> Result<Response, ApiError> {
    let request = body.read()?;
    // Refused before a new chat is given an agent: a refused request writes nothing.
    if request.text.len() > RUN_CONTENT_BYTES_MAX {
        return Err(StartError::ContentTooLarge.into());
    }
    // The stream's slot first: refused, nothing starts.
    let slot = crate::surfaces::stream_slot(&state.sse_streams, state.sse_streams_max)?;
    let agent_id = chat_agent(&state, &request.chat, true)
        .await?
        .expect("created when missing");
    let (text, otid, key) = match request.trigger {
        Trigger::Submit => {
            let key = format!("{MESSAGE_KEY_PREFIX}{}", request.message_id);
            (request.text, request.message_id, Some(key))
        }
        // The log is the truth: its last user message is answered again, under the same id
        // (the history then shows the new answer in the old one's place).
        Trigger::Regenerate => {
            let timeline = fold_log(state.store.as_ref(), &state.snapshots, agent_id).await?;
            let last = timeline
                .messages()
                .iter()
                .rev()
                .find(|message| message.kind == EventKind::User)
                .ok_or_else(|| {
                    ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "invalid_body",
                        "regenerate-message: this chat has no user message to answer again",
                    )
                })?;
            let otid = last
                .content
                .get("otid")
                .and_then(Value::as_str)
                .map_or_else(|| last.message_id.to_string(), str::to_owned);
            (last.text().to_owned(), otid, None)
        }
    };
    let options = RunOptions {
        background: true,
        otid: Some(otid),
        stream_tokens: Some(true),
        iterations_max: None,
    };
    let started = state
        .starter
        .start_run(agent_id, text, key.as_deref(), options)
        .await?;
    let after_seq = match started.after_seq {
        Some(after_seq) => after_seq,
        None => run_start_seq(state.store.as_ref(), started.run_id).await? - 1,
    };
    let chunks = stream::feed(
        &state,
        agent_id,
        started.run_id,
        after_seq,
        Default::default(),
    );
    Ok(stream::sse_response(
        &state,
        &chat_name(&request.chat),
        chunks,
        slot,
    ))
}

fn chat_name(chat: &ChatId) -> String {
    match chat {
        ChatId::Agent(agent_id) => agent_id.to_string(),
        ChatId::Named(name) => name.clone(),
    }
}

/// The run of `agent_id` in flight, on this server or (with PostgreSQL) another.
async fn run_in_flight(state: &AiSdkState, agent_id: Uuid) -> Result<Option<Uuid>, ApiError> {
    if let Some(run_id) = state.runs.active_run(agent_id) {
        return Ok(Some(run_id));
    }
    match &state.cluster {
        Some(cluster) => Ok(cluster.store.active_run(agent_id).await?),
        None => Ok(None),
    }
}

/// `GET /v1/ai-sdk/chat/{id}/stream`.
pub async fn resume(
    State(state): State<AiSdkState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let chat = chat_id(&id)?;
    let cursor = match headers.get("last-event-id") {
        None => stream::FrameId::default(),
        Some(value) => value
            .to_str()
            .ok()
            .and_then(stream::FrameId::parse)
            .ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_cursor",
                    "Last-Event-ID must be the id of a frame this stream sent (<seq> or <seq>:<k>)",
                )
            })?,
    };
    let no_content = || StatusCode::NO_CONTENT.into_response();
    let Some(agent_id) = chat_agent(&state, &chat, false).await? else {
        return Ok(no_content());
    };
    let Some(run_id) = run_in_flight(&state, agent_id).await? else {
        return Ok(no_content());
    };
    let slot = crate::surfaces::stream_slot(&state.sse_streams, state.sse_streams_max)?;
    let start = run_start_seq(state.store.as_ref(), run_id).await?;
    let chunks = stream::feed(&state, agent_id, run_id, start - 1, cursor);
    Ok(stream::sse_response(&state, &id, chunks, slot))
}

/// `POST /v1/ai-sdk/chat/{id}/stop`: `{cancelled_run_ids}` (empty when nothing was in flight).
/// Answers once the run's end is in the log (at most `CANCEL_WAIT_MS_MAX`), so the stream the
/// client still reads has ended with `finish` by then.
pub async fn stop(
    State(state): State<AiSdkState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let chat = chat_id(&id)?;
    let Some(agent_id) = chat_agent(&state, &chat, false).await? else {
        return Err(unknown_chat(&id));
    };
    let cluster = state.cluster.as_ref().map(|cluster| cluster.store.as_ref());
    let wait = std::time::Duration::from_millis(CANCEL_WAIT_MS_MAX);
    let cancelled = cancel_and_wait(
        &state.runs,
        cluster,
        state.store.as_ref(),
        agent_id,
        None,
        wait,
    )
    .await?;
    let cancelled: Vec<Uuid> = cancelled.into_iter().collect();
    Ok(Json(
        json!({ "agent_id": agent_id, "cancelled_run_ids": cancelled }),
    ))
}

/// `GET /v1/ai-sdk/chat/{id}/messages`: `UIMessage[]`; `[]` for a chat not used yet.
pub async fn messages(
    State(state): State<AiSdkState>,
    Path(id): Path<String>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let chat = chat_id(&id)?;
    let Some(agent_id) = chat_agent(&state, &chat, false).await? else {
        return Ok(Json(Vec::new()));
    };
    let timeline = fold_log(state.store.as_ref(), &state.snapshots, agent_id).await?;
    Ok(Json(messages::ui_messages(agent_id, &timeline)))
}

fn unknown_chat(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "unknown_chat",
        format!("chat {id:?} has no messages yet"),
    )
}
