//! Forks: a stream created with `Stream-Forked-From` reads its source (and the source's own
//! sources) up to the fork's offset, then its own messages — offsets continue where the
//! source's stopped. A sub-offset forks inside one append: JSON mode counts the batch's
//! messages (each has an offset of its own here, so the fork starts after the k-th), byte mode
//! copies the first k bytes of the next message as the fork's first own message. A source
//! deleted while forks read it is soft-deleted (410 for everyone else) and goes with its last
//! fork.

use serde_json::Value;

use super::messages::Messages;
use super::protocol::{self, ForkRequest, Message, Settings};
use super::refusal::Refusal;
use crate::store::{StoreError, StreamRow};

/// What a fork asks of the streams it sits on (the service answers: `service.rs`).
pub(super) trait Chain {
    /// The live stream at `path` (none when it is gone or expired).
    async fn get(&self, path: &str) -> Result<Option<StreamRow>, StoreError>;
    /// The stream's row as stored, soft-deleted or not.
    async fn store_stream(&self, path: &str) -> Result<Option<StreamRow>, StoreError>;
    /// The stream's tail offset.
    async fn tail(&self, row: &StreamRow) -> Result<u64, StoreError>;
    /// The batch (one append) of `row`'s first own message after `since`.
    async fn first_batch(
        &self,
        row: &StreamRow,
        since: u64,
    ) -> Result<Vec<(Option<uuid::Uuid>, Value)>, StoreError>;
    /// `row`'s own messages after `since`, up to `cap`, into `out`.
    async fn read_own(
        &self,
        row: &StreamRow,
        since: u64,
        cap: Option<u64>,
        out: &mut Messages,
    ) -> Result<(), StoreError>;
}

/// Forks of forks one stream may sit under at most: every read of a fork walks its chain, so
/// the chain is bounded (a deeper fork is refused with 400).
pub const FORK_CHAIN_DEPTH_MAX: usize = 64;

/// Checks a fork against its source and fills in `row`'s fork fields (content type and
/// lifetime inherited when not given). Returns the messages the fork starts with (a byte-mode
/// sub-offset's prefix).
pub(super) async fn plan(
    service: &impl Chain,
    fork: &ForkRequest,
    settings: &Settings,
    row: &mut StreamRow,
) -> Result<Vec<Message>, Refusal> {
    let source = match service.get(&fork.from).await? {
        None => return Err(Refusal::NotFoundSource),
        Some(source) if source.soft_deleted => {
            return Err(Refusal::Conflict("source stream was deleted but still has active forks"))
        }
        Some(source) => source,
    };
    match &settings.content_type {
        Some(given)
            if protocol::media_type(given) != protocol::media_type(&source.content_type) =>
        {
            return Err(Refusal::Conflict("Content type mismatch with source stream"))
        }
        Some(_) => {}
        None => row.content_type = source.content_type.clone(),
    }
    if chain_depth(service, &source).await? >= FORK_CHAIN_DEPTH_MAX {
        return Err(Refusal::Bad("Fork chain too deep: a stream may sit under at most 64 forks"));
    }
    if settings.ttl_seconds.is_none() && settings.expires_at.is_none() {
        row.ttl_seconds = source.ttl_seconds;
        row.expires_at = source.expires_at.clone();
    }
    let tail = service.tail(&source).await?;
    let offset = fork.offset.unwrap_or(tail);
    if offset > tail {
        return Err(Refusal::Bad("Fork offset beyond source stream length"));
    }
    row.forked_from = Some(source.path.clone());
    row.fork_offset = fork.offset;
    row.fork_sub_offset = fork.sub_offset;
    row.base_offset = offset;
    let sub = fork.sub_offset.unwrap_or(0);
    if sub == 0 {
        return Ok(Vec::new());
    }
    if protocol::is_json(&source.content_type) {
        // Each message of the batch has its own offset: the fork starts after the sub-th.
        let batch = first_batch_of_chain(service, &source, offset).await?;
        if batch.is_empty() {
            return Err(Refusal::Bad("Invalid fork sub-offset"));
        }
        if sub > batch.len() as u64 {
            return Err(Refusal::Bad("Invalid fork sub-offset"));
        }
        row.base_offset = offset + sub;
        return Ok(Vec::new());
    }
    let mut next = Messages::default();
    read_chain(service, &source, offset, Some(offset + 1), &mut next).await?;
    let Some((_, content)) = next.iter().next() else {
        return Err(Refusal::Bad("Invalid fork sub-offset"));
    };
    let bytes = protocol::message_bytes(content);
    if sub > bytes.len() as u64 {
        return Err(Refusal::Bad("Invalid fork sub-offset"));
    }
    Ok(vec![Message::Bytes(bytes[..sub as usize].to_vec())])
}

/// How many forks deep `row` sits (0: not a fork), counted up to one past the limit.
async fn chain_depth(service: &impl Chain, row: &StreamRow) -> Result<usize, StoreError> {
    let mut depth = 0;
    let mut from = row.forked_from.clone();
    while let Some(path) = from {
        depth += 1;
        if depth > FORK_CHAIN_DEPTH_MAX {
            break;
        }
        from = service.store_stream(&path).await?.and_then(|source| source.forked_from);
    }
    Ok(depth)
}

/// The messages of the append right after `offset` in `row`'s chain.
async fn first_batch_of_chain(
    service: &impl Chain,
    row: &StreamRow,
    offset: u64,
) -> Result<Vec<Value>, StoreError> {
    let mut current = row.clone();
    for _ in 0..=FORK_CHAIN_DEPTH_MAX {
        if offset >= current.base_offset || current.forked_from.is_none() {
            let batch = service.first_batch(&current, offset).await?;
            return Ok(batch.into_iter().map(|(_, content)| content).collect());
        }
        let from = current.forked_from.clone().unwrap_or_default();
        match service.store_stream(&from).await? {
            Some(source) => current = source,
            None => return Ok(Vec::new()),
        }
    }
    Ok(Vec::new())
}

/// `row`'s messages after offset `since` and up to `cap`, its source chain's first.
pub(super) async fn read_chain(
    service: &impl Chain,
    row: &StreamRow,
    since: u64,
    cap: Option<u64>,
    out: &mut Messages,
) -> Result<(), StoreError> {
    // The chain from the oldest source to `row`, each with the offset it is read up to.
    let mut chain = vec![(row.clone(), cap)];
    while let Some((current, current_cap)) =
        chain.last().filter(|_| chain.len() <= FORK_CHAIN_DEPTH_MAX).cloned()
    {
        let Some(from) = current.forked_from.clone() else {
            break;
        };
        if since >= current.base_offset {
            break;
        }
        let Some(source) = service.store_stream(&from).await? else {
            break;
        };
        // A source is read up to where its fork began (a JSON sub-offset's base).
        let source_cap =
            current_cap.map_or(current.base_offset, |cap| cap.min(current.base_offset));
        chain.push((source, Some(source_cap)));
    }
    for (stream, stream_cap) in chain.iter().rev() {
        service.read_own(stream, since, *stream_cap, out).await?;
    }
    Ok(())
}
