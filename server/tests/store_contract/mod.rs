//! The store's contract, one list of cases run against both stores: SQLite (a temporary file)
//! and PostgreSQL (a fresh database; the test command starts the server). What a caller of
//! `Agents`, `EventLog` and `RunKeys` may rely on, whichever database answers.
mod branches;
use crate::common;
mod rowid_migration;
mod rows;
mod streamed;

use streamed::{
    a_producers_position_commits_with_its_batch, a_snapshot_is_kept_until_a_newer_one,
    streamed_appends_read_back_at_every_cursor,
};

use std::sync::Arc;

use agentstream_server::store::chunk::IdChains;
use agentstream_server::store::postgres::PgStore;
use agentstream_server::store::sqlite::SqliteStore;
use agentstream_server::store::{
    agent_for_chat, AppendBatch, ClusterOptions, ClusterStore, ContentJson, EventDraft, EventJson,
    NewAgent, ProducerStamp, Store, StoreError, StoredSnapshot,
};
use app::EventKind;
use serde_json::json;
use uuid::Uuid;

/// The store under test, and its cluster side when it has one (PostgreSQL: events of a run
/// commit only while this process holds the run's slot).
struct Subject {
    store: Arc<dyn Store>,
    cluster: Option<Arc<dyn ClusterStore>>,
}

fn texts(count: usize) -> Vec<EventDraft> {
    (0..count)
        .map(|index| {
            let mut draft = EventDraft::new(EventKind::Text);
            draft.content = json!({ "text": index.to_string() });
            draft
        })
        .collect()
}

fn batch(agent_id: Uuid, drafts: Vec<EventDraft>) -> AppendBatch {
    AppendBatch::new(agent_id, drafts)
}

async fn agents_round_trip(subject: &Subject) {
    let store = subject.store.as_ref();
    let created = store
        .create_agent(NewAgent {
            name: "contract".into(),
            system: Some("be brief".into()),
            description: None,
            model: Some("scripted".into()),
            metadata: json!({"team": "a", "n": 1}),
            tags: vec!["x".into(), "y".into()],
            owner: None,
        })
        .await
        .unwrap();
    assert_eq!(created.head_seq, 0);
    // What create returns equals what a read returns, time included (PostgreSQL keeps µs).
    assert_eq!(store.get_agent(created.id).await.unwrap(), Some(created.clone()));
    let listed = store.list_agents(None, 1_000).await.unwrap();
    assert!(listed.contains(&created), "list_agents shows the new agent");
    assert_eq!(store.list_agents(None, 1).await.unwrap().len(), 1);
    // Owners: an agent made for a user lists under that user only, and reads back with it.
    let owned = store
        .create_agent(NewAgent {
            name: "alice's".into(),
            owner: Some("alice".into()),
            ..NewAgent::default()
        })
        .await
        .unwrap();
    assert_eq!(owned.owner.as_deref(), Some("alice"));
    assert_eq!(store.get_agent(owned.id).await.unwrap(), Some(owned.clone()));
    assert_eq!(store.list_agents(Some("alice"), 1_000).await.unwrap(), vec![owned.clone()]);
    assert_eq!(store.list_agents(Some("bob"), 1_000).await.unwrap(), vec![]);
    assert!(store.list_agents(None, 1_000).await.unwrap().contains(&owned));
    assert_eq!(store.get_agent(Uuid::new_v4()).await.unwrap(), None);
    assert_eq!(store.head_seq(Uuid::new_v4()).await.unwrap(), None);
}

async fn appends_are_gapless_per_agent_and_read_back_equal(subject: &Subject) {
    let store = subject.store.as_ref();
    let first = store.create_agent(NewAgent::default()).await.unwrap();
    let second = store.create_agent(NewAgent::default()).await.unwrap();
    let committed = store
        .append(&[batch(first.id, texts(3)), batch(second.id, texts(2)), batch(first.id, texts(2))])
        .await
        .unwrap();
    let seqs: Vec<Vec<u64>> =
        committed.iter().map(|events| events.iter().map(|event| event.seq).collect()).collect();
    assert_eq!(seqs, vec![vec![1, 2, 3], vec![1, 2], vec![4, 5]]);
    assert_eq!(store.head_seq(first.id).await.unwrap(), Some(5));
    assert_eq!(store.head_seq(second.id).await.unwrap(), Some(2));

    let read = store.read_events(first.id, 2, 10).await.unwrap();
    assert_eq!(read.iter().map(|event| event.seq).collect::<Vec<_>>(), vec![3, 4, 5]);
    assert_eq!(read[0], committed[0][2], "a read returns what the append returned");
    assert_eq!(read[1], committed[2][0]);
    assert_eq!(store.read_events(first.id, 3, 1).await.unwrap().len(), 1);
    assert!(store.read_events(first.id, 5, 10).await.unwrap().is_empty());

    // The JSON a resume sends is, byte for byte, what serde makes of the event.
    let json = store.read_events_json(first.id, 0, 10).await.unwrap();
    let all = store.read_events(first.id, 0, 10).await.unwrap();
    assert_eq!(json, all.iter().map(EventJson::of).collect::<Vec<_>>());
}

