//! What a producer may do and how long its run lives: the produce scope, our restarts, whole runs in one batch, waiting calls, dropped requests.

use super::*;
use crate::common::RequestExt;

#[tokio::test]
async fn the_produce_scope_allows_producing_and_nothing_else() {
    use agentstream_server::http::token::{Grant, Scope, Scopes, TokenKeys};
    const SECRET: &str = "0123456789abcdef0123456789abcdef-produce";
    let server = TestServer::start_with(|config| {
        config.api_token = Some("operator".to_owned());
        config.token_keys = Some(TokenKeys::new(SECRET, 3600).unwrap());
    })
    .await;
    let operator = agentstream_server::http_client::client();
    let agent_id: Uuid = {
        let created: Value = operator
            .post(server.url("/v1/agents"))
            .bearer_auth("operator")
            .json(&json!({ "name": "produced" }))
            .answer()
            .await;
        created["id"].as_str().unwrap().parse().unwrap()
    };
    let token = |scopes: &[Scope]| {
        let now = chrono::Utc::now().timestamp();
        TokenKeys::new(SECRET, 3600).unwrap().sign(
            &Grant {
                sub: "worker".into(),
                agents: vec![agent_id.to_string()],
                scopes: Scopes::of(scopes),
                expires_at: now + 300,
            },
            now,
        )
    };
    let call = |token: String, method: reqwest::Method, path: String, seq: u64| {
        let request = operator
            .request(method, server.url(&path))
            .bearer_auth(token)
            .header("Producer-Id", "w")
            .header("Producer-Epoch", "0")
            .header("Producer-Seq", seq.to_string())
            .json(&json!([{ "kind": "run_started" }]));
        async move { request.sent().await.status().as_u16() }
    };
    let produce_path = format!("/v1/agents/{agent_id}/produce");
    let producer = token(&[Scope::Produce]);
    assert_eq!(call(producer.clone(), reqwest::Method::POST, produce_path.clone(), 0).await, 200);
    let position = format!("/v1/agents/{agent_id}/producers/w");
    assert_eq!(call(producer.clone(), reqwest::Method::GET, position, 0).await, 200);
    // A producer's token reads nothing and starts nothing of ours.
    for (method, path) in [
        (reqwest::Method::GET, format!("/v1/agents/{agent_id}/events")),
        (reqwest::Method::GET, format!("/v1/agents/{agent_id}")),
        (reqwest::Method::POST, format!("/v1/agents/{agent_id}/runs")),
        (reqwest::Method::POST, format!("/v1/agents/{agent_id}/messages/cancel")),
    ] {
        assert_eq!(call(producer.clone(), method, path.clone(), 0).await, 403, "{path}");
    }
    // Reading and writing do not allow producing; the operator may (and is told that the
    // producer's run is still open).
    let reader = token(&[Scope::Read, Scope::Write, Scope::Approve]);
    assert_eq!(call(reader, reqwest::Method::POST, produce_path.clone(), 1).await, 403);
    assert_eq!(call("operator".into(), reqwest::Method::POST, produce_path, 1).await, 422);
}

