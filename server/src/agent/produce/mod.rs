//! Runs an external producer writes: an agent loop that runs elsewhere (a Next.js route, a
//! Python service) streams its run into the agent's log, exactly once across retries and
//! restarts, behind the same rules as our own runs.
//!
//! - [`fence`] (pure): `Producer-Id` / `Producer-Epoch` / `Producer-Seq` against the producer's
//!   last committed position — a retry is a duplicate, a restarted producer's higher epoch
//!   fences off the old one, a gap is refused.
//! - [`check`] (pure): a batch of events in our event model, checked against the open run and
//!   made into drafts; the run's closing events when its producer does not end it.
//! - here: [`Producers`], the use case. Per agent, one lock serializes the fence, the check and
//!   the commit, so a position is read, tested and advanced by one request at a time; the
//!   position is committed with the batch (`producers` table), so a batch and its seq are in
//!   the log together or not at all. An open run holds the agent's run slot in the registry
//!   (one run per agent, cancel, shutdown) and, with PostgreSQL, in the database; a watchdog
//!   task ends it when it is cancelled or its producer stays silent past its lease.
//!
//! Several servers on one PostgreSQL database: any server takes a producer's next batch — the
//! position is checked again inside the append's transaction, and the run's state is rebuilt
//! from the log where a server finds it open without holding it (`lease.rs`).

mod answer;
mod batch;
pub mod check;
pub mod fence;
mod lease;
mod slot;

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::Mutex;
use tokio::time::Instant;
use uuid::Uuid;

use self::check::{check_batch, ProducedEvent, ProducedRun, Producer};
use self::fence::{fence, Fence, ProducerHeaders};
use super::registry::{ProducedSlot, RunLimits, Runs};
use crate::delivery::writer::{AppendError, Writer};
use crate::store::{ClusterStore, ProducerStamp, Store, StoreError};
pub use answer::{Appended, ProduceError, Produced};
pub use batch::Batch;
pub use slot::PRODUCER_OPENING_WAIT_MS_MAX;

/// A producer's run in flight.
struct OpenRun {
    agent_id: Uuid,
    producer_id: String,
    epoch: u64,
    seq: u64,
    run: ProducedRun,
    slot: ProducedSlot,
    lease_until: Instant,
}

/// One agent's producer state: its open produced run, if any, and how its last one ended.
#[derive(Default)]
struct Producing {
    open: Option<OpenRun>,
    /// The producer run that ended without its producer, and how: told to the producer's next
    /// request for it.
    stopped: Option<(String, Uuid, &'static str)>,
}

/// The producer API's use case. Cheap to share (`Arc`).
pub struct Producers {
    store: Arc<dyn Store>,
    writer: Writer,
    runs: Arc<Runs>,
    cluster: Option<Arc<dyn ClusterStore>>,
    limits: RunLimits,
    agents: std::sync::Mutex<HashMap<Uuid, Arc<Mutex<Producing>>>>,
}

impl Producers {
    /// What a new produced run's slot touches (`slot.rs`).
    fn slots(&self) -> slot::Slots<'_> {
        slot::Slots {
            runs: &self.runs,
            store: self.store.as_ref(),
            cluster: self.cluster.as_deref(),
        }
    }
}

impl Producers {
    pub fn new(
        store: Arc<dyn Store>,
        writer: Writer,
        runs: Arc<Runs>,
        cluster: Option<Arc<dyn ClusterStore>>,
        limits: RunLimits,
    ) -> Arc<Producers> {
        Arc::new(Producers {
            store,
            writer,
            runs,
            cluster,
            limits,
            agents: std::sync::Mutex::new(HashMap::new()),
        })
    }

    fn entry(&self, agent_id: Uuid) -> Arc<Mutex<Producing>> {
        let mut agents = self.agents();
        Producers::forget_idle(&mut agents, Some(agent_id));
        agents.entry(agent_id).or_default().clone()
    }

