//! An external producer's batch, checked and made into drafts, pure. The producer writes in our
//! own event model (`AgentEvent` without what the server assigns: id, seq, agent, time); this
//! is where the rules our own loop follows by construction are checked, so every surface serves
//! a produced run as it serves ours:
//!
//! - a batch opens a run with `run_started` (first, and only when no run is open), or continues
//!   the producer's open run; nothing follows a run's end in its batch;
//! - text and thinking are deltas (or whole contents) of a message (`message_id`); a message
//!   keeps its kind; `append` takes a string, `merge` an object;
//! - a tool call opens with `content.tool_call_id` and `content.name` (unique in the run), its
//!   later pieces name it by `message_id` or `content.tool_call_id`, and it gets exactly one
//!   `tool_result` (its card's status merge is written with it, as our loop does);
//! - a run's end answers every call still open with an error result first, and carries the
//!   run's last usage when the producer gave none;
//! - approvals are not produced (a person answers them through the server), nor unknown kinds.
//!
//! One refusal refuses the whole batch, naming the event by its index.

use std::collections::HashMap;

use app::{DeltaAction, EventKind};
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::agent::registry::{RunLimits, EVENT_BYTES_MAX};
use crate::store::EventDraft;

/// Events one batch (one request, or one line of a streamed request) may hold.
pub const PRODUCE_BATCH_EVENTS_MAX: usize = 4096;
/// A tool call id or a tool name longer than this (in characters) is refused.
pub const PRODUCED_NAME_CHARS_MAX: usize = 256;
/// A delta path longer than this (in characters) is refused.
pub const DELTA_PATH_CHARS_MAX: usize = 256;
/// Tool calls one produced run may make.
pub const PRODUCED_CALLS_PER_RUN_MAX: usize = 4096;
/// A producer that sends nothing for this long, by default, has its run ended `interrupted`.
pub const PRODUCER_LEASE_MS_DEFAULT: u64 = 30_000;
/// The lease a producer may ask for in `run_started`'s `metadata.lease_ms`, at least and at most.
pub const PRODUCER_LEASE_MS_MIN: u64 = 1_000;
pub const PRODUCER_LEASE_MS_MAX: u64 = 600_000;

/// One event as a producer sends it. Unknown fields are refused by name (`id`, `seq`,
/// `agent_id` and `created_at` are the server's to assign).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProducedEvent {
    pub kind: String,
    #[serde(default)]
    pub run_id: Option<Uuid>,
    #[serde(default)]
    pub thread_id: Option<Uuid>,
    #[serde(default)]
    pub block_id: Option<Uuid>,
    #[serde(default)]
    pub message_id: Option<Uuid>,
    #[serde(default)]
    pub delta: Option<Value>,
    #[serde(default)]
    pub delta_path: Option<String>,
    #[serde(default)]
    pub delta_action: Option<DeltaAction>,
    #[serde(default)]
    pub content: Option<Value>,
    #[serde(default)]
    pub raw: Option<Value>,
    #[serde(default)]
    pub metadata: Option<Value>,
}

/// A batch's events from its JSON: an array of events, or one event.
pub fn parse_batch(value: Value) -> Result<Vec<ProducedEvent>, Refusal> {
    let items = match value {
        Value::Array(items) => items,
        item @ Value::Object(_) => vec![item],
        _ => {
            return Err(Refusal::batch(
                "the body must be a JSON array of events (or one event object)",
            ))
        }
    };
    if items.is_empty() {
        return Err(Refusal::batch("the batch has no events"));
    }
    if items.len() > PRODUCE_BATCH_EVENTS_MAX {
        return Err(Refusal::batch(format!(
            "a batch holds at most {PRODUCE_BATCH_EVENTS_MAX} events"
        )));
    }
    items
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            serde_json::from_value::<ProducedEvent>(item)
                .map_err(|error| Refusal::at(index, error.to_string()))
        })
        .collect()
}

/// Why a batch was refused: the event (by index) and what was wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub index: Option<usize>,
    pub message: String,
    /// True when the refusal is the run's event or byte limit (413), not a malformed event.
    pub over_limit: bool,
}

impl Refusal {
    fn at(index: usize, message: impl Into<String>) -> Refusal {
        Refusal {
            index: Some(index),
            message: message.into(),
            over_limit: false,
        }
    }

