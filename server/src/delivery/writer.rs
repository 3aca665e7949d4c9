//! The writer: save first, emit second.
//!
//! Every event goes through one task that assigns seqs (in the database transaction), commits,
//! and only then hands the committed batch to the hub. When several requests are waiting, they
//! are committed together in one transaction (group commit), up to [`WRITER_BATCH_EVENTS_MAX`]
//! events; one fsync then covers many tokens. SQLite allows one writer at a time, so one task
//! for all agents loses nothing, and it keeps per-agent order trivially: requests of one agent are
//! committed, published and acknowledged in the order they were submitted.

use std::sync::Arc;

use app::AgentEvent;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::delivery::hub::Hub;
use crate::store::{AppendBatch, EventDraft, Store, StoreError};

/// Requests waiting for the writer. A producer that finds the queue full waits: that is the
/// database's back-pressure, which is the one a producer should feel (never a subscriber's).
pub const WRITER_QUEUE_REQUESTS_MAX: usize = 4096;
/// Events committed in one transaction at most. Large enough to amortize the fsync over a burst
/// of tokens from many agents, small enough that one commit stays in the low milliseconds.
pub const WRITER_BATCH_EVENTS_MAX: usize = 512;

/// Times the writer tries a group again, by default, when the database says trying again may
/// work (busy, an I/O hiccup, a PostgreSQL restart) before it fails the group's requests.
/// Retrying here, in the one writer task, keeps every agent's order: nothing behind the group
/// commits first. With the delays below, about 2.5 s in all: a database restart, not an outage.
pub const WRITER_COMMIT_RETRIES_MAX_DEFAULT: u32 = 12;
/// The first retry waits this long; each further one waits twice as long, up to
/// [`WRITER_RETRY_DELAY_MAX_MS`].
pub const WRITER_RETRY_DELAY_INITIAL_MS: u64 = 2;
pub const WRITER_RETRY_DELAY_MAX_MS: u64 = 500;

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
}

impl Writer {
    /// Starts the writer task. It runs until every `Writer` handle is dropped, committing what is
    /// still queued before it stops.
    pub fn spawn(store: Arc<dyn Store>, hub: Arc<Hub>) -> Writer {
        Writer::spawn_with(store, hub, WRITER_COMMIT_RETRIES_MAX_DEFAULT)
    }

    /// [`Writer::spawn`] with another retry budget (see [`WRITER_COMMIT_RETRIES_MAX_DEFAULT`]).
    pub fn spawn_with(store: Arc<dyn Store>, hub: Arc<Hub>, commit_retries_max: u32) -> Writer {
        let (sender, receiver) = mpsc::channel(WRITER_QUEUE_REQUESTS_MAX);
        tokio::spawn(run(store, hub, receiver, commit_retries_max));
        Writer { sender }
    }

    /// Queues `drafts` for `agent_id` and returns without waiting for the commit. Requests of one
    /// caller commit in the order they were submitted; await the receipt to learn the seqs.
    pub async fn submit(
        &self,
        agent_id: Uuid,
        drafts: Vec<EventDraft>,
    ) -> Result<AppendReceipt, AppendError> {
        self.send(agent_id, drafts, true).await
    }

    /// Like [`Writer::submit`], for the events that end a run after one of its events was
    /// refused (see [`REFUSED_RUNS_REMEMBERED_MAX`]).
    pub async fn submit_closing(
        &self,
        agent_id: Uuid,
        drafts: Vec<EventDraft>,
    ) -> Result<AppendReceipt, AppendError> {
        self.send(agent_id, drafts, false).await
    }

    async fn send(
        &self,
        agent_id: Uuid,
        drafts: Vec<EventDraft>,
        continues_run: bool,
    ) -> Result<AppendReceipt, AppendError> {
        let (reply, receipt) = oneshot::channel();
        let request = WriteRequest {
            batch: AppendBatch { agent_id, drafts },
            continues_run,
            reply,
        };
        self.sender
            .send(request)
            .await
            .map_err(|_| AppendError::WriterStopped)?;
        Ok(receipt)
    }

