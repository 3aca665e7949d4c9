//! What a fork costs: a conversation of many events forked at its end beside an empty one
//! forked at 0 (a fork writes one row and copies nothing, so the two should cost the same), and
//! what reading through a fork costs (a branch's first page is its parent's events, read along
//! its chain; its newest page is its own).

use std::sync::Arc;
use std::time::Instant;

use agentstream_server::agent::branch::fork_at;
use agentstream_server::store::{AppendBatch, EventDraft, NewAgent, Store};
use app::EventKind;
use serde_json::json;
use uuid::Uuid;

/// Forks timed per conversation.
const FORKS: usize = 50;
/// Events per append while the long conversation is written.
const APPEND_EVENTS: u64 = 5_000;
/// Events per page read.
const PAGE_EVENTS: u32 = 1_000;

/// A conversation of `events` events (text, then a run's end: a place a fork may go).
async fn conversation(store: &dyn Store, events: u64) -> Uuid {
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let mut written = 0;
    while written < events {
        let count = APPEND_EVENTS.min(events - written);
        let drafts: Vec<EventDraft> = (0..count)
            .map(|index| {
                let last = written + index + 1 == events;
                let kind = if last { EventKind::RunCompleted } else { EventKind::Text };
                let mut draft = EventDraft::new(kind);
                draft.content = json!({ "text": "token " });
                draft
            })
            .collect();
        store.append(&[AppendBatch::new(agent.id, drafts)]).await.unwrap();
        written += count;
    }
    agent.id
}

/// Median and slowest of `FORKS` forks of `log` after `after_seq`, in µs.
async fn fork_times(store: &dyn Store, log: Uuid, after_seq: u64) -> (f64, f64) {
    let mut micros = Vec::with_capacity(FORKS);
    for _ in 0..FORKS {
        let started = Instant::now();
        fork_at(store, log, after_seq).await.expect("the fork is made");
        micros.push(started.elapsed().as_secs_f64() * 1e6);
    }
    micros.sort_by(f64::total_cmp);
    (micros[FORKS / 2], micros[FORKS - 1])
}

/// Median µs of reading a page of `log` after `since`.
async fn page_micros(store: &dyn Store, log: Uuid, since: u64) -> f64 {
    let mut micros = Vec::new();
    for _ in 0..21 {
        let started = Instant::now();
        let page = store.read_events_json(log, since, PAGE_EVENTS).await.unwrap();
        assert!(!page.is_empty(), "the page has events");
        micros.push(started.elapsed().as_secs_f64() * 1e6);
    }
    micros.sort_by(f64::total_cmp);
    micros[micros.len() / 2]
}

pub async fn measure(store: Arc<dyn Store>, events: u64, label: &str) {
    let store = store.as_ref();
    let long = conversation(store, events).await;
    let empty = store.create_agent(NewAgent::default()).await.unwrap().id;
    // Right after a million appends, SQLite's append thread moves the newest rows into the log
    // while it is idle, and a write from elsewhere waits for the write lock: timed apart.
    let started = Instant::now();
    fork_at(store, long, events).await.expect("the fork is made");
    println!(
        "{:<66} {:>12.0} µs",
        format!("{label}first fork right after the conversation was written"),
        started.elapsed().as_secs_f64() * 1e6
    );
    let (long_p50, long_max) = fork_times(store, long, events).await;
    let (empty_p50, empty_max) = fork_times(store, empty, 0).await;
    println!(
        "{:<66} {:>12.0} µs ({:.0} max)",
        format!("{label}fork of a {events}-event conversation at its end, p50"),
        long_p50,
        long_max
    );
    println!(
        "{:<66} {:>12.0} µs ({:.0} max)",
        format!("{label}fork of an empty conversation, p50"),
        empty_p50,
        empty_max
    );
    // A branch with events of its own, read at its start (its parent's) and at its end.
    let branch = fork_at(store, long, events).await.unwrap().id;
    store
        .append(&[AppendBatch::new(
            branch,
            (0..PAGE_EVENTS).map(|_| EventDraft::new(EventKind::Text)).collect(),
        )])
        .await
        .unwrap();
    let tail = events + u64::from(PAGE_EVENTS) / 2;
    println!(
        "{:<66} {:>12.0} µs / {:.0} µs",
        format!("{label}a {PAGE_EVENTS}-event page: the parent's first / the branch's first"),
        page_micros(store, long, 0).await,
        page_micros(store, branch, 0).await
    );
    println!(
        "{:<66} {:>12.0} µs",
        format!("{label}a page across the fork point (parent's then the branch's own)"),
        page_micros(store, branch, tail - u64::from(PAGE_EVENTS)).await
    );
}
