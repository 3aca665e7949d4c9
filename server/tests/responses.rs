//! The Responses API over real sockets, on the configured store: what a client leaving does to
//! a foreground and a background response, a reader that never reads, resources given back, and
//! refusals that say what was wrong and write nothing. (The official clients are exercised in
//! end2end/tests/openai-*.spec.ts.)

use crate::common;

use std::time::Duration;

use app::EventKind;
use common::{wait_until, TestServer, WAIT_MAX};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::RequestExt;

impl TestServer {
    async fn respond(&self, body: &Value) -> reqwest::Response {
        self.http.post(self.url("/v1/responses")).json(body).sent().await
    }

    async fn stats(&self) -> Value {
        self.get_json("/v1/stats").await
    }
}

/// The first `count` events of a Responses stream (their JSON), the connection left open.
async fn first_events(
    response: reqwest::Response,
    count: usize,
) -> (
    Vec<Value>,
    impl futures::Stream<Item = Result<eventsource_stream::Event, impl std::fmt::Debug>>,
) {
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut events = Box::pin(response.bytes_stream().eventsource());
    let mut seen = Vec::new();
    while seen.len() < count {
        let event = tokio::time::timeout(WAIT_MAX, events.next())
            .await
            .expect("the stream went quiet")
            .expect("the stream ended early")
            .expect("well-formed SSE");
        let data: Value = serde_json::from_str(&event.data).expect("JSON events");
        assert_eq!(event.event, data["type"], "event: names the type");
        seen.push(data);
    }
    (seen, events)
}

fn ids_of(created: &Value) -> (Uuid, Uuid) {
    let ids = &created["response"]["agentstream"];
    (
        ids["agent_id"].as_str().unwrap().parse().unwrap(),
        ids["run_id"].as_str().unwrap().parse().unwrap(),
    )
}

