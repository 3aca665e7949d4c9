//! A read's messages without a tree or an allocation per message, and the resident tails they are
//! served from.
//!
//! [`Messages`]: a page's messages as their JSON texts back to back (each followed by a comma),
//! with each one's offset and end — a JSON-mode body is `[` + the texts + `]`, one copy.
//!
//! [`Tails`]: per stream (by log id), the newest committed messages in the same shape, filled by
//! this server's appends after their commit. A catch-up or live read whose range the tail holds
//! up to the stream's tail is one copy out of memory, no database read. It holds only committed
//! messages, exactly as the log keeps them, at their seqs: an append that failed or whose seqs do
//! not follow the tail's starts the tail over at its own messages, so a tail is always a
//! contiguous run of the log. A read from the database that reaches the log's head fills a tail
//! that does not reach as far ([`Tails::read_back`]): after a restart the first read of a stream
//! is the database's and the next ones are memory's. Another server's appends (PostgreSQL) are
//! in a tail only through such a read; a read that needs newer ones (its range goes past the
//! tail's end) reads the database. Bounded per stream and in all (the least recently used
//! streams go first).
//!
//! Pure (no I/O): tested in `messages/tests.rs`.

use std::collections::HashMap;

use uuid::Uuid;

use crate::store::ContentPage;

/// Bytes one stream's resident tail holds at most; past it the older half is dropped.
pub const TAIL_STREAM_BYTES_MAX: usize = 1024 * 1024;
/// Bytes all resident tails hold at most; past it the least recently appended streams' tails
/// are dropped until a quarter is free.
pub const TAILS_BYTES_MAX: usize = 64 * 1024 * 1024;

/// A page of messages: JSON texts back to back, each followed by a comma.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Messages {
    offsets: Vec<u64>,
    /// Where each message's text ends in `joined` (its comma is at that index).
    ends: Vec<usize>,
    joined: String,
}

impl Messages {
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Bytes of the texts (and their commas).
    pub fn bytes(&self) -> usize {
        self.joined.len()
    }

    pub fn last_offset(&self) -> Option<u64> {
        self.offsets.last().copied()
    }

    /// Room for `count` more messages of `bytes` in all (a read that knows its page's size:
    /// without it a 10 000-message page grew its text a dozen times).
    pub fn reserve(&mut self, count: usize, bytes: usize) {
        self.offsets.reserve(count);
        self.ends.reserve(count);
        // The commas, and the brackets of a body made in place (`into_json_array`).
        self.joined.reserve(bytes + count + 1);
    }

    pub fn push(&mut self, offset: u64, text: &str) {
        self.joined.push_str(text);
        self.ends.push(self.joined.len());
        self.joined.push(',');
        self.offsets.push(offset);
    }

    /// The stream messages of a page read from the log (each at `base + seq`), up to the first
    /// event that is not one, the first past offset `cap`, or the first that would take the
    /// texts past `bytes_max` (one at least, when these are none yet). Into empty messages the
    /// page's own buffers move, with no copy.
    pub fn extend_page(
        &mut self,
        base: u64,
        cap: Option<u64>,
        bytes_max: usize,
        mut page: ContentPage,
    ) {
        let taken = (0..page.len())
            .position(|index| {
                let offset = base + page.seq(index);
                cap.is_some_and(|cap| offset > cap)
                    || !page.is_stream_message(index)
                    || (self.bytes() + page.end(index) > bytes_max && self.len() + index > 0)
            })
            .unwrap_or(page.len());
        page.truncate(taken);
        if self.is_empty() {
            let (seqs, ends, joined) = page.into_parts();
            let offsets = seqs.into_iter().map(|seq| base + seq).collect();
            *self = Messages { offsets, ends, joined };
            return;
        }
        self.reserve(page.len(), page.bytes());
        for (seq, _, text) in page.iter() {
            self.push(base + seq, text);
        }
    }