    /// Appends closing events and waits for the commit.
    pub async fn append_closing(
        &self,
        agent_id: Uuid,
        drafts: Vec<EventDraft>,
    ) -> Result<Vec<AgentEvent>, AppendError> {
        let receipt = self.submit_closing(agent_id, drafts).await?;
        wait(receipt).await
    }

    /// Appends and waits for the commit.
    pub async fn append(
        &self,
        agent_id: Uuid,
        drafts: Vec<EventDraft>,
    ) -> Result<Vec<AgentEvent>, AppendError> {
        let receipt = self.submit(agent_id, drafts).await?;
        wait(receipt).await
    }
}

/// Waits for a receipt.
pub async fn wait(receipt: AppendReceipt) -> Result<Vec<AgentEvent>, AppendError> {
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
    store: Arc<dyn Store>,
    hub: Arc<Hub>,
    mut receiver: mpsc::Receiver<WriteRequest>,
    retries_max: u32,
) {
    let mut refused = RefusedRuns::default();
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
        let (requests, held_back): (Vec<_>, Vec<_>) = requests.into_iter().partition(|request| {
            !request.continues_run
                || !run_of(&request.batch).is_some_and(|run| refused.set.contains(&run))
        });
        for request in held_back {
            let _ = request.reply.send(Err(Arc::new(behind_a_refusal())));
        }
        if requests.is_empty() {
            continue;
        }
        commit(&store, &hub, requests, &mut refused, retries_max).await;
    }
}

/// One append, tried again (bounded, with backoff) while the error is transient.
///
/// A failed append may still have committed: the connection can break after `COMMIT` reached
/// the database and before its answer came back. Appending again would then write the events
/// twice (or, as the event ids are unique, fail). So before every retry the log is asked
/// whether the group's events are there; if so, those committed events are the outcome.
async fn append_retrying(
    store: &dyn Store,
    batches: &[AppendBatch],
    retries_max: u32,
) -> Result<Vec<Vec<AgentEvent>>, Refused> {
    let mut attempt = 0;
    let mut outcome_unknown = false;
    loop {
        let tried = if outcome_unknown {
            match committed_already(store, batches).await {
                Ok(Some(committed)) => {
                    tracing::warn!("an append whose answer was lost had committed");
                    return Ok(committed);
                }
                Ok(None) => store.append(batches).await,
                Err(error) => Err(error),
            }
        } else {
            store.append(batches).await
        };
        match tried {
            Err(error) if error.is_transient() && attempt < retries_max => {
                tracing::warn!(%error, attempt, "append failed; trying again");
                tokio::time::sleep(retry_delay(attempt)).await;
                attempt += 1;
                outcome_unknown = true;
            }
            Ok(committed) => return Ok(committed),
            Err(error) => {
                return Err(Refused {
                    error,
                    maybe_committed: outcome_unknown,
                })
            }
        }
    }
}

/// The wait before retry `attempt` (from 0) of a commit or of a reconcile.
fn retry_delay(attempt: u32) -> std::time::Duration {
    crate::backoff(
        WRITER_RETRY_DELAY_INITIAL_MS,
        WRITER_RETRY_DELAY_MAX_MS,
        attempt,
    )
}

/// An append that did not go through, as far as the writer knows.
struct Refused {
    error: StoreError,
    /// An attempt failed in a way that may have committed, and the log could not be asked.
    maybe_committed: bool,
}

/// Times the writer asks the log, after giving up on a group that may have committed, whether
/// it did; each ask waits twice as long as the one before, from [`WRITER_RETRY_DELAY_INITIAL_MS`].
pub const RECONCILE_ATTEMPTS_MAX: u32 = 16;

