//! A run's events as the AI SDK's UI message stream chunks. Pure and stateful: events go in, in
//! seq order from the run's `run_started`, and chunks come out, each tagged with the seq of the
//! event that produced it (the SSE `id:`, our cursor; the client ignores it).
//!
//! The rules the client enforces (ai 5.0.x and 6.0.x up to 6.0.230 reject anything else): only
//! the fields of the protocol's strict schemas; every `*-delta` and `*-end` after its `*-start`;
//! tool outputs only for a tool part the stream started. The mapper adds: every start is closed
//! (parts before their step finishes, the step before the message finishes), one assistant
//! message per run whose `messageId` is the run's id (so a replay from `start` replaces the
//! message a client holds instead of adding a second), and steps as the model's calls — a step
//! starts with an LLM call's first text or tool call and finishes before the next call or at the
//! run's end, so tool results land in the step that called them ([`crate::surfaces::steps`]).

use std::collections::HashSet;

use app::{AgentEvent, EventKind};
use serde::Serialize;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::surfaces::steps::{text_of, text_piece, Open, Steps};

/// One chunk, serialized exactly as the protocol's schema has it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Chunk {
    #[serde(rename_all = "camelCase")]
    Start {
        message_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        message_metadata: Option<Value>,
    },
    StartStep,
    FinishStep,
    TextStart {
        id: String,
    },
    TextDelta {
        id: String,
        delta: String,
    },
    TextEnd {
        id: String,
    },
    ReasoningStart {
        id: String,
    },
    ReasoningDelta {
        id: String,
        delta: String,
    },
    ReasoningEnd {
        id: String,
    },
    #[serde(rename_all = "camelCase")]
    ToolInputStart {
        tool_call_id: String,
        tool_name: String,
        dynamic: bool,
    },
    #[serde(rename_all = "camelCase")]
    ToolInputDelta {
        tool_call_id: String,
        input_text_delta: String,
    },
    #[serde(rename_all = "camelCase")]
    ToolInputAvailable {
        tool_call_id: String,
        tool_name: String,
        input: Value,
        dynamic: bool,
    },
    #[serde(rename_all = "camelCase")]
    ToolOutputAvailable {
        tool_call_id: String,
        output: Value,
        dynamic: bool,
    },
    #[serde(rename_all = "camelCase")]
    ToolOutputError {
        tool_call_id: String,
        error_text: String,
        dynamic: bool,
    },
    /// A tool call waits for a person (ai 6; ai 5's strict schema has no such chunk).
    #[serde(rename_all = "camelCase")]
    ToolApprovalRequest {
        approval_id: String,
        tool_call_id: String,
    },
    /// A person denied the call (ai 6).
    #[serde(rename_all = "camelCase")]
    ToolOutputDenied {
        tool_call_id: String,
    },
    #[serde(rename_all = "camelCase")]
    Error {
        error_text: String,
    },
    /// No `finishReason`: ai 5 before 5.0.92 validates this chunk strictly and refuses a key
    /// it does not know — every reply failed for those clients. Newer clients take it as
    /// optional; the run's stop reason is in the log and the run's status.
    #[serde(rename_all = "camelCase")]
    Finish {
        message_metadata: Value,
    },
}

/// A chunk and the seq of the event it came from.
pub type Tagged = (u64, Chunk);

/// Maps one run's events to chunks.
#[derive(Debug, Default)]
pub struct ChunkMapper {
    started: bool,
    steps: Steps,
    /// The text or reasoning part open, if any (one at a time: another part closes it).
    open: Option<Open>,
    /// Tool calls whose input was started, by tool call id; and those whose input is complete.
    calls_started: HashSet<String>,
    calls_available: HashSet<String>,
    /// Message ids of tool calls, to their tool call id and name (deltas carry only the message).
    call_names: std::collections::HashMap<Uuid, (String, String)>,
    /// Calls of the turn's earlier run that this run carries out a person's answer for (the
    /// client holds their parts): whether each was approved.
    answered: std::collections::HashMap<String, bool>,
    /// Calls whose output went out: one output per call (a log may hold a second result).
    outputs: HashSet<String>,
    /// Calls of tools the client runs (their card says `client: true`): static tool parts
    /// (`tool-<name>`), as the AI SDK makes for a tool it declared without `execute`.
    client_calls: HashSet<String>,
    /// True once a step began: answers' outputs come before the first step or not at all.
    stepped: bool,
    /// The newest usage the run reported, and its last error (for a failed run's `errorText`).
    usage: Option<Value>,
    error: Option<String>,
    ended: bool,
}

impl ChunkMapper {
    pub fn new() -> ChunkMapper {
        ChunkMapper::default()
    }

