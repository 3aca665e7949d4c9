//! The Responses API's shapes: ids, the request fields a response echoes, the Response object,
//! and errors as `{"error": {message, type, param, code}}`. Pure.
//!
//! Ids name what the log holds, so a client's echo of an item finds its event again: a response
//! is a run (`resp_<run id>`), and an output item is named by the first event of what it shows
//! (`msg_`, `rs_`, `fc_`, `tc_` + that event's id) — the same every time the log is read.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::http::error::ApiError;

/// The id of the response that run `run_id` is.
pub fn response_id(run_id: Uuid) -> String {
    format!("resp_{}", run_id.simple())
}

/// The run a response id names; `None` for anything that is not one of ours.
pub fn run_of(response_id: &str) -> Option<Uuid> {
    parse_prefixed(response_id, "resp_")
}

/// An output item's id: `prefix` + the id of the event it begins with.
pub fn item_id(prefix: &str, event_id: Uuid) -> String {
    format!("{prefix}{}", event_id.simple())
}

/// The event an item id of ours names (`msg_`, `rs_`, `fc_`, `tc_`, `fco_` + 32 hex digits).
pub fn event_of_item(id: &str) -> Option<Uuid> {
    ["msg_", "rs_", "fc_", "tc_", "fco_"].iter().find_map(|prefix| parse_prefixed(id, prefix))
}

fn parse_prefixed(id: &str, prefix: &str) -> Option<Uuid> {
    let hex = id.strip_prefix(prefix)?;
    if hex.len() != 32 || !hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return None;
    }
    Uuid::try_parse(hex).ok()
}

/// What a response echoes of the request that made it, kept in its run's `run_started`
/// (`metadata.client.responses`), so the Response object is a function of the log alone.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Echo {
    pub model: String,
    pub instructions: Option<String>,
    pub tools: Vec<Value>,
    pub tool_choice: Value,
    pub metadata: Value,
    pub background: bool,
    pub store: bool,
    pub previous_response_id: Option<String>,
    pub max_output_tokens: Option<u64>,
    pub parallel_tool_calls: bool,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub reasoning: Value,
    pub text: Value,
    pub truncation: Value,
}

/// The field of `run_started`'s `metadata.client` the echo is kept in.
pub const ECHO_FIELD: &str = "responses";

impl Echo {
    /// The echo a run's `run_started` keeps; a run started elsewhere (the native API, another
    /// surface) gets defaults.
    pub fn of_started(metadata: &Value) -> Echo {
        metadata
            .pointer(&format!("/client/{ECHO_FIELD}"))
            .and_then(|echo| serde_json::from_value(echo.clone()).ok())
            .unwrap_or_else(|| Echo {
                model: "agentstream".to_owned(),
                store: true,
                parallel_tool_calls: true,
                ..Echo::default()
            })
    }
}

/// A response's state, as the Response object says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Queued,
    InProgress,
    Completed,
    Failed,
    Incomplete,
    Cancelled,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Queued => "queued",
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Incomplete => "incomplete",
            Status::Cancelled => "cancelled",
        }
    }
}

/// Everything of a Response object but its output, usage and outcome: fixed at the run's
/// start.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Head {
    pub run_id: Uuid,
    pub agent_id: Uuid,
    /// Unix seconds of `run_started`.
    pub created_at: i64,
    pub echo: Echo,
}

/// How a response stands: what the Response object says besides its head.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome<'a> {
    pub status: Status,
    pub output: &'a [Value],
    pub usage: Option<&'a Value>,
    pub error: Option<&'a Value>,
    pub incomplete_reason: Option<&'a str>,
    /// Unix seconds of the run's end, once it ended.
    pub completed_at: Option<i64>,
}

/// The Response object.
pub fn response_object(head: &Head, outcome: &Outcome) -> Value {
    let echo = &head.echo;
    let or = |value: &Value, default: Value| {
        if value.is_null() {
            default
        } else {
            value.clone()
        }
    };
    json!({
        "id": response_id(head.run_id),
        "object": "response",
        "created_at": head.created_at,
        "status": outcome.status.name(),
        "background": echo.background,
        "completed_at": outcome.completed_at,
        "error": outcome.error,
        "incomplete_details": outcome.incomplete_reason.map(|reason| json!({ "reason": reason })),
        "instructions": echo.instructions,
        "max_output_tokens": echo.max_output_tokens,
        "metadata": or(&echo.metadata, json!({})),
        "model": echo.model,
        "output": outcome.output,
        "parallel_tool_calls": echo.parallel_tool_calls,
        "previous_response_id": echo.previous_response_id,
        "reasoning": or(&echo.reasoning, json!({ "effort": null, "summary": null })),
        "store": echo.store,
        "temperature": echo.temperature.unwrap_or(1.0),
        "text": or(&echo.text, json!({ "format": { "type": "text" } })),
        "tool_choice": or(&echo.tool_choice, json!("auto")),
        "tools": echo.tools,
        "top_p": echo.top_p.unwrap_or(1.0),
        "truncation": or(&echo.truncation, json!("disabled")),
        "usage": outcome.usage.map(usage_object),
        "user": null,
        "agentstream": { "agent_id": head.agent_id, "run_id": head.run_id },
    })
}

