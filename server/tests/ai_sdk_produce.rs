//! The AI SDK stream piped in (`POST /v1/ai-sdk/chat/{id}/produce`) over real sockets: an SSE
//! body as `toUIMessageStreamResponse()` writes it becomes a run of the chat's agent, resumable
//! while it streams and in the chat's history after; a broken stream without producer headers
//! ends its run at once; a refused chunk is named.

use crate::common;

use std::time::Duration;

use crate::common::RequestExt;
use app::EventKind;
use common::{wait_until, TestServer};
use serde_json::{json, Value};

fn sse(chunks: &[Value]) -> String {
    let mut body: String = chunks.iter().map(|chunk| format!("data: {chunk}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    body
}

fn reply(words: &[&str]) -> Vec<Value> {
    let mut chunks = vec![
        json!({ "type": "start", "messageId": "app-msg-1" }),
        json!({ "type": "start-step" }),
        json!({ "type": "text-start", "id": "t" }),
    ];
    chunks
        .extend(words.iter().map(|word| json!({ "type": "text-delta", "id": "t", "delta": word })));
    chunks.extend([
        json!({ "type": "text-end", "id": "t" }),
        json!({ "type": "finish-step" }),
        json!({ "type": "finish", "finishReason": "stop" }),
    ]);
    chunks
}

#[tokio::test]
async fn a_piped_stream_becomes_the_chats_run_and_history() {
    let server = TestServer::start().await;
    let response = server
        .http
        .post(server.url("/v1/ai-sdk/chat/piped-chat/produce"))
        .header("Content-Type", "text/event-stream")
        .header("Agentstream-User-Text", "tell%20me%20%E2%9C%93")
        .body(sse(&reply(&["Hello", " from", " my", " backend"])))
        .sent()
        .await;
    assert_eq!(response.status(), 200);
    let summary: Value = response.json().await.unwrap();
    assert_eq!(summary["finished"], true, "{summary}");
    assert_eq!(summary["chunks"], 10);
    let messages = server.get_json("/v1/ai-sdk/chat/piped-chat/messages").await;
    let roles: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant"], "{messages}");
    let text = messages.to_string();
    assert!(text.contains("tell me ✓") && text.contains("Hello from my backend"), "{text}");
    // A second stream in the same chat is the next run.
    let again = server
        .http
        .post(server.url("/v1/ai-sdk/chat/piped-chat/produce"))
        .header("Content-Type", "application/x-ndjson")
        .body(reply(&["second"]).iter().map(|chunk| format!("{chunk}\n")).collect::<String>())
        .sent()
        .await;
    assert_eq!(again.status(), 200);
    let messages = server.get_json("/v1/ai-sdk/chat/piped-chat/messages").await;
    assert_eq!(messages.as_array().unwrap().len(), 3, "{messages}");
}

#[tokio::test]
async fn a_stream_in_flight_is_resumed_by_use_chat_and_a_broken_one_ends_its_run() {
    let server = TestServer::start().await;
    let (lines, body) = common::streamed_body();
    let request = server
        .http
        .post(server.url("/v1/ai-sdk/chat/live-chat/produce"))
        .header("Content-Type", "text/event-stream")
        .body(body)
        .send();
    let answer = tokio::spawn(request);
    let chunks = reply(&["partial", " answer"]);
    for chunk in &chunks[..5] {
        lines.send(Ok(format!("data: {chunk}\n\n"))).await.unwrap();
    }
    // useChat's resume reads the run in flight from its start.
    let resumed = wait_until("the piped run to be in flight", || async {
        let response = server.get("/v1/ai-sdk/chat/live-chat/stream").await;
        (response.status() == 200).then_some(response)
    })
    .await;
    let mut body = resumed.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("answer") {
        let piece =
            tokio::time::timeout(Duration::from_secs(10), futures::StreamExt::next(&mut body))
                .await
                .expect("the resumed stream goes on live")
                .unwrap()
                .unwrap();
        seen.push_str(&String::from_utf8_lossy(&piece));
    }
    assert!(seen.contains("\"type\":\"start\"") && seen.contains("partial"), "{seen}");
    // The backend dies mid-stream: without producer headers nobody can send the rest, so the
    // run ends at once, interrupted, and the resumed client is told.
    drop(lines);
    let answer = answer.await.unwrap().unwrap();
    assert_eq!(answer.status(), 200);
    let summary: Value = answer.json().await.unwrap();
    assert_eq!(summary["finished"], false, "{summary}");
    while !seen.contains("\"type\":\"finish\"") {
        let piece =
            tokio::time::timeout(Duration::from_secs(10), futures::StreamExt::next(&mut body))
                .await
                .expect("the resumed stream ends")
                .unwrap()
                .unwrap();
        seen.push_str(&String::from_utf8_lossy(&piece));
    }
    assert!(seen.contains("\"type\":\"error\""), "{seen}");
    let agent_id = summary["agent_id"].as_str().unwrap().parse().unwrap();
    let events = server.all_events(agent_id).await;
    let end = events.last().unwrap();
    assert_eq!(end.kind, EventKind::RunFailed);
    assert_eq!(end.content["error"]["type"], "interrupted");
}

#[tokio::test]
async fn a_chunk_that_breaks_the_protocol_is_named_and_its_run_ended() {
    let server = TestServer::start().await;
    let mut chunks = reply(&["ok"]);
    chunks
        .insert(4, json!({ "type": "tool-output-available", "toolCallId": "ghost", "output": 1 }));
    let response = server
        .http
        .post(server.url("/v1/ai-sdk/chat/bad-chat/produce"))
        .header("Content-Type", "text/event-stream")
        .body(sse(&chunks))
        .sent()
        .await;
    assert_eq!(response.status(), 422);
    let body: Value = response.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("chunk 4") && message.contains("\"ghost\""), "{message}");
    let bad_text = server
        .http
        .post(server.url("/v1/ai-sdk/chat/bad-chat/produce"))
        .header("Agentstream-User-Text", "%FF%FE")
        .body(sse(&reply(&["x"])))
        .sent()
        .await;
    assert_eq!(bad_text.status(), 400);
    // The refused stream's run was ended; the chat takes the next one.
    let next = server
        .http
        .post(server.url("/v1/ai-sdk/chat/bad-chat/produce"))
        .body(sse(&reply(&["fine"])))
        .sent()
        .await;
    assert_eq!(next.status(), 200);
}

/// Two pipes into one chat at once, neither with producer headers: the second is refused while
/// the first's run is open, and its refusal leaves the first's run alone.
#[tokio::test]
async fn a_second_pipe_into_a_busy_chat_is_refused_and_leaves_the_first_alone() {
    let server = TestServer::start().await;
    let (lines, body) = common::streamed_body();
    let first = tokio::spawn(
        server
            .http
            .post(server.url("/v1/ai-sdk/chat/busy-chat/produce"))
            .header("Content-Type", "text/event-stream")
            .body(body)
            .send(),
    );
    let chunks = reply(&["first", " stream"]);
    for chunk in &chunks[..4] {
        lines.send(Ok(format!("data: {chunk}\n\n"))).await.unwrap();
    }
    wait_until("the first pipe's run to be in flight", || async {
        let response = server.get("/v1/ai-sdk/chat/busy-chat/stream").await;
        (response.status() == 200).then_some(())
    })
    .await;
    let second = server
        .http
        .post(server.url("/v1/ai-sdk/chat/busy-chat/produce"))
        .header("Content-Type", "text/event-stream")
        .body(sse(&reply(&["second"])))
        .sent()
        .await;
    assert_eq!(second.status(), 422, "{}", second.text().await.unwrap());
    for chunk in &chunks[4..] {
        lines.send(Ok(format!("data: {chunk}\n\n"))).await.unwrap();
    }
    lines.send(Ok("data: [DONE]\n\n".into())).await.unwrap();
    drop(lines);
    let first = first.await.unwrap().unwrap();
    assert_eq!(first.status(), 200, "the first pipe's run went on");
    let summary: Value = first.json().await.unwrap();
    assert_eq!(summary["finished"], true, "{summary}");
    let messages = server.get_json("/v1/ai-sdk/chat/busy-chat/messages").await;
    assert!(messages.to_string().contains("first stream"), "{messages}");
}
