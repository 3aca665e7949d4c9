//! The OpenAI Responses API (Open Responses) as another view of the log, for the official
//! `openai` clients and the OpenAI Agents SDK with `baseURL = <server>/v1`. A response is a run;
//! its output items and stream events are a pure mapping of the run's events (`mapping.rs`),
//! numbered from 0, so a stream replayed from the log — from its start or after any
//! `starting_after`, after a restart too — is the live one again.
//!
//! - `POST /v1/responses`: `model` names an agent (its id: that agent's conversation) or a
//!   model handle (`scripted`, `openai/gpt-4o`: a fresh agent on that model, the operator's to
//!   make). `previous_response_id` continues that response's agent; a resent transcript (the
//!   Agents SDK's default) continues the agent whose items it echoes. Trailing
//!   `function_call_output`s answer the calls of the caller's tools that wait (client tools:
//!   `function` tools in `tools`); otherwise the user's message starts a run. Streamed or not;
//!   `background: true` runs on when the client leaves (a foreground run is cancelled then).
//! - `GET /v1/responses/{id}`: the Response as it stands; `?stream=true[&starting_after=N]`
//!   replays the events after N (all of them without N) and follows live to the end.
//! - `POST /v1/responses/{id}/cancel`: cancels the run if it is in flight; the Response.
//! - `GET /v1/responses/{id}/input_items`: what the caller gave the response.
//! - `DELETE /v1/responses/{id}`: refused — a response is part of its agent's append-only
//!   log; `DELETE /v1/agents/{id}` deletes the conversation.

pub mod mapping;
pub mod request;
mod stream;
pub mod verify;
pub mod wire;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::agent::cancel::{cancel_and_wait, CANCEL_WAIT_MS_MAX};
use crate::agent::client_tools;
use crate::agent::history::fold_log;
use crate::agent::RunOptions;
use crate::http::caller::Caller;
use crate::http::error::{ApiError, ApiJson};
use crate::http::token::Scope;
use crate::store::NewAgent;
use crate::surfaces::chat::ChatState;
use crate::surfaces::run_feed::{run_start_seq, ForegroundGuard};
use request::{Asked, CreateBody, CreateRequest, Model};
use wire::{response_id, run_of, ResponsesError, ECHO_FIELD};

/// A request's body at most: a resent transcript holds the whole conversation.
pub const RESPONSES_BODY_BYTES_MAX: usize = 4 * 1024 * 1024;
/// The `made_by` of an agent a model handle made: a response that is its only run can be
/// deleted with it.
const MADE_BY: &str = "responses";
/// `input_items` pages hold at most this many items (OpenAI's limit too).
pub const INPUT_ITEMS_PAGE_MAX: usize = 100;

type Answer = Result<Response, ResponsesError>;

fn not_found(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "response_not_found",
        format!("response {id:?} was not found"),
    )
}

fn nothing_waits() -> ApiError {
    ApiError::bad_request(
        "invalid_request",
        "no function_call_output answers a call that waits: each call_id must be a call of the \
         conversation's last response (chain with previous_response_id, or resend the \
         function_call item with it)",
    )
}

