//! Delivery: from a committed batch to every subscriber, in order, exactly once.
//!
//! - [`writer`]: assigns seqs, group-commits, then hands committed batches to the [`hub`].
//! - [`hub`]: per-agent rooms with bounded buffers.
//! - [`subscription`]: "store + hub" as an exactly-once, in-order feed for one subscriber,
//!   recovering from lag.
//!
//! May use: the store. Never the agent, the HTTP layer or a client protocol's surface.

pub mod hub;
pub mod subscription;
pub mod writer;