async fn an_unknown_agent_fails_the_whole_append(subject: &Subject) {
    let store = subject.store.as_ref();
    let known = store.create_agent(NewAgent::default()).await.unwrap();
    let stranger = Uuid::new_v4();
    let error =
        store.append(&[batch(known.id, texts(2)), batch(stranger, texts(1))]).await.unwrap_err();
    assert!(matches!(error, StoreError::UnknownAgent(id) if id == stranger), "{error}");
    assert_eq!(store.head_seq(known.id).await.unwrap(), Some(0));
    assert!(store.read_events(known.id, 0, 10).await.unwrap().is_empty());
}

async fn a_cursor_beyond_the_column_is_an_error(subject: &Subject) {
    let store = subject.store.as_ref();
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let error = store.read_events(agent.id, u64::MAX, 10).await.unwrap_err();
    assert!(!error.is_transient(), "{error}");
}

async fn deleting_an_agent_deletes_its_log(subject: &Subject) {
    let store = subject.store.as_ref();
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let committed = store.append(&[batch(agent.id, texts(3))]).await.unwrap();
    assert!(store.delete_agent(agent.id).await.unwrap());
    assert!(!store.delete_agent(agent.id).await.unwrap());
    assert_eq!(store.get_agent(agent.id).await.unwrap(), None);
    assert!(store.read_events(agent.id, 0, 10).await.unwrap().is_empty());
    let ids: Vec<Uuid> = committed[0].iter().map(|event| event.id).collect();
    assert!(store.events_by_id(&ids).await.unwrap().is_empty());
}

async fn run_keys_hold_one_run_per_key(subject: &Subject) {
    let store = subject.store.as_ref();
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let (first, second) = (Uuid::new_v4(), Uuid::new_v4());
    assert_eq!(store.claim_run_key(agent.id, "k", first).await.unwrap(), first);
    assert_eq!(store.claim_run_key(agent.id, "k", second).await.unwrap(), first);
    // Keys are per agent.
    let other = store.create_agent(NewAgent::default()).await.unwrap();
    assert_eq!(store.claim_run_key(other.id, "k", second).await.unwrap(), second);
    store.release_run_key(agent.id, "k").await.unwrap();
    assert_eq!(store.claim_run_key(agent.id, "k", second).await.unwrap(), second);
    let stranger = Uuid::new_v4();
    let error = store.claim_run_key(stranger, "k", first).await.unwrap_err();
    assert!(matches!(error, StoreError::UnknownAgent(id) if id == stranger), "{error}");
}

async fn a_run_outline_is_its_start_usage_and_end(subject: &Subject) {
    let store = subject.store.as_ref();
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let run_id = Uuid::new_v4();
    if let Some(cluster) = &subject.cluster {
        assert_eq!(cluster.claim_agent_run(agent.id, run_id).await.unwrap(), None);
    }
    let mut drafts = vec![EventDraft::new(EventKind::RunStarted)];
    drafts.extend(texts(3));
    drafts.push(EventDraft::new(EventKind::Usage));
    drafts.push(EventDraft::new(EventKind::RunCompleted));
    for draft in &mut drafts {
        draft.run_id = Some(run_id);
    }
    let committed = store.append(&[batch(agent.id, drafts)]).await.unwrap();
    let outline = store.run_outline(run_id).await.unwrap();
    let kinds: Vec<EventKind> = outline.iter().map(|event| event.kind).collect();
    assert_eq!(kinds, vec![EventKind::RunStarted, EventKind::Usage, EventKind::RunCompleted]);
    assert_eq!(outline[0], committed[0][0]);
    assert!(store.run_outline(Uuid::new_v4()).await.unwrap().is_empty());
    let unfinished = store.unfinished_runs().await.unwrap();
    assert!(
        unfinished.iter().all(|event| event.run_id != Some(run_id)),
        "an ended run is not unfinished"
    );

    // Looked up by id: those in the log, whatever else is asked for.
    let wanted = [committed[0][1].id, Uuid::new_v4(), committed[0][5].id];
    let mut found = store.events_by_id(&wanted).await.unwrap();
    found.sort_by_key(|event| event.seq);
    assert_eq!(found, vec![committed[0][1].clone(), committed[0][5].clone()]);
}