/// The server restarts while a producer's run is open: recovery ends the run, and the producer's
/// next append (after its own restart, a new epoch) is told its run ended rather than that its
/// batch is malformed.
/// A produced run is its producer's: a kill -9 or a SIGTERM of the server while the run's lease
/// has time left does not end it; after the restart the producer's resend is a duplicate, its
/// next batches go on, and the log holds the run once. A producer that stays silent past its
/// lease still has its run ended `interrupted` — by the restarted server.
#[tokio::test]
async fn a_produced_run_outlives_our_restarts_while_its_lease_has_time() {
    use common::processes::Restartable;
    let node = Restartable::new();
    let http = agentstream_server::http_client::client();
    let append = |base: String, agent_id: Uuid, producer: &'static str, seq: u64, batch: Value| {
        produce_request(&http, &base, agent_id, (producer, 0, seq), &batch).status_json()
    };
    let mut server = node.start().await;
    let agent_id = server.create_agent(json!({ "name": "restarted" })).await;
    let silent_agent = server.create_agent(json!({ "name": "silent" })).await;
    let opened = json!([
        { "kind": "run_started", "metadata": { "lease_ms": 60_000 } },
        text("half"),
    ]);
    let (status, body) = append(server.base.clone(), agent_id, "p", 0, opened.clone()).await;
    assert_eq!(status, 200, "{body}");
    let run_id = body["run_id"].as_str().unwrap().to_owned();
    let short = json!([{ "kind": "run_started", "metadata": { "lease_ms": 3_000 } }, text("x")]);
    assert_eq!(append(server.base.clone(), silent_agent, "s", 0, short).await.0, 200);
    // Killed as if before its answer went out.
    server.kill().await;
    let mut server = node.start().await;
    let position: Value =
        http.get(format!("{}/v1/agents/{agent_id}/producers/p", server.base)).answer().await;
    assert_eq!(position["run_open"], json!(true), "{position}");
    assert_eq!(append(server.base.clone(), agent_id, "p", 0, opened).await.0, 204);
    let (status, body) = append(server.base.clone(), agent_id, "p", 1, json!([text("rest")])).await;
    assert_eq!((status, body["run_open"].clone()), (200, json!(true)), "{body}");
    assert_eq!(body["run_id"], run_id.as_str());
    // Our own run is refused while the restarted server holds the producer's.
    let ours = http
        .post(format!("{}/v1/agents/{agent_id}/runs", server.base))
        .json(&json!({ "content": "mine" }))
        .sent()
        .await;
    assert_eq!(ours.status(), 409);
    // A SIGTERM leaves it open too.
    server.sigterm();
    server.child.wait().await.unwrap();
    let server = node.start().await;
    let (status, body) = append(
        server.base.clone(),
        agent_id,
        "p",
        2,
        json!([text("!"), { "kind": "run_completed" }]),
    )
    .await;
    assert_eq!((status, body["run_open"].clone()), (200, json!(false)), "{body}");
    let log = common::processes::log_of(&http, &server.base, agent_id).await;
    let kinds: Vec<&str> = log.iter().map(|event| event.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["run_started", "text", "text", "text", "run_completed"],
        "the run once, never interrupted"
    );
    // The silent producer's run ends at its lease, counted from its last batch.
    let silent = common::wait_until("the silent producer's run to end", || async {
        let log = common::processes::log_of(&http, &server.base, silent_agent).await;
        log.last().filter(|event| event.kind.is_run_end()).cloned()
    })
    .await;
    assert_eq!(silent.kind, EventKind::RunFailed, "{:?}", silent.content);
    assert!(silent.content.to_string().contains("lease"), "{}", silent.content);
}

#[tokio::test]
async fn a_whole_run_in_one_batch_is_written_and_frees_the_agent() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let whole = json!([
        { "kind": "run_started" },
        { "kind": "user", "message_id": USER_MESSAGE, "content": { "text": "hi" } },
        text("hello"),
        { "kind": "run_completed" },
    ]);
    let (status, _, body) = produce(&server, agent_id, ("p", 0, 0), whole.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["run_open"], json!(false), "{body}");
    let run_id: Uuid = body["run_id"].as_str().unwrap().parse().unwrap();
    let kinds: Vec<EventKind> = server
        .all_events(agent_id)
        .await
        .iter()
        .filter(|event| event.run_id == Some(run_id))
        .map(|event| event.kind)
        .collect();
    assert_eq!(kinds.first(), Some(&EventKind::RunStarted));
    assert_eq!(kinds.last(), Some(&EventKind::RunCompleted));
    // Its retry is a duplicate; the agent is free for the next run, ours or a producer's.
    assert_eq!(produce(&server, agent_id, ("p", 0, 0), whole).await.0, 204);
    let (status, _, body) = produce(
        &server,
        agent_id,
        ("p", 0, 1),
        json!([{ "kind": "run_started" }, { "kind": "run_cancelled" }]),
    )
    .await;
    assert_eq!((status, body["run_open"].clone()), (200, json!(false)), "{body}");
    server.run_to_end(agent_id, "/echo next").await;
}

