//! What Letta's handlers use of the server (built by `crate::state` from the server's state).

use std::sync::Arc;
use std::time::Duration;

use crate::agent::start::Starter;
use crate::agent::Runs;
use crate::delivery::hub::Hub;
use crate::store::Store;

/// What Letta's handlers use of the server: the log, the live rooms, the runs and how to start
/// one, and the ping interval of streams that ask for pings.
#[derive(Clone)]
pub struct LettaState {
    pub store: Arc<dyn Store>,
    pub hub: Arc<Hub>,
    pub runs: Arc<Runs>,
    pub starter: Starter,
    pub ping_interval: Duration,
    /// Cancelled when the server shuts down: open streams end (their runs go on).
    pub shutdown: tokio_util::sync::CancellationToken,
    /// Slots for open streams (shared with the native SSE stream), and how many there are.
    pub sse_streams: Arc<tokio::sync::Semaphore>,
    pub sse_streams_max: usize,
}
