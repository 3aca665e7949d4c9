//! What goes into the store and what comes out: a new agent, an event draft, a batch to
//! append, and a committed event's JSON as clients receive it.

use app::protocol::Agent;
use app::{AgentEvent, DeltaAction, EventKind};
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

/// A new agent, before the store gives it an id.
#[derive(Clone, Debug, Default)]
pub struct NewAgent {
    pub name: String,
    pub system: Option<String>,
    pub description: Option<String>,
    pub model: Option<String>,
    pub metadata: Value,
    pub tags: Vec<String>,
    /// The user it is for, if any.
    pub owner: Option<String>,
}

impl NewAgent {
    /// The agent this becomes: a fresh id, an empty log, made at `created_at` (each store cuts
    /// the time to what its column keeps, so what is returned equals what a read returns).
    pub fn into_agent(self, created_at: DateTime<Utc>) -> Agent {
        Agent {
            id: Uuid::new_v4(),
            name: self.name,
            system: self.system,
            description: self.description,
            model: self.model,
            metadata: self.metadata,
            tags: self.tags,
            head_seq: 0,
            created_at,
            owner: self.owner,
            branch: None,
            current_branch: None,
        }
    }
}

/// An event before it is committed: everything but `agent_id` and `seq`, which the store assigns.
#[derive(Clone, Debug, PartialEq)]
pub struct EventDraft {
    pub id: Uuid,
    pub run_id: Option<Uuid>,
    pub thread_id: Option<Uuid>,
    pub block_id: Option<Uuid>,
    pub message_id: Option<Uuid>,
    pub kind: EventKind,
    pub delta: Option<Value>,
    pub delta_path: Option<String>,
    pub delta_action: Option<DeltaAction>,
    pub content: Value,
    pub raw: Option<Value>,
    pub metadata: Value,
    pub created_at: DateTime<Utc>,
}

impl EventDraft {
    /// A draft of `kind` with a fresh id, stamped now, everything else empty.
    ///
    /// The id is a UUIDv7 (time first, then random): unique like any UUID, and ids made one
    /// after another sort together, so the log's id index grows at its end instead of taking
    /// a random page per event (random v4 ids made each commit dirty hundreds of index pages).
    pub fn new(kind: EventKind) -> EventDraft {
        EventDraft::made(kind, Uuid::now_v7(), Utc::now())
    }

    /// A draft of `kind` with the given id and time, everything else empty: for many drafts
    /// made at once (a fresh UUIDv7 costs a call to the OS's random source; see
    /// [`crate::store::chunk::nth_id`]).
    pub fn made(kind: EventKind, id: Uuid, created_at: DateTime<Utc>) -> EventDraft {
        EventDraft {
            id,
            run_id: None,
            thread_id: None,
            block_id: None,
            message_id: None,
            kind,
            delta: None,
            delta_path: None,
            delta_action: None,
            content: Value::Null,
            raw: None,
            metadata: Value::Null,
            created_at,
        }
    }

    /// The draft as an append of `piece` to its message part `path` (a token of text, a piece
    /// of a tool call's input).
    pub fn appending(mut self, path: &str, piece: Value) -> EventDraft {
        self.delta = Some(piece);
        self.delta_path = Some(path.to_owned());
        self.delta_action = Some(DeltaAction::Append);
        self
    }

    /// Where the draft lands (as [`AgentEvent::place`]).
    pub fn place(&self) -> app::Place<'_> {
        app::Place {
            kind: self.kind,
            run_id: self.run_id,
            thread_id: self.thread_id,
            block_id: self.block_id,
            message_id: self.message_id,
            delta_path: self.delta_path.as_deref(),
        }
    }

    /// The draft an event was made from ([`EventDraft::into_event`] undone: its agent and seq
    /// dropped). What a group that did not commit gives back, so the writer can try it again
    /// without having kept a copy of every draft.
    pub fn from_event(event: AgentEvent) -> EventDraft {
        EventDraft {
            id: event.id,
            run_id: event.run_id,
            thread_id: event.thread_id,
            block_id: event.block_id,
            message_id: event.message_id,
            kind: event.kind,
            delta: event.delta,
            delta_path: event.delta_path,
            delta_action: event.delta_action,
            content: event.content,
            raw: event.raw,
            metadata: event.metadata,
            created_at: event.created_at,
        }
    }

    /// The committed event this draft becomes at `seq`.
    pub fn into_event(self, agent_id: Uuid, seq: u64) -> AgentEvent {
        AgentEvent {
            id: self.id,
            agent_id,
            seq,
            coalesced_from: None,
            run_id: self.run_id,
            thread_id: self.thread_id,
            block_id: self.block_id,
            message_id: self.message_id,
            kind: self.kind,
            delta: self.delta,
            delta_path: self.delta_path,
            delta_action: self.delta_action,
            content: self.content,
            raw: self.raw,
            metadata: self.metadata,
            created_at: self.created_at,
        }
    }
}

