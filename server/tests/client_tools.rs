//! Tools that run in the client, over real sockets: a call waits in the log (the run ends
//! `requires_client_tool`), the client's result — posted once — starts the continuation, a
//! timeout answers with an error result, a kill -9 loses nothing, and bad input changes nothing.

use crate::common;

use crate::common::RequestExt;
use app::EventKind;
use common::{of_kind, TestServer};
use serde_json::{json, Value};
use uuid::Uuid;

fn confirm_tool() -> Value {
    json!([{
        "name": "confirm",
        "description": "Ask the user to confirm something.",
        "parameters": { "type": "object", "properties": { "question": { "type": "string" } } }
    }])
}

/// Asks for the client's `confirm` and the server's `clock` in one step; returns the run and
/// the waiting call's id.
async fn ask(server: &TestServer, agent_id: Uuid) -> (Uuid, String) {
    let (status, accepted) = server
        .post_status(
            &format!("/v1/agents/{agent_id}/runs"),
            &json!({
                "content": "/tools confirm {\"question\": \"ship it?\"}; clock",
                "client_tools": confirm_tool(),
            }),
        )
        .await;
    let (run_id, events) = server.accepted_run_to_end(agent_id, (status, accepted)).await;
    let end = events.last().unwrap();
    assert_eq!(end.kind, EventKind::RunCompleted);
    assert_eq!(end.content["stop_reason"], "requires_client_tool");
    let requests = of_kind(&events, run_id, EventKind::ApprovalRequested);
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0]["client"], true);
    let call_id = requests[0]["tool_call_id"].as_str().unwrap().to_owned();
    assert_eq!(
        end.content["awaiting"],
        json!([{ "tool_call_id": call_id, "name": "confirm",
                 "input": { "question": "ship it?" }, "client": true }]),
        "the end lists the call the client owes"
    );
    let results = of_kind(&events, run_id, EventKind::ToolResult);
    assert_eq!(results.len(), 1, "the clock ran; confirm waits");
    assert_eq!(results[0]["name"], "clock");
    let started = &events
        .iter()
        .find(|event| event.run_id == Some(run_id) && event.kind == EventKind::RunStarted)
        .unwrap()
        .metadata;
    assert_eq!(started["client_tools"][0]["name"], "confirm");
    (run_id, call_id)
}

#[tokio::test]
async fn a_client_tools_call_waits_and_its_result_is_taken_once() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let (_, call_id) = ask(&server, agent_id).await;

    // While it waits, a new message is refused and the log is unchanged.
    let head = server.all_events(agent_id).await.len();
    let (status, error) = server
        .post_status(&format!("/v1/agents/{agent_id}/runs"), &json!({ "content": "hello?" }))
        .await;
    assert_eq!(status, 409, "{error}");
    assert_eq!(error["error"]["code"], "client_tool_pending");

    // Bad answers change nothing.
    let other_agent = server.create_agent().await;
    let bad: Vec<(Uuid, Value, u16, &str)> = vec![
        (agent_id, json!({ "call_id": "call_nope", "output": 1 }), 404, "unknown_approval"),
        (other_agent, json!({ "call_id": call_id, "output": 1 }), 404, "unknown_approval"),
        (agent_id, json!({ "call_id": call_id }), 422, "invalid_body"),
        (agent_id, json!({ "call_id": call_id, "output": 1, "error": "x" }), 422, "invalid_body"),
        (
            agent_id,
            json!({ "call_id": call_id, "output": "x".repeat(300 * 1024) }),
            413,
            "body_too_large",
        ),
        (agent_id, json!({ "call_id": "", "output": 1 }), 422, "invalid_approval"),
    ];
    for (agent, body, expected, code) in bad {
        let (status, error) =
            server.post_status(&format!("/v1/agents/{agent}/tool-results"), &body).await;
        assert_eq!((status, error["error"]["code"].as_str()), (expected, Some(code)), "{error}");
    }
    // Approving it as a person would is refused: it waits for a result.
    let (status, error) = server
        .post_status(
            &format!("/v1/agents/{agent_id}/approvals"),
            &json!({ "call_id": call_id, "approve": true }),
        )
        .await;
    assert_eq!(status, 422, "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("runs in the client"));
    server.assert_nothing_written(agent_id, head).await;

    // The result starts the continuation, which writes it on the call and goes on.
    let (status, accepted) = server
        .post_status(
            &format!("/v1/agents/{agent_id}/tool-results"),
            &json!({ "call_id": call_id, "output": { "confirmed": true } }),
        )
        .await;
    let (run_id, events) = server.accepted_run_to_end(agent_id, (status, accepted)).await;
    let results = of_kind(&events, run_id, EventKind::ToolResult);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["tool_call_id"], call_id.as_str());
    assert_eq!(results[0]["result"], json!({ "confirmed": true }));
    assert_eq!(results[0]["is_error"], false);
    let end = events.last().unwrap();
    assert_eq!(end.content["stop_reason"], "end_turn");
    assert!(!of_kind(&events, run_id, EventKind::Text).is_empty(), "the model went on");
    let started = events
        .iter()
        .find(|event| event.run_id == Some(run_id) && event.kind == EventKind::RunStarted)
        .unwrap();
    assert_eq!(
        started.metadata["client_tools"][0]["name"], "confirm",
        "the continuation offers the client's tools again"
    );
    let timeline = common::fold(&server.all_events(agent_id).await);
    assert_eq!(
        app::approvals::state_of(&timeline, &call_id),
        Some(app::approvals::ApprovalState::Returned { is_error: false })
    );

    // A second answer is refused and writes nothing.
    let head = server.all_events(agent_id).await.len();
    let (status, error) = server
        .post_status(
            &format!("/v1/agents/{agent_id}/tool-results"),
            &json!({ "call_id": call_id, "output": { "confirmed": false } }),
        )
        .await;
    assert_eq!(status, 409, "{error}");
    assert_eq!(error["error"]["code"], "already_answered");
    assert_eq!(server.all_events(agent_id).await.len(), head);
}

