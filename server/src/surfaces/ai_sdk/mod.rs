//! The AI SDK's UI message stream (v1, what `useChat` reads) as another view of the log.
//! `mapping.rs` is the pure mapping from a run's events to the stream's chunks; `history.rs`
//! the conversation as `UIMessage[]` from the folded log; `request.rs` reads the transport's
//! request body; `stream.rs` frames a run's chunks as SSE.
//!
//! - `POST /v1/ai-sdk/chat`: the last user message starts a run (its id is the idempotency key:
//!   a retry re-attaches to the first run's stream from its start); the answer streams. An
//!   edited message (an earlier message's id, or the newest changed) and a regenerate run their
//!   turn on a branch forked just before it, which becomes the chat's current one (`turns.rs`).
//! - `GET /v1/ai-sdk/chat/{id}/stream`: the run in flight, replayed from its start (same
//!   `messageId`, so the client replaces what it holds) and followed live; 204 when none is.
//!   A `Last-Event-ID` (a frame's id) skips what the client already has.
//! - `POST /v1/ai-sdk/chat/{id}/stop`: cancels the run in flight. A client going away never
//!   does: every run of this surface outlives its request.
//! - `GET /v1/ai-sdk/chat/{id}/messages`: the conversation for `useChat({ messages })`, without
//!   the answer in flight.
//! - `POST /v1/ai-sdk/chat/{id}/produce`: the other way round — a backend with its own
//!   `streamText` pipes its UI message stream in (`inbound.rs` maps it into the log,
//!   `produce.rs` reads the body), and `useChat` clients resume it from here.
//!
//! A chat id is an agent's id, or a name given an agent of its own on first use; every route
//! acts on its conversation's current branch (`chat::chat_log`).

pub mod history;
pub mod inbound;
pub mod mapping;
pub mod produce;
pub mod request;
mod stream;
pub mod turns;
pub mod verify;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;

use crate::agent::approval::ApprovalDecision;
use crate::agent::branch::branch_for_turn;
use crate::agent::client_tools;
use crate::agent::history::fold_log;
use crate::agent::start::StartError;
use crate::agent::RunOptions;
use crate::http::caller::Caller;
use crate::http::error::{ApiError, ApiJson};
use crate::http::token::Scope;
use crate::limits::{IDEMPOTENCY_KEY_CHARS_MAX, RUN_CONTENT_BYTES_MAX};
use crate::surfaces::chat::{
    cancel_in_flight, chat_id, chat_log, run_in_flight, unknown_chat, ChatState,
};
use crate::surfaces::run_feed::{last_event_id, run_start_seq, RunCursor};
use request::{ChatBody, Trigger};
use turns::Submit;

/// A chat request's body at most: the transport sends the whole conversation every time (the
/// server reads only its last user message, and keeps the rest unparsed), so a long chat needs
/// more than the API's usual limit. An app can send just the last message instead (the
/// transport's `prepareSendMessagesRequest`).
pub const AI_SDK_CHAT_BODY_BYTES_MAX: usize = 4 * 1024 * 1024;

/// The idempotency key of a submit is the user message's id, kept apart from the other
/// surfaces' keys.
const MESSAGE_KEY_PREFIX: &str = "ai-sdk:";
// Every key a request may make fits the key store's limit: checked when this compiles.
const _: () =
    assert!(MESSAGE_KEY_PREFIX.len() + request::MESSAGE_ID_CHARS_MAX <= IDEMPOTENCY_KEY_CHARS_MAX);

