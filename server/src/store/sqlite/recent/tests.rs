use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use app::EventKind;
use serde_json::Value;
use sqlx::Row;

use super::*;
use crate::store::chunk::nth_id;
use crate::store::sqlite::testing::{open, open_folding_by_hand, seqs};
use crate::store::sqlite::SqliteStore;
use crate::store::{Agents, AppendBatch, EventDraft, EventLog, NewAgent};

async fn count(store: &SqliteStore, sql: &str) -> i64 {
    sqlx::query(sql).fetch_one(store.pool()).await.unwrap().get(0)
}

/// Lists what the store appended since and moves all of it into `events`, a step at a time;
/// the rows moved.
fn fold_all(recent: &mut Recent, connection: &mut Connection) -> usize {
    recent.catch_up(connection).unwrap();
    let mut moved = 0;
    while recent.any() {
        let transaction = connection.transaction().unwrap();
        let step = recent.step(&transaction, FOLD_STEP_ROWS_MAX).unwrap();
        transaction.commit().unwrap();
        moved += step.rows();
        recent.moved(step);
    }
    moved
}

/// String appends to one message part, their ids chained as the writer chains them.
fn deltas(message: Uuid, first: Uuid, from: u64, count: u64) -> Vec<EventDraft> {
    (from..from + count)
        .map(|index| {
            let text = Value::String(format!("w{index} "));
            let mut draft = EventDraft::new(EventKind::Text).appending("text", text);
            draft.id = nth_id(first, index).unwrap();
            draft.message_id = Some(message);
            draft.block_id = Some(message);
            draft
        })
        .collect()
}

/// Forty commits of three tokens each are forty rows in `recent`; a fold moves them all into
/// `events` as a couple of run rows, and every read gives back the same events before and after.
#[tokio::test]
async fn a_fold_moves_every_row_and_joins_the_pieces_of_a_run() {
    let (_directory, path, store) = open_folding_by_hand().await;
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let (message, first) = (Uuid::now_v7(), Uuid::now_v7());
    for group in 0..40 {
        let batch = AppendBatch::new(agent.id, deltas(message, first, group * 3, 3));
        store.append(&[batch]).await.unwrap();
    }
    let before = store.read_events(agent.id, 0, 1_000).await.unwrap();
    let middle = store.read_events(agent.id, 57, 10).await.unwrap();
    assert_eq!(before.len(), 120);
    assert_eq!(middle, before[57..67]);
    assert_eq!(count(&store, "SELECT count(*) FROM recent").await, 40);

    let mut connection = Connection::open(&path).unwrap();
    let mut recent = Recent::new(RecentIndex::default());
    assert_eq!(fold_all(&mut recent, &mut connection), 40);

    assert_eq!(count(&store, "SELECT count(*) FROM recent").await, 0);
    let rows = count(&store, "SELECT count(*) FROM events").await;
    assert!(rows <= 3, "{rows} rows: the pieces were not joined");
    assert_eq!(store.read_events(agent.id, 0, 1_000).await.unwrap(), before);
    assert_eq!(store.read_events(agent.id, 57, 10).await.unwrap(), middle);
    // The next fold continues the open run row.
    store.append(&[AppendBatch::new(agent.id, deltas(message, first, 120, 3))]).await.unwrap();
    assert_eq!(fold_all(&mut recent, &mut connection), 1);
    assert_eq!(count(&store, "SELECT count(*) FROM events").await, rows);
    let after = store.read_events(agent.id, 0, 1_000).await.unwrap();
    assert_eq!(after[..120], before[..]);
    assert_eq!(after.len(), 123);
}

/// Longer than the append thread waits before it folds when appends pause.
const FOLD_PAUSE_MS: u64 = 200;

