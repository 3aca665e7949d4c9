//! Human approval of tool calls over real sockets: the request ends the run, the answer (REST or
//! WebSocket) starts the continuation, exactly one answer wins, and a new message waits until
//! the request is answered.

use crate::common;
mod timeouts;

use crate::common::RequestExt;
use app::protocol::{ClientMessage, ServerMessage};
use app::EventKind;
use common::{of_kind, TestServer};
use serde_json::{json, Value};
use uuid::Uuid;

impl TestServer {
    /// An agent whose calculator calls wait for a person.
    async fn with_guarded_agent(self) -> (TestServer, Uuid) {
        let body =
            json!({ "name": "guarded", "metadata": { "requires_approval": ["calculator"] } });
        let agent_id = self.new_agent(&body).await;
        (self, agent_id)
    }

    async fn answer(&self, agent_id: Uuid, body: &Value) -> (u16, Value) {
        self.post_status(&format!("/v1/agents/{agent_id}/approvals"), body).await
    }
}

/// Runs `/tools calculator 2+3; clock` and returns the run and the calculator's call id.
async fn ask(server: &TestServer, agent_id: Uuid) -> (Uuid, String) {
    let run_id = server.start_run(agent_id, "/tools calculator 2+3; clock").await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    let end = events.last().unwrap();
    assert_eq!(end.kind, EventKind::RunCompleted);
    assert_eq!(end.content["stop_reason"], "requires_approval");
    let requests = of_kind(&events, run_id, EventKind::ApprovalRequested);
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0]["name"], "calculator");
    let results = of_kind(&events, run_id, EventKind::ToolResult);
    assert_eq!(results.len(), 1, "the clock ran; the calculator waits");
    assert_eq!(results[0]["name"], "clock");
    (run_id, requests[0]["tool_call_id"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn an_approved_call_runs_once_and_the_loop_goes_on() {
    let (server, agent_id) = TestServer::start().await.with_guarded_agent().await;
    let (_, call_id) = ask(&server, agent_id).await;

    // While it waits, a new message is refused and the log is unchanged.
    let head = server.all_events(agent_id).await.len();
    let response =
        server.post(&format!("/v1/agents/{agent_id}/runs"), &json!({ "content": "hello?" })).await;
    assert_eq!(response.status(), 409);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "approval_pending");
    assert!(error["error"]["message"].as_str().unwrap().contains(&call_id));
    assert_eq!(server.all_events(agent_id).await.len(), head);

    let (status, accepted) =
        server.answer(agent_id, &json!({ "call_id": call_id, "approve": true })).await;
    let (run_id, events) = server.accepted_run_to_end(agent_id, (status, accepted)).await;
    let responses = of_kind(&events, run_id, EventKind::ApprovalResponse);
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0]["approve"], true);
    let results = of_kind(&events, run_id, EventKind::ToolResult);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["tool_call_id"], call_id.as_str());
    assert_eq!(results[0]["result"], 5.0);
    let end = events.last().unwrap();
    assert_eq!(end.content["stop_reason"], "end_turn", "the model was asked again");
    assert!(!of_kind(&events, run_id, EventKind::Text).is_empty(), "and answered");

    // A second answer, after the fact, is refused and changes nothing.
    let head = server.all_events(agent_id).await.len();
    let (status, error) =
        server.answer(agent_id, &json!({ "call_id": call_id, "approve": false })).await;
    assert_eq!(status, 409, "{error}");
    assert_eq!(error["error"]["code"], "already_answered");
    assert_eq!(server.all_events(agent_id).await.len(), head);
    // And the agent takes messages again.
    server.run_to_end(agent_id, "thanks").await;
}

