//! AG-UI's `RunAgentInput`, read: which thread, the client's run id, and the input the server
//! takes — the new user messages at the end of `messages` (the log is the truth; earlier
//! messages are not parsed) — or, when `messages` ends with tool messages, the results of the
//! client's tools (CopilotKit's frontend actions). Context and state are kept to be recorded on
//! the run; `tools` are the client's, offered to the model. Pure; every refusal names what was
//! wrong.

use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::agent::client_tools::{self, ToolOutput};
use crate::http::error::ApiError;
use crate::provider::ToolSpec;
use crate::surfaces::chat::{chat_id, ChatId};

/// Characters of a message id (the idempotency key of a run request), at most: with its
/// prefix it stays within `agent::start::IDEMPOTENCY_KEY_CHARS_MAX`.
pub const MESSAGE_ID_CHARS_MAX: usize = 160;
/// Characters of the client's run id, at most.
pub const CLIENT_RUN_ID_CHARS_MAX: usize = 128;
/// Bytes of context and state (as JSON) recorded on a run, at most.
pub const RECORDED_INPUT_BYTES_MAX: usize = 16 * 1024;

/// The body as `HttpAgent` sends it. `messages` stays raw: only the new messages at its end
/// are parsed. `forwardedProps` is accepted and not used.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunBody {
    thread_id: Option<Value>,
    #[serde(default)]
    run_id: Option<Value>,
    #[serde(default)]
    messages: Option<Box<RawValue>>,
    #[serde(default)]
    context: Option<Value>,
    #[serde(default)]
    state: Option<Value>,
    /// Answers to the interrupts the thread's last run ended with.
    #[serde(default)]
    resume: Option<Value>,
    /// The client's tools (`[{name, description, parameters}]`).
    #[serde(default)]
    tools: Option<Value>,
}

/// What a run request asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRequest {
    pub thread: ChatId,
    /// The client's `runId`, echoed in the run's events and recorded on the run.
    pub client_run_id: Option<String>,
    /// The last new user message's id: a retried request of it starts nothing new.
    pub message_id: String,
    pub text: String,
    /// `{context, state}` as the client sent them, to record on the run.
    pub recorded: Option<Value>,
    /// Answers to interrupts (tool calls waiting for approval): the run carries them out
    /// instead of answering a message (`message_id` and `text` are then empty).
    pub resume: Option<Vec<ResumeAnswer>>,
    /// The tool messages at the end of `messages`: the client's tools' results (the run goes
    /// on with them; `message_id` and `text` are then empty).
    pub tool_results: Vec<ToolOutput>,
    /// The client's tools, offered to the model.
    pub client_tools: Vec<ToolSpec>,
}

/// One `resume` entry: the interrupt (a tool call's id) and the person's answer. `resolved`
/// approves unless its payload says `approved: false`; `cancelled` denies.
#[derive(Clone, Debug, PartialEq)]
pub struct ResumeAnswer {
    pub interrupt_id: String,
    pub approve: bool,
    pub reason: Option<String>,
}

/// Reads `resume`: a non-empty list of answers.
fn resume_answers(resume: &Value) -> Result<Vec<ResumeAnswer>, ApiError> {
    match resume.as_array() {
        Some(entries) if !entries.is_empty() => entries.iter().map(resume_answer).collect(),
        _ => Err(refused("resume must be a list of answers to the thread's interrupts")),
    }
}

