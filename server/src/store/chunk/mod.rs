//! Runs of string appends stored as one row: the unit of storage bigger than a token.
//!
//! A streamed reply is thousands of events that each append a few characters to one message
//! part, and each carried ~280 bytes of ids, names and a time around those characters (625 bytes
//! on disk with the row and its indexes). Here consecutive appends to one part become one row:
//! the first event in full, the concatenated text, and per event two varints (its text's byte
//! length and its time after the previous event's). Every seq stays addressable: a read expands
//! the row into exactly the events that were appended, ids and times included.
//!
//! **Ids.** The events of a run have consecutive ids: the writer gives a string append that
//! follows another of the same part the id after that one's ([`next_id`]), before the commit, so
//! the id a producer, a live subscriber and a later reader see is one id. A row keeps its first
//! event's id; the k-th event's is that id plus k. Ids stay unique: a chained id differs from its
//! head only in the head's 32 random low bits (no carry), and the bits above — the UUIDv7 time
//! and counter — are the head's alone.
//!
//! **Stream messages.** A Durable Streams append of many messages was as many rows (an id, an
//! index entry and ~150 bytes of columns per 45-byte message; the append thread spent most of
//! its time inserting them). The messages of one append — same kind, block (the append), no
//! delta — become one row the same way ([`Form::Messages`]): the first event's columns, the
//! messages' contents as one JSON array (the `content` column, valid JSON for PostgreSQL's
//! `json` type too), and per message its content's byte length and time delta.
//!
//! Pure: the stores write and read the columns; this module builds and expands them.

use app::{AgentEvent, DeltaAction};
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::StoreError;

mod columns;
mod expand;
mod group;
pub use columns::{message_pieces, pieces, raws, Piece};
use columns::{push_varint, zigzag, VARINT_BYTES_MAX};
pub use expand::{Pick, StoredRow};
pub use group::{GroupRows, OpenChunks, Written, OPEN_CHUNKS_AGENTS_MAX};

/// Events one row holds at most. Reads find the row holding a seq by the rows' first seqs, so
/// this also bounds what a read skips inside its first row.
pub const CHUNK_EVENTS_MAX: u64 = 256;
/// Bytes of text and per-event varints one row holds at most: the row stays within the local
/// payload of a 4 KiB B-tree page (SQLite moves a larger one to overflow pages, which every
/// extension of the row would rewrite).
pub const CHUNK_BYTES_MAX: usize = 640;
/// Bytes of raw provider events (JSON and a length varint each) one row holds at most, before
/// they are deflated.
pub const CHUNK_RAW_BYTES_MAX: usize = 8 * 1024;
/// Bytes of contents, commas and varints one row of stream messages holds at most. Larger than
/// a run row's: the messages of one append are written once, never extended by a later commit,
/// so a row in overflow pages costs nothing more to write.
pub const MESSAGE_ROW_BYTES_MAX: usize = 32 * 1024;

/// What a row's pieces cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// String appends to one message part: `text` is their texts, concatenated (the `delta`
    /// column).
    Text,
    /// Stream messages of one append: `text` is their contents as a JSON array (the `content`
    /// column).
    Messages,
}

/// The id after `id` in a run of appends; `None` when the low 32 bits are all ones (the run
/// starts over with an id of its own rather than carry into the bits that make ids unique).
pub fn next_id(id: Uuid) -> Option<Uuid> {
    let value = id.as_u128();
    (value as u32 != u32::MAX).then(|| Uuid::from_u128(value + 1))
}

/// The id `k` places after `first` (as [`next_id`] applied `k` times).
pub fn nth_id(first: Uuid, k: u64) -> Option<Uuid> {
    let low = u128::from(first.as_u128() as u32) + u128::from(k);
    (low <= u128::from(u32::MAX)).then(|| Uuid::from_u128(first.as_u128() + u128::from(k)))
}

/// True when `event` is a string append to a message part: what a run row holds.
fn is_string_append(
    message_id: Option<Uuid>,
    action: Option<DeltaAction>,
    delta: Option<&Value>,
) -> bool {
    message_id.is_some()
        && action == Some(DeltaAction::Append)
        && matches!(delta, Some(Value::String(_)))
}

/// True when `event` is a stream message (a Durable Streams append's): what a row of
/// [`Form::Messages`] holds.
fn is_message(kind: app::EventKind, delta: Option<&Value>, raw: Option<&Value>) -> bool {
    kind == app::EventKind::StreamMessage && delta.is_none() && raw.is_none()
}

/// True when `next` may follow `head` in one row: everything but id, seq, the text (a message's
/// content) and the time is equal (kind, run, thread, block, message, path, action, metadata;
/// for string appends the content too).
fn same_part(form: Form, head: &AgentEvent, next: &AgentEvent) -> bool {
    head.agent_id == next.agent_id
        && head.kind == next.kind
        && head.run_id == next.run_id
        && head.thread_id == next.thread_id
        && head.block_id == next.block_id
        && head.message_id == next.message_id
        && head.delta_path == next.delta_path
        && head.delta_action == next.delta_action
        && (form == Form::Messages || head.content == next.content)
        && head.metadata == next.metadata
}

