use super::*;
use crate::store::sqlite::SqliteStore;
use crate::store::{Agents, AppendBatch, EventDraft, EventLog, NewAgent, StoredSnapshot};
use app::EventKind;
use serde_json::Value;

/// `count` text deltas to `message`, each its own word.
fn deltas(message: Uuid, from: usize, count: usize) -> Vec<EventDraft> {
    (from..from + count)
        .map(|index| {
            let mut draft = EventDraft::new(EventKind::Text)
                .appending("text", Value::String(format!("w{index} ")));
            draft.message_id = Some(message);
            draft.block_id = Some(message);
            draft
        })
        .collect()
}

/// Deletes the log's rows from the start through seq 600 (both tables of the SQLite store, in
/// one transaction: the store may move rows from `recent` into `events` between two).
async fn forget_the_first_600(store: &SqliteStore) {
    let mut transaction = store.pool().begin().await.unwrap();
    for table in ["events", "recent"] {
        sqlx::query(&format!("DELETE FROM {table} WHERE first_seq <= 600"))
            .execute(&mut *transaction)
            .await
            .unwrap();
    }
    transaction.commit().await.unwrap();
}

/// A second fold starts from the snapshot the first one kept and reads only what came after:
/// with the log's first events gone from the table, a fold from the start fails (the store
/// finds the hole) while the fold from the snapshot succeeds, and it equals the fold the
/// first events and the new ones make together.
#[tokio::test]
async fn a_fold_starts_from_the_snapshot_and_equals_the_whole_fold() {
    let (_directory, store) = SqliteStore::temporary().await;
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let (first, second) = (Uuid::now_v7(), Uuid::now_v7());
    store.append(&[AppendBatch::new(agent.id, deltas(first, 0, 1_200))]).await.unwrap();
    let snapshots = Snapshots::default();
    let folded = fold_log(&store, &snapshots, agent.id).await.unwrap();
    assert_eq!(folded.last_seq(), 1_200);
    assert_eq!(snapshots.len(), 1);

    let mut more = deltas(first, 1_200, 30);
    more.extend(deltas(second, 0, 20));
    store.append(&[AppendBatch::new(agent.id, more)]).await.unwrap();
    let whole = fold_log(&store, &Snapshots::default(), agent.id).await.unwrap();

    forget_the_first_600(&store).await;
    assert!(fold_log(&store, &Snapshots::default(), agent.id).await.is_err());
    let from_snapshot = fold_log(&store, &snapshots, agent.id).await.unwrap();
    assert_eq!(from_snapshot, whole);
    assert_eq!(from_snapshot.last_seq(), 1_250);
    assert_eq!(snapshots.get(agent.id).unwrap().last_seq(), 1_250);
    let text = from_snapshot.messages()[0].content["text"].as_str().unwrap().to_owned();
    assert!(text.starts_with("w0 w1 ") && text.ends_with("w1228 w1229 "), "{text:.40}");
}

