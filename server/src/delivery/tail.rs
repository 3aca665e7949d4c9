//! Resident tails of agent logs: per agent, the newest batches this server published, served to
//! catch-up reads (a WebSocket or SSE resume, a REST page) out of memory instead of the store.
//!
//! **Why.** A 10 000-event resume over WebSocket spent most of its time reading pages from the
//! store (expanding the compact rows and printing each event: ~1 µs an event, more beside a
//! client on this 2-core machine), page after page. The events were in memory a moment before:
//! the writer publishes every commit to the hub. A tail keeps those batches (shared with the
//! room's subscribers, not copied) and their JSON, printed once by whoever asks first.
//!
//! **What stays true.**
//! - A tail holds only committed events (the hub publishes after the commit), exactly as the log
//!   has them, at their seqs, as one contiguous run of the log: a batch whose first seq does not
//!   follow the tail starts it over (another server's commit, a commit not published).
//! - A read is served from a tail only from its first seq on; what the tail does not reach (older
//!   seqs, or newer ones another server or an unpublished commit wrote) is read from the store
//!   ([`read_json`]), so a page is always as long as the log allows.
//! - Bounded per agent ([`LOG_TAIL_BYTES_MAX`]: the oldest batches go first) and in all
//!   ([`LOG_TAILS_BYTES_MAX`]: the least recently used agents' tails go first). A deleted log's
//!   tail goes with its room ([`crate::delivery::hub::Hub::close`]).
//!
//! Bytes are estimated, not measured: an event's values' text (strings and keys at their length,
//! every other leaf at 8) plus [`EVENT_RESIDENT_BYTES_FIXED`], counted twice (the tree and, once
//! a reader asked for it, its JSON).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use app::AgentEvent;
use serde_json::Value;
use uuid::Uuid;

use super::hub::EventBatch;
use crate::store::{EventJson, EventLog, StoreResult};

/// Estimated bytes one agent's tail holds at most (about 10 000 token events); past it its
/// oldest batches are dropped.
pub const LOG_TAIL_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Estimated bytes all tails hold at most; past it the least recently used agents' tails are
/// dropped until a quarter is free. Small on purpose: with 128 MiB the engine bench (100 busy
/// logs) ran a fifth slower — the batches outlived their subscribers and the process touched
/// that much more memory; at 32 MiB it ran as fast as without tails (`bench --engine`).
pub const LOG_TAILS_BYTES_MAX: usize = 32 * 1024 * 1024;
/// An event's fixed share of the estimate: the struct, its ids, and its JSON's names and ids.
pub const EVENT_RESIDENT_BYTES_FIXED: usize = 512 + std::mem::size_of::<AgentEvent>();

/// The tails of every agent this server published to lately.
#[derive(Default)]
pub struct LogTails {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    tails: HashMap<Uuid, Tail>,
    bytes: usize,
    clock: u64,
}

struct Tail {
    /// Batches in seq order, each following the one before.
    batches: VecDeque<(EventBatch, usize)>,
    bytes: usize,
    /// When it was last appended to or read (a counter): the least recent go first.
    touched: u64,
}

impl Tail {
    fn first_seq(&self) -> Option<u64> {
        self.batches.front().and_then(|(batch, _)| batch.first()).map(|event| event.seq)
    }

    fn last_seq(&self) -> Option<u64> {
        self.batches.back().and_then(|(batch, _)| batch.last()).map(|event| event.seq)
    }
}

impl LogTails {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Held for map and deque operations only; a panic under it leaves them whole.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Agents with a tail, and the estimated bytes they hold.
    pub fn held(&self) -> (usize, usize) {
        let inner = self.inner();
        (inner.tails.len(), inner.bytes)
    }

    /// A batch just committed and published: it extends the agent's tail when it follows it,
    /// starts it over when it does not, and is ignored when the tail has it already. `batch`
    /// must be consecutive seqs of `agent_id`'s log (the hub's batches are).
    pub fn committed(&self, agent_id: Uuid, batch: EventBatch) {
        let (Some(first), Some(last)) = (batch.first(), batch.last()) else {
            return;
        };
        let (first, last) = (first.seq, last.seq);
        let bytes = batch_bytes(&batch);
        let mut inner = self.inner();
        inner.clock += 1;
        let clock = inner.clock;
        let tail = inner.tails.entry(agent_id).or_insert_with(|| Tail {
            batches: VecDeque::new(),
            bytes: 0,
            touched: clock,
        });
        tail.touched = clock;
        let mut freed = 0;
        match tail.last_seq() {
            Some(held) if last <= held => return,
            Some(held) if first == held + 1 => {}
            _ => {
                freed += tail.bytes;
                tail.batches.clear();
                tail.bytes = 0;
            }
        }
        tail.batches.push_back((batch, bytes));
        tail.bytes += bytes;
        while tail.bytes > LOG_TAIL_BYTES_MAX && tail.batches.len() > 1 {
            if let Some((_, dropped)) = tail.batches.pop_front() {
                tail.bytes -= dropped;
                freed += dropped;
            }
        }
        inner.bytes = inner.bytes + bytes - freed;
        if inner.bytes > LOG_TAILS_BYTES_MAX {
            inner.evict();
        }
    }