/// True when `next` (a draft) continues the run `previous` (the draft before it, same agent)
/// belongs to: both string appends to the same part, or both messages of one append. The
/// writer then gives `next` the id after `previous`'s.
pub fn continues(previous: &super::EventDraft, next: &super::EventDraft) -> bool {
    let plain = |draft: &super::EventDraft| {
        is_string_append(draft.message_id, draft.delta_action, draft.delta.as_ref())
    };
    let message = |draft: &super::EventDraft| {
        is_message(draft.kind, draft.delta.as_ref(), draft.raw.as_ref()) && draft.block_id.is_some()
    };
    let same_columns = previous.kind == next.kind
        && previous.run_id == next.run_id
        && previous.thread_id == next.thread_id
        && previous.block_id == next.block_id
        && previous.message_id == next.message_id
        && previous.delta_path == next.delta_path
        && previous.delta_action == next.delta_action
        && previous.metadata == next.metadata;
    // Both string appends (plain: their action is `append`) or both messages of one append;
    // string appends of one part also share their content.
    same_columns
        && ((message(previous) && message(next))
            || (plain(previous) && plain(next) && previous.content == next.content))
}

/// Agents whose last draft the writer remembers to chain ids ([`IdChains`]); past it, it
/// forgets them all (their next appends start runs of their own: fewer bytes saved, nothing
/// wrong).
pub const ID_CHAINS_AGENTS_MAX: usize = 4_096;

/// The writer's memory of each agent's last draft, to give a string append that continues it
/// the id after its id ([`next_id`]).
#[derive(Default)]
pub struct IdChains {
    last: std::collections::HashMap<Uuid, super::EventDraft>,
}

impl IdChains {
    /// Gives each draft of `batch` that continues the agent's previous draft the id after that
    /// one's, and remembers the batch's last draft.
    pub fn assign(&mut self, batch: &mut super::AppendBatch) {
        let follow = |previous: &super::EventDraft, draft: &mut super::EventDraft| {
            if continues(previous, draft) {
                if let Some(id) = next_id(previous.id) {
                    draft.id = id;
                }
            }
        };
        let Some(first) = batch.drafts.first_mut() else {
            return;
        };
        if let Some(previous) = self.last.get(&batch.agent_id) {
            follow(previous, first);
        }
        for index in 1..batch.drafts.len() {
            let (before, after) = batch.drafts.split_at_mut(index);
            follow(&before[index - 1], &mut after[0]);
        }
        if self.last.len() >= ID_CHAINS_AGENTS_MAX && !self.last.contains_key(&batch.agent_id) {
            self.last.clear();
        }
        let last = batch.drafts.last().expect("the batch has a draft").clone();
        self.last.insert(batch.agent_id, last);
    }
}

/// A time as the stores keep it: nanoseconds since the Unix epoch.
pub fn time_nanos(time: DateTime<Utc>) -> Result<i64, StoreError> {
    time.timestamp_nanos_opt()
        .ok_or_else(|| StoreError::Failed(format!("time {time} is beyond what the log keeps")))
}

pub fn time_from_nanos(nanos: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(nanos)
}

/// A run row being built by the writer: its first event (text taken out) and what the events
/// after it added.
#[derive(Clone, Debug)]
pub struct Chunk {
    /// The first event, `delta` (a message's `content`) left out: the text is in `text`.
    pub head: AgentEvent,
    pub form: Form,
    pub last_seq: u64,
    last_id: Uuid,
    last_nanos: i64,
    /// Every event's text, concatenated ([`Form::Text`]); or `[` and every message's content,
    /// comma-separated, the array's `]` left for [`Chunk::content_column`] ([`Form::Messages`]).
    text: String,
    /// Per event: its text's byte length, then its time minus the previous event's (zigzag);
    /// both LEB128 varints.
    pub pieces: Vec<u8>,
    /// Per event: its raw provider event's JSON byte length plus one (0: none), then the JSON;
    /// stored deflated ([`Chunk::raws_column`]).
    raws: Vec<u8>,
    has_raw: bool,
}

impl Chunk {
    /// A run starting with `event`, when it is a string append or a stream message that fits a
    /// row.
    pub fn start(event: &AgentEvent) -> Result<Option<Chunk>, StoreError> {
        if is_message(event.kind, event.delta.as_ref(), event.raw.as_ref()) {
            return Chunk::start_messages(event);
        }
        let Some(Value::String(text)) = &event.delta else {
            return Ok(None);
        };
        let raw = raw_text(event);
        if !is_string_append(event.message_id, event.delta_action, event.delta.as_ref())
            || text.len() > CHUNK_BYTES_MAX
            || raw.as_ref().map_or(0, String::len) > CHUNK_RAW_BYTES_MAX
        {
            return Ok(None);
        }
        let nanos = time_nanos(event.created_at)?;
        let mut head = event.clone();
        head.delta = None;
        let mut chunk = Chunk {
            head,
            form: Form::Text,
            last_seq: event.seq,
            last_id: event.id,
            last_nanos: nanos,
            text: text.clone(),
            pieces: Vec::with_capacity(64),
            raws: Vec::new(),
            has_raw: false,
        };
        push_varint(&mut chunk.pieces, text.len() as u64);
        push_varint(&mut chunk.pieces, 0);
        chunk.push_raw(raw.as_deref());
        Ok(Some(chunk))
    }

