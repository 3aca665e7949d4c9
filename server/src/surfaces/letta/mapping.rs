//! `AgentEvent`s → Letta messages: a pure, deterministic mapping.
//!
//! The Letta views (the SSE stream, the non-streaming answer, the message list) are all cut from
//! the one log by this mapper, so they agree with each other and with the native views.
//!
//! Two cuts, as Letta's `stream_tokens` asks:
//! - [`Cut::Tokens`]: every delta becomes a fragment at once; the fragments of one message share
//!   its `id`, and concatenating them gives the message.
//! - [`Cut::Steps`]: one whole message per logical message. A message is held while its deltas
//!   arrive and released when anything else happens (another message starts, a tool call's input
//!   is complete, the run ends).
//!
//! `seq_id` is the seq of the log event that completes the fragment or message — the same cursor
//! as the WebSocket and the native SSE `id:`. Within one output it only goes up, so
//! `starting_after = seq_id` resumes exactly after what a client has. Because the mapping is a
//! pure function of the run's events, a resume replays the run through a fresh mapper and skips
//! what is at or below the cursor; a held message whose first events came before the cursor is
//! therefore never cut in half.

use std::collections::{HashMap, HashSet};

use app::{AgentEvent, EventKind};
use serde_json::Value;
use uuid::Uuid;

pub use super::wire::{
    message_id, stop_reason, ApprovalReturn, Body, LettaItem, LettaMessage, ToolCallPart,
    UsageStatistics,
};

/// How a stream is cut (Letta's `stream_tokens`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    Tokens,
    Steps,
}

/// A message held in [`Cut::Steps`] until it is complete.
#[derive(Debug)]
struct Held {
    key: Uuid,
    message: LettaMessage,
}

/// What became of an event offered to the held messages.
enum Absorbed {
    NotHeld,
    /// Folded into a held message, which stays held.
    Folded,
    /// Folded in, and the message is complete: release it (and anything held before it).
    Completed,
}

/// What the mapper remembers of a tool call.
#[derive(Debug)]
struct CallInfo {
    tool_call_id: String,
    name: String,
    /// True once input pieces were sent (token cut): the final input is not repeated.
    streamed: bool,
    /// A call of a tool the client runs: Letta's server sends it as its
    /// `approval_request_message` alone, never as a `tool_call_message`.
    client: bool,
}

/// A fragment of a call after its first: no name, the next `arguments` (a piece of the input, or
/// all of it).
fn more_arguments(arguments: String, call: &CallInfo) -> ToolCallPart {
    ToolCallPart { name: None, arguments, tool_call_id: call.tool_call_id.clone() }
}

/// Turns a run's (or a whole log's) events, in seq order, into Letta items.
#[derive(Debug)]
pub struct LettaMapper {
    cut: Cut,
    held: Vec<Held>,
    calls: HashMap<Uuid, CallInfo>,
    /// The LLM calls seen (their blocks), for `step_count`.
    steps: HashSet<Uuid>,
    /// The newest usage seen: providers report it cumulatively per run.
    usage: (u64, u64),
}

impl LettaMapper {
    pub fn new(cut: Cut) -> LettaMapper {
        LettaMapper {
            cut,
            held: Vec::new(),
            calls: HashMap::new(),
            steps: HashSet::new(),
            usage: (0, 0),
        }
    }

    /// Maps one event. Events must come in seq order; each is looked at once.
    pub fn push(&mut self, event: &AgentEvent) -> Vec<LettaItem> {
        let mut out = Vec::new();
        if self.cut == Cut::Steps {
            match self.absorb(event) {
                Absorbed::Folded => return out,
                Absorbed::Completed => {
                    self.release_held(&mut out);
                    return out;
                }
                Absorbed::NotHeld => {}
            }
        }
        self.release_held(&mut out);
        match event.kind {
            EventKind::User => out.push(LettaItem::Message(self.user_message(event))),
            EventKind::Text | EventKind::Thinking => {
                if let Some(block) = event.block_id {
                    self.steps.insert(block);
                }
                if let Some(body) = text_body(event) {
                    let message = self.message(event, body);
                    self.emit_or_hold(event, message, &mut out);
                }
            }
            EventKind::ToolCall => self.tool_call(event, &mut out),
            EventKind::ToolResult => {
                out.push(LettaItem::Message(self.message(event, tool_return(event))))
            }
            EventKind::Usage => {
                if let Some(block) = event.block_id {
                    self.steps.insert(block);
                }
                self.usage = usage_of(&event.content).unwrap_or(self.usage);
            }
            EventKind::Error => {
                let body = Body::ErrorMessage {
                    error_type: text_of(&event.content, "type"),
                    message: text_of(&event.content, "message"),
                };
                out.push(LettaItem::Message(self.message(event, body)));
            }
            EventKind::ApprovalRequested => {
                let part = ToolCallPart {
                    name: Some(text_of(&event.content, "name")),
                    arguments: event
                        .content
                        .get("input")
                        .map_or_else(|| "{}".to_owned(), Value::to_string),
                    tool_call_id: text_of(&event.content, "tool_call_id"),
                };
                let body = Body::ApprovalRequestMessage {
                    tool_call: part.clone(),
                    tool_calls: vec![part],
                };
                out.push(LettaItem::Message(self.message(event, body)));
            }
            EventKind::ApprovalResponse => {
                let approve = event.content.get("approve").and_then(Value::as_bool) == Some(true);
                let reason = event.content.get("reason").and_then(Value::as_str).map(str::to_owned);
                let body = Body::ApprovalResponseMessage {
                    approve,
                    approval_request_id: event
                        .content
                        .get("request_message_id")
                        .and_then(Value::as_str)
                        .and_then(|id| id.parse().ok())
                        .map(message_id),
                    reason: reason.clone(),
                    approvals: vec![ApprovalReturn {
                        kind: "approval",
                        tool_call_id: text_of(&event.content, "tool_call_id"),
                        approve,
                        reason,
                    }],
                };
                out.push(LettaItem::Message(self.message(event, body)));
            }
            kind if kind.is_run_end() => self.run_end(event, &mut out),
            // `run_started`, `loading` notices and kinds from newer servers have no Letta message.
            _ => {}
        }
        out
    }

