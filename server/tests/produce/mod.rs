//! The producer API over real sockets: an agent loop that runs elsewhere writes its run into an
//! agent's log — exactly once across retries, fenced by epoch, checked event by event, held to
//! one run per agent, ended when cancelled or silent — and the log's surfaces serve the run.

use crate::common;
mod lifetimes;
mod runs;

use std::time::Duration;

use crate::common::RequestExt;
use app::protocol::ServerMessage;
use app::EventKind;
use common::{produce_request, TestServer};
use serde_json::{json, Value};
use uuid::Uuid;

const MESSAGE: &str = "0190d0c0-0000-7000-8000-00000000000a";
const USER_MESSAGE: &str = "0190d0c0-0000-7000-8000-00000000000b";

/// One producer request: `(status, headers, body)`.
async fn produce(
    server: &TestServer,
    agent_id: Uuid,
    (producer, epoch, seq): (&str, u64, u64),
    batch: Value,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let response =
        produce_request(&server.http, &server.base, agent_id, (producer, epoch, seq), &batch)
            .sent()
            .await;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, headers, body)
}

/// A `run_started` from producer `q` while a run is in progress: refused, 409 `run_in_progress`.
async fn assert_open_refused(server: &TestServer, agent_id: Uuid) {
    let (status, _, body) =
        produce(server, agent_id, ("q", 0, 0), json!([{ "kind": "run_started" }])).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("run_in_progress")), "{body}");
}

/// Opens a run as `producer` (`run_started` alone), which must be accepted.
async fn open_run(server: &TestServer, agent_id: Uuid, producer: (&str, u64, u64)) {
    let (status, _, body) =
        produce(server, agent_id, producer, json!([{ "kind": "run_started" }])).await;
    assert_eq!(status, 200, "{body}");
}

fn text(piece: &str) -> Value {
    json!({ "kind": "text", "message_id": MESSAGE, "delta": piece, "delta_action": "append" })
}

fn header(headers: &reqwest::header::HeaderMap, name: &str) -> String {
    headers.get(name).map(|value| value.to_str().unwrap().to_owned()).unwrap_or_default()
}

async fn head(server: &TestServer, agent_id: Uuid) -> u64 {
    server.all_events(agent_id).await.last().map_or(0, |event| event.seq)
}

