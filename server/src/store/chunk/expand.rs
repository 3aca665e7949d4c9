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

impl StoredRow<'_> {
    /// The row's events that `pick` wants, made by `make` into `out`. True when the read has
    /// what it wants (stop reading rows).
    pub fn expand<T>(
        &self,
        pick: Pick,
        make: impl Fn(&EventRow<'_>) -> StoreResult<T>,
        out: &mut Vec<T>,
    ) -> StoreResult<bool> {
        let event = &self.event;
        let (first_seq, first_id, last_seq) = (event.seq, event.id, self.last_seq);
        let wanted = |seq: u64, id: Uuid| match pick {
            Pick::All => true,
            Pick::Range { since, .. } => seq > since,
            Pick::Id(wanted) => id == wanted,
        };
        let full =
            |out: &Vec<T>| matches!(pick, Pick::Range { limit, .. } if out.len() >= limit as usize);
        let Some(encoded) = self.pieces else {
            if last_seq != first_seq {
                return Err(corrupt(format!(
                    "a row of one event spans seqs {first_seq}..={last_seq}"
                )));
            }
            if wanted(first_seq, first_id) && !full(out) {
                out.push(make(event)?);
            }
            return Ok(full(out));
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
        for (k, piece) in cut.into_iter().enumerate() {
            let seq = first_seq + k as u64;
            let id = nth_id(first_id, k as u64)
                .ok_or_else(|| corrupt("a run row's ids run past their low bits"))?;
            if !wanted(seq, id) {
                continue;
            }
            if full(out) {
                break;
            }
            let raw = raws.as_ref().and_then(|raws| raws[k].as_deref());
            let created_at = time_from_nanos(piece.nanos);
            if messages {
                out.push(make(&EventRow {
                    id,
                    seq,
                    block_id: if singles { Some(id) } else { event.block_id },
                    content: piece.text,
                    raw,
                    created_at,
                    ..*event
                })?);
                continue;
            }
            let delta = serde_json::to_string(piece.text).expect("strings serialize");
            out.push(make(&EventRow { id, seq, delta: Some(&delta), raw, created_at, ..*event })?);
        }
        Ok(full(out))
    }
}