/// The kept snapshots are bounded; the least recently used goes first, and a snapshot never
/// goes back to an older fold.
#[test]
fn snapshots_are_bounded_and_only_move_forward() {
    let snapshots = Snapshots::default();
    let agents: Vec<Uuid> = (0..=TIMELINE_SNAPSHOTS_MAX as u128).map(Uuid::from_u128).collect();
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
    let (_directory, store) = SqliteStore::temporary().await;
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    for _ in 0..5 {
        // 22 events each: run starts at seqs 1, 23, 45, 67, 89; the log ends at 110.
        store.append(&[AppendBatch::new(agent.id, run(20))]).await.unwrap();
    }
    let whole = fold_log(&store, &Snapshots::default(), agent.id).await.unwrap();
    assert_eq!((whole.messages().len(), whole.omitted_through()), (5, 0));

    let tail = fold_log_within(&store, &Snapshots::default(), agent.id, 50).await.unwrap();
    assert_eq!(tail.omitted_through(), 66, "the window starts after 60");
    assert_eq!(tail.last_seq(), 110);
    assert_eq!(tail.messages(), &whole.messages()[3..]);
    assert_eq!(tail.runs(), &whole.runs()[3..]);
    assert!(tail.messages()[0].text().starts_with("w0 w1 "));

    // From a snapshot of the whole log, the fold leaves out the runs before the window too.
    let snapshots = Snapshots::default();
    snapshots.put(agent.id, Arc::new(whole.clone()));
    let from_snapshot = fold_log_within(&store, &snapshots, agent.id, 50).await.unwrap();
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

/// The first fold after a restart (nothing in memory) starts from the snapshot the last long
/// fold saved in the store: with the log's first events gone from the table, only the saved
/// snapshot can give the fold, and it equals the fold of the whole log.
#[tokio::test]
async fn the_first_fold_after_a_restart_starts_from_the_saved_snapshot() {
    let (_directory, store) = SqliteStore::temporary().await;
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let message = Uuid::now_v7();
    let total = SNAPSHOT_PERSIST_EVENTS_MIN as usize + 500;
    for from in (0..total).step_by(1_000) {
        store
            .append(&[AppendBatch::new(agent.id, deltas(message, from, 1_000.min(total - from)))])
            .await
            .unwrap();
    }
    let whole = fold_log(&store, &Snapshots::default(), agent.id).await.unwrap();
    let saved = store.load_snapshot(agent.id).await.unwrap().unwrap();
    assert_eq!(saved.last_seq, total as u64);

    forget_the_first_600(&store).await;
    let after_restart = fold_log(&store, &Snapshots::default(), agent.id).await.unwrap();
    assert_eq!(after_restart, whole);
}

/// A saved snapshot the log disagrees with (the event at its seq is another) is not used: the
/// fold reads the log, and its result replaces the saved one.
#[tokio::test]
async fn a_saved_snapshot_the_log_disagrees_with_is_rebuilt() {
    let (_directory, store) = SqliteStore::temporary().await;
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let message = Uuid::now_v7();
    let total = SNAPSHOT_PERSIST_EVENTS_MIN as usize;
    store.append(&[AppendBatch::new(agent.id, deltas(message, 0, total))]).await.unwrap();
    // A snapshot of other text, claiming to be the fold through the log's last seq.
    let mut other = Timeline::default();
    let mut events = store.read_events(agent.id, 0, total as u32).await.unwrap();
    for event in &mut events {
        event.delta = Some(Value::String("x".into()));
    }
    let last = events.last().unwrap().clone();
    other.apply_all(events);
    let json = serde_json::to_vec(&other).unwrap();
    let forged = StoredSnapshot {
        last_seq: last.seq,
        event_id: Uuid::now_v7(),
        body: miniz_oxide::deflate::compress_to_vec(&json, 1),
    };
    store.save_snapshot(agent.id, &forged).await.unwrap();
    let folded = fold_log(&store, &Snapshots::default(), agent.id).await.unwrap();
    let text = folded.messages()[0].content["text"].as_str().unwrap();
    assert!(text.starts_with("w0 w1 "), "{text:.20}");
    let rebuilt = store.load_snapshot(agent.id).await.unwrap().unwrap();
    assert_eq!(rebuilt.event_id, last.id, "the fold's snapshot replaced the forged one");
    // The same forged body with the right event id is believed: the check is what refused it.
    let believed = StoredSnapshot { event_id: last.id, ..forged };
    sqlx::query("DELETE FROM timeline_snapshots").execute(store.pool()).await.unwrap();
    store.save_snapshot(agent.id, &believed).await.unwrap();
    let folded = fold_log(&store, &Snapshots::default(), agent.id).await.unwrap();
    assert_eq!(folded.messages()[0].content["text"].as_str(), Some(&*"x".repeat(total)));
}
