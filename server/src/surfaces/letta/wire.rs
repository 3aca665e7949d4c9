//! Letta's wire shapes: the messages, stop reason and usage that its SDK reads, and the names
//! (message ids, stop reasons) our log's events take in them.

use app::{AgentEvent, EventKind};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

/// One Letta message (or token fragment of one). Serializes to Letta's wire shape.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LettaMessage {
    pub id: String,
    pub date: DateTime<Utc>,
    pub otid: Option<String>,
    pub run_id: Option<String>,
    pub step_id: Option<String>,
    pub seq_id: u64,
    #[serde(flatten)]
    pub body: Body,
}

impl LettaMessage {
    /// Its `message_type`.
    pub fn body_type(&self) -> &'static str {
        match &self.body {
            Body::UserMessage { .. } => "user_message",
            Body::ReasoningMessage { .. } => "reasoning_message",
            Body::AssistantMessage { .. } => "assistant_message",
            Body::ToolCallMessage { .. } => "tool_call_message",
            Body::ToolReturnMessage { .. } => "tool_return_message",
            Body::ErrorMessage { .. } => "error_message",
            Body::ApprovalRequestMessage { .. } => "approval_request_message",
            Body::ApprovalResponseMessage { .. } => "approval_response_message",
        }
    }
}

/// The part of a message that depends on its `message_type`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "message_type", rename_all = "snake_case")]
pub enum Body {
    UserMessage {
        content: String,
    },
    ReasoningMessage {
        reasoning: String,
        signature: Option<String>,
        source: &'static str,
    },
    AssistantMessage {
        content: String,
    },
    ToolCallMessage {
        tool_call: ToolCallPart,
    },
    ToolReturnMessage {
        tool_return: String,
        status: &'static str,
        tool_call_id: String,
        name: String,
    },
    ErrorMessage {
        error_type: String,
        message: String,
    },
    /// A tool call waits for a person (the run then stops with `requires_approval`).
    ApprovalRequestMessage {
        tool_call: ToolCallPart,
        tool_calls: Vec<ToolCallPart>,
    },
    /// A person's answer, in both of Letta's forms: the deprecated single fields and the list.
    ApprovalResponseMessage {
        approve: bool,
        approval_request_id: Option<String>,
        reason: Option<String>,
        approvals: Vec<ApprovalReturn>,
    },
}

/// One answer of an `approval_response_message`'s `approvals`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ApprovalReturn {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub tool_call_id: String,
    pub approve: bool,
    pub reason: Option<String>,
}

/// `tool_call` of a `tool_call_message`. In token fragments after the first, `name` is null and
/// `arguments` is the next piece of the JSON input.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolCallPart {
    pub name: Option<String>,
    pub arguments: String,
    pub tool_call_id: String,
}

/// Letta's `usage_statistics`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct UsageStatistics {
    pub message_type: &'static str,
    /// The run's end event (not sent: Letta's usage carries no cursor).
    #[serde(skip)]
    pub seq_id: u64,
    pub completion_tokens: u64,
    pub prompt_tokens: u64,
    pub total_tokens: u64,
    pub step_count: u64,
}

/// What the mapper emits: messages, and at a run's end its stop reason and usage.
#[derive(Clone, Debug, PartialEq)]
pub enum LettaItem {
    Message(LettaMessage),
    StopReason { stop_reason: &'static str, seq_id: u64 },
    Usage(UsageStatistics),
}

impl LettaItem {
    /// The item as the JSON of one SSE `data:` line.
    pub fn to_json(&self) -> Value {
        match self {
            LettaItem::Message(message) => {
                serde_json::to_value(message).expect("messages serialize")
            }
            LettaItem::StopReason { stop_reason, .. } => {
                serde_json::json!({ "message_type": "stop_reason", "stop_reason": stop_reason })
            }
            LettaItem::Usage(usage) => serde_json::to_value(usage).expect("usage serializes"),
        }
    }

    /// The log seq this item stands for; a resume skips items at or below its cursor.
    pub fn seq_id(&self) -> u64 {
        match self {
            LettaItem::Message(message) => message.seq_id,
            LettaItem::StopReason { seq_id, .. } => *seq_id,
            // Clients resume from the last message's seq_id: the run's end is after it.
            LettaItem::Usage(usage) => usage.seq_id,
        }
    }
}

/// Letta's `message-…` id of one of our logical messages.
pub fn message_id(id: Uuid) -> String {
    format!("message-{id}")
}

/// Letta's stop reason for the event that ended a run.
pub fn stop_reason(end: &AgentEvent) -> &'static str {
    let ours = end.content.get("stop_reason").and_then(Value::as_str).unwrap_or("");
    match end.kind {
        EventKind::RunCancelled => "cancelled",
        EventKind::RunFailed => match end.content.pointer("/error/type").and_then(Value::as_str) {
            Some("interrupted") => "error",
            _ => "llm_api_error",
        },
        _ => match ours {
            "max_iterations" => "max_steps",
            // Our own `max_events` (the run hit its event limit) is the nearest Letta has.
            "max_tokens" | "length" | "max_events" => "max_tokens_exceeded",
            // Letta's client tools wait as approvals do.
            "requires_approval" | "requires_client_tool" => "requires_approval",
            _ => "end_turn",
        },
    }
}
