//! Requests nobody answers: denied when their timeout passes, also across a restart, and never-timing-out ones hold up nothing.

use super::*;

/// A request nobody answers is answered as denied once the agent's timeout passes: the model
/// reads why, the agent takes messages again, and a person's late answer is refused.
#[tokio::test]
async fn an_unanswered_request_is_denied_when_its_timeout_passes() {
    let server = TestServer::start().await;
    let body = json!({ "metadata": {
        "requires_approval": ["calculator"], "approval_timeout_ms": 300 } });
    let agent = server.post_json("/v1/agents", &body).await;
    let agent_id: Uuid = agent["id"].as_str().unwrap().parse().unwrap();
    let (_, call_id) = ask(&server, agent_id).await;

    let (run_id, events) = common::wait_until("the timeout's answer", || async {
        let events = server.all_events(agent_id).await;
        let response = events.iter().find(|event| event.kind == EventKind::ApprovalResponse)?;
        let run_id = response.run_id?;
        events
            .iter()
            .any(|event| event.run_id == Some(run_id) && event.kind.is_run_end())
            .then_some((run_id, events))
    })
    .await;
    let responses = of_kind(&events, run_id, EventKind::ApprovalResponse);
    assert_eq!(responses.len(), 1, "{responses:?}");
    assert_eq!(responses[0]["tool_call_id"], call_id.as_str());
    assert_eq!(responses[0]["approve"], false);
    assert_eq!(responses[0]["reason"], "timed out: nobody answered within 300 ms");
    let results = of_kind(&events, run_id, EventKind::ToolResult);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].to_string().contains("timed out"), "the model reads why: {}", results[0]);
    assert_eq!(events.last().unwrap().content["stop_reason"], "end_turn");

    let head = server.all_events(agent_id).await.len();
    let (status, error) =
        server.answer(agent_id, &json!({ "call_id": call_id, "approve": true })).await;
    assert_eq!(status, 409, "{error}");
    assert_eq!(error["error"]["code"], "already_answered");
    server.assert_nothing_written(agent_id, head).await;
    server.run_to_end(agent_id, "hello again").await;

    // A timeout that is not a whole number of milliseconds is refused at creation.
    let response =
        server.post("/v1/agents", &json!({ "metadata": { "approval_timeout_ms": "soon" } })).await;
    assert_eq!(response.status(), 422);
}

/// The timeout counts from the request's own time: a request that expired while no server was
/// running is answered when one starts.
#[tokio::test]
async fn a_request_that_expired_while_the_server_was_down_is_denied_at_the_next_start() {
    use common::processes::{log_of, Restartable};
    let node = Restartable::new();
    let http = agentstream_server::http_client::client();
    let mut server = node.start().await;
    let agent_id =
        server.create_agent(json!({ "metadata": { "requires_approval": ["calculator"] } })).await;
    server.start_run(agent_id, "/tools calculator 6*7").await;
    common::wait_until("the approval request", || async {
        let log = log_of(&http, &server.base, agent_id).await;
        log.iter().any(|event| event.kind.is_run_end()).then_some(())
    })
    .await;
    server.kill().await;
    tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;

    let server = node.start_with(&[("AGENTSTREAM_APPROVAL_TIMEOUT_MS", "1000".into())]).await;
    let log = common::wait_until("the expired request's answer", || async {
        let log = log_of(&http, &server.base, agent_id).await;
        (log.last()?.kind == EventKind::RunCompleted
            && log.iter().any(|event| event.kind == EventKind::ApprovalResponse))
        .then_some(log)
    })
    .await;
    let response = common::first_of(&log, EventKind::ApprovalResponse);
    assert_eq!(response.content["approve"], false);
    assert_eq!(response.content["reason"], "timed out: nobody answered within 1 s");
    assert!(app::approvals::pending(&common::fold(&log)).is_empty());
}

/// More open requests of agents that never time out than one sweep reads do not stop the
/// timeout of everyone else: the sweep selects by deadline, not by age alone.
#[tokio::test]
async fn requests_that_never_time_out_do_not_hold_up_the_others() {
    use agentstream_server::store::{self, AppendBatch, ClusterOptions, EventDraft};
    const WAITING_FOR_EVER: usize = 1_200;
    let server = TestServer::start().await;
    let patient = server.new_agent(&json!({ "metadata": { "requires_approval": ["calculator"], "approval_timeout_ms": 0 } })).await;
    // Older requests than any sweep reads at once, written straight into the log.
    let opened = store::open(&server.database_url, &ClusterOptions::default()).await.unwrap();
    let past = chrono::Utc::now() - chrono::Duration::hours(1);
    let drafts = (0..WAITING_FOR_EVER)
        .map(|index| {
            // No run: with PostgreSQL a run's events need the run's slot.
            let mut draft = EventDraft::new(EventKind::ApprovalRequested);
            draft.content = json!({ "tool_call_id": format!("old-{index}"), "name": "calculator", "input": {} });
            draft.created_at = past;
            draft
        })
        .collect();
    opened.store.append(&[AppendBatch::new(patient, drafts)]).await.unwrap();
    let body = json!({ "metadata": {
        "requires_approval": ["calculator"], "approval_timeout_ms": 300 } });
    let agent = server.post_json("/v1/agents", &body).await;
    let agent_id: Uuid = agent["id"].as_str().unwrap().parse().unwrap();
    let (_, call_id) = ask(&server, agent_id).await;
    let answered = common::wait_until("the timeout's answer", || async {
        server
            .all_events(agent_id)
            .await
            .into_iter()
            .find(|event| event.kind == EventKind::ApprovalResponse)
    })
    .await;
    assert_eq!(answered.content["tool_call_id"], call_id.as_str());
    assert_eq!(answered.content["approve"], false);
}