    /// Each message as `(offset, JSON text)`.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &str)> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().map(|end| end + 1));
        self.offsets
            .iter()
            .zip(starts.zip(&self.ends))
            .map(|(offset, (start, end))| (*offset, &self.joined[start..*end]))
    }

    /// The messages as one JSON array, in the texts' own buffer: no second buffer of a page's
    /// size (a catch-up of 10 000 messages copied 450 KB into a new one; with the tail's copy that
    /// was half the read's CPU).
    pub fn into_json_array(self) -> Vec<u8> {
        let mut joined = self.joined;
        if joined.pop().is_none() {
            return b"[]".to_vec();
        }
        joined.push(']');
        joined.insert(0, '[');
        joined.into_bytes()
    }

    /// The messages as one JSON array.
    pub fn json_array(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.joined.len() + 2);
        out.push(b'[');
        out.extend_from_slice(self.joined.trim_end_matches(',').as_bytes());
        out.push(b']');
        out
    }
}

/// One stream's newest committed messages (seqs of its own log).
#[derive(Debug)]
struct Tail {
    first_seq: u64,
    messages: Messages,
    /// When it was last appended to (a counter): the least recent go first.
    touched: u64,
}

impl Tail {
    fn last_seq(&self) -> u64 {
        self.first_seq + self.messages.len() as u64 - 1
    }

    /// Drops the older half (by bytes) while past the per-stream bound.
    fn trim(&mut self) {
        while self.messages.bytes() > TAIL_STREAM_BYTES_MAX && self.messages.len() > 1 {
            let half = self.messages.bytes() / 2;
            let keep_from = self
                .messages
                .ends
                .iter()
                .position(|end| *end >= half)
                .map_or(self.messages.len() - 1, |index| index + 1)
                .min(self.messages.len() - 1);
            let cut = self.messages.ends[keep_from - 1] + 1;
            self.messages.joined.drain(..cut);
            self.messages.offsets.drain(..keep_from);
            self.messages.ends.drain(..keep_from);
            for end in &mut self.messages.ends {
                *end -= cut;
            }
            self.first_seq += keep_from as u64;
        }
    }
}

/// The resident tails of this server's streams.
#[derive(Debug, Default)]
pub struct Tails {
    tails: HashMap<Uuid, Tail>,
    bytes: usize,
    clock: u64,
}

impl Tails {
    /// Streams with a resident tail, and the bytes they hold.
    pub fn held(&self) -> (usize, usize) {
        (self.tails.len(), self.bytes)
    }

