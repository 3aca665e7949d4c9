//! What the Durable Streams handlers see (built by `crate::state` from the server's state).

use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::service::Service;
use crate::delivery::hub::Hub;
use crate::store::Store;

/// What the handlers see.
#[derive(Clone)]
pub struct DurableState {
    pub store: Arc<dyn Store>,
    pub hub: Arc<Hub>,
    pub service: Arc<Service>,
    pub sse_streams: Arc<Semaphore>,
    pub sse_streams_max: usize,
    pub shutdown: CancellationToken,
}
