//! The producer API over real sockets: an agent loop that runs elsewhere writes its run into an
//! agent's log — exactly once across retries, fenced by epoch, checked event by event, held to
//! one run per agent, ended when cancelled or silent — and the log's surfaces serve the run.

mod common;

use std::time::Duration;

use app::protocol::ServerMessage;
use app::EventKind;
use common::{wait_until, TestServer};
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
    let response = server
        .http
        .post(server.url(&format!("/v1/agents/{agent_id}/produce")))
        .header("Producer-Id", producer)
        .header("Producer-Epoch", epoch.to_string())
        .header("Producer-Seq", seq.to_string())
        .json(&batch)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.json().await.unwrap_or(Value::Null);
    (status, headers, body)
}

fn text(piece: &str) -> Value {
    json!({ "kind": "text", "message_id": MESSAGE, "delta": piece, "delta_action": "append" })
}

fn header(headers: &reqwest::header::HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .map(|value| value.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

async fn head(server: &TestServer, agent_id: Uuid) -> u64 {
    server
        .all_events(agent_id)
        .await
        .last()
        .map_or(0, |event| event.seq)
}

#[tokio::test]
async fn a_produced_run_is_written_once_across_retries_and_served_like_ours() {
    let server = TestServer::start().await;
    let agent_id = server.create_agent().await;
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
    assert_eq!(
        events[0].metadata["producer"],
        json!({ "id": "worker-1", "epoch": 0 })
    );

    // The live subscriber saw the same events, in order, once.
    let (live, _) = socket.receive_until_run_end().await;
    assert_eq!(live, events);

    // The reducer, the REST run outline, Letta's messages, the history page and the
    // inspector serve it as they serve ours.
    let timeline = common::fold(&events);
    let run = timeline
        .runs()
        .iter()
        .find(|run| run.run_id == run_id)
        .unwrap();
    assert_eq!(run.status.as_str(), "completed");
    assert_eq!(common::reply_text(&events, run_id), "Hello, world");
    let outline = server.get_json(&format!("/v1/runs/{run_id}")).await;
    assert_eq!(outline["status"], "completed", "{outline}");
    let letta = server
        .get_json(&format!("/v1/agents/{agent_id}/messages"))
        .await;
    let letta = letta.to_string();
    assert!(
        letta.contains("Hello, world") && letta.contains("say hello"),
        "{letta}"
    );
    // AG-UI's connect: the thread's messages, the produced run's among them.
    let connected = server
        .http
        .post(server.url("/v1/ag-ui/connect"))
        .json(&json!({ "threadId": agent_id.to_string() }))
        .send()
        .await
        .unwrap();
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
    let mut tail = server
        .http
        .get(server.url(&format!("/v1/agents/{agent_id}/events/stream?since=0")))
        .send()
        .await
        .unwrap();
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
    for page in [
        format!("/agents/{agent_id}/history"),
        format!("/agents/{agent_id}/runs/{run_id}"),
    ] {
        let html = server.http.get(server.url(&page)).send().await.unwrap();
        assert_eq!(html.status(), 200, "{page}");
        let html = html.text().await.unwrap();
        assert!(html.contains("Hello, world"), "{page} shows the reply");
    }
    // Operators see the batches by outcome.
    let metrics = server
        .http
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "agentstream_producer_batches_total{outcome=\"appended\"} 3",
        "agentstream_producer_batches_total{outcome=\"duplicate\"} 3",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
    // The producer's position says where it is.
    let position = server
        .get_json(&format!("/v1/agents/{agent_id}/producers/worker-1"))
        .await;
    assert_eq!(position["epoch"], 0);
    assert_eq!(position["seq"], 2);
    assert_eq!(position["run_open"], false);
}

#[tokio::test]
async fn the_fence_refuses_stale_epochs_gaps_and_bad_headers_and_writes_nothing() {
    let server = TestServer::start().await;
    let agent_id = server.create_agent().await;
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
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("missing: Producer-Epoch, Producer-Seq"));

    let (status, _, _) = produce(
        &server,
        Uuid::new_v4(),
        ("p", 0, 0),
        json!([{ "kind": "run_started" }]),
    )
    .await;
    assert_eq!(status, 404);
    // Only the new epoch's one batch was written.
    assert_eq!(head(&server, agent_id).await, before + 1);
}

#[tokio::test]
async fn a_malformed_batch_is_refused_whole_naming_the_event() {
    let server = TestServer::start().await;
    let agent_id = server.create_agent().await;
    assert_eq!(
        produce(
            &server,
            agent_id,
            ("p", 0, 0),
            json!([{ "kind": "run_started" }])
        )
        .await
        .0,
        200
    );
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
        (
            json!({ "not": "an event" }),
            422,
            "event 0: unknown field `not`",
        ),
        (json!([]), 422, "no events"),
    ];
    for (batch, status, says) in cases {
        let (got, _, body) = produce(&server, agent_id, ("p", 0, 1), batch).await;
        assert_eq!(got, status, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message:?} should say {says:?}");
    }
    let not_json = server
        .http
        .post(server.url(&format!("/v1/agents/{agent_id}/produce")))
        .header("Producer-Id", "p")
        .header("Producer-Epoch", "0")
        .header("Producer-Seq", "1")
        .header("Content-Type", "application/json")
        .body("[{\"kind\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status(), 400);
    let huge = "x".repeat(9 * 1024 * 1024);
    let (status, _, _) = produce(&server, agent_id, ("p", 0, 1), json!([text(&huge)])).await;
    assert_eq!(status, 413);
    // Nothing of any of them was written, and the seq they used is still the next one.
    assert_eq!(head(&server, agent_id).await, before);
    assert_eq!(
        produce(&server, agent_id, ("p", 0, 1), json!([text("fine")]))
            .await
            .0,
        200
    );
}

#[tokio::test]
async fn one_run_at_a_time_whoever_writes_it() {
    let server = TestServer::start_paced(200, 20).await;
    let agent_id = server.create_agent().await;
    assert_eq!(
        produce(
            &server,
            agent_id,
            ("p", 0, 0),
            json!([{ "kind": "run_started" }])
        )
        .await
        .0,
        200
    );
    // Our own run is refused while the producer's is open …
    let response = server
        .http
        .post(server.url(&format!("/v1/agents/{agent_id}/runs")))
        .json(&json!({ "content": "hi" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 409);
    // … and so is another producer's.
    let (status, _, body) = produce(
        &server,
        agent_id,
        ("q", 0, 0),
        json!([{ "kind": "run_started" }]),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("run_in_progress"))
    );
    assert_eq!(
        produce(
            &server,
            agent_id,
            ("p", 0, 1),
            json!([{ "kind": "run_completed" }])
        )
        .await
        .0,
        200
    );

    // While our own run streams, a producer's run_started is refused.
    let run_id = server.start_run(agent_id, "a long one").await;
    let (status, _, body) = produce(
        &server,
        agent_id,
        ("q", 0, 0),
        json!([{ "kind": "run_started" }]),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("run_in_progress")),
        "{body}"
    );
    server.wait_for_run_end(agent_id, run_id).await;
    assert_eq!(
        produce(
            &server,
            agent_id,
            ("q", 0, 0),
            json!([{ "kind": "run_started" }])
        )
        .await
        .0,
        200
    );
}

#[tokio::test]
async fn a_cancelled_run_ends_at_once_and_its_producer_learns_it() {
    let server = TestServer::start().await;
    let agent_id = server.create_agent().await;
    let (_, _, body) = produce(
        &server,
        agent_id,
        ("p", 0, 0),
        json!([
            { "kind": "run_started" },
            { "kind": "tool_call", "content": { "tool_call_id": "slow", "name": "wait" } },
        ]),
    )
    .await;
    let run_id = body["run_id"].as_str().unwrap().to_owned();
    let cancelled = server
        .post_json(
            &format!("/v1/agents/{agent_id}/messages/cancel"),
            &json!({}),
        )
        .await;
    assert_eq!(
        cancelled["cancelled_run_ids"],
        json!([run_id]),
        "{cancelled}"
    );
    let events = server.all_events(agent_id).await;
    let kinds: Vec<&str> = events.iter().map(|event| event.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "tool_call",
            "tool_call",
            "tool_result",
            "run_cancelled"
        ]
    );
    assert_eq!(events[3].content["is_error"], true);
    let (status, _, body) = produce(&server, agent_id, ("p", 0, 1), json!([text("late")])).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("run_ended")),
        "{body}"
    );
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("cancelled"));
    // The refused request changed nothing: the producer opens its next run with that seq.
    assert_eq!(
        produce(
            &server,
            agent_id,
            ("p", 0, 1),
            json!([{ "kind": "run_started" }])
        )
        .await
        .0,
        200
    );
}

