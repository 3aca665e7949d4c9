//! The AI SDK's chat request (`DefaultChatTransport`'s body), read: which chat, which trigger,
//! and the one input the server takes from it — the last user message's text and id. The log
//! is the truth: earlier messages the client sends are not read. Pure; every refusal names what
//! was wrong, and nothing is written for a refused request.

use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::agent::client_tools::ToolOutput;
use crate::http::error::ApiError;
use crate::surfaces::chat::{chat_id, ChatId};

/// Characters of a message id (the idempotency key of a send), at most: with its prefix it
/// stays within `agent::start::IDEMPOTENCY_KEY_CHARS_MAX`.
pub const MESSAGE_ID_CHARS_MAX: usize = 160;

/// The body as the transport sends it; other fields (the app's own `body` options) are ignored.
/// `messages` (the whole conversation, however long) stays raw: only the message the server
/// takes is parsed, so a request holds little more than its body.
#[derive(Debug, Deserialize)]
pub struct ChatBody {
    id: Value,
    messages: Box<RawValue>,
    #[serde(default)]
    trigger: Option<Value>,
    /// Tools the client runs (`[{name, description, parameters}]`, given through the
    /// transport's `body`): the model may call them; `onToolCall` answers.
    #[serde(default, rename = "clientTools")]
    client_tools: Option<Value>,
}

/// `submit-message` (a new user message) or `regenerate-message` (answer the last one again).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    Submit,
    Regenerate,
}

/// What a chat request asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequest {
    pub chat: ChatId,
    pub trigger: Trigger,
    /// The last user message's id: a retried POST of it starts nothing new.
    pub message_id: String,
    pub text: String,
    /// A person's answers to approval requests (ai 6's `addToolApprovalResponse`, sent as the
    /// last assistant message's `approval-responded` tool parts): the run carries them out
    /// instead of answering a user message (`message_id` and `text` are then empty).
    pub approvals: Vec<ApprovalReply>,
    /// The outputs the last assistant message's tool parts hold (`output-available` /
    /// `output-error`): those of calls still waiting for the client are its answers (the
    /// others were answered before; the handler tells them apart by the log).
    pub tool_outputs: Vec<ToolOutput>,
    /// The client's tools for this run (`clientTools` in the body).
    pub client_tools: Vec<crate::provider::ToolSpec>,
}

/// The outcomes an assistant message's tool parts hold (not those the provider ran).
fn tool_outputs(message: &Value) -> Vec<ToolOutput> {
    let parts = message.get("parts").and_then(Value::as_array);
    let mut outputs = Vec::new();
    for part in parts.into_iter().flatten() {
        let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
        let is_tool = kind == "dynamic-tool" || kind.starts_with("tool-");
        let provider_ran = part.get("providerExecuted").and_then(Value::as_bool) == Some(true);
        let Some(id) = part.get("toolCallId").and_then(Value::as_str) else {
            continue;
        };
        if !is_tool || provider_ran {
            continue;
        }
        let output = match part.get("state").and_then(Value::as_str) {
            Some("output-available") => Ok(part.get("output").cloned().unwrap_or(Value::Null)),
            Some("output-error") => Err(part
                .get("errorText")
                .and_then(Value::as_str)
                .unwrap_or("the tool failed")
                .to_owned()),
            _ => continue,
        };
        outputs.push(ToolOutput { tool_call_id: id.to_owned(), output });
    }
    outputs
}

/// One `approval-responded` tool part: the approval's id (the call's id) and the answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalReply {
    pub approval_id: String,
    pub approved: bool,
    pub reason: Option<String>,
}

/// The answers an assistant message carries: its tool parts in state `approval-responded`.
fn approval_replies(message: &Value) -> Result<Vec<ApprovalReply>, ApiError> {
    let parts = message.get("parts").and_then(Value::as_array);
    let mut replies = Vec::new();
    for part in parts.into_iter().flatten() {
        if part.get("state").and_then(Value::as_str) != Some("approval-responded") {
            continue;
        }
        let approval = part.get("approval");
        let field = |key: &str| approval.and_then(|approval| approval.get(key));
        let (Some(Value::String(id)), Some(Value::Bool(approved))) =
            (field("id"), field("approved"))
        else {
            return Err(refused(
                "an approval-responded part needs approval.id and approval.approved",
            ));
        };
        replies.push(ApprovalReply {
            approval_id: id.clone(),
            approved: *approved,
            reason: field("reason").and_then(Value::as_str).map(str::to_owned),
        });
    }
    Ok(replies)
}

fn refused(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", message)
}

