//! Folding an agent's log with the shared timeline reducer, and the snapshots that let the
//! next fold start where the last one ended. Read by the history pages and by the next turn.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use app::timeline::Timeline;
use uuid::Uuid;

use crate::store::{EventLog, StoreError};

/// Events read per store page while folding a log.
const FOLD_PAGE_EVENTS: u32 = 1000;

/// Agents whose folded timeline is kept in memory, at most (least recently used goes first).
/// Each costs what its folded conversation holds: the messages' merged content, not the deltas.
pub const TIMELINE_SNAPSHOTS_MAX: usize = 256;
/// Logs shorter than this are folded from the start each time; keeping them saves little.
pub const SNAPSHOT_EVENTS_MIN: u64 = 1_000;

/// Folded timelines of recently read logs: a snapshot at seq N is the fold of seqs 1..=N, and
/// as the log is append-only and seqs never change, it stays true; the next fold of the agent
/// starts from it and applies only what came after. The log stays the source of truth: a
/// snapshot is only ever made by folding the log, and is dropped with its agent.
#[derive(Default)]
pub struct Snapshots {
    kept: Mutex<Kept>,
}

/// By agent: the snapshot and when it was last used; then the use counter.
type Kept = (HashMap<Uuid, (Arc<Timeline>, u64)>, u64);

impl Snapshots {
    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The newest snapshot of the agent's log, if one is kept.
    pub fn get(&self, agent_id: Uuid) -> Option<Arc<Timeline>> {
        let mut kept = self.kept();
        let (map, clock) = &mut *kept;
        *clock += 1;
        let (timeline, used) = map.get_mut(&agent_id)?;
        *used = *clock;
        Some(timeline.clone())
    }

    /// Keeps `timeline` unless a snapshot at least as new is kept already.
    pub fn put(&self, agent_id: Uuid, timeline: Arc<Timeline>) {
        let mut kept = self.kept();
        let (map, clock) = &mut *kept;
        *clock += 1;
        if map
            .get(&agent_id)
            .is_some_and(|(held, _)| held.last_seq() >= timeline.last_seq())
        {
            return;
        }
        if !map.contains_key(&agent_id) && map.len() >= TIMELINE_SNAPSHOTS_MAX {
            let oldest = map
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(id, _)| *id);
            if let Some(oldest) = oldest {
                map.remove(&oldest);
            }
        }
        map.insert(agent_id, (timeline, *clock));
    }

    /// Forgets a deleted agent's snapshot.
    pub fn remove(&self, agent_id: Uuid) {
        self.kept().0.remove(&agent_id);
    }

    /// How many snapshots are kept.
    pub fn len(&self) -> usize {
        self.kept().0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Folds the log of `agent_id` with the shared reducer: from the agent's snapshot when one is
/// kept (only the events after it are read), from the start otherwise; keeps the result as the
/// new snapshot once the log is long enough to be worth it.
pub async fn fold_log(
    store: &dyn EventLog,
    snapshots: &Snapshots,
    agent_id: Uuid,
) -> Result<Timeline, StoreError> {
    let start = snapshots.get(agent_id);
    let from = start.as_ref().map_or(0, |snapshot| snapshot.last_seq());
    let mut timeline = start
        .map(|snapshot| (*snapshot).clone())
        .unwrap_or_default();
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
    if timeline.last_seq() >= SNAPSHOT_EVENTS_MIN && timeline.last_seq() > from {
        let timeline = Arc::new(timeline);
        snapshots.put(agent_id, timeline.clone());
        return Ok(Arc::unwrap_or_clone(timeline));
    }
    Ok(timeline)
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

        sqlx::query("DELETE FROM agent_events WHERE seq <= 600")
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
}
