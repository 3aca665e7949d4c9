//! Write-ahead for tools: a tool starts only after its call is committed to the log.
//!
//! The real SQLite store, writer, agent loop, scripted provider and `slow` tool; the store's
//! commit of the call's `ready` event is held back, as a disk or a database in a checkpoint stall
//! holds it back. A tool that started before that commit would have done its work (and, for a
//! tool with effects, changed the world) with no trace of its call in the log if the process
//! died meanwhile, and readers would not see the call until the tool was nearly done.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentstream_server::agent::RunOptions;
use agentstream_server::config::Config;
use agentstream_server::store::sqlite::SqliteStore;
use agentstream_server::store::{AppendBatch, NewAgent, Store, StoreError};
use agentstream_server::AppState;
use app::EventKind;
use async_trait::async_trait;
use common::hooked_store::{HookedStore, Hooks};

/// How long the commit of a tool call's `ready` event is held back: longer than the tool runs.
const READY_COMMIT_STALL_MS: u64 = 1_500;
/// The `slow` tool's run time in the test.
const TOOL_SECONDS: u64 = 1;

/// What the store saw, and when.
#[derive(Default)]
struct Seen {
    /// When the append holding the call's `ready` event returned (it is committed from then).
    ready_committed: Option<Instant>,
    /// When the tool's result was handed to the store.
    result_submitted: Option<Instant>,
}

fn is_ready(batch: &AppendBatch) -> bool {
    batch.drafts.iter().any(|draft| {
        draft.kind == EventKind::ToolCall
            && draft.delta.as_ref().and_then(|delta| delta.get("status")).and_then(|s| s.as_str())
                == Some("ready")
    })
}

/// Stalls the append that holds a tool call's `ready` event, and notes the times.
#[async_trait]
impl Hooks for Arc<Mutex<Seen>> {
    async fn before_append(&self, batches: &[AppendBatch]) -> Result<(), StoreError> {
        let result = batches
            .iter()
            .any(|batch| batch.drafts.iter().any(|draft| draft.kind == EventKind::ToolResult));
        if result {
            self.lock().unwrap().result_submitted.get_or_insert_with(Instant::now);
        }
        if batches.iter().any(is_ready) {
            tokio::time::sleep(Duration::from_millis(READY_COMMIT_STALL_MS)).await;
        }
        Ok(())
    }
    fn after_commit(&self, batches: &[AppendBatch]) -> Result<(), StoreError> {
        if batches.iter().any(is_ready) {
            self.lock().unwrap().ready_committed.get_or_insert_with(Instant::now);
        }
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_starts_only_after_its_call_is_committed() {
    let directory = tempfile::tempdir().unwrap();
    let database_url = format!("sqlite://{}", directory.path().join("log.db").display());
    let config = Config { database_url: database_url.clone(), ..Config::default() };
    let seen = Arc::new(Mutex::new(Seen::default()));
    let inner = SqliteStore::open(&database_url).await.unwrap();
    let store: Arc<dyn Store> = Arc::new(HookedStore { inner, hooks: seen.clone() });
    let state = AppState::open_with_store(&config, store).await.unwrap();
    let agent = state.store.create_agent(NewAgent::default()).await.unwrap();

    let content = format!("/tools slow {TOOL_SECONDS}");
    let started =
        state.starter.start_run(agent.id, content, None, RunOptions::default()).await.unwrap();
    common::wait_until("the run to end", || async {
        (state.runs.active_run(agent.id) != Some(started.run_id)).then_some(())
    })
    .await;

    let log = state.store.read_events(agent.id, 0, 1000).await.unwrap();
    let result = common::first_of(&log, EventKind::ToolResult);
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
