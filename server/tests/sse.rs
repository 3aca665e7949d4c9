//! The log as Server-Sent Events: `id:` is the seq; resume with Last-Event-ID or `?since=`.

use crate::common;

use crate::common::RequestExt;
use app::{AgentEvent, EventKind};
use common::{assert_contiguous, TestServer};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use uuid::Uuid;

/// Reads SSE events from `response` until `stop` says so; returns the events and their ids.
async fn read_events(
    response: reqwest::Response,
    mut stop: impl FnMut(&AgentEvent) -> bool,
) -> Vec<AgentEvent> {
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut stream = response.bytes_stream().eventsource();
    let mut events = Vec::new();
    loop {
        let next = tokio::time::timeout(common::WAIT_MAX, stream.next())
            .await
            .expect("the stream went quiet")
            .expect("the stream ended")
            .expect("the stream failed");
        if next.event != "message" {
            continue;
        }
        let event: AgentEvent = serde_json::from_str(&next.data).unwrap();
        assert_eq!(next.id, event.seq.to_string(), "the SSE id is the seq");
        let done = stop(&event);
        events.push(event);
        if done {
            return events;
        }
    }
}

#[tokio::test]
async fn the_sse_tail_resumes_from_last_event_id_with_no_gap_and_no_duplicate() {
    let (server, agent_id) = TestServer::start_paced(400, 2).await.with_agent().await;
    let url = server.url(&format!("/v1/agents/{agent_id}/events/stream"));
    let first = server.http.get(&url).sent().await;
    server.start_run(agent_id, "stream me").await;

    // Read part of the run, then cut the connection.
    let mut seen = read_events(first, |event| event.seq >= 60).await;
    let cursor = seen.last().unwrap().seq;
    // Resume as EventSource does: the URL it started with, plus Last-Event-ID.
    let resumed = server
        .http
        .get(format!("{url}?since=0"))
        .header("Last-Event-ID", cursor.to_string())
        .sent()
        .await;
    seen.extend(read_events(resumed, |event| event.kind.is_run_end()).await);
    assert_contiguous(&seen, 1);
    assert_eq!(seen, server.all_events(agent_id).await);

    // `?since=` works without the header too.
    let replay = server.http.get(format!("{url}?since=100")).sent().await;
    let replayed = read_events(replay, |event| event.kind == EventKind::RunCompleted).await;
    assert_contiguous(&replayed, 101);
}

#[tokio::test]
async fn bad_sse_cursors_get_json_errors() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let url = server.url(&format!("/v1/agents/{agent_id}/events/stream"));
    let cases = [
        (server.http.get(format!("{url}?since=-1")), 400, "invalid_query"),
        (server.http.get(format!("{url}?since=9")), 400, "since_beyond_head"),
        (server.http.get(&url).header("Last-Event-ID", "abc"), 400, "invalid_cursor"),
        (
            server.http.get(server.url(&format!("/v1/agents/{}/events/stream", Uuid::new_v4()))),
            404,
            "unknown_agent",
        ),
    ];
    for (request, status, code) in cases {
        let response = request.sent().await;
        assert_eq!(response.status(), status);
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], code);
    }
}

#[tokio::test]
async fn a_coalesced_sse_replay_carries_merged_appends_with_the_last_seq_as_id() {
    let server = TestServer::start_with(|config| config.scripted.reply_tokens = 2_000).await;
    let (agent_id, run_id, all) = server.finished_run("merge me").await;
    let url = server.url(&format!("/v1/agents/{agent_id}/events/stream?coalesce=true"));
    let response = server.http.get(&url).sent().await;
    // `read_events` checks that every SSE id is the event's (last) seq: a client that resumes
    // with Last-Event-ID resumes after everything a merged event stands for.
    let merged = read_events(response, |event| event.kind.is_run_end()).await;
    assert!(merged.len() * 10 < all.len(), "{} events for {} seqs", merged.len(), all.len());
    common::assert_ranges_contiguous(&merged, 1);
    assert_eq!(common::fold(&merged), common::fold(&all));
    assert_eq!(common::reply_text(&merged, run_id), common::reply_text(&all, run_id));
}

/// A database that fails the log's catch-up reads once told to.
struct FailingReads(std::sync::atomic::AtomicBool);

impl common::hooked_store::Hooks for std::sync::Arc<FailingReads> {
    fn before_read(
        &self,
        read: common::hooked_store::Read,
    ) -> Result<(), agentstream_server::store::StoreError> {
        let failing = self.0.load(std::sync::atomic::Ordering::Relaxed);
        if failing && matches!(read, common::hooked_store::Read::Log) {
            return Err(agentstream_server::store::StoreError::Unavailable(
                "connection refused by db.internal:5432 for user admin".into(),
            ));
        }
        Ok(())
    }
}

/// A read that fails in the store ends the stream with an `error` event that says to subscribe
/// again; the database's own words (hosts, users) stay in the server's log, as on the WebSocket.
#[tokio::test]
async fn a_failed_read_ends_the_stream_with_an_error_that_names_no_database_detail() {
    use agentstream_server::store::{sqlite::SqliteStore, NewAgent, Store};
    use std::sync::Arc;
    let directory = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", directory.path().join("log.db").display());
    let failing = Arc::new(FailingReads(std::sync::atomic::AtomicBool::new(false)));
    let store: Arc<dyn Store> = Arc::new(common::hooked_store::HookedStore {
        inner: SqliteStore::open(&url).await.unwrap(),
        hooks: failing.clone(),
    });
    let config = agentstream_server::config::Config { database_url: url, ..Default::default() };
    let state = agentstream_server::state::AppState::open_with_store(&config, store).await.unwrap();
    let agent = state.store.create_agent(NewAgent::default()).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let router = agentstream_server::router::api_router(state);
    tokio::spawn(async move { axum::serve(listener, router).await });

    failing.0.store(true, std::sync::atomic::Ordering::Relaxed);
    let response = agentstream_server::http_client::client()
        .get(format!("http://{address}/v1/agents/{}/events/stream", agent.id))
        .sent()
        .await;
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream().eventsource();
    let error = tokio::time::timeout(common::WAIT_MAX, async {
        loop {
            let next = stream.next().await.expect("an event").expect("a frame");
            if next.event == "error" {
                return next.data;
            }
        }
    })
    .await
    .expect("an error event");
    assert!(error.contains("subscribe again"), "{error}");
    assert!(!error.contains("db.internal"), "the database's words leaked: {error}");
}
