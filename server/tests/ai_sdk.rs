//! The AI SDK's UI message stream over real sockets, on the configured store: a chat's stream
//! and its retry, the chat id's agent, resume with and without a cursor, long conversations,
//! and refusals that write nothing. (The official client is exercised in
//! end2end/tests/ai-sdk.spec.ts.)

use crate::common;

use crate::common::RequestExt;
use common::{reply_text, TestServer, WAIT_MAX};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{json, Value};
use uuid::Uuid;

/// One frame: its `id:` (`<seq>` or `<seq>:<k>`; `[DONE]` carries none, so the client's last
/// id stays) and its data (a chunk, or `[DONE]`).
#[derive(Debug, Clone, PartialEq)]
struct Frame {
    id: String,
    data: Value,
}

/// A frame id's place in the stream: (seq, the chunk's index in its event, the last = MAX).
fn place(id: &str) -> (u64, usize) {
    match id.split_once(':') {
        Some((seq, index)) => (seq.parse().unwrap(), index.parse().unwrap()),
        None => (id.parse().unwrap(), usize::MAX),
    }
}

/// Every frame of a UI message stream, up to `[DONE]` (or only the first `count`).
async fn frames(response: reqwest::Response, count: Option<usize>) -> Vec<Frame> {
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(headers["x-vercel-ai-ui-message-stream"], "v1");
    assert_eq!(headers["x-accel-buffering"], "no");
    let mut events = Box::pin(response.bytes_stream().eventsource());
    let mut frames = Vec::new();
    while count.is_none_or(|count| frames.len() < count) {
        let event = tokio::time::timeout(WAIT_MAX, events.next())
            .await
            .expect("the stream went quiet")
            .expect("the stream ended before [DONE]")
            .expect("well-formed SSE");
        let data = match event.data.as_str() {
            "[DONE]" => json!("[DONE]"),
            data => serde_json::from_str(data).expect("every frame is JSON or [DONE]"),
        };
        let done = data == "[DONE]";
        frames.push(Frame { id: event.id, data });
        if done {
            break;
        }
    }
    frames
}

fn text(frames: &[Frame]) -> String {
    frames
        .iter()
        .filter(|frame| frame.data["type"] == "text-delta")
        .map(|frame| frame.data["delta"].as_str().unwrap())
        .collect()
}

fn body(chat: &str, message_id: &str, text: &str) -> Value {
    json!({
        "id": chat,
        "trigger": "submit-message",
        "messages": [{ "id": message_id, "role": "user", "parts": [{ "type": "text", "text": text }] }],
    })
}

impl TestServer {
    async fn chat(&self, body: &Value) -> reqwest::Response {
        let url = self.url("/v1/ai-sdk/chat");
        self.http.post(url).json(body).sent().await
    }
}