#[tokio::test]
async fn a_denied_call_gets_the_reason_as_its_error_result() {
    let (server, agent_id) = TestServer::start().await.with_guarded_agent().await;
    let (_, call_id) = ask(&server, agent_id).await;
    let (status, accepted) = server
        .answer(agent_id, &json!({ "call_id": call_id, "approve": false, "reason": "not today" }))
        .await;
    let (run_id, events) = server.accepted_run_to_end(agent_id, (status, accepted)).await;
    let results = of_kind(&events, run_id, EventKind::ToolResult);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["is_error"], true);
    assert!(results[0]["result"].as_str().unwrap().contains("not today"));
    assert_eq!(events.last().unwrap().kind, EventKind::RunCompleted);
}

#[tokio::test]
async fn two_concurrent_answers_one_wins() {
    let (server, agent_id) = TestServer::start().await.with_guarded_agent().await;
    let (_, call_id) = ask(&server, agent_id).await;
    let approve = json!({ "call_id": call_id, "approve": true });
    let deny = json!({ "call_id": call_id, "approve": false });
    let (first, second) =
        tokio::join!(server.answer(agent_id, &approve), server.answer(agent_id, &deny));
    let mut statuses = [first.0, second.0];
    statuses.sort_unstable();
    assert_eq!(statuses, [202, 409], "{first:?} {second:?}");
    let winner = if first.0 == 202 { &first.1 } else { &second.1 };
    let run_id: Uuid = winner["run_id"].as_str().unwrap().parse().unwrap();
    server.wait_for_run_end(agent_id, run_id).await;
    let events = server.all_events(agent_id).await;
    let answers: Vec<_> =
        events.iter().filter(|event| event.kind == EventKind::ApprovalResponse).collect();
    assert_eq!(answers.len(), 1, "exactly one answer in the log");
    let results: Vec<_> = events
        .iter()
        .filter(|event| {
            event.kind == EventKind::ToolResult && event.content["tool_call_id"] == call_id.as_str()
        })
        .collect();
    assert_eq!(results.len(), 1, "the call was answered once");
}

#[tokio::test]
async fn answers_over_the_websocket_and_bad_answers_are_refused() {
    let (server, agent_id) = TestServer::start().await.with_guarded_agent().await;
    let (_, call_id) = ask(&server, agent_id).await;
    let head = server.all_events(agent_id).await.len();
    let cases = [
        (json!({ "call_id": "nope", "approve": true }), 404, "unknown_approval"),
        (json!({ "call_id": "", "approve": true }), 422, "invalid_approval"),
        (
            json!({ "call_id": call_id, "approve": false, "reason": "x".repeat(5000) }),
            422,
            "invalid_approval",
        ),
        (json!({ "call_id": call_id, "approve": "yes" }), 422, ""),
        (json!({ "approve": true }), 422, ""),
    ];
    for (body, status, code) in cases {
        let (got, error) = server.answer(agent_id, &body).await;
        assert_eq!(got, status, "{body}: {error}");
        if !code.is_empty() {
            assert_eq!(error["error"]["code"], code, "{body}");
        }
    }
    let (got, _) =
        server.answer(Uuid::new_v4(), &json!({ "call_id": call_id, "approve": true })).await;
    assert_eq!(got, 404, "an unknown agent");
    server.assert_nothing_written(agent_id, head).await;

    let mut socket = server.connect().await;
    socket
        .send(&ClientMessage::Approve {
            agent_id,
            call_id: "nope".into(),
            approve: true,
            reason: None,
        })
        .await;
    match socket.receive().await {
        ServerMessage::Error { code, .. } => assert_eq!(code, "unknown_approval"),
        other => panic!("expected an error, got {other:?}"),
    }
    socket
        .send(&ClientMessage::Approve {
            agent_id,
            call_id: call_id.clone(),
            approve: true,
            reason: None,
        })
        .await;
    let run_id = match socket.receive().await {
        ServerMessage::ApprovalAccepted { call_id: answered, run_id, .. } => {
            assert_eq!(answered, call_id);
            run_id
        }
        other => panic!("expected the answer to be taken, got {other:?}"),
    };
    let events = server.wait_for_run_end(agent_id, run_id).await;
    assert_eq!(of_kind(&events, run_id, EventKind::ToolResult).len(), 1);
}

