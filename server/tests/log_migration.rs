//! A log written by the schema before run rows (`migrations/0006`, one row per event with text
//! ids and RFC 3339 times) opens with today's build and reads back exactly as it was.
//!
//! `fixtures/log_v6.db` was written by the store of that schema: two agents, a run each (one
//! ended, one left open), text appends with times to the nanosecond and whole seconds, a raw
//! provider event, a tool call and its merge, usage. `fixtures/log_v6.events.jsonl` is what
//! that build's `read_events_json` returned for them, line by line.

use agentstream_server::store::sqlite::SqliteStore;
use agentstream_server::store::{Agents, AppendBatch, EventDraft, EventLog};
use app::{AgentEvent, EventKind};
use uuid::Uuid;

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

async fn open_copy() -> (tempfile::TempDir, SqliteStore) {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("log.db");
    std::fs::copy(fixture("log_v6.db"), &path).unwrap();
    let store = SqliteStore::open(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    (directory, store)
}

#[tokio::test]
async fn a_log_of_the_previous_schema_reads_back_exactly() {
    let expected = std::fs::read_to_string(fixture("log_v6.events.jsonl")).unwrap();
    let (_directory, store) = open_copy().await;
    let mut agents = store.list_agents(10).await.unwrap();
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
    let typed: Vec<String> = events
        .iter()
        .map(|event| serde_json::to_string(event).unwrap())
        .collect();
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
        .append(&[AppendBatch {
            agent_id: agent.id,
            drafts: vec![EventDraft::new(EventKind::User)],
        }])
        .await
        .unwrap();
    assert_eq!(committed[0][0].seq, agent.head_seq + 1);
}
