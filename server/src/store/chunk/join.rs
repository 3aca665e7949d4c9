//! A stored run row taken whole by SQLite's fold: its first event made into an event, the ones
//! after it kept as the bytes the row holds.
//!
//! **Why.** The fold joins the run rows that commits wrote into `recent` (each commit's run rows
//! end with the commit). It expanded every event of every row into an [`AgentEvent`] and fed it
//! to the writer's row builder again: under the producer API (64 string appends per request)
//! that was ~44 % of the append thread's CPU (`perf`: expanding, parsing each event's JSON,
//! comparing metadata maps). Only a row's first event decides whether the row continues the open
//! one: the events after it continue it by construction (same part, next seq, next id). So the
//! fold counts, from the lengths alone, how many of them the open row takes as
//! [`Chunk::extend`] would take them one by one, copies their bytes, and starts a row with the
//! rest (its first made into an event): the rows it writes are the ones it wrote before, byte for
//! byte, without an event made per event.

use std::ops::Range;

use crate::store::StoreResult;
use app::AgentEvent;
use serde_json::Value;

use super::columns::{
    inflate_raws, message_pieces, message_pieces_rest, pieces, read_varint, unzigzag, zigzag,
    CHECKSUM_BYTES, VARINT_BYTES_MAX,
};
use super::expand::StoredRow;
use super::ids::{nth_id, time_from_nanos, time_nanos};
use super::row::{Chunk, Form};
use crate::limits::{CHUNK_BYTES_MAX, CHUNK_EVENTS_MAX, CHUNK_RAW_BYTES_MAX};
use crate::store::rows::{corrupt, parse_json, EventRow};

/// Where one event of a row lies in the row's columns, and its time.
struct Part {
    /// Its text (a message's content) in the row's text.
    text: Range<usize>,
    /// Its two varints in the pieces.
    piece: Range<usize>,
    /// Its entry in the inflated raw events (empty when the row has none).
    raw: Range<usize>,
    /// Its raw event's JSON bytes (0: none).
    raw_len: usize,
    nanos: i64,
}

/// A run row of the log, taken whole ([`StoredRow::whole`]).
pub struct WholeRow<'a> {
    /// The row's first event, as a read gives it.
    pub first: AgentEvent,
    form: Form,
    /// A run row's concatenated texts, or a row of messages' array inside its brackets.
    text: &'a str,
    /// The pieces (after a row of messages' checksum).
    pieces: &'a [u8],
    /// The raw events, inflated; none when the row has none.
    raws: Option<Vec<u8>>,
    parts: Vec<Part>,
}

impl StoredRow<'_> {
    /// This run row whole, checked as a read checks it (lengths, ids, checksum): where each event
    /// lies in its columns, and its first event made (the raw events inflated once, and only the
    /// first's parsed).
    pub fn whole(&self) -> StoreResult<WholeRow<'_>> {
        let event = &self.event;
        let encoded = self.pieces.ok_or_else(|| corrupt("a run row without pieces"))?;
        let count = self
            .last_seq
            .checked_sub(event.seq)
            .ok_or_else(|| corrupt("a run row ends before it starts"))?
            + 1;
        // Checked as a read checks a row before it gives an event of it: the lengths cut the
        // text at character boundaries (a row of messages' at its commas, under its checksum),
        // and the ids stay within their low bits.
        let first_nanos = time_nanos(event.created_at)?;
        match event.delta {
            Some(text) => pieces(text, encoded, first_nanos, count)?,
            None => message_pieces(event.content, encoded, first_nanos, count)?,
        };
        nth_id(event.id, count - 1)
            .ok_or_else(|| corrupt("a run row's ids run past their low bits"))?;
        // The columns every event of the row shares; each one's own are set by `event_at`.
        let shared = EventRow {
            delta: None,
            raw: None,
            content: if event.delta.is_some() { event.content } else { "" },
            ..*event
        };
        let first = shared.to_event()?;
        let (form, text, pieces) = match event.delta {
            Some(text) => (Form::Text, text, encoded),
            None => {
                let (inner, pieces) = message_pieces_rest(event.content, encoded)?;
                (Form::Messages, inner, pieces)
            }
        };
        let raws = self.raws.map(inflate_raws).transpose()?;
        let mut parts = Vec::with_capacity((self.last_seq - event.seq + 1) as usize);
        let (mut at, mut raw_at, mut offset) = (0, 0, 0);
        let mut nanos = first_nanos;
        while at < pieces.len() {
            let piece_start = at;
            let length = read_varint(pieces, &mut at)? as usize;
            nanos = nanos.wrapping_add(unzigzag(read_varint(pieces, &mut at)?));
            if form == Form::Messages && !parts.is_empty() {
                offset += 1;
            }
            let (raw, raw_len) = match &raws {
                Some(raws) => {
                    let start = raw_at;
                    let entry = read_varint(raws, &mut raw_at)? as usize;
                    raw_at += entry.saturating_sub(1);
                    (start..raw_at, entry.saturating_sub(1))
                }
                None => (0..0, 0),
            };
            parts.push(Part {
                text: offset..offset + length,
                piece: piece_start..at,
                raw,
                raw_len,
                nanos,
            });
            offset += length;
        }
        if offset != text.len() || raws.as_ref().is_some_and(|raws| raw_at != raws.len()) {
            return Err(corrupt("a run row's lengths do not cut its columns"));
        }
        let mut whole = WholeRow { first, form, text, pieces, raws, parts };
        whole.first = whole.event_at(0)?;
        Ok(whole)
    }
}

