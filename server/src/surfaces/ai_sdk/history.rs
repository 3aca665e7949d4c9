//! A conversation as the AI SDK's `UIMessage[]`, from the folded log (the shared reducer's
//! [`Timeline`]): what an app passes as `useChat({ messages })` after a reload. Pure.
//!
//! Each run is a user message (its id the client's, kept as the message's `otid`) and one
//! assistant message whose id is the run's id — the same message, part for part, that a client
//! holds after streaming the run ([`super::mapping`]): steps are the model's calls under the same
//! rule, text and reasoning parts `done`, tools as `dynamic-tool` parts. Two rules follow the
//! client:
//! - a run still in flight gives its user message but not its assistant message: that arrives
//!   through resume, and clients that seed a resumed stream from the last message they hold
//!   would show it twice;
//! - a regenerated answer replaces the one before it (the client drops the old answer before
//!   it asks again): a run whose user message has the previous run's user message id takes that
//!   run's place (logs written before branches; a regenerate now runs on a branch of its own);
//! - a run that carries out a person's answer to an approval request goes on with its turn's
//!   assistant message (as ai 6's client does after `addToolApprovalResponse`): one message per
//!   user turn, its id the turn's first run, its metadata the newest run's.

use app::timeline::{RunStatus, Timeline, TimelineMessage};
use app::EventKind;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::surfaces::chat::client_message_id;
use crate::surfaces::steps::Steps;

/// One user turn's messages: its user message, and its assistant message (built over the turn's
/// runs) once its newest run has ended.
struct Turn {
    user: Option<(String, Value)>,
    assistant: Option<Value>,
    /// The turn's first run (the assistant message's id) and the parts so far.
    root: Uuid,
    builder: Assistant,
}

/// The conversation of agent `agent_id`, oldest first.
pub fn ui_messages(agent_id: Uuid, timeline: &Timeline) -> Vec<Value> {
    let mut turns: Vec<Turn> = Vec::new();
    for run in timeline.runs() {
        let continued =
            run.continues.filter(|root| turns.last().is_some_and(|turn| turn.root == *root));
        let (mut builder, mut user, root) = match continued {
            Some(root) => {
                let turn = turns.pop().expect("the turn continued");
                let mut builder = turn.builder;
                // The continuation's stream starts its steps afresh.
                builder.steps = Steps::default();
                (builder, turn.user, root)
            }
            None => (Assistant::default(), None, run.run_id),
        };
        let new_user = continued.is_none();
        for message in
            timeline.messages().iter().filter(|message| message.run_id == Some(run.run_id))
        {
            match message.kind {
                EventKind::User if new_user && user.is_none() => user = Some(user_message(message)),
                EventKind::Text | EventKind::Thinking => builder.text(message),
                EventKind::ToolCall => builder.tool_call(message),
                EventKind::ToolResult => builder.tool_result(message),
                // A client tool's call stays `input-available` until its output, as the
                // client holds it.
                EventKind::ApprovalRequested if !app::approvals::is_client_request(message) => {
                    builder.approval(message, None)
                }
                EventKind::ApprovalResponse => {
                    let approved = message.content.get("approve").and_then(Value::as_bool);
                    builder.approval(message, Some(approved == Some(true)));
                }
                _ => {}
            }
        }
        let assistant = (run.status != RunStatus::Running).then(|| {
            let mut metadata = json!({
                "agent_id": run.log.unwrap_or(agent_id),
                "run_id": run.run_id,
                "seq": run.first_seq,
                "usage": run.usage,
            });
            if run.status == RunStatus::Failed {
                // The client stops reading at a failed run's `error` chunk: the `finish` (and
                // its usage) after it never reaches the message it holds.
                metadata.as_object_mut().expect("an object").remove("usage");
            }
            json!({
                "id": root.to_string(),
                "role": "assistant",
                "metadata": metadata,
                "parts": builder.parts.clone(),
            })
        });
        if continued.is_some() {
            turns.push(Turn { user, assistant, root, builder });
            continue;
        }
        let regenerates = match (&user, turns.last()) {
            (Some((id, _)), Some(Turn { user: Some((previous, _)), .. })) => id == previous,
            _ => false,
        };
        if regenerates {
            turns.pop();
        }
        turns.push(Turn { user, assistant, root, builder });
    }
    turns
        .into_iter()
        .flat_map(|turn| turn.user.map(|(_, message)| message).into_iter().chain(turn.assistant))
        .collect()
}

/// The user message, with the id the client gave it (its `otid`) where it gave one.
fn user_message(message: &TimelineMessage) -> (String, Value) {
    let id = client_message_id(message);
    let value = json!({
        "id": id,
        "role": "user",
        "parts": [{ "type": "text", "text": message.text() }],
    });
    (id, value)
}

