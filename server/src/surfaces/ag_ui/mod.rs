//! AG-UI 1.0 (`@ag-ui/client`'s `HttpAgent`, CopilotKit) as another view of the log, with what
//! AG-UI itself lacks: connect and cursor resume. `mapping.rs` is the pure mapping from a run's
//! events to AG-UI events; `history.rs` the conversation as AG-UI messages from the folded
//! log; `request.rs` reads `RunAgentInput`; `stream.rs` frames events as SSE.
//!
//! - `POST /v1/ag-ui`: the new user messages at the end of `messages` start a run (the last
//!   one's id is the idempotency key: a retry streams the first request's run again); the
//!   client's `runId` is echoed and recorded on the run with `context` and `state`, and claimed
//!   as the run's alias (a `runId` that already names a run of another message gets 409).
//! - `POST /v1/ag-ui/connect` `{threadId}`: `RUN_STARTED`, a `MESSAGES_SNAPSHOT` of the
//!   finished conversation, then the run in flight — what it said so far compacted, then
//!   live — and its end; with nothing in flight, `RUN_FINISHED` right after the snapshot.
//! - Both honour `Last-Event-ID` or `?after_seq=`: `RUN_STARTED`, then exactly what follows.
//! - `POST /v1/ag-ui/cancel` `{threadId}`: cancels the run in flight. A client going away
//!   never does.
//!
//! A thread id is an agent's id, or a name given an agent of its own on first use — the same
//! conversations the AI SDK's chat ids name.

pub mod history;
pub mod mapping;
pub mod request;
mod stream;
pub mod verify;

use app::EventKind;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::agent::approval::ApprovalDecision;
use crate::agent::client_tools;
use crate::agent::history::fold_log;
use crate::agent::start::StartError;
use crate::agent::RunOptions;
use crate::http::caller::Caller;
use crate::http::error::{ApiError, ApiJson};
use crate::http::token::Scope;
use crate::limits::{IDEMPOTENCY_KEY_CHARS_MAX, RUN_CONTENT_BYTES_MAX};
use crate::surfaces::chat::{cancel_in_flight, chat_log, run_in_flight, ChatId, ChatState};
use crate::surfaces::run_feed::{last_event_id, run_start_seq, FrameId};
use mapping::AgUiEvent;
use request::{RunBody, ThreadBody};
use stream::Plan;

/// A run request's body at most: like the AI SDK's, the client sends the whole conversation
/// each time (only the new user messages are parsed).
pub const AG_UI_BODY_BYTES_MAX: usize = 4 * 1024 * 1024;

/// The idempotency key of a run request is its last user message's id, kept apart from the
/// other surfaces' keys.
const MESSAGE_KEY_PREFIX: &str = "ag-ui:";
/// The client's run id is a key too: one run per client run id and thread.
const RUN_ALIAS_KEY_PREFIX: &str = "ag-ui-run:";
// Every key a request may make fits the key store's limit: checked when this compiles.
const _: () = assert!(
    MESSAGE_KEY_PREFIX.len() + request::MESSAGE_ID_CHARS_MAX <= IDEMPOTENCY_KEY_CHARS_MAX
        && RUN_ALIAS_KEY_PREFIX.len() + request::CLIENT_RUN_ID_CHARS_MAX
            <= IDEMPOTENCY_KEY_CHARS_MAX
);

/// `?after_seq=`: continue after this seq.
#[derive(Debug, Default, Deserialize)]
pub struct CursorQuery {
    #[serde(default)]
    after_seq: Option<String>,
}

/// Where the client is: `Last-Event-ID` (a frame id) wins over `?after_seq=` (a seq).
fn cursor(headers: &HeaderMap, query: &CursorQuery) -> Result<Option<FrameId>, ApiError> {
    if let Some(cursor) = last_event_id(headers)? {
        return Ok(Some(cursor));
    }
    match &query.after_seq {
        None => Ok(None),
        Some(text) => {
            text.trim().parse::<u64>().map(|seq| Some(FrameId { seq, index: None })).map_err(|_| {
                ApiError::bad_request(
                    "invalid_cursor",
                    "after_seq must be a seq (a whole number) this stream sent",
                )
            })
        }
    }
}

/// The id the client knows run `run_id` by: its own `runId` recorded at the start, or ours.
async fn client_run_id(state: &ChatState, run_id: Uuid) -> Result<String, ApiError> {
    let started = state.store.run_start(run_id).await?;
    Ok(started
        .as_ref()
        .and_then(|started| started.metadata.pointer("/client/run_id"))
        .and_then(Value::as_str)
        .map_or_else(|| run_id.to_string(), str::to_owned))
}

