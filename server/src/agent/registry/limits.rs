//! A run's bounds (across all agents, per run, per event) and why a start is refused.

use crate::limits::TOOL_RESULT_CHARS_MAX;
use crate::limits::{RUN_BYTES_MAX_DEFAULT, RUN_EVENTS_MAX_DEFAULT};
use uuid::Uuid;

/// Runs in flight across all agents. Each holds a provider stream and a task; past this, new runs
/// are refused with 503 rather than degrade every run already going.
pub const ACTIVE_RUNS_MAX: usize = 256;

/// The per-run bounds of `crate::limits::Limits`.
#[derive(Clone, Copy, Debug)]
pub struct RunLimits {
    /// Past this, the run stops its model and tools and ends with stop reason `max_events`; the
    /// events that close it (results for open tool calls, the end) are still written.
    pub events_max: u64,
    /// The same in bytes (stop reason `max_bytes`), and an event past [`EVENT_BYTES_MAX`].
    pub bytes_max: u64,
    pub tool_result_chars_max: usize,
}

impl Default for RunLimits {
    fn default() -> RunLimits {
        RunLimits {
            bytes_max: RUN_BYTES_MAX_DEFAULT,
            events_max: RUN_EVENTS_MAX_DEFAULT,
            tool_result_chars_max: TOOL_RESULT_CHARS_MAX,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartRunError {
    #[error("provider {0:?} is not configured on this server ({hint}; available: {1})", hint = provider_settings(.0))]
    UnknownProvider(String, String),
    /// A model the server's default provider (the scripted one) cannot serve.
    #[error("model {0:?} needs a real provider, and this server runs only the scripted one: set ANTHROPIC_API_KEY or OPENAI_API_KEY and name it (\"anthropic/…\", \"openai/…\"), or leave the model out")]
    ModelNotServed(String),
    #[error("agent {agent_id} is already running run {run_id}")]
    RunInProgress { agent_id: Uuid, run_id: Uuid },
    #[error("{ACTIVE_RUNS_MAX} runs are in progress; try again shortly")]
    TooManyRuns,
}

/// What to set for a provider that is not configured.
pub fn provider_settings(name: &str) -> &'static str {
    match name {
        "anthropic" => "set ANTHROPIC_API_KEY",
        "openai" => "set OPENAI_API_KEY (or OPENAI_BASE_URL for an OpenAI-compatible server)",
        "claude-cli" => "set AGENTSTREAM_CLAUDE_CLI to the claude command",
        _ => "the providers are scripted, anthropic, openai and claude-cli",
    }
}
