//! The client protocols: each a pure mapping from log events to its wire format, plus a thin
//! handler that follows the log ([`crate::delivery`]) and starts runs through the agent's use
//! case ([`crate::agent::start`]).
//!
//! - [`native`]: agentstream's own frames over WebSocket and SSE (the REST API is in
//!   [`crate::http::rest`]).
//! - [`letta`]: Letta's REST and streaming API, for Letta's SDKs.
//!
//! May use: the agent, delivery, the store, and the HTTP layer's error, params and state. A
//! surface never uses another surface, and nothing below `agent/`, `delivery/` or `store/`
//! uses a surface.

pub mod letta;
pub mod native;