/// `POST /v1/ag-ui`.
pub async fn run(
    State(state): State<ChatState>,
    caller: Caller,
    Query(query): Query<CursorQuery>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<RunBody>,
) -> Result<Response, ApiError> {
    let request = body.read()?;
    // Answering interrupts needs `approve`; a new message, or the client's tools' results,
    // `write`; a request with both needs both.
    if request.resume.is_some() {
        caller.require(Scope::Approve)?;
    }
    if request.resume.is_none() || !request.tool_results.is_empty() {
        caller.require(Scope::Write)?;
    }
    let answering = request.resume.is_some() || !request.tool_results.is_empty();
    let cursor = cursor(&headers, &query)?.unwrap_or_default();
    // Refused before a new thread is given an agent: a refused request writes nothing.
    if request.text.len() > RUN_CONTENT_BYTES_MAX {
        return Err(StartError::ContentTooLarge.into());
    }
    let slot = crate::surfaces::stream_slot(&state.sse_streams, state.sse_streams_max)?;
    let agent_id = match answering {
        // Only a thread that has run can have an interrupt (or a tool call) to answer.
        true => chat_log(&state, &caller, &request.thread, false).await?.ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "unknown_thread",
                format!("thread {} has no runs: there is no interrupt to answer", request.thread),
            )
        })?,
        false => {
            chat_log(&state, &caller, &request.thread, true).await?.expect("created when missing")
        }
    };
    let mut client = request.recorded.clone().unwrap_or_else(|| json!({}));
    if let Some(client_run_id) = &request.client_run_id {
        client["run_id"] = json!(client_run_id);
    }
    // The run's id is chosen now, so the client's run id can be tied to it before it starts.
    let run_id = Uuid::now_v7();
    let alias = match &request.client_run_id {
        Some(client_run_id) if !answering => {
            claim_alias(&state, agent_id, client_run_id, run_id, &request.message_id).await?
        }
        _ => None,
    };
    let options = RunOptions {
        background: true,
        otid: (!request.message_id.is_empty()).then(|| request.message_id.clone()),
        stream_tokens: Some(true),
        iterations_max: None,
        client: Some(client),
        run_id: Some(run_id),
        client_tools: request.client_tools,
        answered_by_server: false,
        instructions: None,
    };
    let started = match &request.resume {
        // Interrupts' answers: the run that carries them out (exactly one answer wins).
        Some(answers) => {
            let decisions = answers
                .iter()
                .map(|answer| ApprovalDecision {
                    tool_call_id: answer.interrupt_id.clone(),
                    approve: answer.approve,
                    reason: answer.reason.clone(),
                    output: None,
                })
                .collect();
            state.starter.answer_approvals(agent_id, decisions, options).await
        }
        // The client's tools' results: the run that goes on with them.
        None if !request.tool_results.is_empty() => {
            let timeline = fold_log(state.store.as_ref(), &state.snapshots, agent_id).await?;
            let decisions = client_tools::answers(&timeline, &request.tool_results)?;
            if decisions.is_empty() {
                return Err(ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_body",
                    "the tool messages answer no call that waits for the client",
                ));
            }
            state.starter.answer_approvals(agent_id, decisions, options).await
        }
        None => {
            let key = format!("{MESSAGE_KEY_PREFIX}{}", request.message_id);
            state.starter.start_run(agent_id, request.text, Some(&key), options).await
        }
    };
    if let Some(alias) = &alias {
        // The alias was claimed for a run that did not start (refused, or the message's first
        // request had started another): give it back.
        if started.as_ref().map_or(true, |started| started.run_id != run_id) {
            state.store.release_run_key(agent_id, alias).await?;
        }
    }
    let started = started?;
    let after_seq = match started.after_seq {
        Some(after_seq) => after_seq,
        None => run_start_seq(state.store.as_ref(), started.run_id).await? - 1,
    };
    // A retry answers with the run's own id for the client, as the first request recorded it.
    let client_run_id = match (started.after_seq, request.client_run_id) {
        (Some(_), Some(id)) => id,
        _ => client_run_id(&state, started.run_id).await?,
    };
    let thread_id = request.thread.to_string();
    let plan = Plan {
        thread_id: thread_id.clone(),
        client_run_id,
        cursor,
        snapshot: None,
        replay_through: None,
    };
    let events = stream::feed(&state, agent_id, started.run_id, after_seq, plan);
    Ok(stream::sse_response(&state, Some(agent_id), Some(started.run_id), &thread_id, events, slot))
}

/// Ties the client's run id to run `run_id` (an idempotency key of its own). Refused with 409
/// when it already names a run of another message; a retry of the same message may reuse it.
/// Returns the key when this call claimed it.
async fn claim_alias(
    state: &ChatState,
    agent_id: Uuid,
    client_run_id: &str,
    run_id: Uuid,
    message_id: &str,
) -> Result<Option<String>, ApiError> {
    let key = format!("{RUN_ALIAS_KEY_PREFIX}{client_run_id}");
    let holder = state.store.claim_run_key(agent_id, &key, run_id).await?;
    if holder == run_id {
        return Ok(Some(key));
    }
    let start = run_start_seq(state.store.as_ref(), holder).await?;
    let opening = state.store.read_events(agent_id, start, 1).await?;
    let answers = opening
        .iter()
        .find(|event| event.kind == EventKind::User && event.run_id == Some(holder))
        .and_then(|event| event.content.get("otid"))
        .and_then(Value::as_str);
    if answers != Some(message_id) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "run_id_taken",
            format!("runId {client_run_id:?} already names run {holder}, which answers another message; send a new runId"),
        ));
    }
    Ok(None)
}

