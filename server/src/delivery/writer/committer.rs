//! The writer's groups: taken from the queue, committed (now, or sent while the group before
//! is still committing: [`crate::store::pipeline`]), then published and answered in order.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::observed::Observed;
use super::refusals::{
    behind_a_hole, behind_a_refusal, leaves_a_hole, refusal_for_all, run_of, RefusedRuns,
};
use super::request::{Outcome, WriteRequest};
use super::retry::{append_retrying, reconcile};
use crate::delivery::hub::Hub;
use crate::metrics::Metrics;
use crate::store::chunk::IdChains;
use crate::store::pipeline::{AppendPipeline, Link, Piped, PipedReceipt};
use crate::store::{AppendBatch, EventLog, StoreError};

type ReplySender = oneshot::Sender<Outcome>;

/// Events committed in one transaction at most. A commit's fixed costs (the `fsync`, and per
/// agent a head bump and a row) are paid per group, so under load a bigger group costs less per
/// event: 512 → 4 096 took the engine bench (100 agents, 64 appends in flight each) from 73–87 to
/// 190–280 thousand events/s (CPU per event 14.3 → 7.7 µs) and 64-message Durable Streams
/// appends from 158 to 246 thousand messages/s (64 connections' POSTs now fit one group). Under
/// such load an event waits for the queue ahead of it, which big groups drain faster (engine
/// p50 60 → 25 ms); at light load groups stay small whatever this is.
pub const WRITER_BATCH_EVENTS_MAX: usize = 4096;

/// What the writer keeps of a request while its batch is being committed: where to answer,
/// and what publishing or refusing the batch needs to know of it (the batch itself may be with
/// the store).
struct Reply {
    continues_run: bool,
    reply: ReplySender,
    agent_id: Uuid,
    /// [`run_of`] the batch.
    run: Option<Uuid>,
    /// Whether a refusal leaves the run with a hole ([`leaves_a_hole`]).
    leaves_a_hole: bool,
}

impl Reply {
    fn new(batch: &AppendBatch, continues_run: bool, reply: ReplySender) -> Reply {
        let (agent_id, run, leaves_a_hole) = (batch.agent_id, run_of(batch), leaves_a_hole(batch));
        Reply { continues_run, reply, agent_id, run, leaves_a_hole }
    }
}

/// Requests committed in one transaction, the replies beside the batches. A group sent ahead
/// ([`Committer::dispatch`]) has its batches moved to the store (no per-event copy); they come
/// back only with a group that did not commit.
pub(super) struct Group {
    batches: Vec<AppendBatch>,
    replies: Vec<Reply>,
    /// Barriers queued among the requests (requests with no events): answered once everything
    /// before them has committed or been refused, which is when this group is done.
    barriers: Vec<ReplySender>,
}

/// A group sent while the one before it was committing, waiting for its answer.
pub(super) struct Flight {
    group: Group,
    ticket: u64,
    started: Instant,
    pub(super) receipt: PipedReceipt,
}

/// The writer task's state.
pub(super) struct Committer {
    store: Arc<dyn EventLog>,
    hub: Arc<Hub>,
    refused: RefusedRuns,
    chains: IdChains,
    retries_max: u32,
    observed: Observed,
    /// The last group sent ahead ([`Link::ticket`]).
    tickets: u64,
}

impl Committer {
    pub(super) fn new(
        store: Arc<dyn EventLog>,
        hub: Arc<Hub>,
        retries_max: u32,
        observed: Observed,
    ) -> Committer {
        let (refused, chains) = (RefusedRuns::default(), IdChains::default());
        Committer { store, hub, refused, chains, retries_max, observed, tickets: 0 }
    }

    /// The group that starts with `first`: the requests queued behind it, up to
    /// [`WRITER_BATCH_EVENTS_MAX`] events. Later events of a run the writer already refused are
    /// refused without trying: the run is ending, and its log must not go on past a hole.
    pub(super) fn take(
        &mut self,
        first: WriteRequest,
        receiver: &mut mpsc::Receiver<WriteRequest>,
    ) -> Group {
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
        let mut group = Group {
            batches: Vec::with_capacity(requests.len()),
            replies: Vec::with_capacity(requests.len()),
            barriers: Vec::new(),
        };
        for WriteRequest { mut batch, continues_run, reply } in requests {
            if batch.drafts.is_empty() {
                group.barriers.push(reply);
            } else if behind_a_hole(continues_run, &batch, &self.refused) {
                let _ = reply.send(Err(Arc::new(behind_a_refusal())));
            } else {
                // Before the first attempt, so a retry and the look-up after a refused commit
                // ask for the ids that were written.
                self.chains.assign(&mut batch);
                group.replies.push(Reply::new(&batch, continues_run, reply));
                group.batches.push(batch);
            }
        }
        group
    }

