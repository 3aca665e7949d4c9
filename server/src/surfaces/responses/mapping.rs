//! A run's events as the Responses API's stream events, and the Response object they build.
//! Pure and stateful: events go in, in seq order from the run's `run_started`; stream events
//! come out numbered from 0 (`sequence_number`, +1 each). The numbering is a function of the
//! log alone, so a replay — from the start or after any `starting_after`, before or after a
//! restart — says exactly what the live stream said.
//!
//! The order the SDKs' accumulators require (openai-node 7 refuses anything else, and any event
//! type it does not know): `response.created` → `response.in_progress` → per output item
//! `output_item.added` → its parts and deltas → `output_item.done` → one terminal event carrying
//! the whole response, every item in it finished. Items, in the order they begin:
//! - the assistant's text as a `message` (one `output_text` part), its thinking as a
//!   `reasoning` item with one summary part;
//! - a call of the caller's own tools (a client tool) as a `function_call`: its arguments
//!   stream, and are done (as the JSON of the parsed input) when the call is;
//! - a call of the agent's tools (built-ins, MCP) as an `agentstream:tool_call` item once its
//!   result is in, and a call waiting for a person as an `agentstream:approval_request`: types
//!   with our prefix, which clients pass over.
//!
//! A cancelled run ends with `response.incomplete` whose response says `cancelled`: the
//! clients know no `response.cancelled` event, and a run cut off (a crash, `interrupted`) ends
//! `response.failed`, never with an SSE `error` (which makes the SDKs throw).

use std::collections::{HashMap, HashSet};

use app::{AgentEvent, EventKind};
use serde_json::{json, Value};
use uuid::Uuid;

use super::wire::{item_id, response_object, Echo, Head, Outcome, Status};
use crate::surfaces::steps::{text_of, text_piece};

/// The text or reasoning item being written.
#[derive(Debug)]
struct OpenText {
    index: usize,
    reasoning: bool,
    message_id: Uuid,
    item_id: String,
    text: String,
}

/// A tool call of this run, by its message id.
#[derive(Debug)]
struct Call {
    start_event: Uuid,
    call_id: String,
    name: String,
    arguments: String,
    /// The caller's own tool: a `function_call` item at `index`.
    client: bool,
    index: Option<usize>,
    input: Option<Value>,
    done: bool,
}

/// Maps one run's events to the Responses API's stream events.
#[derive(Debug, Default)]
pub struct ResponseMapper {
    head: Option<Head>,
    next_sequence: u64,
    status: Option<Status>,
    output: Vec<Value>,
    open: Option<OpenText>,
    calls: HashMap<Uuid, Call>,
    /// Message ids of the calls, by their tool call id.
    call_messages: HashMap<String, Uuid>,
    usage: Option<Value>,
    error: Option<Value>,
    incomplete_reason: Option<String>,
    completed_at: Option<i64>,
    /// What the caller gave the response: its message, and outputs of earlier calls.
    input: Vec<Value>,
    /// Calls of an earlier response that a person's answer lets this one carry out: their
    /// names, by tool call id.
    approved: HashMap<String, String>,
    /// The output items' ids so far (each unique).
    item_ids: HashSet<String>,
    /// Calls whose result was shown: one item per call (a log may hold a second result).
    results: HashSet<String>,
}

impl ResponseMapper {
    pub fn new() -> ResponseMapper {
        ResponseMapper::default()
    }

    /// True once the run's end was mapped.
    pub fn ended(&self) -> bool {
        self.completed_at.is_some()
    }

    /// The Response object as it stands; `None` before the run's start.
    pub fn response(&self) -> Option<Value> {
        let head = self.head.as_ref()?;
        let status = self.status?;
        let streaming = self.open.is_some() || self.calls.values().any(|call| !call.done);
        if !streaming {
            return Some(response_object(head, &self.outcome(status, &self.output)));
        }
        // Items still being written: their text and arguments as they stand.
        let mut output = self.output.clone();
        if let Some(open) = &self.open {
            *text_field(&mut output[open.index], open.reasoning) = json!(open.text);
        }
        for call in self.calls.values().filter(|call| !call.done) {
            if let Some(index) = call.index {
                output[index]["arguments"] = json!(call.arguments);
            }
        }
        Some(response_object(head, &self.outcome(status, &output)))
    }

    /// The response's input items, oldest first.
    pub fn input_items(&self) -> &[Value] {
        &self.input
    }

    fn outcome<'a>(&'a self, status: Status, output: &'a [Value]) -> Outcome<'a> {
        Outcome {
            status,
            output,
            usage: self.usage.as_ref(),
            error: self.error.as_ref().filter(|_| status == Status::Failed),
            incomplete_reason: self.incomplete_reason.as_deref(),
            completed_at: self.completed_at,
        }
    }

