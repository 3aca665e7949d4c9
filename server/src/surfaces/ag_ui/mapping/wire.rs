//! The AG-UI 1.0 event as it goes on the wire: one enum, serialized as the protocol has it, and
//! the merge a replay uses to join consecutive deltas of one message or call.

use serde::Serialize;
use serde_json::Value;

/// One AG-UI event, serialized as the protocol has it (fields that are absent are left out).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE", rename_all_fields = "camelCase")]
pub enum AgUiEvent {
    RunStarted {
        thread_id: String,
        run_id: String,
    },
    RunFinished {
        thread_id: String,
        run_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        outcome: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<Value>,
    },
    RunError {
        message: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<String>,
    },
    StepStarted {
        step_name: String,
    },
    StepFinished {
        step_name: String,
    },
    TextMessageStart {
        message_id: String,
        role: &'static str,
    },
    TextMessageContent {
        message_id: String,
        delta: String,
    },
    TextMessageEnd {
        message_id: String,
    },
    ReasoningStart {
        message_id: String,
    },
    ReasoningMessageStart {
        message_id: String,
        role: &'static str,
    },
    ReasoningMessageContent {
        message_id: String,
        delta: String,
    },
    ReasoningMessageEnd {
        message_id: String,
    },
    ReasoningEnd {
        message_id: String,
    },
    ToolCallStart {
        tool_call_id: String,
        tool_call_name: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_message_id: Option<String>,
    },
    ToolCallArgs {
        tool_call_id: String,
        delta: String,
    },
    ToolCallEnd {
        tool_call_id: String,
    },
    ToolCallResult {
        message_id: String,
        tool_call_id: String,
        content: String,
        role: &'static str,
    },
    MessagesSnapshot {
        messages: Vec<Value>,
    },
}

impl AgUiEvent {
    /// True for deltas that a replay may merge with the one before (same message or call).
    pub fn merge(&mut self, next: &AgUiEvent) -> bool {
        match (self, next) {
            (
                AgUiEvent::TextMessageContent { message_id, delta },
                AgUiEvent::TextMessageContent { message_id: next_id, delta: more },
            )
            | (
                AgUiEvent::ReasoningMessageContent { message_id, delta },
                AgUiEvent::ReasoningMessageContent { message_id: next_id, delta: more },
            )
            | (
                AgUiEvent::ToolCallArgs { tool_call_id: message_id, delta },
                AgUiEvent::ToolCallArgs { tool_call_id: next_id, delta: more },
            ) if message_id == next_id => {
                delta.push_str(more);
                true
            }
            _ => false,
        }
    }
}

/// An AG-UI event and the seq of the log event it came from.
pub type Tagged = (u64, AgUiEvent);
