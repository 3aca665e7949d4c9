//! A run's events as AG-UI 1.0 events. Pure and stateful: log events go in, in seq order from
//! the run's `run_started`, and AG-UI events come out, each tagged with the seq of the log
//! event that produced it (the cursor, carried in the event's `metadata` and the SSE `id:`).
//!
//! The rules `verifyEvents` enforces, and ours: `RUN_STARTED` first; every `*_CONTENT`, `*_ARGS`
//! and `*_END` inside its `*_START`; every START closed — text, reasoning, tool calls, steps —
//! before `RUN_FINISHED`; `RUN_ERROR` (a failed run) last, nothing after; absent fields omitted,
//! never `null`. Steps are the model's calls, cut as the AI SDK mapping cuts them (a new text
//! block, or a tool call after the step's results, is the next call). A tool call's arguments
//! are its streamed input pieces, or — when the provider gave none — its whole input as JSON in
//! one `TOOL_CALL_ARGS`; the call ends when its input is complete. Tool calls name the step's
//! text message as their parent, or the step's first call (which then opens the assistant
//! message the client builds), so one step's calls share one assistant message.

use std::collections::{HashMap, HashSet};

use app::{AgentEvent, EventKind};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::surfaces::steps::{text_of, text_piece, Open, Steps};

mod wire;
pub use wire::{AgUiEvent, Tagged};

/// A tool call of the run: its id and name, whether pieces of its input were sent, and whether
/// it ended (its input is complete).
#[derive(Clone, Debug)]
struct Call {
    tool_call_id: String,
    args_sent: bool,
    ended: bool,
}

/// Maps one run's events to AG-UI events.
#[derive(Debug)]
pub struct EventMapper {
    thread_id: String,
    /// The run id the client knows the run by (its own `runId`, or ours).
    run_id: String,
    started: bool,
    steps: u32,
    step: Steps,
    /// The parent the step's tool calls name: its text message, or its first call.
    step_parent: Option<String>,
    open: Option<Open>,
    /// Tool calls by their message id; the ids of those started.
    calls: HashMap<Uuid, Call>,
    call_ids: HashSet<String>,
    /// Calls of an earlier run that a person answered: this run carries them out, and their
    /// results follow although their calls started before this stream.
    answered: HashSet<String>,
    usage: Option<Value>,
    error: Option<(String, Option<String>)>,
    ended: bool,
}

impl EventMapper {
    /// A mapper for a run of thread `thread_id` that the client calls `run_id`.
    pub fn new(thread_id: String, run_id: String) -> EventMapper {
        EventMapper {
            thread_id,
            run_id,
            started: false,
            steps: 0,
            step: Steps::default(),
            step_parent: None,
            open: None,
            calls: HashMap::new(),
            call_ids: HashSet::new(),
            answered: HashSet::new(),
            usage: None,
            error: None,
            ended: false,
        }
    }