    fn user_message(&self, event: &AgentEvent) -> LettaMessage {
        let content = text_of(&event.content, "text");
        let otid = event.content.get("otid").and_then(Value::as_str).map(str::to_owned);
        let mut message = self.message(event, Body::UserMessage { content });
        message.otid = otid.or(message.otid);
        message
    }

    /// A run's end: its stop reason, then its usage; the counts start again for the next run.
    fn run_end(&mut self, event: &AgentEvent, out: &mut Vec<LettaItem>) {
        if let Some(usage) = event.content.get("usage").and_then(usage_of) {
            self.usage = usage;
        }
        out.push(LettaItem::StopReason { stop_reason: stop_reason(event), seq_id: event.seq });
        let (prompt_tokens, completion_tokens) = self.usage;
        out.push(LettaItem::Usage(UsageStatistics {
            message_type: "usage_statistics",
            seq_id: event.seq,
            completion_tokens,
            prompt_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            step_count: self.steps.len() as u64,
        }));
        self.steps.clear();
        self.usage = (0, 0);
    }

    /// Releases whatever is still held (the end of a finite input, e.g. the message list).
    pub fn finish(&mut self) -> Vec<LettaItem> {
        let mut out = Vec::new();
        self.release_held(&mut out);
        out
    }

    /// [`Cut::Steps`]: folds a delta into the message it belongs to, if that message is held.
    fn absorb(&mut self, event: &AgentEvent) -> Absorbed {
        let Some(key) = event.message_id else {
            return Absorbed::NotHeld;
        };
        let Some(index) = self.held.iter().position(|held| held.key == key) else {
            return Absorbed::NotHeld;
        };
        let path = event.delta_path.as_deref().unwrap_or("");
        let piece = event.delta.as_ref().and_then(Value::as_str).unwrap_or("");
        let held = &mut self.held[index];
        let absorbed = match (&mut held.message.body, event.kind, path) {
            (Body::AssistantMessage { content }, EventKind::Text, "text") => {
                content.push_str(piece);
                Absorbed::Folded
            }
            (Body::ReasoningMessage { reasoning, .. }, EventKind::Thinking, "text") => {
                reasoning.push_str(piece);
                Absorbed::Folded
            }
            (Body::ReasoningMessage { signature, .. }, EventKind::Thinking, "signature") => {
                signature.get_or_insert_with(String::new).push_str(piece);
                Absorbed::Folded
            }
            (Body::ToolCallMessage { tool_call }, EventKind::ToolCall, "input_json") => {
                tool_call.arguments.push_str(piece);
                Absorbed::Folded
            }
            (Body::ToolCallMessage { tool_call }, EventKind::ToolCall, "") => {
                // The input is complete (`status: ready`), or the call ended without it. Pieces
                // that streamed are kept as they came (the token cut sent exactly those).
                if let Some(input) = event.delta.as_ref().and_then(|delta| delta.get("input")) {
                    if tool_call.arguments.is_empty() {
                        tool_call.arguments = input.to_string();
                    }
                }
                Absorbed::Completed
            }
            _ => return Absorbed::NotHeld,
        };
        held.message.seq_id = event.seq;
        absorbed
    }