/// `POST /v1/responses`.
pub async fn create(
    State(state): State<ChatState>,
    caller: Caller,
    ApiJson(body): ApiJson<CreateBody>,
) -> Answer {
    let request = body.read()?;
    caller.require(Scope::Write)?;
    // Everything that can be refused is, before a fresh agent is made: a refusal writes nothing.
    let asked = request.asked()?;
    let fresh = request.previous.is_none()
        && request.ours().is_empty()
        && matches!(request.model, Model::Handle(_));
    if fresh && matches!(asked, Asked::Outputs(_)) {
        return Err(nothing_waits().into());
    }
    let slot = match request.stream {
        true => Some(crate::surfaces::stream_slot(&state.sse_streams, state.sse_streams_max)?),
        false => None,
    };
    let agent_id = agent_of(&state, &caller, &request).await?;
    let mut instructions = request.echo.instructions.clone();
    let mut client = json!({});
    client[ECHO_FIELD] = serde_json::to_value(&request.echo).map_err(ApiError::internal)?;
    let mut options = |system: Vec<String>| {
        if !system.is_empty() {
            let given = instructions.take().into_iter();
            instructions = Some(given.chain(system).collect::<Vec<_>>().join("\n\n"));
        }
        RunOptions {
            background: true,
            client: Some(client.clone()),
            client_tools: request.client_tools.clone(),
            instructions: instructions.clone(),
            ..RunOptions::default()
        }
    };
    let started = match asked {
        Asked::Message { text, system } => {
            let started = state.starter.start_run(agent_id, text, None, options(system)).await;
            match started {
                Ok(started) => started,
                Err(refused) => {
                    // A refused start writes nothing: not even the agent made for it.
                    if fresh {
                        state.store.delete_agent(agent_id).await?;
                    }
                    return Err(refused.into());
                }
            }
        }
        Asked::Outputs(outputs) => {
            let timeline = fold_log(state.store.as_ref(), &state.snapshots, agent_id).await?;
            let answers = client_tools::answers(&timeline, &outputs)?;
            if answers.is_empty() {
                return Err(nothing_waits().into());
            }
            state.starter.answer_approvals(agent_id, answers, options(Vec::new())).await?
        }
    };
    let run_id = started.run_id;
    let after_seq = match started.after_seq {
        Some(after_seq) => after_seq,
        None => run_start_seq(state.store.as_ref(), run_id).await? - 1,
    };
    let mut guard = (!request.background).then(|| ForegroundGuard {
        runs: state.runs.clone(),
        agent_id,
        run_id,
        armed: true,
    });
    let mut events = stream::feed(&state, agent_id, run_id, after_seq, None);
    if let Some(slot) = slot {
        return Ok(stream::sse_response(&state, events, guard, slot, caller.expires_at()));
    }
    let response = if request.background {
        // At once: the response as it was created (queued).
        match events.recv().await {
            Some(Ok(mut created)) => created["response"].take(),
            Some(Err(error)) => return Err(ApiError::internal(error).into()),
            None => Value::Null,
        }
    } else {
        let response = stream::final_response(events).await.map_err(ApiError::internal)?;
        ForegroundGuard::disarm(&mut guard);
        response.unwrap_or(Value::Null)
    };
    Ok(Json(response).into_response())
}

/// The agent a request continues or starts: `previous_response_id`'s, the one whose items the
/// input echoes, the agent `model` names — or, for a model handle, a fresh one.
async fn agent_of(
    state: &ChatState,
    caller: &Caller,
    request: &CreateRequest,
) -> Result<Uuid, ResponsesError> {
    let store = state.store.as_ref();
    if let Some(previous) = request.previous {
        let id = response_id(previous);
        let agent_id = agent_of_run(state, caller, previous, &id).await?.0;
        return Ok(agent_id);
    }
    let ours = request.ours();
    if !ours.is_empty() {
        let mut agents: Vec<Uuid> =
            store.events_by_id(&ours).await?.iter().map(|event| event.agent_id).collect();
        agents.sort_unstable();
        agents.dedup();
        return match agents.as_slice() {
            [agent_id] => Ok(caller.reach_id(store, *agent_id).await?.id),
            [] => Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "unknown_items",
                "the input echoes items that are not in this server's log",
            )
            .into()),
            _ => Err(ApiError::bad_request(
                "invalid_request",
                "the input echoes items of more than one conversation",
            )
            .into()),
        };
    }
    match &request.model {
        Model::Agent(agent_id) => Ok(caller.reach_id(store, *agent_id).await?.id),
        Model::Handle(handle) => {
            if caller.user().is_some() {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "operator_only",
                    "a scoped token names its agent as the model (its id); a model handle makes \
                     a fresh agent, which is the operator's to do",
                )
                .into());
            }
            let template = NewAgent {
                name: format!("responses {handle}"),
                model: Some(handle.clone()),
                metadata: json!({ "made_by": MADE_BY }),
                ..NewAgent::default()
            };
            // A model no provider serves is refused before the agent exists.
            let tentative = template.clone().into_agent(chrono::Utc::now());
            state
                .runs
                .check_provider(&tentative)
                .map_err(|error| ApiError::from(crate::agent::start::StartError::Run(error)))?;
            Ok(store.create_agent(template).await?.id)
        }
    }
}

