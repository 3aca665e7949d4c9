//! A stored row (one event, or a run row) expanded into the events a read wants: shared by the
//! two stores, which differ only in how they get the columns out of their rows.

use crate::store::StoreResult;
use uuid::Uuid;

use super::columns::{message_pieces, pieces, raws};
use super::ids::{nth_id, time_from_nanos, time_nanos};
use crate::store::rows::{corrupt, EventRow};

/// Which events of the rows a query returns a read wants.
#[derive(Clone, Copy, Debug)]
pub enum Pick {
    /// Every event of every row.
    All,
    /// Events after `since`, at most `limit` (rows are read until there are that many).
    Range { since: u64, limit: u32 },
    /// The event with this id, if the row holds it.
    Id(Uuid),
}

/// A row of the log as the store read it: `event` is the row's first event (for a run row, its
/// `delta` is the concatenated text; for a row of stream messages, its `content` is their
/// array), with the run row's columns beside it.
pub struct StoredRow<'a> {
    pub event: EventRow<'a>,
    pub last_seq: u64,
    /// Per event, its text's length and time delta (a run row); `None` for one event.
    pub pieces: Option<&'a [u8]>,
    /// A run row's raw provider events, deflated.
    pub raws: Option<&'a [u8]>,
}

/// Where a row's events go as they are expanded: made into values one by one ([`Made`]), or
/// written into a page's text.
pub trait EventSink {
    /// Events taken so far.
    fn count(&self) -> usize;
    fn take(&mut self, event: &EventRow<'_>) -> StoreResult<()>;
}

/// Events made by `make` into `out`.
pub struct Made<'o, T, F> {
    pub make: F,
    pub out: &'o mut Vec<T>,
}

impl<T, F: Fn(&EventRow<'_>) -> StoreResult<T>> EventSink for Made<'_, T, F> {
    fn count(&self) -> usize {
        self.out.len()
    }

    fn take(&mut self, event: &EventRow<'_>) -> StoreResult<()> {
        self.out.push((self.make)(event)?);
        Ok(())
    }
}

impl StoredRow<'_> {
    /// The row's events that `pick` wants, made by `make` into `out`. True when the read has
    /// what it wants (stop reading rows).
    pub fn expand<T>(
        &self,
        pick: Pick,
        make: impl Fn(&EventRow<'_>) -> StoreResult<T>,
        out: &mut Vec<T>,
    ) -> StoreResult<bool> {
        self.expand_into(pick, &mut Made { make, out })
    }

    /// [`StoredRow::expand`] into any sink.
    pub fn expand_into(&self, pick: Pick, out: &mut impl EventSink) -> StoreResult<bool> {
        let event = &self.event;
        let (first_seq, first_id, last_seq) = (event.seq, event.id, self.last_seq);
        let wanted = |seq: u64, id: Uuid| match pick {
            Pick::All => true,
            Pick::Range { since, .. } => seq > since,
            Pick::Id(wanted) => id == wanted,
        };
        let full =
            |taken: usize| matches!(pick, Pick::Range { limit, .. } if taken >= limit as usize);
        let Some(encoded) = self.pieces else {
            if last_seq != first_seq {
                return Err(corrupt(format!(
                    "a row of one event spans seqs {first_seq}..={last_seq}"
                )));
            }
            if wanted(first_seq, first_id) && !full(out.count()) {
                out.take(event)?;
            }
            return Ok(full(out.count()));
        };
        let count = last_seq
            .checked_sub(first_seq)
            .ok_or_else(|| corrupt("a run row ends before it starts"))?
            + 1;
        let raws = self.raws.map(|column| raws(column, count)).transpose()?;
        let first_nanos = time_nanos(event.created_at)?;
        // A run row has its text in `delta`; a row of stream messages has none, and its
        // messages in `content`.
        let messages = event.delta.is_none();
        // A row of single messages (each an append by itself): each one's block is its id.
        let singles = messages && event.block_id == Some(first_id);
        let cut = match event.delta {
            Some(text) => pieces(text, encoded, first_nanos, count)?,
            None => message_pieces(event.content, encoded, first_nanos, count)?,
        };
        // A piece's text as a JSON string, in one buffer for the whole row.
        let mut delta = Vec::new();
        for (k, piece) in cut.into_iter().enumerate() {
            let seq = first_seq + k as u64;
            let id = nth_id(first_id, k as u64)
                .ok_or_else(|| corrupt("a run row's ids run past their low bits"))?;
            if !wanted(seq, id) {
                continue;
            }
            if full(out.count()) {
                break;
            }
            let raw = raws.as_ref().and_then(|raws| raws[k].as_deref());
            let created_at = time_from_nanos(piece.nanos);
            if messages {
                out.take(&EventRow {
                    id,
                    seq,
                    block_id: if singles { Some(id) } else { event.block_id },
                    content: piece.text,
                    raw,
                    created_at,
                    ..*event
                })?;
                continue;
            }
            delta.clear();
            // Writing a `str` into a `Vec` cannot fail.
            let _ = serde_json::to_writer(&mut delta, piece.text);
            let delta = std::str::from_utf8(&delta)
                .map_err(|error| corrupt(format!("a run row's text: {error}")))?;
            out.take(&EventRow { id, seq, delta: Some(delta), raw, created_at, ..*event })?;
        }
        Ok(full(out.count()))
    }
}
