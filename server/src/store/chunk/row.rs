//! A row being built: which events continue which (same message part, or the same append's
//! stream messages), and the [`Chunk`] the writer extends until a bound.

use crate::store::StoreResult;
use app::{AgentEvent, DeltaAction};
use serde_json::Value;
use uuid::Uuid;

use std::borrow::Cow;

use super::columns::{
    messages_pieces_column, push_varint, zigzag, CHECKSUM_BYTES, VARINT_BYTES_MAX,
};
use super::ids::{next_id, time_nanos};
use crate::limits::{
    CHUNK_BYTES_MAX, CHUNK_EVENTS_MAX, CHUNK_RAW_BYTES_MAX, MESSAGE_ROW_BYTES_MAX,
    SINGLES_ROW_BYTES_MAX,
};
use crate::store::EventDraft;

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

/// True when a stream message is an append by itself: its block (the append it came in) is its
/// own id. Consecutive ones of a stream share a row as an append's messages do (the fold joins
/// the rows their commits wrote), each keeping its own block: the k-th message's is its id.
fn is_single(place: app::Place<'_>, id: Uuid, delta: Option<&Value>, raw: Option<&Value>) -> bool {
    is_message(place.kind, delta, raw) && place.block_id == Some(id)
}

/// [`is_single`] of an event.
fn single_message(event: &AgentEvent) -> bool {
    is_single(event.place(), event.id, event.delta.as_ref(), event.raw.as_ref())
}

/// [`is_single`] of a draft.
fn single_draft(draft: &EventDraft) -> bool {
    is_single(draft.place(), draft.id, draft.delta.as_ref(), draft.raw.as_ref())
}

/// Where an event sits, its block left out when it is a single message ([`is_single`]: each
/// one's block is its own).
fn place_of(event: &AgentEvent) -> app::Place<'_> {
    if single_message(event) {
        return without_block(event.place());
    }
    event.place()
}

