//! A produced run's hold on this server: taken over from the log when the producer's batch (or a
//! restart) finds its run open here without it, let go when another server took the producer's
//! batches, ended when cancelled or silent past its lease — and never ended by a stop of ours:
//! a shutdown or a crash leaves the run to its producer, whose lease counts from its last
//! accepted batch (the stored position's time), across restarts and servers.

use std::sync::Arc;

use app::EventKind;
use chrono::Utc;
use serde_json::Value;
use tokio::sync::Mutex;
use tokio::time::Instant;
use uuid::Uuid;

use super::check::{ProducedRun, Stop};
use super::fence::ProducerHeaders;
use super::{lease, OpenRun, ProduceError, Producers, Producing};
use crate::delivery::writer::AppendError;
use crate::store::{ProducerPosition, ProducerStamp, StoreError};

impl Producers {
    /// The producer's run `run_id`, open in the log, taken over by this server: rebuilt from its
    /// events, with the agent's slot here and (PostgreSQL) this server as its owner. `None` when
    /// the run is not open or not that producer's.
    pub(super) async fn adopt(
        &self,
        agent_id: Uuid,
        run_id: Uuid,
        position: &ProducerPosition,
    ) -> Result<Option<OpenRun>, ProduceError> {
        let outline = self.store.run_outline(run_id).await?;
        let Some(started) = outline.iter().find(|event| event.kind == EventKind::RunStarted) else {
            return Ok(None);
        };
        let producer = started.metadata.pointer("/producer/id").and_then(Value::as_str);
        if outline.iter().any(|event| event.kind.is_run_end())
            || producer != Some(position.stamp.producer_id.as_str())
        {
            return Ok(None);
        }
        let events = crate::agent::recovery::run_events(self.store.as_ref(), started).await?;
        let Some(run) = ProducedRun::rebuild(started, &events) else {
            return Ok(None);
        };
        // The events read are the run as of `position` only if no batch committed since (a
        // batch and its position commit together): else another server is ahead of us.
        self.unmoved(agent_id, position).await?;
        let slot = self.runs.reserve_produced(agent_id, run_id)?;
        if let Some(cluster) = &self.cluster {
            if let Some(holder) = cluster.adopt_agent_run(agent_id, run_id).await? {
                self.unmoved(agent_id, position).await?;
                return Err(ProduceError::RunInProgress { agent_id, run_id: holder });
            }
        }
        // What is left of the lease, counted from the producer's last accepted batch.
        let lease_end = position.updated_at + chrono::Duration::milliseconds(run.lease_ms as i64);
        let left = (lease_end - Utc::now()).to_std().unwrap_or_default().min(lease(&run));
        tracing::info!(%agent_id, %run_id, left_ms = left.as_millis() as u64, "took over a produced run");
        Ok(Some(OpenRun {
            agent_id,
            producer_id: position.stamp.producer_id.clone(),
            epoch: position.stamp.epoch,
            seq: position.stamp.seq,
            run,
            slot,
            lease_until: Instant::now() + left,
        }))
    }

    /// `ProducerMoved` when the producer's stored position is no longer `position`.
    pub(super) async fn unmoved(
        &self,
        agent_id: Uuid,
        position: &ProducerPosition,
    ) -> Result<(), ProduceError> {
        let now = self.store.producer_position(agent_id, &position.stamp.producer_id).await?;
        if now.is_some_and(|now| {
            (now.stamp.epoch, now.stamp.seq) == (position.stamp.epoch, position.stamp.seq)
        }) {
            return Ok(());
        }
        Err(ProduceError::Store(StoreError::ProducerMoved {
            agent_id,
            producer_id: position.stamp.producer_id.clone(),
        }))
    }

    /// At start-up: the produced runs recovery left open (their producers' leases have time
    /// left, `(agent, run, producer)`) are held here, each ended by its lease unless its
    /// producer goes on.
    pub async fn hold_open_runs(self: &Arc<Self>, runs: &[(Uuid, Uuid, String)]) {
        for (agent_id, run_id, producer) in runs {
            let (agent_id, run_id) = (*agent_id, *run_id);
            let entry = self.entry(agent_id);
            let mut producing = entry.lock().await;
            if producing.open.is_some() {
                continue;
            }
            let adopted = match self.store.producer_position(agent_id, producer).await {
                Ok(Some(position)) => self.adopt(agent_id, run_id, &position).await,
                Ok(None) => Ok(None),
                Err(error) => Err(error.into()),
            };
            match adopted {
                Ok(Some(open)) => {
                    let cancel = open.slot.cancel_token();
                    producing.open = Some(open);
                    self.watch(agent_id, run_id, entry.clone(), cancel);
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(%agent_id, %run_id, %error, "could not hold a produced run open; its producer's next batch takes it over");
                }
            }
        }
    }

