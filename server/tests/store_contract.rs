//! The store's contract, one list of cases run against both stores: SQLite (a temporary file)
//! and PostgreSQL (a fresh database; the test command starts the server). What a caller of
//! `Agents`, `EventLog` and `RunKeys` may rely on, whichever database answers.
mod common;

use std::sync::Arc;

use agentstream_server::store::chunk::IdChains;
use agentstream_server::store::postgres::PgStore;
use agentstream_server::store::sqlite::SqliteStore;
use agentstream_server::store::{
    agent_for_chat, AppendBatch, ClusterOptions, ClusterStore, EventDraft, EventJson, NewAgent,
    ProducerStamp, Store, StoreError, StoredSnapshot,
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
    assert_eq!(
        store.get_agent(created.id).await.unwrap(),
        Some(created.clone())
    );
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
    assert_eq!(
        store.get_agent(owned.id).await.unwrap(),
        Some(owned.clone())
    );
    assert_eq!(
        store.list_agents(Some("alice"), 1_000).await.unwrap(),
        vec![owned.clone()]
    );
    assert_eq!(store.list_agents(Some("bob"), 1_000).await.unwrap(), vec![]);
    assert!(store
        .list_agents(None, 1_000)
        .await
        .unwrap()
        .contains(&owned));
    assert_eq!(store.get_agent(Uuid::new_v4()).await.unwrap(), None);
    assert_eq!(store.head_seq(Uuid::new_v4()).await.unwrap(), None);
}

async fn appends_are_gapless_per_agent_and_read_back_equal(subject: &Subject) {
    let store = subject.store.as_ref();
    let first = store.create_agent(NewAgent::default()).await.unwrap();
    let second = store.create_agent(NewAgent::default()).await.unwrap();
    let committed = store
        .append(&[
            batch(first.id, texts(3)),
            batch(second.id, texts(2)),
            batch(first.id, texts(2)),
        ])
        .await
        .unwrap();
    let seqs: Vec<Vec<u64>> = committed
        .iter()
        .map(|events| events.iter().map(|event| event.seq).collect())
        .collect();
    assert_eq!(seqs, vec![vec![1, 2, 3], vec![1, 2], vec![4, 5]]);
    assert_eq!(store.head_seq(first.id).await.unwrap(), Some(5));
    assert_eq!(store.head_seq(second.id).await.unwrap(), Some(2));

    let read = store.read_events(first.id, 2, 10).await.unwrap();
    assert_eq!(
        read.iter().map(|event| event.seq).collect::<Vec<_>>(),
        vec![3, 4, 5]
    );
    assert_eq!(
        read[0], committed[0][2],
        "a read returns what the append returned"
    );
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
    let error = store
        .append(&[batch(known.id, texts(2)), batch(stranger, texts(1))])
        .await
        .unwrap_err();
    assert!(
        matches!(error, StoreError::UnknownAgent(id) if id == stranger),
        "{error}"
    );
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
    assert_eq!(
        store.claim_run_key(agent.id, "k", first).await.unwrap(),
        first
    );
    assert_eq!(
        store.claim_run_key(agent.id, "k", second).await.unwrap(),
        first
    );
    // Keys are per agent.
    let other = store.create_agent(NewAgent::default()).await.unwrap();
    assert_eq!(
        store.claim_run_key(other.id, "k", second).await.unwrap(),
        second
    );
    store.release_run_key(agent.id, "k").await.unwrap();
    assert_eq!(
        store.claim_run_key(agent.id, "k", second).await.unwrap(),
        second
    );
    let stranger = Uuid::new_v4();
    let error = store.claim_run_key(stranger, "k", first).await.unwrap_err();
    assert!(
        matches!(error, StoreError::UnknownAgent(id) if id == stranger),
        "{error}"
    );
}

