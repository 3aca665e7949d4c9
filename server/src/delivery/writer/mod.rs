//! The writer: save first, emit second.
//!
//! Every event goes through one task that assigns seqs (in the database transaction), commits,
//! and only then hands the committed batch to the hub. When several requests are waiting, they
//! are committed together in one transaction (group commit), up to [`WRITER_BATCH_EVENTS_MAX`]
//! events; one fsync then covers many tokens. SQLite allows one writer at a time, so one task
//! for all agents loses nothing, and it keeps per-agent order trivially: requests of one agent are
//! committed, published and acknowledged in the order they were submitted.

use retry::{append_retrying, reconcile};
pub use retry::{RECONCILE_ATTEMPTS_MAX, WRITER_RETRY_DELAY_INITIAL_MS, WRITER_RETRY_DELAY_MAX_MS};
use std::sync::Arc;

use app::AgentEvent;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::delivery::hub::Hub;
use crate::limits::WRITER_COMMIT_RETRIES_MAX_DEFAULT;
use crate::metrics::Metrics;
use crate::store::chunk::IdChains;
use crate::store::{AppendBatch, EventDraft, EventLog, ProducerStamp, StoreError};
use observed::Observed;

mod observed;
mod retry;

/// Requests waiting for the writer. A producer that finds the queue full waits: that is the
/// database's back-pressure, which is the one a producer should feel (never a subscriber's).
pub const WRITER_QUEUE_REQUESTS_MAX: usize = 4096;
/// Events committed in one transaction at most. A commit's fixed costs (the `fsync`, and per
/// agent a head bump and a row) are paid per group, so under load a bigger group costs less per
/// event: 512 → 4 096 took the engine bench (100 agents, 64 appends in flight each) from 73–87 to
/// 190–280 thousand events/s (CPU per event 14.3 → 7.7 µs) and 64-message Durable Streams
/// appends from 158 to 246 thousand messages/s (64 connections' POSTs now fit one group). Under
/// such load an event waits for the queue ahead of it, which big groups drain faster (engine
/// p50 60 → 25 ms); at light load groups stay small whatever this is.
pub const WRITER_BATCH_EVENTS_MAX: usize = 4096;

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

struct WriteRequest {
    batch: AppendBatch,
    /// False for the events that close a run after a refusal (they must go in even though an
    /// earlier event of the run was refused).
    continues_run: bool,
    reply: oneshot::Sender<Result<Vec<AgentEvent>, Arc<StoreError>>>,
}

/// What the writer keeps of a request while its batch is being committed.
struct Reply {
    continues_run: bool,
    reply: oneshot::Sender<Result<Vec<AgentEvent>, Arc<StoreError>>>,
}

/// Runs whose events the writer refused, remembered so their later events (already in flight)
/// are refused too: a run's log never has a hole in the middle. Bounded: a forgotten run is long
/// over, and its ids never come again.
pub const REFUSED_RUNS_REMEMBERED_MAX: usize = 1024;

#[derive(Default)]
struct RefusedRuns {
    order: std::collections::VecDeque<Uuid>,
    set: std::collections::HashSet<Uuid>,
}

impl RefusedRuns {
    fn insert(&mut self, run_id: Uuid) {
        if self.set.insert(run_id) {
            self.order.push_back(run_id);
            if self.order.len() > REFUSED_RUNS_REMEMBERED_MAX {
                if let Some(oldest) = self.order.pop_front() {
                    self.set.remove(&oldest);
                }
            }
        }
    }

    fn remove(&mut self, run_id: Uuid) {
        if self.set.remove(&run_id) {
            self.order.retain(|id| *id != run_id);
        }
    }
}

fn behind_a_refusal() -> StoreError {
    StoreError::Unavailable("an earlier event of this run was refused".into())
}

fn run_of(batch: &AppendBatch) -> Option<Uuid> {
    batch.drafts.first().and_then(|draft| draft.run_id)
}

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

async fn run(
    store: Arc<dyn EventLog>,
    hub: Arc<Hub>,
    mut receiver: mpsc::Receiver<WriteRequest>,
    retries_max: u32,
    mut observed: Observed,
) {
    let mut refused = RefusedRuns::default();
    let mut chains = IdChains::default();
    while let Some(first) = receiver.recv().await {
        let mut events_in_batch = first.batch.drafts.len();
        let mut requests = vec![first];
        while events_in_batch < WRITER_BATCH_EVENTS_MAX {
            match receiver.try_recv() {
                Ok(request) => {
                    events_in_batch += request.batch.drafts.len();
                    requests.push(request);
                }
                Err(_) => break,
            }
        }
        // Later events of a run the writer already refused are refused without trying: the
        // run is ending, and its log must not go on past a hole.
        let (requests, held_back): (Vec<_>, Vec<_>) = requests
            .into_iter()
            .partition(|request| !behind_a_hole(request.continues_run, &request.batch, &refused));
        for request in held_back {
            let _ = request.reply.send(Err(Arc::new(behind_a_refusal())));
        }
        // Requests with no events are barriers: answered once everything queued before them
        // has committed (or been refused), which is now, after this group.
        // (Rare: only a group that holds one is taken apart.)
        let (barriers, requests): (Vec<_>, Vec<_>) =
            if requests.iter().any(|request| request.batch.drafts.is_empty()) {
                requests.into_iter().partition(|request| request.batch.drafts.is_empty())
            } else {
                (Vec::new(), requests)
            };
        if !requests.is_empty() {
            // Before the first attempt, so a retry and the look-up after a refused commit ask
            // for the ids that were written.
            let mut requests = requests;
            for request in &mut requests {
                chains.assign(&mut request.batch);
            }
            commit(&store, &hub, requests, &mut refused, retries_max, &mut observed).await;
        }
        for barrier in barriers {
            let _ = barrier.reply.send(Ok(Vec::new()));
        }
    }
}

