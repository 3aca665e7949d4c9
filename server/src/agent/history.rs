//! Folding an agent's log with the shared timeline reducer, and the snapshots that let the
//! next fold start where the last one ended. Read by the history pages and by the next turn.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use app::timeline::Timeline;
use uuid::Uuid;

use crate::store::{EventLog, StoreError};

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
        Snapshots {
            kept: Mutex::default(),
            bytes_max,
        }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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
            let oldest = kept
                .map
                .iter()
                .min_by_key(|(_, (_, used, _))| *used)
                .map(|(id, _)| *id);
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
    let start = snapshots
        .get(agent_id)
        .filter(|snapshot| snapshot.last_seq() >= window_start);
    let from = start.as_ref().map_or(0, |snapshot| snapshot.last_seq());
    let mut timeline = match start {
        Some(snapshot) => (*snapshot).clone(),
        None if window_start > 0 => tail_from_run_start(store, agent_id, window_start).await?,
        None => Timeline::default(),
    };
    loop {
        let events = store
            .read_events(agent_id, timeline.last_seq(), FOLD_PAGE_EVENTS)
            .await?;
        let full_page = events.len() as u32 == FOLD_PAGE_EVENTS;
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
    let folded = timeline.last_seq() - timeline.omitted_through();
    if folded >= SNAPSHOT_EVENTS_MIN && timeline.last_seq() > from {
        let timeline = Arc::new(timeline);
        snapshots.put(agent_id, timeline.clone());
        return Ok(Arc::unwrap_or_clone(timeline));
    }
    Ok(timeline)
}

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
        if let Some(start) = events
            .iter()
            .position(|event| event.kind == app::EventKind::RunStarted)
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
mod tests {
    use super::*;
    use crate::store::sqlite::SqliteStore;
    use crate::store::{Agents, AppendBatch, EventDraft, NewAgent};
    use app::DeltaAction;
    use app::EventKind;
    use serde_json::Value;

    /// `count` text deltas to `message`, each its own word.
    fn deltas(message: Uuid, from: usize, count: usize) -> Vec<EventDraft> {
        (from..from + count)
            .map(|index| {
                let mut draft = EventDraft::new(EventKind::Text);
                draft.message_id = Some(message);
                draft.block_id = Some(message);
                draft.delta = Some(Value::String(format!("w{index} ")));
                draft.delta_path = Some("text".into());
                draft.delta_action = Some(DeltaAction::Append);
                draft
            })
            .collect()
    }

    /// A second fold starts from the snapshot the first one kept and reads only what came after:
    /// with the log's first events gone from the table, a fold from the start fails (the store
    /// finds the hole) while the fold from the snapshot succeeds, and it equals the fold the
    /// first events and the new ones make together.
    #[tokio::test]
    async fn a_fold_starts_from_the_snapshot_and_equals_the_whole_fold() {
        let directory = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", directory.path().join("s.db").display());
        let store = SqliteStore::open(&url).await.unwrap();
        let agent = store.create_agent(NewAgent::default()).await.unwrap();
        let (first, second) = (Uuid::now_v7(), Uuid::now_v7());
        store
            .append(&[AppendBatch {
                agent_id: agent.id,
                drafts: deltas(first, 0, 1_200),
            }])
            .await
            .unwrap();
        let snapshots = Snapshots::default();
        let folded = fold_log(&store, &snapshots, agent.id).await.unwrap();
        assert_eq!(folded.last_seq(), 1_200);
        assert_eq!(snapshots.len(), 1);

        let mut more = deltas(first, 1_200, 30);
        more.extend(deltas(second, 0, 20));
        store
            .append(&[AppendBatch {
                agent_id: agent.id,
                drafts: more,
            }])
            .await
            .unwrap();
        let whole = fold_log(&store, &Snapshots::default(), agent.id)
            .await
            .unwrap();

        sqlx::query("DELETE FROM events WHERE first_seq <= 600")
            .execute(store.pool())
            .await
            .unwrap();
        assert!(fold_log(&store, &Snapshots::default(), agent.id)
            .await
            .is_err());
        let from_snapshot = fold_log(&store, &snapshots, agent.id).await.unwrap();
        assert_eq!(from_snapshot, whole);
        assert_eq!(from_snapshot.last_seq(), 1_250);
        assert_eq!(snapshots.get(agent.id).unwrap().last_seq(), 1_250);
        let text = from_snapshot.messages()[0].content["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            text.starts_with("w0 w1 ") && text.ends_with("w1228 w1229 "),
            "{text:.40}"
        );
    }