/// While a call waits for a person, a producer cannot start a run (and so cannot write a result
/// that would close the approval under the person): 409 `call_waiting`, as a new message is
/// refused; once the person answered, the producer goes on.
#[tokio::test]
async fn a_producer_waits_like_everyone_while_a_call_waits_for_a_person() {
    let server = TestServer::start().await;
    let agent_id = server
        .new_agent(
            &json!({ "name": "guarded", "metadata": { "requires_approval": ["calculator"] } }),
        )
        .await;
    let run_id = server.start_run(agent_id, "/tools calculator 2+3").await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    let call_id = events
        .iter()
        .find(|event| event.kind == EventKind::ApprovalRequested)
        .and_then(|event| event.content["tool_call_id"].as_str())
        .unwrap()
        .to_owned();
    let before = head(&server, agent_id).await;
    let sneaky = json!([
        { "kind": "run_started" },
        { "kind": "tool_call", "content": { "tool_call_id": call_id, "name": "calculator" } },
        { "kind": "tool_result", "content": { "tool_call_id": call_id, "result": "approved by nobody" } },
    ]);
    let (status, _, body) = produce(&server, agent_id, ("p", 0, 0), sneaky.clone()).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("call_waiting")), "{body}");
    assert_eq!(head(&server, agent_id).await, before, "nothing written");
    let answered = server
        .post(
            &format!("/v1/agents/{agent_id}/approvals"),
            &json!({ "call_id": call_id, "approve": false }),
        )
        .await;
    assert_eq!(answered.status(), 202);
    let continuation: Uuid =
        answered.json::<Value>().await.unwrap()["run_id"].as_str().unwrap().parse().unwrap();
    server.wait_for_run_end(agent_id, continuation).await;
    let (status, _, body) = produce(
        &server,
        agent_id,
        ("p", 0, 0),
        json!([{ "kind": "run_started" }, { "kind": "run_completed" }]),
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

/// A producer's request dropped midway (its answer lost, the connection gone while the batch
/// commits) must leave the server's hold on the run whole: the resend is a 200 or a 204, the
/// run goes on or ends as the producer says, and a producer that then vanishes still has its
/// run ended at its lease. The drop lands at a different moment for each agent (0–4.7 ms after
/// sending), so some land while the batch is being committed.
#[tokio::test]
async fn a_request_dropped_midway_leaves_the_run_to_its_producer_and_its_lease() {
    const AGENTS: u64 = 48;
    let server = TestServer::start().await;
    let mut agents = Vec::new();
    for _ in 0..AGENTS {
        agents.push(server.create_agent().await);
    }
    let outcomes = futures::future::join_all(agents.iter().enumerate().map(|(index, &agent_id)| {
        let server = &server;
        async move {
            let opened = json!([{ "kind": "run_started", "metadata": { "lease_ms": 1000 } }, text("a ")]);
            assert_eq!(produce(server, agent_id, ("p", 0, 0), opened).await.0, 200);
            // Half the agents lose the answer of their run's last batch, then start the next.
            let ends = index % 2 == 0;
            let batch = if ends {
                json!([text("b "), { "kind": "run_completed" }])
            } else {
                json!([text("b ")])
            };
            let drop_after = Duration::from_micros(100 * index as u64);
            let lost = server
        .producer(agent_id, ("p", 0, 1))
                .json(&batch)
                .send();
            let _ = tokio::time::timeout(drop_after, lost).await;
            let (status, _, body) = produce(server, agent_id, ("p", 0, 1), batch).await;
            assert!(matches!(status, 200 | 204), "the resend: {status} {body}");
            if ends {
                // The next run opens (the last one ended with the lost batch), then vanishes.
                let next = json!([{ "kind": "run_started", "metadata": { "lease_ms": 1000 } }, text("c ")]);
                let (status, _, body) = produce(server, agent_id, ("p", 0, 2), next).await;
                assert_eq!(status, 200, "the next run after a lost end: {body}");
            }
            ends
        }
    }))
    .await;
    // Every producer vanished now: each open run ends at its lease, 1 s after its last batch.
    for (&agent_id, ends) in agents.iter().zip(outcomes) {
        let events = server
            .log_once_a_run_ended(agent_id, "the vanished producer's run to end at its lease")
            .await;
        let texts: Vec<&str> = events
            .iter()
            .filter(|event| event.kind == EventKind::Text)
            .filter_map(|event| event.delta.as_ref()?.as_str())
            .collect();
        let expected: &[&str] = if ends { &["a ", "b ", "c "] } else { &["a ", "b "] };
        assert_eq!(texts, expected, "each batch once");
        let end = events.last().unwrap();
        assert_eq!(end.kind, EventKind::RunFailed, "{}", end.content);
        assert_eq!(end.content["error"]["type"], "interrupted");
    }
}