/// While appends commit and rows move into `events` (when appends pause, and with each commit
/// past [`RECENT_ROWS_MAX`] rows), readers from any seq always get a gapless run
/// of the log: never a hole (the store refuses one), never an event twice, never less than a
/// read before them saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_beside_folds_see_the_log_whole() {
    let (_directory, _path, store) = open().await;
    let store = Arc::new(store);
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for reader in 0..3u64 {
        let (store, stop) = (store.clone(), stop.clone());
        readers.push(tokio::spawn(async move {
            let mut seen: u64 = 0;
            let mut reads = 0;
            while !stop.load(Ordering::Relaxed) {
                let since = (seen / 2).saturating_sub(reader * 7);
                let events = store.read_events(agent.id, since, 10_000).await.unwrap();
                let seqs: Vec<u64> = events.iter().map(|event| event.seq).collect();
                let expected: Vec<u64> = (since + 1..=since + seqs.len() as u64).collect();
                assert_eq!(seqs, expected);
                let newest = since + seqs.len() as u64;
                assert!(newest >= seen, "read up to {newest} after seeing {seen}");
                seen = newest;
                reads += 1;
            }
            reads
        }));
    }
    // Single appends with pauses (everything moves each time appends pause), then groups of 64
    // rows without one (commits move rows once `recent` passes its bound).
    let append = |drafts: usize| {
        let store = store.clone();
        async move {
            let drafts = (0..drafts)
                .map(|index| {
                    let mut draft = EventDraft::new(EventKind::Text);
                    draft.content = serde_json::json!({ "text": format!("event {index}") });
                    draft
                })
                .collect();
            let batch = AppendBatch::new(agent.id, drafts);
            store.append(&[batch]).await.unwrap();
        }
    };
    for _ in 0..3 {
        for _ in 0..300 {
            append(1).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(FOLD_PAUSE_MS)).await;
    }
    // Each pause moved everything.
    assert_eq!(count(&store, "SELECT count(*) FROM recent").await, 0);
    assert_eq!(count(&store, "SELECT count(*) FROM events").await, 3 * 300);
    let groups = RECENT_ROWS_MAX / 64 + 6;
    for _ in 0..groups {
        append(64).await;
    }
    let appends = 3 * 300 + groups * 64;
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        assert!(reader.await.unwrap() > 0);
    }
    let all = store.read_events(agent.id, 0, 10_000).await.unwrap();
    assert_eq!(all.len(), appends);
    // Past the bound, commits moved the oldest rows as they went (moved rows stay in `recent`,
    // dead, until the table's front is all dead). One statement: the store may take a step
    // between two.
    let live = format!("SELECT count(*) FROM recent WHERE {}", super::super::sql::LIVE);
    let (left, both): (i64, i64) =
        sqlx::query_as(&format!("SELECT ({live}), ({live}) + (SELECT count(*) FROM events)"))
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert!(left <= (RECENT_ROWS_MAX + 64) as i64, "{left} rows left in recent");
    assert_eq!(both, appends as i64);
}

