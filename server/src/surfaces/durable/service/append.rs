//! Appends (and closes) under the path's lock: the content type, `Stream-Seq` and the producer
//! fence checked, the messages committed through the writer (with the producer's position),
//! the resident tail filled from what was committed.

use serde_json::json;

use super::{drafts, messages_of, now_ms, Append, Appended, Refusal, Service};
use crate::agent::produce::fence::{fence, Fence};
use crate::store::{ProducerStamp, StoreError};
use crate::surfaces::durable::protocol;

impl Service {
    /// Appends (and closes, when asked) under the path's lock. A producer's append whose
    /// position another server moved between the fence and the commit is fenced again (it is
    /// then a duplicate, a gap, or the next append).
    pub async fn append(&self, path: &str, append: Append<'_>) -> Result<Appended, Refusal> {
        let mut attempts = 1;
        loop {
            match self.append_once(path, append.clone()).await {
                Err(Refusal::Store(StoreError::ProducerMoved { .. }))
                    if attempts < crate::agent::produce::PRODUCER_FENCE_ATTEMPTS_MAX =>
                {
                    attempts += 1;
                }
                answer => return answer,
            }
        }
    }

    async fn append_once(&self, path: &str, append: Append<'_>) -> Result<Appended, Refusal> {
        let held = self.hold(path);
        let _writing = held.state.writing.lock().await;
        let mut row = self.live(path).await?;
        let closer = append
            .producer
            .as_ref()
            .map(|producer| json!({ "producer_id": producer.id, "epoch": producer.epoch, "seq": producer.seq }));
        if row.closed {
            // The request that closed it, again (or any plain close: closing is idempotent):
            // answered as it was.
            let plain_close = append.body.is_empty() && append.close && closer.is_none();
            if plain_close || (closer.is_some() && row.closed_by == closer) {
                return Ok(Appended {
                    tail: self.tail(&row).await?,
                    closed: true,
                    duplicate: true,
                    producer_seq: append.producer.map(|producer| producer.seq),
                });
            }
            return Err(Refusal::Closed { tail: self.tail(&row).await? });
        }
        let close_only = append.body.is_empty() && append.close;
        if !close_only {
            if append.body.is_empty() {
                return Err(Refusal::Bad("Empty body"));
            }
            let given =
                append.content_type.ok_or(Refusal::Bad("Content-Type header is required"))?;
            if protocol::media_type(given) != protocol::media_type(&row.content_type) {
                return Err(Refusal::Conflict("Content-type mismatch"));
            }
        }
        let mut stamp = None;
        if let Some(producer) = &append.producer {
            let position = self
                .store
                .producer_position(row.log_id, &producer.id)
                .await?
                .map(|position| (position.stamp.epoch, position.stamp.seq));
            match fence(position, producer.epoch, producer.seq) {
                Fence::Append => {}
                Fence::Duplicate => {
                    return Ok(Appended {
                        tail: self.tail(&row).await?,
                        closed: row.closed,
                        duplicate: true,
                        producer_seq: position.map(|(_, seq)| seq),
                    })
                }
                refused => return Err(Refusal::Fenced(refused)),
            }
            stamp = Some(ProducerStamp {
                producer_id: producer.id.clone(),
                epoch: producer.epoch,
                seq: producer.seq,
                run_id: None,
                fenced_at: position,
            });
        }
        if let (Some(seq), Some(last)) = (append.stream_seq, &row.stream_seq) {
            if seq <= last.as_str() {
                return Err(Refusal::Conflict("Sequence conflict"));
            }
        }
        let messages = if close_only {
            Vec::new()
        } else {
            messages_of(&row.content_type, append.body, false)?
        };
        // The tail after the append: its last message's offset, read only when none was written.
        let mut tail = None;
        if !messages.is_empty() || stamp.is_some() {
            let drafts = drafts(messages);
            let committed = match stamp {
                Some(stamp) if !drafts.is_empty() => {
                    self.writer.append_produced(row.log_id, drafts, stamp, false).await
                }
                _ if drafts.is_empty() => Ok(Vec::new()),
                _ => self.writer.append(row.log_id, drafts).await,
            };
            let committed = match committed {
                Ok(committed) => committed,
                Err(error) => {
                    // Written or not, unknown: the tail starts over at the next commit.
                    self.tails.lock().expect("tails").forget(row.log_id);
                    return Err(error.into());
                }
            };
            if let Some(first) = committed.first() {
                // A stream message's content is its JSON text (`protocol::stored`).
                let texts: Vec<_> = committed
                    .iter()
                    .map(|event| crate::store::rows::message_text(&event.content))
                    .collect();
                self.tails.lock().expect("tails").committed(
                    row.log_id,
                    first.seq,
                    texts.iter().map(|text| text.as_ref()),
                );
            }
            if let Some(last) = committed.last() {
                tail = Some(row.base_offset + last.seq);
            }
        }
        if let Some(seq) = append.stream_seq {
            row.stream_seq = Some(seq.to_owned());
        }
        if append.close {
            row.closed = true;
            row.closed_by = closer;
        }
        // The row changes only for a Stream-Seq, a close, or a TTL that counts from now: a plain
        // append is one commit, the log's (a second write per append halved the rate).
        if append.stream_seq.is_some() || append.close || row.ttl_seconds.is_some() {
            row.accessed_at = now_ms();
            let written = self.store.update_stream(&row).await;
            self.forget_row(path);
            written?;
        }
        if append.close {
            held.state.bump();
        }
        let tail = match tail {
            Some(tail) => tail,
            None => self.tail(&row).await?,
        };
        Ok(Appended {
            tail,
            closed: row.closed,
            duplicate: false,
            producer_seq: append.producer.map(|producer| producer.seq),
        })
    }
}