    /// Drops this server's hold on the open run (its slot here) without writing anything: the
    /// run goes on elsewhere, or is left to its producer.
    pub(super) fn let_go(&self, producing: &mut Producing) {
        if let Some(open) = producing.open.take() {
            tracing::debug!(agent_id = %open.agent_id, run_id = %open.run.run_id, "let go of a produced run");
        }
    }

    /// Ends the open run on the agent, if `producer`'s epoch writes it, as abandoned: its stream
    /// ended and cannot be resumed. A run another request (another epoch) writes now is left
    /// alone. The run's id when there was one.
    pub async fn abandon(&self, agent_id: Uuid, producer: &ProducerHeaders) -> Option<Uuid> {
        let entry = self.entry(agent_id);
        let mut producing = entry.lock().await;
        let run_id = producing
            .open
            .as_ref()
            .filter(|open| open.producer_id == producer.id && open.epoch == producer.epoch)
            .map(|open| open.run.run_id)?;
        self.stop_as(&mut producing, Some(Stop::Abandoned)).await;
        Some(run_id)
    }

    /// Ends the open run its producer did not end (cancelled, silent) — or, at a shutdown, lets
    /// go of it: the run stays its producer's.
    pub(super) async fn stop(&self, producing: &mut Producing) {
        self.stop_as(producing, None).await
    }

    /// [`Producers::stop`], for the reason given, else the one the slot says. The end is guarded
    /// by the producer's position: if another server took a batch meanwhile, nothing is written
    /// and the run is let go.
    async fn stop_as(&self, producing: &mut Producing, reason: Option<Stop>) {
        let Some(open) = producing.open.as_ref() else {
            return;
        };
        let (stop, how) = if reason == Some(Stop::Abandoned) {
            (Stop::Abandoned, "interrupted: the producer's stream ended first")
        } else if open.slot.is_interrupted() {
            tracing::info!(agent_id = %open.agent_id, run_id = %open.run.run_id, "the server stops: its produced run stays open for its producer");
            self.let_go(producing);
            return;
        } else if open.slot.is_cancelled() {
            (Stop::Cancelled, "cancelled")
        } else {
            (Stop::LeaseExpired, "interrupted: the producer's lease ran out")
        };
        let Some(mut open) = producing.open.take() else {
            return;
        };
        open.slot.ending();
        let (agent_id, run_id) = (open.agent_id, open.run.run_id);
        let drafts = open.run.stopped(stop);
        let stamp = ProducerStamp {
            producer_id: open.producer_id.clone(),
            epoch: open.epoch,
            seq: open.seq,
            run_id: Some(run_id),
            fenced_at: Some((open.epoch, open.seq)),
        };
        match self.writer.append_produced(agent_id, drafts, stamp, true).await {
            Ok(_) => {
                producing.stopped = Some((open.producer_id.clone(), run_id, how));
                tracing::info!(%agent_id, %run_id, how, "a produced run ended without its producer");
            }
            Err(AppendError::Store(
                StoreError::ProducerMoved { .. } | StoreError::RunNotOwned(_),
            )) => {
                tracing::info!(%agent_id, %run_id, "the producer went on with another server: its run is theirs");
            }
            Err(error) => {
                tracing::warn!(%run_id, %error, "a produced run's end was not written; recovery ends it");
            }
        }
    }

    /// The watchdog of an open run: ends it when it is cancelled or its lease runs out.
    pub(super) fn watch(
        self: &Arc<Self>,
        agent_id: Uuid,
        run_id: Uuid,
        entry: Arc<Mutex<Producing>>,
        cancel: tokio_util::sync::CancellationToken,
    ) {
        // A strong hold: at a shutdown the router (and the state with it) may be dropped while
        // the run is open, and its lease must still be watched until the drain lets go of it.
        let producers = self.clone();
        tokio::spawn(async move {
            loop {
                let deadline = {
                    let producing = entry.lock().await;
                    match &producing.open {
                        Some(open) if open.run.run_id == run_id => open.lease_until,
                        _ => return,
                    }
                };
                tokio::select! {
                    () = cancel.cancelled() => {}
                    () = tokio::time::sleep_until(deadline) => {}
                }
                let mut producing = entry.lock().await;
                let due = match &producing.open {
                    Some(open) if open.run.run_id == run_id => {
                        open.slot.is_cancelled() || Instant::now() >= open.lease_until
                    }
                    _ => return,
                };
                if due {
                    producers.stop(&mut producing).await;
                    tracing::debug!(%agent_id, %run_id, "produced run stopped");
                    return;
                }
            }
        });
    }
}
