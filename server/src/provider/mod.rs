//! Providers: where an agent's words come from.
//!
//! A provider turns a request into a stream of [`ProviderEvent`]s; the agent loop
//! ([`crate::runs`]) turns those into `AgentEvent` drafts for the writer. Today there is the
//! built-in scripted provider, the offline default.

pub mod scripted;

use futures::stream::BoxStream;

/// What the agent loop asks a provider for.
#[derive(Clone, Debug)]
pub struct ProviderRequest {
    pub system: Option<String>,
    pub model: Option<String>,
    /// The user's message for this turn.
    pub user_message: String,
}

/// One step of a provider's output, already parsed from its wire format.
#[derive(Clone, Debug, PartialEq)]
pub enum ProviderEvent {
    ThinkingDelta(String),
    TextDelta(String),
    Usage {
        input_tokens: u64,
        output_tokens: u64,
    },
    /// The provider finished this turn; `reason` is its stop reason (`end_turn`, `max_tokens` …).
    Stop { reason: String },
}

#[derive(Clone, Debug, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct ProviderError {
    /// A stable error type (`overloaded_error`, `rate_limit_error` …).
    pub kind: String,
    pub message: String,
}

pub trait Provider: Send + Sync + 'static {
    /// The provider's name, recorded in event metadata.
    fn name(&self) -> &'static str;
    /// Starts one turn. The stream ends after `Stop` or an error.
    fn stream(
        &self,
        request: ProviderRequest,
    ) -> BoxStream<'static, Result<ProviderEvent, ProviderError>>;
}
