//! The writer: save first, emit second.
//!
//! Every event goes through one task that assigns seqs (in the database transaction), commits,
//! and only then hands the committed batch to the hub. When several requests are waiting, they
//! are committed together in one transaction (group commit), up to [`WRITER_BATCH_EVENTS_MAX`]
//! events; one fsync then covers many tokens. SQLite allows one writer at a time, so one task
//! for all agents loses nothing, and it keeps per-agent order trivially: requests of one agent are
//! committed, published and acknowledged in the order they were submitted.

pub use committer::WRITER_BATCH_EVENTS_MAX;
use committer::{Committer, Flight};
pub use refusals::REFUSED_RUNS_REMEMBERED_MAX;
pub use retry::{RECONCILE_ATTEMPTS_MAX, WRITER_RETRY_DELAY_INITIAL_MS, WRITER_RETRY_DELAY_MAX_MS};
use std::sync::Arc;

use app::AgentEvent;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::delivery::hub::Hub;
use crate::limits::WRITER_COMMIT_RETRIES_MAX_DEFAULT;
use crate::metrics::Metrics;
use crate::store::pipeline::Piped;
use crate::store::{AppendBatch, EventDraft, EventLog, ProducerStamp, StoreError};
use observed::Observed;

mod committer;
mod observed;
mod refusals;
mod request;
mod retry;

use request::WriteRequest;

/// Requests waiting for the writer. A producer that finds the queue full waits: that is the
/// database's back-pressure, which is the one a producer should feel (never a subscriber's).
pub const WRITER_QUEUE_REQUESTS_MAX: usize = 4096;
/// Why an append did not commit.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the writer has stopped")]
    WriterStopped,
}

/// The acknowledgement of one submitted request: the committed events, with their seqs.
pub type AppendReceipt = oneshot::Receiver<Result<Vec<AgentEvent>, Arc<StoreError>>>;

/// A handle to the writer task. Cheap to clone.
#[derive(Clone)]
pub struct Writer {
    sender: mpsc::Sender<WriteRequest>,
    metrics: Arc<Metrics>,
}

impl Writer {
    /// Starts the writer task. It runs until every `Writer` handle is dropped, committing what is
    /// still queued before it stops.
    pub fn spawn(store: Arc<dyn EventLog>, hub: Arc<Hub>) -> Writer {
        Writer::spawn_with(store, hub, WRITER_COMMIT_RETRIES_MAX_DEFAULT)
    }

    /// [`Writer::spawn`] with another retry budget (see [`WRITER_COMMIT_RETRIES_MAX_DEFAULT`]).
    /// Counts nothing (the benchmark measures the cost of counting against it).
    pub fn spawn_with(store: Arc<dyn EventLog>, hub: Arc<Hub>, commit_retries_max: u32) -> Writer {
        Writer::start(store, hub, commit_retries_max, Arc::new(Metrics::new()), false)
    }

    /// [`Writer::spawn_with`], counting into the server's `metrics` (commits, events, store
    /// errors, and runs as their events commit).
    pub fn spawn_observed(
        store: Arc<dyn EventLog>,
        hub: Arc<Hub>,
        commit_retries_max: u32,
        metrics: Arc<Metrics>,
    ) -> Writer {
        Writer::start(store, hub, commit_retries_max, metrics, true)
    }

    fn start(
        store: Arc<dyn EventLog>,
        hub: Arc<Hub>,
        commit_retries_max: u32,
        metrics: Arc<Metrics>,
        counting: bool,
    ) -> Writer {
        let (sender, receiver) = mpsc::channel(WRITER_QUEUE_REQUESTS_MAX);
        let observed = Observed::new(metrics.clone(), counting);
        tokio::spawn(run(store, hub, receiver, commit_retries_max, observed));
        Writer { sender, metrics }
    }

    /// What the server counts (shared by everything that writes through this writer).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Requests waiting in the queue now.
    pub fn queued_requests(&self) -> usize {
        self.sender.max_capacity() - self.sender.capacity()
    }

    /// Whether the writer task is still taking requests (it stops only when it panicked or
    /// every handle is gone).
    pub fn is_running(&self) -> bool {
        !self.sender.is_closed()
    }

    /// Queues `drafts` for `agent_id` and returns without waiting for the commit. Requests of one
    /// caller commit in the order they were submitted; await the receipt to learn the seqs.
    pub async fn submit(&self, agent_id: Uuid, drafts: Vec<EventDraft>) -> Submitted {
        self.send(agent_id, drafts, true, None).await
    }