fn without_block(place: app::Place<'_>) -> app::Place<'_> {
    app::Place { block_id: None, ..place }
}

/// True when `next` may follow `head` in one row: everything but id, seq, the text (a message's
/// content) and the time is equal (kind, run, thread, block, message, path, action, metadata;
/// for string appends the content too). Single messages follow single messages, their blocks
/// being their ids.
fn same_part(form: Form, head: &AgentEvent, next: &AgentEvent) -> bool {
    head.agent_id == next.agent_id
        && single_message(head) == single_message(next)
        && place_of(head) == place_of(next)
        && head.delta_action == next.delta_action
        && (form == Form::Messages || head.content == next.content)
        && head.metadata == next.metadata
}

/// True when `next` (a draft) continues the run `previous` (the draft before it, same agent)
/// belongs to: both string appends to the same part, both messages of one append, or both
/// single messages ([`is_single`]). The writer then gives `next` the id after `previous`'s
/// (and a single message the block after its block: its id).
pub fn continues(previous: &EventDraft, next: &EventDraft) -> bool {
    let plain = |draft: &EventDraft| {
        is_string_append(draft.message_id, draft.delta_action, draft.delta.as_ref())
    };
    let message = |draft: &EventDraft| {
        is_message(draft.kind, draft.delta.as_ref(), draft.raw.as_ref()) && draft.block_id.is_some()
    };
    let same_columns = previous.place() == next.place()
        && previous.delta_action == next.delta_action
        && previous.metadata == next.metadata;
    // Both string appends (plain: their action is `append`) or both messages of one append;
    // string appends of one part also share their content.
    let run = same_columns
        && ((message(previous) && message(next))
            || (plain(previous) && plain(next) && previous.content == next.content));
    let singles = single_draft(previous)
        && single_draft(next)
        && without_block(previous.place()) == without_block(next.place())
        && previous.delta_action == next.delta_action
        && previous.metadata == next.metadata;
    run || singles
}

/// A run row being built by the writer: its first event (text taken out) and what the events
/// after it added.
#[derive(Clone, Debug)]
pub struct Chunk {
    /// The first event, `delta` (a message's `content`) left out: the text is in `text`.
    pub head: AgentEvent,
    pub form: Form,
    pub last_seq: u64,
    pub(super) last_id: Uuid,
    pub(super) last_nanos: i64,
    /// Every event's text, concatenated ([`Form::Text`]); or `[` and every message's content,
    /// comma-separated, the array's `]` left for [`Chunk::content_column`] ([`Form::Messages`]).
    pub(super) text: String,
    /// Per event: its text's byte length, then its time minus the previous event's (zigzag);
    /// both LEB128 varints.
    pub pieces: Vec<u8>,
    /// Per event: its raw provider event's JSON byte length plus one (0: none), then the JSON;
    /// stored deflated ([`Chunk::raws_column`]).
    pub(super) raws: Vec<u8>,
    pub(super) has_raw: bool,
}

impl Chunk {
    /// A run starting with `event`, when it is a string append or a stream message that fits a
    /// row.
    pub fn start(event: &AgentEvent) -> StoreResult<Option<Chunk>> {
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
    fn start_messages(event: &AgentEvent) -> StoreResult<Option<Chunk>> {
        let content = crate::store::rows::message_text(&event.content);
        if content.len() + 2 * VARINT_BYTES_MAX + 2 + CHECKSUM_BYTES > MESSAGE_ROW_BYTES_MAX {
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
        if !self.continued_by(event) || self.last_seq - self.head.seq + 1 >= CHUNK_EVENTS_MAX {
            return false;
        }
        let Ok(nanos) = time_nanos(event.created_at) else {
            return false;
        };
        if self.form == Form::Messages {
            if !is_message(event.kind, event.delta.as_ref(), event.raw.as_ref()) {
                return false;
            }
            let content = crate::store::rows::message_text(&event.content);
            let row_max = self.messages_row_max();
            if self.text.len()
                + self.pieces.len()
                + content.len()
                + 2 * VARINT_BYTES_MAX
                + 2
                + CHECKSUM_BYTES
                > row_max
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

    /// True when `event` continues this run (next seq, next id, same part), room aside.
    pub(super) fn continued_by(&self, event: &AgentEvent) -> bool {
        event.seq == self.last_seq + 1
            && next_id(self.last_id) == Some(event.id)
            && same_part(self.form, &self.head, event)
    }

    /// The bytes a row of messages holds at most. A row of single messages grows with each fold
    /// step, as a run row with each commit.
    pub(super) fn messages_row_max(&self) -> usize {
        if single_message(&self.head) {
            SINGLES_ROW_BYTES_MAX
        } else {
            MESSAGE_ROW_BYTES_MAX
        }
    }

    /// The `delta` column: a run row's text; none for stream messages.
    pub fn delta_column(&self) -> Option<&str> {
        (self.form == Form::Text).then_some(self.text.as_str())
    }

    /// The bytes of its text and pieces: about what the row weighs.
    pub fn bytes(&self) -> usize {
        self.text.len() + self.pieces.len()
    }

    /// The `content` column: the first event's (a run row), or the messages' as one JSON array.
    pub fn content_column(&self) -> String {
        match self.form {
            Form::Text => crate::store::rows::json_text(&self.head.content),
            Form::Messages => format!("{}]", self.text),
        }
    }

    /// The `pieces` column beside `content` (this row's [`Chunk::content_column`]): a row of
    /// messages' carries the checksum of its content and pieces first
    /// ([`super::checked_message_pieces`]).
    pub fn pieces_column(&self, content: &str) -> Cow<'_, [u8]> {
        match self.form {
            Form::Text => Cow::Borrowed(&self.pieces),
            Form::Messages => Cow::Owned(messages_pieces_column(content, &self.pieces)),
        }
    }
}

impl Chunk {
    /// One event's text length and its time after the previous event's.
    fn push_piece(&mut self, length: usize, nanos: i64) {
        push_varint(&mut self.pieces, length as u64);
        push_varint(&mut self.pieces, zigzag(nanos.wrapping_sub(self.last_nanos)));
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
        self.has_raw.then(|| miniz_oxide::deflate::compress_to_vec(&self.raws, RAWS_DEFLATE_LEVEL))
    }
}

/// Deflate's level for raw events: fast, and most of the gain (the row is compressed again each
/// time a commit extends it).
const RAWS_DEFLATE_LEVEL: u8 = 1;

fn raw_text(event: &AgentEvent) -> Option<String> {
    event.raw.as_ref().map(crate::store::rows::json_text)
}
