//! A log written by the schema before run rows (`migrations/0006`, one row per event with text
//! ids and RFC 3339 times) opens with today's build and reads back exactly as it was.
//!
//! `fixtures/log_v6.db` was written by the store of that schema: two agents, a run each (one
//! ended, one left open), text appends with times to the nanosecond and whole seconds, a raw
//! provider event, a tool call and its merge, usage. `fixtures/log_v6.events.jsonl` is what
//! that build's `read_events_json` returned for them, line by line.

use crate::common;

use agentstream_server::store::postgres::PgStore;
use agentstream_server::store::sqlite::SqliteStore;
use agentstream_server::store::{
    postgres_migrations_through, Agents, AppendBatch, ClusterOptions, EventDraft, EventLog,
};
use app::{AgentEvent, EventKind};
use chrono::DurationRound;
use uuid::Uuid;

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

async fn open_copy() -> (tempfile::TempDir, SqliteStore) {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("log.db");
    std::fs::copy(fixture("log_v6.db"), &path).unwrap();
    let store = SqliteStore::open(&format!("sqlite://{}", path.display())).await.unwrap();
    (directory, store)
}

#[tokio::test]
async fn a_log_of_the_previous_schema_reads_back_exactly() {
    let expected = std::fs::read_to_string(fixture("log_v6.events.jsonl")).unwrap();
    let (_directory, store) = open_copy().await;
    let mut agents = store.list_agents(None, 10).await.unwrap();
    agents.sort_by_key(|agent| agent.name.clone());
    assert_eq!(agents.len(), 2);
    let mut read = String::new();
    let mut events: Vec<AgentEvent> = Vec::new();
    for agent in &agents {
        for event in store.read_events_json(agent.id, 0, 1_000).await.unwrap() {
            read.push_str(&event.json);
            read.push('\n');
        }
        events.extend(store.read_events(agent.id, 0, 1_000).await.unwrap());
        // Every cursor resumes exactly after its seq.
        for since in 0..=agent.head_seq {
            let after = store.read_events(agent.id, since, 3).await.unwrap();
            let seqs: Vec<u64> = after.iter().map(|event| event.seq).collect();
            let want: Vec<u64> = (since + 1..=agent.head_seq).take(3).collect();
            assert_eq!(seqs, want, "since {since}");
        }
    }
    assert_eq!(read, expected);
    // The typed reads equal the JSON ones.
    let typed: Vec<String> =
        events.iter().map(|event| serde_json::to_string(event).unwrap()).collect();
    assert_eq!(typed.join("\n") + "\n", expected);

    // Look-ups by id, by run, and the run left open, as before.
    let ids: Vec<Uuid> = events.iter().map(|event| event.id).collect();
    let mut found = store.events_by_id(&ids).await.unwrap();
    found.sort_by_key(|event| (event.agent_id, event.seq));
    let mut all = events.clone();
    all.sort_by_key(|event| (event.agent_id, event.seq));
    assert_eq!(found, all);
    let open: Vec<AgentEvent> = store.unfinished_runs().await.unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].kind, EventKind::RunStarted);
    let outline = store.run_outline(open[0].run_id.unwrap()).await.unwrap();
    let kinds: Vec<EventKind> = outline.iter().map(|event| event.kind).collect();
    assert_eq!(kinds, [EventKind::RunStarted, EventKind::Usage]);

    // The log goes on after the migrated rows.
    let agent = &agents[0];
    let committed = store
        .append(&[AppendBatch::new(agent.id, vec![EventDraft::new(EventKind::User)])])
        .await
        .unwrap();
    assert_eq!(committed[0][0].seq, agent.head_seq + 1);
}

