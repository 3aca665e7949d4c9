//! SQLite's migration 15 (`events` from a `WITHOUT ROWID` table to a rowid table with its key as
//! an index) on a log the writer of the layout before it wrote: runs of appends in shared rows,
//! rows of one append's messages, rows of single events. Every event reads back as it did.

use super::rows::{sqlite_rows, write_plain_stream, write_three_appends_of_messages};
use super::*;
use agentstream_server::store::{Agents, EventLog};

/// `events` as migration 7 made it (the layout before migration 15), its rows copied over, and
/// migration 15 forgotten, so the next open runs it again.
const BACK_TO_THE_OLD_LAYOUT: &str = "
    CREATE TABLE old_events (
        agent_id TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
        first_seq INTEGER NOT NULL CHECK (first_seq >= 1),
        last_seq INTEGER NOT NULL CHECK (last_seq >= first_seq),
        id BLOB NOT NULL, run_id BLOB, thread_id BLOB, block_id BLOB, message_id BLOB,
        kind TEXT NOT NULL, delta TEXT, delta_path TEXT,
        delta_action TEXT CHECK (delta_action IN ('append', 'replace', 'merge')),
        content TEXT NOT NULL, raw TEXT, metadata TEXT NOT NULL, created_at INTEGER NOT NULL,
        pieces BLOB, raws BLOB,
        PRIMARY KEY (agent_id, first_seq)
    ) WITHOUT ROWID;
    INSERT INTO old_events SELECT agent_id, first_seq, last_seq, id, run_id, thread_id, block_id,
        message_id, kind, delta, delta_path, delta_action, content, raw, metadata, created_at,
        pieces, raws FROM events;
    DROP TABLE events;
    ALTER TABLE old_events RENAME TO events;
    CREATE UNIQUE INDEX events_id ON events (id);
    CREATE INDEX events_run_outline ON events (run_id)
        WHERE kind IN ('run_started', 'usage', 'run_completed', 'run_failed', 'run_cancelled');
    DELETE FROM _sqlx_migrations WHERE version = 15;";

/// Every event of every agent, as JSON, in seq order.
async fn whole_log(store: &SqliteStore) -> Vec<String> {
    let mut agents = store.list_agents(None, 100).await.unwrap();
    agents.sort_by_key(|agent| agent.id);
    let mut events = Vec::new();
    for agent in agents {
        let mut since = 0;
        loop {
            let page = store.read_events_json(agent.id, since, 1_000).await.unwrap();
            let Some(last) = page.last() else { break };
            since = last.seq;
            events.extend(page.into_iter().map(|event| String::from(event.json)));
        }
    }
    events
}

/// Whether `events` has the key index (true after migration 15).
async fn has_key_index(store: &SqliteStore) -> bool {
    let names: Vec<String> = sqlx::query_scalar("SELECT name FROM pragma_index_list('events')")
        .fetch_all(store.pool())
        .await
        .unwrap();
    names.iter().any(|name| name == "events_key")
}

#[tokio::test]
async fn sqlite_migration_15_keeps_every_row_of_a_log_in_the_layout_before_it() {
    let directory = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", directory.path().join("log.db").display());
    let store = SqliteStore::open(&url).await.unwrap();
    let events = write_plain_stream(&store).await + write_three_appends_of_messages(&store).await;
    sqlite_rows(&store).await;
    let before = whole_log(&store).await;
    // The logs' agents list them; the messages' log is an agent of its own.
    assert_eq!(before.len(), events);
    sqlx::raw_sql(BACK_TO_THE_OLD_LAYOUT).execute(store.pool()).await.unwrap();
    assert!(!has_key_index(&store).await);
    drop(store);

    let store = SqliteStore::open(&url).await.unwrap();
    assert!(has_key_index(&store).await, "migration 15 ran again");
    assert_eq!(whole_log(&store).await, before);
    // The migrated log takes appends where it ended.
    let agent = store.list_agents(None, 100).await.unwrap()[0].id;
    let head = store.get_agent(agent).await.unwrap().unwrap().head_seq;
    let written = store.append(&[batch(agent, texts(3))]).await.unwrap();
    let seqs: Vec<u64> = written[0].iter().map(|event| event.seq).collect();
    assert_eq!(seqs, vec![head + 1, head + 2, head + 3]);
}