    /// A group that was not tried, taken again: what the writer refused meanwhile is refused.
    fn retake(&self, group: Group) -> Group {
        let Group { batches, replies, barriers } = group;
        let mut kept = Group { batches: Vec::new(), replies: Vec::new(), barriers };
        for (batch, reply) in batches.into_iter().zip(replies) {
            if behind_a_hole(reply.continues_run, &batch, &self.refused) {
                let _ = reply.reply.send(Err(Arc::new(behind_a_refusal())));
            } else {
                kept.batches.push(batch);
                kept.replies.push(reply);
            }
        }
        kept
    }

    /// Sends `group` to be committed behind `previous`, a group sent before and not landed yet,
    /// then lands `previous`; returns the group sent. Where the store cannot take a group ahead
    /// (or a run is refused, so the group's requests must be weighed against what `previous`
    /// refuses), `previous` lands first and the group is committed now.
    pub(super) async fn send(&mut self, group: Group, previous: Option<Flight>) -> Option<Flight> {
        let store = self.store.clone();
        let pipeline = store.pipeline().filter(|_| self.refused.is_empty());
        let (Some(pipeline), false) = (pipeline, group.batches.is_empty()) else {
            // With `previous` in flight no run was refused (a group goes ahead only then, and
            // only a landing refuses one): the group was weighed as it would be now.
            if let Some(previous) = previous {
                self.land_when_answered(previous).await;
            }
            self.commit(group, None, Instant::now()).await;
            return None;
        };
        let flight = self.dispatch(pipeline, group, previous.as_ref().map(|sent| sent.ticket));
        if let Some(previous) = previous {
            self.observed.sent_ahead();
            if !self.land_when_answered(previous).await {
                // The group just sent follows one that did not commit: landed now, so the next
                // group follows nothing. Left in flight, every later group would follow one not
                // tried, for as long as the load never paused (seen: 229 groups sent again
                // after 10 failures).
                let Flight { group, started, receipt, .. } = flight;
                self.land_group(group, started, receipt.await, true).await;
                return None;
            }
        }
        Some(flight)
    }

    /// Sends `group` through `pipeline`, to be tried only if the group with ticket `after`
    /// committed (always, for none).
    fn dispatch(
        &mut self,
        pipeline: &dyn AppendPipeline,
        mut group: Group,
        after: Option<u64>,
    ) -> Flight {
        self.tickets += 1;
        let link = Link { ticket: self.tickets, after };
        let receipt = pipeline.send(std::mem::take(&mut group.batches), link);
        Flight { group, ticket: link.ticket, started: Instant::now(), receipt }
    }

    /// Waits for a sent group's answer, and lands it; whether it committed as sent.
    pub(super) async fn land_when_answered(&mut self, mut flight: Flight) -> bool {
        let answer = (&mut flight.receipt).await;
        self.land(flight, answer).await
    }

    /// A sent group's answer: published and answered when it committed; when it was refused,
    /// what a refused commit gets (retries, then one request at a time); when it was not tried
    /// (the group before it did not commit), committed now. True when it committed as sent.
    pub(super) async fn land(
        &mut self,
        flight: Flight,
        answer: Result<Piped, oneshot::error::RecvError>,
    ) -> bool {
        self.land_group(flight.group, flight.started, answer, false).await
    }

    /// [`Committer::land`], of a group sent at `started`; `behind_a_failure`: sent behind a group
    /// that did not commit. Such a group, unless it committed, is weighed against what that group
    /// refused before it is tried again — whether it came back not tried or its send failed
    /// (seen in the simulation: a run's event committed after its refused start).
    async fn land_group(
        &mut self,
        group: Group,
        started: Instant,
        answer: Result<Piped, oneshot::error::RecvError>,
        behind_a_failure: bool,
    ) -> bool {
        let Ok(mut answer) = answer else {
            // The append thread had stopped before it took the group: nothing was written, and
            // nothing can be (its batches went with it).
            let error = StoreError::Unavailable("the append thread has stopped".into());
            let count = group.replies.len();
            self.finish(group, refusal_for_all(error, count), vec![false; count], started);
            return false;
        };
        let group = match answer {
            Piped::Committed(_) => group,
            Piped::Failed(_, ref mut batches) | Piped::NotTried(ref mut batches) => {
                let back = Group { batches: std::mem::take(batches), ..group };
                if behind_a_failure {
                    self.retake(back)
                } else {
                    back
                }
            }
        };
        match answer {
            Piped::Committed(committed) => {
                let maybe_committed = vec![false; group.replies.len()];
                let outcomes = committed.into_iter().map(Ok).collect();
                self.finish(group, outcomes, maybe_committed, started);
                true
            }
            Piped::Failed(error, _) => {
                self.commit(group, Some(error), started).await;
                false
            }
            Piped::NotTried(_) => {
                // Committed as any group is; the next one goes ahead following nothing.
                self.observed.sent_again();
                self.commit(group, None, Instant::now()).await;
                false
            }
        }
    }