#[tokio::test]
async fn a_malformed_approval_list_is_refused_at_agent_creation() {
    let server = TestServer::start().await;
    for metadata in
        [json!({ "requires_approval": "calculator" }), json!({ "requires_approval": [1] })]
    {
        let response = server.post("/v1/agents", &json!({ "metadata": metadata })).await;
        assert_eq!(response.status(), 422, "{metadata}");
    }
}

/// The real binary killed with SIGKILL while a call waits: after the restart the request is
/// still pending (nothing of it lived in memory), and an answer runs the call exactly once.
#[tokio::test]
async fn kill_9_while_an_approval_waits_then_approve_runs_the_call_once() {
    use common::processes::{self, Restartable};
    let node = Restartable::new();
    let http = agentstream_server::http_client::client();
    let (server, agent_id, call_id) = node
        .kill_while_a_call_waits(
            &http,
            json!({ "metadata": { "requires_approval": ["calculator"] } }),
            json!({ "content": "/tools calculator 6*7" }),
        )
        .await;
    let (status, accepted) = http
        .post(format!("{}/v1/agents/{agent_id}/approvals", server.base))
        .json(&json!({ "call_id": call_id, "approve": true }))
        .status_json()
        .await;
    assert_eq!(status, 202, "{accepted}");
    let run_id: Uuid = accepted["run_id"].as_str().unwrap().parse().unwrap();
    let log = processes::log_after_run(&http, &server.base, agent_id, run_id).await;
    let results: Vec<_> = log.iter().filter(|event| event.kind == EventKind::ToolResult).collect();
    assert_eq!(results.len(), 1, "the call ran once");
    assert_eq!(results[0].content["result"], 42.0);
    assert_eq!(results[0].run_id, Some(run_id));
    let end = log.last().unwrap();
    assert_eq!(end.kind, EventKind::RunCompleted);
    assert_eq!(end.content["stop_reason"], "end_turn");
}

#[tokio::test]
async fn the_model_is_asked_again_once_every_call_of_its_step_is_answered() {
    let (server, agent_id) = TestServer::start().await.with_guarded_agent().await;
    let run_id = server.start_run(agent_id, "/tools calculator 1+1; calculator 2+2").await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    let calls: Vec<String> = of_kind(&events, run_id, EventKind::ApprovalRequested)
        .iter()
        .map(|request| request["tool_call_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(calls.len(), 2);

    let (status, first) =
        server.answer(agent_id, &json!({ "call_id": calls[1], "approve": true })).await;
    assert_eq!(status, 202);
    let first: Uuid = first["run_id"].as_str().unwrap().parse().unwrap();
    let events = server.wait_for_run_end(agent_id, first).await;
    assert_eq!(
        events.last().unwrap().content["stop_reason"],
        "requires_approval",
        "one call still waits"
    );
    assert!(of_kind(&events, first, EventKind::Text).is_empty(), "no model call yet");
    assert_eq!(
        events.last().unwrap().content["awaiting"],
        json!([{ "tool_call_id": calls[0], "name": "calculator", "input": { "expression": "1+1" } }]),
        "the end says which call still waits"
    );
    assert_eq!(of_kind(&events, first, EventKind::ToolResult)[0]["result"], 4.0);

    let (status, second) =
        server.answer(agent_id, &json!({ "call_id": calls[0], "approve": false })).await;
    assert_eq!(status, 202);
    let second: Uuid = second["run_id"].as_str().unwrap().parse().unwrap();
    let events = server.wait_for_run_end(agent_id, second).await;
    assert_eq!(events.last().unwrap().content["stop_reason"], "end_turn");
    assert!(!of_kind(&events, second, EventKind::Text).is_empty());
}