    fn batch(message: impl Into<String>) -> Refusal {
        Refusal {
            index: None,
            message: message.into(),
            over_limit: false,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.index {
            Some(index) => write!(formatter, "event {index}: {}", self.message),
            None => write!(formatter, "{}", self.message),
        }
    }
}

/// A tool call of a produced run.
#[derive(Clone, Debug)]
struct Call {
    tool_call_id: String,
    name: String,
    thread_id: Uuid,
    block_id: Uuid,
    message_id: Uuid,
    answered: bool,
}

/// What a produced run has written so far: what its next batch is checked against.
#[derive(Clone, Debug)]
pub struct ProducedRun {
    pub run_id: Uuid,
    /// The run's main thread (events that name none go there).
    pub thread_id: Uuid,
    /// How long the producer may stay silent before its run is ended `interrupted`.
    pub lease_ms: u64,
    calls: Vec<Call>,
    /// The kind of each message the run has written to.
    messages: HashMap<Uuid, EventKind>,
    events: u64,
    bytes: u64,
    usage: Value,
}

/// Who produces: recorded in `run_started`'s metadata.
#[derive(Clone, Debug)]
pub struct Producer<'a> {
    pub id: &'a str,
    pub epoch: u64,
}

/// A checked batch: its drafts, and the run after it (`None` once the batch ended it).
#[derive(Debug)]
pub struct Checked {
    pub drafts: Vec<EventDraft>,
    pub run: Option<ProducedRun>,
    /// True when the batch opened the run.
    pub opened: bool,
}

/// How a run ends when its producer does not end it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Someone cancelled it (REST, WebSocket, the stop button, deleting the agent).
    Cancelled,
    /// The producer sent nothing for its lease.
    LeaseExpired,
    /// The server is shutting down.
    Shutdown,
    /// The producer's one request (a piped stream without producer headers, which cannot be
    /// resumed) ended before the run did.
    Abandoned,
}

/// Checks `items` against the producer's open run (`None`: no run is open) and makes them drafts.
pub fn check_batch(
    open: Option<&ProducedRun>,
    items: Vec<ProducedEvent>,
    producer: Producer<'_>,
    limits: RunLimits,
) -> Result<Checked, Refusal> {
    let mut run = open.cloned();
    let mut drafts = Vec::with_capacity(items.len() + 2);
    let mut opened = false;
    let mut ended = false;
    for (index, item) in items.into_iter().enumerate() {
        let refuse = |message: String| Refusal::at(index, message);
        if ended {
            return Err(refuse("the run ended earlier in this batch".into()));
        }
        let kind = EventKind::parse(&item.kind);
        if kind == EventKind::RunStarted {
            if index > 0 {
                return Err(refuse("run_started must be a batch's first event".into()));
            }
            if let Some(open) = &run {
                return Err(refuse(format!(
                    "run {} is still open: end it (run_completed, run_failed or run_cancelled) before starting another",
                    open.run_id
                )));
            }
            let (started, produced) = open_run(item, &producer).map_err(refuse)?;
            drafts.push(started);
            run = Some(produced);
            opened = true;
            continue;
        }
        let Some(current) = run.as_mut() else {
            return Err(refuse(
                "no run is open for this producer: begin the batch with run_started".into(),
            ));
        };
        if item.run_id.is_some_and(|run_id| run_id != current.run_id) {
            return Err(refuse(format!(
                "run_id must be the open run's, {}",
                current.run_id
            )));
        }
        let made = current.event(kind, item).map_err(refuse)?;
        ended = kind.is_run_end();
        for draft in made {
            current.count(&draft, limits).map_err(|message| Refusal {
                index: Some(index),
                message,
                over_limit: true,
            })?;
            drafts.push(draft);
        }
    }
    Ok(Checked {
        drafts,
        run: if ended { None } else { run },
        opened,
    })
}

