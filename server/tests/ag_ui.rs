//! AG-UI over real sockets, on the configured store: a run's events and its retry, what the
//! run records, connect (snapshot, the run in flight compacted, live) and cursor resume, and
//! refusals that write nothing. (The official client is exercised in
//! end2end/tests/ag-ui.spec.ts.)

use crate::common;

use crate::common::RequestExt;
use app::EventKind;
use common::{reply_text, TestServer, WAIT_MAX};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{json, Value};
use uuid::Uuid;

/// The events of an AG-UI stream (every data line is JSON: there is no `[DONE]`), up to its
/// end or only the first `count`.
async fn events(response: reqwest::Response, count: Option<usize>) -> Vec<Value> {
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut frames = Box::pin(response.bytes_stream().eventsource());
    let mut events = Vec::new();
    while count.is_none_or(|count| events.len() < count) {
        let next =
            tokio::time::timeout(WAIT_MAX, frames.next()).await.expect("the stream went quiet");
        let Some(frame) = next else { break };
        let frame = frame.expect("well-formed SSE");
        let event: Value = serde_json::from_str(&frame.data).expect("every data line is JSON");
        assert!(!frame.data.contains("null"), "absent fields are omitted: {}", frame.data);
        events.push(event);
    }
    events
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|event| event["type"].as_str().unwrap()).collect()
}

