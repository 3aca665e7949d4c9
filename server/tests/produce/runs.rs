//! One produced run at a time: cancels, silent producers, and bodies that stream line by line.

use super::*;
use crate::common::RequestExt;

#[tokio::test]
async fn one_run_at_a_time_whoever_writes_it() {
    let (server, agent_id) = TestServer::start_paced(200, 20).await.with_agent().await;
    open_run(&server, agent_id, ("p", 0, 0)).await;
    // Our own run is refused while the producer's is open …
    let response =
        server.post(&format!("/v1/agents/{agent_id}/runs"), &json!({ "content": "hi" })).await;
    assert_eq!(response.status(), 409);
    // … and so is another producer's.
    assert_open_refused(&server, agent_id).await;
    assert_eq!(
        produce(&server, agent_id, ("p", 0, 1), json!([{ "kind": "run_completed" }])).await.0,
        200
    );

    // While our own run streams, a producer's run_started is refused.
    let run_id = server.start_run(agent_id, "a long one").await;
    assert_open_refused(&server, agent_id).await;
    server.wait_for_run_end(agent_id, run_id).await;
    open_run(&server, agent_id, ("q", 0, 0)).await;
}

#[tokio::test]
async fn a_cancelled_run_ends_at_once_and_its_producer_learns_it() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
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
    server.cancel(agent_id, &run_id).await;
    let events = server.all_events(agent_id).await;
    let kinds: Vec<&str> = events.iter().map(|event| event.kind.as_str()).collect();
    assert_eq!(kinds, ["run_started", "tool_call", "tool_call", "tool_result", "run_cancelled"]);
    assert_eq!(events[3].content["is_error"], true);
    let (status, _, body) = produce(&server, agent_id, ("p", 0, 1), json!([text("late")])).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("run_ended")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("cancelled"));
    // The refused request changed nothing: the producer opens its next run with that seq.
    open_run(&server, agent_id, ("p", 0, 1)).await;
}

#[tokio::test]
async fn a_silent_producer_has_its_run_ended_at_its_lease() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let opened = json!([{ "kind": "run_started", "metadata": { "lease_ms": 1000 } }, text("half")]);
    assert_eq!(produce(&server, agent_id, ("p", 0, 0), opened).await.0, 200);
    let events = server.log_once_a_run_ended(agent_id, "the lease to end the run").await;
    let end = events.last().unwrap();
    assert_eq!(end.kind, EventKind::RunFailed);
    assert_eq!(end.content["error"]["type"], "interrupted");
    assert!(end.content["error"]["message"].as_str().unwrap().contains("1000 ms"));
    let (status, _, body) = produce(&server, agent_id, ("p", 0, 1), json!([text("back")])).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("run_ended")), "{body}");
    // The agent is free for the next run.
    server.run_to_end(agent_id, "hello").await;
}

#[tokio::test]
async fn a_streamed_body_commits_each_line_as_it_arrives() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let mut socket = server.connect().await;
    socket.subscribe(agent_id, 0).await;
    let (lines, body) = common::streamed_body();
    let request = server
        .producer(agent_id, ("streamer", 0, 0))
        .header("Content-Type", "application/x-ndjson")
        .body(body)
        .send();
    let answer = tokio::spawn(request);
    lines
        .send(Ok(format!("{}\n", json!([{ "kind": "run_started" }, text("one ")]))))
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
    lines.send(Ok(format!("{}", json!({ "kind": "run_completed" })))).await.unwrap();
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
        .producer(agent_id, ("streamer", 0, 1))
        .header("Content-Type", "application/x-ndjson")
        .body(format!("{}\n{}\n", json!([text("two ")]), json!([{ "kind": "run_completed" }])))
        .sent()
        .await;
    let body: Value = again.json().await.unwrap();
    assert_eq!(body["duplicates"], 2, "{body}");
    assert_eq!(server.all_events(agent_id).await.len(), events.len());
}