    /// Events after `after`, at most `limit`, as far as the agent's tail reaches: `None` when
    /// it does not hold `after + 1` (read the store). The JSON is made outside the lock.
    pub fn read(&self, agent_id: Uuid, after: u64, limit: u32) -> Option<Vec<EventJson>> {
        let batches: Vec<EventBatch> = {
            let mut inner = self.inner();
            inner.clock += 1;
            let clock = inner.clock;
            let tail = inner.tails.get_mut(&agent_id)?;
            let (first, last) = (tail.first_seq()?, tail.last_seq()?);
            if first > after + 1 || last <= after {
                return None;
            }
            tail.touched = clock;
            let end = after.saturating_add(u64::from(limit));
            tail.batches
                .iter()
                .filter(|(batch, _)| {
                    batch.last().is_some_and(|event| event.seq > after)
                        && batch.first().is_some_and(|event| event.seq <= end)
                })
                .map(|(batch, _)| batch.clone())
                .collect()
        };
        let mut events = Vec::with_capacity(limit.min(4_096) as usize);
        for batch in batches {
            let json = batch.json();
            let from = json.partition_point(|event| event.seq <= after);
            let room = limit as usize - events.len();
            events.extend(json[from..].iter().take(room).cloned());
            if events.len() == limit as usize {
                break;
            }
        }
        Some(events)
    }

    /// Drops the agent's tail (its log was deleted).
    pub fn forget(&self, agent_id: Uuid) {
        let mut inner = self.inner();
        if let Some(tail) = inner.tails.remove(&agent_id) {
            inner.bytes -= tail.bytes;
        }
    }
}

impl Inner {
    /// Drops the least recently used tails until a quarter of the bound is free.
    fn evict(&mut self) {
        let target = LOG_TAILS_BYTES_MAX / 4 * 3;
        let mut order: Vec<(u64, Uuid)> =
            self.tails.iter().map(|(agent_id, tail)| (tail.touched, *agent_id)).collect();
        order.sort_unstable();
        for (_, agent_id) in order {
            if self.bytes <= target {
                break;
            }
            if let Some(tail) = self.tails.remove(&agent_id) {
                self.bytes -= tail.bytes;
            }
        }
    }
}

/// Events of `agent_id` after `after`, at most `limit`, as JSON: from the tail as far as it
/// reaches, the rest (or all) from the store. The same page the store alone would give.
pub async fn read_json(
    store: &dyn EventLog,
    tails: &LogTails,
    agent_id: Uuid,
    after: u64,
    limit: u32,
) -> StoreResult<Vec<EventJson>> {
    let Some(mut events) = tails.read(agent_id, after, limit) else {
        return store.read_events_json(agent_id, after, limit).await;
    };
    let read = events.len() as u32;
    if read < limit {
        // The tail ends at what this server published; the log may hold more.
        let newest = events.last().map_or(after, |event| event.seq);
        events.extend(store.read_events_json(agent_id, newest, limit - read).await?);
    }
    Ok(events)
}

/// The estimate of a batch's resident bytes (see the module's doc).
fn batch_bytes(batch: &[AgentEvent]) -> usize {
    batch
        .iter()
        .map(|event| {
            let values = [event.delta.as_ref(), Some(&event.content), event.raw.as_ref()];
            let text: usize = values.into_iter().flatten().map(value_bytes).sum::<usize>()
                + value_bytes(&event.metadata)
                + event.delta_path.as_ref().map_or(0, String::len);
            2 * (EVENT_RESIDENT_BYTES_FIXED + text)
        })
        .sum()
}

/// A value's text, about: strings and keys at their length, other leaves at 8 (without
/// recursion: a value's depth is the sender's choice).
fn value_bytes(value: &Value) -> usize {
    let mut bytes = 0;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        bytes += match value {
            Value::String(text) => text.len() + 2,
            Value::Array(items) => {
                stack.extend(items);
                2 + items.len()
            }
            Value::Object(fields) => {
                stack.extend(fields.values());
                2 + fields.keys().map(|name| name.len() + 4).sum::<usize>()
            }
            _ => 8,
        };
    }
    bytes
}

#[cfg(test)]
mod tests;
