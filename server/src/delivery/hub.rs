//! The hub: per-agent rooms that fan committed events out to live subscribers.
//!
//! The hub is a fast path, not the source of truth. Each room is a bounded broadcast buffer of
//! committed batches. Publishing never waits: a subscriber that falls more than the buffer behind
//! gets `Lagged` from its receiver, is told so, and catches up from the store
//! (see [`crate::delivery::subscription`]). Nothing is ever silently dropped on the way to a client.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use app::AgentEvent;
use tokio::sync::broadcast;
use uuid::Uuid;

use crate::metrics::Metrics;
use crate::store::EventJson;

/// A batch of consecutive committed events of one agent, in seq order, shared by all receivers.
pub type EventBatch = Arc<Batch>;

/// The events of one publish, and their JSON, made once for every subscriber of the room.
#[derive(Debug)]
pub struct Batch {
    events: Box<[AgentEvent]>,
    json: OnceLock<Arc<[EventJson]>>,
}

impl Batch {
    pub fn new(events: Vec<AgentEvent>) -> Batch {
        Batch { events: events.into_boxed_slice(), json: OnceLock::new() }
    }

    /// The events as clients receive them. Serialized by the first subscriber that asks and
    /// shared by the rest: a room of a hundred sockets prints each event once, not a hundred
    /// times; a room nobody reads as JSON (in-process receivers) never prints it.
    pub fn json(&self) -> Arc<[EventJson]> {
        self.json.get_or_init(|| self.events.iter().map(EventJson::of).collect()).clone()
    }
}

impl std::ops::Deref for Batch {
    type Target = [AgentEvent];

    fn deref(&self) -> &[AgentEvent] {
        &self.events
    }
}

pub struct Hub {
    /// A std mutex: it is held for a map lookup only, never across an await.
    rooms: Mutex<HashMap<Uuid, Room>>,
    room_batches_max: usize,
    /// Where subscriptions count what they deliver, lag and read back.
    metrics: Arc<Metrics>,
}

struct Room {
    sender: broadcast::Sender<EventBatch>,
    /// The seq of the newest batch published, to assert that seqs only go up.
    last_published_seq: u64,
}

impl Hub {
    pub fn new(room_batches_max: usize) -> Hub {
        Hub {
            rooms: Mutex::new(HashMap::new()),
            room_batches_max: room_batches_max.max(1),
            metrics: Arc::new(Metrics::new()),
        }
    }

    /// This hub, counting into the server's `metrics`.
    pub fn observed(self, metrics: Arc<Metrics>) -> Hub {
        Hub { metrics, ..self }
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn rooms(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Room>> {
        // A panic while holding this lock leaves the map itself intact; keep serving.
        self.rooms.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Joins the room of `agent_id`. Every batch published after this call reaches the receiver
    /// (or makes it lag); subscribe *before* reading the store so the seam has no hole.
    pub fn subscribe(&self, agent_id: Uuid) -> broadcast::Receiver<EventBatch> {
        let mut rooms = self.rooms();
        let room = rooms.entry(agent_id).or_insert_with(|| Room {
            sender: broadcast::channel(self.room_batches_max).0,
            last_published_seq: 0,
        });
        room.sender.subscribe()
    }

    /// Hands a committed batch to the room's subscribers. Never blocks. Called after the commit:
    /// by the writer (in commit order), and with PostgreSQL also by [`crate::cluster`] for what
    /// other processes committed. Events at or below the newest seq already published are cut
    /// off, so a room's seqs only go up; a hole (another process's commit not fetched yet) is
    /// filled by each subscriber from the store (see [`crate::delivery::subscription`]).
    ///
    /// The writer lends its committed events (it answers its submitters with them); they are
    /// copied only when the agent has a room here, and only the fresh ones.
    pub fn publish<'a>(&self, agent_id: Uuid, events: impl Into<Cow<'a, [AgentEvent]>>) {
        let mut rooms = self.rooms();
        let Some(room) = rooms.get_mut(&agent_id) else {
            return;
        };
        let events = events.into();
        let Some(fresh) = events.iter().position(|event| event.seq > room.last_published_seq)
        else {
            return;
        };
        let events = match events {
            Cow::Borrowed(events) => events[fresh..].to_vec(),
            Cow::Owned(mut events) => {
                events.drain(..fresh);
                events
            }
        };
        let batch = Arc::new(Batch::new(events));
        let (Some(first), Some(last)) = (batch.first(), batch.last()) else {
            return;
        };
        if room.last_published_seq != 0 && first.seq != room.last_published_seq + 1 {
            tracing::debug!(
                %agent_id,
                expected = room.last_published_seq + 1,
                found = first.seq,
                "published seqs are not consecutive; subscribers will fill from the store"
            );
        }
        room.last_published_seq = last.seq;
        if room.sender.send(batch).is_err() {
            // Nobody is listening any more: drop the room rather than keep its buffer.
            rooms.remove(&agent_id);
        }
    }

    /// The agents that have a room here, with the newest seq published to each (0: none yet).
    pub fn rooms_published(&self) -> Vec<(Uuid, u64)> {
        self.rooms().iter().map(|(agent_id, room)| (*agent_id, room.last_published_seq)).collect()
    }

    /// The newest seq published to the agent's room; `None` when it has no room here.
    pub fn published(&self, agent_id: Uuid) -> Option<u64> {
        self.rooms().get(&agent_id).map(|room| room.last_published_seq)
    }

    /// Rooms held now (each has a subscriber, or had one until its release).
    pub fn rooms_len(&self) -> usize {
        self.rooms().len()
    }

    /// Drops the room once its last subscriber is gone.
    pub fn release(&self, agent_id: Uuid) {
        let mut rooms = self.rooms();
        if rooms.get(&agent_id).is_some_and(|room| room.sender.receiver_count() == 0) {
            rooms.remove(&agent_id);
        }
    }

    /// Closes the room of a deleted agent: its subscribers see the channel close.
    pub fn close(&self, agent_id: Uuid) {
        self.rooms().remove(&agent_id);
    }
}