async fn a_run_outline_is_its_start_usage_and_end(subject: &Subject) {
    let store = subject.store.as_ref();
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let run_id = Uuid::new_v4();
    if let Some(cluster) = &subject.cluster {
        assert_eq!(
            cluster.claim_agent_run(agent.id, run_id).await.unwrap(),
            None
        );
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
    assert_eq!(
        kinds,
        vec![
            EventKind::RunStarted,
            EventKind::Usage,
            EventKind::RunCompleted
        ]
    );
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
    assert_eq!(
        found,
        vec![committed[0][1].clone(), committed[0][5].clone()]
    );
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
    store
        .append(&[batch(agent.id, vec![draft(EventKind::RunStarted)])])
        .await
        .unwrap();
    if let Some(cluster) = &subject.cluster {
        assert_eq!(
            unfinished().await,
            0,
            "a run its server holds is not recovery's"
        );
        cluster.release_agent_run(agent.id, run_id).await.unwrap();
    }
    assert_eq!(unfinished().await, 1, "started, not ended");
    if let Some(cluster) = &subject.cluster {
        cluster.claim_agent_run(agent.id, run_id).await.unwrap();
    }
    store
        .append(&[batch(agent.id, vec![draft(EventKind::RunFailed)])])
        .await
        .unwrap();
    assert_eq!(unfinished().await, 0, "ended");
}

/// A chat id gets one agent, found again later, also when two first uses race; it goes with
/// its agent.
async fn a_chat_id_keeps_its_agent(subject: &Subject) {
    let store = subject.store.as_ref();
    let template = || NewAgent {
        name: "chat".into(),
        ..NewAgent::default()
    };
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
    assert_eq!(
        store.chat_agent("chat-1").await.unwrap(),
        None,
        "gone with its agent"
    );
    let fresh = agent_for_chat(store, "chat-1", template()).await.unwrap();
    assert_ne!(fresh.id, first.id);
}

/// Groups as a streaming agent writes them, a second agent in the same groups, ids chained as
/// the writer chains them; deterministic. `mixed`: runs of text and thinking appends to two
/// messages (short, long, multi-byte, empty pieces) with tool calls and stream messages between
/// them; else one message's short text pieces. (Mixed: a third of the appends carry a raw
/// provider event.)
fn streamed_groups(agents: [Uuid; 2], mixed: bool) -> Vec<Vec<AppendBatch>> {
    let mut chains = IdChains::default();
    let mut state = 7u64;
    let mut next = move |below: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % below
    };
    let messages = [Uuid::new_v4(), Uuid::new_v4()];
    let long = "long ".repeat(60);
    let pieces = if mixed {
        vec!["a", "bc ", "", "wörld ", "🙂", "\"q\"\n", &long]
    } else {
        vec!["a ", "bc ", "wörld ", "🙂", "the "]
    };
    let mut groups = Vec::new();
    let contents = [
        json!({"t": 1, "text": "a token"}),
        json!("a string with , and ] inside"),
        json!([1, [2, 3]]),
        json!(null),
        json!({"wörld": "🙂"}),
    ];
    for _ in 0..if mixed { 40 } else { 200 } {
        let mut group = Vec::new();
        for agent_id in agents {
            let mut drafts = Vec::new();
            let append = Uuid::now_v7();
            for _ in 0..next(12) {
                let mut draft = match (mixed, next(20)) {
                    (true, 0) => EventDraft::new(EventKind::ToolCall),
                    (true, 1 | 2) => EventDraft::new(EventKind::Thinking),
                    (true, 3..=5) => EventDraft::new(EventKind::StreamMessage),
                    _ => EventDraft::new(EventKind::Text),
                };
                if draft.kind == EventKind::StreamMessage {
                    // Messages of one append: one block (rows of messages, between the runs).
                    draft.block_id = Some(append);
                    draft.content = contents[next(contents.len() as u64) as usize].clone();
                } else if draft.kind != EventKind::ToolCall {
                    draft.message_id = Some(messages[(mixed && next(10) == 0) as usize]);
                    draft.delta = Some(json!(pieces[next(pieces.len() as u64) as usize]));
                    draft.delta_path = Some("text".into());
                    draft.delta_action = Some(app::DeltaAction::Append);
                    if mixed && next(3) == 0 {
                        draft.raw = Some(json!({"type": "delta", "n": next(1_000)}));
                    }
                }
                drafts.push(draft);
            }
            let mut batch = batch(agent_id, drafts);
            chains.assign(&mut batch);
            group.push(batch);
        }
        groups.push(group);
    }
    groups
}