impl ChatBody {
    pub fn read(&self) -> Result<ChatRequest, ApiError> {
        let client_tools = match &self.client_tools {
            Some(tools) => crate::agent::client_tools::parse(tools).map_err(refused)?,
            None => Vec::new(),
        };
        let chat = match &self.id {
            Value::String(text) => chat_id(text)?,
            other => {
                return Err(refused(format!("id must be the chat's id as a string, not {other}")))
            }
        };
        let trigger = match self.trigger.as_ref().and_then(Value::as_str) {
            None if self.trigger.is_none() => Trigger::Submit,
            Some("submit-message") => Trigger::Submit,
            Some("regenerate-message") => Trigger::Regenerate,
            _ => {
                return Err(refused(format!(
                    "trigger {}: use \"submit-message\" or \"regenerate-message\"",
                    self.trigger.as_ref().map_or("?".into(), Value::to_string)
                )))
            }
        };
        let messages: Vec<&RawValue> = serde_json::from_str(self.messages.get())
            .ok()
            .filter(|messages: &Vec<&RawValue>| !messages.is_empty())
            .ok_or_else(|| refused("messages must be a non-empty array of UI messages"))?;
        // Valid JSON already (it was read as part of the body).
        let parse = |raw: &RawValue| serde_json::from_str::<Value>(raw.get()).unwrap_or_default();
        let is_user = |message: &Value| message.get("role").and_then(Value::as_str) == Some("user");
        if trigger == Trigger::Submit {
            let last = parse(messages[messages.len() - 1]);
            if last.get("role").and_then(Value::as_str) == Some("assistant") {
                let approvals = approval_replies(&last)?;
                let tool_outputs = tool_outputs(&last);
                if approvals.is_empty() && tool_outputs.is_empty() {
                    return Err(refused(
                        "the last message of a submit must be the user's, or an assistant \
                         message with approval responses or tool outputs",
                    ));
                }
                return Ok(ChatRequest {
                    chat,
                    trigger,
                    message_id: String::new(),
                    text: String::new(),
                    approvals,
                    tool_outputs,
                    client_tools,
                });
            }
        }
        let user = match trigger {
            // A submit's new message is the last one.
            Trigger::Submit => Some(parse(messages[messages.len() - 1]))
                .filter(is_user)
                .ok_or_else(|| refused("the last message of a submit must be the user's"))?,
            // A regenerate answers the last user message again (what follows it is replaced).
            Trigger::Regenerate => messages
                .iter()
                .rev()
                .map(|raw| parse(raw))
                .find(is_user)
                .ok_or_else(|| refused("there is no user message to answer again"))?,
        };
        let message_id = match user.get("id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() && id.chars().count() <= MESSAGE_ID_CHARS_MAX => {
                id.to_owned()
            }
            _ => {
                return Err(refused(format!(
                    "the user message needs an id of 1–{MESSAGE_ID_CHARS_MAX} characters"
                )))
            }
        };
        Ok(ChatRequest {
            chat,
            trigger,
            message_id,
            text: user_text(&user)?,
            approvals: Vec::new(),
            tool_outputs: Vec::new(),
            client_tools,
        })
    }
}