    fn tool_call(&mut self, event: &AgentEvent, out: &mut Vec<LettaItem>) {
        let Some(key) = event.message_id else { return };
        match (event.delta_path.as_deref(), &event.delta) {
            // The call starts: its name and id.
            (None, _) => {
                let info = CallInfo {
                    tool_call_id: text_of(&event.content, "tool_call_id"),
                    name: text_of(&event.content, "name"),
                    streamed: false,
                    client: event.content.get("client").and_then(Value::as_bool) == Some(true),
                };
                if info.client {
                    self.calls.insert(key, info);
                    return;
                }
                let part = ToolCallPart {
                    name: Some(info.name.clone()),
                    arguments: String::new(),
                    tool_call_id: info.tool_call_id.clone(),
                };
                self.calls.insert(key, info);
                let message = self.message(event, Body::ToolCallMessage { tool_call: part });
                self.emit_or_hold(event, message, out);
            }
            (Some("input_json"), Some(Value::String(piece))) if self.cut == Cut::Tokens => {
                let Some(info) = self.calls.get_mut(&key).filter(|info| !info.client) else {
                    return;
                };
                info.streamed = true;
                let part = more_arguments(piece.clone(), info);
                out.push(LettaItem::Message(
                    self.message(event, Body::ToolCallMessage { tool_call: part }),
                ));
            }
            // The input is complete: sent whole unless its pieces already went out.
            (Some(""), Some(delta)) if self.cut == Cut::Tokens => {
                let Some(input) = delta.get("input") else {
                    return;
                };
                let Some(info) = self.calls.get_mut(&key).filter(|info| !info.client) else {
                    return;
                };
                if info.streamed {
                    return;
                }
                info.streamed = true;
                let part = more_arguments(input.to_string(), info);
                out.push(LettaItem::Message(
                    self.message(event, Body::ToolCallMessage { tool_call: part }),
                ));
            }
            // Status and progress changes after the input: Letta has no message for them.
            _ => {}
        }
    }

    fn emit_or_hold(
        &mut self,
        event: &AgentEvent,
        message: LettaMessage,
        out: &mut Vec<LettaItem>,
    ) {
        match (self.cut, event.message_id) {
            (Cut::Steps, Some(key)) => self.held.push(Held { key, message }),
            _ => out.push(LettaItem::Message(message)),
        }
    }

    fn release_held(&mut self, out: &mut Vec<LettaItem>) {
        let mut held = std::mem::take(&mut self.held);
        held.sort_by_key(|held| held.message.seq_id);
        out.extend(held.into_iter().map(|held| LettaItem::Message(held.message)));
    }

    /// The common fields of the message an event starts (or is a fragment of).
    fn message(&self, event: &AgentEvent, body: Body) -> LettaMessage {
        let id = event.message_id.unwrap_or(event.id);
        LettaMessage {
            id: message_id(id),
            date: event.created_at,
            // Our logical message id doubles as the offline threading id of the agent's messages.
            otid: Some(id.to_string()),
            run_id: event.run_id.map(|run_id| run_id.to_string()),
            step_id: match event.kind {
                EventKind::Text | EventKind::Thinking => {
                    event.block_id.map(|block| format!("step-{block}"))
                }
                _ => None,
            },
            seq_id: event.seq,
            body,
        }
    }
}

/// The message body a text or thinking event starts (a token delta's piece, or whole content).
fn text_body(event: &AgentEvent) -> Option<Body> {
    let path = event.delta_path.as_deref().unwrap_or("text");
    let piece = match &event.delta {
        Some(delta) => Some(delta.as_str()?.to_owned()),
        None => None,
    };
    let reasoning = |reasoning: String, signature: Option<String>| Body::ReasoningMessage {
        reasoning,
        signature,
        source: "reasoner_model",
    };
    match (event.kind, path, piece) {
        (EventKind::Text, "text", Some(piece)) => Some(Body::AssistantMessage { content: piece }),
        (EventKind::Text, _, None) => {
            Some(Body::AssistantMessage { content: text_of(&event.content, "text") })
        }
        (EventKind::Thinking, "text", Some(piece)) => Some(reasoning(piece, None)),
        (EventKind::Thinking, "signature", Some(piece)) => {
            Some(reasoning(String::new(), Some(piece)))
        }
        (EventKind::Thinking, _, None) => Some(reasoning(text_of(&event.content, "text"), None)),
        _ => None,
    }
}

fn text_of(content: &Value, key: &str) -> String {
    match content.get(key) {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// `(input_tokens, output_tokens)` of a usage object.
fn usage_of(usage: &Value) -> Option<(u64, u64)> {
    let input = usage.get("input_tokens")?.as_u64()?;
    let output = usage.get("output_tokens")?.as_u64()?;
    Some((input, output))
}

/// Maps a finite list of events (a run, a log) to items, releasing whatever is held at the end.
pub fn map_all<'a>(cut: Cut, events: impl IntoIterator<Item = &'a AgentEvent>) -> Vec<LettaItem> {
    let mut mapper = LettaMapper::new(cut);
    let mut items: Vec<LettaItem> =
        events.into_iter().flat_map(|event| mapper.push(event)).collect();
    items.extend(mapper.finish());
    items
}

/// A tool result as Letta's `tool_return_message`.
fn tool_return(event: &AgentEvent) -> Body {
    let is_error = event.content.get("is_error").and_then(Value::as_bool) == Some(true);
    let tool_return = match event.content.get("result") {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    Body::ToolReturnMessage {
        tool_return,
        status: if is_error { "error" } else { "success" },
        tool_call_id: text_of(&event.content, "tool_call_id"),
        name: text_of(&event.content, "name"),
    }
}

#[cfg(test)]
mod tests;
