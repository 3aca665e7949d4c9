//! Letta's send request, read: the message text (string or content parts) or a person's answer
//! to an approval request, its `otid`, and the options Letta's SDKs send. Pure; every refusal
//! names what was wrong.

use axum::http::StatusCode;
use serde::Deserialize;

use super::mapping::Cut;
use crate::http::error::ApiError;

/// The body of `POST /v1/agents/{id}/messages` and `…/messages/stream`. Fields Letta has that
/// are not listed (`assistant_message_tool_name`, `enable_thinking`, …) are accepted and
/// ignored.
#[derive(Debug, Deserialize)]
pub struct LettaRequest {
    #[serde(default)]
    messages: Option<Vec<MessageCreate>>,
    /// Shorthand for one user message.
    #[serde(default)]
    input: Option<Content>,
    #[serde(default)]
    pub(super) streaming: Option<bool>,
    #[serde(default)]
    pub(super) stream_tokens: Option<bool>,
    #[serde(default)]
    pub(super) background: Option<bool>,
    #[serde(default)]
    pub(super) include_pings: Option<bool>,
    #[serde(default)]
    pub(super) max_steps: Option<u32>,
    #[serde(default)]
    pub(super) include_return_message_types: Option<Vec<String>>,
    /// Tools the client runs (`[{name, description, parameters}]`): a call to one waits as an
    /// approval request does, answered by the client's `tool_return`.
    #[serde(default)]
    client_tools: Option<serde_json::Value>,
}

/// A user message (`role`, `content`) or Letta's `ApprovalCreate` (`type: "approval"`).
#[derive(Debug, Deserialize)]
struct MessageCreate {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    otid: Option<String>,
    /// Letta's deprecated single-answer fields.
    #[serde(default)]
    approve: Option<bool>,
    #[serde(default)]
    approval_request_id: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    /// Letta's current form: a list of answers.
    #[serde(default)]
    approvals: Option<Vec<ApprovalItem>>,
    /// Letta's `ToolReturnCreate` (`type: "tool_return"`): client tools' results only.
    #[serde(default)]
    tool_returns: Option<Vec<ApprovalItem>>,
}

/// One entry of `approvals`: an `ApprovalReturn` (`type: "approval"`), or a client-side tool's
/// result (`type: "tool"`: `tool_return`, `status` `success` or `error`).
#[derive(Debug, Deserialize)]
struct ApprovalItem {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    approve: Option<bool>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    tool_return: Option<serde_json::Value>,
    #[serde(default)]
    status: Option<String>,
}

/// What a Letta send asks for.
#[derive(Debug, PartialEq)]
pub enum LettaAsked {
    /// A user message and the client's otid for it.
    Message { text: String, otid: Option<String> },
    /// A person's answers to approval requests.
    Approvals(Vec<LettaApproval>),
}

/// One answer of an approval message.
#[derive(Debug, PartialEq)]
pub struct LettaApproval {
    pub target: ApprovalTarget,
    pub approve: bool,
    pub reason: Option<String>,
    /// A client tool's result (`Err`: its `tool_return` with status `error`).
    pub returned: Option<Result<serde_json::Value, String>>,
}