    /// True once the run's end was mapped.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Maps one event of the run, in seq order.
    pub fn push(&mut self, event: &AgentEvent) -> Vec<Tagged> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        if !self.started {
            if event.kind == EventKind::RunStarted {
                self.started = true;
                out.push((
                    event.seq,
                    AgUiEvent::RunStarted {
                        thread_id: self.thread_id.clone(),
                        run_id: self.run_id.clone(),
                    },
                ));
            }
            return out;
        }
        match event.kind {
            EventKind::Text | EventKind::Thinking => self.text(event, &mut out),
            EventKind::ToolCall => self.tool_call(event, &mut out),
            EventKind::ToolResult => self.tool_result(event, &mut out),
            EventKind::ApprovalResponse => {
                self.answered.insert(text_of(&event.content, "tool_call_id"));
            }
            EventKind::Usage => self.usage = Some(event.content.clone()),
            EventKind::Error => {
                let text =
                    |key: &str| event.content.get(key).and_then(Value::as_str).map(str::to_owned);
                if let Some(message) = text("message") {
                    self.error = Some((message, text("type")));
                }
            }
            kind if kind.is_run_end() => self.run_end(event, &mut out),
            _ => {}
        }
        out
    }

    fn step_name(&self) -> String {
        format!("step-{}", self.steps)
    }

    /// Opens a step for `event` unless it belongs to the open one (the AI SDK mapping's rule).
    fn enter_step(&mut self, event: &AgentEvent, out: &mut Vec<Tagged>) {
        let is_text = matches!(event.kind, EventKind::Text | EventKind::Thinking);
        if self.step.starts_new(is_text, event.block_id) {
            self.close_step(event.seq, out);
            self.steps += 1;
            self.step.begin();
            self.step_parent = None;
            out.push((event.seq, AgUiEvent::StepStarted { step_name: self.step_name() }));
        }
        self.step.notes_text(is_text, event.block_id);
    }

    fn close_part(&mut self, seq: u64, out: &mut Vec<Tagged>) {
        match self.open.take() {
            Some(Open::Text(message_id)) => {
                out.push((seq, AgUiEvent::TextMessageEnd { message_id }));
            }
            Some(Open::Reasoning(message_id)) => {
                out.push((seq, AgUiEvent::ReasoningMessageEnd { message_id: message_id.clone() }));
                out.push((seq, AgUiEvent::ReasoningEnd { message_id }));
            }
            None => {}
        }
    }

    /// Ends every call whose input was still streaming (a run cut short): its arguments so far.
    fn end_calls(&mut self, seq: u64, out: &mut Vec<Tagged>) {
        let mut open: Vec<&mut Call> = self.calls.values_mut().filter(|call| !call.ended).collect();
        open.sort_by(|a, b| a.tool_call_id.cmp(&b.tool_call_id));
        for call in open {
            call.ended = true;
            out.push((seq, AgUiEvent::ToolCallEnd { tool_call_id: call.tool_call_id.clone() }));
        }
    }

    fn close_step(&mut self, seq: u64, out: &mut Vec<Tagged>) {
        self.close_part(seq, out);
        if self.step.close() {
            out.push((seq, AgUiEvent::StepFinished { step_name: self.step_name() }));
        }
    }

    fn text(&mut self, event: &AgentEvent, out: &mut Vec<Tagged>) {
        let Some(piece) = text_piece(event) else {
            return;
        };
        self.enter_step(event, out);
        let message_id = event.message_id.unwrap_or(event.id).to_string();
        let wanted = Open::of(event);
        if self.open.as_ref() != Some(&wanted) {
            self.close_part(event.seq, out);
            match &wanted {
                Open::Text(_) => {
                    if self.step_parent.is_none() {
                        self.step_parent = Some(message_id.clone());
                    }
                    out.push((
                        event.seq,
                        AgUiEvent::TextMessageStart {
                            message_id: message_id.clone(),
                            role: "assistant",
                        },
                    ));
                }
                Open::Reasoning(_) => {
                    out.push((
                        event.seq,
                        AgUiEvent::ReasoningStart { message_id: message_id.clone() },
                    ));
                    out.push((
                        event.seq,
                        AgUiEvent::ReasoningMessageStart {
                            message_id: message_id.clone(),
                            role: "reasoning",
                        },
                    ));
                }
            }
            self.open = Some(wanted.clone());
        }
        if piece.is_empty() {
            return;
        }
        out.push((
            event.seq,
            match wanted {
                Open::Text(_) => AgUiEvent::TextMessageContent { message_id, delta: piece },
                Open::Reasoning(_) => {
                    AgUiEvent::ReasoningMessageContent { message_id, delta: piece }
                }
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
                // A message holds one call: a second start on it (a log could hold one) would
                // replace the first, which would then never end.
                if tool_call_id.is_empty()
                    || self.call_ids.contains(&tool_call_id)
                    || self.calls.contains_key(&message)
                {
                    return;
                }
                self.enter_step(event, out);
                self.close_part(event.seq, out);
                self.call_ids.insert(tool_call_id.clone());
                let parent_message_id = self.step_parent.clone();
                if parent_message_id.is_none() {
                    self.step_parent = Some(tool_call_id.clone());
                }
                self.calls.insert(
                    message,
                    Call { tool_call_id: tool_call_id.clone(), args_sent: false, ended: false },
                );
                out.push((
                    event.seq,
                    AgUiEvent::ToolCallStart {
                        tool_call_id,
                        tool_call_name: text_of(&event.content, "name"),
                        parent_message_id,
                    },
                ));
            }
            (Some("input_json"), Some(Value::String(piece))) => {
                let Some(call) = self.calls.get_mut(&message) else {
                    return;
                };
                if call.ended || piece.is_empty() {
                    return;
                }
                call.args_sent = true;
                out.push((
                    event.seq,
                    AgUiEvent::ToolCallArgs {
                        tool_call_id: call.tool_call_id.clone(),
                        delta: piece.clone(),
                    },
                ));
            }
            (Some(""), Some(delta)) => {
                if let Some(input) = delta.get("input") {
                    self.end_call(message, Some(input), event.seq, out);
                }
            }
            _ => {}
        }
    }

    /// Ends the call whose message is `message`, sending its whole input first if no pieces
    /// of it were sent.
    fn end_call(&mut self, message: Uuid, input: Option<&Value>, seq: u64, out: &mut Vec<Tagged>) {
        let Some(call) = self.calls.get_mut(&message) else {
            return;
        };
        if call.ended {
            return;
        }
        call.ended = true;
        if !call.args_sent {
            call.args_sent = true;
            out.push((
                seq,
                AgUiEvent::ToolCallArgs {
                    tool_call_id: call.tool_call_id.clone(),
                    delta: input.unwrap_or(&json!({})).to_string(),
                },
            ));
        }
        out.push((seq, AgUiEvent::ToolCallEnd { tool_call_id: call.tool_call_id.clone() }));
    }

    fn tool_result(&mut self, event: &AgentEvent, out: &mut Vec<Tagged>) {
        let tool_call_id = text_of(&event.content, "tool_call_id");
        let message = self
            .calls
            .iter()
            .find(|(_, call)| call.tool_call_id == tool_call_id)
            .map(|(message, _)| *message);
        match message {
            Some(message) => {
                self.step.result();
                self.close_part(event.seq, out);
                self.end_call(message, event.content.get("input"), event.seq, out);
            }
            // The call started (and ended) in the run that asked for approval.
            None if self.answered.contains(&tool_call_id) => self.close_part(event.seq, out),
            None => return, // a result for a call this stream never started
        }
        let content = match event.content.get("result") {
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        out.push((
            event.seq,
            AgUiEvent::ToolCallResult {
                message_id: event.message_id.unwrap_or(event.id).to_string(),
                tool_call_id,
                content,
                role: "tool",
            },
        ));
    }

    fn run_end(&mut self, event: &AgentEvent, out: &mut Vec<Tagged>) {
        self.close_part(event.seq, out);
        self.end_calls(event.seq, out);
        self.close_step(event.seq, out);
        self.ended = true;
        let seq = event.seq;
        match event.kind {
            EventKind::RunFailed => {
                let message = event
                    .content
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let code =
                    event.content.pointer("/error/type").and_then(Value::as_str).map(str::to_owned);
                let (fallback, fallback_code) =
                    self.error.take().unwrap_or_else(|| ("the run failed".to_owned(), None));
                out.push((
                    seq,
                    AgUiEvent::RunError {
                        message: message.unwrap_or(fallback),
                        code: code.or(fallback_code),
                    },
                ));
            }
            kind => {
                if kind == EventKind::RunCompleted {
                    if let Some(usage) = event.content.get("usage").filter(|usage| !usage.is_null())
                    {
                        self.usage = Some(usage.clone());
                    }
                }
                let outcome = match kind {
                    EventKind::RunCancelled => Some(json!({ "type": "cancelled" })),
                    _ => interrupt_outcome(&event.content),
                };
                out.push((
                    seq,
                    AgUiEvent::RunFinished {
                        thread_id: self.thread_id.clone(),
                        run_id: self.run_id.clone(),
                        outcome,
                        usage: self.usage.as_ref().map(token_usage),
                    },
                ));
            }
        }
    }
}

/// Our usage (`input_tokens`, `output_tokens`) as AG-UI's `usage` list.
fn token_usage(usage: &Value) -> Value {
    let count = |key: &str| usage.get(key).and_then(Value::as_u64);
    let mut entry = serde_json::Map::new();
    if let Some(input) = count("input_tokens") {
        entry.insert("inputTokens".into(), json!(input));
    }
    if let Some(output) = count("output_tokens") {
        entry.insert("outputTokens".into(), json!(output));
    }
    if let (Some(input), Some(output)) = (count("input_tokens"), count("output_tokens")) {
        entry.insert("totalTokens".into(), json!(input + output));
    }
    json!([entry])
}

mod interrupt;
use interrupt::interrupt_outcome;

#[cfg(test)]
mod tests;
