//! One subscriber following one agent's log: catch-up from the store, then live from the hub,
//! with no gap and no duplicate at the seam, and recovery from the store after a lag.
//!
//! The rule on every live batch (as in centrifuge's recovery): events at or below the last
//! delivered seq are already seen and skipped; a first seq beyond `last + 1` is a gap, filled from
//! the store before the batch is delivered. Because the hub receiver exists before the store is
//! first read, every event committed after that moment is either in the read or in the receiver.

use std::sync::Arc;

use app::protocol::ServerMessage;
use tokio::sync::{broadcast, mpsc};
use uuid::Uuid;

use crate::hub::Hub;
use crate::store::{EventJson, Store, StoreError};

/// What a subscription hands its connection to send.
#[derive(Debug)]
pub enum Outbound {
    Message(ServerMessage),
    /// `events[from..]`, consecutive events of one agent, already JSON: the frame is
    /// `ServerMessage::Events` written around them (see [`events_frame`]). Live events are
    /// shared with the room's other subscribers; catch-up pages come from the store as JSON.
    Events {
        agent_id: Uuid,
        events: Arc<[EventJson]>,
        from: usize,
    },
    /// Events as values, for consumers in this process (the Letta mapping): see [`Form`].
    Values {
        agent_id: Uuid,
        events: Vec<app::AgentEvent>,
    },
}

impl Outbound {
    /// The JSON events this carries (none for a message, or for events as values).
    pub fn events(&self) -> &[EventJson] {
        match self {
            Outbound::Events { events, from, .. } => &events[*from..],
            Outbound::Message(_) | Outbound::Values { .. } => &[],
        }
    }

    /// How many events this carries, and the seq of the last.
    fn count_and_last_seq(&self) -> (usize, Option<u64>) {
        match self {
            Outbound::Values { events, .. } => (events.len(), events.last().map(|event| event.seq)),
            _ => (self.events().len(), self.events().last().map(|event| event.seq)),
        }
    }

    /// The WebSocket frame: the `ServerMessage` this is, as JSON text.
    pub fn frame(&self) -> String {
        match self {
            Outbound::Message(message) => {
                serde_json::to_string(message).expect("server messages serialize")
            }
            Outbound::Events { agent_id, .. } => events_frame(*agent_id, self.events()),
            Outbound::Values { agent_id, events } => serde_json::to_string(&ServerMessage::Events {
                agent_id: *agent_id,
                events: events.clone(),
            })
            .expect("server messages serialize"),
        }
    }
}

/// How a subscription hands over events: as JSON for sockets (nothing parsed or printed on the
/// way), or as values for code in this process that reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    Json,
    Values,
}

/// The text of `ServerMessage::Events { agent_id, events }`, as serde writes it, from events
/// that are JSON already.
pub fn events_frame(agent_id: Uuid, events: &[EventJson]) -> String {
    const HEAD: &str = r#"{"type":"events","agent_id":""#;
    const MIDDLE: &str = r#"","events":"#;
    let mut frame = String::with_capacity(HEAD.len() + 36 + MIDDLE.len() + EventJson::array_len(events) + 1);
    frame.push_str(HEAD);
    frame.push_str(agent_id.hyphenated().encode_lower(&mut Uuid::encode_buffer()));
    frame.push_str(MIDDLE);
    EventJson::write_array(events, &mut frame);
    frame.push('}');
    frame
}

/// Events read from the store per page (and per frame) while catching up, at most. Bounds the
/// memory one catch-up holds and the size of one frame.
pub const CATCHUP_PAGE_EVENTS: u32 = 500;
/// The first page of a catch-up is this small, so the first events of a long gap reach the
/// client at once; each page after it is twice as large, up to [`CATCHUP_PAGE_EVENTS`].
pub const CATCHUP_FIRST_PAGE_EVENTS: u32 = 32;