/// A run whose start is in the log and whose end is not is unfinished (what recovery ends), and
/// stops being so when its end commits. With PostgreSQL only while no server holds its slot.
async fn a_started_run_is_unfinished_until_its_end(subject: &Subject) {
    let store = subject.store.as_ref();
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let run_id = Uuid::new_v4();
    let draft = |kind| {
        let mut draft = EventDraft::new(kind);
        draft.run_id = Some(run_id);
        draft
    };
    let unfinished = || async {
        store
            .unfinished_runs()
            .await
            .unwrap()
            .iter()
            .filter(|event| event.run_id == Some(run_id))
            .count()
    };
    if let Some(cluster) = &subject.cluster {
        cluster.claim_agent_run(agent.id, run_id).await.unwrap();
    }
    store.append(&[batch(agent.id, vec![draft(EventKind::RunStarted)])]).await.unwrap();
    if let Some(cluster) = &subject.cluster {
        assert_eq!(unfinished().await, 0, "a run its server holds is not recovery's");
        cluster.release_agent_run(agent.id, run_id).await.unwrap();
    }
    assert_eq!(unfinished().await, 1, "started, not ended");
    if let Some(cluster) = &subject.cluster {
        cluster.claim_agent_run(agent.id, run_id).await.unwrap();
    }
    store.append(&[batch(agent.id, vec![draft(EventKind::RunFailed)])]).await.unwrap();
    assert_eq!(unfinished().await, 0, "ended");
}

/// A chat id gets one agent, found again later, also when two first uses race; it goes with
/// its agent.
async fn a_chat_id_keeps_its_agent(subject: &Subject) {
    let store = subject.store.as_ref();
    let template = || NewAgent { name: "chat".into(), ..NewAgent::default() };
    assert_eq!(store.chat_agent("chat-1").await.unwrap(), None);
    let (first, racing) = tokio::join!(
        agent_for_chat(store, "chat-1", template()),
        agent_for_chat(store, "chat-1", template())
    );
    let first = first.unwrap();
    assert_eq!(racing.unwrap().id, first.id, "two first uses, one agent");
    let again = agent_for_chat(store, "chat-1", template()).await.unwrap();
    assert_eq!(again.id, first.id);
    let other = agent_for_chat(store, "chat-2", template()).await.unwrap();
    assert_ne!(other.id, first.id);
    assert!(!store.claim_chat("chat-1", other.id).await.unwrap());
    let chats = store.list_agents(None, 1_000).await.unwrap();
    assert_eq!(chats.iter().filter(|agent| agent.name == "chat").count(), 2);

    assert!(store.delete_agent(first.id).await.unwrap());
    assert_eq!(store.chat_agent("chat-1").await.unwrap(), None, "gone with its agent");
    let fresh = agent_for_chat(store, "chat-1", template()).await.unwrap();
    assert_ne!(fresh.id, first.id);
}

async fn run_cases(subject: Subject) {
    branches::branches_share_their_prefix_and_delete_alone(&subject).await;
    a_producers_position_commits_with_its_batch(&subject).await;
    a_snapshot_is_kept_until_a_newer_one(&subject).await;
    streamed_appends_read_back_at_every_cursor(&subject).await;
    agents_round_trip(&subject).await;
    appends_are_gapless_per_agent_and_read_back_equal(&subject).await;
    an_unknown_agent_fails_the_whole_append(&subject).await;
    a_cursor_beyond_the_column_is_an_error(&subject).await;
    deleting_an_agent_deletes_its_log(&subject).await;
    run_keys_hold_one_run_per_key(&subject).await;
    a_run_outline_is_its_start_usage_and_end(&subject).await;
    a_started_run_is_unfinished_until_its_end(&subject).await;
    a_chat_id_keeps_its_agent(&subject).await;
}

/// A SQLite store on a new file (kept while the directory lives).
async fn new_sqlite() -> (tempfile::TempDir, SqliteStore) {
    let directory = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", directory.path().join("log.db").display());
    let store = SqliteStore::open(&url).await.unwrap();
    (directory, store)
}

/// A PostgreSQL store on a new database of the test server.
async fn new_postgres() -> PgStore {
    let url =
        PgStore::create_database(&common::postgres_admin_url(), "agentstream_test").await.unwrap();
    PgStore::open(&url, &ClusterOptions::default()).await.unwrap()
}

const COUNT_ROWS: &str = "SELECT count(*) FROM events";

#[tokio::test]
async fn sqlite_keeps_the_store_contract() {
    let (_directory, store) = new_sqlite().await;
    run_cases(Subject { store: Arc::new(store), cluster: None }).await;
}

#[tokio::test]
async fn postgres_keeps_the_store_contract() {
    let store = Arc::new(new_postgres().await);
    run_cases(Subject { store: store.clone(), cluster: Some(store) }).await;
}
