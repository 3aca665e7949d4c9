//! Following one agent: the hub receiver first, then catch-up from the store, then live batches
//! with the gap and duplicate rule at the seam.

use app::protocol::ServerMessage;
use tokio::sync::{broadcast, mpsc};
use uuid::Uuid;

use super::catch_up::{catch_up, send, FollowError};
use super::outbound::{Form, Outbound};
use crate::delivery::hub::{EventBatch, Hub};
use crate::metrics::Metrics;
use crate::store::EventLog;

impl FollowError {
    /// The stable code a client sees.
    pub fn code(&self) -> &'static str {
        match self {
            FollowError::UnknownAgent(_) => "unknown_agent",
            FollowError::SinceBeyondHead { .. } => "since_beyond_head",
            FollowError::AgentDeleted(_) => "agent_deleted",
            FollowError::Store(_) => "internal",
            FollowError::SubscriberGone => "gone",
        }
    }
}

/// Delivers every event of `agent_id` with `seq > since` to `out`, exactly once and in order,
/// until the subscriber goes away or the agent is deleted. `out` is the subscriber's bounded
/// outbound queue: when it is full this task waits, and the hub makes it lag instead of waiting
/// on it.
///
/// The subscriber going away ends it at once, also on an idle agent where nothing would ever be
/// sent to find that out (`out.closed()`); and however it ends — returned, or its task aborted
/// or dropped mid-wait — the room is left ([`Membership`]), so a room without subscribers does
/// not outlive them.
pub async fn follow(
    store: &dyn EventLog,
    hub: &Hub,
    agent_id: Uuid,
    since: u64,
    form: Form,
    out: &mpsc::Sender<Outbound>,
) -> Result<(), FollowError> {
    let mut membership = Membership { hub, agent_id, live: Some(hub.subscribe(agent_id)) };
    let live = membership.live.as_mut().expect("joined above");
    tokio::select! {
        result = follow_with(store, hub.metrics(), agent_id, since, form, out, live) => result,
        _ = out.closed() => Err(FollowError::SubscriberGone),
    }
}

/// A subscriber's place in its agent's room: dropping it leaves the room, and the room goes
/// when its last subscriber has left.
struct Membership<'a> {
    hub: &'a Hub,
    agent_id: Uuid,
    live: Option<broadcast::Receiver<EventBatch>>,
}

impl Drop for Membership<'_> {
    fn drop(&mut self) {
        drop(self.live.take());
        self.hub.release(self.agent_id);
    }
}

async fn follow_with(
    store: &dyn EventLog,
    metrics: &Metrics,
    agent_id: Uuid,
    since: u64,
    form: Form,
    out: &mpsc::Sender<Outbound>,
    live: &mut broadcast::Receiver<EventBatch>,
) -> Result<(), FollowError> {
    let head_seq = store.head_seq(agent_id).await?.ok_or(FollowError::UnknownAgent(agent_id))?;
    if since > head_seq {
        return Err(FollowError::SinceBeyondHead { agent_id, since, head_seq });
    }
    send(out, ServerMessage::Subscribed { agent_id, since, head_seq }).await?;
    metrics.catch_up_reads.inc();
    let mut last_delivered = catch_up(store, agent_id, since, None, form, out).await?;
    metrics.events_delivered.inc_by(last_delivered.saturating_sub(since));
    loop {
        match live.recv().await {
            Ok(batch) => {
                let Some(first) = batch.first() else { continue };
                if first.seq > last_delivered + 1 {
                    metrics.catch_up_reads.inc();
                    let before = last_delivered;
                    last_delivered =
                        catch_up(store, agent_id, last_delivered, Some(first.seq - 1), form, out)
                            .await?;
                    metrics.events_delivered.inc_by(last_delivered.saturating_sub(before));
                }
                // Seqs go up within a batch: what is fresh is a suffix of it.
                let from = batch.partition_point(|event| event.seq <= last_delivered);
                if let Some(newest) = batch.last().filter(|_| from < batch.len()) {
                    debug_assert_eq!(batch[from].seq, last_delivered + 1);
                    metrics.events_delivered.inc_by(newest.seq - last_delivered);
                    last_delivered = newest.seq;
                    send(out, fresh_part(form, agent_id, &batch, from)).await?;
                }
            }
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                metrics.lag_notices.inc();
                send(
                    out,
                    ServerMessage::Lagged {
                        agent_id,
                        last_delivered_seq: last_delivered,
                        missed_live_batches: missed,
                    },
                )
                .await?;
                metrics.catch_up_reads.inc();
                let before = last_delivered;
                last_delivered = catch_up(store, agent_id, last_delivered, None, form, out).await?;
                metrics.events_delivered.inc_by(last_delivered.saturating_sub(before));
            }
            Err(broadcast::error::RecvError::Closed) => {
                return Err(FollowError::AgentDeleted(agent_id));
            }
        }
    }
}

/// The events of a live batch from index `from` on, in the form the subscriber asked for.
fn fresh_part(form: Form, agent_id: Uuid, batch: &EventBatch, from: usize) -> Outbound {
    match form {
        Form::Json { coalesce } => {
            Outbound::Events { agent_id, events: batch.json(), from, coalesce }
        }
        Form::Values => Outbound::Values { agent_id, events: batch[from..].to_vec() },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::delivery::writer::Writer;
    use crate::store::sqlite::SqliteStore;
    use crate::store::{Agents, EventDraft, NewAgent};
    use app::EventKind;

    /// A subscriber that stops reading while the agent writes far more batches than its room
    /// holds: it must be told it lagged, and still receive every event once, in order.
    #[tokio::test]
    async fn a_stalled_subscriber_is_told_and_loses_nothing() {
        let (_directory, store) = SqliteStore::temporary().await;
        let store = Arc::new(store);
        let hub = Arc::new(Hub::new(2));
        let writer = Writer::spawn(store.clone(), hub.clone());
        let agent = store.create_agent(NewAgent::default()).await.unwrap();
        writer
            .append(agent.id, (0..3).map(|_| EventDraft::new(EventKind::Text)).collect())
            .await
            .unwrap();

        // Capacity 1: the follower blocks on its second message until the test reads.
        let (out, mut inbox) = mpsc::channel(1);
        let follower = {
            let (store, hub) = (store.clone(), hub.clone());
            tokio::spawn(async move {
                follow(store.as_ref(), &hub, agent.id, 1, Form::Json { coalesce: false }, &out)
                    .await
            })
        };
        // Let it subscribe, then stall it while 50 separate commits happen.
        let subscribed = inbox.recv().await.unwrap();
        assert!(matches!(
            subscribed,
            Outbound::Message(ServerMessage::Subscribed { since: 1, head_seq: 3, .. })
        ));
        for _ in 0..50 {
            writer.append(agent.id, vec![EventDraft::new(EventKind::Text)]).await.unwrap();
        }

        let mut delivered = Vec::new();
        let mut lagged = false;
        while delivered.last().copied() != Some(53) {
            match tokio::time::timeout(Duration::from_secs(5), inbox.recv()).await {
                Ok(Some(events @ (Outbound::Events { .. } | Outbound::Page { .. }))) => {
                    delivered.extend(events.event_texts().iter().map(|&(seq, _)| seq))
                }
                Ok(Some(Outbound::Message(ServerMessage::Lagged { .. }))) => lagged = true,
                other => panic!("unexpected {other:?} after {delivered:?}"),
            }
        }
        assert!(lagged, "the subscriber was never told it lagged");
        assert_eq!(delivered, (2..=53).collect::<Vec<u64>>());
        follower.abort();
    }
}
