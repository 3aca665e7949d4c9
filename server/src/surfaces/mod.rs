//! The client protocols: each a pure mapping from log events to its wire format, plus a thin
//! handler that follows the log ([`crate::delivery`]) and starts runs through the agent's use
//! case ([`crate::agent::start`]).
//!
//! - [`native`]: agentstream's own frames over WebSocket and SSE (the REST API is in
//!   [`crate::http::rest`]).
//! - [`letta`]: Letta's REST and streaming API, for Letta's SDKs.
//! - [`ai_sdk`]: the AI SDK's UI message stream, for `useChat`, with resume, stop and history.
//! - [`ag_ui`]: AG-UI, for `@ag-ui/client` and CopilotKit, with connect and cursor resume.
//! - [`responses`]: the OpenAI Responses API, for the `openai` SDKs and the OpenAI Agents SDK,
//!   with background runs, resume by sequence number, cancel and the caller's function tools.
//! - [`durable`]: the Durable Streams protocol: general streams in the log engine, and every
//!   agent's log as a read-only stream.
//! - [`chat`]: chat and thread ids naming conversations (shared).
//! - [`steps`]: where a run's model calls begin and end (shared by the stream mappings and
//!   their history views).
//! - [`run_feed`]: following one run through the log into a surface's mapping (shared).
//!
//! One shape per surface, the same file names in each folder, so that the next surface is a
//! copy of a folder:
//! - `mod.rs`: the routes' handlers, thin: read the request, call the use case, answer.
//! - `request.rs`: what clients send, parsed and checked; pure, every refusal says what was wrong.
//! - `mapping.rs`: the log's events as the protocol's wire events, live; pure and stateful.
//! - `history.rs`: the conversation as the protocol's history view, from the folded log; pure.
//! - `stream.rs`: following a run into the mapping and framing it (SSE), the I/O.
//! - `verify.rs`: the protocol's own rules checked on what the mapping sends (tests, fuzzing).
//! - `state.rs`: the part of the server's state the surface reads, where it needs its own (AG-UI
//!   and the AI SDK share `chat.rs`'s `ChatState`).
//!
//! Letta keeps its wire shapes in `wire.rs` and its history in `mapping.rs` (one mapping serves
//! both); the AI SDK adds `inbound.rs` (its stream into the log) and `produce.rs`. Durable
//! Streams is a log engine rather than a view, with its own layout (`durable/mod.rs`); the
//! native surface is the log itself and needs no mapping.
//!
//! May use: the agent, delivery, the store, and the HTTP layer's error, params and state. A
//! surface never uses another surface, and nothing below `agent/`, `delivery/` or `store/`
//! uses a surface.

pub mod ag_ui;
pub mod ai_sdk;
pub mod chat;
pub mod durable;
pub mod letta;
pub mod native;
pub mod responses;
pub mod run_feed;
pub mod steps;
#[cfg(test)]
mod test_log;

/// A stream's rule checks (`verify.rs`): a stream says it finished exactly when it ended.
pub fn finished_as_ended(finished: bool, ended: bool) -> Result<(), String> {
    match finished == ended {
        true => Ok(()),
        false => Err(format!("finished: {finished}, but the stream ended: {ended}")),
    }
}

/// A slot for one more open stream, or the 503 that says there is none.
pub fn stream_slot(
    streams: &std::sync::Arc<tokio::sync::Semaphore>,
    streams_max: usize,
) -> Result<tokio::sync::OwnedSemaphorePermit, crate::http::error::ApiError> {
    streams.clone().try_acquire_owned().map_err(|_| {
        crate::http::error::ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "too_many_streams",
            format!("{streams_max} streams are open; try again shortly"),
        )
    })
}

/// What a live stream of the log needs: the store to catch up from, the hub to follow, the
/// shutdown to let go at, and the per-subscriber bounds.
#[derive(Clone)]
pub struct Feeds {
    pub store: std::sync::Arc<dyn crate::store::Store>,
    pub hub: std::sync::Arc<crate::delivery::hub::Hub>,
    pub shutdown: tokio_util::sync::CancellationToken,
    pub limits: std::sync::Arc<crate::limits::Limits>,
    /// Slots for open SSE streams.
    pub sse_streams: std::sync::Arc<tokio::sync::Semaphore>,
    /// Subscribers are counted by surface.
    pub metrics: std::sync::Arc<crate::metrics::Metrics>,
}