/// The run response `id` is, its agent and the seq of its start, as `caller` may reach them.
async fn located(
    state: &ChatState,
    caller: &Caller,
    id: &str,
) -> Result<(Uuid, Uuid, u64), ResponsesError> {
    let run_id = run_of(id).ok_or_else(|| not_found(id))?;
    let (agent_id, start) = agent_of_run(state, caller, run_id, id).await?;
    Ok((run_id, agent_id, start))
}

/// The agent of run `run_id` and the seq of its start, as `caller` may reach it.
async fn agent_of_run(
    state: &ChatState,
    caller: &Caller,
    run_id: Uuid,
    id: &str,
) -> Result<(Uuid, u64), ResponsesError> {
    let outline = state.store.run_outline(run_id).await?;
    let Some(started) = outline.iter().find(|event| event.kind == app::EventKind::RunStarted)
    else {
        return Err(not_found(id).into());
    };
    caller.reach_id(state.store.as_ref(), started.agent_id).await.map_err(|_| not_found(id))?;
    Ok((started.agent_id, started.seq))
}

/// The query of `GET /v1/responses/{id}`; `include` and `include_obfuscation` are accepted and
/// ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RetrieveQuery {
    stream: Option<bool>,
    starting_after: Option<u64>,
}

/// `GET /v1/responses/{id}`.
pub async fn retrieve(
    State(state): State<ChatState>,
    caller: Caller,
    Path(id): Path<String>,
    query: Result<Query<RetrieveQuery>, axum::extract::rejection::QueryRejection>,
) -> Answer {
    let Query(query) = query.map_err(|rejection| {
        ApiError::bad_request(
            "invalid_request",
            format!("{rejection}: stream is true or false, starting_after a sequence number"),
        )
    })?;
    caller.require(Scope::Read)?;
    let (run_id, agent_id, start) = located(&state, &caller, &id).await?;
    if query.stream == Some(true) {
        let slot = crate::surfaces::stream_slot(&state.sse_streams, state.sse_streams_max)?;
        let events = stream::feed(&state, agent_id, run_id, start - 1, query.starting_after);
        return Ok(stream::sse_response(&state, events, None, slot, caller.expires_at()));
    }
    response_now(&state, agent_id, run_id, start).await
}

/// The Response of `run_id` as its log tells it now.
async fn response_now(state: &ChatState, agent_id: Uuid, run_id: Uuid, start: u64) -> Answer {
    let mapper = stream::read(state.store.as_ref(), agent_id, run_id, start).await?;
    Ok(Json(mapper.response().unwrap_or(Value::Null)).into_response())
}

/// Cancels `run_id` and waits for its end in the log (at most `CANCEL_WAIT_MS_MAX`).
async fn cancel_run(
    state: &ChatState,
    agent_id: Uuid,
    run_id: Uuid,
) -> Result<(), crate::store::StoreError> {
    let cluster = state.cluster.as_ref().map(|cluster| cluster.store.as_ref());
    let wait = std::time::Duration::from_millis(CANCEL_WAIT_MS_MAX);
    let store = state.store.as_ref();
    cancel_and_wait(&state.runs, cluster, store, agent_id, Some(&[run_id]), wait).await?;
    Ok(())
}

