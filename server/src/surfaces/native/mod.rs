//! agentstream's own wire: frames of committed events (and control messages) over a WebSocket
//! (many agents per connection, subscribe/unsubscribe) or SSE (one agent per stream). The
//! frames are the subscription's messages serialized as they are
//! ([`crate::delivery::subscription::Outbound::frame`]).

mod follow;
pub mod sse;
pub mod ws;