/// The text of a user message's parts, joined; a file part is refused until files are taken.
fn user_text(message: &Value) -> Result<String, ApiError> {
    let Some(parts) = message.get("parts").and_then(Value::as_array) else {
        return Err(refused("the user message needs parts: [{\"type\": \"text\", \"text\": …}]"));
    };
    let mut texts = Vec::new();
    for part in parts {
        match part.get("type").and_then(Value::as_str) {
            Some("text") => match part.get("text").and_then(Value::as_str) {
                Some(text) => texts.push(text),
                None => return Err(refused("a text part needs its text as a string")),
            },
            Some("file") => {
                return Err(refused(
                    "file parts are not supported yet: send the message as text parts",
                ))
            }
            // Parts the app keeps for itself (data-…, step markers) are not input.
            _ => {}
        }
    }
    let text = texts.join("\n");
    if text.trim().is_empty() {
        return Err(refused("the user message has no text"));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::surfaces::chat::CHAT_ID_CHARS_MAX;
    use serde_json::json;
    use uuid::Uuid;

    fn read(body: Value) -> Result<ChatRequest, String> {
        let body: ChatBody =
            serde_json::from_str(&body.to_string()).map_err(|error| error.to_string())?;
        body.read().map_err(|error| format!("{error:?}"))
    }

    fn user(id: &str, text: &str) -> Value {
        json!({ "id": id, "role": "user", "parts": [{ "type": "text", "text": text }] })
    }

    #[test]
    fn requests_are_read_or_refused_with_the_reason() {
        let agent = Uuid::from_u128(7);
        let assistant =
            json!({ "id": "a1", "role": "assistant", "parts": [{ "type": "text", "text": "hi" }] });
        let ok: &[(Value, ChatRequest)] = &[
            (
                json!({ "id": "chat_1-x", "messages": [user("u1", "hello")], "trigger": "submit-message" }),
                ChatRequest {
                    chat: ChatId::Named("chat_1-x".into()),
                    trigger: Trigger::Submit,
                    message_id: "u1".into(),
                    text: "hello".into(),
                    approvals: Vec::new(),
                    tool_outputs: Vec::new(),
                    client_tools: Vec::new(),
                },
            ),
            (
                json!({ "id": agent.to_string(), "messages": [user("u1", "a"), assistant.clone(), user("u2", "b")] }),
                ChatRequest {
                    chat: ChatId::Agent(agent),
                    trigger: Trigger::Submit,
                    message_id: "u2".into(),
                    text: "b".into(),
                    approvals: Vec::new(),
                    tool_outputs: Vec::new(),
                    client_tools: Vec::new(),
                },
            ),
            (
                json!({ "id": "c", "messages": [user("u1", "a"), assistant.clone()], "trigger": "regenerate-message", "messageId": "a1" }),
                ChatRequest {
                    chat: ChatId::Named("c".into()),
                    trigger: Trigger::Regenerate,
                    message_id: "u1".into(),
                    text: "a".into(),
                    approvals: Vec::new(),
                    tool_outputs: Vec::new(),
                    client_tools: Vec::new(),
                },
            ),
            (
                json!({ "id": "c", "messages": [{ "id": "u1", "role": "user", "parts": [
                    { "type": "text", "text": "two" }, { "type": "data-note", "data": 1 }, { "type": "text", "text": "parts" }] }] }),
                ChatRequest {
                    chat: ChatId::Named("c".into()),
                    trigger: Trigger::Submit,
                    message_id: "u1".into(),
                    text: "two\nparts".into(),
                    approvals: Vec::new(),
                    tool_outputs: Vec::new(),
                    client_tools: Vec::new(),
                },
            ),
            (
                // The client's tools answered: outputs of every tool part the client ran.
                json!({ "id": "c", "clientTools": [{ "name": "confirm" }], "messages": [user("u1", "a"), { "id": "a1", "role": "assistant", "parts": [
                    { "type": "dynamic-tool", "toolCallId": "c1", "toolName": "confirm", "state": "output-available", "input": {}, "output": { "ok": true } },
                    { "type": "tool-ask", "toolCallId": "c2", "state": "output-error", "input": {}, "errorText": "no" },
                    { "type": "dynamic-tool", "toolCallId": "c3", "toolName": "x", "state": "input-available", "input": {} },
                    { "type": "dynamic-tool", "toolCallId": "c4", "toolName": "x", "state": "output-available", "input": {}, "output": 1, "providerExecuted": true }] }] }),
                ChatRequest {
                    chat: ChatId::Named("c".into()),
                    trigger: Trigger::Submit,
                    message_id: String::new(),
                    text: String::new(),
                    approvals: Vec::new(),
                    tool_outputs: vec![
                        ToolOutput { tool_call_id: "c1".into(), output: Ok(json!({ "ok": true })) },
                        ToolOutput { tool_call_id: "c2".into(), output: Err("no".into()) },
                    ],
                    client_tools: crate::agent::client_tools::parse(
                        &json!([{ "name": "confirm" }]),
                    )
                    .unwrap(),
                },
            ),
        ];
        for (body, expected) in ok {
            assert_eq!(read(body.clone()).as_ref(), Ok(expected), "{body}");
        }
        let refused: &[(Value, &str)] = &[
            (json!({ "id": "has space", "messages": [user("u1", "a")] }), "invalid_chat_id"),
            (
                json!({ "id": "x".repeat(CHAT_ID_CHARS_MAX + 1), "messages": [user("u1", "a")] }),
                "invalid_chat_id",
            ),
            (json!({ "id": "", "messages": [user("u1", "a")] }), "invalid_chat_id"),
            (json!({ "id": 5, "messages": [user("u1", "a")] }), "as a string"),
            (json!({ "id": "c", "messages": [] }), "non-empty array"),
            (json!({ "id": "c", "messages": "hello" }), "non-empty array"),
            (json!({ "id": "c", "messages": [user("u1", "a")], "trigger": "resubmit" }), "trigger"),
            (
                json!({ "id": "c", "messages": [user("u1", "a"), assistant.clone()] }),
                "must be the user's",
            ),
            (
                json!({ "id": "c", "messages": [assistant.clone()], "trigger": "regenerate-message" }),
                "no user message",
            ),
            (json!({ "id": "c", "messages": [user("", "a")] }), "needs an id"),
            (
                json!({ "id": "c", "messages": [user(&"m".repeat(MESSAGE_ID_CHARS_MAX + 1), "a")] }),
                "needs an id",
            ),
            (json!({ "id": "c", "messages": [user("u1", "  ")] }), "no text"),
            (json!({ "id": "c", "messages": [{ "id": "u1", "role": "user" }] }), "needs parts"),
            (
                json!({ "id": "c", "messages": [{ "id": "u1", "role": "user", "parts": [
                { "type": "file", "mediaType": "image/png", "url": "data:," }] }] }),
                "file parts are not supported",
            ),
            (json!({ "messages": [user("u1", "a")] }), "missing field `id`"),
            (
                json!({ "id": "c", "messages": [user("u1", "a")], "clientTools": [{ "name": "bad name" }] }),
                "client tool 0: name",
            ),
            (
                json!({ "id": "c", "messages": [user("u1", "a")], "clientTools": { "confirm": {} } }),
                "client tools must be a list",
            ),
        ];
        for (body, reason) in refused {
            let error = read(body.clone()).expect_err(&body.to_string());
            assert!(error.contains(reason), "{body}: {error}");
        }
    }
}
