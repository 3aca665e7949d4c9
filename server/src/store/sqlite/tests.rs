use super::*;
use crate::store::{Agents, EventDraft, NewAgent};
use sqlx::Row;

#[tokio::test]
async fn the_database_refuses_events_of_unknown_agents_by_itself() {
    let (_directory, store) = SqliteStore::temporary().await;
    let result = sqlx::query(
        "INSERT INTO events (agent_id, first_seq, last_seq, id, kind, content, metadata, \
         created_at) VALUES ('no-such-agent', 1, 1, x'00', 'text', 'null', 'null', 0)",
    )
    .execute(store.pool())
    .await;
    let error = result.unwrap_err().to_string();
    assert!(error.contains("FOREIGN KEY"), "{error}");
}

#[tokio::test]
async fn range_reads_use_the_agent_seq_index() {
    let (_directory, store) = SqliteStore::temporary().await;
    let rows = sqlx::query(&format!("EXPLAIN QUERY PLAN {}", range_sql(EVENT_COLUMNS)))
        .bind("a")
        .bind(5)
        .bind(10)
        .bind(7)
        .fetch_all(store.pool())
        .await
        .unwrap();
    let plan: Vec<String> =
        rows.iter().map(|row| row.try_get::<String, _>("detail").unwrap()).collect();
    let plan = plan.join(" | ");
    assert!(!plan.contains("SCAN"), "{plan}");
    // The log's part walks its key in order (no sort of up to a page of rows); the newest rows'
    // part is a rowid range of the bounded `recent` table, sorted.
    let (log, newest) = plan.split_once("RIGHT").unwrap();
    assert!(
        log.contains("SEARCH events USING INDEX events_key (agent_id=? AND first_seq>?)"),
        "{plan}"
    );
    assert!(!log.contains("TEMP B-TREE"), "range reads must not sort: {plan}");
    assert!(newest.contains("SEARCH recent USING INTEGER PRIMARY KEY (rowid>?)"), "{plan}");
}

/// The plan SQLite picks for `sql` (with `?1` bound to a run id), as one line.
async fn plan_of(store: &SqliteStore, sql: &str) -> String {
    let rows = sqlx::query(&format!("EXPLAIN QUERY PLAN {sql}"))
        .bind(Uuid::nil().as_bytes().to_vec())
        .fetch_all(store.pool())
        .await
        .unwrap();
    rows.iter()
        .map(|row| row.try_get::<String, _>("detail").unwrap())
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Token deltas carry no run index (it cost each commit a page per agent); the run look-ups
/// must still find their rows through the partial outline index, not by scanning the log,
/// and recovery reads the open runs, not every run that ever started.
#[tokio::test]
async fn run_look_ups_use_the_outline_index_and_the_open_runs() {
    let (_directory, store) = SqliteStore::temporary().await;
    let outline = plan_of(&store, &run_outline_sql()).await;
    assert!(outline.contains("USING INDEX events_run_outline"), "{outline}");
    let unfinished = plan_of(&store, &unfinished_runs_sql()).await;
    assert!(unfinished.contains("open_runs"), "{unfinished}");
    assert!(!unfinished.contains("SCAN events"), "recovery must not walk the log: {unfinished}");
}

/// The WAL restarts also while reads never stop: subscribers catching up, pages being read.
/// A restart needs every reader off the old WAL; with reads always in flight it gave up at
/// each try and the WAL grew without end (239 MB after 12 minutes of the soak benchmark).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_restarts_while_reads_never_stop() {
    use crate::store::{Agents, AppendBatch, EventDraft, NewAgent};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const RESET_PAGES: i64 = 128;
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("test.db");
    let url = format!("sqlite://{}", path.display());
    let store = Arc::new(
        SqliteStore::open_tuned(&url, Tuning { wal_reset_pages: RESET_PAGES, ..Tuning::default() })
            .await
            .unwrap(),
    );
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let draft = || {
        let mut draft = EventDraft::new(app::EventKind::Text);
        draft.content = serde_json::json!({ "text": "x".repeat(400) });
        draft
    };
    let batch = || AppendBatch::new(agent.id, (0..25).map(|_| draft()).collect());
    store.append(&[batch()]).await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..4 {
        let (store, stop) = (store.clone(), stop.clone());
        readers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                store.read_events(agent.id, 0, 500).await.unwrap();
            }
        }));
    }
    for _ in 0..800 {
        store.append(&[batch()]).await.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        reader.await.unwrap();
    }
    let wal_bytes = std::fs::metadata(directory.path().join("test.db-wal")).unwrap().len();
    // 20 000 events went through the WAL, ~50 MB with its index pages: it grew to that
    // before; restarted every RESET_PAGES it stays near its size at the first restart
    // (~7 MB: the checkpointer looks every 200 ms, and this append loop is fast).
    assert!(wal_bytes < 16 * 1024 * 1024, "the WAL grew to {wal_bytes} bytes");
}