#[tokio::test]
async fn a_silent_producer_has_its_run_ended_at_its_lease() {
    let server = TestServer::start().await;
    let agent_id = server.create_agent().await;
    let opened = json!([{ "kind": "run_started", "metadata": { "lease_ms": 1000 } }, text("half")]);
    assert_eq!(produce(&server, agent_id, ("p", 0, 0), opened).await.0, 200);
    let events = wait_until("the lease to end the run", || async {
        let events = server.all_events(agent_id).await;
        events
            .last()
            .is_some_and(|event| event.kind.is_run_end())
            .then_some(events)
    })
    .await;
    let end = events.last().unwrap();
    assert_eq!(end.kind, EventKind::RunFailed);
    assert_eq!(end.content["error"]["type"], "interrupted");
    assert!(end.content["error"]["message"]
        .as_str()
        .unwrap()
        .contains("1000 ms"));
    let (status, _, body) = produce(&server, agent_id, ("p", 0, 1), json!([text("back")])).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("run_ended")),
        "{body}"
    );
    // The agent is free for the next run.
    let run_id = server.start_run(agent_id, "hello").await;
    server.wait_for_run_end(agent_id, run_id).await;
}

#[tokio::test]
async fn a_streamed_body_commits_each_line_as_it_arrives() {
    let server = TestServer::start().await;
    let agent_id = server.create_agent().await;
    let mut socket = server.connect().await;
    socket.subscribe(agent_id, 0).await;
    let (lines, body) = common::streamed_body();
    let request = server
        .http
        .post(server.url(&format!("/v1/agents/{agent_id}/produce")))
        .header("Producer-Id", "streamer")
        .header("Producer-Epoch", "0")
        .header("Producer-Seq", "0")
        .header("Content-Type", "application/x-ndjson")
        .body(body)
        .send();
    let answer = tokio::spawn(request);
    lines
        .send(Ok(format!(
            "{}\n",
            json!([{ "kind": "run_started" }, text("one ")])
        )))
        .await
        .unwrap();
    // The first line is in the log (and on the socket) before the second is sent.
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(10), socket.receive()).await {
            Ok(ServerMessage::Events { events, .. }) => seen.extend(events),
            Ok(_) => {}
            Err(_) => panic!("the first line was not delivered while the body stayed open"),
        }
    }
    lines.send(Ok(format!("{}\n", text("two ")))).await.unwrap();
    lines
        .send(Ok(format!("{}", json!({ "kind": "run_completed" }))))
        .await
        .unwrap();
    drop(lines);
    let response = answer.await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(header(response.headers(), "producer-seq"), "2");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["acknowledged_producer_seq"], 2, "{body}");
    assert_eq!(body["last"]["run_open"], false);
    let events = server.all_events(agent_id).await;
    let run_id = events[0].run_id.unwrap();
    assert_eq!(common::reply_text(&events, run_id), "one two ");
    // The same stream sent again is all duplicates.
    let again = server
        .http
        .post(server.url(&format!("/v1/agents/{agent_id}/produce")))
        .header("Producer-Id", "streamer")
        .header("Producer-Epoch", "0")
        .header("Producer-Seq", "1")
        .header("Content-Type", "application/x-ndjson")
        .body(format!(
            "{}\n{}\n",
            json!([text("two ")]),
            json!([{ "kind": "run_completed" }])
        ))
        .send()
        .await
        .unwrap();
    let body: Value = again.json().await.unwrap();
    assert_eq!(body["duplicates"], 2, "{body}");
    assert_eq!(server.all_events(agent_id).await.len(), events.len());
}

