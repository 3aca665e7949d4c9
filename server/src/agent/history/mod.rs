//! Folding an agent's log with the shared timeline reducer, and the snapshots that let the
//! next fold start where the last one ended. Read by the history pages and by the next turn.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use app::timeline::Timeline;
use uuid::Uuid;

use crate::store::{EventLog, StoreError, StoredSnapshot};

/// Events read per store page while folding a log.
const FOLD_PAGE_EVENTS: u32 = 1000;
/// Events one fold reads at most. A longer log (with no snapshot near its head) is folded from
/// the first run that starts within its last `FOLD_EVENTS_MAX` events: the page and the next
/// turn's conversation see the recent runs, and a request's time and memory stay bounded
/// however long the log grows. Twice the default per-run limit, so the window always holds a
/// run start (`agent::registry::RUN_EVENTS_MAX_DEFAULT`).
pub const FOLD_EVENTS_MAX: u64 = 200_000;

/// Agents whose folded timeline is kept in memory, at most (least recently used goes first).
pub const TIMELINE_SNAPSHOTS_MAX: usize = 256;
/// The kept timelines' estimated size, at most (least recently used goes first); a timeline
/// larger than this alone is not kept.
pub const TIMELINE_SNAPSHOT_BYTES_MAX: usize = 64 * 1024 * 1024;
/// Logs shorter than this are folded from the start each time; keeping them saves little.
pub const SNAPSHOT_EVENTS_MIN: u64 = 1_000;
/// A fold that read this many events or more saves its result in the store, so the first fold
/// after a restart starts there instead of reading a long log again.
pub const SNAPSHOT_PERSIST_EVENTS_MIN: u64 = 10_000;
/// A saved snapshot larger than this (as JSON) is not read: the log is folded instead.
pub const SNAPSHOT_JSON_BYTES_MAX: usize = 256 * 1024 * 1024;

/// Folded timelines of recently read logs: a snapshot at seq N is the fold of seqs 1..=N (or of
/// a long log's tail up to N), and as the log is append-only and seqs never change, it stays
/// true; the next fold of the agent starts from it and applies only what came after. The log
/// stays the source of truth: a snapshot is only ever made by folding the log, and is dropped
/// with its agent.
pub struct Snapshots {
    kept: Mutex<Kept>,
    bytes_max: usize,
}

impl Default for Snapshots {
    fn default() -> Snapshots {
        Snapshots::with_bytes_max(TIMELINE_SNAPSHOT_BYTES_MAX)
    }
}

#[derive(Default)]
struct Kept {
    /// By agent: the snapshot, when it was last used, its estimated size.
    map: HashMap<Uuid, (Arc<Timeline>, u64, usize)>,
    clock: u64,
    bytes: usize,
}