/// `run_started`: a new run, its main thread, its lease.
fn open_run(
    item: ProducedEvent,
    producer: &Producer<'_>,
) -> Result<(EventDraft, ProducedRun), String> {
    if item.run_id.is_some() {
        return Err("run_id is the server's to assign: leave it out of run_started".into());
    }
    if item.delta.is_some() || item.delta_path.is_some() || item.delta_action.is_some() {
        return Err("run_started carries no delta".into());
    }
    let mut metadata = object_or_empty(item.metadata, "metadata")?;
    let lease_ms = match metadata.get("lease_ms") {
        None => PRODUCER_LEASE_MS_DEFAULT,
        Some(value) => value
            .as_u64()
            .filter(|ms| (PRODUCER_LEASE_MS_MIN..=PRODUCER_LEASE_MS_MAX).contains(ms))
            .ok_or_else(|| {
                format!("metadata.lease_ms must be a whole number of milliseconds from {PRODUCER_LEASE_MS_MIN} to {PRODUCER_LEASE_MS_MAX}")
            })?,
    };
    metadata["lease_ms"] = json!(lease_ms);
    metadata["producer"] = json!({ "id": producer.id, "epoch": producer.epoch });
    if metadata.get("provider").is_none() {
        metadata["provider"] = json!("producer");
    }
    let run = ProducedRun {
        run_id: Uuid::now_v7(),
        thread_id: item.thread_id.unwrap_or_else(Uuid::new_v4),
        lease_ms,
        calls: Vec::new(),
        messages: HashMap::new(),
        events: 1,
        bytes: 0,
        usage: Value::Null,
    };
    let mut draft = run.draft(EventKind::RunStarted, None);
    draft.content = object_or_null(item.content, "content")?;
    draft.raw = item.raw;
    draft.metadata = metadata;
    Ok((draft, run))
}

fn object_or_empty(value: Option<Value>, field: &str) -> Result<Value, String> {
    match object_or_null(value, field)? {
        Value::Null => Ok(json!({})),
        object => Ok(object),
    }
}

fn object_or_null(value: Option<Value>, field: &str) -> Result<Value, String> {
    match value {
        None | Some(Value::Null) => Ok(Value::Null),
        Some(object @ Value::Object(_)) => Ok(object),
        Some(_) => Err(format!("{field} must be a JSON object")),
    }
}

fn name_field<'a>(content: &'a Value, field: &str, kind: &str) -> Result<&'a str, String> {
    let text = content
        .get(field)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .ok_or_else(|| format!("{kind} needs content.{field}, a non-empty string"))?;
    if text.chars().count() > PRODUCED_NAME_CHARS_MAX {
        return Err(format!(
            "content.{field} is longer than {PRODUCED_NAME_CHARS_MAX} characters"
        ));
    }
    Ok(text)
}

impl ProducedRun {
    fn draft(&self, kind: EventKind, thread_id: Option<Uuid>) -> EventDraft {
        let mut draft = EventDraft::new(kind);
        draft.run_id = Some(self.run_id);
        draft.thread_id = Some(thread_id.unwrap_or(self.thread_id));
        draft
    }

    /// Counts an event against the run's limits.
    fn count(&mut self, draft: &EventDraft, limits: RunLimits) -> Result<(), String> {
        let bytes = crate::agent::run::draft_bytes(draft);
        if bytes > EVENT_BYTES_MAX {
            return Err(format!(
                "the event is {bytes} bytes; one event may be {EVENT_BYTES_MAX} at most"
            ));
        }
        if self.events + 1 > limits.events_max {
            return Err(format!(
                "the run has reached its limit of {} events: end it",
                limits.events_max
            ));
        }
        if self.bytes + bytes as u64 > limits.bytes_max {
            return Err(format!(
                "the run has reached its limit of {} bytes: end it",
                limits.bytes_max
            ));
        }
        self.events += 1;
        self.bytes += bytes as u64;
        Ok(())
    }

    /// A message's kind is fixed by its first event.
    fn claim_message(&mut self, message_id: Uuid, kind: EventKind) -> Result<(), String> {
        match self.messages.get(&message_id) {
            Some(existing) if *existing != kind => Err(format!(
                "message {message_id} is a {} message, not {}",
                existing.as_str(),
                kind.as_str()
            )),
            _ => {
                self.messages.insert(message_id, kind);
                Ok(())
            }
        }
    }