#[tokio::test]
async fn an_error_answers_the_call_and_client_tools_are_checked_before_anything_is_written() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let (_, call_id) = ask(&server, agent_id).await;
    let (status, accepted) = server
        .post_status(
            &format!("/v1/agents/{agent_id}/tool-results"),
            &json!({ "call_id": call_id, "error": "the user closed the dialog" }),
        )
        .await;
    assert_eq!(status, 202);
    let run_id: Uuid = accepted["run_id"].as_str().unwrap().parse().unwrap();
    let events = server.wait_for_run_end(agent_id, run_id).await;
    let results = of_kind(&events, run_id, EventKind::ToolResult);
    assert_eq!(results[0]["result"], "the user closed the dialog");
    assert_eq!(results[0]["is_error"], true);

    let head = server.all_events(agent_id).await.len();
    let refused = [
        (json!([{ "name": "clock" }]), "has the name of one of the agent's own tools"),
        (json!([{ "name": "a b" }]), "client tool 0: name"),
        (json!({ "confirm": {} }), "client tools must be a list"),
        (
            serde_json::Value::Array((0..65).map(|i| json!({ "name": format!("t{i}") })).collect()),
            "65 client tools given",
        ),
    ];
    for (tools, reason) in refused {
        let (status, error) = server
            .post_status(
                &format!("/v1/agents/{agent_id}/runs"),
                &json!({ "content": "hi", "client_tools": tools }),
            )
            .await;
        assert_eq!(status, 400, "{error}");
        assert_eq!(error["error"]["code"], "invalid_client_tools");
        assert!(error["error"]["message"].as_str().unwrap().contains(reason), "{error}");
    }
    server.assert_nothing_written(agent_id, head).await;
}

/// A call nobody answers gets an error result once the agent's timeout passes; the model reads
/// why and a late answer is refused.
#[tokio::test]
async fn an_unanswered_call_gets_an_error_result_when_its_timeout_passes() {
    let server = TestServer::start().await;
    let agent = server
        .post_json("/v1/agents", &json!({ "metadata": { "approval_timeout_ms": 300 } }))
        .await;
    let agent_id: Uuid = agent["id"].as_str().unwrap().parse().unwrap();
    let (asked, call_id) = ask(&server, agent_id).await;
    let (run_id, events) = common::wait_until("the timeout's answer", || async {
        let events = server.all_events(agent_id).await;
        let result = events.iter().find(|event| {
            event.kind == EventKind::ToolResult && event.content["tool_call_id"] == call_id.as_str()
        })?;
        let run_id = result.run_id?;
        events
            .iter()
            .any(|event| event.run_id == Some(run_id) && event.kind.is_run_end())
            .then_some((run_id, events))
    })
    .await;
    assert_ne!(run_id, asked);
    let result = &of_kind(&events, run_id, EventKind::ToolResult)[0];
    assert_eq!(result["is_error"], true);
    assert_eq!(
        result["result"],
        "the client did not run this call: timed out: nobody answered within 300 ms"
    );
    assert_eq!(events.last().unwrap().content["stop_reason"], "end_turn");
    let (status, _) = server
        .post_status(
            &format!("/v1/agents/{agent_id}/tool-results"),
            &json!({ "call_id": call_id, "output": "late" }),
        )
        .await;
    assert_eq!(status, 409);
}

