//! The agent: runs — one user turn and everything the agent does for it.
//!
//! A run is a task that asks the provider for a reply and writes what comes back to the log
//! through the writer: `run_started`, the user's message, the thinking and text deltas, tool
//! calls and their results, usage, and exactly one of `run_completed` / `run_failed` /
//! `run_cancelled`. The outcome is in the log, so a client that reconnects learns it from
//! history alone.
//!
//! - [`registry`]: which agent runs what; starting and cancelling runs.
//! - `run`: the agent loop and the run's writing side (pipelining, the event limit).
//! - `call`: one LLM call as I/O around the pure step assembler, `step`.
//! - `tools`: running a step's tool calls, one result per call.
//! - [`approval`]: tool calls that wait for a person: the request ends the run, the answer
//!   starts the next.
//! - [`client_tools`]: tools the client runs; their calls wait in the log like approvals.
//! - `failure`: ending a run whose events the log refused; [`recovery`]: ending the runs a
//!   crash left in flight.
//! - [`start`]: starting a run — the use case every surface calls.
//! - [`produce`]: runs an external producer writes (the producer API): fenced, checked, held
//!   to the same rules.
//! - [`branch`]: where a conversation may fork, and which branch its clients follow.
//! - [`history`]: the log folded (with snapshots); [`conversation`]: the next turn's prompt
//!   rebuilt from it.
//!
//! May use: the store, the writer ([`crate::delivery::writer`]), providers and tools. Never the
//! HTTP layer or a client protocol's surface: every surface calls in here, not the other way.

pub mod approval;
pub mod approval_timeout;
pub mod branch;
mod call;
pub mod cancel;
pub mod client_tools;
pub mod conversation;
mod failure;
pub mod history;
pub mod produce;
pub mod recovery;
pub mod registry;
mod run;
pub mod start;
pub mod start_error;
mod step;
mod tools;

pub use registry::{
    Cancelling, Drained, Providers, RunLimits, RunOptions, Runs, StartRunError, Turn,
    ACTIVE_RUNS_MAX, RUN_ENDING_WAIT_MS_MAX, RUN_INTERRUPT_WAIT_MS_MAX,
};
pub use run::RUN_APPENDS_IN_FLIGHT_MAX;
pub use step::{
    PROVIDER_RETRIES_MAX, PROVIDER_RETRY_DELAY_INITIAL_MS, PROVIDER_RETRY_DELAY_MAX_MS,
};
