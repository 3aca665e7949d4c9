//! Clients that come and go leave nothing behind: after thousands of streams of every kind are
//! opened and closed — on an idle agent and on one whose run is in flight — the server's live
//! tasks and hub rooms are back where they were.

use crate::common;

use std::time::Duration;

use crate::common::RequestExt;
use common::{wait_until, TestServer, WAIT_MAX};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

/// Streams of each kind opened and closed.
const STREAMS_PER_KIND: usize = 300;

async fn stats(server: &TestServer) -> (u64, u64) {
    let stats = server.get_json("/v1/stats").await;
    (stats["tasks_alive"].as_u64().unwrap(), stats["hub_rooms"].as_u64().unwrap())
}

/// Opens a stream and goes away (the connection closes with it): at once on an idle agent
/// (nothing would come but a keep-alive), after its first bytes otherwise.
async fn open_and_leave(request: reqwest::RequestBuilder, first_bytes: bool) {
    let response = request.sent().await;
    assert_eq!(response.status(), 200);
    if !first_bytes {
        return;
    }
    let mut body = response.bytes_stream();
    tokio::time::timeout(WAIT_MAX, body.next())
        .await
        .expect("the stream's first bytes")
        .expect("a first chunk")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_of_every_kind_leave_no_task_or_room_behind() {
    // A run that goes on for the whole test (cancelled at the end).
    let server = TestServer::start_paced(100_000, 20).await.without_pooled_connections();
    let idle = server.create_agent().await;
    let busy = server.create_agent().await;
    let run_id = server.start_run(busy, "a very long answer").await;
    // No pooled connections: a closed stream closes its connection, and its task.
    let client =
        agentstream_server::http_client::builder().pool_max_idle_per_host(0).build().unwrap();
    // Wait until the run is streaming, then take the baseline.
    wait_until("the run to stream", || async {
        (server.events_page(busy, 0, 10).await.head_seq > 3).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (tasks_before, rooms_before) = stats(&server).await;

    for _ in 0..STREAMS_PER_KIND {
        // Native SSE on an idle agent: nothing is ever sent after the head.
        open_and_leave(
            client.get(server.url(&format!("/v1/agents/{idle}/events/stream?since=0"))),
            false,
        )
        .await;
        // Native SSE on the busy one.
        open_and_leave(
            client.get(server.url(&format!("/v1/agents/{busy}/events/stream?since=0"))),
            true,
        )
        .await;
        // The AI SDK's resume, AG-UI's connect and Letta's run stream, on the run in flight.
        open_and_leave(client.get(server.url(&format!("/v1/ai-sdk/chat/{busy}/stream"))), true)
            .await;
        open_and_leave(
            client.post(server.url("/v1/ag-ui/connect")).json(&json!({ "threadId": busy })),
            true,
        )
        .await;
        open_and_leave(
            client
                .post(server.url(&format!("/v1/runs/{run_id}/stream")))
                .json(&json!({ "starting_after": 0 })),
            true,
        )
        .await;
        // A WebSocket subscribed to both, closed without unsubscribing.
        let mut socket = server.connect().await;
        for agent_id in [idle, busy] {
            socket
                .stream
                .send(Message::Text(
                    json!({ "type": "subscribe", "agent_id": agent_id, "since": 0 })
                        .to_string()
                        .into(),
                ))
                .await
                .unwrap();
        }
        let subscribed = socket.receive_text().await;
        assert!(subscribed.contains("subscribed"), "{subscribed}");
        drop(socket);
    }

    let settled = wait_until("tasks and rooms back to where they were", || async {
        let now = stats(&server).await;
        (now.0 <= tasks_before && now.1 <= rooms_before).then_some(now)
    })
    .await;
    assert!(settled.0 <= tasks_before, "{settled:?} vs {tasks_before}");
    // The run went on through all of it.
    let run: Value = server.get_json(&format!("/v1/runs/{run_id}")).await;
    assert_eq!(run["status"], "running", "{run}");
    let cancelled =
        server.post_json(&format!("/v1/agents/{busy}/messages/cancel"), &json!({})).await;
    assert_eq!(cancelled["cancelled_run_ids"][0], run_id.to_string(), "{cancelled}");
}

/// Producers that open runs and vanish — mid-way through a streamed body, or between batches —
/// leave nothing behind once their leases end their runs: tasks, rooms and the producer API's
/// state are back where they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_that_vanish_leave_no_task_or_state_behind() {
    const PRODUCERS: usize = 40;
    let server = TestServer::start().await.without_pooled_connections();
    let mut agents = Vec::new();
    for _ in 0..PRODUCERS {
        agents.push(server.create_agent().await);
    }
    let before = stats(&server).await;
    // The producers' own client keeps no idle connection: the test's runtime counts a pooled
    // connection's task as alive, and only the server's tasks are in question.
    let producers =
        agentstream_server::http_client::builder().pool_max_idle_per_host(0).build().unwrap();
    let opening = json!([
        { "kind": "run_started", "metadata": { "lease_ms": 1000 } },
        { "kind": "tool_call", "content": { "tool_call_id": "c", "name": "t" } },
    ]);
    for (index, agent_id) in agents.iter().enumerate() {
        let request = producers
            .post(server.url(&format!("/v1/agents/{agent_id}/produce")))
            .header("Producer-Id", "vanishing")
            .header("Producer-Epoch", "0")
            .header("Producer-Seq", "0");
        if index % 2 == 0 {
            // A whole batch, then silence.
            let response = request.json(&opening).sent().await;
            assert_eq!(response.status(), 200);
        } else {
            // A streamed body: its first line, then nothing more.
            let (lines, body) = common::streamed_body();
            let sent = tokio::spawn(
                request.header("Content-Type", "application/x-ndjson").body(body).send(),
            );
            lines.send(Ok(format!("{opening}\n"))).await.unwrap();
            let agent_id = *agent_id;
            wait_until("the streamed line to commit", || async {
                (server.all_events(agent_id).await.len() >= 2).then_some(())
            })
            .await;
            // The producer stops mid-run: its body ends with the run still open. (Awaited, so
            // the count below is the server's alone: an aborted request's client connection
            // could stay alive in the test's runtime, which the server's task count shares.)
            drop(lines);
            let answered = sent.await.unwrap().unwrap();
            assert_eq!(answered.status(), 200);
        }
    }
    // Every run ends by its lease, its open call answered.
    for agent_id in &agents {
        let events = server.log_once_a_run_ended(*agent_id, "the lease to end the run").await;
        assert_eq!(events.last().unwrap().content["error"]["type"], "interrupted");
        assert!(events.iter().any(|event| event.kind == app::EventKind::ToolResult));
    }
    // Back where they were (each figure named when it is not, after a patient wait).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let now = stats(&server).await;
        let held = server.get_json("/v1/stats").await["producer_agents"].as_u64().unwrap();
        if now.0 <= before.0 && now.1 <= before.1 && held == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not back after 30 s: tasks {} (before {}), rooms {} (before {}), producer agents {held}",
            now.0,
            before.0,
            now.1,
            before.1
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
