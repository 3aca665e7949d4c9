//! What a submitter hands the writer, and what it gets back.

use std::sync::Arc;

use app::AgentEvent;
use tokio::sync::oneshot;

use crate::store::{AppendBatch, StoreError};

/// A request's answer: the committed events, with their seqs, or why nothing was.
pub(super) type Outcome = Result<Vec<AgentEvent>, Arc<StoreError>>;

pub(super) struct WriteRequest {
    pub(super) batch: AppendBatch,
    /// False for the events that close a run after a refusal (they must go in even though an
    /// earlier event of the run was refused).
    pub(super) continues_run: bool,
    pub(super) reply: oneshot::Sender<Outcome>,
}