impl WholeRow<'_> {
    /// Events in the row.
    pub fn count(&self) -> usize {
        self.parts.len()
    }

    /// The row's `k`-th event (its first's columns, its own id, seq, time, text and raw event).
    fn event_at(&self, k: usize) -> StoreResult<AgentEvent> {
        let part = &self.parts[k];
        let mut event = self.first.clone();
        event.id = nth_id(self.first.id, k as u64)
            .ok_or_else(|| corrupt("a run row's ids run past their low bits"))?;
        event.seq = self.first.seq + k as u64;
        event.created_at = time_from_nanos(part.nanos);
        let text = self.text[part.text.clone()].to_owned();
        match self.form {
            Form::Text => event.delta = Some(Value::String(text)),
            Form::Messages => {
                event.content = Value::String(text);
                // A single message's block is its id.
                if self.first.block_id == Some(self.first.id) {
                    event.block_id = Some(event.id);
                }
            }
        }
        event.raw = match (&self.raws, part.raw_len) {
            (Some(raws), length) if length > 0 => {
                let json = &raws[part.raw.end - length..part.raw.end];
                let json = std::str::from_utf8(json)
                    .map_err(|_| corrupt("a run row's raw event is not UTF-8"))?;
                Some(parse_json(json)?)
            }
            _ => None,
        };
        Ok(event)
    }
}

fn varint_bytes(value: u64) -> usize {
    (64 - value.max(1).leading_zeros() as usize).div_ceil(7)
}

impl Chunk {
    /// How many of `whole`'s events from its `from`-th on this row takes, counted from their
    /// lengths with the bounds [`Chunk::extend`] checks one event at a time. That they continue
    /// the row (part, seq, id) is the caller's to know.
    fn takes(&self, whole: &WholeRow<'_>, from: usize) -> usize {
        let before = self.last_seq - self.head.seq + 1;
        let (mut text, mut pieces, mut raws) =
            (self.text.len(), self.pieces.len(), self.raws.len());
        let mut last_nanos = self.last_nanos;
        let messages_max = self.messages_row_max();
        for (taken, part) in whole.parts[from..].iter().enumerate() {
            let length = part.text.len();
            let fits = before + (taken as u64) < CHUNK_EVENTS_MAX
                && match self.form {
                    Form::Text => {
                        text + pieces + length + 2 * VARINT_BYTES_MAX <= CHUNK_BYTES_MAX
                            && raws + part.raw_len + VARINT_BYTES_MAX <= CHUNK_RAW_BYTES_MAX
                    }
                    Form::Messages => {
                        text + pieces + length + 2 * VARINT_BYTES_MAX + 2 + CHECKSUM_BYTES
                            <= messages_max
                    }
                };
            if !fits {
                return taken;
            }
            text += length + usize::from(self.form == Form::Messages);
            pieces += varint_bytes(length as u64)
                + varint_bytes(zigzag(part.nanos.wrapping_sub(last_nanos)));
            raws += if whole.raws.is_some() { part.raw.len() } else { 1 };
            last_nanos = part.nanos;
        }
        whole.parts.len() - from
    }

    /// Adds `whole`'s events `range` (after its first, the row's last event being the one
    /// before them), their bytes as the row keeps them; [`Chunk::takes`] said they fit.
    fn take_range(&mut self, whole: &WholeRow<'_>, range: Range<usize>) {
        let (Some(first), Some(last)) = (whole.parts.get(range.start), range.end.checked_sub(1))
        else {
            return;
        };
        let last_part = &whole.parts[last];
        // A message's text starts after its comma.
        let text_start = first.text.start - usize::from(self.form == Form::Messages);
        self.text.push_str(&whole.text[text_start..last_part.text.end]);
        self.pieces.extend_from_slice(&whole.pieces[first.piece.start..last_part.piece.end]);
        match &whole.raws {
            Some(raws) => {
                self.raws.extend_from_slice(&raws[first.raw.start..last_part.raw.end]);
                self.has_raw |= whole.parts[range.clone()].iter().any(|part| part.raw_len > 0);
            }
            // An entry of 0: an event without one.
            None => self.raws.extend(std::iter::repeat_n(0u8, range.len())),
        }
        self.last_seq = whole.first.seq + last as u64;
        if let Some(id) = nth_id(whole.first.id, last as u64) {
            self.last_id = id;
        }
        self.last_nanos = last_part.nanos;
    }
}

/// How `whole` goes into a group's rows: the first `taken` events extend the open row (`None`:
/// there is none, or it does not continue), and the rest, if any, start a row of their own.
pub(super) struct Placed {
    pub(super) taken: usize,
    pub(super) rest: Option<Chunk>,
}

/// Where `whole` goes, given the agent's open row; `None` when it must go event by event (a
/// row that starts at one of its events could not hold the rest: never, for a row the writer
/// made).
pub(super) fn place(open: Option<&Chunk>, whole: &WholeRow<'_>) -> StoreResult<Option<Placed>> {
    let taken = match open {
        Some(open) if open.continued_by(&whole.first) => open.takes(whole, 0),
        _ => 0,
    };
    if taken == whole.count() {
        return Ok(Some(Placed { taken, rest: None }));
    }
    let Some(mut rest) = Chunk::start(&whole.event_at(taken)?)? else {
        return Ok(None);
    };
    if rest.takes(whole, taken + 1) != whole.count() - taken - 1 {
        return Ok(None);
    }
    rest.take_range(whole, taken + 1..whole.count());
    Ok(Some(Placed { taken, rest: Some(rest) }))
}

impl Chunk {
    /// Takes `whole`'s first `taken` events ([`place`]): the first as [`Chunk::extend`] takes
    /// it, the others as bytes. False (nothing changed) if the first does not extend the row.
    pub(super) fn take_first(&mut self, whole: &WholeRow<'_>, taken: usize) -> bool {
        if !self.extend(&whole.first) {
            return false;
        }
        self.take_range(whole, 1..taken);
        true
    }
}