/// One event's `content` as the log keeps it (JSON text), with its seq and whether the event is a
/// stream message: what a Durable Streams read serves as it is, with no tree parsed and written
/// again per message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContentJson {
    pub seq: u64,
    pub stream_message: bool,
    pub json: Box<str>,
}

impl ContentJson {
    pub fn of(event: &AgentEvent) -> ContentJson {
        ContentJson {
            seq: event.seq,
            stream_message: event.kind == app::EventKind::StreamMessage,
            json: content_column(event).into_owned().into_boxed_str(),
        }
    }
}

/// One committed event as clients receive it: its `AgentEvent` JSON, serialized once, with its
/// seq beside it (the cursor, and the SSE `id:`).
///
/// Catch-up and live delivery send these strings as they are: a 10 000-event resume parsed every
/// stored JSON value into a tree and printed it again (`examples/bench/`), and each subscriber
/// of a live agent printed the same events again for itself.
#[derive(Clone, Debug, PartialEq)]
pub struct EventJson {
    pub seq: u64,
    pub json: Box<str>,
}

impl EventJson {
    pub fn of(event: &AgentEvent) -> EventJson {
        EventJson { seq: event.seq, json: super::event_text::event_text(event).into_boxed_str() }
    }

    /// `events` as one JSON array, written into `out`.
    pub fn write_array(events: &[EventJson], out: &mut String) {
        out.push('[');
        for (index, event) in events.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            out.push_str(&event.json);
        }
        out.push(']');
    }

    /// The bytes of `events` as a JSON array.
    pub fn array_len(events: &[EventJson]) -> usize {
        2 + events.iter().map(|event| event.json.len() + 1).sum::<usize>()
    }
}

/// A folded timeline saved in the store: folded through `last_seq`, whose event has `event_id`
/// (the check that the log still agrees), serialized by its owner (`agent::history`).
#[derive(Clone, Debug, PartialEq)]
pub struct StoredSnapshot {
    pub last_seq: u64,
    pub event_id: Uuid,
    pub body: Vec<u8>,
}

/// The events of one agent to commit together, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct AppendBatch {
    pub agent_id: Uuid,
    pub drafts: Vec<EventDraft>,
    /// For a batch of an external producer: its position after this batch, written in the same
    /// transaction as the events (`producers` table).
    pub producer: Option<ProducerStamp>,
}

impl AppendBatch {
    /// A batch of our own (no producer position).
    pub fn new(agent_id: Uuid, drafts: Vec<EventDraft>) -> AppendBatch {
        AppendBatch { agent_id, drafts, producer: None }
    }
}

/// An external producer's position: the last batch committed (its epoch and seq) and the run it
/// went to. Kept per agent and producer id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerStamp {
    pub producer_id: String,
    pub epoch: u64,
    pub seq: u64,
    pub run_id: Option<Uuid>,
    /// Written with a batch: the `(epoch, seq)` the batch was fenced against (`None`: the
    /// producer had no position). The append commits only while the stored position is still
    /// that one, else it fails with [`crate::store::StoreError::ProducerMoved`] and writes
    /// nothing: two servers (or requests) that fenced the same retry cannot both commit it.
    /// Read back, it is `None`.
    pub fenced_at: Option<(u64, u64)>,
}

/// A producer's stored position and when it was last written (a produced run's lease counts
/// from there, across restarts and servers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerPosition {
    pub stamp: ProducerStamp,
    pub updated_at: chrono::DateTime<chrono::Utc>,
}

/// A stream message's JSON text: its `content` is that text as a JSON string (checked when it
/// came in: `surfaces::durable::protocol::json_messages`), stored and read back as it is — the
/// `content` column of a stream message holds the message's JSON, not a string. Any other
/// content (none is made) is printed.
pub fn message_text(content: &Value) -> std::borrow::Cow<'_, str> {
    match content {
        Value::String(text) => std::borrow::Cow::Borrowed(text),
        other => std::borrow::Cow::Owned(other.to_string()),
    }
}

/// The `content` column of `event`: its content's JSON, or a stream message's text.
pub fn content_column(event: &AgentEvent) -> std::borrow::Cow<'_, str> {
    if event.kind == EventKind::StreamMessage {
        message_text(&event.content)
    } else {
        std::borrow::Cow::Owned(event.content.to_string())
    }
}
