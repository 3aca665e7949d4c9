//! Providers: where an agent's words come from.
//!
//! A provider turns a request (system prompt, the conversation so far, the tools on offer) into a
//! stream of [`ProviderEvent`]s; the agent loop ([`crate::agent`]) turns those into `AgentEvent`
//! drafts for the writer, runs the tools the model asks for, and calls the provider again. Today
//! there is the built-in scripted provider, the offline default.

pub mod anthropic;
pub mod claude_cli;
pub mod http;
pub mod openai;
pub mod scripted;

use futures::stream::BoxStream;
use serde_json::Value;

/// A tool the model may call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the input object.
    pub input_schema: Value,
}

/// A tool call as the model made it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The provider's id for the call (`toolu_…`, `call_…`); results refer to it.
    pub id: String,
    pub name: String,
    pub input: Value,
}

/// A step's thinking as the provider must get it back (Anthropic refuses a tool loop's
/// follow-up whose last assistant turn does not start with its signed thinking, unchanged).
#[derive(Clone, Debug, PartialEq)]
pub enum ThinkingBlock {
    Signed {
        thinking: String,
        signature: String,
    },
    /// Thinking the provider's safety systems encrypted: passed back as it came.
    Redacted {
        data: String,
    },
}

/// One message of the conversation handed to the provider.
#[derive(Clone, Debug, PartialEq)]
pub enum ConversationMessage {
    User {
        text: String,
    },
    Assistant {
        text: String,
        tool_calls: Vec<ToolCall>,
        /// The step's signed (or redacted) thinking, before its text and calls; empty for
        /// providers without signed thinking.
        thinking: Vec<ThinkingBlock>,
    },
    ToolResult {
        tool_call_id: String,
        content: String,
        is_error: bool,
    },
}

/// What the agent loop asks a provider for.
#[derive(Clone, Debug)]
pub struct ProviderRequest {
    pub system: Option<String>,
    pub model: Option<String>,
    pub messages: Vec<ConversationMessage>,
    pub tools: Vec<ToolSpec>,
    /// Extended thinking's budget (Anthropic `thinking.budget_tokens`), from the agent's
    /// `metadata.thinking_budget_tokens`; `None`: no extended thinking asked for.
    pub thinking_budget_tokens: Option<u32>,
}

impl ProviderRequest {
    /// The newest user message, if any.
    pub fn last_user_text(&self) -> Option<&str> {
        self.messages.iter().rev().find_map(|message| match message {
            ConversationMessage::User { text } => Some(text.as_str()),
            _ => None,
        })
    }
}

/// One step of a provider's output, already parsed from its wire format.
#[derive(Clone, Debug, PartialEq)]
pub enum ProviderEvent {
    ThinkingDelta(String),
    /// The signature that authenticates the thinking of this step (Anthropic).
    ThinkingSignature(String),
    /// A thinking block the provider encrypted (Anthropic `redacted_thinking`): its data, to be
    /// passed back unchanged.
    RedactedThinking(String),
    TextDelta(String),
    /// A tool call begins; its input follows as JSON text pieces.
    ToolCallStart {
        id: String,
        name: String,
    },
    /// A piece of the JSON text of a tool call's input.
    ToolCallInputDelta {
        id: String,
        json: String,
    },
    /// The tool call's input is complete. The agent parses the pieces (`agent::step`, the one
    /// place input accumulates); a provider that gets the input whole sends it as one piece.
    ToolCallEnd {
        id: String,
    },
    /// The result of a tool the provider ran itself (the Claude CLI runs its own tools).
    ToolResult {
        id: String,
        content: Value,
        is_error: bool,
    },
    Usage {
        input_tokens: u64,
        output_tokens: u64,
    },
    /// The provider finished this step; `reason` is its stop reason (`end_turn`, `tool_use` …).
    Stop {
        reason: String,
    },
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct ProviderError {
    /// A stable error type (`overloaded_error`, `rate_limit_error` …).
    pub kind: String,
    pub message: String,
    /// Whether trying again later may succeed.
    pub retryable: bool,
    /// How long the provider asked us to wait before trying again (`retry-after`).
    pub retry_after_ms: Option<u64>,
}

impl ProviderError {
    /// A connection that failed or ended early: trying again may work.
    pub fn connection(message: impl Into<String>) -> ProviderError {
        ProviderError {
            kind: "connection_error".to_owned(),
            message: message.into(),
            retryable: true,
            retry_after_ms: None,
        }
    }

    /// A malformed or unexpected stream: not retryable, it would only fail the same way.
    pub fn invalid(message: impl Into<String>) -> ProviderError {
        ProviderError {
            kind: "invalid_response".to_owned(),
            message: message.into(),
            retryable: false,
            retry_after_ms: None,
        }
    }
}

/// What a step streams: provider events, ended by `Stop` or an error.
pub type Events = BoxStream<'static, Result<ProviderEvent, ProviderError>>;

pub trait Provider: Send + Sync + 'static {
    /// The provider's name, recorded in event metadata.
    fn name(&self) -> &'static str;
    /// Starts one step. The stream ends after `Stop` or an error.
    fn stream(&self, request: ProviderRequest) -> Events;
}