/// Every seq of a streamed log reads back as it was committed, from every cursor, with every
/// limit, typed and as JSON, and by id.
async fn streamed_appends_read_back_at_every_cursor(subject: &Subject) {
    let store = subject.store.as_ref();
    let agents = [
        store.create_agent(NewAgent::default()).await.unwrap().id,
        store.create_agent(NewAgent::default()).await.unwrap().id,
    ];
    let mut committed = vec![Vec::new(), Vec::new()];
    for group in streamed_groups(agents, true) {
        for (index, events) in store.append(&group).await.unwrap().into_iter().enumerate() {
            committed[index].extend(events);
        }
    }
    for (agent_id, committed) in agents.iter().zip(&committed) {
        assert!(committed.len() > 100, "{}", committed.len());
        for since in 0..=committed.len() as u64 {
            for limit in [1, 7, 1_000] {
                let read = store.read_events(*agent_id, since, limit).await.unwrap();
                let want: Vec<_> = committed
                    .iter()
                    .skip(since as usize)
                    .take(limit as usize)
                    .cloned()
                    .collect();
                assert_eq!(read, want, "since {since}, limit {limit}");
            }
        }
        let json = store.read_events_json(*agent_id, 0, 1_000).await.unwrap();
        assert_eq!(
            json,
            committed.iter().map(EventJson::of).collect::<Vec<_>>()
        );
        let ids: Vec<Uuid> = committed.iter().map(|event| event.id).collect();
        let unique: std::collections::HashSet<Uuid> = ids.iter().copied().collect();
        assert_eq!(unique.len(), ids.len(), "ids are unique");
        let mut found = store.events_by_id(&ids).await.unwrap();
        found.sort_by_key(|event| event.seq);
        assert_eq!(&found, committed);
    }
}

/// A saved snapshot comes back as saved; an older one does not replace it, one of the same seq
/// does; it goes with its agent.
async fn a_snapshot_is_kept_until_a_newer_one(subject: &Subject) {
    let store = subject.store.as_ref();
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    assert_eq!(store.load_snapshot(agent.id).await.unwrap(), None);
    let snapshot = |last_seq: u64, byte: u8| StoredSnapshot {
        last_seq,
        event_id: Uuid::new_v4(),
        body: vec![byte; 3_000],
    };
    let saved = snapshot(10, 1);
    store.save_snapshot(agent.id, &saved).await.unwrap();
    assert_eq!(
        store.load_snapshot(agent.id).await.unwrap(),
        Some(saved.clone())
    );
    store
        .save_snapshot(agent.id, &snapshot(9, 2))
        .await
        .unwrap();
    assert_eq!(store.load_snapshot(agent.id).await.unwrap(), Some(saved));
    let same_seq = snapshot(10, 3);
    store.save_snapshot(agent.id, &same_seq).await.unwrap();
    assert_eq!(store.load_snapshot(agent.id).await.unwrap(), Some(same_seq));
    let error = store
        .save_snapshot(Uuid::new_v4(), &snapshot(1, 4))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::UnknownAgent(_)), "{error}");
    assert!(store.delete_agent(agent.id).await.unwrap());
    assert_eq!(store.load_snapshot(agent.id).await.unwrap(), None);
}

