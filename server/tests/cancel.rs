//! Cancelling a run: over REST (Letta's path) and over the WebSocket.

use crate::common;

use crate::common::RequestExt;
use app::protocol::{CancelResponse, ClientMessage, ServerMessage};
use app::EventKind;
use common::{assert_contiguous, TestServer};
use serde_json::json;
use uuid::Uuid;

async fn long_running_server() -> TestServer {
    TestServer::start_paced(100_000, 2).await
}

/// Waits until the run has written at least `count` text events.
async fn wait_for_text(server: &TestServer, agent_id: Uuid, count: usize) {
    common::wait_until("the run to write text", || async {
        let events = server.all_events(agent_id).await;
        let texts = events.iter().filter(|event| event.kind == EventKind::Text).count();
        (texts >= count).then_some(())
    })
    .await;
}

#[tokio::test]
async fn cancel_during_text_ends_the_run_with_run_cancelled_and_keeps_what_was_written() {
    let server = long_running_server().await;
    let agent_id = server.create_agent().await;
    let run_id = server.start_run(agent_id, "talk forever").await;
    wait_for_text(&server, agent_id, 20).await;

    let response = server.post(&format!("/v1/agents/{agent_id}/messages/cancel"), &json!({})).await;
    assert_eq!(response.status(), 200);
    let answer: CancelResponse = response.json().await.unwrap();
    assert_eq!(answer.cancelled_run_ids, vec![run_id]);

    // The answer comes once the run has ended: its end is already the newest event, and stays so.
    let events = server.all_events(agent_id).await;
    assert_contiguous(&events, 1);
    let last = events.last().unwrap();
    assert_eq!(last.kind, EventKind::RunCancelled);
    assert_eq!(last.content["stop_reason"], "cancelled");
    let texts = events.iter().filter(|event| event.kind == EventKind::Text).count();
    assert!((20..100_000).contains(&texts), "{texts} text events");

    // The agent is free for the next run; while that one runs to its end, the cancelled run
    // writes nothing more.
    let next = server.start_run(agent_id, "/echo again and again").await;
    assert_ne!(next, run_id);
    let after = server.wait_for_run_end(agent_id, next).await;
    let late: Vec<_> =
        after.iter().filter(|event| event.run_id == Some(run_id) && event.seq > last.seq).collect();
    assert!(late.is_empty(), "the cancelled run kept writing: {late:?}");
}

#[tokio::test]
async fn cancel_names_runs_and_leaves_others_alone() {
    let server = long_running_server().await;
    let agent_id = server.create_agent().await;
    let url = server.url(&format!("/v1/agents/{agent_id}/messages/cancel"));

    // Nothing running: nothing cancelled, and an empty body is fine.
    let idle: CancelResponse = server.http.post(&url).answer().await;
    assert!(idle.cancelled_run_ids.is_empty());

    let run_id = server.start_run(agent_id, "go").await;
    wait_for_text(&server, agent_id, 5).await;
    let other: CancelResponse =
        server.http.post(&url).json(&json!({ "run_ids": [Uuid::new_v4()] })).answer().await;
    assert!(other.cancelled_run_ids.is_empty());
    let named: CancelResponse =
        server.http.post(&url).json(&json!({ "run_ids": [run_id] })).answer().await;
    assert_eq!(named.cancelled_run_ids, vec![run_id]);
}

#[tokio::test]
async fn bad_cancel_requests_get_json_errors() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let cases = [
        (format!("/v1/agents/{}/messages/cancel", Uuid::new_v4()), "{}", 404, "unknown_agent"),
        ("/v1/agents/nope/messages/cancel".to_owned(), "{}", 400, "invalid_id"),
        (format!("/v1/agents/{agent_id}/messages/cancel"), "{oops", 400, "malformed_json"),
        (
            format!("/v1/agents/{agent_id}/messages/cancel"),
            r#"{"run_ids": "x"}"#,
            422,
            "invalid_body",
        ),
    ];
    for (path, body, status, code) in cases {
        let response = server
            .http
            .post(server.url(&path))
            .header("content-type", "application/json")
            .body(body)
            .sent()
            .await;
        assert_eq!(response.status(), status, "{path} {body}");
        let answer: serde_json::Value = response.json().await.unwrap();
        assert_eq!(answer["error"]["code"], code, "{path} {body}");
    }
}

#[tokio::test]
async fn cancel_over_the_websocket() {
    let server = long_running_server().await;
    let agent_id = server.create_agent().await;
    let mut client = server.connect().await;
    client.subscribed(agent_id, 0, false).await;
    let run_id = server.start_run(agent_id, "go").await;
    wait_for_text(&server, agent_id, 5).await;
    client.send(&ClientMessage::Cancel { agent_id, run_ids: None }).await;
    let mut acknowledged = false;
    loop {
        match client.receive().await {
            ServerMessage::CancelRequested { run_ids, .. } => {
                assert_eq!(run_ids, vec![run_id]);
                acknowledged = true;
            }
            ServerMessage::Events { events, .. } => {
                if events.iter().any(|event| event.kind == EventKind::RunCancelled) {
                    break;
                }
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(
        acknowledged || {
            // The acknowledgement may trail the log's end by a frame.
            matches!(client.receive().await, ServerMessage::CancelRequested { .. })
        }
    );
}

#[tokio::test]
async fn a_run_can_be_looked_up_by_id_while_it_goes_and_after_it_ends() {
    let server = long_running_server().await;
    let agent_id = server.create_agent().await;
    let run_id = server.start_run(agent_id, "go").await;
    wait_for_text(&server, agent_id, 3).await;
    let url = server.url(&format!("/v1/runs/{run_id}"));
    let running: app::protocol::RunInfo = server.http.get(&url).answer().await;
    assert_eq!((running.id, running.agent_id), (run_id, agent_id));
    assert_eq!(running.status, "running");
    assert_eq!(running.completed_at, None);

    server.http.post(server.url(&format!("/v1/agents/{agent_id}/messages/cancel"))).sent().await;
    let ended: app::protocol::RunInfo = server.http.get(&url).answer().await;
    assert_eq!(ended.status, "cancelled");
    assert_eq!(ended.stop_reason.as_deref(), Some("cancelled"));
    assert!(ended.completed_at.unwrap() >= ended.created_at);

    for (path, status, code) in [
        (format!("/v1/runs/{}", Uuid::new_v4()), 404, "unknown_run"),
        ("/v1/runs/not-a-run".to_owned(), 400, "invalid_id"),
    ] {
        let response = server.get(&path).await;
        assert_eq!(response.status(), status);
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], code);
    }
}

/// Deleting an agent mid-run ends the run first: its subscribers see the run end (before, the
/// agent was gone under the run, its last events were refused and the run never ended).
#[tokio::test]
async fn deleting_an_agent_mid_run_ends_the_run_first() {
    let server = long_running_server().await;
    let agent_id = server.create_agent().await;
    let mut client = server.connect().await;
    client.subscribe(agent_id, 0).await;
    let run_id = server.start_run(agent_id, "talk forever").await;
    wait_for_text(&server, agent_id, 20).await;

    let deleted = server.delete(&format!("/v1/agents/{agent_id}")).await;
    assert_eq!(deleted.status(), 204);
    let (events, _) = client.receive_until_run_end().await;
    let end = events.last().unwrap();
    assert_eq!(end.run_id, Some(run_id));
    assert_eq!(end.kind, EventKind::RunCancelled);
}
