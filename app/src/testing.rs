//! Event builders for tests, here and in the server's: one convention for the ids a test's
//! log uses, so a test names only what it is about.

use serde_json::Value;
use uuid::Uuid;

use crate::{AgentEvent, EventKind};

/// The agent every builder's event belongs to.
pub const AGENT: Uuid = Uuid::from_u128(1);
/// The run every builder's event belongs to.
pub const RUN: Uuid = Uuid::from_u128(2);

/// The event at `seq` of agent [`AGENT`]'s run [`RUN`]: id `1000 + seq`, message `seq`.
pub fn event(seq: u64, kind: EventKind, content: Value) -> AgentEvent {
    AgentEvent {
        run_id: Some(RUN),
        message_id: Some(Uuid::from_u128(seq as u128)),
        ..AgentEvent::bare(Uuid::from_u128(1000 + seq as u128), AGENT, seq, kind, content)
    }
}