/// A producer's position commits with its batch, follows each batch, is per agent, goes with
/// its agent, and a new epoch forgets the agent's oldest producers past the bound.
async fn a_producers_position_commits_with_its_batch(subject: &Subject) {
    let store = subject.store.as_ref();
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let other = store.create_agent(NewAgent::default()).await.unwrap();
    assert_eq!(store.producer_position(agent.id, "p").await.unwrap(), None);
    // A batch of seq n is fenced against seq n − 1 (none before the first).
    let stamp = |epoch, seq: u64| ProducerStamp {
        producer_id: "p".into(),
        epoch,
        seq,
        run_id: None,
        fenced_at: seq.checked_sub(1).map(|previous| (epoch, previous)),
    };
    let at = |agent_id, producer: &'static str| async move {
        store
            .producer_position(agent_id, producer)
            .await
            .unwrap()
            .map(|position| (position.stamp.epoch, position.stamp.seq))
    };
    let with = |agent_id, stamp| AppendBatch {
        producer: Some(stamp),
        ..batch(agent_id, texts(2))
    };
    store.append(&[with(agent.id, stamp(3, 0))]).await.unwrap();
    let before = chrono::Utc::now();
    store.append(&[with(agent.id, stamp(3, 1))]).await.unwrap();
    let position = store
        .producer_position(agent.id, "p")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((position.stamp.epoch, position.stamp.seq), (3, 1));
    assert!(
        position.updated_at >= before - chrono::Duration::seconds(1),
        "the position's time is its last batch's: {}",
        position.updated_at
    );
    assert_eq!(at(other.id, "p").await, None);
    // A batch fenced against a position that moved since (another server took the same retry)
    // writes nothing.
    let head = store.head_seq(agent.id).await.unwrap();
    let raced = store.append(&[with(agent.id, stamp(3, 1))]).await;
    assert!(
        matches!(raced, Err(StoreError::ProducerMoved { .. })),
        "{raced:?}"
    );
    let fresh = ProducerStamp {
        fenced_at: Some((3, 0)),
        ..stamp(9, 0)
    };
    let raced = store.append(&[with(other.id, fresh)]).await;
    assert!(
        matches!(raced, Err(StoreError::ProducerMoved { .. })),
        "a first batch fenced against a position that is not there: {raced:?}"
    );
    assert_eq!(store.head_seq(agent.id).await.unwrap(), head);
    assert_eq!(at(agent.id, "p").await, Some((3, 1)));
    // A batch that fails (an unknown agent beside it) leaves the position where it was.
    let failed = store
        .append(&[with(agent.id, stamp(3, 2)), batch(Uuid::new_v4(), texts(1))])
        .await;
    assert!(failed.is_err());
    assert_eq!(at(agent.id, "p").await, Some((3, 1)));
    // Past the bound, a producer's first batch forgets the least recently written others.
    let bound = agentstream_server::store::PRODUCERS_PER_AGENT_MAX as usize;
    for index in 0..bound {
        let stamp = ProducerStamp {
            producer_id: format!("q{index}"),
            epoch: 0,
            seq: 0,
            run_id: Some(Uuid::now_v7()),
            fenced_at: None,
        };
        store.append(&[with(other.id, stamp)]).await.unwrap();
    }
    store.append(&[with(other.id, stamp(0, 0))]).await.unwrap();
    assert_eq!(at(other.id, "q0").await, None);
    let newest = store
        .producer_position(other.id, &format!("q{}", bound - 1))
        .await
        .unwrap()
        .unwrap();
    assert!(newest.stamp.run_id.is_some());
    assert!(store.delete_agent(agent.id).await.unwrap());
    assert_eq!(store.producer_position(agent.id, "p").await.unwrap(), None);
}

async fn run_cases(subject: Subject) {
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
    let url = PgStore::create_database(&common::postgres_admin_url(), "agentstream_test")
        .await
        .unwrap();
    PgStore::open(&url, &ClusterOptions::default())
        .await
        .unwrap()
}