#[tokio::test]
async fn the_produce_scope_allows_producing_and_nothing_else() {
    use agentstream_server::http::token::{Grant, Scope, Scopes, TokenKeys};
    const SECRET: &str = "0123456789abcdef0123456789abcdef-produce";
    let server = TestServer::start_with(|config| {
        config.api_token = Some("operator".to_owned());
        config.token_keys = Some(TokenKeys::new(SECRET, 3600).unwrap());
    })
    .await;
    let operator = reqwest::Client::new();
    let agent_id: Uuid = {
        let created: Value = operator
            .post(server.url("/v1/agents"))
            .bearer_auth("operator")
            .json(&json!({ "name": "produced" }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
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
        async move { request.send().await.unwrap().status().as_u16() }
    };
    let produce_path = format!("/v1/agents/{agent_id}/produce");
    let producer = token(&[Scope::Produce]);
    assert_eq!(
        call(
            producer.clone(),
            reqwest::Method::POST,
            produce_path.clone(),
            0
        )
        .await,
        200
    );
    let position = format!("/v1/agents/{agent_id}/producers/w");
    assert_eq!(
        call(producer.clone(), reqwest::Method::GET, position, 0).await,
        200
    );
    // A producer's token reads nothing and starts nothing of ours.
    for (method, path) in [
        (
            reqwest::Method::GET,
            format!("/v1/agents/{agent_id}/events"),
        ),
        (reqwest::Method::GET, format!("/v1/agents/{agent_id}")),
        (reqwest::Method::POST, format!("/v1/agents/{agent_id}/runs")),
        (
            reqwest::Method::POST,
            format!("/v1/agents/{agent_id}/messages/cancel"),
        ),
    ] {
        assert_eq!(
            call(producer.clone(), method, path.clone(), 0).await,
            403,
            "{path}"
        );
    }
    // Reading and writing do not allow producing; the operator may (and is told that the
    // producer's run is still open).
    let reader = token(&[Scope::Read, Scope::Write, Scope::Approve]);
    assert_eq!(
        call(reader, reqwest::Method::POST, produce_path.clone(), 1).await,
        403
    );
    assert_eq!(
        call("operator".into(), reqwest::Method::POST, produce_path, 1).await,
        422
    );
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
    use common::processes::{free_port, Process};
    let directory = tempfile::tempdir().unwrap();
    let database = directory.path().join("restart.db");
    let port = free_port();
    let env = [("DATABASE_URL", format!("sqlite://{}", database.display()))];
    let http = reqwest::Client::new();
    let append = |base: String, agent_id: Uuid, producer: &'static str, seq: u64, batch: Value| {
        let http = http.clone();
        async move {
            let response = http
                .post(format!("{base}/v1/agents/{agent_id}/produce"))
                .header("Producer-Id", producer)
                .header("Producer-Epoch", "0")
                .header("Producer-Seq", seq.to_string())
                .json(&batch)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let mut server = Process::start(port, &env).await;
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
    assert_eq!(
        append(server.base.clone(), silent_agent, "s", 0, short)
            .await
            .0,
        200
    );
    // Killed as if before its answer went out.
    server.kill().await;
    let mut server = Process::start(port, &env).await;
    let position: Value = http
        .get(format!("{}/v1/agents/{agent_id}/producers/p", server.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(position["run_open"], json!(true), "{position}");
    assert_eq!(
        append(server.base.clone(), agent_id, "p", 0, opened)
            .await
            .0,
        204
    );
    let (status, body) = append(server.base.clone(), agent_id, "p", 1, json!([text("rest")])).await;
    assert_eq!(
        (status, body["run_open"].clone()),
        (200, json!(true)),
        "{body}"
    );
    assert_eq!(body["run_id"], run_id.as_str());
    // Our own run is refused while the restarted server holds the producer's.
    let ours = http
        .post(format!("{}/v1/agents/{agent_id}/runs", server.base))
        .json(&json!({ "content": "mine" }))
        .send()
        .await
        .unwrap();
    assert_eq!(ours.status(), 409);
    // A SIGTERM leaves it open too.
    server.sigterm();
    server.child.wait().await.unwrap();
    let server = Process::start(port, &env).await;
    let (status, body) = append(
        server.base.clone(),
        agent_id,
        "p",
        2,
        json!([text("!"), { "kind": "run_completed" }]),
    )
    .await;
    assert_eq!(
        (status, body["run_open"].clone()),
        (200, json!(false)),
        "{body}"
    );
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
    assert!(
        silent.content.to_string().contains("lease"),
        "{}",
        silent.content
    );
}

#[tokio::test]
async fn a_whole_run_in_one_batch_is_written_and_frees_the_agent() {
    let server = TestServer::start().await;
    let agent_id = server.create_agent().await;
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
    assert_eq!(
        (status, body["run_open"].clone()),
        (200, json!(false)),
        "{body}"
    );
    let run = server.start_run(agent_id, "/echo next").await;
    server.wait_for_run_end(agent_id, run).await;
}

/// While a call waits for a person, a producer cannot start a run (and so cannot write a result
/// that would close the approval under the person): 409 `call_waiting`, as a new message is
/// refused; once the person answered, the producer goes on.
#[tokio::test]
async fn a_producer_waits_like_everyone_while_a_call_waits_for_a_person() {
    let server = TestServer::start().await;
    let agent = server
        .post_json(
            "/v1/agents",
            &json!({ "name": "guarded", "metadata": { "requires_approval": ["calculator"] } }),
        )
        .await;
    let agent_id: Uuid = agent["id"].as_str().unwrap().parse().unwrap();
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
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("call_waiting")),
        "{body}"
    );
    assert_eq!(head(&server, agent_id).await, before, "nothing written");
    let answered = server
        .http
        .post(server.url(&format!("/v1/agents/{agent_id}/approvals")))
        .json(&json!({ "call_id": call_id, "approve": false }))
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 202);
    let continuation: Uuid = answered.json::<Value>().await.unwrap()["run_id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
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
                .http
                .post(server.url(&format!("/v1/agents/{agent_id}/produce")))
                .header("Producer-Id", "p")
                .header("Producer-Epoch", "0")
                .header("Producer-Seq", "1")
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
        let events = wait_until(
            "the vanished producer's run to end at its lease",
            || async {
                let events = server.all_events(agent_id).await;
                events
                    .last()
                    .is_some_and(|event| event.kind.is_run_end())
                    .then_some(events)
            },
        )
        .await;
        let texts: Vec<&str> = events
            .iter()
            .filter(|event| event.kind == EventKind::Text)
            .filter_map(|event| event.delta.as_ref()?.as_str())
            .collect();
        let expected: &[&str] = if ends {
            &["a ", "b ", "c "]
        } else {
            &["a ", "b "]
        };
        assert_eq!(texts, expected, "each batch once");
        let end = events.last().unwrap();
        assert_eq!(end.kind, EventKind::RunFailed, "{}", end.content);
        assert_eq!(end.content["error"]["type"], "interrupted");
    }
}
