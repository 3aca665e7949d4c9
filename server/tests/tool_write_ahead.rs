//! Write-ahead for tools: a tool starts only after its call is committed to the log.
//!
//! The real SQLite store, writer, agent loop, scripted provider and `slow` tool; the store's
//! commit of the call's `ready` event is held back, as a disk or a database in a checkpoint stall
//! holds it back. A tool that started before that commit would have done its work (and, for a
//! tool with effects, changed the world) with no trace of its call in the log if the process
//! died meanwhile; readers would also see its result arrive right behind a call that had been
//! invisible for as long as the tool ran.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentstream_server::config::Config;
use agentstream_server::runs::RunOptions;
use agentstream_server::store::sqlite::SqliteStore;
use agentstream_server::store::{AppendBatch, EventJson, NewAgent, Store, StoreError};
use agentstream_server::{api, AppState};
use app::protocol::Agent;
use app::{AgentEvent, EventKind};
use async_trait::async_trait;
use uuid::Uuid;

/// How long the commit of a tool call's `ready` event is held back: longer than the tool runs.
const READY_COMMIT_STALL_MS: u64 = 1_500;
/// The `slow` tool's run time in the test.
const TOOL_SECONDS: u64 = 1;

#[derive(Default)]
struct Seen {
    /// When the append holding the call's `ready` event returned (it is committed from then).
    ready_committed: Option<Instant>,
    /// When the tool's result was handed to the store.
    result_submitted: Option<Instant>,
}

/// The SQLite store, with the append that holds a tool call's `ready` event stalled.
struct StallingStore {
    inner: SqliteStore,
    seen: Arc<Mutex<Seen>>,
}

fn is_ready(batch: &AppendBatch) -> bool {
    batch.drafts.iter().any(|draft| {
        draft.kind == EventKind::ToolCall
            && draft.delta.as_ref().and_then(|delta| delta.get("status")).and_then(|s| s.as_str())
                == Some("ready")
    })
}

#[async_trait]
impl Store for StallingStore {
    async fn create_agent(&self, agent: NewAgent) -> Result<Agent, StoreError> {
        self.inner.create_agent(agent).await
    }
    async fn list_agents(&self, limit: u32) -> Result<Vec<Agent>, StoreError> {
        self.inner.list_agents(limit).await
    }
    async fn get_agent(&self, agent_id: Uuid) -> Result<Option<Agent>, StoreError> {
        self.inner.get_agent(agent_id).await
    }
    async fn delete_agent(&self, agent_id: Uuid) -> Result<bool, StoreError> {
        self.inner.delete_agent(agent_id).await
    }
    async fn head_seq(&self, agent_id: Uuid) -> Result<Option<u64>, StoreError> {
        self.inner.head_seq(agent_id).await
    }
    async fn read_events(&self, agent_id: Uuid, since: u64, limit: u32) -> Result<Vec<AgentEvent>, StoreError> {
        self.inner.read_events(agent_id, since, limit).await
    }
    async fn read_events_json(&self, agent_id: Uuid, since: u64, limit: u32) -> Result<Vec<EventJson>, StoreError> {
        self.inner.read_events_json(agent_id, since, limit).await
    }
    async fn run_outline(&self, run_id: Uuid) -> Result<Vec<AgentEvent>, StoreError> {
        self.inner.run_outline(run_id).await
    }
    async fn claim_run_key(&self, agent_id: Uuid, key: &str, run_id: Uuid) -> Result<Uuid, StoreError> {
        self.inner.claim_run_key(agent_id, key, run_id).await
    }
    async fn release_run_key(&self, agent_id: Uuid, key: &str) -> Result<(), StoreError> {
        self.inner.release_run_key(agent_id, key).await
    }
    async fn unfinished_runs(&self) -> Result<Vec<AgentEvent>, StoreError> {
        self.inner.unfinished_runs().await
    }
    async fn release_unstarted_run_keys(&self) -> Result<u64, StoreError> {
        self.inner.release_unstarted_run_keys().await
    }
    async fn events_by_id(&self, ids: &[Uuid]) -> Result<Vec<AgentEvent>, StoreError> {
        self.inner.events_by_id(ids).await
    }
    async fn append(&self, batches: &[AppendBatch]) -> Result<Vec<Vec<AgentEvent>>, StoreError> {
        let ready = batches.iter().any(is_ready);
        let result = batches
            .iter()
            .any(|batch| batch.drafts.iter().any(|draft| draft.kind == EventKind::ToolResult));
        if result {
            self.seen.lock().unwrap().result_submitted.get_or_insert_with(Instant::now);
        }
        if ready {
            tokio::time::sleep(Duration::from_millis(READY_COMMIT_STALL_MS)).await;
        }
        let committed = self.inner.append(batches).await?;
        if ready {
            self.seen.lock().unwrap().ready_committed.get_or_insert_with(Instant::now);
        }
        Ok(committed)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_starts_only_after_its_call_is_committed() {
    let directory = tempfile::tempdir().unwrap();
    let database_url = format!("sqlite://{}", directory.path().join("log.db").display());
    let config = Config {
        database_url: database_url.clone(),
        ..Config::default()
    };
    let seen = Arc::new(Mutex::new(Seen::default()));
    let inner = SqliteStore::open(&database_url).await.unwrap();
    let store: Arc<dyn Store> = Arc::new(StallingStore { inner, seen: seen.clone() });
    let state = AppState::open_with_store(&config, store).await.unwrap();
    let agent = state.store.create_agent(NewAgent::default()).await.unwrap();

    let content = format!("/tools slow {TOOL_SECONDS}");
    let started = api::start_run(&state, agent.id, content, None, RunOptions::default()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while state.runs.active_run(agent.id) == Some(started.run_id) {
        assert!(Instant::now() < deadline, "the run did not end");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let log = state.store.read_events(agent.id, 0, 1000).await.unwrap();
    let result = log.iter().find(|event| event.kind == EventKind::ToolResult).expect("the tool answered");
    assert_eq!(result.content["is_error"], false, "the tool ran: {}", result.content);
    let seen = seen.lock().unwrap();
    let ready_committed = seen.ready_committed.expect("the call's ready event was committed");
    let result_submitted = seen.result_submitted.expect("the result was written");
    // The tool sleeps TOOL_SECONDS from its start; started after the commit, its result comes
    // at least that long after it. Started before (during the stall), the result was already
    // waiting when the commit returned.
    let after = result_submitted.saturating_duration_since(ready_committed);
    assert!(
        after >= Duration::from_secs(TOOL_SECONDS),
        "the tool's result was written {after:?} after its call committed: it ran before the call was durable"
    );
}
