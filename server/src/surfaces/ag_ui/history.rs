//! A thread's conversation as AG-UI messages (`MESSAGES_SNAPSHOT`), from the folded log (the
//! shared reducer's [`Timeline`]). Pure. The messages are the ones an AG-UI client holds after
//! applying the run's events ([`super::mapping`]): a user message per run (the client's id,
//! kept as the message's `otid`), each text message an assistant message, thinking a
//! `reasoning` message, a step's tool calls on the step's text message (or on an assistant
//! message named after the step's first call), and each result a `tool` message right after
//! the message holding its call. A run still in flight gives only its user message: a connect
//! reopens the rest.

use std::collections::HashMap;

use app::timeline::{RunStatus, Timeline, TimelineMessage};
use app::EventKind;
use serde_json::{json, Value};

use crate::surfaces::chat::client_message_id;
use crate::surfaces::steps::Steps;

/// The conversation, oldest first.
pub fn snapshot(timeline: &Timeline) -> Vec<Value> {
    let mut out = Vec::new();
    for run in timeline.runs() {
        let in_flight = run.status == RunStatus::Running;
        let mut run_messages = Builder::default();
        for message in
            timeline.messages().iter().filter(|message| message.run_id == Some(run.run_id))
        {
            if message.kind == EventKind::User {
                let id = client_message_id(message);
                out.push(json!({ "id": id, "role": "user", "content": message.text() }));
            } else if !in_flight {
                run_messages.push(message, &mut out);
            }
        }
    }
    out
}

/// One run's assistant side, built under the event mapping's step rule.
#[derive(Default)]
struct Builder {
    step: Steps,
    step_parent: Option<String>,
    /// Tool calls whose input was complete when they were mapped.
    complete: HashMap<String, bool>,
}

impl Builder {
    fn enter_step(&mut self, message: &TimelineMessage) {
        let is_text = matches!(message.kind, EventKind::Text | EventKind::Thinking);
        if self.step.starts_new(is_text, Some(message.block_id)) {
            self.step.begin();
            self.step_parent = None;
        }
        self.step.notes_text(is_text, Some(message.block_id));
    }

    fn push(&mut self, message: &TimelineMessage, out: &mut Vec<Value>) {
        let content = &message.content;
        match message.kind {
            EventKind::Text | EventKind::Thinking => {
                let Some(text) = content.get("text").and_then(Value::as_str) else {
                    return;
                };
                self.enter_step(message);
                let id = message.message_id.to_string();
                if message.kind == EventKind::Thinking {
                    out.push(json!({ "id": id, "role": "reasoning", "content": text }));
                } else {
                    if self.step_parent.is_none() {
                        self.step_parent = Some(id.clone());
                    }
                    out.push(json!({ "id": id, "role": "assistant", "content": text }));
                }
            }
            EventKind::ToolCall => {
                let tool_call_id = text_of(content, "tool_call_id");
                if tool_call_id.is_empty() || self.complete.contains_key(tool_call_id) {
                    return;
                }
                self.enter_step(message);
                let streamed = content
                    .get("input_json")
                    .and_then(Value::as_str)
                    .filter(|pieces| !pieces.is_empty());
                let finished = content.get("status") != Some(&json!("streaming"));
                let arguments = match (streamed, content.get("input")) {
                    (Some(pieces), _) => pieces.to_owned(),
                    (None, Some(input)) if finished => input.to_string(),
                    _ => String::new(),
                };
                self.complete.insert(tool_call_id.to_owned(), streamed.is_some() || finished);
                let call = json!({
                    "id": tool_call_id,
                    "type": "function",
                    "function": { "name": text_of(content, "name"), "arguments": arguments },
                });
                let parent =
                    self.step_parent.get_or_insert_with(|| tool_call_id.to_owned()).clone();
                let holder = out
                    .iter()
                    .position(|held| held["id"] == parent.as_str() && held["role"] == "assistant");
                match holder {
                    Some(index) => {
                        let held = out[index].as_object_mut().expect("a message");
                        let calls = held.entry("toolCalls").or_insert_with(|| json!([]));
                        calls.as_array_mut().expect("a list").push(call);
                    }
                    None => {
                        out.push(json!({ "id": parent, "role": "assistant", "toolCalls": [call] }))
                    }
                }
            }
            EventKind::ToolResult => {
                let tool_call_id = text_of(content, "tool_call_id");
                let Some(complete) = self.complete.get_mut(tool_call_id) else {
                    return;
                };
                self.step.result();
                let Some(holder) = out.iter().position(|held| {
                    held["role"] == "assistant"
                        && held["toolCalls"].as_array().is_some_and(|calls| {
                            calls.iter().any(|call| call["id"] == tool_call_id)
                        })
                }) else {
                    return;
                };
                if !*complete {
                    // The call ends at its result, with the input the result carries.
                    *complete = true;
                    let input = content.get("input").cloned().unwrap_or(json!({}));
                    let calls = out[holder]["toolCalls"].as_array_mut().expect("a list");
                    if let Some(call) = calls.iter_mut().find(|call| call["id"] == tool_call_id) {
                        if call["function"]["arguments"] == "" {
                            call["function"]["arguments"] = json!(input.to_string());
                        }
                    }
                }
                let result = match content.get("result") {
                    Some(Value::String(text)) => text.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                let mut at = holder + 1;
                while at < out.len() && out[at]["role"] == "tool" {
                    at += 1;
                }
                out.insert(
                    at,
                    json!({
                        "id": message.message_id.to_string(),
                        "role": "tool",
                        "toolCallId": tool_call_id,
                        "content": result,
                    }),
                );
            }
            _ => {}
        }
    }
}

fn text_of<'a>(content: &'a Value, key: &str) -> &'a str {
    content.get(key).and_then(Value::as_str).unwrap_or_default()
}

#[cfg(test)]
mod tests;