/// Our usage (`input_tokens`, `output_tokens`) as the Responses API counts it.
fn usage_object(usage: &Value) -> Value {
    let count = |field: &str| usage.get(field).and_then(Value::as_u64).unwrap_or(0);
    let (input, output) = (count("input_tokens"), count("output_tokens"));
    json!({
        "input_tokens": input,
        "input_tokens_details": { "cached_tokens": 0 },
        "output_tokens": output,
        "output_tokens_details": { "reasoning_tokens": 0 },
        "total_tokens": input + output,
    })
}

/// An error as the Responses API answers it. The SDKs retry 408, 409, 429 and 5xx unless told
/// not to: a refusal that a retry cannot change says `x-should-retry: false`.
#[derive(Debug)]
pub struct ResponsesError(pub ApiError);

impl From<ApiError> for ResponsesError {
    fn from(error: ApiError) -> ResponsesError {
        ResponsesError(error)
    }
}

impl From<crate::store::StoreError> for ResponsesError {
    fn from(error: crate::store::StoreError) -> ResponsesError {
        ResponsesError(error.into())
    }
}

impl From<crate::agent::start::StartError> for ResponsesError {
    fn from(error: crate::agent::start::StartError) -> ResponsesError {
        ResponsesError(error.into())
    }
}

impl IntoResponse for ResponsesError {
    fn into_response(self) -> Response {
        let ApiError { status, code, message } = self.0;
        let kind = match status {
            StatusCode::UNAUTHORIZED => "authentication_error",
            StatusCode::FORBIDDEN => "permission_error",
            StatusCode::NOT_FOUND => "not_found_error",
            StatusCode::CONFLICT => "conflict_error",
            StatusCode::TOO_MANY_REQUESTS => "rate_limit_error",
            status if status.is_server_error() => "server_error",
            _ => "invalid_request_error",
        };
        let body = json!({
            "error": { "message": message, "type": kind, "param": null, "code": code },
        });
        let mut response = (status, axum::Json(body)).into_response();
        // A conflict (an answer given twice, a run in the way) stays one whatever the retry.
        if status == StatusCode::CONFLICT {
            response.headers_mut().insert("x-should-retry", HeaderValue::from_static("false"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_back_and_nothing_else_does() {
        let run = Uuid::now_v7();
        assert_eq!(run_of(&response_id(run)), Some(run));
        for prefix in ["msg_", "rs_", "fc_", "tc_", "fco_"] {
            assert_eq!(event_of_item(&item_id(prefix, run)), Some(run), "{prefix}");
        }
        let hex = run.simple().to_string();
        for bad in [
            String::new(),
            "resp_".into(),
            format!("resp_{}", &hex[1..]),
            format!("resp_{hex}0"),
            format!("resp_{}", hex.replace(|_: char| true, "g")),
            format!("resp-{hex}"),
            format!("resp_{}", run.hyphenated()),
        ] {
            assert_eq!(run_of(&bad), None, "{bad:?}");
        }
        assert_eq!(event_of_item(&format!("call_{hex}")), None);
    }

    #[test]
    fn a_response_object_has_every_field_the_sdks_require() {
        let head = Head {
            run_id: Uuid::from_u128(7),
            agent_id: Uuid::from_u128(8),
            created_at: 1_700_000_000,
            echo: Echo::of_started(&json!({})),
        };
        let outcome = Outcome {
            status: Status::Completed,
            output: &[],
            usage: Some(&json!({ "input_tokens": 3, "output_tokens": 4 })),
            error: None,
            incomplete_reason: None,
            completed_at: Some(1_700_000_001),
        };
        let object = response_object(&head, &outcome);
        for field in [
            "id",
            "object",
            "created_at",
            "status",
            "error",
            "incomplete_details",
            "instructions",
            "metadata",
            "model",
            "output",
            "parallel_tool_calls",
            "temperature",
            "tool_choice",
            "tools",
            "top_p",
        ] {
            assert!(object.get(field).is_some(), "{field}");
        }
        assert_eq!(object["usage"]["total_tokens"], 7);
        assert_eq!(object["model"], "agentstream");
        assert_eq!(object["status"], "completed");
    }
}
