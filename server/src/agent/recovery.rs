//! Start-up recovery: after a crash, the log says what happened to the runs that were in flight.
//!
//! A run that started but has no terminal event was cut off by the process dying (a kill -9, a
//! power loss). Before the server takes requests, each such run gets what it could not write:
//! an error result for every tool call still unanswered, an `error` event and a `run_failed`
//! with error type `interrupted`. Clients that reconnect see the run end like any other; the
//! next turn's history stays well-formed (every call has its result).
//!
//! Idempotency keys claimed by a request whose run never wrote `run_started` are given back, so a
//! retry of that request starts the run instead of waiting for one that will never come.

use std::collections::HashSet;

use app::{AgentEvent, DeltaAction, EventKind};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::delivery::writer::{AppendError, Writer};
use crate::store::{EventDraft, EventLog, Store, StoreError};

/// The sentence an interrupted run and its unanswered tool calls carry.
pub const INTERRUPTED_MESSAGE: &str = "the server stopped while this run was in progress";

/// Events of one interrupted run read per page while looking for its unanswered calls.
const RECOVERY_PAGE_EVENTS: u32 = 1000;

/// What recovery did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Runs that were in flight, now ended with `run_failed` (`interrupted`).
    pub interrupted_runs: Vec<Uuid>,
    /// Tool calls of those runs that got an error result.
    pub answered_calls: usize,
    /// Idempotency keys given back because their run never started.
    pub released_keys: u64,
    /// Runs an external producer writes whose lease has time left, left open for it: `(agent,
    /// run, producer id)`. A stop of ours does not end the producer's run.
    pub left_to_producers: Vec<(Uuid, Uuid, String)>,
}

#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Append(#[from] AppendError),
}

/// Ends every run the log shows in flight with no live process executing it, except `alive`
/// (runs this process executes). Called at start-up, before any run can start, and with
/// PostgreSQL periodically by [`crate::cluster`] for runs whose process is gone.
pub async fn recover(
    store: &dyn Store,
    writer: &Writer,
    alive: &[Uuid],
) -> Result<Recovered, RecoveryError> {
    let mut recovered = Recovered {
        released_keys: store.release_unstarted_run_keys().await?,
        ..Recovered::default()
    };
    for started in store.unfinished_runs().await? {
        let Some(run_id) = started.run_id else {
            continue;
        };
        if alive.contains(&run_id) {
            continue;
        }
        if let Some(producer) = producer_with_lease(store, &started, run_id).await? {
            recovered.left_to_producers.push((started.agent_id, run_id, producer));
            continue;
        }
        let events = run_events(store, &started).await?;
        let drafts = interruption(&started, &events);
        recovered.answered_calls +=
            drafts.iter().filter(|draft| draft.kind == EventKind::ToolResult).count();
        match writer.append_closing(started.agent_id, drafts).await {
            Ok(_) => {}
            // Another process ended it first (or its owner came back): not ours to end.
            Err(AppendError::Store(StoreError::RunNotOwned(_))) => continue,
            Err(error) => return Err(error.into()),
        }
        tracing::warn!(agent_id = %started.agent_id, %run_id, "run was in flight when the server stopped: marked interrupted");
        recovered.interrupted_runs.push(run_id);
    }
    Ok(recovered)
}

/// The producer of the run `started` began, when an external producer writes it and its lease
/// (counted from its last accepted batch, as stored) has time left.
async fn producer_with_lease(
    store: &dyn Store,
    started: &AgentEvent,
    run_id: Uuid,
) -> Result<Option<String>, StoreError> {
    let Some(producer) = started.metadata.pointer("/producer/id").and_then(Value::as_str) else {
        return Ok(None);
    };
    let lease_ms = started
        .metadata
        .get("lease_ms")
        .and_then(Value::as_u64)
        .unwrap_or(crate::limits::PRODUCER_LEASE_MS_DEFAULT);
    let Some(position) = store.producer_position(started.agent_id, producer).await? else {
        return Ok(None);
    };
    let lease_end = position.updated_at
        + chrono::Duration::milliseconds(i64::try_from(lease_ms).unwrap_or(i64::MAX / 2));
    let live = position.stamp.run_id == Some(run_id) && lease_end > chrono::Utc::now();
    Ok(live.then(|| producer.to_owned()))
}

