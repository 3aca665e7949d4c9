//! Reads of a stream's messages: from the resident tail when it holds the range, else from the
//! log (a fork's source chain first).

use serde_json::Value;

use super::{Service, APPEND_MESSAGES_MAX, READ_BODY_BYTES_MAX, READ_MESSAGES_MAX};
use crate::store::{StoreError, StreamRow};
use crate::surfaces::durable::fork;
use crate::surfaces::durable::messages::{Messages, Tails};

impl Service {
    /// The messages after offset `since` (at most a page) as `(offset, content as JSON text)`,
    /// and the tail.
    /// A fork's first come from its source chain, up to where it was forked.
    pub async fn read(&self, row: &StreamRow, since: u64) -> Result<(Messages, u64), StoreError> {
        let head = self.store.head_seq(row.log_id).await?.unwrap_or(0);
        let tail = row.base_offset + head;
        let mut out = Messages::default();
        if since >= tail {
            return Ok((out, tail));
        }
        // From the stream's own log (not a fork's source): a tail this server holds up to the
        // head is one copy from memory.
        if since >= row.base_offset {
            let resident = self.tails.lock().expect("tails").read(
                row.log_id,
                since - row.base_offset,
                head,
                row.base_offset,
                READ_MESSAGES_MAX as usize,
                READ_BODY_BYTES_MAX,
            );
            if let Some(resident) = resident {
                return Ok((resident, tail));
            }
        }
        fork::read_chain(self, row, since, None, &mut out).await?;
        // Read up to the head: the next read of this range is memory's (after a restart, the
        // first read of a stream is the database's, the next ones are not).
        // Built before the lock: the copy of a page is not made while appends wait for it, nor
        // at all when the tail already reaches the head (a catch-up from a long stream's start).
        if self.tails.lock().expect("tails").reaches(row.log_id, head) {
            return Ok((out, tail));
        }
        if let Some((first_seq, run)) = Tails::own_run(head, row.base_offset, &out) {
            let mut tails = self.tails.lock().expect("tails");
            tails.install(row.log_id, head, first_seq, run);
        }
        Ok((out, tail))
    }

    /// `row`'s own messages after offset `since`, up to offset `cap`, into `out` (a page at
    /// most, by count and bytes).
    pub(in crate::surfaces::durable) async fn read_own(
        &self,
        row: &StreamRow,
        since: u64,
        cap: Option<u64>,
        out: &mut Messages,
    ) -> Result<(), StoreError> {
        let room = READ_MESSAGES_MAX.saturating_sub(out.len() as u32);
        if room == 0 {
            return Ok(());
        }
        let own_since = since.saturating_sub(row.base_offset);
        // The contents as the log keeps them (JSON text): served as they are, no tree built.
        let page = self.store.read_contents(row.log_id, own_since, room).await?;
        out.extend_page(row.base_offset, cap, READ_BODY_BYTES_MAX, page);
        Ok(())
    }

    /// The batch (one append) each of `row`'s own messages after `since` came in, for a JSON
    /// fork's sub-offset: the first message's batch and how many messages it has.
    pub(in crate::surfaces::durable) async fn first_batch(
        &self,
        row: &StreamRow,
        since: u64,
    ) -> Result<Vec<(Option<uuid::Uuid>, Value)>, StoreError> {
        let own_since = since.saturating_sub(row.base_offset);
        let events =
            self.store.read_events(row.log_id, own_since, APPEND_MESSAGES_MAX as u32).await?;
        let batch = events.first().and_then(|event| event.block_id);
        Ok(events
            .into_iter()
            .take_while(|event| event.block_id == batch)
            .map(|event| (event.block_id, event.content))
            .collect())
    }
}