    /// The drafts one produced event (not `run_started`) becomes.
    fn event(&mut self, kind: EventKind, item: ProducedEvent) -> Result<Vec<EventDraft>, String> {
        check_delta(&item)?;
        match kind {
            EventKind::User | EventKind::Text | EventKind::Thinking => self.message(kind, item),
            EventKind::ToolCall => self.tool_call(item),
            EventKind::ToolResult => self.tool_result(item),
            EventKind::Usage => {
                let content = object_or_null(item.content, "content")?;
                for field in ["input_tokens", "output_tokens"] {
                    if content.get(field).is_some_and(|value| value.as_u64().is_none()) {
                        return Err(format!("usage's content.{field} must be a whole number"));
                    }
                }
                self.usage = content.clone();
                Ok(vec![self.plain(kind, item.thread_id, content, item.raw, item.metadata)?])
            }
            EventKind::Loading => {
                let content = object_or_null(item.content, "content")?;
                Ok(vec![self.plain(kind, item.thread_id, content, item.raw, item.metadata)?])
            }
            EventKind::Error => {
                let content = object_or_null(item.content, "content")?;
                name_field(&content, "message", "error")?;
                let mut draft = self.plain(kind, item.thread_id, content, item.raw, item.metadata)?;
                draft.message_id = Some(item.message_id.unwrap_or_else(Uuid::new_v4));
                Ok(vec![draft])
            }
            EventKind::RunCompleted | EventKind::RunFailed | EventKind::RunCancelled => {
                self.end(kind, item)
            }
            EventKind::ApprovalRequested | EventKind::ApprovalResponse => Err(format!(
                "{} is not produced: approvals are asked and answered through the server",
                kind.as_str()
            )),
            EventKind::RunStarted | EventKind::Other => Err(format!(
                "unknown kind {:?}: one of user, text, thinking, tool_call, tool_result, usage, loading, error, run_started, run_completed, run_failed, run_cancelled",
                item.kind
            )),
        }
    }

    /// An event with a whole content and no message.
    fn plain(
        &self,
        kind: EventKind,
        thread_id: Option<Uuid>,
        content: Value,
        raw: Option<Value>,
        metadata: Option<Value>,
    ) -> Result<EventDraft, String> {
        let mut draft = self.draft(kind, thread_id);
        draft.content = content;
        draft.raw = raw;
        draft.metadata = object_or_null(metadata, "metadata")?;
        Ok(draft)
    }

    /// `user`, `text`, `thinking`: a delta of a message, or its whole content.
    fn message(&mut self, kind: EventKind, item: ProducedEvent) -> Result<Vec<EventDraft>, String> {
        let message_id = item
            .message_id
            .ok_or_else(|| format!("{} needs message_id", kind.as_str()))?;
        let content = object_or_null(item.content, "content")?;
        if item.delta.is_none() {
            if kind == EventKind::User {
                name_field(&content, "text", "user")?;
            } else if content.is_null() {
                return Err(format!("{} needs a delta or a content", kind.as_str()));
            }
        }
        self.claim_message(message_id, kind)?;
        let mut draft = self.draft(kind, item.thread_id);
        draft.block_id = Some(item.block_id.unwrap_or(message_id));
        draft.message_id = Some(message_id);
        draft.content = content;
        if item.delta.is_some() {
            draft.delta = item.delta;
            draft.delta_path = Some(item.delta_path.unwrap_or_else(|| "text".to_owned()));
            draft.delta_action = item.delta_action;
        }
        draft.raw = item.raw;
        draft.metadata = object_or_null(item.metadata, "metadata")?;
        Ok(vec![draft])
    }

    /// The call an event names: by its card's `message_id`, else by `content.tool_call_id`.
    fn call_named(
        &self,
        message_id: Option<Uuid>,
        content: Option<&Value>,
    ) -> Result<usize, String> {
        let by_id = content
            .and_then(|content| content.get("tool_call_id"))
            .and_then(Value::as_str);
        self.calls
            .iter()
            .position(|call| match (message_id, by_id) {
                (Some(message_id), _) => call.message_id == message_id,
                (None, Some(id)) => call.tool_call_id == id,
                (None, None) => false,
            })
            .ok_or_else(|| {
                "names no tool call of this run (by message_id or content.tool_call_id)".to_owned()
            })
    }