#[tokio::test]
async fn a_client_leaving_cancels_a_foreground_response_and_not_a_background_one() {
    let server = TestServer::start_paced(400, 10).await;
    for background in [false, true] {
        let response = server
            .respond(&json!({ "model": "scripted", "input": "a long answer", "stream": true, "background": background }))
            .await;
        let (seen, events) = first_events(response, 4).await;
        assert_eq!(seen[0]["type"], "response.created");
        let (agent_id, run_id) = ids_of(&seen[0]);
        drop(events);
        let log = server.wait_for_run_end(agent_id, run_id).await;
        let end = log.last().unwrap().kind;
        let expected = match background {
            false => EventKind::RunCancelled,
            true => EventKind::RunCompleted,
        };
        assert_eq!(end, expected, "background {background}");
    }
    // Every stream's slot is back.
    wait_until("the streams' slots to be given back", || async {
        (server.stats().await["sse_streams_open"] == 0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_reader_that_never_reads_holds_back_neither_the_run_nor_other_readers() {
    let server = TestServer::start_paced(3_000, 0).await;
    let response = server
        .respond(&json!({ "model": "scripted", "input": "a long answer", "stream": true, "background": true }))
        .await;
    let (seen, stalled) = first_events(response, 1).await;
    let (agent_id, run_id) = ids_of(&seen[0]);
    // It never reads again; the run ends all the same, and a second reader gets all of it.
    server.wait_for_run_end(agent_id, run_id).await;
    let id = format!("resp_{}", run_id.simple());
    let replay = server
        .http
        .get(server.url(&format!("/v1/responses/{id}?stream=true")))
        .sent()
        .await
        .text()
        .await
        .unwrap();
    assert!(replay.contains("event: response.completed"));
    assert!(replay.trim_end().ends_with("data: [DONE]"));
    drop(stalled);
    wait_until("the streams' slots to be given back", || async {
        (server.stats().await["sse_streams_open"] == 0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn refusals_say_what_was_wrong_in_the_sdks_shape_and_write_nothing() {
    let server = TestServer::start().await;
    let before = server.agent_count().await;
    let many_tools: Vec<Value> =
        (0..65).map(|index| json!({ "type": "function", "name": format!("t{index}") })).collect();
    let cases: Vec<(Value, u16, &str)> = vec![
        (json!({ "model": "scripted" }), 400, "input is missing"),
        (json!({ "model": "scripted", "input": [] }), 400, "no new user message"),
        (json!({ "model": "scripted", "input": "x".repeat(300 * 1024) }), 413, "content is over"),
        (json!({ "model": "scripted", "input": {"a": 1} }), 400, "input must be"),
        (json!({ "model": "scripted", "input": "x", "tools": many_tools }), 400, "at most 64"),
        (json!({ "model": "nobody/serves-this", "input": "x" }), 400, "nobody"),
        (json!({ "model": "gpt-5.6-luna", "input": "x" }), 400, "gpt-5.6-luna"),
        (json!({ "model": Uuid::new_v4().to_string(), "input": "x" }), 404, "does not exist"),
        (
            json!({ "model": "scripted", "input": "x", "previous_response_id": format!("resp_{}", Uuid::new_v4().simple()) }),
            404,
            "was not found",
        ),
        (
            json!({ "model": "scripted", "input": [{ "type": "message", "id": format!("msg_{}", Uuid::new_v4().simple()), "role": "assistant", "content": "x" }, { "role": "user", "content": "hi" }] }),
            404,
            "not in this server's log",
        ),
        (
            json!({ "model": "scripted", "input": [{ "type": "function_call_output", "call_id": "call_nothing", "output": "x" }] }),
            400,
            "answers a call that waits",
        ),
    ];
    for (body, status, says) in cases {
        let response = server.respond(&body).await;
        assert_eq!(response.status().as_u16(), status, "{body}");
        let error: Value = response.json().await.unwrap();
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{body}: {error}");
        for field in ["type", "param", "code"] {
            assert!(error["error"].get(field).is_some(), "{body}: {error}");
        }
    }
    // Not JSON, and too big: refused before anything is read into an agent.
    let garbage = server
        .http
        .post(server.url("/v1/responses"))
        .header("content-type", "application/json")
        .body("{\"model\": \"scripted\", \"input\": ")
        .sent()
        .await;
    assert_eq!(garbage.status(), 400);
    let huge = "x".repeat(5 * 1024 * 1024);
    let too_big = server.respond(&json!({ "model": "scripted", "input": huge })).await;
    assert_eq!(too_big.status(), 413);
    assert_eq!(server.agent_count().await, before, "a refusal made an agent");

    // Cursors and ids that are not ours.
    let done = server.respond(&json!({ "model": "scripted", "input": "/echo hi" })).await;
    let done: Value = done.json().await.unwrap();
    let id = done["id"].as_str().unwrap();
    for (path, status) in [
        (format!("/v1/responses/{id}?stream=true&starting_after=-1"), 400),
        (format!("/v1/responses/{id}?stream=maybe"), 400),
        (format!("/v1/responses/{id}/input_items?limit=101"), 400),
        (format!("/v1/responses/{id}/input_items?order=sideways"), 400),
        (format!("/v1/responses/{id}/input_items?after=msg_x"), 400),
        ("/v1/responses/resp_x".to_owned(), 404),
        ("/v1/responses/%00".to_owned(), 404),
    ] {
        let response = server.get(&path).await;
        assert_eq!(response.status().as_u16(), status, "{path}");
    }
    // A cursor past the end replays nothing and ends.
    let past = server
        .get(&format!("/v1/responses/{id}?stream=true&starting_after=100000"))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(past.trim(), "data: [DONE]");
    // A response that is its whole conversation goes with its agent; a turn of a longer one
    // cannot leave the log.
    let before = server.agent_count().await;
    let deleted = server.delete(&format!("/v1/responses/{id}")).await;
    assert_eq!(deleted.status(), 200);
    let deleted: Value = deleted.json().await.unwrap();
    assert_eq!(deleted, json!({ "id": id, "object": "response", "deleted": true }));
    assert_eq!(server.get(&format!("/v1/responses/{id}")).await.status(), 404);
    assert_eq!(server.delete(&format!("/v1/responses/{id}")).await.status(), 404);
    assert_eq!(server.agent_count().await, before - 1);
    let first: Value = server
        .respond(&json!({ "model": "scripted", "input": "/echo one" }))
        .await
        .json()
        .await
        .unwrap();
    let second: Value = server
        .respond(&json!({ "model": "scripted", "previous_response_id": first["id"], "input": "/echo two" }))
        .await
        .json()
        .await
        .unwrap();
    for turn in [&first, &second] {
        let refused =
            server.delete(&format!("/v1/responses/{}", turn["id"].as_str().unwrap())).await;
        assert_eq!(refused.status(), 409);
        assert_eq!(refused.headers()["x-should-retry"], "false");
        let error: Value = refused.json().await.unwrap();
        assert!(error["error"]["message"].as_str().unwrap().contains("DELETE /v1/agents/"));
    }
    let still = server.get(&format!("/v1/responses/{}", second["id"].as_str().unwrap())).await;
    assert_eq!(still.status(), 200);
}

#[tokio::test]
async fn a_call_that_waits_is_answered_once_and_a_new_message_waits_for_it() {
    let server = TestServer::start().await;
    let tools = json!([{ "type": "function", "name": "confirm", "parameters": { "type": "object", "properties": {} } }]);
    let asked: Value = server
        .respond(&json!({ "model": "scripted", "input": "/tools confirm", "tools": tools }))
        .await
        .json()
        .await
        .unwrap();
    let call = asked["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["type"] == "function_call")
        .unwrap()
        .clone();
    let agent = asked["agentstream"]["agent_id"].as_str().unwrap();
    // A new message while the call waits: refused, and not to be retried.
    let early = server.respond(&json!({ "model": agent, "input": "never mind" })).await;
    assert_eq!(early.status(), 409);
    assert_eq!(early.headers()["x-should-retry"], "false");
    let answer = json!({ "model": "scripted", "previous_response_id": asked["id"],
        "input": [{ "type": "function_call_output", "call_id": call["call_id"], "output": "ok" }] });
    // Two answers at once: one continues, the other is refused.
    let (first, second) = tokio::join!(server.respond(&answer), server.respond(&answer));
    let mut statuses = [first.status().as_u16(), second.status().as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409]);
    let agent_id: Uuid = agent.parse().unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let results = server
        .all_events(agent_id)
        .await
        .into_iter()
        .filter(|event| event.kind == EventKind::ToolResult)
        .count();
    assert_eq!(results, 1, "one answer in the log");
}
