//! A page of events as JSON in one buffer: what a catch-up sends, read without an allocation
//! per event.
//!
//! **Why.** A 10 000-event WebSocket resume read each event into a string of its own, joined
//! 500 of them into a frame, and freed them: 10 000 allocations, a UTF-8 check per event and a
//! copy of every byte on the way to the socket. A page is written by the reader straight into
//! one string, after room left at its front for the frame's head, so the frame is the page's
//! own buffer with the head written into that room ([`JsonPage::into_framed`]).

use crate::store::{EventJson, StoreResult};

use super::chunk::EventSink;
use super::event_text::Text;
use super::gathered::Gathered;
use super::rows::{corrupt, EventRow};

/// Consecutive events of one log as JSON text: `room` bytes (spaces) at the front, then each
/// event's text, comma-separated (the inside of a JSON array), with each event's seq and the
/// end of its text.
#[derive(Clone, Debug, PartialEq)]
pub struct JsonPage {
    text: String,
    room: usize,
    /// Per event: its seq and where its text ends in `text`.
    ends: Vec<(u64, usize)>,
}

impl JsonPage {
    /// An empty page with `room` bytes at the front for a head ([`JsonPage::into_framed`]).
    pub fn with_room(room: usize) -> JsonPage {
        JsonPage { text: " ".repeat(room), room, ends: Vec::new() }
    }

    /// A page of events that are JSON already (a store that has no page of its own).
    pub fn from_events(room: usize, events: &[EventJson]) -> JsonPage {
        let mut page = JsonPage::with_room(room);
        page.text.reserve(EventJson::array_len(events));
        for event in events {
            page.push(event.seq, &event.json);
        }
        page
    }

    fn push(&mut self, seq: u64, json: &str) {
        if !self.ends.is_empty() {
            self.text.push(',');
        }
        self.text.push_str(json);
        self.ends.push((seq, self.text.len()));
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn last_seq(&self) -> Option<u64> {
        self.ends.last().map(|&(seq, _)| seq)
    }

    pub fn seqs(&self) -> impl Iterator<Item = u64> + '_ {
        self.ends.iter().map(|&(seq, _)| seq)
    }

    /// Each event's seq and text.
    pub fn events(&self) -> impl Iterator<Item = (u64, &str)> + '_ {
        let starts = std::iter::once(self.room).chain(self.ends.iter().map(|&(_, end)| end + 1));
        self.ends.iter().zip(starts).map(|(&(seq, end), start)| (seq, &self.text[start..end]))
    }

    /// The events' texts joined by commas: a JSON array without its brackets.
    pub fn joined(&self) -> &str {
        &self.text[self.room..]
    }

    /// The events one by one (for code that merges or keeps them apart).
    pub fn to_events(&self) -> Vec<EventJson> {
        self.events().map(|(seq, json)| EventJson { seq, json: json.into() }).collect()
    }

    /// `head`, the events joined by commas, then `tail`: in the page's own buffer when `head`
    /// fills the room at its front exactly, else copied into a new string.
    pub fn into_framed(mut self, head: &str, tail: &str) -> String {
        if head.len() != self.room {
            let joined = self.joined();
            let mut framed = String::with_capacity(head.len() + joined.len() + tail.len());
            framed.push_str(head);
            framed.push_str(joined);
            framed.push_str(tail);
            return framed;
        }
        // Same length: written in place, nothing after it moves.
        self.text.replace_range(..self.room, head);
        self.text.push_str(tail);
        self.text
    }
}

/// A page being written by a read, row by row: bytes checked as UTF-8 once, when the page is
/// done, not per event.
pub(crate) struct PageText {
    text: Text,
    room: usize,
    ends: Vec<(u64, usize)>,
}

/// Bytes reserved per event when a page starts: an event of a streamed reply is ~460 bytes, so
/// a full page of them is written without the buffer growing (and copying itself) on the way.
const PAGE_EVENT_BYTES_RESERVED: usize = 512;
/// Events a page reserves room for at most, whatever its limit: a read of 10 000 events (or of
/// three, asking for 10 000) does not claim 5 MiB up front.
const PAGE_EVENTS_RESERVED_MAX: usize = 512;

impl PageText {
    pub fn new(room: usize, limit: u32) -> PageText {
        let events = (limit as usize).min(PAGE_EVENTS_RESERVED_MAX);
        let mut text = Text::with_capacity(room + events * PAGE_EVENT_BYTES_RESERVED);
        text.push_str(&" ".repeat(room));
        PageText { text, room, ends: Vec::with_capacity(events) }
    }

    /// Adds the row's event, written by `write`.
    pub fn add(
        &mut self,
        row: &EventRow<'_>,
        write: impl FnOnce(&EventRow<'_>, &mut Text) -> StoreResult<()>,
    ) -> StoreResult<()> {
        if !self.ends.is_empty() {
            self.text.push_str(",");
        }
        write(row, &mut self.text)?;
        self.ends.push((row.seq, self.text.len()));
        Ok(())
    }

    /// The page, its bytes checked as UTF-8 once.
    pub fn done(self) -> StoreResult<JsonPage> {
        let text =
            self.text.checked().map_err(|error| corrupt(format!("a page's text: {error}")))?;
        Ok(JsonPage { text, room: self.room, ends: self.ends })
    }
}

impl Default for PageText {
    fn default() -> PageText {
        PageText::new(0, 0)
    }
}

impl EventSink for PageText {
    fn count(&self) -> usize {
        self.ends.len()
    }

    fn take(&mut self, event: &EventRow<'_>) -> StoreResult<()> {
        self.add(event, super::row_text::write_event)
    }
}

impl Gathered for PageText {
    fn count(&self) -> usize {
        self.ends.len()
    }

    fn seqs(&self) -> impl Iterator<Item = u64> + '_ {
        self.ends.iter().map(|&(seq, _)| seq)
    }

    /// `later`'s events copied after these (its room left out): a branch read crossing from a
    /// parent's log into its own.
    fn append(&mut self, later: PageText) {
        if later.ends.is_empty() {
            return;
        }
        if !self.ends.is_empty() {
            self.text.push_str(",");
        }
        let base = self.text.len();
        self.text.push_text_from(&later.text, later.room);
        let moved = |&(seq, end): &(u64, usize)| (seq, base + end.saturating_sub(later.room));
        self.ends.extend(later.ends.iter().map(moved));
    }
}

#[cfg(test)]
mod tests;