fn resume_answer(entry: &Value) -> Result<ResumeAnswer, ApiError> {
    let Some(interrupt_id) = entry.get("interruptId").and_then(Value::as_str) else {
        return Err(refused("a resume entry needs its interruptId"));
    };
    let payload = entry.get("payload");
    let reason = payload
        .and_then(|payload| payload.get("reason"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let approve = match entry.get("status").and_then(Value::as_str) {
        Some("resolved") => match payload.and_then(|payload| payload.get("approved")) {
            None | Some(Value::Null) => true,
            Some(Value::Bool(approved)) => *approved,
            Some(other) => {
                return Err(refused(format!("payload.approved must be true or false, not {other}")))
            }
        },
        Some("cancelled") => false,
        _ => return Err(refused("a resume entry's status must be \"resolved\" or \"cancelled\"")),
    };
    Ok(ResumeAnswer { interrupt_id: interrupt_id.to_owned(), approve, reason })
}

fn refused(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", message)
}

/// Reads `threadId` from any AG-UI body (a run's, or a connect's).
pub fn thread_of(thread_id: Option<&Value>) -> Result<ChatId, ApiError> {
    match thread_id {
        Some(Value::String(text)) => chat_id(text),
        None => Err(refused("threadId is missing: name the conversation")),
        Some(other) => Err(refused(format!("threadId must be a string, not {other}"))),
    }
}

/// A connect or cancel body: only `threadId` is read.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadBody {
    thread_id: Option<Value>,
}

impl ThreadBody {
    pub fn thread(&self) -> Result<ChatId, ApiError> {
        thread_of(self.thread_id.as_ref())
    }
}

impl RunBody {
    pub fn read(&self) -> Result<RunRequest, ApiError> {
        let thread = thread_of(self.thread_id.as_ref())?;
        let client_run_id = match &self.run_id {
            None | Some(Value::Null) => None,
            Some(Value::String(id))
                if !id.is_empty() && id.chars().count() <= CLIENT_RUN_ID_CHARS_MAX =>
            {
                Some(id.clone())
            }
            Some(other) => {
                return Err(refused(format!(
                    "runId must be a string of 1–{CLIENT_RUN_ID_CHARS_MAX} characters, not {other}"
                )))
            }
        };
        let recorded = self.recorded()?;
        let client_tools = match &self.tools {
            Some(tools) => client_tools::parse(tools).map_err(refused)?,
            None => Vec::new(),
        };
        let answering = |resume, tool_results| RunRequest {
            thread: thread.clone(),
            client_run_id: client_run_id.clone(),
            message_id: String::new(),
            text: String::new(),
            recorded: recorded.clone(),
            resume,
            tool_results,
            client_tools: client_tools.clone(),
        };
        if let Some(resume) = self.resume.as_ref().filter(|resume| !resume.is_null()) {
            return Ok(answering(Some(resume_answers(resume)?), Vec::new()));
        }
        let messages: Vec<&RawValue> = self
            .messages
            .as_ref()
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
            .ok_or_else(|| refused("messages must be an array of AG-UI messages"))?;
        // The new input: the user messages after the last message that is not the user's.
        let mut new = Vec::new();
        for raw in messages.iter().rev() {
            let message: Value = serde_json::from_str(raw.get()).unwrap_or_default();
            if message.get("role").and_then(Value::as_str) != Some("user") {
                break;
            }
            new.push(message);
        }
        new.reverse();
        if new.is_empty() {
            let results = tool_results(&messages)?;
            if !results.is_empty() {
                return Ok(answering(None, results));
            }
        }
        let Some(last) = new.last() else {
            return Err(refused(
                "there is no new user message at the end of messages: nothing to answer",
            ));
        };
        let message_id = match last.get("id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() && id.chars().count() <= MESSAGE_ID_CHARS_MAX => {
                id.to_owned()
            }
            _ => {
                return Err(refused(format!(
                    "the user message needs an id of 1–{MESSAGE_ID_CHARS_MAX} characters"
                )))
            }
        };
        let texts = new.iter().map(user_text).collect::<Result<Vec<_>, _>>()?;
        let text = texts.join("\n\n");
        if text.trim().is_empty() {
            return Err(refused("the user message has no text"));
        }
        Ok(RunRequest {
            thread,
            client_run_id,
            message_id,
            text,
            recorded,
            resume: None,
            tool_results: Vec::new(),
            client_tools,
        })
    }

    /// `{context, state}` to record on the run, if the client sent either.
    fn recorded(&self) -> Result<Option<Value>, ApiError> {
        let recorded = match (&self.context, &self.state) {
            (None | Some(Value::Null), None | Some(Value::Null)) => None,
            (context, state) => {
                let mut recorded = json!({});
                if let Some(context) = context.as_ref().filter(|value| !value.is_null()) {
                    recorded["context"] = context.clone();
                }
                if let Some(state) = state.as_ref().filter(|value| !value.is_null()) {
                    recorded["state"] = state.clone();
                }
                if recorded.to_string().len() > RECORDED_INPUT_BYTES_MAX {
                    return Err(ApiError::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "input_too_large",
                        format!(
                            "context and state are over {RECORDED_INPUT_BYTES_MAX} bytes as JSON"
                        ),
                    ));
                }
                Some(recorded)
            }
        };
        Ok(recorded)
    }
}