    fn tool_call(&mut self, item: ProducedEvent) -> Result<Vec<EventDraft>, String> {
        if item.delta.is_some() {
            let index = self.call_named(item.message_id, item.content.as_ref())?;
            let call = &self.calls[index];
            if call.answered {
                return Err(format!(
                    "tool call {} has its result already",
                    call.tool_call_id
                ));
            }
            let mut draft = self.draft(EventKind::ToolCall, Some(call.thread_id));
            draft.block_id = Some(call.block_id);
            draft.message_id = Some(call.message_id);
            draft.delta = item.delta;
            draft.delta_path = Some(item.delta_path.unwrap_or_default());
            draft.delta_action = item.delta_action;
            draft.content = object_or_null(item.content, "content")?;
            draft.raw = item.raw;
            draft.metadata = object_or_null(item.metadata, "metadata")?;
            return Ok(vec![draft]);
        }
        let mut content = object_or_null(item.content, "content")?;
        let tool_call_id = name_field(&content, "tool_call_id", "a tool call")?.to_owned();
        let name = name_field(&content, "name", "a tool call")?.to_owned();
        if self
            .calls
            .iter()
            .any(|call| call.tool_call_id == tool_call_id)
        {
            return Err(format!(
                "tool call {tool_call_id:?} was opened already in this run"
            ));
        }
        if self.calls.len() >= PRODUCED_CALLS_PER_RUN_MAX {
            return Err(format!(
                "a run makes at most {PRODUCED_CALLS_PER_RUN_MAX} tool calls"
            ));
        }
        if content.get("input").is_none() {
            content["input"] = json!({});
        }
        if content.get("status").is_none() {
            content["status"] = json!("streaming");
        }
        let message_id = item.message_id.unwrap_or_else(Uuid::new_v4);
        if self.messages.contains_key(&message_id) {
            return Err(format!("message {message_id} is taken by another message"));
        }
        self.claim_message(message_id, EventKind::ToolCall)?;
        let call = Call {
            tool_call_id,
            name,
            thread_id: item.thread_id.unwrap_or_else(Uuid::new_v4),
            block_id: item.block_id.unwrap_or_else(Uuid::new_v4),
            message_id,
            answered: false,
        };
        let mut draft = self.draft(EventKind::ToolCall, Some(call.thread_id));
        draft.block_id = Some(call.block_id);
        draft.message_id = Some(call.message_id);
        draft.content = content;
        draft.raw = item.raw;
        draft.metadata = object_or_null(item.metadata, "metadata")?;
        self.calls.push(call);
        Ok(vec![draft])
    }

    fn tool_result(&mut self, item: ProducedEvent) -> Result<Vec<EventDraft>, String> {
        if item.delta.is_some() {
            return Err("a tool_result is whole: no delta".into());
        }
        let mut content = object_or_null(item.content, "content")?;
        name_field(&content, "tool_call_id", "a tool_result")?;
        // A result's own message_id is its message's, not the call's: named by id only.
        let index = self.call_named(None, Some(&content))?;
        if self.calls[index].answered {
            return Err(format!(
                "tool call {} has its result already",
                self.calls[index].tool_call_id
            ));
        }
        if content.get("result").is_none() {
            return Err("a tool_result needs content.result".into());
        }
        let is_error = match content.get("is_error") {
            None => false,
            Some(Value::Bool(flag)) => *flag,
            Some(_) => return Err("content.is_error must be true or false".into()),
        };
        content["is_error"] = json!(is_error);
        self.calls[index].answered = true;
        let call = self.calls[index].clone();
        if content.get("name").is_none() {
            content["name"] = json!(call.name);
        }
        let status = self.call_status(&call, if is_error { "error" } else { "done" });
        let mut result = self.draft(EventKind::ToolResult, Some(call.thread_id));
        result.block_id = Some(call.block_id);
        result.message_id = Some(item.message_id.unwrap_or_else(Uuid::new_v4));
        result.content = content;
        result.raw = item.raw;
        result.metadata = object_or_null(item.metadata, "metadata")?;
        Ok(vec![status, result])
    }

    /// The merge that sets a call's card status, as our loop writes it.
    fn call_status(&self, call: &Call, status: &str) -> EventDraft {
        let mut draft = self.draft(EventKind::ToolCall, Some(call.thread_id));
        draft.block_id = Some(call.block_id);
        draft.message_id = Some(call.message_id);
        draft.delta = Some(json!({ "status": status }));
        draft.delta_path = Some(String::new());
        draft.delta_action = Some(DeltaAction::Merge);
        draft
    }

