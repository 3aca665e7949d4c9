//! The AI SDK's UI message stream *into* the log: the inverse of [`super::mapping`]. A backend that
//! already has `result.toUIMessageStream()` pipes its chunks here and they become a produced
//! run's events (checked by the producer API like any producer's). Pure and stateful: chunks go
//! in, in stream order, and events come out.
//!
//! - `start` opens the run (`run_started`, with the client's `messageId` kept in its metadata),
//!   and the user's message when the request gave it;
//! - `start-step` begins a model call: its text and reasoning share one block (how the log
//!   says "one call", what the outbound mapping cuts steps by);
//! - `text-*` / `reasoning-*` parts become `text` / `thinking` appends to a message per part;
//! - `tool-input-start` / `-delta` / `-available` open a call, stream its input, merge the
//!   parsed input with `ready`; `tool-output-available` / `-error` / `tool-input-error` answer it;
//! - `error` is an `error` event, and the run then ends `run_failed` with it; `abort` ends it
//!   `run_cancelled`; `finish` ends it `run_completed` (its `finishReason` the stop reason, a
//!   `messageMetadata.usage` the run's usage);
//! - `finish-step`, `*-end`, `message-metadata`, sources, files and `data-*` parts carry
//!   nothing the log keeps; chunk types this server does not know are counted and skipped, so a
//!   newer SDK's stream still goes in.

use std::collections::HashMap;

use serde_json::{json, Value};
use uuid::Uuid;

use crate::agent::produce::check::ProducedEvent;

/// Parts (text, reasoning) one streamed message may open.
pub const INBOUND_PARTS_MAX: usize = 4096;
/// A part or tool call id longer than this (in characters) is refused.
pub const INBOUND_ID_CHARS_MAX: usize = 256;

/// Maps one UI message stream to a produced run's events.
#[derive(Debug, Default)]
pub struct Inbound {
    started: bool,
    ended: bool,
    /// The open step's block (its text and reasoning share it).
    step_block: Option<Uuid>,
    /// Text and reasoning parts by the stream's part id: their message.
    parts: HashMap<String, Uuid>,
    /// Tool calls opened (by tool call id).
    calls: HashMap<String, ()>,
    /// The stream's `error`, which makes its end a failure.
    error: Option<String>,
    /// Chunks of types this mapping does not know.
    pub skipped: u64,
}

fn event(kind: &str) -> ProducedEvent {
    ProducedEvent {
        kind: kind.to_owned(),
        run_id: None,
        thread_id: None,
        block_id: None,
        message_id: None,
        delta: None,
        delta_path: None,
        delta_action: None,
        content: None,
        raw: None,
        metadata: None,
    }
}

fn text_field<'a>(chunk: &'a Value, field: &str) -> Result<&'a str, String> {
    let text = chunk
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{} needs {field}, a string", chunk_type(chunk)))?;
    Ok(text)
}

fn id_field<'a>(chunk: &'a Value, field: &str) -> Result<&'a str, String> {
    let id = text_field(chunk, field)?;
    if id.is_empty() || id.chars().count() > INBOUND_ID_CHARS_MAX {
        return Err(format!(
            "{}'s {field} must be 1 to {INBOUND_ID_CHARS_MAX} characters",
            chunk_type(chunk)
        ));
    }
    Ok(id)
}

fn chunk_type(chunk: &Value) -> &str {
    chunk.get("type").and_then(Value::as_str).unwrap_or("?")
}

impl Inbound {
    pub fn new() -> Inbound {
        Inbound::default()
    }

