//! One subscriber following one agent's log: catch-up from the store, then live from the hub,
//! with no gap and no duplicate at the seam, and recovery from the store after a lag.
//!
//! The rule on every live batch (as in centrifuge's recovery): events at or below the last
//! delivered seq are already seen and skipped; a first seq beyond `last + 1` is a gap, filled from
//! the store before the batch is delivered. Because the hub receiver exists before the store is
//! first read, every event committed after that moment is either in the read or in the receiver.

mod catch_up;
mod coalesce;
mod follow;
mod outbound;

pub use catch_up::{
    FollowError, CATCHUP_READS_AT_ONCE, CATCHUP_READ_RETRIES_MAX, CATCHUP_RETRY_DELAY_INITIAL_MS,
    CATCHUP_RETRY_DELAY_MAX_MS,
};
pub use coalesce::{coalesce_json, coalesce_waiting, COALESCED_FRAME_EVENTS_MAX};
pub use follow::follow;
pub use outbound::{events_frame, Form, Outbound, OUTBOUND_DRAIN_MESSAGES_MAX};