/// After the writer gave up on a group that may have committed: asks the log (bounded, with
/// backoff) and publishes what did commit, so live subscribers are not left one commit behind
/// when nothing else follows. Publishing late is safe: the hub cuts what it already has and
/// subscribers fill holes from the store.
async fn reconcile(store: Arc<dyn Store>, hub: Arc<Hub>, batch: AppendBatch) {
    for attempt in 0..RECONCILE_ATTEMPTS_MAX {
        tokio::time::sleep(retry_delay(attempt)).await;
        match committed_already(store.as_ref(), std::slice::from_ref(&batch)).await {
            Ok(Some(mut committed)) => {
                let events = committed.pop().unwrap_or_default();
                tracing::warn!(agent_id = %batch.agent_id, events = events.len(), "a refused append had committed; publishing it");
                hub.publish(batch.agent_id, events);
                return;
            }
            Ok(None) => return,
            Err(_) => continue,
        }
    }
    tracing::error!(agent_id = %batch.agent_id, "could not learn whether a refused append committed");
}

/// The group's events as committed, when an earlier attempt committed them; `None` when none of
/// them is in the log. A group commits whole or not at all.
async fn committed_already(
    store: &dyn Store,
    batches: &[AppendBatch],
) -> Result<Option<Vec<Vec<AgentEvent>>>, StoreError> {
    let ids: Vec<Uuid> = batches
        .iter()
        .flat_map(|batch| batch.drafts.iter().map(|draft| draft.id))
        .collect();
    let found = store.events_by_id(&ids).await?;
    if found.is_empty() {
        return Ok(None);
    }
    if found.len() != ids.len() {
        return Err(StoreError::Corrupt(format!(
            "{} of the {} events of one commit are in the log",
            found.len(),
            ids.len()
        )));
    }
    let mut by_id: std::collections::HashMap<Uuid, AgentEvent> =
        found.into_iter().map(|event| (event.id, event)).collect();
    Ok(Some(
        batches
            .iter()
            .map(|batch| {
                batch
                    .drafts
                    .iter()
                    .filter_map(|draft| by_id.remove(&draft.id))
                    .collect()
            })
            .collect(),
    ))
}

