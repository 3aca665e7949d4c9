//! What each produced event becomes, and how a run its producer did not end is closed: the
//! per-kind rules of [`super::check_batch`], as methods of the run they are checked against.

use app::{DeltaAction, EventKind};
use serde_json::{json, Value};
use uuid::Uuid;

use super::{
    name_field, object_or_empty, object_or_null, Call, ProducedEvent, ProducedRun, Stamp, Stop,
    DELTA_PATH_CHARS_MAX, PRODUCED_CALLS_PER_RUN_MAX,
};
use crate::agent::registry::RunLimits;
use crate::limits::EVENT_BYTES_MAX;
use crate::store::EventDraft;

impl ProducedRun {
    pub(super) fn draft(
        &self,
        stamp: &mut Stamp,
        kind: EventKind,
        thread_id: Option<Uuid>,
    ) -> EventDraft {
        let mut draft = stamp.draft(kind);
        draft.run_id = Some(self.run_id);
        draft.thread_id = Some(thread_id.unwrap_or(self.thread_id));
        draft
    }

    /// Counts an event against the run's limits.
    pub(super) fn count(&mut self, draft: &EventDraft, limits: RunLimits) -> Result<(), String> {
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
    pub(super) fn event(
        &mut self,
        stamp: &mut Stamp,
        kind: EventKind,
        item: ProducedEvent,
    ) -> Result<Vec<EventDraft>, String> {
        check_delta(&item)?;
        match kind {
            EventKind::User | EventKind::Text | EventKind::Thinking => {
                self.message(stamp, kind, item)
            }
            EventKind::ToolCall => self.tool_call(stamp, item),
            EventKind::ToolResult => self.tool_result(stamp, item),
            EventKind::Usage => {
                let content = object_or_null(item.content, "content")?;
                for field in ["input_tokens", "output_tokens"] {
                    if content.get(field).is_some_and(|value| value.as_u64().is_none()) {
                        return Err(format!("usage's content.{field} must be a whole number"));
                    }
                }
                self.usage = content.clone();
                Ok(vec![self.plain(stamp, kind, item.thread_id, content, item.raw, item.metadata)?])
            }
            EventKind::Loading => {
                let content = object_or_null(item.content, "content")?;
                Ok(vec![self.plain(stamp, kind, item.thread_id, content, item.raw, item.metadata)?])
            }
            EventKind::Error => {
                let content = object_or_null(item.content, "content")?;
                name_field(&content, "message", "error")?;
                let mut draft =
                    self.plain(stamp, kind, item.thread_id, content, item.raw, item.metadata)?;
                draft.message_id = Some(item.message_id.unwrap_or_else(Uuid::new_v4));
                Ok(vec![draft])
            }
            EventKind::RunCompleted | EventKind::RunFailed | EventKind::RunCancelled => {
                self.end(stamp, kind, item)
            }
            EventKind::ApprovalRequested | EventKind::ApprovalResponse => Err(format!(
                "{} is not produced: approvals are asked and answered through the server",
                kind.as_str()
            )),
            EventKind::RunStarted | EventKind::StreamMessage | EventKind::Other => Err(format!(
                "unknown kind {:?}: one of user, text, thinking, tool_call, tool_result, usage, loading, error, run_started, run_completed, run_failed, run_cancelled",
                item.kind
            )),
        }
    }

    /// An event with a whole content and no message.
    fn plain(
        &self,
        stamp: &mut Stamp,
        kind: EventKind,
        thread_id: Option<Uuid>,
        content: Value,
        raw: Option<Value>,
        metadata: Option<Value>,
    ) -> Result<EventDraft, String> {
        let mut draft = self.draft(stamp, kind, thread_id);
        draft.content = content;
        draft.raw = raw;
        draft.metadata = object_or_null(metadata, "metadata")?;
        Ok(draft)
    }

    /// `user`, `text`, `thinking`: a delta of a message, or its whole content.
    fn message(
        &mut self,
        stamp: &mut Stamp,
        kind: EventKind,
        item: ProducedEvent,
    ) -> Result<Vec<EventDraft>, String> {
        let message_id =
            item.message_id.ok_or_else(|| format!("{} needs message_id", kind.as_str()))?;
        let content = object_or_null(item.content, "content")?;
        if item.delta.is_none() {
            if kind == EventKind::User {
                name_field(&content, "text", "user")?;
            } else if content.is_null() {
                return Err(format!("{} needs a delta or a content", kind.as_str()));
            }
        }
        self.claim_message(message_id, kind)?;
        let mut draft = self.draft(stamp, kind, item.thread_id);
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
        let by_id = content.and_then(|content| content.get("tool_call_id")).and_then(Value::as_str);
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

    fn tool_call(
        &mut self,
        stamp: &mut Stamp,
        item: ProducedEvent,
    ) -> Result<Vec<EventDraft>, String> {
        if item.delta.is_some() {
            let index = self.call_named(item.message_id, item.content.as_ref())?;
            let call = &self.calls[index];
            if call.answered {
                return Err(format!("tool call {} has its result already", call.tool_call_id));
            }
            let mut draft = self.draft(stamp, EventKind::ToolCall, Some(call.thread_id));
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
        if self.calls.iter().any(|call| call.tool_call_id == tool_call_id) {
            return Err(format!("tool call {tool_call_id:?} was opened already in this run"));
        }
        if self.calls.len() >= PRODUCED_CALLS_PER_RUN_MAX {
            return Err(format!("a run makes at most {PRODUCED_CALLS_PER_RUN_MAX} tool calls"));
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
        let mut draft = self.draft(stamp, EventKind::ToolCall, Some(call.thread_id));
        draft.block_id = Some(call.block_id);
        draft.message_id = Some(call.message_id);
        draft.content = content;
        draft.raw = item.raw;
        draft.metadata = object_or_null(item.metadata, "metadata")?;
        self.calls.push(call);
        Ok(vec![draft])
    }

    fn tool_result(
        &mut self,
        stamp: &mut Stamp,
        item: ProducedEvent,
    ) -> Result<Vec<EventDraft>, String> {
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
        let status = self.call_status(stamp, &call, if is_error { "error" } else { "done" });
        let mut result = self.draft(stamp, EventKind::ToolResult, Some(call.thread_id));
        result.block_id = Some(call.block_id);
        result.message_id = Some(item.message_id.unwrap_or_else(Uuid::new_v4));
        result.content = content;
        result.raw = item.raw;
        result.metadata = object_or_null(item.metadata, "metadata")?;
        Ok(vec![status, result])
    }

    /// The merge that sets a call's card status, as our loop writes it.
    fn call_status(&self, stamp: &mut Stamp, call: &Call, status: &str) -> EventDraft {
        let mut draft = self.draft(stamp, EventKind::ToolCall, Some(call.thread_id));
        draft.block_id = Some(call.block_id);
        draft.message_id = Some(call.message_id);
        draft.delta = Some(json!({ "status": status }));
        draft.delta_path = Some(String::new());
        draft.delta_action = Some(DeltaAction::Merge);
        draft
    }

    /// An error result for every call still open, saying why.
    fn answer_open_calls(&mut self, stamp: &mut Stamp, why: &str) -> Vec<EventDraft> {
        let mut drafts = Vec::new();
        for index in 0..self.calls.len() {
            if self.calls[index].answered {
                continue;
            }
            self.calls[index].answered = true;
            let call = self.calls[index].clone();
            drafts.push(self.call_status(stamp, &call, "error"));
            let mut result = self.draft(stamp, EventKind::ToolResult, Some(call.thread_id));
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
    fn end(
        &mut self,
        stamp: &mut Stamp,
        kind: EventKind,
        item: ProducedEvent,
    ) -> Result<Vec<EventDraft>, String> {
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
        let mut drafts =
            self.answer_open_calls(stamp, "the producer ended the run without a result");
        let mut end = self.draft(stamp, kind, item.thread_id);
        end.content = content;
        end.raw = item.raw;
        end.metadata = object_or_null(item.metadata, "metadata")?;
        drafts.push(end);
        Ok(drafts)
    }

    /// What ends the run when its producer did not: error results for open calls, then
    /// `run_cancelled` (cancelled) or an `error` and `run_failed` of type `interrupted`.
    pub fn stopped(&mut self, stop: Stop) -> Vec<EventDraft> {
        let stamp = &mut Stamp::new();
        let why = match stop {
            Stop::Cancelled => "the run was cancelled".to_owned(),
            Stop::LeaseExpired => {
                format!("the producer sent nothing for {} ms (its lease)", self.lease_ms)
            }
            Stop::Shutdown => "the server shut down while the producer's run was open".to_owned(),
            Stop::Abandoned => "the producer's stream ended before the run did".to_owned(),
        };
        let mut drafts = self.answer_open_calls(stamp, &why);
        if stop == Stop::Cancelled {
            let mut end = self.draft(stamp, EventKind::RunCancelled, None);
            end.content = json!({ "stop_reason": "cancelled", "usage": self.usage });
            drafts.push(end);
            return drafts;
        }
        let error = json!({ "type": "interrupted", "message": why, "retryable": true });
        let mut reported = self.draft(stamp, EventKind::Error, None);
        reported.message_id = Some(Uuid::new_v4());
        reported.content = error.clone();
        drafts.push(reported);
        let mut end = self.draft(stamp, EventKind::RunFailed, None);
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