const COUNT_ROWS: &str = "SELECT count(*) FROM events";

async fn sqlite_rows(store: &SqliteStore) -> i64 {
    sqlx::query_scalar(COUNT_ROWS)
        .fetch_one(store.pool())
        .await
        .unwrap()
}

async fn postgres_rows(store: &PgStore) -> i64 {
    sqlx::query_scalar(COUNT_ROWS)
        .fetch_one(store.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn sqlite_keeps_the_store_contract() {
    let (_directory, store) = new_sqlite().await;
    run_cases(Subject {
        store: Arc::new(store),
        cluster: None,
    })
    .await;
}

/// Writes the plain stream (`streamed_groups(_, false)`) for two new agents; the events written.
async fn write_plain_stream(store: &dyn Store) -> usize {
    let agents = [
        store.create_agent(NewAgent::default()).await.unwrap().id,
        store.create_agent(NewAgent::default()).await.unwrap().id,
    ];
    let mut events = 0;
    for group in streamed_groups(agents, false) {
        events += store
            .append(&group)
            .await
            .unwrap()
            .iter()
            .map(Vec::len)
            .sum::<usize>();
    }
    events
}

/// ~7 bytes of text and varints per token, rows of at most 640: ~90 tokens a row.
fn assert_shared_rows(rows: i64, events: usize) {
    assert!(
        (rows as usize) * 40 < events,
        "{rows} rows for {events} events"
    );
}

/// Both stores keep a streamed log in few rows: runs of appends share one.
#[tokio::test]
async fn sqlite_keeps_runs_of_appends_in_shared_rows() {
    let (_directory, store) = new_sqlite().await;
    let events = write_plain_stream(&store).await;
    assert_shared_rows(sqlite_rows(&store).await, events);
}

#[tokio::test]
async fn postgres_keeps_runs_of_appends_in_shared_rows() {
    let store = new_postgres().await;
    let events = write_plain_stream(&store).await;
    assert_shared_rows(postgres_rows(&store).await, events);
}

/// Three appends of 64 stream messages each to a new log (ids chained as the writer chains
/// them); the events the store says it wrote.
async fn write_three_appends_of_messages(store: &dyn Store) -> usize {
    let log = store.create_agent(NewAgent::default()).await.unwrap().id;
    let mut chains = IdChains::default();
    let mut events = 0;
    for append in 0..3 {
        let block = Uuid::now_v7();
        let drafts = (0..64)
            .map(|k| {
                let mut draft = EventDraft::new(EventKind::StreamMessage);
                draft.block_id = Some(block);
                draft.content = json!({"append": append, "k": k, "text": "a token"});
                draft
            })
            .collect();
        let mut batch = batch(log, drafts);
        chains.assign(&mut batch);
        events += store.append(&[batch]).await.unwrap()[0].len();
    }
    let read = store.read_events(log, 100, 1_000).await.unwrap();
    assert_eq!(read.len(), 92, "read from inside a row");
    assert_eq!(
        read[0].content,
        json!({"append": 1, "k": 36, "text": "a token"})
    );
    events
}

/// Both stores keep one append's messages in one row.
#[tokio::test]
async fn sqlite_keeps_an_appends_messages_in_one_row() {
    let (_directory, store) = new_sqlite().await;
    let events = write_three_appends_of_messages(&store).await;
    assert_eq!((sqlite_rows(&store).await, events), (3, 192));
}

#[tokio::test]
async fn postgres_keeps_an_appends_messages_in_one_row() {
    let store = new_postgres().await;
    let events = write_three_appends_of_messages(&store).await;
    assert_eq!((postgres_rows(&store).await, events), (3, 192));
}

#[tokio::test]
async fn postgres_keeps_the_store_contract() {
    let store = Arc::new(new_postgres().await);
    run_cases(Subject {
        store: store.clone(),
        cluster: Some(store),
    })
    .await;
}