    /// An error result for every call still open, saying why.
    fn answer_open_calls(&mut self, why: &str) -> Vec<EventDraft> {
        let mut drafts = Vec::new();
        for index in 0..self.calls.len() {
            if self.calls[index].answered {
                continue;
            }
            self.calls[index].answered = true;
            let call = self.calls[index].clone();
            drafts.push(self.call_status(&call, "error"));
            let mut result = self.draft(EventKind::ToolResult, Some(call.thread_id));
            result.block_id = Some(call.block_id);
            result.message_id = Some(Uuid::new_v4());
            result.content = json!({
                "tool_call_id": call.tool_call_id,
                "name": call.name,
                "result": format!("not finished: {why}"),
                "is_error": true,
            });
            drafts.push(result);
        }
        drafts
    }

    /// The producer's end of its run.
    fn end(&mut self, kind: EventKind, item: ProducedEvent) -> Result<Vec<EventDraft>, String> {
        let mut content = object_or_empty(item.content, "content")?;
        match content.get("stop_reason") {
            None => {
                let reason = match kind {
                    EventKind::RunCompleted => "end_turn",
                    EventKind::RunFailed => "error",
                    _ => "cancelled",
                };
                content["stop_reason"] = json!(reason);
            }
            Some(Value::String(_)) => {}
            Some(_) => return Err("content.stop_reason must be a string".into()),
        }
        if content.get("usage").is_none() {
            content["usage"] = self.usage.clone();
        }
        let mut drafts = self.answer_open_calls("the producer ended the run without a result");
        let mut end = self.draft(kind, item.thread_id);
        end.content = content;
        end.raw = item.raw;
        end.metadata = object_or_null(item.metadata, "metadata")?;
        drafts.push(end);
        Ok(drafts)
    }

    /// What ends the run when its producer did not: error results for open calls, then
    /// `run_cancelled` (cancelled) or an `error` and `run_failed` of type `interrupted`.
    pub fn stopped(&mut self, stop: Stop) -> Vec<EventDraft> {
        let why = match stop {
            Stop::Cancelled => "the run was cancelled".to_owned(),
            Stop::LeaseExpired => format!(
                "the producer sent nothing for {} ms (its lease)",
                self.lease_ms
            ),
            Stop::Shutdown => "the server shut down while the producer's run was open".to_owned(),
            Stop::Abandoned => "the producer's stream ended before the run did".to_owned(),
        };
        let mut drafts = self.answer_open_calls(&why);
        if stop == Stop::Cancelled {
            let mut end = self.draft(EventKind::RunCancelled, None);
            end.content = json!({ "stop_reason": "cancelled", "usage": self.usage });
            drafts.push(end);
            return drafts;
        }
        let error = json!({ "type": "interrupted", "message": why, "retryable": true });
        let mut reported = self.draft(EventKind::Error, None);
        reported.message_id = Some(Uuid::new_v4());
        reported.content = error.clone();
        drafts.push(reported);
        let mut end = self.draft(EventKind::RunFailed, None);
        end.content = json!({ "stop_reason": "error", "error": error, "usage": self.usage });
        drafts.push(end);
        drafts
    }
}

/// A delta's shape: its action with it, `append` a string, `merge` an object, a bounded path.
fn check_delta(item: &ProducedEvent) -> Result<(), String> {
    match (&item.delta, item.delta_action) {
        (None, None) if item.delta_path.is_none() => Ok(()),
        (None, _) => Err("delta_action and delta_path go with a delta".into()),
        (Some(_), None) => Err("a delta needs delta_action (append, replace or merge)".into()),
        (Some(delta), Some(action)) => {
            match (action, delta) {
                (DeltaAction::Append, Value::String(_)) => {}
                (DeltaAction::Append, _) => return Err("an append delta must be a string".into()),
                (DeltaAction::Merge, Value::Object(_)) => {}
                (DeltaAction::Merge, _) => return Err("a merge delta must be an object".into()),
                (DeltaAction::Replace, _) => {}
            }
            if let Some(path) = &item.delta_path {
                if path.chars().count() > DELTA_PATH_CHARS_MAX {
                    return Err(format!(
                        "delta_path is longer than {DELTA_PATH_CHARS_MAX} characters"
                    ));
                }
                if !path.is_empty() && path.split('.').any(str::is_empty) {
                    return Err(format!("delta_path {path:?} has an empty segment"));
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests;