/// How an answer names its request.
#[derive(Debug, PartialEq)]
pub enum ApprovalTarget {
    /// The call's `tool_call_id` (the `approvals` list).
    CallId(String),
    /// The `approval_request_message`'s id (the deprecated `approval_request_id`).
    RequestId(String),
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Deserialize)]
struct ContentPart {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

impl Content {
    fn text(&self) -> Result<String, ApiError> {
        match self {
            Content::Text(text) => Ok(text.clone()),
            Content::Parts(parts) => parts
                .iter()
                .map(|part| match (part.kind.as_str(), &part.text) {
                    ("text", Some(text)) => Ok(text.as_str()),
                    (kind, _) => Err(unprocessable(format!(
                        "content of type {kind:?} is not supported; send text"
                    ))),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(|texts| texts.join("\n")),
        }
    }
}

pub(super) fn unprocessable(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", message)
}

impl MessageCreate {
    fn is_approval(&self) -> bool {
        matches!(self.kind.as_deref(), Some("approval" | "tool_return"))
    }

    /// The answers an approval message carries.
    fn approval(&self) -> Result<LettaAsked, ApiError> {
        let (list, field) = match self.kind.as_deref() {
            Some("tool_return") => (&self.tool_returns, "tool_returns"),
            _ => (&self.approvals, "approvals"),
        };
        if let Some(items) = list {
            if items.is_empty() {
                return Err(unprocessable(format!("{field}: answer at least one request")));
            }
            let answers =
                items.iter().map(|item| item.answer(field)).collect::<Result<Vec<_>, _>>()?;
            return Ok(LettaAsked::Approvals(answers));
        }
        match (&self.approval_request_id, self.approve) {
            (Some(request_id), Some(approve)) => Ok(LettaAsked::Approvals(vec![LettaApproval {
                target: ApprovalTarget::RequestId(request_id.clone()),
                approve,
                reason: self.reason.clone(),
                returned: None,
            }])),
            _ => Err(unprocessable(
                "an approval message needs approvals (or approval_request_id and approve)",
            )),
        }
    }
}

impl ApprovalItem {
    /// One entry of `field` (`approvals` or `tool_returns`) as an answer.
    fn answer(&self, field: &str) -> Result<LettaApproval, ApiError> {
        let Some(tool_call_id) = &self.tool_call_id else {
            return Err(unprocessable(format!("{field}: each answer needs its tool_call_id")));
        };
        let target = ApprovalTarget::CallId(tool_call_id.clone());
        match self.kind.as_deref() {
            Some("tool") => {
                let Some(value) = &self.tool_return else {
                    return Err(unprocessable(format!(
                        "{field}: a client tool's result needs its tool_return"
                    )));
                };
                let returned = match self.status.as_deref() {
                    None | Some("success") => Ok(value.clone()),
                    Some("error") => Err(match value {
                        serde_json::Value::String(text) => text.clone(),
                        other => other.to_string(),
                    }),
                    Some(other) => {
                        return Err(unprocessable(format!(
                            "{field}: status {other:?}: use \"success\" or \"error\""
                        )))
                    }
                };
                Ok(LettaApproval {
                    target,
                    approve: true,
                    reason: None,
                    returned: Some(returned),
                })
            }
            None | Some("approval") if field == "approvals" => {
                let Some(approve) = self.approve else {
                    return Err(unprocessable(
                        "approvals: each answer needs tool_call_id and approve",
                    ));
                };
                Ok(LettaAsked::approval_answer(target, approve, self.reason.clone()))
            }
            Some(other) => Err(unprocessable(format!(
                "{field}: entries of type {other:?} are not taken (use \"approval\" or \"tool\")"
            ))),
            None => Err(unprocessable(format!(
                "{field}: each entry is {{\"type\": \"tool\", \"tool_call_id\", \"tool_return\", \"status\"}}"
            ))),
        }
    }
}

impl LettaAsked {
    fn approval_answer(
        target: ApprovalTarget,
        approve: bool,
        reason: Option<String>,
    ) -> LettaApproval {
        LettaApproval { target, approve, reason, returned: None }
    }
}

impl LettaRequest {
    /// The client's tools for the run (`client_tools`).
    pub(super) fn client_tools(&self) -> Result<Vec<crate::provider::ToolSpec>, ApiError> {
        match &self.client_tools {
            Some(tools) => crate::agent::client_tools::parse(tools).map_err(unprocessable),
            None => Ok(Vec::new()),
        }
    }

    /// What the request asks for: a user message (the texts of its messages, joined) or one
    /// answer to an approval request.
    pub(super) fn asked(&self) -> Result<LettaAsked, ApiError> {
        if let Some(messages) = self.messages.as_ref().filter(|messages| !messages.is_empty()) {
            if let Some(approval) = messages.iter().find(|message| message.is_approval()) {
                if messages.len() > 1 {
                    return Err(unprocessable(
                        "an approval message is sent alone: answer first, then send messages",
                    ));
                }
                return approval.approval();
            }
            let mut texts = Vec::with_capacity(messages.len());
            for message in messages {
                let role = message.role.as_deref().unwrap_or("");
                if role != "user" {
                    return Err(unprocessable(format!(
                        "role {role:?}: only user messages (and approvals) can be sent"
                    )));
                }
                let Some(content) = &message.content else {
                    return Err(unprocessable("a user message needs content"));
                };
                texts.push(content.text()?);
            }
            let otid = messages.iter().find_map(|message| message.otid.clone());
            return Ok(LettaAsked::Message { text: texts.join("\n\n"), otid });
        }
        match &self.input {
            Some(input) => Ok(LettaAsked::Message { text: input.text()?, otid: None }),
            None => Err(unprocessable("messages (or input) is required")),
        }
    }

    pub(super) fn cut(&self) -> Cut {
        if self.stream_tokens.unwrap_or(false) {
            Cut::Tokens
        } else {
            Cut::Steps
        }
    }
}

/// Reads a Letta send body as the handlers do: what it asks for, or the error the client would
/// get. (The fuzz targets drive this with arbitrary bytes.)
pub fn parse_request(body: &[u8]) -> Result<LettaAsked, ApiError> {
    let request: LettaRequest = serde_json::from_slice(body)
        .map_err(|error| crate::http::params::body_error(&error, "request"))?;
    request.asked()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_is_a_message_or_one_answer() {
        let message = |text: &str| LettaAsked::Message { text: text.into(), otid: None };
        let answer = |target, approve, reason: Option<&str>| {
            LettaAsked::Approvals(vec![LettaApproval {
                target,
                approve,
                reason: reason.map(str::to_owned),
                returned: None,
            }])
        };
        let returned = |call: &str, output: Result<serde_json::Value, String>| LettaApproval {
            target: ApprovalTarget::CallId(call.into()),
            approve: true,
            reason: None,
            returned: Some(output),
        };
        // (body, what it asks, or the start of the refusal)
        let cases: Vec<(&str, Result<LettaAsked, &str>)> = vec![
            (r#"{"input": "hi"}"#, Ok(message("hi"))),
            (
                r#"{"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": [{"type": "text", "text": "b"}]}]}"#,
                Ok(message("a\n\nb")),
            ),
            (
                r#"{"messages": [{"type": "approval", "approvals": [{"type": "approval", "tool_call_id": "c1", "approve": false, "reason": "no"}]}]}"#,
                Ok(answer(ApprovalTarget::CallId("c1".into()), false, Some("no"))),
            ),
            (
                r#"{"messages": [{"type": "approval", "approve": true, "approval_request_id": "message-x"}]}"#,
                Ok(answer(ApprovalTarget::RequestId("message-x".into()), true, None)),
            ),
            (r#"{"messages": [{"role": "assistant", "content": "x"}]}"#, Err("role")),
            (r#"{"messages": [{"role": "user"}]}"#, Err("a user message needs")),
            (r#"{"messages": [{"type": "approval"}]}"#, Err("an approval message needs")),
            (
                r#"{"messages": [{"type": "approval", "approvals": []}]}"#,
                Err("approvals: answer at least one"),
            ),
            (
                r#"{"messages": [{"type": "approval", "approvals": [{"type": "tool", "tool_call_id": "c", "tool_return": "x", "status": "success"},
                    {"type": "tool", "tool_call_id": "d", "tool_return": "boom", "status": "error"}]}]}"#,
                Ok(LettaAsked::Approvals(vec![
                    returned("c", Ok(serde_json::json!("x"))),
                    returned("d", Err("boom".into())),
                ])),
            ),
            (
                r#"{"messages": [{"type": "tool_return", "tool_returns": [{"type": "tool", "tool_call_id": "c", "tool_return": "x"}]}]}"#,
                Ok(LettaAsked::Approvals(vec![returned("c", Ok(serde_json::json!("x")))])),
            ),
            (
                r#"{"messages": [{"type": "approval", "approvals": [{"type": "tool", "tool_call_id": "c"}]}]}"#,
                Err("approvals: a client tool's result needs its tool_return"),
            ),
            (
                r#"{"messages": [{"type": "approval", "approvals": [{"type": "tool", "tool_call_id": "c", "tool_return": "x", "status": "maybe"}]}]}"#,
                Err("approvals: status \"maybe\""),
            ),
            (
                r#"{"messages": [{"type": "tool_return", "tool_returns": [{"type": "approval", "tool_call_id": "c", "approve": true}]}]}"#,
                Err("tool_returns: entries of type \"approval\""),
            ),
            (
                r#"{"messages": [{"type": "approval", "approvals": [{"tool_call_id": "c"}]}]}"#,
                Err("approvals: each answer"),
            ),
            (
                r#"{"messages": [{"type": "approval", "approve": true, "approval_request_id": "m"}, {"role": "user", "content": "x"}]}"#,
                Err("an approval message is sent alone"),
            ),
            (r#"{}"#, Err("messages (or input)")),
        ];
        for (body, expected) in cases {
            match (parse_request(body.as_bytes()), expected) {
                (Ok(asked), Ok(expected)) => assert_eq!(asked, expected, "{body}"),
                (Err(error), Err(start)) => {
                    assert_eq!(error.status, 422, "{body}");
                    assert!(error.message.starts_with(start), "{body}: {}", error.message);
                }
                (got, expected) => panic!("{body}: got {got:?}, expected {expected:?}"),
            }
        }
    }
}