/// Writes beside the log (a new agent, a fork, a run's key: statements on the pool) get their
/// turn while appends never pause. The append thread's transactions followed one another with
/// microseconds between; SQLite's busy handler, which sleeps and looks again, almost never found
/// the lock free, and such a write waited out its busy timeout (a fork failed so after a burst).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_beside_the_log_get_their_turn_while_appends_never_pause() {
    use crate::store::{Agents, AppendBatch, EventDraft, NewAgent};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let directory = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", directory.path().join("test.db").display());
    let tuning = Tuning { busy_timeout_ms: 1_000, ..Tuning::default() };
    let store = Arc::new(SqliteStore::open_tuned(&url, tuning).await.unwrap());
    let mut agents = Vec::new();
    for _ in 0..16 {
        agents.push(store.create_agent(NewAgent::default()).await.unwrap().id);
    }
    let group = move |agents: &[Uuid]| -> Vec<AppendBatch> {
        agents
            .iter()
            .map(|agent_id| {
                AppendBatch::new(*agent_id, vec![EventDraft::new(app::EventKind::Text)])
            })
            .collect()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for part in agents.chunks(4) {
        let (store, stop, part) = (store.clone(), stop.clone(), part.to_vec());
        writers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                store.append(&group(&part)).await.unwrap();
            }
        }));
    }
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let mut refused = Vec::new();
    for _ in 0..10 {
        if let Err(error) = store.create_agent(NewAgent::default()).await {
            refused.push(error.to_string());
        }
    }
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.unwrap();
    }
    // And once appends paused, while the append thread moves `recent` into the log.
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    for _ in 0..10 {
        if let Err(error) = store.create_agent(NewAgent::default()).await {
            refused.push(error.to_string());
        }
    }
    assert_eq!(refused, Vec::<String>::new(), "agents not created beside the appends");
}

/// Stream messages as one append makes them: consecutive ids, one block, JSON texts.
fn messages(agent_id: Uuid, texts: &[&str]) -> AppendBatch {
    let (first, block, now) = (Uuid::now_v7(), Uuid::now_v7(), chrono::Utc::now());
    let drafts = texts.iter().enumerate().map(|(k, text)| {
        let id = crate::store::chunk::nth_id(first, k as u64).unwrap();
        let mut draft = EventDraft::made(app::EventKind::StreamMessage, id, now);
        draft.block_id = Some(block);
        draft.content = serde_json::Value::String((*text).to_owned());
        draft
    });
    AppendBatch::new(agent_id, drafts.collect())
}