    /// The kept snapshots are bounded; the least recently used goes first, and a snapshot never
    /// goes back to an older fold.
    #[test]
    fn snapshots_are_bounded_and_only_move_forward() {
        let snapshots = Snapshots::default();
        let agents: Vec<Uuid> = (0..=TIMELINE_SNAPSHOTS_MAX as u128)
            .map(Uuid::from_u128)
            .collect();
        let folded = |seq: u64| {
            let mut timeline = Timeline::new();
            for seq in 1..=seq {
                let mut draft = EventDraft::new(EventKind::Text);
                draft.message_id = Some(Uuid::from_u128(7));
                timeline.apply(draft.into_event(Uuid::nil(), seq));
            }
            Arc::new(timeline)
        };
        for &agent in &agents[..TIMELINE_SNAPSHOTS_MAX] {
            snapshots.put(agent, folded(2));
        }
        assert!(snapshots.get(agents[0]).is_some()); // agents[1] is now the least recently used
        snapshots.put(agents[TIMELINE_SNAPSHOTS_MAX], folded(1));
        assert_eq!(snapshots.len(), TIMELINE_SNAPSHOTS_MAX);
        assert!(snapshots.get(agents[1]).is_none());
        assert!(snapshots.get(agents[0]).is_some());

        snapshots.put(agents[0], folded(1));
        assert_eq!(snapshots.get(agents[0]).unwrap().last_seq(), 2);
        snapshots.put(agents[0], folded(3));
        assert_eq!(snapshots.get(agents[0]).unwrap().last_seq(), 3);
        snapshots.remove(agents[0]);
        assert!(snapshots.get(agents[0]).is_none());
    }

    /// One run: its start, `words` text deltas to one message, its end.
    fn run(words: usize) -> Vec<EventDraft> {
        let run_id = Uuid::now_v7();
        let mut drafts = vec![EventDraft::new(EventKind::RunStarted)];
        drafts.extend(deltas(Uuid::now_v7(), 0, words));
        drafts.push(EventDraft::new(EventKind::RunCompleted));
        for draft in &mut drafts {
            draft.run_id = Some(run_id);
        }
        drafts
    }

    /// A log longer than the fold may read is folded from the first run that starts within its
    /// last `events_max` events: whole messages of the recent runs, the rest said to be left out.
    #[tokio::test]
    async fn a_long_log_is_folded_from_a_run_start_within_the_window() {
        let directory = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", directory.path().join("s.db").display());
        let store = SqliteStore::open(&url).await.unwrap();
        let agent = store.create_agent(NewAgent::default()).await.unwrap();
        for _ in 0..5 {
            // 22 events each: run starts at seqs 1, 23, 45, 67, 89; the log ends at 110.
            store
                .append(&[AppendBatch {
                    agent_id: agent.id,
                    drafts: run(20),
                }])
                .await
                .unwrap();
        }
        let whole = fold_log(&store, &Snapshots::default(), agent.id)
            .await
            .unwrap();
        assert_eq!((whole.messages().len(), whole.omitted_through()), (5, 0));

        let tail = fold_log_within(&store, &Snapshots::default(), agent.id, 50)
            .await
            .unwrap();
        assert_eq!(tail.omitted_through(), 66, "the window starts after 60");
        assert_eq!(tail.last_seq(), 110);
        assert_eq!(tail.messages(), &whole.messages()[3..]);
        assert_eq!(tail.runs(), &whole.runs()[3..]);
        assert!(tail.messages()[0].text().starts_with("w0 w1 "));

        // From a snapshot of the whole log, the fold leaves out the runs before the window too.
        let snapshots = Snapshots::default();
        snapshots.put(agent.id, Arc::new(whole.clone()));
        let from_snapshot = fold_log_within(&store, &snapshots, agent.id, 50)
            .await
            .unwrap();
        assert_eq!(from_snapshot, tail);
    }

    /// The kept snapshots stay within their byte budget: the least recently used go first, and
    /// a timeline larger than the whole budget is not kept.
    #[test]
    fn snapshots_stay_within_their_byte_budget() {
        let folded = |words: usize| {
            let mut timeline = Timeline::new();
            for (index, draft) in deltas(Uuid::from_u128(7), 0, words).into_iter().enumerate() {
                timeline.apply(draft.into_event(Uuid::nil(), index as u64 + 1));
            }
            Arc::new(timeline)
        };
        let one = timeline_bytes(&folded(100));
        assert!(one > 600, "100 words of text cost what they hold: {one}");
        let snapshots = Snapshots::with_bytes_max(3 * one);
        let agents: Vec<Uuid> = (1..=4).map(Uuid::from_u128).collect();
        for &agent in &agents[..3] {
            snapshots.put(agent, folded(100));
        }
        assert_eq!((snapshots.len(), snapshots.bytes()), (3, 3 * one));
        assert!(snapshots.get(agents[0]).is_some()); // agents[1] is now the least recently used
        snapshots.put(agents[3], folded(100));
        assert_eq!((snapshots.len(), snapshots.bytes()), (3, 3 * one));
        assert!(snapshots.get(agents[1]).is_none());

        snapshots.put(agents[0], folded(400));
        assert!(snapshots.get(agents[0]).is_none(), "over the whole budget");
        assert!(snapshots.bytes() <= 3 * one);
        for agent in agents {
            snapshots.remove(agent);
        }
        assert_eq!((snapshots.len(), snapshots.bytes()), (0, 0));
    }
}