    /// A row of stream messages starting with `event`, when its content fits one.
    fn start_messages(event: &AgentEvent) -> Result<Option<Chunk>, StoreError> {
        let content = super::rows::json_text(&event.content);
        if content.len() + 2 * VARINT_BYTES_MAX + 2 > MESSAGE_ROW_BYTES_MAX {
            return Ok(None);
        }
        let nanos = time_nanos(event.created_at)?;
        let mut head = event.clone();
        head.content = Value::Null;
        let mut pieces = Vec::with_capacity(64);
        push_varint(&mut pieces, content.len() as u64);
        push_varint(&mut pieces, 0);
        let mut text = String::with_capacity(1024);
        text.push('[');
        text.push_str(&content);
        Ok(Some(Chunk {
            head,
            form: Form::Messages,
            last_seq: event.seq,
            last_id: event.id,
            last_nanos: nanos,
            text,
            pieces,
            raws: Vec::new(),
            has_raw: false,
        }))
    }

    /// Adds `event` when it continues this run (next seq, next id, same part) and the row has
    /// room; false (and nothing changed) otherwise.
    pub fn extend(&mut self, event: &AgentEvent) -> bool {
        let continues = event.seq == self.last_seq + 1
            && next_id(self.last_id) == Some(event.id)
            && same_part(self.form, &self.head, event);
        if !continues || self.last_seq - self.head.seq + 1 >= CHUNK_EVENTS_MAX {
            return false;
        }
        let Ok(nanos) = time_nanos(event.created_at) else {
            return false;
        };
        if self.form == Form::Messages {
            if !is_message(event.kind, event.delta.as_ref(), event.raw.as_ref()) {
                return false;
            }
            let content = super::rows::json_text(&event.content);
            if self.text.len() + self.pieces.len() + content.len() + 2 * VARINT_BYTES_MAX + 2
                > MESSAGE_ROW_BYTES_MAX
            {
                return false;
            }
            self.text.push(',');
            self.text.push_str(&content);
            self.push_piece(content.len(), nanos);
            self.push_raw(None);
            self.last_seq = event.seq;
            self.last_id = event.id;
            return true;
        }
        let Some(Value::String(text)) = &event.delta else {
            return false;
        };
        let Ok(nanos) = time_nanos(event.created_at) else {
            return false;
        };
        let raw = raw_text(event);
        let fits = self.text.len() + self.pieces.len() + text.len() + 2 * VARINT_BYTES_MAX
            <= CHUNK_BYTES_MAX
            && self.raws.len() + raw.as_ref().map_or(0, String::len) + VARINT_BYTES_MAX
                <= CHUNK_RAW_BYTES_MAX;
        if !fits || event.delta_action != Some(DeltaAction::Append) {
            return false;
        }
        self.push_raw(raw.as_deref());
        self.text.push_str(text);
        self.push_piece(text.len(), nanos);
        self.last_seq = event.seq;
        self.last_id = event.id;
        true
    }

    /// The `delta` column: a run row's text; none for stream messages.
    pub fn delta_column(&self) -> Option<&str> {
        (self.form == Form::Text).then_some(self.text.as_str())
    }

    /// The `content` column: the first event's (a run row), or the messages' as one JSON array.
    pub fn content_column(&self) -> String {
        match self.form {
            Form::Text => super::rows::json_text(&self.head.content),
            Form::Messages => format!("{}]", self.text),
        }
    }
}

impl Chunk {
    /// One event's text length and its time after the previous event's.
    fn push_piece(&mut self, length: usize, nanos: i64) {
        push_varint(&mut self.pieces, length as u64);
        push_varint(
            &mut self.pieces,
            zigzag(nanos.wrapping_sub(self.last_nanos)),
        );
        self.last_nanos = nanos;
    }

    fn push_raw(&mut self, raw: Option<&str>) {
        match raw {
            Some(raw) => {
                push_varint(&mut self.raws, raw.len() as u64 + 1);
                self.raws.extend_from_slice(raw.as_bytes());
                self.has_raw = true;
            }
            None => push_varint(&mut self.raws, 0),
        }
    }

    /// The `raws` column: the events' raw provider events deflated, or none when no event of
    /// the row has one. Provider events of one stream repeat themselves (the same names, ids and
    /// structure around each token): deflated they take a fraction of their size.
    pub fn raws_column(&self) -> Option<Vec<u8>> {
        self.has_raw
            .then(|| miniz_oxide::deflate::compress_to_vec(&self.raws, RAWS_DEFLATE_LEVEL))
    }
}

/// Deflate's level for raw events: fast, and most of the gain (the row is compressed again each
/// time a commit extends it).
const RAWS_DEFLATE_LEVEL: u8 = 1;

fn raw_text(event: &AgentEvent) -> Option<String> {
    event.raw.as_ref().map(super::rows::json_text)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod message_tests;