/// A row damaged on disk (a message's JSON no longer JSON, its length unchanged) reads as a
/// corrupt store, never as a broken answer: in a row of one append's messages and in a row of
/// one message, moved into the log or not, as contents and as events — found by the row's
/// checksum, and in a row written before rows had one (`legacy`) by checking each message.
#[tokio::test]
async fn a_damaged_stream_row_reads_as_corrupt_never_as_broken_json() {
    for (moved, legacy) in [(false, false), (true, false), (false, true), (true, true)] {
        // Rows left in `recent` stay there: the store's own fold must not move them between the
        // two tables' damage (it did on a slow machine, and the read found the undamaged copy).
        let (_directory, _path, store) = if moved {
            super::testing::open().await
        } else {
            super::testing::open_folding_by_hand().await
        };
        let agent = store.create_agent(NewAgent::default()).await.unwrap();
        let batches = [
            messages(agent.id, &[r#"{"a":1}"#]),
            messages(agent.id, &[r#"{"b":2}"#, r#"{"c":3}"#]),
            messages(agent.id, &[r#"{"d":4}"#]),
        ];
        for batch in &batches {
            store.append(std::slice::from_ref(batch)).await.unwrap();
        }
        // Idle steps move the rows out of `recent` soon after the appends.
        for _ in 0..500 {
            if !moved || store.backlog_rows() == Some(0) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(!moved || store.backlog_rows() == Some(0), "the rows were moved");
        let case = format!("moved: {moved}, legacy: {legacy}");
        let mut checked = 0;
        for table in ["events", "recent"] {
            let marked = "delta IS NULL AND substr(pieces, 1, 1) = x'00'";
            let rows: i64 =
                sqlx::query_scalar(&format!("SELECT count(*) FROM {table} WHERE {marked}"))
                    .fetch_one(store.pool())
                    .await
                    .unwrap();
            checked += rows;
            if legacy {
                // As a row of messages was written before it carried its checksum.
                let strip = format!("UPDATE {table} SET pieces = substr(pieces, 6) WHERE {marked}");
                sqlx::query(&strip).execute(store.pool()).await.unwrap();
            }
        }
        assert_eq!(checked, 3, "every row of messages carries its checksum ({case})");
        let read = store.read_contents(agent.id, 0, 10).await.unwrap().contents();
        assert_eq!(read.len(), 4, "{case}");
        assert_eq!(&*read[1].json, r#"{"b":2}"#, "{case}");
        for table in ["events", "recent"] {
            sqlx::query(&format!(
                "UPDATE {table} SET content = replace(replace(content, '\"b\":2}}', '\"b\":2]'), \
                 '\"d\":4}}', '\"d\":4]')"
            ))
            .execute(store.pool())
            .await
            .unwrap();
        }
        for since in [0, 3] {
            let error = store.read_contents(agent.id, since, 10).await.unwrap_err();
            assert!(matches!(error, StoreError::Corrupt(_)), "{error:?} ({case})");
            let error = store.read_events_json(agent.id, since, 10).await.unwrap_err();
            assert!(matches!(error, StoreError::Corrupt(_)), "{error:?} ({case})");
        }
        // The messages of the row before the damage still read.
        let read = store.read_contents(agent.id, 0, 1).await.unwrap().contents();
        assert_eq!(&*read[0].json, r#"{"a":1}"#, "{case}");
    }
}

/// A branch's deletion reads (is it forked?) and then writes in one transaction. Begun
/// deferred, its read pinned a snapshot; when a commit of the append thread landed before its
/// first write, SQLite refused that write at once (`SQLITE_BUSY_SNAPSHOT`: the busy handler does
/// not wait for a stale snapshot), and the deletion failed beside steady appends. Seen failing
/// so in one of eight runs of the store contract. Begun `IMMEDIATE`, it holds the lock first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_branch_is_deleted_beside_steady_appends() {
    use crate::store::{fork, AppendBatch, BranchDeletion, Branches, EventDraft, NewAgent};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let (_directory, _path, store) = testing::open().await;
    let store = Arc::new(store);
    let root = store.create_agent(NewAgent::default()).await.unwrap().id;
    let busy = store.create_agent(NewAgent::default()).await.unwrap().id;
    store
        .append(&[AppendBatch::new(root, vec![EventDraft::new(app::EventKind::Text)])])
        .await
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let appends = {
        let (store, stop) = (store.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let batch = AppendBatch::new(busy, vec![EventDraft::new(app::EventKind::Text)]);
                store.append(&[batch]).await.unwrap();
            }
        })
    };
    let mut failed = Vec::new();
    for _ in 0..60 {
        let branch = fork(store.as_ref(), root, 1).await.unwrap().unwrap();
        match store.delete_branch(branch.id).await {
            Ok(BranchDeletion::Deleted) => {}
            other => failed.push(format!("{other:?}")),
        }
    }
    stop.store(true, Ordering::Relaxed);
    appends.await.unwrap();
    assert_eq!(failed, Vec::<String>::new(), "deletions that failed beside the appends");
}