#[tokio::test]
async fn kill_9_while_a_client_tool_waits_then_its_result_is_taken_once() {
    use common::processes::{self, Restartable};
    let node = Restartable::new();
    let http = agentstream_server::http_client::client();
    let post = |path: String, body: Value| http.post(path).json(&body).status_json();
    let (server, agent_id, call_id) = node
        .kill_while_a_call_waits(
            &http,
            json!({}),
            json!({ "content": "/tools confirm {\"question\": \"deploy?\"}", "client_tools": confirm_tool() }),
        )
        .await;
    // Two clients answer at once: a reloaded AI SDK app (its history's pending part, given its
    // output) and a native one. One wins.
    let history: Vec<Value> =
        http.get(format!("{}/v1/ai-sdk/chat/{agent_id}/messages", server.base)).answer().await;
    let mut assistant = history.last().unwrap().clone();
    for part in assistant["parts"].as_array_mut().unwrap() {
        if part["type"] == "tool-confirm" {
            assert_eq!(part["state"], "input-available", "{part}");
            part["state"] = json!("output-available");
            part["output"] = json!("yes");
        }
    }
    let ai_sdk = async {
        let response = http
            .post(format!("{}/v1/ai-sdk/chat", server.base))
            .json(&json!({ "id": agent_id, "trigger": "submit-message",
                           "clientTools": confirm_tool(), "messages": [history[0], assistant] }))
            .sent()
            .await;
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        let run_id = body
            .split("\"run_id\":\"")
            .nth(1)
            .map(|rest| rest[..36].to_owned())
            .unwrap_or_default();
        (status, json!({ "run_id": run_id, "body": body }))
    };
    let native = post(
        format!("{}/v1/agents/{agent_id}/tool-results", server.base),
        json!({ "call_id": call_id, "output": "yes" }),
    );
    let (first, second) = tokio::join!(ai_sdk, native);
    let mut statuses = [first.0, second.0];
    statuses.sort();
    assert!(statuses == [200, 409] || statuses == [202, 409], "{first:?} {second:?}");
    let run_id: Uuid = [first, second]
        .iter()
        .find(|(status, _)| *status != 409)
        .map(|(_, body)| body["run_id"].as_str().unwrap().parse().unwrap())
        .unwrap();
    let log = processes::log_after_run(&http, &server.base, agent_id, run_id).await;
    let results: Vec<_> = log.iter().filter(|event| event.kind == EventKind::ToolResult).collect();
    assert_eq!(results.len(), 1, "answered once");
    assert_eq!(results[0].content["result"], "yes");
    assert_eq!(log.last().unwrap().content["stop_reason"], "end_turn");
}

#[tokio::test]
async fn a_result_over_the_websocket_is_taken_once() {
    use app::protocol::{ClientMessage, ServerMessage};
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let (_, call_id) = ask(&server, agent_id).await;
    let mut socket = server.connect().await;
    let result = |output: Option<Value>, error: Option<&str>| ClientMessage::ToolResult {
        agent_id,
        call_id: call_id.clone(),
        output,
        error: error.map(str::to_owned),
    };
    socket.send(&result(None, None)).await;
    match socket.receive().await {
        ServerMessage::Error { code, .. } => assert_eq!(code, "invalid_body"),
        other => panic!("expected an error, got {other:?}"),
    }
    socket.send(&result(Some(json!("yes")), None)).await;
    let run_id = match socket.receive().await {
        ServerMessage::ApprovalAccepted { run_id, call_id: answered, .. } => {
            assert_eq!(answered, call_id);
            run_id
        }
        other => panic!("expected the result to be taken, got {other:?}"),
    };
    socket.send(&result(None, Some("again"))).await;
    match socket.receive().await {
        ServerMessage::Error { code, .. } => assert_eq!(code, "already_answered"),
        other => panic!("expected an error, got {other:?}"),
    }
    let events = server.wait_for_run_end(agent_id, run_id).await;
    assert_eq!(of_kind(&events, run_id, EventKind::ToolResult)[0]["result"], "yes");
}
