//! A run's bounds (across all agents, per run, per event) and why a start is refused.

use uuid::Uuid;

use super::providers::provider_settings;
use crate::agent::tools::TOOL_RESULT_CHARS_MAX;

/// Runs in flight across all agents. Each holds a provider stream and a task; past this, new runs
/// are refused with 503 rather than degrade every run already going.
pub const ACTIVE_RUNS_MAX: usize = 256;
/// LLM calls one run makes at most (LLM → tools → LLM …) unless configured otherwise; a model
/// that keeps asking for tools ends with stop reason `max_iterations`.
pub const RUN_ITERATIONS_MAX_DEFAULT: u32 = 10;
/// Events one run may write unless configured otherwise: far beyond any real reply (a 20 000-token
/// answer is about 20 000 events), low enough that a runaway model cannot fill the disk.
pub const RUN_EVENTS_MAX_DEFAULT: u64 = 100_000;

/// Bytes one run may write unless configured otherwise (its events' deltas, contents and raw
/// provider events, as JSON): a long answer with tools is a few megabytes.
pub const RUN_BYTES_MAX_DEFAULT: u64 = 64 * 1024 * 1024;
/// One event larger than this (as JSON) is not written: the run ends as past its byte limit.
/// Every event the server makes from bounded parts is far smaller (a tool result is cut at
/// `TOOL_RESULT_CHARS_MAX`, a call's input at `TOOL_CALL_INPUT_BYTES_MAX`).
pub const EVENT_BYTES_MAX: usize = 1024 * 1024;

/// The per-run bounds of `config::Limits`.
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