/// Stream messages (two per append), single events and a run interrupted by one: the fold
/// copies what cannot be joined as it is, joins only what continues, and every read of every
/// log gives the same events before and after.
#[tokio::test]
async fn a_fold_keeps_what_cannot_be_joined_as_it_was() {
    let (_directory, path, store) = open_folding_by_hand().await;
    let (tokens, stream) = (
        store.create_agent(NewAgent::default()).await.unwrap(),
        store.create_agent(NewAgent::default()).await.unwrap(),
    );
    let (message, first) = (Uuid::now_v7(), Uuid::now_v7());
    for group in 0..20u64 {
        let mut drafts = deltas(message, first, group * 2, 2);
        if group == 9 {
            // Ends the run: the deltas after it start a run row of their own.
            drafts.push(EventDraft::new(EventKind::Text));
        }
        // An append of several messages has a block of its own (never its first id: that
        // marks a single message's row).
        let (head, block) = (Uuid::now_v7(), Uuid::now_v7());
        let messages = (0..2)
            .map(|k| {
                let mut draft = EventDraft::new(EventKind::StreamMessage);
                draft.id = nth_id(head, k).unwrap();
                draft.block_id = Some(block);
                draft.content = Value::String(format!("{{\"n\":{group},\"k\":{k}}}"));
                draft
            })
            .collect();
        let batches = [AppendBatch::new(tokens.id, drafts), AppendBatch::new(stream.id, messages)];
        store.append(&batches).await.unwrap();
    }
    let read = |agent_id| store.read_events(agent_id, 0, 1_000);
    let (tokens_before, stream_before) =
        (read(tokens.id).await.unwrap(), read(stream.id).await.unwrap());
    assert_eq!((tokens_before.len(), stream_before.len()), (41, 40));

    let mut connection = Connection::open(&path).unwrap();
    let mut recent = Recent::new(RecentIndex::default());
    assert_eq!(fold_all(&mut recent, &mut connection), 41);

    assert_eq!(read(tokens.id).await.unwrap(), tokens_before);
    assert_eq!(read(stream.id).await.unwrap(), stream_before);
    let rows = |agent_id: Uuid| {
        let pool = store.pool().clone();
        async move {
            sqlx::query("SELECT count(*) FROM events WHERE agent_id = ?")
                .bind(agent_id.to_string())
                .fetch_one(&pool)
                .await
                .unwrap()
                .get::<i64, _>(0)
        }
    };
    // Two run rows around the single event; each append's messages one row.
    assert_eq!(rows(tokens.id).await, 3);
    assert_eq!(rows(stream.id).await, 20);
}

/// A page of events is full wherever it starts: from a seq in `events`, across into `recent`,
/// and from a seq in `recent` (the log's last row in `events` then holds nothing wanted and must
/// not take one of the page's rows: folds stopped at such a short page, taking it for the end).
#[tokio::test]
async fn a_page_is_full_wherever_it_starts() {
    let (_directory, path, store) = open_folding_by_hand().await;
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let append = |count: u64| AppendBatch {
        agent_id: agent.id,
        drafts: (0..count).map(|_| EventDraft::new(EventKind::Text)).collect(),
        producer: None,
    };
    store.append(&[append(10)]).await.unwrap();
    let mut connection = Connection::open(&path).unwrap();
    assert_eq!(fold_all(&mut Recent::new(RecentIndex::default()), &mut connection), 10);
    store.append(&[append(10)]).await.unwrap();
    for since in [0, 5, 9, 10, 11, 15] {
        let page = store.read_events(agent.id, since, 3).await.unwrap();
        let seqs: Vec<u64> = page.iter().map(|event| event.seq).collect();
        assert_eq!(seqs, vec![since + 1, since + 2, since + 3], "since {since}");
    }
}

/// Two stores on one file (SQLite serves one server, but tests and mistakes open a second):
/// each gave `n`s from its own count, so the second one's rows collided with the first's (every
/// append of the second failed). Now `n` comes from the file, and each reads the other's rows.
#[tokio::test]
async fn two_stores_on_one_file_append_to_one_log() {
    let (_directory, path, first) = open().await;
    let second = SqliteStore::open(&format!("sqlite://{}", path.display())).await.unwrap();
    let agent = first.create_agent(NewAgent::default()).await.unwrap();
    let batch = |count: u64| AppendBatch {
        agent_id: agent.id,
        drafts: (0..count).map(|_| EventDraft::new(EventKind::Text)).collect(),
        producer: None,
    };
    first.append(&[batch(5)]).await.unwrap();
    let written = second.append(&[batch(5)]).await.unwrap();
    assert_eq!(written[0].last().unwrap().seq, 10);
    let seqs = |events: Vec<app::AgentEvent>| -> Vec<u64> {
        events.iter().map(|event| event.seq).collect()
    };
    let all: Vec<u64> = (1..=10).collect();
    assert_eq!(seqs(second.read_events(agent.id, 0, 100).await.unwrap()), all);
    // The first store reads the second's rows (above what it committed through) at once, and
    // lists them with its next commit.
    assert_eq!(seqs(first.read_events(agent.id, 0, 100).await.unwrap()), all);
    first.append(&[batch(1)]).await.unwrap();
    let all: Vec<u64> = (1..=11).collect();
    assert_eq!(seqs(first.read_events(agent.id, 0, 100).await.unwrap()), all);
    assert_eq!(seqs(second.read_events(agent.id, 0, 100).await.unwrap()), all);
}