    /// Messages just committed to `log_id` at seqs `first_seq`, `first_seq + 1` … (texts as the
    /// log keeps them). They extend the tail when they follow it, else start it over.
    pub fn committed<'a>(
        &mut self,
        log_id: Uuid,
        first_seq: u64,
        texts: impl IntoIterator<Item = &'a str>,
    ) {
        self.clock += 1;
        let clock = self.clock;
        let before = self.tails.get(&log_id).map_or(0, |tail| tail.messages.bytes());
        let tail = self.tails.entry(log_id).or_insert_with(|| Tail {
            first_seq,
            messages: Messages::default(),
            touched: clock,
        });
        if tail.messages.is_empty() || tail.last_seq() + 1 != first_seq {
            tail.first_seq = first_seq;
            tail.messages = Messages::default();
        }
        tail.touched = clock;
        for (index, text) in texts.into_iter().enumerate() {
            tail.messages.push(first_seq + index as u64, text);
        }
        tail.trim();
        if tail.messages.is_empty() {
            self.tails.remove(&log_id);
        }
        let after = self.tails.get(&log_id).map_or(0, |tail| tail.messages.bytes());
        self.bytes = self.bytes + after - before;
        if self.bytes > TAILS_BYTES_MAX {
            self.evict();
        }
    }

    /// Messages a read brought from the log (`messages`, each at `base + seq`; those at or
    /// before `base` are a fork's source's and are left out) when its own end is the log's head
    /// `head` (read before the read): they become `log_id`'s tail unless its tail already
    /// reaches `head`. They are the log exactly (committed, contiguous, at their seqs), so the
    /// tail stays a contiguous run of the log; a commit that follows extends it as usual.
    pub fn read_back(&mut self, log_id: Uuid, head: u64, base: u64, messages: &Messages) {
        if let Some((first_seq, run)) = Tails::own_run(head, base, messages) {
            self.install(log_id, head, first_seq, run);
        }
    }

    /// Whether `log_id`'s tail reaches the log's head `head` (a read then has nothing to give
    /// it, and need not copy its page).
    pub fn reaches(&self, log_id: Uuid, head: u64) -> bool {
        self.tails.get(&log_id).is_some_and(|tail| tail.last_seq() >= head)
    }

    /// The part of a read's `messages` (each at `base + seq`) that may become a tail: its own
    /// messages (after `base`) at their seqs, when they are contiguous and end at `head`; with
    /// the seq of the first. Pure, so a caller builds it before it takes the tails' lock.
    pub fn own_run(head: u64, base: u64, messages: &Messages) -> Option<(u64, Messages)> {
        let own_from = messages.offsets.partition_point(|offset| *offset <= base);
        let own = &messages.offsets[own_from..];
        let contiguous = own.windows(2).all(|pair| pair[1] == pair[0] + 1);
        let (first, last) = (own.first()? - base, own.last()? - base);
        if !contiguous || last != head {
            return None;
        }
        if base == 0 {
            // The whole read: one copy of each buffer.
            return Some((first, messages.clone()));
        }
        let mut run = Messages::default();
        run.reserve(own.len(), messages.bytes());
        for (offset, text) in messages.iter().skip(own_from) {
            run.push(offset - base, text);
        }
        Some((first, run))
    }

    /// Makes `run` (messages at seqs `first_seq`…, ending at the log's head `head`) `log_id`'s
    /// tail, or extends the tail with it when it follows the tail — unless the tail already
    /// reaches `head`.
    pub fn install(&mut self, log_id: Uuid, head: u64, first_seq: u64, run: Messages) {
        if self.reaches(log_id, head) {
            return;
        }
        let before = match self.tails.get(&log_id) {
            Some(tail) if tail.last_seq() + 1 == first_seq => {
                let texts: Vec<&str> = run.iter().map(|(_, text)| text).collect();
                return self.committed(log_id, first_seq, texts);
            }
            Some(tail) => tail.messages.bytes(),
            None => 0,
        };
        self.clock += 1;
        let mut tail = Tail { first_seq, messages: run, touched: self.clock };
        tail.trim();
        let after = tail.messages.bytes();
        self.tails.insert(log_id, tail);
        self.bytes = self.bytes + after - before;
        if self.bytes > TAILS_BYTES_MAX {
            self.evict();
        }
    }

    /// Forgets `log_id`'s tail (the stream is gone, or an append's outcome is unknown).
    pub fn forget(&mut self, log_id: Uuid) {
        if let Some(tail) = self.tails.remove(&log_id) {
            self.bytes -= tail.messages.bytes();
        }
    }

    /// The messages after seq `since` up to seq `head` (the log's head, read just before), at
    /// most `limit` and about `bytes_max` bytes (at least one), each at `base + seq` — when the
    /// tail holds that whole range. `None`: read the database.
    pub fn read(
        &self,
        log_id: Uuid,
        since: u64,
        head: u64,
        base: u64,
        limit: usize,
        bytes_max: usize,
    ) -> Option<Messages> {
        let tail = self.tails.get(&log_id)?;
        if since + 1 < tail.first_seq || tail.last_seq() < head || since >= head {
            return None;
        }
        let from = (since + 1 - tail.first_seq) as usize;
        let to = ((head - tail.first_seq) as usize + 1).min(from + limit.max(1));
        let start = if from == 0 { 0 } else { tail.messages.ends[from - 1] + 1 };
        // At least one message; then as many as fit in `bytes_max`.
        let mut end_index = from + 1;
        while end_index < to && tail.messages.ends[end_index] + 1 - start <= bytes_max {
            end_index += 1;
        }
        let cut = tail.messages.ends[end_index - 1] + 1;
        let ends = tail.messages.ends[from..end_index].iter().map(|end| end - start).collect();
        // Room for the brackets: a body is made in this buffer (`into_json_array`).
        let mut joined = String::with_capacity(cut - start + 1);
        joined.push_str(&tail.messages.joined[start..cut]);
        Some(Messages {
            offsets: (from..end_index).map(|index| base + tail.first_seq + index as u64).collect(),
            ends,
            joined,
        })
    }

    /// Drops the least recently appended tails until a quarter of the bound is free.
    fn evict(&mut self) {
        let mut order: Vec<(u64, Uuid)> =
            self.tails.iter().map(|(log_id, tail)| (tail.touched, *log_id)).collect();
        order.sort_unstable();
        for (_, log_id) in order {
            if self.bytes <= TAILS_BYTES_MAX / 4 * 3 {
                break;
            }
            self.forget(log_id);
        }
    }
}

#[cfg(test)]
mod tests;