#[tokio::test]
async fn a_chat_streams_its_run_and_a_retry_writes_nothing_twice() {
    let server = TestServer::start().await;
    let first = frames(server.chat(&body("my-chat", "m1", "hello")).await, None).await;
    assert_eq!(first.last().unwrap().data, "[DONE]");
    let start = &first[0].data;
    assert_eq!(start["type"], "start");
    let run_id: Uuid = start["messageId"].as_str().unwrap().parse().unwrap();
    let agent_id: Uuid = start["messageMetadata"]["agent_id"].as_str().unwrap().parse().unwrap();
    let events = server.all_events(agent_id).await;
    assert_eq!(text(&first), reply_text(&events, run_id));
    assert!(!text(&first).is_empty());
    let places: Vec<(u64, usize)> =
        first[..first.len() - 1].iter().map(|frame| place(&frame.id)).collect();
    assert!(places.windows(2).all(|pair| pair[0] < pair[1]), "{places:?}");
    assert_eq!(first[first.len() - 2].data["type"], "finish");

    // The same message again: the same run's stream, and nothing more in the log.
    let retry = frames(server.chat(&body("my-chat", "m1", "hello")).await, None).await;
    assert_eq!(retry, first);
    assert_eq!(server.all_events(agent_id).await.len(), events.len());

    // The chat id keeps its agent; the agent's id names the same chat.
    let next = frames(server.chat(&body("my-chat", "m2", "again")).await, None).await;
    assert_eq!(next[0].data["messageMetadata"]["agent_id"], json!(agent_id));
    let by_agent =
        frames(server.chat(&body(&agent_id.to_string(), "m3", "third")).await, None).await;
    assert_eq!(by_agent[0].data["messageMetadata"]["agent_id"], json!(agent_id));
    let history = server.get_json("/v1/ai-sdk/chat/my-chat/messages").await;
    let ids: Vec<&str> =
        history.as_array().unwrap().iter().map(|message| message["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 6);
    assert_eq!((ids[0], ids[2], ids[4]), ("m1", "m2", "m3"));
    assert_eq!(ids[1], run_id.to_string());
    assert_eq!(server.agent_count().await, 1);
}

#[tokio::test]
async fn resume_replays_the_run_in_flight_and_a_cursor_skips_what_the_client_has() {
    let server = TestServer::start_paced(120, 10).await;
    assert_eq!(server.get("/v1/ai-sdk/chat/quiet/stream").await.status(), 204, "nothing in flight");
    let seen = frames(server.chat(&body("busy", "m1", "hello")).await, Some(12)).await;
    // The client went away; the run goes on.
    let stream_url = server.url("/v1/ai-sdk/chat/busy/stream");
    let replay = frames(server.http.get(&stream_url).sent().await, None).await;
    assert_eq!(&replay[..seen.len()], &seen[..], "replayed from the start");
    let finish = &replay[replay.len() - 2].data;
    assert_eq!(finish["type"], "finish");
    assert_eq!(finish.get("finishReason"), None, "ai < 5.0.92 refuses it");
    let run_id: Uuid = replay[0].data["messageId"].as_str().unwrap().parse().unwrap();
    let agent_id: Uuid =
        replay[0].data["messageMetadata"]["agent_id"].as_str().unwrap().parse().unwrap();
    assert_eq!(text(&replay), reply_text(&server.all_events(agent_id).await, run_id));

    // With a cursor, during the next run: what follows the cursor, exactly.
    let seen = frames(server.chat(&body("busy", "m2", "more")).await, Some(15)).await;
    let cursor = seen.last().unwrap().id.clone();
    let rest =
        frames(server.http.get(&stream_url).header("last-event-id", cursor).sent().await, None)
            .await;
    let whole = frames(server.chat(&body("busy", "m2", "more")).await, None).await;
    let joined: Vec<Frame> = seen.iter().chain(&rest).cloned().collect();
    assert_eq!(joined, whole);

    let bad = server.http.get(&stream_url).header("last-event-id", "soon").sent().await;
    assert_eq!(bad.status(), 400);
}

#[tokio::test]
async fn a_long_conversation_is_taken_and_refused_requests_write_nothing() {
    let server = TestServer::start().await;
    // The transport sends the whole conversation each time: 300 earlier messages of 4 KiB.
    let earlier: Vec<Value> = (0..300)
        .map(|index| {
            json!({ "id": format!("old{index}"), "role": if index % 2 == 0 { "user" } else { "assistant" },
                    "parts": [{ "type": "text", "text": "x".repeat(4096) }] })
        })
        .collect();
    let mut long = body("long", "new", "the newest question");
    let mut messages = earlier.clone();
    messages.push(long["messages"][0].clone());
    long["messages"] = json!(messages);
    let answered = frames(server.chat(&long).await, None).await;
    assert_eq!(answered.last().unwrap().data, "[DONE]");
    let history = server.get_json("/v1/ai-sdk/chat/long/messages").await;
    assert_eq!(history.as_array().unwrap().len(), 2, "only the new message is input");
    assert_eq!(history[0]["parts"][0]["text"], "the newest question");

    let agents = server.agent_count().await;
    let oversized = {
        let mut oversized = body("fresh", "m1", "hi");
        let mut messages: Vec<Value> = (0..1100)
            .map(|index| json!({ "id": format!("o{index}"), "role": "user", "parts": [{ "type": "text", "text": "y".repeat(4096) }] }))
            .collect();
        messages.push(oversized["messages"][0].clone());
        oversized["messages"] = json!(messages);
        oversized
    };
    let too_long_text = body("fresh", "m1", &"z".repeat(40 * 1024));
    let mut regenerate = body("fresh", "m1", "hi");
    regenerate["trigger"] = json!("regenerate-message");
    let cases: [(Value, u16, &str); 5] = [
        (regenerate, 422, "invalid_body"),
        (oversized, 413, ""),
        (too_long_text, 413, "content_too_large"),
        (
            json!({ "id": "fresh", "messages": [], "trigger": "submit-message" }),
            422,
            "invalid_body",
        ),
        (
            json!({ "id": "fresh", "messages": [{ "id": "m1", "role": "user", "parts": [{ "type": "text", "text": "hi" }] }], "trigger": "nope" }),
            422,
            "invalid_body",
        ),
    ];
    for (request, status, code) in cases {
        let response = server.chat(&request).await;
        assert_eq!(response.status(), status);
        let error: Value = response.json().await.unwrap();
        assert!(error["error"]["message"].as_str().is_some_and(|message| !message.is_empty()));
        if !code.is_empty() {
            assert_eq!(error["error"]["code"], code);
        }
    }
    assert_eq!(server.agent_count().await, agents, "no chat was given an agent");
    assert_eq!(server.get_json("/v1/ai-sdk/chat/fresh/messages").await, json!([]));
    let stop = server.http.post(server.url("/v1/ai-sdk/chat/fresh/stop")).sent().await;
    assert_eq!(stop.status(), 404);
}