    /// True once the run's end was mapped: the stream ends (`[DONE]`).
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Maps one event of the run, in seq order.
    pub fn push(&mut self, event: &AgentEvent) -> Vec<Tagged> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        let seq = event.seq;
        if !self.started {
            if event.kind != EventKind::RunStarted {
                // A stream starts at the run's start; anything before it is not this run's.
                return out;
            }
            self.started = true;
            // A continuation goes on with the turn's message, as the client does.
            let message_id = event
                .metadata
                .get("continues")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| event.run_id.map(|id| id.to_string()))
                .unwrap_or_default();
            let metadata =
                json!({ "agent_id": event.agent_id, "run_id": event.run_id, "seq": seq });
            out.push((seq, Chunk::Start { message_id, message_metadata: Some(metadata) }));
            return out;
        }
        match event.kind {
            EventKind::Text | EventKind::Thinking => self.text(event, &mut out),
            EventKind::ToolCall => self.tool_call(event, &mut out),
            EventKind::ToolResult => self.tool_result(event, &mut out),
            EventKind::ApprovalRequested => self.approval_request(event, &mut out),
            EventKind::ApprovalResponse => {
                let approved = event.content.get("approve").and_then(Value::as_bool) == Some(true);
                self.answered.insert(text_of(&event.content, "tool_call_id"), approved);
            }
            EventKind::Usage => {
                self.usage = Some(event.content.clone());
            }
            EventKind::Error => {
                self.error =
                    event.content.get("message").and_then(Value::as_str).map(str::to_owned);
            }
            kind if kind.is_run_end() => self.run_end(event, &mut out),
            _ => {}
        }
        out
    }

    /// Opens a step for `event` (a text, or a tool call's start) unless it belongs to the open
    /// one.
    fn enter_step(&mut self, event: &AgentEvent, out: &mut Vec<Tagged>) {
        let is_text = matches!(event.kind, EventKind::Text | EventKind::Thinking);
        if self.steps.starts_new(is_text, event.block_id) {
            self.close_step(event.seq, out);
            self.steps.begin();
            self.stepped = true;
            out.push((event.seq, Chunk::StartStep));
        }
        self.steps.notes_text(is_text, event.block_id);
    }

    fn close_part(&mut self, seq: u64, out: &mut Vec<Tagged>) {
        match self.open.take() {
            Some(Open::Text(id)) => out.push((seq, Chunk::TextEnd { id })),
            Some(Open::Reasoning(id)) => out.push((seq, Chunk::ReasoningEnd { id })),
            None => {}
        }
    }

    fn close_step(&mut self, seq: u64, out: &mut Vec<Tagged>) {
        self.close_part(seq, out);
        if self.steps.close() {
            out.push((seq, Chunk::FinishStep));
        }
    }

    fn text(&mut self, event: &AgentEvent, out: &mut Vec<Tagged>) {
        let Some(piece) = text_piece(event) else {
            return;
        };
        self.enter_step(event, out);
        let id = event.message_id.unwrap_or(event.id).to_string();
        let wanted = Open::of(event);
        if self.open.as_ref() != Some(&wanted) {
            self.close_part(event.seq, out);
            out.push((
                event.seq,
                match &wanted {
                    Open::Text(_) => Chunk::TextStart { id: id.clone() },
                    Open::Reasoning(_) => Chunk::ReasoningStart { id: id.clone() },
                },
            ));
            self.open = Some(wanted.clone());
        }
        if piece.is_empty() {
            return;
        }
        out.push((
            event.seq,
            match wanted {
                Open::Text(_) => Chunk::TextDelta { id, delta: piece },
                Open::Reasoning(_) => Chunk::ReasoningDelta { id, delta: piece },
            },
        ));
    }

    fn tool_call(&mut self, event: &AgentEvent, out: &mut Vec<Tagged>) {
        let Some(message) = event.message_id else {
            return;
        };
        match (event.delta_path.as_deref(), &event.delta) {
            (None, _) => {
                let tool_call_id = text_of(&event.content, "tool_call_id");
                let tool_name = text_of(&event.content, "name");
                if tool_call_id.is_empty() || self.calls_started.contains(&tool_call_id) {
                    return;
                }
                self.enter_step(event, out);
                self.close_part(event.seq, out);
                self.calls_started.insert(tool_call_id.clone());
                self.call_names.insert(message, (tool_call_id.clone(), tool_name.clone()));
                if event.content.get("client").and_then(Value::as_bool) == Some(true) {
                    self.client_calls.insert(tool_call_id.clone());
                }
                out.push((
                    event.seq,
                    Chunk::ToolInputStart {
                        dynamic: self.dynamic(&tool_call_id),
                        tool_call_id,
                        tool_name,
                    },
                ));
            }
            (Some("input_json"), Some(Value::String(piece))) => {
                let Some((tool_call_id, _)) = self.call_names.get(&message) else {
                    return;
                };
                if self.calls_available.contains(tool_call_id) || piece.is_empty() {
                    return;
                }
                out.push((
                    event.seq,
                    Chunk::ToolInputDelta {
                        tool_call_id: tool_call_id.clone(),
                        input_text_delta: piece.clone(),
                    },
                ));
            }
            (Some(""), Some(delta)) => {
                let Some(input) = delta.get("input") else {
                    return;
                };
                let Some((tool_call_id, tool_name)) = self.call_names.get(&message).cloned() else {
                    return;
                };
                if !self.calls_available.insert(tool_call_id.clone()) {
                    return;
                }
                out.push((
                    event.seq,
                    Chunk::ToolInputAvailable {
                        dynamic: self.dynamic(&tool_call_id),
                        tool_call_id,
                        tool_name,
                        input: input.clone(),
                    },
                ));
            }
            _ => {}
        }
    }

    /// Whether a call's chunks are a dynamic tool's (every call but a client tool's).
    fn dynamic(&self, tool_call_id: &str) -> bool {
        !self.client_calls.contains(tool_call_id)
    }

    /// A call waits for a person: its input complete, then the request (its id is the call's).
    fn approval_request(&mut self, event: &AgentEvent, out: &mut Vec<Tagged>) {
        let tool_call_id = text_of(&event.content, "tool_call_id");
        if !self.calls_started.contains(&tool_call_id) || self.outputs.contains(&tool_call_id) {
            return;
        }
        self.close_part(event.seq, out);
        self.make_available(event, &tool_call_id, out);
        if event.content.get("client").and_then(Value::as_bool) == Some(true) {
            // A client tool's call: its complete input is what `onToolCall` answers.
            return;
        }
        out.push((
            event.seq,
            Chunk::ToolApprovalRequest { approval_id: tool_call_id.clone(), tool_call_id },
        ));
    }

    /// Completes a call's input part, if it is not yet: an output or a request needs it.
    fn make_available(&mut self, event: &AgentEvent, tool_call_id: &str, out: &mut Vec<Tagged>) {
        if self.calls_available.contains(tool_call_id) {
            return;
        }
        self.calls_available.insert(tool_call_id.to_owned());
        out.push((
            event.seq,
            Chunk::ToolInputAvailable {
                tool_call_id: tool_call_id.to_owned(),
                tool_name: text_of(&event.content, "name"),
                input: event.content.get("input").cloned().unwrap_or(json!({})),
                dynamic: self.dynamic(tool_call_id),
            },
        ));
    }

    fn tool_result(&mut self, event: &AgentEvent, out: &mut Vec<Tagged>) {
        let tool_call_id = text_of(&event.content, "tool_call_id");
        if self.outputs.contains(&tool_call_id) {
            return; // a second result: the client takes one output per part
        }
        if !self.calls_started.contains(&tool_call_id) {
            // An answered call of the turn's earlier run: the client holds its part. Its
            // output comes before the continuation's first step (as the run writes it).
            if let Some(&approved) = self.answered.get(&tool_call_id).filter(|_| !self.stepped) {
                self.close_part(event.seq, out);
                self.outputs.insert(tool_call_id.clone());
                let dynamic = self.dynamic(&tool_call_id);
                out.push((event.seq, output_chunk(event, tool_call_id, approved, dynamic)));
            }
            return; // otherwise the client would reject an output for a part it does not hold
        }
        self.outputs.insert(tool_call_id.clone());
        self.steps.result();
        self.close_part(event.seq, out);
        // An output needs the input's part to be complete.
        self.make_available(event, &tool_call_id, out);
        let dynamic = self.dynamic(&tool_call_id);
        out.push((event.seq, output_chunk(event, tool_call_id, true, dynamic)));
    }

    fn run_end(&mut self, event: &AgentEvent, out: &mut Vec<Tagged>) {
        self.close_step(event.seq, out);
        self.ended = true;
        // As the shared reducer reads it (the history's usage): a completed run's end has the
        // final figures.
        if let Some(usage) = event.content.get("usage").filter(|usage| !usage.is_null()) {
            if event.kind == EventKind::RunCompleted {
                self.usage = Some(usage.clone());
            }
        }
        // Merged by the client into the start's metadata: `seq` stays the run's start (where
        // the message begins in the log, as the history endpoint says it too).
        let metadata = json!({ "usage": self.usage });
        if event.kind == EventKind::RunFailed {
            let message = event
                .content
                .pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or(self.error.take())
                .unwrap_or_else(|| "the run failed".to_owned());
            out.push((event.seq, Chunk::Error { error_text: message }));
        }
        out.push((event.seq, Chunk::Finish { message_metadata: metadata }));
    }
}

/// A result's chunk: its output, its error, or — for a call a person denied — the denial.
fn output_chunk(event: &AgentEvent, tool_call_id: String, approved: bool, dynamic: bool) -> Chunk {
    let failed = event.content.get("is_error").and_then(Value::as_bool) == Some(true);
    let result = event.content.get("result").cloned().unwrap_or(Value::Null);
    match (approved, failed) {
        (false, _) => Chunk::ToolOutputDenied { tool_call_id },
        (true, true) => Chunk::ToolOutputError {
            tool_call_id,
            error_text: match result {
                Value::String(text) => text,
                other => other.to_string(),
            },
            dynamic,
        },
        (true, false) => Chunk::ToolOutputAvailable { tool_call_id, output: result, dynamic },
    }
}

#[cfg(test)]
mod tests;