fn text(events: &[Value]) -> String {
    events
        .iter()
        .filter(|event| event["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|event| event["delta"].as_str().unwrap())
        .collect()
}

fn input(thread: &str, message_id: &str, text: &str) -> Value {
    json!({
        "threadId": thread, "runId": format!("run-of-{message_id}"),
        "messages": [{ "id": message_id, "role": "user", "content": text }],
        "tools": [], "context": [{ "description": "page", "value": "home" }], "state": { "count": 1 },
    })
}

impl TestServer {
    async fn ag_ui(&self, path: &str, body: &Value) -> reqwest::Response {
        self.post(path, body).await
    }
}

fn agent_of(events: &[Value]) -> Uuid {
    events[0]["metadata"]["agent_id"].as_str().unwrap().parse().unwrap()
}

fn run_of(events: &[Value]) -> Uuid {
    events[0]["metadata"]["run_id"].as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_run_streams_its_events_records_its_input_and_a_retry_writes_nothing_twice() {
    let server = TestServer::start().await;
    let body = input("thread-one", "m1", "hello");
    let first = events(server.ag_ui("/v1/ag-ui", &body).await, None).await;
    assert_eq!(
        first[0],
        json!({ "type": "RUN_STARTED", "threadId": "thread-one", "runId": "run-of-m1", "metadata": first[0]["metadata"] })
    );
    assert_eq!(types(&first).last(), Some(&"RUN_FINISHED"));
    let (agent_id, run_id) = (agent_of(&first), run_of(&first));
    let log = server.all_events(agent_id).await;
    assert_eq!(text(&first), reply_text(&log, run_id));
    let seqs: Vec<u64> =
        first.iter().map(|event| event["metadata"]["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|pair| pair[0] <= pair[1]), "{seqs:?}");
    let started = common::first_of(&log, EventKind::RunStarted);
    assert_eq!(
        started.metadata["client"],
        json!({ "run_id": "run-of-m1", "context": [{ "description": "page", "value": "home" }], "state": { "count": 1 } })
    );

    let retry = events(server.ag_ui("/v1/ag-ui", &body).await, None).await;
    assert_eq!(retry, first);
    assert_eq!(server.all_events(agent_id).await.len(), log.len());
}

#[tokio::test]
async fn connect_replays_the_run_in_flight_at_once_and_a_cursor_continues_exactly() {
    let server = TestServer::start_paced(120, 10).await;
    let seen =
        events(server.ag_ui("/v1/ag-ui", &input("busy", "m1", "hello")).await, Some(40)).await;
    // The client went away; the run goes on. A new one connects.
    let connected =
        events(server.ag_ui("/v1/ag-ui/connect", &json!({ "threadId": "busy" })).await, None).await;
    assert_eq!(&types(&connected)[..2], ["RUN_STARTED", "MESSAGES_SNAPSHOT"]);
    assert_eq!(
        connected[1]["messages"],
        json!([{ "id": "m1", "role": "user", "content": "hello" }]),
        "the finished conversation: the answer in flight comes after"
    );
    assert_eq!(types(&connected).last(), Some(&"RUN_FINISHED"));
    let (agent_id, run_id) = (agent_of(&seen), run_of(&seen));
    let reply = reply_text(&server.all_events(agent_id).await, run_id);
    assert_eq!(text(&connected), reply);
    let live_contents = |events: &[Value]| {
        types(events).iter().filter(|kind| **kind == "TEXT_MESSAGE_CONTENT").count()
    };
    assert!(
        live_contents(&connected) < reply.split(' ').count(),
        "what was said before the connect came in one piece"
    );

    // A client that keeps the cursor continues after it, during the next run.
    let seen =
        events(server.ag_ui("/v1/ag-ui", &input("busy", "m2", "more")).await, Some(40)).await;
    let cursor = seen.last().unwrap()["metadata"]["seq"].as_u64().unwrap();
    let url = format!("/v1/ag-ui/connect?after_seq={cursor}");
    let rest = events(server.ag_ui(&url, &json!({ "threadId": "busy" })).await, None).await;
    assert_eq!(types(&rest)[0], "RUN_STARTED");
    assert!(rest[1..].iter().all(|event| event["metadata"]["seq"].as_u64().unwrap() > cursor));
    let run_id = run_of(&seen);
    let reply = reply_text(&server.all_events(agent_id).await, run_id);
    assert_eq!(text(&seen) + &text(&rest), reply);
    // The same through a retried run request with Last-Event-ID.
    let resumed = server
        .http
        .post(server.url("/v1/ag-ui"))
        .header("last-event-id", cursor.to_string())
        .json(&input("busy", "m2", "more"))
        .sent()
        .await;
    assert_eq!(text(&seen) + &text(&events(resumed, None).await), reply);
}

#[tokio::test]
async fn refused_inputs_write_nothing() {
    let server = TestServer::start().await;
    let before = server.agent_count().await;
    let user = json!({ "id": "u1", "role": "user", "content": "hi" });
    let cases: [(Value, u16); 5] = [
        (json!({ "runId": "r", "messages": [user] }), 422),
        (json!({ "threadId": "fresh", "messages": [] }), 422),
        (
            json!({ "threadId": "fresh", "messages": [user, { "id": "a", "role": "assistant", "content": "x" }] }),
            422,
        ),
        (
            json!({ "threadId": "fresh", "messages": [{ "id": "u1", "role": "user", "content": "z".repeat(40 * 1024) }] }),
            413,
        ),
        (json!({ "threadId": "fresh", "messages": [user], "state": "s".repeat(20 * 1024) }), 413),
    ];
    for (body, status) in cases {
        let response = server.ag_ui("/v1/ag-ui", &body).await;
        assert_eq!(response.status(), status, "{body}");
        let error: Value = response.json().await.unwrap();
        assert!(error["error"]["message"].as_str().is_some_and(|message| !message.is_empty()));
    }
    assert_eq!(server.agent_count().await, before, "no thread was given an agent");
    let connected =
        events(server.ag_ui("/v1/ag-ui/connect", &json!({ "threadId": "fresh" })).await, None)
            .await;
    assert_eq!(types(&connected), ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]);
    assert_eq!(connected[1]["messages"], json!([]));
    assert_eq!(
        server.ag_ui("/v1/ag-ui/cancel", &json!({ "threadId": "fresh" })).await.status(),
        404
    );
    assert_eq!(server.ag_ui("/v1/ag-ui/connect", &json!({})).await.status(), 422);
}

#[tokio::test]
async fn a_client_run_id_names_one_run() {
    let server = TestServer::start().await;
    let first =
        events(server.ag_ui("/v1/ag-ui", &input("aliases", "m1", "hello")).await, None).await;
    let agent_id = agent_of(&first);
    let written = server.all_events(agent_id).await.len();
    // The same runId for another message: refused, nothing written.
    let mut other = input("aliases", "m2", "something else");
    other["runId"] = json!("run-of-m1");
    let refused = server.ag_ui("/v1/ag-ui", &other).await;
    assert_eq!(refused.status(), 409);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["error"]["code"], "run_id_taken");
    assert_eq!(server.all_events(agent_id).await.len(), written);
    // A retry of the first message with its runId, or with a new one: the first run, again.
    let retry =
        events(server.ag_ui("/v1/ag-ui", &input("aliases", "m1", "hello")).await, None).await;
    assert_eq!(retry, first);
    let mut renamed = input("aliases", "m1", "hello");
    renamed["runId"] = json!("another-run-id");
    let renamed = events(server.ag_ui("/v1/ag-ui", &renamed).await, None).await;
    assert_eq!(run_of(&renamed), run_of(&first));
    assert_eq!(server.all_events(agent_id).await.len(), written);
    // The new runId was not kept: it can name the next message's run.
    let mut next = input("aliases", "m3", "next");
    next["runId"] = json!("another-run-id");
    let next = events(server.ag_ui("/v1/ag-ui", &next).await, None).await;
    assert_eq!(next[0]["runId"], "another-run-id");
    assert_ne!(run_of(&next), run_of(&first));
}