    fn agents(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Arc<Mutex<Producing>>>> {
        self.agents.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Entries of agents with nothing open and nobody waiting go (but `keep`'s): the map holds
    /// the agents being produced to, not every agent ever produced to.
    fn forget_idle(agents: &mut HashMap<Uuid, Arc<Mutex<Producing>>>, keep: Option<Uuid>) {
        agents.retain(|id, entry| {
            Some(*id) == keep
                || Arc::strong_count(entry) > 1
                || entry.try_lock().map_or(true, |producing| producing.open.is_some())
        });
    }

    /// Agents with a producer's entry (open runs, and agents being appended to right now).
    pub fn agents_held(&self) -> usize {
        let mut agents = self.agents();
        Producers::forget_idle(&mut agents, None);
        agents.len()
    }

    /// The producer's position: its last committed epoch and seq, the run it went to and
    /// whether that run is still open (on any server).
    pub async fn position(
        &self,
        agent_id: Uuid,
        producer_id: &str,
    ) -> Result<Option<(ProducerStamp, bool)>, ProduceError> {
        let Some(position) = self.store.producer_position(agent_id, producer_id).await? else {
            if self.store.get_agent(agent_id).await?.is_none() {
                return Err(ProduceError::UnknownAgent(agent_id));
            }
            return Ok(None);
        };
        let open = match position.stamp.run_id {
            Some(run_id) => self.run_end(run_id).await?.is_none(),
            None => false,
        };
        Ok(Some((position.stamp, open)))
    }

    /// How the run ended (its end's kind), `None` while it is open.
    async fn run_end(&self, run_id: Uuid) -> Result<Option<&'static str>, StoreError> {
        let outline = self.store.run_outline(run_id).await?;
        Ok(outline.iter().find(|event| event.kind.is_run_end()).map(|end| end.kind.as_str()))
    }

    /// One batch of a producer's events: fenced, checked, committed with its position; counted
    /// by outcome (`agentstream_producer_batches_total`).
    pub async fn append(
        self: &Arc<Self>,
        agent_id: Uuid,
        headers: &ProducerHeaders,
        batch: Batch,
    ) -> Result<Produced, ProduceError> {
        // The batch is fenced, checked, committed and booked in a task of its own: a producer
        // whose connection drops midway (its answer lost) must not leave the run's state here
        // half-updated — a batch the writer committed while our copy of the run stayed behind,
        // or a hold on the run let go with no watchdog left to end it at its lease.
        let producers = self.clone();
        let headers = headers.clone();
        let answer =
            tokio::spawn(async move { producers.append_fenced(agent_id, &headers, batch).await })
                .await
                .unwrap_or(Err(ProduceError::WriterStopped));
        let outcome = match &answer {
            Ok(Produced::Appended(_)) => "appended",
            Ok(Produced::Duplicate) => "duplicate",
            Err(ProduceError::StaleEpoch { .. }) => "stale_epoch",
            Err(ProduceError::Gap { .. } | ProduceError::EpochNotAtZero { .. }) => "gap",
            Err(ProduceError::Refused(_) | ProduceError::UnknownAgent(_)) => "refused",
            Err(
                ProduceError::RunInProgress { .. }
                | ProduceError::Run(_)
                | ProduceError::CallWaiting { .. },
            ) => "busy",
            Err(ProduceError::RunEnded { .. }) => "run_ended",
            Err(ProduceError::Store(_) | ProduceError::WriterStopped) => "error",
        };
        self.writer
            .metrics()
            .producer_batches
            .get_or_create(&crate::metrics::OutcomeLabel { outcome })
            .inc();
        answer
    }

    /// [`Producers::append_batch`] again while another server (or request) moved the
    /// producer's position between our fence and our commit: the next try fences against the
    /// new position (a duplicate, a gap, or the next batch after it).
    async fn append_fenced(
        self: &Arc<Self>,
        agent_id: Uuid,
        headers: &ProducerHeaders,
        mut batch: Batch,
    ) -> Result<Produced, ProduceError> {
        let mut attempts = 1;
        loop {
            let items = std::mem::take(&mut batch.items);
            match self.append_batch(agent_id, headers, items).await {
                Err(ProduceError::Store(StoreError::ProducerMoved { .. }))
                    if attempts < PRODUCER_FENCE_ATTEMPTS_MAX =>
                {
                    attempts += 1;
                    batch.items = batch.again()?;
                }
                answer => return answer,
            }
        }
    }

    async fn append_batch(
        self: &Arc<Self>,
        agent_id: Uuid,
        headers: &ProducerHeaders,
        items: Vec<ProducedEvent>,
    ) -> Result<Produced, ProduceError> {
        let entry = self.entry(agent_id);
        let mut producing = entry.lock().await;
        // The stored position is the authority: another server may have taken the producer's
        // batches since this one last did. A batch that is the next one after the run this
        // server holds goes on from its copy without reading it: the append's transaction
        // checks the position it was fenced against (`fenced_at`), and a moved one is fenced
        // again from the store.
        let cached = producing
            .open
            .as_ref()
            .filter(|open| open.producer_id == headers.id)
            .map(|open| (open.epoch, open.seq));
        let trust_cache =
            cached.is_some() && fence(cached, headers.epoch, headers.seq) == Fence::Append;
        let position = if trust_cache {
            None
        } else {
            let position = self.store.producer_position(agent_id, &headers.id).await?;
            if position.is_none() && self.store.get_agent(agent_id).await?.is_none() {
                return Err(ProduceError::UnknownAgent(agent_id));
            }
            position
        };
        let stored = if trust_cache {
            cached
        } else {
            position.as_ref().map(|position| (position.stamp.epoch, position.stamp.seq))
        };
        let stored_run = position.as_ref().and_then(|position| position.stamp.run_id);
        if producing.open.as_ref().is_some_and(|open| {
            open.producer_id == headers.id && Some((open.epoch, open.seq)) != stored
        }) {
            // Our copy of the run is behind the log: another server wrote to it.
            self.let_go(&mut producing);
        }
        let mine = producing.open.as_ref().is_some_and(|open| open.producer_id == headers.id);
        match fence(stored, headers.epoch, headers.seq) {
            Fence::Append => {}
            Fence::Duplicate => {
                if let Some(open) = producing.open.as_mut().filter(|_| mine) {
                    open.lease_until = Instant::now() + lease(&open.run);
                }
                return Ok(Produced::Duplicate);
            }
            Fence::StaleEpoch { current } => {
                return Err(ProduceError::StaleEpoch { current, received: headers.epoch })
            }
            Fence::Gap { expected, received } => {
                return Err(ProduceError::Gap { expected, received })
            }
            Fence::EpochNotAtZero { epoch, seq } => {
                return Err(ProduceError::EpochNotAtZero { epoch, seq })
            }
        }
        // A run someone cancelled is ended before anything else is written to it.
        if mine && producing.open.as_ref().is_some_and(|open| open.slot.is_cancelled()) {
            self.stop(&mut producing).await;
        }
        if let Some(open) = producing.open.as_ref().filter(|open| open.producer_id != headers.id) {
            return Err(ProduceError::RunInProgress { agent_id, run_id: open.run.run_id });
        }
        // The producer's run may be open in the log without this server holding it (a restart,
        // or its last batch went to another server): this server takes it over.
        if producing.open.is_none() {
            if let (Some(run_id), Some(position)) = (stored_run, &position) {
                if let Some(open) = self.adopt(agent_id, run_id, position).await? {
                    let cancel = open.slot.cancel_token();
                    producing.open = Some(open);
                    self.watch(agent_id, run_id, entry.clone(), cancel);
                }
            }
        }
        let producer = Producer { id: &headers.id, epoch: headers.epoch };
        let open_run = producing.open.as_ref().map(|open| &open.run);
        let checked = match check_batch(open_run, items, producer, self.limits) {
            Ok(checked) => checked,
            Err(refusal) => {
                // A producer that lost its run (cancelled, lease, or ended by recovery while the
                // server was down) learns why.
                if refusal.no_open_run {
                    // Unless the run ended with this very batch, written by another server
                    // (a retry's twin) since the position was read: fenced again, it is a
                    // duplicate, not a batch for an ended run.
                    if let Some(position) = &position {
                        self.unmoved(agent_id, position).await?;
                    }
                    if let Some((id, run_id, how)) = &producing.stopped {
                        if *id == headers.id {
                            return Err(ProduceError::RunEnded { run_id: *run_id, how });
                        }
                    }
                    if let Some(run_id) = stored_run {
                        if let Some(how) = self.run_end(run_id).await? {
                            return Err(ProduceError::RunEnded { run_id, how });
                        }
                    }
                }
                return Err(ProduceError::Refused(refusal));
            }
        };
        let run_id = checked.run_id;
        let opening = if checked.opened {
            Some(self.slots().take_slot(agent_id, run_id, &headers.id, stored).await?)
        } else {
            None
        };
        let stamp = ProducerStamp {
            producer_id: headers.id.clone(),
            epoch: headers.epoch,
            seq: headers.seq,
            run_id: Some(run_id),
            fenced_at: stored,
        };
        let run_open = checked.run.is_some();
        if !run_open {
            // A run that ends with this batch (also one it opened) lets the agent's next run
            // wait for its end's commit rather than be refused.
            if let Some(open) = &producing.open {
                open.slot.ending();
            }
            if let Some(slot) = &opening {
                slot.ending();
            }
        }
        let committed = self.writer.append_produced(agent_id, checked.drafts, stamp, false).await;
        let events = match committed {
            Ok(events) => events,
            Err(error) => {
                match opening {
                    Some(slot) => self.slots().give_back(agent_id, run_id, slot).await,
                    None if matches!(
                        error,
                        AppendError::Store(
                            StoreError::ProducerMoved { .. } | StoreError::RunNotOwned(_)
                        )
                    ) =>
                    {
                        // Another server took the producer's batch (or its run) meanwhile: the
                        // run goes on there; ours is let go, nothing written, and the batch is
                        // fenced again.
                        self.let_go(&mut producing);
                        return Err(ProduceError::Store(StoreError::ProducerMoved {
                            agent_id,
                            producer_id: headers.id.clone(),
                        }));
                    }
                    None => {
                        // The log refused an event of an open run: it is ended from what the
                        // log holds, as our own runs are.
                        if let Some(open) = producing.open.take() {
                            open.slot.ending();
                            let detail = serde_json::json!({
                                "type": "store_error",
                                "message": error.to_string(),
                                "retryable": true,
                            });
                            super::failure::end_from_log(
                                self.store.as_ref(),
                                &self.writer,
                                agent_id,
                                run_id,
                                detail,
                            )
                            .await;
                        }
                    }
                }
                return Err(error.into());
            }
        };
        let lease_until = |run: &ProducedRun| Instant::now() + lease(run);
        match (checked.run, opening) {
            (Some(run), Some(slot)) => {
                let cancel = slot.cancel_token();
                producing.open = Some(OpenRun {
                    agent_id,
                    producer_id: headers.id.clone(),
                    epoch: headers.epoch,
                    seq: headers.seq,
                    lease_until: lease_until(&run),
                    run,
                    slot,
                });
                producing.stopped = None;
                self.watch(agent_id, run_id, entry.clone(), cancel);
            }
            (Some(run), None) => {
                if let Some(open) = producing.open.as_mut() {
                    open.epoch = headers.epoch;
                    open.seq = headers.seq;
                    open.lease_until = lease_until(&run);
                    open.run = run;
                }
            }
            (None, _) => {
                // The run ended (a batch may open and end one): its slot goes (with PostgreSQL
                // the end's commit freed the database's).
                producing.open = None;
            }
        }
        Ok(Produced::Appended(Appended {
            run_id,
            first_seq: events.first().map_or(0, |event| event.seq),
            last_seq: events.last().map_or(0, |event| event.seq),
            run_open,
        }))
    }
}

/// A producer's batch is fenced and committed at most this many times while other servers keep
/// moving its position between the fence and the commit.
pub const PRODUCER_FENCE_ATTEMPTS_MAX: u32 = 4;

fn lease(run: &ProducedRun) -> std::time::Duration {
    std::time::Duration::from_millis(run.lease_ms)
}
