//! The first open of a long conversation after a restart: a log of `tokens` streamed tokens in
//! runs of `run_tokens` (written straight through the store, ids chained as the writer chains
//! them), then the real server started on it and its history page loaded — once with no saved
//! snapshot (the fold reads the log's window), and again after a second restart, when the first
//! open's fold had saved its snapshot in the store.

use std::path::Path;
use std::time::Instant;

use agentstream_server::store::chunk::IdChains;
use agentstream_server::store::sqlite::SqliteStore;
use agentstream_server::store::{Agents, AppendBatch, EventDraft, EventLog, NewAgent};
use app::{DeltaAction, EventKind};
use serde_json::{json, Value};
use uuid::Uuid;

use super::live::Server;

/// Drafts one append of the log at a time.
const WRITE_BATCH_EVENTS: usize = 2_000;

pub struct FirstOpen {
    pub tokens: u64,
    pub without_snapshot_ms: f64,
    pub with_saved_snapshot_ms: f64,
    pub page_bytes: usize,
}

impl FirstOpen {
    pub fn print(&self) {
        println!(
            "{:<66} {:>12.1} ms / {:.1} ms",
            format!(
                "first open of a {}-token conversation after a restart: no saved / saved snapshot",
                self.tokens
            ),
            self.without_snapshot_ms,
            self.with_saved_snapshot_ms
        );
        println!(
            "  the history page: {} KB (the fold's window of the log)",
            self.page_bytes / 1024
        );
    }
}

fn draft(kind: EventKind, run_id: Uuid) -> EventDraft {
    let mut draft = EventDraft::new(kind);
    draft.run_id = Some(run_id);
    draft
}

/// Writes the conversation: per run its start, the user's message, the streamed reply, its end.
async fn write_log(url: &str, tokens: u64, run_tokens: u64) -> Uuid {
    let store = SqliteStore::open(url).await.unwrap();
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let mut chains = IdChains::default();
    let mut drafts = Vec::new();
    let mut flush = |drafts: &mut Vec<EventDraft>| {
        let mut batch = AppendBatch::new(agent.id, std::mem::take(drafts));
        chains.assign(&mut batch);
        batch
    };
    for _ in 0..tokens.div_ceil(run_tokens) {
        let run_id = Uuid::now_v7();
        drafts.push(draft(EventKind::RunStarted, run_id));
        let mut user = draft(EventKind::User, run_id);
        user.message_id = Some(Uuid::now_v7());
        user.content = json!({ "text": "go on, please" });
        drafts.push(user);
        let (block, message) = (Uuid::now_v7(), Uuid::now_v7());
        for index in 0..run_tokens {
            let mut token = draft(EventKind::Text, run_id);
            token.block_id = Some(block);
            token.message_id = Some(message);
            token.delta = Some(Value::String(format!("w{} ", index % 1000)));
            token.delta_path = Some("text".into());
            token.delta_action = Some(DeltaAction::Append);
            drafts.push(token);
            if drafts.len() >= WRITE_BATCH_EVENTS {
                store.append(&[flush(&mut drafts)]).await.unwrap();
            }
        }
        let mut end = draft(EventKind::RunCompleted, run_id);
        end.content = json!({ "stop_reason": "end_turn" });
        drafts.push(end);
    }
    store.append(&[flush(&mut drafts)]).await.unwrap();
    agent.id
}

/// One history page load on a server just started on `url`: its time and size.
async fn open_after_start(url: &str, agent_id: Uuid) -> (f64, usize) {
    let server = Server::start(url, 0, 1).await;
    let started = Instant::now();
    let response =
        reqwest::get(format!("{}/agents/{agent_id}/history", server.base)).await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let bytes = response.bytes().await.unwrap().len();
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    server.stop().await;
    (elapsed, bytes)
}

pub async fn measure(path: &Path, tokens: u64, run_tokens: u64) -> FirstOpen {
    crate::baseline::remove_database(path);
    let url = format!("sqlite://{}", path.display());
    let agent_id = write_log(&url, tokens, run_tokens).await;
    let (without_snapshot_ms, page_bytes) = open_after_start(&url, agent_id).await;
    let (with_saved_snapshot_ms, _) = open_after_start(&url, agent_id).await;
    crate::baseline::remove_database(path);
    FirstOpen { tokens, without_snapshot_ms, with_saved_snapshot_ms, page_bytes }
}