impl Snapshots {
    /// Snapshots within `bytes_max` (estimated) in all.
    pub fn with_bytes_max(bytes_max: usize) -> Snapshots {
        Snapshots { kept: Mutex::default(), bytes_max }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The newest snapshot of the agent's log, if one is kept.
    pub fn get(&self, agent_id: Uuid) -> Option<Arc<Timeline>> {
        let mut kept = self.kept();
        kept.clock += 1;
        let clock = kept.clock;
        let (timeline, used, _) = kept.map.get_mut(&agent_id)?;
        *used = clock;
        Some(timeline.clone())
    }

    /// Keeps `timeline` unless a snapshot at least as new is kept already, making room by
    /// dropping the least recently used; a timeline over the whole byte budget is not kept.
    pub fn put(&self, agent_id: Uuid, timeline: Arc<Timeline>) {
        let size = timeline_bytes(&timeline);
        let mut kept = self.kept();
        kept.clock += 1;
        if let Some((held, _, _)) = kept.map.get(&agent_id) {
            if held.last_seq() >= timeline.last_seq() {
                return;
            }
        }
        if let Some((_, _, old)) = kept.map.remove(&agent_id) {
            kept.bytes -= old;
        }
        if size > self.bytes_max {
            return;
        }
        while kept.map.len() >= TIMELINE_SNAPSHOTS_MAX || kept.bytes + size > self.bytes_max {
            let oldest = kept.map.iter().min_by_key(|(_, (_, used, _))| *used).map(|(id, _)| *id);
            let Some((_, _, freed)) = oldest.and_then(|oldest| kept.map.remove(&oldest)) else {
                break;
            };
            kept.bytes -= freed;
        }
        let clock = kept.clock;
        kept.bytes += size;
        kept.map.insert(agent_id, (timeline, clock, size));
    }

    /// Forgets a deleted agent's snapshot.
    pub fn remove(&self, agent_id: Uuid) {
        let mut kept = self.kept();
        if let Some((_, _, size)) = kept.map.remove(&agent_id) {
            kept.bytes -= size;
        }
    }

    /// How many snapshots are kept.
    pub fn len(&self) -> usize {
        self.kept().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The kept snapshots' estimated size.
    pub fn bytes(&self) -> usize {
        self.kept().bytes
    }
}

/// A folded timeline's size in memory, estimated: its messages' content and raw JSON as
/// serialized, plus a fixed cost per message, block and run for ids, seqs and index entries.
pub fn timeline_bytes(timeline: &Timeline) -> usize {
    const ENTRY_BYTES: usize = 160;
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let json = |value: &serde_json::Value| {
        let mut count = Count(0);
        let _ = serde_json::to_writer(&mut count, value);
        count.0
    };
    let messages: usize = timeline
        .messages()
        .iter()
        .map(|message| ENTRY_BYTES + json(&message.content) + message.raw.as_ref().map_or(0, json))
        .sum();
    messages + ENTRY_BYTES * (timeline.blocks().len() + timeline.runs().len())
}

/// Folds the log of `agent_id` with the shared reducer: from the agent's snapshot when one is
/// kept (only the events after it are read), from the start otherwise — or, when that would read
/// more than [`FOLD_EVENTS_MAX`] events, from the first run start among the last ones
/// ([`Timeline::omitted_through`] says what was left out). Keeps the result as the new snapshot
/// once the log is long enough to be worth it.
pub async fn fold_log(
    store: &dyn EventLog,
    snapshots: &Snapshots,
    agent_id: Uuid,
) -> Result<Timeline, StoreError> {
    fold_log_within(store, snapshots, agent_id, FOLD_EVENTS_MAX).await
}

/// [`fold_log`], reading at most `events_max` events.
pub async fn fold_log_within(
    store: &dyn EventLog,
    snapshots: &Snapshots,
    agent_id: Uuid,
    events_max: u64,
) -> Result<Timeline, StoreError> {
    let head = store.head_seq(agent_id).await?.unwrap_or(0);
    let window_start = head.saturating_sub(events_max);
    let start = snapshots.get(agent_id).filter(|snapshot| snapshot.last_seq() >= window_start);
    let from = start.as_ref().map_or(0, |snapshot| snapshot.last_seq());
    let mut timeline = match start {
        Some(snapshot) => (*snapshot).clone(),
        None => match saved_snapshot(store, agent_id, window_start).await? {
            Some(saved) => saved,
            None if window_start > 0 => tail_from_run_start(store, agent_id, window_start).await?,
            None => Timeline::default(),
        },
    };
    let read_from = timeline.last_seq();
    let mut last_id = None;
    loop {
        let events = store.read_events(agent_id, timeline.last_seq(), FOLD_PAGE_EVENTS).await?;
        let full_page = events.len() as u32 == FOLD_PAGE_EVENTS;
        last_id = events.last().map(|event| event.id).or(last_id);
        timeline.apply_all(events);
        if !full_page {
            break;
        }
    }
    // A fold from a snapshot can cover more than the window: the runs that began before it go.
    if timeline.last_seq() - timeline.omitted_through() > events_max {
        let window_start = timeline.last_seq() - events_max;
        let first_in_window = timeline
            .runs()
            .iter()
            .find(|run| run.first_seq > window_start)
            .map(|run| run.first_seq);
        if let Some(run_start) = first_in_window {
            timeline.forget_before(run_start);
        }
    }
    if let Some(event_id) = last_id {
        if timeline.last_seq() - read_from >= SNAPSHOT_PERSIST_EVENTS_MIN {
            save_snapshot(store, agent_id, &timeline, event_id).await;
        }
    }
    let folded = timeline.last_seq() - timeline.omitted_through();
    if folded >= SNAPSHOT_EVENTS_MIN && timeline.last_seq() > from {
        let timeline = Arc::new(timeline);
        snapshots.put(agent_id, timeline.clone());
        return Ok(Arc::unwrap_or_clone(timeline));
    }
    Ok(timeline)
}

/// The agent's saved snapshot, when there is one the log agrees with (the event at its seq is
/// still the one it was folded through) and it is within the window; `None` otherwise, and the
/// log is folded instead (a snapshot that disagrees is replaced by that fold's).
async fn saved_snapshot(
    store: &dyn EventLog,
    agent_id: Uuid,
    window_start: u64,
) -> Result<Option<Timeline>, StoreError> {
    let saved = match store.load_snapshot(agent_id).await {
        Ok(Some(saved)) if saved.last_seq >= window_start.max(1) => saved,
        Ok(_) => return Ok(None),
        Err(error) => {
            tracing::warn!(%agent_id, %error, "cannot read the saved snapshot; folding the log");
            return Ok(None);
        }
    };
    let at = store.read_events(agent_id, saved.last_seq - 1, 1).await?;
    if at.first().map(|event| (event.seq, event.id)) != Some((saved.last_seq, saved.event_id)) {
        tracing::warn!(%agent_id, seq = saved.last_seq, "the saved snapshot disagrees with the log; folding the log");
        return Ok(None);
    }
    let timeline =
        miniz_oxide::inflate::decompress_to_vec_with_limit(&saved.body, SNAPSHOT_JSON_BYTES_MAX)
            .map_err(|error| error.to_string())
            .and_then(|json| {
                serde_json::from_slice::<Timeline>(&json).map_err(|error| error.to_string())
            });
    match timeline {
        Ok(timeline) if timeline.last_seq() == saved.last_seq => Ok(Some(timeline)),
        Ok(timeline) => {
            tracing::warn!(%agent_id, seq = saved.last_seq, folded = timeline.last_seq(), "the saved snapshot's fold ends elsewhere; folding the log");
            Ok(None)
        }
        Err(error) => {
            tracing::warn!(%agent_id, %error, "the saved snapshot does not decode; folding the log");
            Ok(None)
        }
    }
}

/// Saves `timeline` (folded through the event `event_id`) as the agent's snapshot. A failure
/// costs only the next restart's fold: it is logged, not returned.
async fn save_snapshot(store: &dyn EventLog, agent_id: Uuid, timeline: &Timeline, event_id: Uuid) {
    let json = serde_json::to_vec(timeline).expect("timelines serialize");
    let snapshot = StoredSnapshot {
        last_seq: timeline.last_seq(),
        event_id,
        body: miniz_oxide::deflate::compress_to_vec(&json, SNAPSHOT_DEFLATE_LEVEL),
    };
    if let Err(error) = store.save_snapshot(agent_id, &snapshot).await {
        tracing::warn!(%agent_id, %error, "cannot save the snapshot");
    }
}

/// Deflate's level for saved snapshots: fast (a snapshot is written in a request's path).
const SNAPSHOT_DEFLATE_LEVEL: u8 = 1;

/// The fold of the log from the first `run_started` after `after`, as far as the page that
/// holds it (the caller reads on from there). Reads forward page by page; the window holds at
/// most the fold's `events_max` events.
async fn tail_from_run_start(
    store: &dyn EventLog,
    agent_id: Uuid,
    after: u64,
) -> Result<Timeline, StoreError> {
    let mut since = after;
    loop {
        let mut events = store.read_events(agent_id, since, FOLD_PAGE_EVENTS).await?;
        let full_page = events.len() as u32 == FOLD_PAGE_EVENTS;
        if let Some(start) =
            events.iter().position(|event| event.kind == app::EventKind::RunStarted)
        {
            let mut timeline = Timeline::starting_after(events[start].seq - 1);
            timeline.apply_all(events.drain(start..));
            return Ok(timeline);
        }
        match events.last() {
            Some(last) if full_page => since = last.seq,
            // No run starts in the window (one run longer than it): fold from the window, its
            // first message possibly partial.
            _ => return Ok(Timeline::starting_after(after)),
        }
    }
}

#[cfg(test)]
mod tests;