    /// Like [`Writer::submit`], for the events that end a run after one of its events was
    /// refused (see [`REFUSED_RUNS_REMEMBERED_MAX`]).
    pub async fn submit_closing(&self, agent_id: Uuid, drafts: Vec<EventDraft>) -> Submitted {
        self.send(agent_id, drafts, false, None).await
    }

    async fn send(
        &self,
        agent_id: Uuid,
        drafts: Vec<EventDraft>,
        continues_run: bool,
        producer: Option<ProducerStamp>,
    ) -> Submitted {
        let (reply, receipt) = oneshot::channel();
        let request = WriteRequest {
            batch: AppendBatch { agent_id, drafts, producer },
            continues_run,
            reply,
        };
        self.sender.send(request).await.map_err(|_| AppendError::WriterStopped)?;
        Ok(receipt)
    }

    /// Waits until every request submitted before this call has committed or been refused: a
    /// read of the log after it sees them. (An empty request, which never reaches the store.)
    pub async fn barrier(&self) -> Result<(), AppendError> {
        let receipt = self.send(Uuid::nil(), Vec::new(), false, None).await?;
        wait(receipt).await.map(|_| ())
    }

    /// Appends closing events and waits for the commit.
    pub async fn append_closing(&self, agent_id: Uuid, drafts: Vec<EventDraft>) -> Appended {
        let receipt = self.submit_closing(agent_id, drafts).await?;
        wait(receipt).await
    }

    /// Appends an external producer's batch with its position (`producer`), committed in the
    /// same transaction, and waits for the commit. `closing`: events that end the producer's run
    /// without it (its position guards the end as it guards a batch: a producer that moved on
    /// elsewhere wins), taken also after one of the run's events was refused.
    pub async fn append_produced(
        &self,
        agent_id: Uuid,
        drafts: Vec<EventDraft>,
        producer: ProducerStamp,
        closing: bool,
    ) -> Appended {
        let receipt = self.send(agent_id, drafts, !closing, Some(producer)).await?;
        wait(receipt).await
    }

    /// Appends and waits for the commit.
    pub async fn append(&self, agent_id: Uuid, drafts: Vec<EventDraft>) -> Appended {
        let receipt = self.submit(agent_id, drafts).await?;
        wait(receipt).await
    }
}

/// An append's answer: the committed events, or why nothing was.
pub type Appended = Result<Vec<AgentEvent>, AppendError>;

/// A submission's answer: the receipt that resolves at the commit, or why the writer refused.
pub type Submitted = Result<AppendReceipt, AppendError>;

/// Waits for a receipt.
pub async fn wait(receipt: AppendReceipt) -> Appended {
    match receipt.await {
        Ok(Ok(events)) => Ok(events),
        Ok(Err(error)) => Err(AppendError::Store(match Arc::try_unwrap(error) {
            Ok(error) => error,
            Err(shared) => StoreError::Corrupt(shared.to_string()),
        })),
        Err(_) => Err(AppendError::WriterStopped),
    }
}

/// What the writer's loop waits for next.
enum Next {
    Request(Option<WriteRequest>),
    Answer(Result<Piped, oneshot::error::RecvError>),
}

async fn run(
    store: Arc<dyn EventLog>,
    hub: Arc<Hub>,
    mut receiver: mpsc::Receiver<WriteRequest>,
    retries_max: u32,
    observed: Observed,
) {
    let mut committer = Committer::new(store, hub, retries_max, observed);
    // The group sent and not landed yet (see `crate::store::pipeline`).
    let mut flight: Option<Flight> = None;
    loop {
        let next = match flight.as_mut() {
            None => Next::Request(receiver.recv().await),
            // A request that comes while a group commits is taken first: the group it starts
            // goes to the store before that one's answer is handled, so the store never waits
            // for the writer between the two.
            Some(sent) => tokio::select! {
                biased;
                request = receiver.recv() => Next::Request(request),
                answer = &mut sent.receipt => Next::Answer(answer),
            },
        };
        match next {
            Next::Request(Some(first)) => {
                let group = committer.take(first, &mut receiver);
                flight = committer.send(group, flight.take()).await;
            }
            Next::Request(None) => break,
            Next::Answer(answer) => {
                if let Some(sent) = flight.take() {
                    // Nothing was sent behind it: how it went changes nothing here.
                    let _ = committer.land(sent, answer).await;
                }
            }
        }
    }
    if let Some(sent) = flight {
        let _ = committer.land_when_answered(sent).await;
    }
}

#[cfg(test)]
mod tests;