/// Why a subscription ended other than by the subscriber leaving.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error("agent {0} does not exist")]
    UnknownAgent(Uuid),
    #[error("since={since} is beyond the newest event of agent {agent_id} (seq {head_seq})")]
    SinceBeyondHead {
        agent_id: Uuid,
        since: u64,
        head_seq: u64,
    },
    #[error("agent {0} was deleted")]
    AgentDeleted(Uuid),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The connection is gone; nothing to report to anyone.
    #[error("the subscriber went away")]
    SubscriberGone,
}

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
pub async fn follow(
    store: &dyn Store,
    hub: &Hub,
    agent_id: Uuid,
    since: u64,
    form: Form,
    out: &mpsc::Sender<Outbound>,
) -> Result<(), FollowError> {
    let mut live = hub.subscribe(agent_id);
    let result = follow_with(store, agent_id, since, form, out, &mut live).await;
    drop(live);
    hub.release(agent_id);
    result
}

async fn follow_with(
    store: &dyn Store,
    agent_id: Uuid,
    since: u64,
    form: Form,
    out: &mpsc::Sender<Outbound>,
    live: &mut broadcast::Receiver<crate::hub::EventBatch>,
) -> Result<(), FollowError> {
    let head_seq = store
        .head_seq(agent_id)
        .await?
        .ok_or(FollowError::UnknownAgent(agent_id))?;
    if since > head_seq {
        return Err(FollowError::SinceBeyondHead {
            agent_id,
            since,
            head_seq,
        });
    }
    send(
        out,
        ServerMessage::Subscribed {
            agent_id,
            since,
            head_seq,
        },
    )
    .await?;
    let mut last_delivered = catch_up(store, agent_id, since, None, form, out).await?;
    loop {
        match live.recv().await {
            Ok(batch) => {
                let Some(first) = batch.first() else { continue };
                if first.seq > last_delivered + 1 {
                    last_delivered =
                        catch_up(store, agent_id, last_delivered, Some(first.seq - 1), form, out).await?;
                }
                // Seqs go up within a batch: what is fresh is a suffix of it.
                let from = batch.partition_point(|event| event.seq <= last_delivered);
                if let Some(newest) = batch.last().filter(|_| from < batch.len()) {
                    debug_assert_eq!(batch[from].seq, last_delivered + 1);
                    last_delivered = newest.seq;
                    let outbound = match form {
                        Form::Json => Outbound::Events { agent_id, events: batch.json(), from },
                        Form::Values => Outbound::Values { agent_id, events: batch[from..].to_vec() },
                    };
                    send(out, outbound).await?;
                }
            }
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                send(
                    out,
                    ServerMessage::Lagged {
                        agent_id,
                        last_delivered_seq: last_delivered,
                        missed_live_batches: missed,
                    },
                )
                .await?;
                last_delivered = catch_up(store, agent_id, last_delivered, None, form, out).await?;
            }
            Err(broadcast::error::RecvError::Closed) => {
                return Err(FollowError::AgentDeleted(agent_id));
            }
        }
    }
}

/// Sends events after `after` from the store, page by page, up to `until` (inclusive) or to the
/// end of the log. Returns the last seq delivered.
async fn catch_up(
    store: &dyn Store,
    agent_id: Uuid,
    after: u64,
    until: Option<u64>,
    form: Form,
    out: &mpsc::Sender<Outbound>,
) -> Result<u64, FollowError> {
    let mut last_delivered = after;
    let mut page_events = CATCHUP_FIRST_PAGE_EVENTS;
    loop {
        let wanted = match until {
            Some(until) if until <= last_delivered => return Ok(last_delivered),
            Some(until) => (until - last_delivered).min(page_events as u64) as u32,
            None => page_events,
        };
        page_events = (page_events * 2).min(CATCHUP_PAGE_EVENTS);
        let page = read_retrying(store, agent_id, last_delivered, wanted, form).await?;
        let (count, newest) = page.count_and_last_seq();
        let Some(newest) = newest else {
            return match until {
                // The hub showed us a later seq, so the store must have everything before it.
                Some(until) => Err(FollowError::Store(StoreError::Corrupt(format!(
                    "agent {agent_id}: seqs {} to {until} are missing from the store",
                    last_delivered + 1
                )))),
                None => Ok(last_delivered),
            };
        };
        let full_page = count as u32 == wanted;
        last_delivered = newest;
        send(out, page).await?;
        if !full_page && until.is_none() {
            return Ok(last_delivered);
        }
    }
}