/// An assistant message's parts, built as the chunk mapping cuts the stream.
#[derive(Default)]
struct Assistant {
    parts: Vec<Value>,
    steps: Steps,
}

impl Assistant {
    fn enter_step(&mut self, message: &TimelineMessage) {
        let is_text = matches!(message.kind, EventKind::Text | EventKind::Thinking);
        if self.steps.starts_new(is_text, Some(message.block_id)) {
            self.steps.begin();
            self.parts.push(json!({ "type": "step-start" }));
        }
        self.steps.notes_text(is_text, Some(message.block_id));
    }

    fn text(&mut self, message: &TimelineMessage) {
        let Some(text) = message.content.get("text").and_then(Value::as_str) else {
            return;
        };
        self.enter_step(message);
        self.parts.push(match message.kind {
            // ai 6 keeps a reasoning part's id (ai 5 clients ignore it).
            EventKind::Thinking => json!({
                "type": "reasoning",
                "id": message.message_id.to_string(),
                "text": text,
                "state": "done",
            }),
            _ => json!({ "type": "text", "text": text, "state": "done" }),
        });
    }

    fn tool_call(&mut self, message: &TimelineMessage) {
        let tool_call_id = text_of(&message.content, "tool_call_id");
        if tool_call_id.is_empty() || self.tool_part(tool_call_id).is_some() {
            return;
        }
        self.enter_step(message);
        let mut part = Map::new();
        let name = text_of(&message.content, "name");
        if message.content.get("client").and_then(Value::as_bool) == Some(true) {
            // A client tool's call: the static part the AI SDK holds for a tool it declared.
            part.insert("type".into(), json!(format!("tool-{name}")));
        } else {
            part.insert("type".into(), json!("dynamic-tool"));
            part.insert("toolName".into(), json!(name));
        }
        part.insert("toolCallId".into(), json!(tool_call_id));
        match message.content.get("input") {
            Some(input) if message.content.get("status") != Some(&json!("streaming")) => {
                part.insert("state".into(), json!("input-available"));
                part.insert("input".into(), input.clone());
            }
            _ => {
                part.insert("state".into(), json!("input-streaming"));
            }
        }
        self.parts.push(Value::Object(part));
    }

    /// A request (`answer` none) or a person's answer on the call's part, as ai 6 holds them.
    fn approval(&mut self, message: &TimelineMessage, answer: Option<bool>) {
        let content = &message.content;
        let tool_call_id = text_of(content, "tool_call_id");
        let Some(index) = self.tool_part(tool_call_id) else {
            return;
        };
        let part = self.parts[index].as_object_mut().expect("a tool part");
        let mut approval = json!({ "id": tool_call_id });
        match answer {
            None => {
                part.insert("state".into(), json!("approval-requested"));
            }
            Some(approved) => {
                part.insert("state".into(), json!("approval-responded"));
                approval["approved"] = json!(approved);
                if let Some(reason) = content.get("reason").filter(|reason| reason.is_string()) {
                    approval["reason"] = reason.clone();
                }
            }
        }
        part.insert("approval".into(), approval);
    }

    fn tool_result(&mut self, message: &TimelineMessage) {
        let content = &message.content;
        let Some(index) = self.tool_part(text_of(content, "tool_call_id")) else {
            return;
        };
        self.steps.result();
        let part = self.parts[index].as_object_mut().expect("a tool part");
        if part.get("approval").and_then(|approval| approval.get("approved")) == Some(&json!(false))
        {
            part.insert("state".into(), json!("output-denied"));
            return;
        }
        if part.get("state") == Some(&json!("input-streaming")) {
            let input = content.get("input").cloned().unwrap_or(json!({}));
            part.insert("input".into(), input);
        }
        let result = content.get("result").cloned().unwrap_or(Value::Null);
        if content.get("is_error").and_then(Value::as_bool) == Some(true) {
            part.insert("state".into(), json!("output-error"));
            let text = match result {
                Value::String(text) => text,
                other => other.to_string(),
            };
            part.insert("errorText".into(), json!(text));
        } else {
            part.insert("state".into(), json!("output-available"));
            part.insert("output".into(), result);
        }
    }

    fn tool_part(&self, tool_call_id: &str) -> Option<usize> {
        self.parts.iter().position(|part| {
            let kind = part["type"].as_str().unwrap_or_default();
            (kind == "dynamic-tool" || kind.starts_with("tool-"))
                && part["toolCallId"].as_str() == Some(tool_call_id)
        })
    }
}

fn text_of<'a>(content: &'a Value, key: &str) -> &'a str {
    content.get(key).and_then(Value::as_str).unwrap_or_default()
}

#[cfg(test)]
mod tests;