    /// Commits a group (`tried`: the error of an attempt already made), publishes what
    /// committed, and answers every request.
    async fn commit(&mut self, group: Group, tried: Option<StoreError>, started: Instant) {
        let count = group.batches.len();
        if count == 0 {
            return self.finish(group, Vec::new(), Vec::new(), started);
        }
        // Requests whose events may have committed although the writer could not learn it.
        let mut maybe_committed = vec![false; count];
        let (store, metrics) = (self.store.as_ref(), &self.observed.metrics);
        let outcomes: Vec<Outcome> =
            match append_retrying(store, &group.batches, self.retries_max, metrics, tried).await {
                Ok(committed) => committed.into_iter().map(Ok).collect(),
                Err(failed) if count == 1 || failed.maybe_committed => {
                    // One request; or the group may have committed, and trying it in parts could
                    // write it twice: every request gets the refusal, and the log is asked later.
                    maybe_committed.fill(failed.maybe_committed);
                    refusal_for_all(failed.error, count)
                }
                Err(_) => {
                    // One bad request (say, an agent deleted meanwhile) must not fail its
                    // neighbours: commit them one by one so each gets its own answer.
                    let one_by_one = OneByOne {
                        store,
                        refused: &mut self.refused,
                        retries_max: self.retries_max,
                        metrics,
                    };
                    one_by_one.commit(&group, &mut maybe_committed).await
                }
            };
        self.finish(group, outcomes, maybe_committed, started);
    }

    /// Publishes what committed, notes the runs refused, answers every request, then the group's
    /// barriers.
    fn finish(
        &mut self,
        group: Group,
        outcomes: Vec<Outcome>,
        maybe_committed: Vec<bool>,
        started: Instant,
    ) {
        if !outcomes.is_empty() {
            self.observed.group(&outcomes, started.elapsed());
        }
        let Group { batches, replies, barriers } = group;
        // The batches, unless the group committed as sent (they went to the store): only a
        // refusal that may have committed needs one (to ask the log later). When present they
        // are the replies' own, in order (a store gives a group back as it was sent).
        debug_assert!(batches.is_empty() || batches.len() == replies.len());
        let mut batches = batches.into_iter();
        let answered = replies.into_iter().zip(outcomes).zip(maybe_committed);
        for ((request, outcome), maybe_committed) in answered {
            let batch = batches.next();
            let agent_id = request.agent_id;
            match &outcome {
                Ok(events) => {
                    // Only now, after the commit, does anyone see these events.
                    self.hub.publish(agent_id, events.as_slice());
                    if let (false, Some(run)) = (request.continues_run, request.run) {
                        self.refused.remove(run);
                    }
                }
                Err(error) => {
                    if !request.leaves_a_hole
                        && matches!(
                            **error,
                            StoreError::ProducerMoved { .. } | StoreError::RunNotOwned(_)
                        )
                    {
                        // Two servers taking one producer's retry: the loser fences again.
                        tracing::debug!(%agent_id, %error, "a producer's batch lost its race");
                    } else {
                        tracing::warn!(%agent_id, %error, "append refused");
                    }
                    if let (Some(run), true) = (request.run, request.leaves_a_hole) {
                        self.refused.insert(run);
                    }
                    if let (true, Some(batch)) = (maybe_committed, batch) {
                        tokio::spawn(reconcile(self.store.clone(), self.hub.clone(), batch));
                    }
                }
            }
            // The submitter may have gone away; the events are committed either way.
            let _ = request.reply.send(outcome);
        }
        for barrier in barriers {
            let _ = barrier.send(Ok(Vec::new()));
        }
    }
}

/// A refused group committed again request by request.
struct OneByOne<'a> {
    store: &'a dyn EventLog,
    refused: &'a mut RefusedRuns,
    retries_max: u32,
    metrics: &'a Metrics,
}

impl OneByOne<'_> {
    async fn commit(self, group: &Group, maybe_committed: &mut [bool]) -> Vec<Outcome> {
        let mut outcomes = Vec::with_capacity(group.batches.len());
        for (index, (request, batch)) in group.replies.iter().zip(&group.batches).enumerate() {
            let run = run_of(batch);
            if behind_a_hole(request.continues_run, batch, self.refused) {
                outcomes.push(Err(Arc::new(behind_a_refusal())));
                continue;
            }
            let one = std::slice::from_ref(batch);
            let outcome = match append_retrying(
                self.store,
                one,
                self.retries_max,
                self.metrics,
                None,
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