/// The events of the run that `started` began: it is the newest run of its agent (one run per
/// agent at a time), so they are everything from its `run_started` on.
pub async fn run_events(
    store: &dyn EventLog,
    started: &AgentEvent,
) -> Result<Vec<AgentEvent>, StoreError> {
    let mut events = Vec::new();
    let mut since = started.seq - 1;
    loop {
        let page = store.read_events(started.agent_id, since, RECOVERY_PAGE_EVENTS).await?;
        let full = page.len() as u32 == RECOVERY_PAGE_EVENTS;
        since = page.last().map_or(since, |event| event.seq);
        events.extend(page.into_iter().filter(|event| event.run_id == started.run_id));
        if !full {
            return Ok(events);
        }
    }
}

/// What an interrupted run still owes the log, in order: a result for each unanswered tool call,
/// the error, the end.
pub fn interruption(started: &AgentEvent, events: &[AgentEvent]) -> Vec<EventDraft> {
    let error = json!({ "type": "interrupted", "message": INTERRUPTED_MESSAGE, "retryable": true });
    closing_drafts(started, events, error)
}

/// The events that end a run which cannot go on (`error` = `{type, message, retryable}`), given
/// what of it is in the log: an error result for each tool call still unanswered, the `error`
/// event, and `run_failed`. Used by start-up recovery and by a run the log refused.
pub fn closing_drafts(
    started: &AgentEvent,
    events: &[AgentEvent],
    error: Value,
) -> Vec<EventDraft> {
    let why = error.get("message").and_then(Value::as_str).unwrap_or("the run stopped").to_owned();
    let answered: HashSet<&str> = events
        .iter()
        .filter(|event| event.kind == EventKind::ToolResult)
        .filter_map(|event| event.content.get("tool_call_id").and_then(Value::as_str))
        .collect();
    let draft = |kind: EventKind, event: &AgentEvent| {
        let mut draft = EventDraft::new(kind);
        draft.run_id = started.run_id;
        draft.thread_id = event.thread_id;
        draft
    };
    let mut drafts = Vec::new();
    for call in events.iter().filter(|event| {
        event.kind == EventKind::ToolCall && event.delta.is_none() && event.delta_path.is_none()
    }) {
        let Some(call_id) = call.content.get("tool_call_id").and_then(Value::as_str) else {
            continue;
        };
        if answered.contains(call_id) {
            continue;
        }
        let mut status = draft(EventKind::ToolCall, call);
        status.block_id = call.block_id;
        status.message_id = call.message_id;
        status.delta = Some(json!({ "status": "error" }));
        status.delta_path = Some(String::new());
        status.delta_action = Some(DeltaAction::Merge);
        drafts.push(status);
        let mut result = draft(EventKind::ToolResult, call);
        result.block_id = call.block_id;
        result.message_id = Some(Uuid::new_v4());
        result.content = json!({
            "tool_call_id": call_id,
            "name": call.content.get("name").cloned().unwrap_or(Value::Null),
            "result": format!("not finished: {why}"),
            "is_error": true,
        });
        drafts.push(result);
    }
    let mut reported = draft(EventKind::Error, started);
    reported.message_id = Some(Uuid::new_v4());
    reported.content = error.clone();
    drafts.push(reported);
    let usage = events
        .iter()
        .rev()
        .find(|event| event.kind == EventKind::Usage)
        .map_or(Value::Null, |event| event.content.clone());
    let mut end = draft(EventKind::RunFailed, started);
    end.content = json!({ "stop_reason": "error", "error": error, "usage": usage });
    drafts.push(end);
    drafts
}