/// `POST /v1/responses/{id}/cancel`: the Response once its run's end is in the log (at most
/// `CANCEL_WAIT_MS_MAX`); a response that already ended is answered as it is.
pub async fn cancel(
    State(state): State<ChatState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Answer {
    caller.require(Scope::Write)?;
    let (run_id, agent_id, start) = located(&state, &caller, &id).await?;
    cancel_run(&state, agent_id, run_id).await?;
    response_now(&state, agent_id, run_id, start).await
}

/// `DELETE /v1/responses/{id}`: a response that is its whole conversation — the only run of
/// an agent made for it (a model handle's fresh agent) — goes with its agent (a run in flight
/// is cancelled first). One turn of a longer conversation cannot leave the append-only log
/// alone: refused, with the way to delete the conversation.
pub async fn delete(
    State(state): State<ChatState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Answer {
    caller.require(Scope::Write)?;
    let (run_id, agent_id, start) = located(&state, &caller, &id).await?;
    let store = state.store.as_ref();
    let agent = store.get_agent(agent_id).await?.ok_or_else(|| not_found(&id))?;
    let made_for_it = agent.metadata.get("made_by").and_then(Value::as_str) == Some(MADE_BY);
    if made_for_it && start == 1 {
        cancel_run(&state, agent_id, run_id).await?;
        let end = store.run_outline(run_id).await?.last().map(|event| event.seq);
        let head = store.head_seq(agent_id).await?;
        if end.is_some() && end == head && store.delete_agent(agent_id).await? {
            state.hub.close(agent_id);
            state.snapshots.remove(agent_id);
            return Ok(
                Json(json!({ "id": id, "object": "response", "deleted": true })).into_response()
            );
        }
    }
    Err(ApiError::new(
        StatusCode::CONFLICT,
        "part_of_a_conversation",
        format!(
            "this response is one turn of agent {agent_id}'s conversation, whose log is \
             append-only: DELETE /v1/agents/{agent_id} deletes the whole conversation"
        ),
    )
    .into())
}

/// The query of `GET /v1/responses/{id}/input_items`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ItemsQuery {
    after: Option<String>,
    limit: Option<usize>,
    order: Option<String>,
}

/// `GET /v1/responses/{id}/input_items`: a page of what the caller gave the response.
pub async fn input_items(
    State(state): State<ChatState>,
    caller: Caller,
    Path(id): Path<String>,
    query: Result<Query<ItemsQuery>, axum::extract::rejection::QueryRejection>,
) -> Answer {
    let Query(query) = query
        .map_err(|rejection| ApiError::bad_request("invalid_request", format!("{rejection}")))?;
    caller.require(Scope::Read)?;
    let limit = query.limit.unwrap_or(20);
    if !(1..=INPUT_ITEMS_PAGE_MAX).contains(&limit) {
        return Err(ApiError::bad_request(
            "invalid_request",
            format!("limit must be 1 to {INPUT_ITEMS_PAGE_MAX}"),
        )
        .into());
    }
    let ascending = match query.order.as_deref() {
        None | Some("desc") => false,
        Some("asc") => true,
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_request",
                format!("order must be asc or desc, not {other:?}"),
            )
            .into())
        }
    };
    let (run_id, agent_id, start) = located(&state, &caller, &id).await?;
    let mapper = stream::read(state.store.as_ref(), agent_id, run_id, start).await?;
    let mut items: Vec<&Value> = mapper.input_items().iter().collect();
    if !ascending {
        items.reverse();
    }
    if let Some(after) = &query.after {
        let position =
            items.iter().position(|item| item["id"].as_str() == Some(after)).ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_request",
                    format!("after: {after:?} is not an input item of this response"),
                )
            })?;
        items.drain(..=position);
    }
    let has_more = items.len() > limit;
    items.truncate(limit);
    Ok(Json(json!({
        "object": "list",
        "data": items,
        "first_id": items.first().map(|item| &item["id"]),
        "last_id": items.last().map(|item| &item["id"]),
        "has_more": has_more,
    }))
    .into_response())
}