#[tokio::test]
async fn a_produced_run_is_written_once_across_retries_and_served_like_ours() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let mut socket = server.connect().await;
    socket.subscribe(agent_id, 0).await;
    let worker = |seq| ("worker-1", 0, seq);
    let batches = [
        json!([
            { "kind": "run_started", "metadata": { "model": "their-model" } },
            { "kind": "user", "message_id": USER_MESSAGE, "content": { "text": "say hello" } },
        ]),
        json!([text("Hello"), text(", world")]),
        json!([
            { "kind": "tool_call", "content": { "tool_call_id": "call-1", "name": "lookup", "input": { "q": "x" } } },
            { "kind": "tool_result", "content": { "tool_call_id": "call-1", "result": "42" } },
            { "kind": "usage", "content": { "input_tokens": 7, "output_tokens": 3 } },
            { "kind": "run_completed", "content": { "stop_reason": "end_turn" } },
        ]),
    ];
    let mut run_id = None;
    for (seq, batch) in batches.iter().enumerate() {
        let (status, headers, body) =
            produce(&server, agent_id, worker(seq as u64), batch.clone()).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(header(&headers, "producer-seq"), seq.to_string());
        run_id = Some(body["run_id"].as_str().unwrap().parse::<Uuid>().unwrap());
        // The same request again (its answer was lost): a duplicate, nothing written.
        let (again, _, _) = produce(&server, agent_id, worker(seq as u64), batch.clone()).await;
        assert_eq!(again, 204);
    }
    let run_id = run_id.unwrap();
    let events = server.all_events(agent_id).await;
    common::assert_contiguous(&events, 1);
    let kinds: Vec<&str> = events.iter().map(|event| event.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "user",
            "text",
            "text",
            "tool_call",
            "tool_call",
            "tool_result",
            "usage",
            "run_completed"
        ],
        "every batch once, the result's card status merged as our loop does"
    );
    assert!(events.iter().all(|event| event.run_id == Some(run_id)));
    assert_eq!(events[0].metadata["producer"], json!({ "id": "worker-1", "epoch": 0 }));

    // The live subscriber saw the same events, in order, once.
    let (live, _) = socket.receive_until_run_end().await;
    assert_eq!(live, events);

    // The reducer, the REST run outline, Letta's messages, the history page and the
    // inspector serve it as they serve ours.
    let timeline = common::fold(&events);
    let run = timeline.runs().iter().find(|run| run.run_id == run_id).unwrap();
    assert_eq!(run.status.as_str(), "completed");
    assert_eq!(common::reply_text(&events, run_id), "Hello, world");
    let outline = server.get_json(&format!("/v1/runs/{run_id}")).await;
    assert_eq!(outline["status"], "completed", "{outline}");
    let letta = server.get_json(&format!("/v1/agents/{agent_id}/messages")).await;
    let letta = letta.to_string();
    assert!(letta.contains("Hello, world") && letta.contains("say hello"), "{letta}");
    // AG-UI's connect: the thread's messages, the produced run's among them.
    let connected =
        server.post("/v1/ag-ui/connect", &json!({ "threadId": agent_id.to_string() })).await;
    assert_eq!(connected.status(), 200);
    let connected = tokio::time::timeout(Duration::from_secs(10), connected.text())
        .await
        .expect("an idle thread's connect ends")
        .unwrap();
    assert!(
        connected.contains("MESSAGES_SNAPSHOT") && connected.contains("Hello, world"),
        "{connected}"
    );
    // The native SSE tail from seq 0: every event, with its seq as the id.
    let mut tail = server.get(&format!("/v1/agents/{agent_id}/events/stream?since=0")).await;
    let mut text = String::new();
    while !text.contains(&format!("id: {}\n", events.len())) {
        let chunk = tokio::time::timeout(Duration::from_secs(10), tail.chunk())
            .await
            .expect("the tail sends the log")
            .unwrap()
            .expect("the tail stays open");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert_eq!(
        text.matches("\nid: ").count() + usize::from(text.starts_with("id: ")),
        events.len(),
        "{text}"
    );
    for page in [format!("/agents/{agent_id}/history"), format!("/agents/{agent_id}/runs/{run_id}")]
    {
        let html = server.get(&page).await;
        assert_eq!(html.status(), 200, "{page}");
        let html = html.text().await.unwrap();
        assert!(html.contains("Hello, world"), "{page} shows the reply");
    }
    // Operators see the batches by outcome.
    let metrics = server.get("/metrics").await.text().await.unwrap();
    for line in [
        "agentstream_producer_batches_total{outcome=\"appended\"} 3",
        "agentstream_producer_batches_total{outcome=\"duplicate\"} 3",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
    // The producer's position says where it is.
    let position = server.get_json(&format!("/v1/agents/{agent_id}/producers/worker-1")).await;
    assert_eq!(position["epoch"], 0);
    assert_eq!(position["seq"], 2);
    assert_eq!(position["run_open"], false);
}

#[tokio::test]
async fn the_fence_refuses_stale_epochs_gaps_and_bad_headers_and_writes_nothing() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let open = json!([{ "kind": "run_started" }]);
    assert_eq!(produce(&server, agent_id, ("p", 1, 0), open).await.0, 200);
    let before = head(&server, agent_id).await;

    let (status, headers, body) = produce(&server, agent_id, ("p", 1, 3), json!([text("a")])).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "producer_seq_gap");
    assert_eq!(header(&headers, "producer-expected-seq"), "1");
    assert_eq!(header(&headers, "producer-received-seq"), "3");

    let (status, _, body) = produce(&server, agent_id, ("p", 2, 5), json!([text("a")])).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "producer_epoch_not_at_zero");

    // A restarted producer (epoch 2, seq 0) takes the run over; the old one is fenced off.
    let (status, _, body) = produce(&server, agent_id, ("p", 2, 0), json!([text("b")])).await;
    assert_eq!(status, 200, "{body}");
    let (status, headers, body) = produce(&server, agent_id, ("p", 1, 1), json!([text("a")])).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "stale_producer_epoch");
    assert_eq!(header(&headers, "producer-epoch"), "2");

    let response = server
        .http
        .post(server.url(&format!("/v1/agents/{agent_id}/produce")))
        .header("Producer-Id", "p")
        .json(&json!([text("c")]))
        .sent()
        .await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("missing: Producer-Epoch, Producer-Seq"));

    let (status, _, _) =
        produce(&server, Uuid::new_v4(), ("p", 0, 0), json!([{ "kind": "run_started" }])).await;
    assert_eq!(status, 404);
    // Only the new epoch's one batch was written.
    assert_eq!(head(&server, agent_id).await, before + 1);
}

#[tokio::test]
async fn a_malformed_batch_is_refused_whole_naming_the_event() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    open_run(&server, agent_id, ("p", 0, 0)).await;
    let before = head(&server, agent_id).await;
    let cases = [
        (
            json!([text("ok"), text("ok"), { "kind": "text", "message_id": MESSAGE, "delta": 5, "delta_action": "append" }]),
            422,
            "event 2: an append delta must be a string",
        ),
        (
            json!([text("ok"), { "kind": "text", "id": MESSAGE }]),
            422,
            "event 1: unknown field `id`",
        ),
        (
            json!([{ "kind": "tool_result", "content": { "tool_call_id": "ghost", "result": 1 } }]),
            422,
            "names no tool call",
        ),
        (json!({ "not": "an event" }), 422, "event 0: unknown field `not`"),
        (json!([]), 422, "no events"),
    ];
    for (batch, status, says) in cases {
        let (got, _, body) = produce(&server, agent_id, ("p", 0, 1), batch).await;
        assert_eq!(got, status, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message:?} should say {says:?}");
    }
    let not_json = server
        .producer(agent_id, ("p", 0, 1))
        .header("Content-Type", "application/json")
        .body("[{\"kind\": ")
        .sent()
        .await;
    assert_eq!(not_json.status(), 400);
    let huge = "x".repeat(9 * 1024 * 1024);
    let (status, _, _) = produce(&server, agent_id, ("p", 0, 1), json!([text(&huge)])).await;
    assert_eq!(status, 413);
    // Nothing of any of them was written, and the seq they used is still the next one.
    assert_eq!(head(&server, agent_id).await, before);
    assert_eq!(produce(&server, agent_id, ("p", 0, 1), json!([text("fine")])).await.0, 200);
}