    /// Maps one event of the run, in seq order.
    pub fn push(&mut self, event: &AgentEvent) -> Vec<Value> {
        let mut out = Vec::new();
        if self.ended() {
            return out;
        }
        if self.head.is_none() {
            if event.kind == EventKind::RunStarted {
                self.start(event, &mut out);
            }
            // A response starts at its run's start; anything before it is not this response's.
            return out;
        }
        match event.kind {
            EventKind::Text | EventKind::Thinking => self.text(event, &mut out),
            EventKind::ToolCall => self.tool_call(event, &mut out),
            EventKind::ApprovalRequested => self.approval_request(event, &mut out),
            EventKind::ToolResult => self.tool_result(event, &mut out),
            EventKind::User => self.input.push(json!({
                "id": item_id("msg_", event.id),
                "type": "message",
                "role": "user",
                "status": "completed",
                "content": [{ "type": "input_text", "text": text_of(&event.content, "text") }],
            })),
            EventKind::ApprovalResponse => {
                let call_id = text_of(&event.content, "tool_call_id");
                self.approved.insert(call_id, text_of(&event.content, "name"));
            }
            EventKind::Usage => self.usage = Some(event.content.clone()),
            EventKind::Error => {
                let code = event.content.get("type").and_then(Value::as_str);
                self.error = Some(json!({
                    "code": code.unwrap_or("server_error"),
                    "message": text_of(&event.content, "message"),
                }));
            }
            kind if kind.is_run_end() => self.end(event, &mut out),
            _ => {}
        }
        out
    }

    /// Numbers a stream event.
    fn emit(&mut self, out: &mut Vec<Value>, kind: &str, mut fields: Value) {
        fields["type"] = json!(kind);
        fields["sequence_number"] = json!(self.next_sequence);
        self.next_sequence += 1;
        out.push(fields);
    }

    /// An event about a text item's one part: `fields` with the item's id and index, and the
    /// part's (`summary_index` of a reasoning item, `content_index` of a message's).
    fn emit_part(
        &mut self,
        out: &mut Vec<Value>,
        kind: &str,
        (item_id, index): (&str, usize),
        reasoning: bool,
        mut fields: Value,
    ) {
        fields["item_id"] = json!(item_id);
        fields["output_index"] = json!(index);
        fields[if reasoning { "summary_index" } else { "content_index" }] = json!(0);
        self.emit(out, kind, fields);
    }

    fn lifecycle(&mut self, out: &mut Vec<Value>, kind: &str, status: Status) {
        self.status = Some(status);
        let response = self.response().unwrap_or(Value::Null);
        self.emit(out, kind, json!({ "response": response }));
    }

    fn start(&mut self, event: &AgentEvent, out: &mut Vec<Value>) {
        let echo = Echo::of_started(&event.metadata);
        let queued = echo.background;
        self.head = Some(Head {
            run_id: event.run_id.unwrap_or_default(),
            agent_id: event.agent_id,
            created_at: event.created_at.timestamp(),
            echo,
        });
        let first = if queued { Status::Queued } else { Status::InProgress };
        self.lifecycle(out, "response.created", first);
        self.lifecycle(out, "response.in_progress", Status::InProgress);
    }

    /// Begins output item `item` at the next index. Its id is unique in the response: a log
    /// with one event twice (only a damaged or hostile one) gets `<id>_<index>` for the second.
    fn add_item(&mut self, out: &mut Vec<Value>, mut item: Value) -> usize {
        let index = self.output.len();
        let id = item["id"].as_str().unwrap_or_default().to_owned();
        if !self.item_ids.insert(id.clone()) {
            let unique = format!("{id}_{index}");
            self.item_ids.insert(unique.clone());
            item["id"] = json!(unique);
        }
        self.output.push(item.clone());
        self.emit(
            out,
            "response.output_item.added",
            json!({ "output_index": index, "item": item }),
        );
        index
    }

    /// The id of the item at `index`.
    fn id_at(&self, index: usize) -> String {
        self.output[index]["id"].as_str().unwrap_or_default().to_owned()
    }

    fn finish_item(&mut self, out: &mut Vec<Value>, index: usize, status: &str) {
        let Some(item) = self.output.get_mut(index) else {
            return;
        };
        item["status"] = json!(status);
        let item = item.clone();
        self.emit(out, "response.output_item.done", json!({ "output_index": index, "item": item }));
    }

    fn text(&mut self, event: &AgentEvent, out: &mut Vec<Value>) {
        let Some(piece) = text_piece(event) else {
            return;
        };
        let message_id = event.message_id.unwrap_or(event.id);
        let reasoning = event.kind == EventKind::Thinking;
        let continues = self
            .open
            .as_ref()
            .is_some_and(|open| open.message_id == message_id && open.reasoning == reasoning);
        if !continues {
            self.close_text(out, "completed");
            self.open_text(event, message_id, reasoning, out);
        }
        if piece.is_empty() {
            return;
        }
        let Some(open) = self.open.as_mut() else {
            return;
        };
        open.text.push_str(&piece);
        // The item's text is written when it is done (or when a poll asks): copied per token
        // it would cost the message's length every token.
        let (index, item) = (open.index, open.item_id.clone());
        let (kind, fields) = match reasoning {
            true => ("response.reasoning_summary_text.delta", json!({ "delta": piece })),
            false => ("response.output_text.delta", json!({ "delta": piece, "logprobs": [] })),
        };
        self.emit_part(out, kind, (&item, index), reasoning, fields);
    }