/// The tool messages at the end of `messages` (after the assistant message that called the
/// tools): each answers its `toolCallId` with its `content`, or with its `error` when it has
/// one.
fn tool_results(messages: &[&RawValue]) -> Result<Vec<ToolOutput>, ApiError> {
    let mut results = Vec::new();
    for raw in messages.iter().rev() {
        let message: Value = serde_json::from_str(raw.get()).unwrap_or_default();
        if message.get("role").and_then(Value::as_str) != Some("tool") {
            break;
        }
        let Some(id) = message.get("toolCallId").and_then(Value::as_str) else {
            return Err(refused("a tool message needs its toolCallId"));
        };
        let output = match (message.get("error"), message.get("content")) {
            (Some(Value::String(error)), _) => Err(error.clone()),
            (_, Some(content @ Value::String(_))) => Ok(content.clone()),
            _ => return Err(refused("a tool message needs its content as a string")),
        };
        results.push(ToolOutput { tool_call_id: id.to_owned(), output });
    }
    results.reverse();
    Ok(results)
}

/// A user message's text: its `content` string, or its text parts joined; other parts (images,
/// audio, documents) are refused until they are taken.
fn user_text(message: &Value) -> Result<String, ApiError> {
    match message.get("content") {
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for part in parts {
                match (part.get("type").and_then(Value::as_str), part.get("text")) {
                    (Some("text"), Some(Value::String(text))) => texts.push(text.as_str()),
                    (Some("text"), _) => return Err(refused("a text part needs its text")),
                    (kind, _) => {
                        return Err(refused(format!(
                            "content parts of type {} are not supported yet: send text",
                            kind.unwrap_or("?")
                        )))
                    }
                }
            }
            Ok(texts.join("\n"))
        }
        _ => Err(refused("a user message needs content: a string or text parts")),
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod resume_tests {
    use super::*;

    fn read(body: Value) -> Result<Option<Vec<ResumeAnswer>>, String> {
        let body: RunBody = serde_json::from_value(body).map_err(|error| error.to_string())?;
        body.read().map(|request| request.resume).map_err(|error| error.message)
    }

    #[test]
    fn resume_entries_answer_interrupts_or_are_refused_with_the_reason() {
        let answer = |id: &str, approve: bool, reason: Option<&str>| ResumeAnswer {
            interrupt_id: id.into(),
            approve,
            reason: reason.map(str::to_owned),
        };
        let ok = [
            (
                json!([{ "interruptId": "c1", "status": "resolved" }]),
                vec![answer("c1", true, None)],
            ),
            (
                json!([
                    { "interruptId": "c1", "status": "resolved", "payload": { "approved": false, "reason": "no" } },
                    { "interruptId": "c2", "status": "cancelled" }
                ]),
                vec![answer("c1", false, Some("no")), answer("c2", false, None)],
            ),
        ];
        for (resume, expected) in ok {
            // No new user message is needed: the answers are the input.
            let body = json!({ "threadId": "t", "messages": [], "resume": resume });
            assert_eq!(read(body), Ok(Some(expected)), "{resume}");
        }
        let refusals = [
            (json!([]), "resume must be a list"),
            (json!({ "interruptId": "c1" }), "resume must be a list"),
            (json!([{ "status": "resolved" }]), "a resume entry needs its interruptId"),
            (json!([{ "interruptId": "c1", "status": "maybe" }]), "a resume entry's status"),
            (
                json!([{ "interruptId": "c1", "status": "resolved", "payload": { "approved": "yes" } }]),
                "payload.approved must be true or false",
            ),
        ];
        for (resume, expected) in refusals {
            let body = json!({ "threadId": "t", "messages": [], "resume": resume });
            let error = read(body).unwrap_err();
            assert!(error.starts_with(expected), "{resume}: {error}");
        }
        let plain = json!({ "threadId": "t", "messages": [{ "id": "u", "role": "user", "content": "hi" }] });
        assert_eq!(read(plain), Ok(None));
    }
}