/// An append of many messages (a row of 1 KiB or more) goes straight into `events` when its log
/// has nothing live in `recent`, and into `recent` behind the log's live rows otherwise; reads
/// give every message in order either way.
#[tokio::test]
async fn large_rows_of_messages_skip_recent_unless_the_log_has_live_rows_there() {
    let (_directory, _path, store) = open().await;
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let messages = |count: u64| {
        let (head, block) = (Uuid::now_v7(), Uuid::now_v7());
        let drafts = (0..count)
            .map(|k| {
                let mut draft = EventDraft::new(EventKind::StreamMessage);
                draft.id = nth_id(head, k).unwrap();
                draft.block_id = Some(block);
                draft.content = Value::String(format!("{{\"k\":{k},\"text\":\"a message\"}}"));
                draft
            })
            .collect();
        AppendBatch::new(agent.id, drafts)
    };
    let rows = |table: &'static str| {
        let pool = store.pool().clone();
        async move {
            sqlx::query_scalar::<_, i64>(&format!("SELECT count(*) FROM {table}"))
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    store.append(&[messages(64)]).await.unwrap();
    assert_eq!((rows("events").await, rows("recent").await), (1, 0));
    // Behind a live row (unless appends paused long enough for it to move): had the large row
    // gone into `events`, the small one would read as moved and the log would have a hole.
    store.append(&[messages(1)]).await.unwrap();
    store.append(&[messages(64)]).await.unwrap();
    assert_eq!(seqs(&store, agent.id, 1_000).await, (1..=129).collect::<Vec<u64>>());
}

/// A hundred appends of one message each (chained by the writer, each message its own block)
/// are a hundred rows in `recent`; a fold joins them into a few rows of `events`, and every read
/// gives back the same messages, each with its own block, before and after.
#[tokio::test]
async fn a_fold_joins_single_message_appends_into_shared_rows() {
    let (_directory, path, store) = open_folding_by_hand().await;
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let mut chains = crate::store::chunk::IdChains::default();
    for n in 0..100 {
        let id = Uuid::now_v7();
        let mut draft = EventDraft::new(EventKind::StreamMessage);
        draft.id = id;
        draft.block_id = Some(id);
        draft.content = Value::String(format!("{{\"n\":{n}}}"));
        let mut batch = AppendBatch::new(agent.id, vec![draft]);
        chains.assign(&mut batch);
        store.append(&[batch]).await.unwrap();
    }
    let before = store.read_events(agent.id, 0, 1_000).await.unwrap();
    assert_eq!(before.len(), 100);
    assert!(before.iter().all(|event| event.block_id == Some(event.id)));
    let contents_before = store.read_contents(agent.id, 37, 20).await.unwrap();

    let mut connection = Connection::open(&path).unwrap();
    let mut recent = Recent::new(RecentIndex::default());
    assert_eq!(fold_all(&mut recent, &mut connection), 100);
    let rows = count(&store, "SELECT count(*) FROM events").await;
    assert!(rows <= 4, "{rows} rows: the appends were not joined");
    assert_eq!(store.read_events(agent.id, 0, 1_000).await.unwrap(), before);
    for since in [0, 1, 39, 40, 41, 99] {
        let page = store.read_events(agent.id, since, 7).await.unwrap();
        assert_eq!(page[..], before[since as usize..(since as usize + 7).min(100)]);
    }
    assert_eq!(store.read_contents(agent.id, 37, 20).await.unwrap(), contents_before);
}