    fn open_text(
        &mut self,
        event: &AgentEvent,
        message_id: Uuid,
        reasoning: bool,
        out: &mut Vec<Value>,
    ) {
        let (prefix, item) = if reasoning {
            let item = json!({ "type": "reasoning", "summary": [], "status": "in_progress" });
            ("rs_", item)
        } else {
            let item = json!({
                "type": "message", "role": "assistant", "status": "in_progress", "content": [],
            });
            ("msg_", item)
        };
        let mut item = item;
        item["id"] = json!(item_id(prefix, event.id));
        let index = self.add_item(out, item);
        let id = self.id_at(index);
        let (kind, parts, part) = match reasoning {
            true => (
                "response.reasoning_summary_part.added",
                "summary",
                json!({ "type": "summary_text", "text": "" }),
            ),
            false => (
                "response.content_part.added",
                "content",
                json!({ "type": "output_text", "text": "", "annotations": [] }),
            ),
        };
        self.output[index][parts] = json!([part]);
        self.emit_part(out, kind, (&id, index), reasoning, json!({ "part": part }));
        self.open =
            Some(OpenText { index, reasoning, message_id, item_id: id, text: String::new() });
    }

    fn close_text(&mut self, out: &mut Vec<Value>, status: &str) {
        let Some(open) = self.open.take() else {
            return;
        };
        let (id, index, text) = (open.item_id, open.index, open.text);
        *text_field(&mut self.output[index], open.reasoning) = json!(text);
        let reasoning = open.reasoning;
        let (text_done, part_done, text_fields, part) = match reasoning {
            true => (
                "response.reasoning_summary_text.done",
                "response.reasoning_summary_part.done",
                json!({ "text": text }),
                json!({ "type": "summary_text", "text": text }),
            ),
            false => (
                "response.output_text.done",
                "response.content_part.done",
                json!({ "text": text, "logprobs": [] }),
                json!({ "type": "output_text", "text": text, "annotations": [] }),
            ),
        };
        self.emit_part(out, text_done, (&id, index), reasoning, text_fields);
        self.emit_part(out, part_done, (&id, index), reasoning, json!({ "part": part }));
        self.finish_item(out, index, status);
    }

    fn end(&mut self, event: &AgentEvent, out: &mut Vec<Value>) {
        if let Some(usage) = event.content.get("usage").filter(|usage| !usage.is_null()) {
            self.usage = Some(usage.clone());
        }
        let stop_reason = text_of(&event.content, "stop_reason");
        let (status, kind) = match event.kind {
            EventKind::RunFailed => (Status::Failed, "response.failed"),
            EventKind::RunCancelled => (Status::Cancelled, "response.incomplete"),
            _ if stop_reason.starts_with("max_") => (Status::Incomplete, "response.incomplete"),
            _ => (Status::Completed, "response.completed"),
        };
        let item_status = if status == Status::Completed { "completed" } else { "incomplete" };
        self.close_text(out, item_status);
        let unfinished: Vec<Uuid> = self
            .calls
            .iter()
            .filter(|(_, call)| call.client && !call.done)
            .map(|(message, _)| *message)
            .collect();
        for message in unfinished {
            self.finish_call(message, None, item_status, out);
        }
        match status {
            Status::Failed => {
                let detail = event.content.get("error");
                let code = detail.and_then(|error| error.get("type")).and_then(Value::as_str);
                let message = detail.and_then(|error| error.get("message"));
                if code.is_some() || self.error.is_none() {
                    self.error = Some(json!({
                        "code": code.unwrap_or("server_error"),
                        "message": message.and_then(Value::as_str).unwrap_or("the run failed"),
                    }));
                }
            }
            Status::Cancelled => self.incomplete_reason = Some("cancelled".to_owned()),
            Status::Incomplete => {
                let reason = match stop_reason.as_str() {
                    "max_tokens" => "max_output_tokens",
                    other => other,
                };
                self.incomplete_reason = Some(reason.to_owned());
            }
            _ => {}
        }
        self.completed_at = Some(event.created_at.timestamp());
        self.lifecycle(out, kind, status);
    }
}

/// Where a text item keeps its text: a message's one part, a reasoning item's one summary.
fn text_field(item: &mut Value, reasoning: bool) -> &mut Value {
    match reasoning {
        true => &mut item["summary"][0]["text"],
        false => &mut item["content"][0]["text"],
    }
}

mod tools;

#[cfg(test)]
mod tests;