/// `POST /v1/ai-sdk/chat`.
pub async fn chat(
    State(state): State<ChatState>,
    caller: Caller,
    ApiJson(body): ApiJson<ChatBody>,
) -> Result<Response, ApiError> {
    let request = body.read()?;
    // Answering approvals needs `approve`; a new message (or a regenerate), or the client's
    // own tools' outputs, `write`; a request with both needs both.
    if !request.approvals.is_empty() {
        caller.require(Scope::Approve)?;
    }
    if request.approvals.is_empty() || !request.tool_outputs.is_empty() {
        caller.require(Scope::Write)?;
    }
    // Refused before a new chat is given an agent: a refused request writes nothing.
    if request.text.len() > RUN_CONTENT_BYTES_MAX {
        return Err(StartError::ContentTooLarge.into());
    }
    // The stream's slot first: refused, nothing starts.
    let slot = crate::surfaces::stream_slot(&state.sse_streams, state.sse_streams_max)?;
    let nothing_to_regenerate = || {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "regenerate-message: this chat has no user message to answer again",
        )
    };
    if !request.approvals.is_empty() || !request.tool_outputs.is_empty() {
        return answer_approvals(state, &caller, request, slot).await;
    }
    // Only a submit gives a new chat its agent: a regenerate of nothing writes nothing.
    let log = chat_log(&state, &caller, &request.chat, request.trigger == Trigger::Submit)
        .await?
        .ok_or_else(nothing_to_regenerate)?;
    let timeline = fold_log(state.store.as_ref(), &state.snapshots, log).await?;
    // An edit or a regenerate replaces a turn: its run goes on a branch forked just before
    // that turn, and the turn as it was stays on its own line.
    let (text, otid, fork_after) = match request.trigger {
        Trigger::Submit => match turns::submit(&timeline, &request.message_id, &request.text) {
            Submit::Append => (request.text, request.message_id, None),
            Submit::Edit { after_seq } => (request.text, request.message_id, Some(after_seq)),
        },
        Trigger::Regenerate => {
            let turn = turns::turn_to_answer_again(&timeline, &request.message_id)
                .ok_or_else(nothing_to_regenerate)?;
            (turn.text, turn.otid, Some(turn.after_seq))
        }
    };
    let key = format!("{MESSAGE_KEY_PREFIX}{otid}");
    let options = RunOptions {
        background: true,
        otid: Some(otid),
        stream_tokens: Some(true),
        iterations_max: None,
        client: None,
        run_id: None,
        client_tools: request.client_tools,
        answered_by_server: false,
        instructions: None,
    };
    let start = |log| state.starter.start_run(log, text, Some(&key), options);
    let (agent_id, started) = match fork_after {
        None => (log, start(log).await?),
        Some(after_seq) => {
            let started =
                branch_for_turn(state.store.as_ref(), log, after_seq, |branch| async move {
                    start(branch).await.map_err(ApiError::from)
                });
            started.await?
        }
    };
    let after_seq = match started.after_seq {
        Some(after_seq) => after_seq,
        None => run_start_seq(state.store.as_ref(), started.run_id).await? - 1,
    };
    let at = RunCursor::new(agent_id, started.run_id, after_seq);
    Ok(stream_run(&state, &request.chat, at, slot))
}

/// The run's chunks after `after_seq`, as the chat's SSE response.
fn stream_run(
    state: &ChatState,
    chat: &impl ToString,
    at: RunCursor,
    slot: tokio::sync::OwnedSemaphorePermit,
) -> Response {
    let chunks = stream::feed(state, at.agent_id, at.run_id, at.after_seq, Default::default());
    stream::sse_response(state, &chat.to_string(), chunks, slot)
}

/// A submit whose last message answers approval requests (ai 6) or holds the outputs of the
/// client's tools (`addToolOutput` / `addToolResult`): the run that carries the answers out,
/// streamed as the turn's assistant message going on.
async fn answer_approvals(
    state: ChatState,
    caller: &Caller,
    request: request::ChatRequest,
    slot: tokio::sync::OwnedSemaphorePermit,
) -> Result<Response, ApiError> {
    let agent_id = chat_log(&state, caller, &request.chat, false).await?.ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_chat",
            format!("chat {} has no messages: there is no approval to answer", request.chat),
        )
    })?;
    let mut decisions: Vec<ApprovalDecision> = request
        .approvals
        .iter()
        .map(|reply| ApprovalDecision {
            tool_call_id: reply.approval_id.clone(),
            approve: reply.approved,
            reason: reply.reason.clone(),
            output: None,
        })
        .collect();
    if !request.tool_outputs.is_empty() {
        let timeline = fold_log(state.store.as_ref(), &state.snapshots, agent_id).await?;
        decisions.extend(client_tools::answers(&timeline, &request.tool_outputs)?);
    }
    if decisions.is_empty() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "the assistant message answers nothing that waits: no approval response, and no \
             output of a call waiting for the client",
        ));
    }
    let options = RunOptions {
        background: true,
        stream_tokens: Some(true),
        client_tools: request.client_tools,
        ..RunOptions::default()
    };
    let started = state.starter.answer_approvals(agent_id, decisions, options).await?;
    let after_seq = started.after_seq.unwrap_or_default();
    let at = RunCursor::new(agent_id, started.run_id, after_seq);
    Ok(stream_run(&state, &request.chat, at, slot))
}

/// `GET /v1/ai-sdk/chat/{id}/stream`.
pub async fn resume(
    State(state): State<ChatState>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let chat = chat_id(&id)?;
    let cursor = last_event_id(&headers)?.unwrap_or_default();
    let no_content = || StatusCode::NO_CONTENT.into_response();
    let Some(agent_id) = chat_log(&state, &caller, &chat, false).await? else {
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
    State(state): State<ChatState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let chat = chat_id(&id)?;
    let Some(agent_id) = chat_log(&state, &caller, &chat, false).await? else {
        return Err(unknown_chat(&id));
    };
    Ok(Json(cancel_in_flight(&state, agent_id).await?))
}

/// `GET /v1/ai-sdk/chat/{id}/messages`: `UIMessage[]`; `[]` for a chat not used yet.
pub async fn messages(
    State(state): State<ChatState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let chat = chat_id(&id)?;
    let Some(agent_id) = chat_log(&state, &caller, &chat, false).await? else {
        return Ok(Json(Vec::new()));
    };
    let timeline = fold_log(state.store.as_ref(), &state.snapshots, agent_id).await?;
    Ok(Json(history::ui_messages(agent_id, &timeline)))
}