/// `POST /v1/ag-ui/connect`.
pub async fn connect(
    State(state): State<ChatState>,
    caller: Caller,
    Query(query): Query<CursorQuery>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<ThreadBody>,
) -> Result<Response, ApiError> {
    let thread = body.thread()?;
    let cursor = cursor(&headers, &query)?;
    let thread_id = thread.to_string();
    let slot = crate::surfaces::stream_slot(&state.sse_streams, state.sse_streams_max)?;
    let agent_id = chat_log(&state, &caller, &thread, false).await?;
    let Some(agent_id) = agent_id else {
        // A thread not used yet: an empty conversation, as a well-formed run.
        let events = idle(&thread_id, Uuid::now_v7().to_string(), 0, Some(Vec::new()));
        return Ok(stream::sse_response(
            &state,
            None,
            None,
            &thread_id,
            stream::fixed(events),
            slot,
        ));
    };
    let head = state.store.head_seq(agent_id).await?.unwrap_or(0);
    // The run to follow: the one in flight; with a cursor, the run of the first event after it.
    let run_id = match cursor {
        None => run_in_flight(&state, agent_id).await?,
        Some(cursor) => {
            let next = state.store.read_events(agent_id, cursor.seq, 1).await?;
            match next.first().and_then(|event| event.run_id) {
                Some(run_id) => Some(run_id),
                None => run_in_flight(&state, agent_id).await?,
            }
        }
    };
    let snapshot = match cursor {
        Some(_) => None,
        None => {
            let timeline = fold_log(state.store.as_ref(), &state.snapshots, agent_id).await?;
            Some(history::snapshot(&timeline))
        }
    };
    let Some(run_id) = run_id else {
        let last = last_run(&state, agent_id).await?;
        let client_run_id = match last {
            Some(run_id) => client_run_id(&state, run_id).await?,
            None => Uuid::now_v7().to_string(),
        };
        let events = idle(&thread_id, client_run_id, head, snapshot);
        return Ok(stream::sse_response(
            &state,
            Some(agent_id),
            last,
            &thread_id,
            stream::fixed(events),
            slot,
        ));
    };
    let start = run_start_seq(state.store.as_ref(), run_id).await?;
    let plan = Plan {
        thread_id: thread_id.clone(),
        client_run_id: client_run_id(&state, run_id).await?,
        cursor: cursor.unwrap_or_default(),
        replay_through: snapshot.is_some().then_some(head),
        snapshot,
    };
    let events = stream::feed(&state, agent_id, run_id, start - 1, plan);
    Ok(stream::sse_response(&state, Some(agent_id), Some(run_id), &thread_id, events, slot))
}

/// The newest run of the agent's log, if any.
async fn last_run(state: &ChatState, agent_id: Uuid) -> Result<Option<Uuid>, ApiError> {
    let timeline = fold_log(state.store.as_ref(), &state.snapshots, agent_id).await?;
    Ok(timeline.runs().last().map(|run| run.run_id))
}

/// A connect with nothing in flight: the run's start, the conversation, its end.
fn idle(
    thread_id: &str,
    run_id: String,
    head: u64,
    snapshot: Option<Vec<Value>>,
) -> Vec<stream::Framed> {
    let mut events =
        vec![AgUiEvent::RunStarted { thread_id: thread_id.to_owned(), run_id: run_id.clone() }];
    if let Some(messages) = snapshot {
        events.push(AgUiEvent::MessagesSnapshot { messages });
    }
    events.push(AgUiEvent::RunFinished {
        thread_id: thread_id.to_owned(),
        run_id,
        outcome: None,
        usage: None,
    });
    let count = events.len();
    events
        .into_iter()
        .enumerate()
        .map(|(index, event)| {
            let index = (index + 1 < count).then_some(index);
            (FrameId { seq: head, index }, event)
        })
        .collect()
}

/// `POST /v1/ag-ui/cancel` `{threadId}`: `{cancelled_run_ids}` (empty when nothing was in
/// flight), once the run's end is in the log (at most `CANCEL_WAIT_MS_MAX`).
pub async fn cancel(
    State(state): State<ChatState>,
    caller: Caller,
    ApiJson(body): ApiJson<ThreadBody>,
) -> Result<Json<Value>, ApiError> {
    let thread = body.thread()?;
    let Some(agent_id) = chat_log(&state, &caller, &thread, false).await? else {
        return Err(unknown_thread(&thread));
    };
    Ok(Json(cancel_in_flight(&state, agent_id).await?))
}

fn unknown_thread(thread: &ChatId) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "unknown_thread",
        format!("thread {:?} has no messages yet", thread.to_string()),
    )
}