/// Commits a group of requests, publishes what committed, and answers every request.
async fn commit(
    store: &Arc<dyn EventLog>,
    hub: &Arc<Hub>,
    requests: Vec<WriteRequest>,
    refused: &mut RefusedRuns,
    retries_max: u32,
    observed: &mut Observed,
) {
    let started = std::time::Instant::now();
    // The batches go to the store by reference; the replies stay beside them (no per-event copy).
    let (batches, requests): (Vec<AppendBatch>, Vec<Reply>) = requests
        .into_iter()
        .map(|request| {
            (request.batch, Reply { continues_run: request.continues_run, reply: request.reply })
        })
        .unzip();
    // Requests whose events may have committed although the writer could not learn it.
    let mut maybe_committed = vec![false; requests.len()];
    let outcomes: Vec<Outcome> =
        match append_retrying(store.as_ref(), &batches, retries_max, &observed.metrics).await {
            Ok(committed) => committed.into_iter().map(Ok).collect(),
            Err(failed) if batches.len() == 1 || failed.maybe_committed => {
                // One request; or the group may have committed, and trying it in parts could write
                // it twice: every request gets the refusal, and the log is asked later.
                maybe_committed.fill(failed.maybe_committed);
                refusal_for_all(failed.error, batches.len())
            }
            Err(_) => {
                // One bad request (say, an agent deleted meanwhile) must not fail its neighbours:
                // commit them one by one so each gets its own answer.
                let one_by_one = OneByOne {
                    store: store.as_ref(),
                    refused,
                    retries_max,
                    metrics: &observed.metrics,
                };
                one_by_one.commit(&requests, &batches, &mut maybe_committed).await
            }
        };
    observed.group(&outcomes, started.elapsed());
    for (index, ((request, batch), outcome)) in
        requests.into_iter().zip(batches).zip(outcomes).enumerate()
    {
        let run = run_of(&batch);
        if let Ok(events) = &outcome {
            // Only now, after the commit, does anyone see these events.
            hub.publish(batch.agent_id, events.as_slice());
            if let (false, Some(run)) = (request.continues_run, run) {
                refused.remove(run);
            }
        } else if let Err(error) = &outcome {
            if batch.producer.is_some()
                && matches!(**error, StoreError::ProducerMoved { .. } | StoreError::RunNotOwned(_))
            {
                // Two servers taking one producer's retry: the loser fences again.
                tracing::debug!(agent_id = %batch.agent_id, %error, "a producer's batch lost its race");
            } else {
                tracing::warn!(agent_id = %batch.agent_id, %error, "append refused");
            }
            if let (Some(run), true) = (run, leaves_a_hole(&batch)) {
                refused.insert(run);
            }
            if maybe_committed[index] {
                tokio::spawn(reconcile(store.clone(), hub.clone(), batch));
            }
        }
        // The submitter may have gone away; the events are committed either way.
        let _ = request.reply.send(outcome);
    }
}

pub(super) type Outcome = Result<Vec<AgentEvent>, Arc<StoreError>>;

/// Whether a refusal leaves the run with a hole its later events must not go past. An external
/// producer's batch never does: it is whole, and fenced by the producer's position, so the batch
/// after a refused one is its retry (or refused as a gap).
fn leaves_a_hole(batch: &AppendBatch) -> bool {
    batch.producer.is_none()
}

/// Whether a request continues a run the writer refused an event of (and is not a producer's
/// fenced batch, which cannot leave a hole).
fn behind_a_hole(continues_run: bool, batch: &AppendBatch, refused: &RefusedRuns) -> bool {
    continues_run
        && batch.producer.is_none()
        && run_of(batch).is_some_and(|run| refused.set.contains(&run))
}

/// The same refusal for each of `count` requests (the first gets the error itself).
fn refusal_for_all(error: StoreError, count: usize) -> Vec<Outcome> {
    let message = error.to_string();
    let mut first = Some(error);
    (0..count)
        .map(|_| {
            Err(Arc::new(first.take().unwrap_or_else(|| StoreError::Unavailable(message.clone()))))
        })
        .collect()
}

/// A refused group committed again request by request.
struct OneByOne<'a> {
    store: &'a dyn EventLog,
    refused: &'a mut RefusedRuns,
    retries_max: u32,
    metrics: &'a Metrics,
}

impl OneByOne<'_> {
    async fn commit(
        self,
        requests: &[Reply],
        batches: &[AppendBatch],
        maybe_committed: &mut [bool],
    ) -> Vec<Outcome> {
        let mut outcomes = Vec::with_capacity(batches.len());
        for (index, (request, batch)) in requests.iter().zip(batches).enumerate() {
            let run = run_of(batch);
            if behind_a_hole(request.continues_run, batch, self.refused) {
                outcomes.push(Err(Arc::new(behind_a_refusal())));
                continue;
            }
            let outcome = match append_retrying(
                self.store,
                std::slice::from_ref(batch),
                self.retries_max,
                self.metrics,
            )
            .await
            {
                Ok(mut committed) => Ok(committed.pop().unwrap_or_default()),
                Err(failed) => {
                    maybe_committed[index] = failed.maybe_committed;
                    Err(Arc::new(failed.error))
                }
            };
            if let (Err(_), Some(run), true) = (&outcome, run, leaves_a_hole(batch)) {
                self.refused.insert(run);
            }
            outcomes.push(outcome);
        }
        outcomes
    }
}

#[cfg(test)]
mod tests;