/// The same events in a PostgreSQL database of the schema before run rows (migrations 1–4, one
/// row per event in `agent_events`), then opened by today's store: every event reads back as
/// it was stored (PostgreSQL keeps microseconds), and the log goes on.
#[tokio::test]
async fn a_postgres_log_of_the_previous_schema_reads_back_exactly() {
    let url =
        PgStore::create_database(&common::postgres_admin_url(), "agentstream_test").await.unwrap();
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    postgres_migrations_through(4).run(&pool).await.unwrap();
    let micros = |time: chrono::DateTime<chrono::Utc>| {
        time.duration_trunc(chrono::TimeDelta::microseconds(1)).unwrap()
    };
    let expected: Vec<AgentEvent> = std::fs::read_to_string(fixture("log_v6.events.jsonl"))
        .unwrap()
        .lines()
        .map(|line| {
            let mut event: AgentEvent = serde_json::from_str(line).unwrap();
            event.created_at = micros(event.created_at);
            event
        })
        .collect();
    let mut agents: Vec<Uuid> = expected.iter().map(|event| event.agent_id).collect();
    agents.dedup();
    for agent_id in &agents {
        let head = expected.iter().filter(|e| e.agent_id == *agent_id).count() as i64;
        insert_old_agent(&pool, *agent_id, head).await;
    }
    let json = |value: &serde_json::Value| serde_json::to_string(value).unwrap();
    for event in &expected {
        sqlx::query(
            "INSERT INTO agent_events (id, agent_id, seq, run_id, thread_id, block_id, \
             message_id, kind, delta, delta_path, delta_action, content, raw, metadata, \
             created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::json, $10, $11, \
             $12::json, $13::json, $14::json, $15)",
        )
        .bind(event.id)
        .bind(event.agent_id)
        .bind(event.seq as i64)
        .bind(event.run_id)
        .bind(event.thread_id)
        .bind(event.block_id)
        .bind(event.message_id)
        .bind(event.kind.as_str())
        .bind(event.delta.as_ref().map(json))
        .bind(&event.delta_path)
        .bind(event.delta_action.map(|action| action.as_str()))
        .bind(json(&event.content))
        .bind(event.raw.as_ref().map(json))
        .bind(json(&event.metadata))
        .bind(event.created_at)
        .execute(&pool)
        .await
        .unwrap();
    }
    pool.close().await;

    let store = PgStore::open(&url, &ClusterOptions::default()).await.unwrap();
    let mut read = Vec::new();
    for agent_id in &agents {
        read.extend(store.read_events(*agent_id, 0, 1_000).await.unwrap());
    }
    assert_eq!(read, expected);
    let ids: Vec<Uuid> = expected.iter().map(|event| event.id).collect();
    let mut found = store.events_by_id(&ids).await.unwrap();
    found.sort_by_key(|event| (agents.iter().position(|a| *a == event.agent_id), event.seq));
    assert_eq!(found, expected);
    let committed = store
        .append(&[AppendBatch::new(agents[0], vec![EventDraft::new(EventKind::User)])])
        .await
        .unwrap();
    let head = expected.iter().filter(|e| e.agent_id == agents[0]).count() as u64;
    assert_eq!(committed[0][0].seq, head + 1);
}

/// An agent row as the releases before the compact log wrote it, its head at `head_seq`.
async fn insert_old_agent(pool: &sqlx::PgPool, agent_id: Uuid, head_seq: i64) {
    sqlx::query(
        "INSERT INTO agents (id, name, metadata, tags, head_seq, created_at) \
         VALUES ($1, 'old', 'null', '[]', $2, now())",
    )
    .bind(agent_id)
    .bind(head_seq)
    .execute(pool)
    .await
    .unwrap();
}

/// Rows in the old table before the upgrade: enough that copying them takes a while.
const ROLLING_UPGRADE_ROWS: i64 = 100_000;

/// A rolling upgrade: a server of the previous release keeps writing to `agent_events` while a
/// new one runs PostgreSQL migration 6 (copy to `events`, drop the old table). Every event the
/// old server saw commit must be in the new log; its writes after that fail rather than vanish.
#[tokio::test]
async fn postgres_compact_log_migration_keeps_what_an_old_writer_committed_meanwhile() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let url =
        PgStore::create_database(&common::postgres_admin_url(), "agentstream_test").await.unwrap();
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    postgres_migrations_through(5).run(&pool).await.unwrap();
    let agent_id = Uuid::new_v4();
    insert_old_agent(&pool, agent_id, ROLLING_UPGRADE_ROWS).await;
    sqlx::query(
        "INSERT INTO agent_events (id, agent_id, seq, kind, content, metadata, created_at) \
         SELECT gen_random_uuid(), $1, seq, 'text', '{\"text\":\"old\"}', 'null', now() \
         FROM generate_series(1, $2::bigint) AS seq",
    )
    .bind(agent_id)
    .bind(ROLLING_UPGRADE_ROWS)
    .execute(&pool)
    .await
    .unwrap();

    // The old server: one event per transaction, as fast as it can, until its writes fail.
    let migrated = Arc::new(AtomicBool::new(false));
    let old_server = {
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        let migrated = migrated.clone();
        tokio::spawn(async move {
            let mut committed = Vec::new();
            let mut seq = ROLLING_UPGRADE_ROWS;
            while !migrated.load(Ordering::Acquire) {
                seq += 1;
                let written = sqlx::query(
                    "INSERT INTO agent_events (id, agent_id, seq, kind, content, metadata, \
                     created_at) VALUES (gen_random_uuid(), $1, $2, 'text', '{}', 'null', now())",
                )
                .bind(agent_id)
                .bind(seq)
                .execute(&pool)
                .await;
                match written {
                    Ok(_) => committed.push(seq),
                    Err(_) => break,
                }
            }
            committed
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    postgres_migrations_through(6).run(&pool).await.unwrap();
    migrated.store(true, Ordering::Release);
    let committed = old_server.await.unwrap();
    assert!(!committed.is_empty(), "the old server wrote during the test");

    let kept: Vec<i64> = sqlx::query_scalar(
        "SELECT first_seq FROM events WHERE agent_id = $1 AND first_seq > $2 ORDER BY first_seq",
    )
    .bind(agent_id)
    .bind(ROLLING_UPGRADE_ROWS)
    .fetch_all(&pool)
    .await
    .unwrap();
    let lost: Vec<&i64> = committed.iter().filter(|seq| !kept.contains(seq)).collect();
    assert!(
        lost.is_empty(),
        "{} of {} events the old server committed are gone: {:?}…",
        lost.len(),
        committed.len(),
        &lost[..lost.len().min(5)]
    );
    let total: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE agent_id = $1")
        .bind(agent_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(total, ROLLING_UPGRADE_ROWS + committed.len() as i64);
}