/// Times a catch-up read is tried again when the database says trying again may work (it is
/// restarting, a connection broke) before the subscription ends with an error.
pub const CATCHUP_READ_RETRIES_MAX: u32 = 10;
/// The first of those waits; each further one doubles, up to [`CATCHUP_RETRY_DELAY_MAX_MS`]
/// (about 5 s in all: a database restart, not an outage).
pub const CATCHUP_RETRY_DELAY_INITIAL_MS: u64 = 20;
pub const CATCHUP_RETRY_DELAY_MAX_MS: u64 = 1_000;

/// A page of the log, read again (bounded) while the error is transient: a subscriber mid-stream
/// rides out a database restart instead of being dropped.
async fn read_retrying(
    store: &dyn Store,
    agent_id: Uuid,
    after: u64,
    limit: u32,
    form: Form,
) -> Result<Outbound, StoreError> {
    let mut attempt = 0;
    loop {
        let read = match form {
            Form::Json => store.read_events_json(agent_id, after, limit).await.map(|events| {
                Outbound::Events { agent_id, events: Arc::from(events), from: 0 }
            }),
            Form::Values => store
                .read_events(agent_id, after, limit)
                .await
                .map(|events| Outbound::Values { agent_id, events }),
        };
        match read {
            Err(error) if error.is_transient() && attempt < CATCHUP_READ_RETRIES_MAX => {
                tracing::warn!(%agent_id, %error, attempt, "catch-up read failed; trying again");
                tokio::time::sleep(crate::backoff(
                    CATCHUP_RETRY_DELAY_INITIAL_MS,
                    CATCHUP_RETRY_DELAY_MAX_MS,
                    attempt,
                ))
                .await;
                attempt += 1;
            }
            outcome => return outcome,
        }
    }
}

impl From<ServerMessage> for Outbound {
    fn from(message: ServerMessage) -> Outbound {
        Outbound::Message(message)
    }
}

async fn send(out: &mpsc::Sender<Outbound>, outbound: impl Into<Outbound>) -> Result<(), FollowError> {
    out.send(outbound.into())
        .await
        .map_err(|_| FollowError::SubscriberGone)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::store::sqlite::SqliteStore;
    use crate::store::{EventDraft, NewAgent};
    use crate::writer::Writer;
    use app::EventKind;

    /// A WebSocket frame written around JSON events is the frame serde makes of the message.
    #[test]
    fn an_events_frame_is_the_message_serialized() {
        let agent_id = Uuid::now_v7();
        let events: Vec<app::AgentEvent> = (1..=3)
            .map(|seq| {
                let mut draft = EventDraft::new(EventKind::Text);
                draft.delta = Some(serde_json::Value::String(format!("token {seq}")));
                draft.into_event(agent_id, seq)
            })
            .collect();
        let json: Vec<EventJson> = events.iter().map(EventJson::of).collect();
        let message = ServerMessage::Events { agent_id, events: events.clone() };
        assert_eq!(events_frame(agent_id, &json), serde_json::to_string(&message).unwrap());
        let empty = ServerMessage::Events { agent_id, events: Vec::new() };
        assert_eq!(events_frame(agent_id, &[]), serde_json::to_string(&empty).unwrap());
        let values = Outbound::Values { agent_id, events };
        assert_eq!(values.frame(), serde_json::to_string(&message).unwrap());
    }

    /// A subscriber that stops reading while the agent writes far more batches than its room
    /// holds: it must be told it lagged, and still receive every event once, in order.
    #[tokio::test]
    async fn a_stalled_subscriber_is_told_and_loses_nothing() {
        let directory = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", directory.path().join("s.db").display());
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&url).await.unwrap());
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
            tokio::spawn(async move { follow(store.as_ref(), &hub, agent.id, 1, Form::Json, &out).await })
        };
        // Let it subscribe, then stall it while 50 separate commits happen.
        let subscribed = inbox.recv().await.unwrap();
        assert!(matches!(
            subscribed,
            Outbound::Message(ServerMessage::Subscribed { since: 1, head_seq: 3, .. })
        ));
        for _ in 0..50 {
            writer
                .append(agent.id, vec![EventDraft::new(EventKind::Text)])
                .await
                .unwrap();
        }

        let mut delivered = Vec::new();
        let mut lagged = false;
        while delivered.last().copied() != Some(53) {
            match tokio::time::timeout(Duration::from_secs(5), inbox.recv()).await {
                Ok(Some(events @ Outbound::Events { .. })) => {
                    delivered.extend(events.events().iter().map(|event| event.seq))
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