/// Commits a group of requests, publishes what committed, and answers every request.
async fn commit(
    store: &Arc<dyn Store>,
    hub: &Arc<Hub>,
    requests: Vec<WriteRequest>,
    refused: &mut RefusedRuns,
    retries_max: u32,
) {
    // The batches go to the store by reference; the replies stay beside them (no per-event copy).
    let (batches, requests): (Vec<AppendBatch>, Vec<Reply>) = requests
        .into_iter()
        .map(|request| {
            (
                request.batch,
                Reply {
                    continues_run: request.continues_run,
                    reply: request.reply,
                },
            )
        })
        .unzip();
    // Requests whose events may have committed although the writer could not learn it.
    let mut maybe_committed = vec![false; requests.len()];
    let outcomes: Vec<Result<Vec<AgentEvent>, Arc<StoreError>>> =
        match append_retrying(store.as_ref(), &batches, retries_max).await {
            Ok(committed) => committed.into_iter().map(Ok).collect(),
            Err(refused) if batches.len() == 1 || refused.maybe_committed => {
                // One request; or the group may have committed, and trying it in parts could write
                // it twice: every request gets the refusal, and the log is asked later.
                maybe_committed.fill(refused.maybe_committed);
                let message = refused.error.to_string();
                let mut first = Some(refused.error);
                (0..batches.len())
                    .map(|_| {
                        Err(Arc::new(first.take().unwrap_or_else(|| {
                            StoreError::Unavailable(message.clone())
                        })))
                    })
                    .collect()
            }
            Err(_) => {
                // One bad request (say, an agent deleted meanwhile) must not fail its neighbours:
                // commit them one by one so each gets its own answer.
                let mut outcomes = Vec::with_capacity(batches.len());
                for (index, (request, batch)) in requests.iter().zip(&batches).enumerate() {
                    let run = run_of(batch);
                    if request.continues_run && run.is_some_and(|run| refused.set.contains(&run)) {
                        outcomes.push(Err(Arc::new(behind_a_refusal())));
                        continue;
                    }
                    let outcome = match append_retrying(
                        store.as_ref(),
                        std::slice::from_ref(batch),
                        retries_max,
                    )
                    .await
                    {
                        Ok(mut committed) => Ok(committed.pop().unwrap_or_default()),
                        Err(failed) => {
                            maybe_committed[index] = failed.maybe_committed;
                            Err(Arc::new(failed.error))
                        }
                    };
                    if let (Err(_), Some(run)) = (&outcome, run) {
                        refused.insert(run);
                    }
                    outcomes.push(outcome);
                }
                outcomes
            }
        };
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
            tracing::warn!(agent_id = %batch.agent_id, %error, "append refused");
            if let Some(run) = run {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::SqliteStore;
    use crate::store::NewAgent;
    use app::EventKind;

    #[tokio::test]
    async fn a_published_event_is_already_in_the_store() {
        let directory = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", directory.path().join("w.db").display());
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&url).await.unwrap());
        let hub = Arc::new(Hub::new(1024));
        let writer = Writer::spawn(store.clone(), hub.clone());
        let agent = store.create_agent(NewAgent::default()).await.unwrap();
        let mut live = hub.subscribe(agent.id);

        let mut receipts = Vec::new();
        for _ in 0..200 {
            let receipt = writer
                .submit(agent.id, vec![EventDraft::new(EventKind::Text)])
                .await
                .unwrap();
            receipts.push(receipt);
        }
        let mut seen = 0;
        while seen < 200 {
            let batch = live.recv().await.unwrap();
            let last = batch.last().unwrap().seq;
            // Read the store the moment the batch is seen: it must be there already.
            let stored = store.read_events(agent.id, last - 1, 1).await.unwrap();
            assert_eq!(
                stored.len(),
                1,
                "seq {last} was published before it was committed"
            );
            for event in batch.iter() {
                seen += 1;
                assert_eq!(event.seq, seen as u64);
            }
        }
        for (index, receipt) in receipts.into_iter().enumerate() {
            let events = wait(receipt).await.unwrap();
            assert_eq!(events[0].seq, index as u64 + 1);
        }
    }

    #[tokio::test]
    async fn a_bad_request_does_not_fail_its_neighbours() {
        let directory = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", directory.path().join("w.db").display());
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&url).await.unwrap());
        let hub = Arc::new(Hub::new(16));
        let writer = Writer::spawn(store.clone(), hub);
        let agent = store.create_agent(NewAgent::default()).await.unwrap();
        let good = writer
            .submit(agent.id, vec![EventDraft::new(EventKind::Text)])
            .await
            .unwrap();
        let bad = writer
            .submit(Uuid::new_v4(), vec![EventDraft::new(EventKind::Text)])
            .await
            .unwrap();
        let also_good = writer
            .submit(agent.id, vec![EventDraft::new(EventKind::Text)])
            .await
            .unwrap();
        assert!(matches!(
            wait(bad).await,
            Err(AppendError::Store(StoreError::UnknownAgent(_)))
        ));
        assert_eq!(wait(good).await.unwrap()[0].seq, 1);
        assert_eq!(wait(also_good).await.unwrap()[0].seq, 2);
    }

    /// SQLite whose next `lose` appends commit and then report a transient failure, as a
    /// connection that breaks after COMMIT does.
    struct LosesAnswers {
        inner: SqliteStore,
        lose: std::sync::atomic::AtomicU32,
    }

    #[async_trait::async_trait]
    impl Store for LosesAnswers {
        async fn create_agent(&self, agent: NewAgent) -> Result<app::protocol::Agent, StoreError> {
            self.inner.create_agent(agent).await
        }
        async fn list_agents(&self, limit: u32) -> Result<Vec<app::protocol::Agent>, StoreError> {
            self.inner.list_agents(limit).await
        }
        async fn get_agent(&self, id: Uuid) -> Result<Option<app::protocol::Agent>, StoreError> {
            self.inner.get_agent(id).await
        }
        async fn delete_agent(&self, id: Uuid) -> Result<bool, StoreError> {
            self.inner.delete_agent(id).await
        }
        async fn head_seq(&self, id: Uuid) -> Result<Option<u64>, StoreError> {
            self.inner.head_seq(id).await
        }
        async fn read_events(
            &self,
            id: Uuid,
            since: u64,
            limit: u32,
        ) -> Result<Vec<AgentEvent>, StoreError> {
            self.inner.read_events(id, since, limit).await
        }
        async fn run_outline(&self, run_id: Uuid) -> Result<Vec<AgentEvent>, StoreError> {
            self.inner.run_outline(run_id).await
        }
        async fn claim_run_key(
            &self,
            id: Uuid,
            key: &str,
            run_id: Uuid,
        ) -> Result<Uuid, StoreError> {
            self.inner.claim_run_key(id, key, run_id).await
        }
        async fn release_run_key(&self, id: Uuid, key: &str) -> Result<(), StoreError> {
            self.inner.release_run_key(id, key).await
        }
        async fn unfinished_runs(&self) -> Result<Vec<AgentEvent>, StoreError> {
            self.inner.unfinished_runs().await
        }
        async fn release_unstarted_run_keys(&self) -> Result<u64, StoreError> {
            self.inner.release_unstarted_run_keys().await
        }
        async fn events_by_id(&self, ids: &[Uuid]) -> Result<Vec<AgentEvent>, StoreError> {
            self.inner.events_by_id(ids).await
        }
        async fn append(
            &self,
            batches: &[AppendBatch],
        ) -> Result<Vec<Vec<AgentEvent>>, StoreError> {
            let committed = self.inner.append(batches).await?;
            let left = self.lose.load(std::sync::atomic::Ordering::Relaxed);
            if left > 0 {
                self.lose
                    .store(left - 1, std::sync::atomic::Ordering::Relaxed);
                return Err(StoreError::Unavailable(
                    "the answer to COMMIT was lost".into(),
                ));
            }
            Ok(committed)
        }
    }

    #[tokio::test]
    async fn a_commit_whose_answer_was_lost_is_not_written_twice() {
        let directory = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", directory.path().join("w.db").display());
        let store = Arc::new(LosesAnswers {
            inner: SqliteStore::open(&url).await.unwrap(),
            lose: std::sync::atomic::AtomicU32::new(0),
        });
        let hub = Arc::new(Hub::new(16));
        let writer = Writer::spawn(store.clone(), hub.clone());
        let agent = store.create_agent(NewAgent::default()).await.unwrap();
        let mut live = hub.subscribe(agent.id);
        writer
            .append(agent.id, vec![EventDraft::new(EventKind::Text)])
            .await
            .unwrap();

        store.lose.store(1, std::sync::atomic::Ordering::Relaxed);
        let drafts = vec![
            EventDraft::new(EventKind::Text),
            EventDraft::new(EventKind::Text),
        ];
        let ids: Vec<Uuid> = drafts.iter().map(|draft| draft.id).collect();
        let events = writer
            .append(agent.id, drafts)
            .await
            .expect("the committed events are the answer");
        assert_eq!(
            events
                .iter()
                .map(|event| (event.id, event.seq))
                .collect::<Vec<_>>(),
            vec![(ids[0], 2), (ids[1], 3)]
        );
        // In the log once, published once, and the next append follows on.
        assert_eq!(store.head_seq(agent.id).await.unwrap(), Some(3));
        writer
            .append(agent.id, vec![EventDraft::new(EventKind::Text)])
            .await
            .unwrap();
        let log = store.read_events(agent.id, 0, 10).await.unwrap();
        assert_eq!(
            log.iter().map(|event| event.seq).collect::<Vec<_>>(),
            vec![1, 2, 3, 4]
        );
        let mut published = Vec::new();
        while published.len() < 4 {
            published.extend(live.recv().await.unwrap().iter().map(|event| event.seq));
        }
        assert_eq!(published, vec![1, 2, 3, 4]);
    }
}