    /// True once the stream's end (`finish`, `abort`) was mapped.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// The events one chunk becomes; `user_text` is the user's message the run answers (given
    /// with the request, written after `run_started`).
    pub fn push(
        &mut self,
        chunk: &Value,
        user_text: Option<&str>,
    ) -> Result<Vec<ProducedEvent>, String> {
        if !chunk.is_object() {
            return Err("a chunk must be a JSON object".into());
        }
        let kind = chunk.get("type").and_then(Value::as_str).ok_or("a chunk needs a type")?;
        if self.ended {
            return Err(format!("{kind} after the stream's finish"));
        }
        if !self.started && kind != "start" {
            // `toUIMessageStream` always begins with `start`; a stream that does not gets one.
            let mut opened = self.push(&json!({ "type": "start" }), user_text)?;
            opened.extend(self.push(chunk, None)?);
            return Ok(opened);
        }
        let mut out = Vec::new();
        match kind {
            "start" => {
                if self.started {
                    return Err("a second start".into());
                }
                self.started = true;
                let mut started = event("run_started");
                let mut metadata = json!({ "source": "ai-sdk" });
                if let Some(message_id) = chunk.get("messageId").and_then(Value::as_str) {
                    metadata["ai_sdk_message_id"] = json!(message_id);
                }
                started.metadata = Some(metadata);
                out.push(started);
                if let Some(text) = user_text {
                    let mut user = event("user");
                    user.message_id = Some(Uuid::new_v4());
                    user.content = Some(json!({ "text": text }));
                    out.push(user);
                }
            }
            "start-step" => self.step_block = Some(Uuid::new_v4()),
            "finish-step" => self.step_block = None,
            "text-start" | "reasoning-start" => {
                let id = id_field(chunk, "id")?.to_owned();
                if !self.parts.contains_key(&id) && self.parts.len() >= INBOUND_PARTS_MAX {
                    return Err(format!("a message opens at most {INBOUND_PARTS_MAX} parts"));
                }
                self.parts.entry(id).or_insert_with(Uuid::new_v4);
            }
            "text-delta" | "reasoning-delta" => {
                let id = id_field(chunk, "id")?;
                let delta = text_field(chunk, "delta")?;
                let Some(&message) = self.parts.get(id) else {
                    return Err(format!("{kind} of part {id:?}, which did not start"));
                };
                if delta.is_empty() {
                    return Ok(out);
                }
                let block = *self.step_block.get_or_insert_with(Uuid::new_v4);
                let mut piece = event(if kind == "text-delta" { "text" } else { "thinking" });
                piece.message_id = Some(message);
                piece.block_id = Some(block);
                piece.delta = Some(json!(delta));
                piece.delta_action = Some(app::DeltaAction::Append);
                out.push(piece);
            }
            "text-end" | "reasoning-end" => {}
            "tool-input-start" => {
                let call = id_field(chunk, "toolCallId")?;
                let name = id_field(chunk, "toolName")?;
                out.extend(self.open_call(call, name));
            }
            "tool-input-delta" => {
                let call = id_field(chunk, "toolCallId")?;
                let piece = text_field(chunk, "inputTextDelta")?;
                if !self.calls.contains_key(call) {
                    return Err(format!("tool-input-delta of call {call:?}, which did not start"));
                }
                if !piece.is_empty() {
                    let mut delta = event("tool_call");
                    delta.content = Some(json!({ "tool_call_id": call }));
                    delta.delta = Some(json!(piece));
                    delta.delta_path = Some("input_json".into());
                    delta.delta_action = Some(app::DeltaAction::Append);
                    out.push(delta);
                }
            }
            "tool-input-available" => {
                let call = id_field(chunk, "toolCallId")?;
                let name = id_field(chunk, "toolName")?;
                out.extend(self.open_call(call, name));
                let input = chunk.get("input").cloned().unwrap_or(json!({}));
                out.push(self.call_merge(call, json!({ "input": input, "status": "ready" })));
            }
            "tool-input-error" => {
                let call = id_field(chunk, "toolCallId")?;
                let name = id_field(chunk, "toolName")?;
                let error = text_field(chunk, "errorText")?;
                out.extend(self.open_call(call, name));
                out.push(result(call, json!(error), true));
            }
            "tool-output-available" => {
                let call = self.known_call(chunk)?;
                let output = chunk.get("output").cloned().unwrap_or(Value::Null);
                out.push(result(call, output, false));
            }
            "tool-output-error" => {
                let call = self.known_call(chunk)?;
                let error = text_field(chunk, "errorText")?;
                out.push(result(call, json!(error), true));
            }
            "error" => {
                let message = text_field(chunk, "errorText")?.to_owned();
                let mut reported = event("error");
                reported.content = Some(json!({ "type": "ai_sdk_error", "message": message }));
                out.push(reported);
                self.error = Some(message);
            }
            "abort" => {
                self.ended = true;
                let mut end = event("run_cancelled");
                end.content = Some(json!({ "stop_reason": "cancelled" }));
                out.push(end);
            }
            "finish" => {
                self.ended = true;
                let usage =
                    chunk.pointer("/messageMetadata/usage").filter(|usage| usage.is_object());
                if let Some(usage) = usage {
                    let mut reported = event("usage");
                    reported.content = Some(usage.clone());
                    out.push(reported);
                }
                let end = match self.error.take() {
                    Some(message) => {
                        let mut end = event("run_failed");
                        end.content = Some(json!({
                            "stop_reason": "error",
                            "error": { "type": "ai_sdk_error", "message": message },
                        }));
                        end
                    }
                    None => {
                        let reason =
                            chunk.get("finishReason").and_then(Value::as_str).unwrap_or("end_turn");
                        let mut end = event("run_completed");
                        end.content = Some(json!({ "stop_reason": reason }));
                        end
                    }
                };
                out.push(end);
            }
            "message-metadata" | "source-url" | "source-document" | "file" => {}
            data if data.starts_with("data-") => {}
            _ => self.skipped += 1,
        }
        Ok(out)
    }

    /// Opens a call unless it is open already (`tool-input-available` may come without a start).
    fn open_call(&mut self, call: &str, name: &str) -> Option<ProducedEvent> {
        if self.calls.contains_key(call) {
            return None;
        }
        self.calls.insert(call.to_owned(), ());
        // A tool call after text is the same model call; the step's block stays the text's.
        let mut opened = event("tool_call");
        opened.content = Some(json!({ "tool_call_id": call, "name": name }));
        Some(opened)
    }

    fn call_merge(&self, call: &str, delta: Value) -> ProducedEvent {
        let mut merge = event("tool_call");
        merge.content = Some(json!({ "tool_call_id": call }));
        merge.delta = Some(delta);
        merge.delta_path = Some(String::new());
        merge.delta_action = Some(app::DeltaAction::Merge);
        merge
    }

    fn known_call<'a>(&self, chunk: &'a Value) -> Result<&'a str, String> {
        let call = id_field(chunk, "toolCallId")?;
        if !self.calls.contains_key(call) {
            return Err(format!("{} of call {call:?}, which did not start", chunk_type(chunk)));
        }
        Ok(call)
    }
}

fn result(call: &str, value: Value, is_error: bool) -> ProducedEvent {
    let mut answered = event("tool_result");
    answered.content = Some(json!({ "tool_call_id": call, "result": value, "is_error": is_error }));
    answered
}

#[cfg(test)]
mod tests;
