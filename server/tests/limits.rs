//! Every configurable limit (`config::Limits`), set small and then exceeded: each gives a clear
//! answer, the server stays up, and nothing beyond the limit is written.

use crate::common;

use crate::common::RequestExt;
use app::protocol::{ClientMessage, ServerMessage};
use app::EventKind;
use common::{assert_contiguous, TestServer};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

#[tokio::test]
async fn request_bodies_over_the_limit_get_413() {
    let server = TestServer::start_with(|config| config.limits.request_body_bytes_max = 1024).await;
    let big = json!({ "name": "n".repeat(2000) });
    let response = server.post("/v1/agents", &big).await;
    assert_eq!(response.status(), 413);
    assert_eq!(response.json::<Value>().await.unwrap()["error"]["code"], "body_too_large");
    let small = server.post("/v1/agents", &json!({ "name": "ok" })).await;
    assert_eq!(small.status(), 201);
}

#[tokio::test]
async fn websocket_frames_subscriptions_and_connections_are_bounded() {
    let server = TestServer::start_with(|config| {
        config.limits.ws_message_bytes_max = 256;
        config.limits.ws_subscriptions_per_connection_max = 2;
        config.limits.ws_connections_max = 2;
    })
    .await;
    let agents =
        [server.create_agent().await, server.create_agent().await, server.create_agent().await];
    let mut client = server.connect().await;
    client.subscribe(agents[0], 0).await;
    client.subscribe(agents[1], 0).await;
    client.subscribe(agents[2], 0).await;
    let mut refused = None;
    for _ in 0..3 {
        if let ServerMessage::Error { code, agent_id, .. } = client.receive().await {
            refused = Some((code, agent_id));
        }
    }
    assert_eq!(refused, Some(("too_many_subscriptions".to_owned(), Some(agents[2]))));

    // A second connection is allowed, a third is not.
    let mut second = server.connect().await;
    match tokio_tungstenite::connect_async(&server.ws_url).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 503)
        }
        other => panic!("a third connection was not refused: {:?}", other.map(|_| ())),
    }
    // An oversized frame closes that socket only.
    let big = format!(r#"{{"type":"ping","nonce":"{}"}}"#, "x".repeat(1000));
    let _ = second.stream.send(Message::Text(big.into())).await;
    let next = tokio::time::timeout(common::WAIT_MAX, second.stream.next()).await.unwrap();
    assert!(
        !matches!(next, Some(Ok(Message::Text(_)))),
        "an oversized frame was answered: {next:?}"
    );
    client.send(&ClientMessage::Ping { nonce: None }).await;
    assert_eq!(client.receive().await, ServerMessage::Pong { nonce: None });
    // Its slot is free again.
    drop(second);
    common::wait_until("the closed connection's slot to come back", || async {
        tokio_tungstenite::connect_async(&server.ws_url).await.ok().map(drop)
    })
    .await;
}

#[tokio::test]
async fn pages_are_bounded() {
    let server = TestServer::start_with(|config| config.limits.events_page_limit_max = 5).await;
    let agent = server.create_agent().await;
    let run = server.start_run(agent, "/echo a b c d e f g h").await;
    common::wait_until("the run to complete", || async {
        let run = server.get_json(&format!("/v1/runs/{run}")).await;
        (run["status"] == "completed").then_some(())
    })
    .await;
    let over = server.get(&format!("/v1/agents/{agent}/events?limit=6")).await;
    assert_eq!(over.status(), 400);
    assert_eq!(over.json::<Value>().await.unwrap()["error"]["code"], "limit_too_large");
    let page = server.events_page(agent, 0, 5).await;
    assert_eq!(page.events.len(), 5);
    assert!(page.has_more);
}

#[tokio::test]
async fn a_run_stops_at_its_event_limit_and_still_ends_cleanly() {
    let server = TestServer::start_with(|config| {
        config.limits.run_events_max = 30;
        config.scripted.reply_tokens = 500;
    })
    .await;
    let (agent, _, log) = server.finished_run("talk for a long time").await;
    assert_contiguous(&log, 1);
    assert!(log.len() <= 32, "{} events for a 30-event limit", log.len());
    let end = log.last().unwrap();
    assert_eq!(end.kind, EventKind::RunCompleted);
    assert_eq!(end.content["stop_reason"], "max_events");

    // With a tool running when the limit hits: the call still gets its one result.
    let run = server.start_run(agent, "/tools slow 3; calculator 1+1").await;
    let log = server.wait_for_run_end(agent, run).await;
    let this_run: Vec<_> = log.iter().filter(|e| e.run_id == Some(run)).collect();
    assert_eq!(this_run.last().unwrap().content["stop_reason"], "max_events");
    let calls: Vec<&str> = this_run
        .iter()
        .filter(|e| e.kind == EventKind::ToolCall && e.delta_path.is_none())
        .filter_map(|e| e.content["tool_call_id"].as_str())
        .collect();
    for call in &calls {
        let results = this_run
            .iter()
            .filter(|e| e.kind == EventKind::ToolResult && e.content["tool_call_id"] == *call)
            .count();
        assert_eq!(results, 1, "call {call}");
    }
    // The agent takes the next run as usual.
    let next = server.start_run(agent, "/echo fine").await;
    let log = server.wait_for_run_end(agent, next).await;
    assert_eq!(log.last().unwrap().content["stop_reason"], "end_turn");
}

/// Bytes bound a run as events do: a long reply stops at the byte limit, ends cleanly with
/// `max_bytes`, and what it wrote stays under the limit.
#[tokio::test]
async fn a_run_stops_at_its_byte_limit_and_still_ends_cleanly() {
    const RUN_BYTES_MAX: u64 = 8 * 1024;
    let server = TestServer::start_with(|config| {
        config.limits.run_bytes_max = RUN_BYTES_MAX;
        config.scripted.reply_tokens = 5_000;
    })
    .await;
    let (agent, run, log) = server.finished_run("talk for a long time").await;
    assert_contiguous(&log, 1);
    let end = log.last().unwrap();
    assert_eq!(end.kind, EventKind::RunCompleted);
    assert_eq!(end.content["stop_reason"], "max_bytes");
    let written: usize = log
        .iter()
        .filter(|event| event.run_id == Some(run) && !event.kind.is_run_end())
        .map(|event| {
            event.delta.as_ref().map_or(0, |delta| delta.to_string().len())
                + event.content.to_string().len()
        })
        .sum();
    assert!(written as u64 <= RUN_BYTES_MAX, "{written} bytes written");
    assert!(log.len() < 1_000, "stopped early: {} events", log.len());
    let next = server.start_run(agent, "/echo fine").await;
    let log = server.wait_for_run_end(agent, next).await;
    assert_eq!(log.last().unwrap().content["stop_reason"], "end_turn");
}

#[tokio::test]
async fn long_tool_results_are_cut_and_say_so() {
    let server = TestServer::start_with(|config| config.limits.tool_result_chars_max = 10).await;
    let (_, _, log) = server.finished_run("/tools clock").await;
    let result = log.iter().find(|e| e.kind == EventKind::ToolResult).unwrap();
    let text = result.content["result"].as_str().unwrap();
    assert!(text.chars().count() < 80 && text.contains("[cut"), "{text}");
}

#[tokio::test]
async fn a_one_frame_outbound_buffer_still_delivers_everything() {
    let server = TestServer::start_with(|config| {
        config.limits.subscriber_outbound_frames_max = 1;
        config.hub_room_batches_max = 2;
        config.scripted.reply_tokens = 400;
    })
    .await;
    let agent = server.create_agent().await;
    let mut slow = server.connect_with_small_buffer().await;
    slow.subscribe(agent, 0).await;
    let run = server.start_run(agent, "a long one").await;
    let log = server.wait_for_run_end(agent, run).await;
    let (events, _lagged) = slow.receive_until_run_end().await;
    assert_contiguous(&events, 1);
    assert_eq!(events.len(), log.len());
}

/// SSE streams, native and Letta's, count against `sse_streams_max` like WebSockets do against
/// theirs: past it a new stream is a 503 and starts nothing; a closed stream frees its slot.
#[tokio::test]
async fn sse_streams_are_bounded() {
    let server = TestServer::start_with(|config| config.limits.sse_streams_max = 1).await;
    let agent_id = server.create_agent().await;
    let stream_url = server.url(&format!("/v1/agents/{agent_id}/events/stream"));
    let first = server.http.get(&stream_url).sent().await;
    assert_eq!(first.status(), 200);

    let second = server.http.get(&stream_url).sent().await;
    assert_eq!(second.status(), 503);
    let body: Value = second.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_streams", "{body}");
    let letta = server
        .post(
            &format!("/v1/agents/{agent_id}/messages/stream"),
            &json!({"messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(letta.status(), 503);
    assert!(server.all_events(agent_id).await.is_empty(), "a refused Letta stream started nothing");

    drop(first);
    common::wait_until("the closed stream's slot to be free", || async {
        let again = server.http.get(&stream_url).sent().await;
        (again.status() == 200).then_some(())
    })
    .await;
}

/// A WebSocket is pinged; a peer that stopped reading (half-open, say) answers nothing and is
/// closed after the idle timeout, while one that reads stays open.
#[tokio::test]
async fn a_websocket_that_answers_nothing_is_closed() {
    let server = TestServer::start_with(|config| {
        config.limits.ws_ping_interval_ms = 100;
        config.limits.ws_idle_timeout_ms = 400;
    })
    .await;
    // The silent peer: a bare TCP socket that opens the WebSocket and then reads nothing and
    // answers nothing (a client library would answer pings by itself).
    let address = server.base.trim_start_matches("http://").to_owned();
    let mut silent = tokio::net::TcpStream::connect(&address).await.unwrap();
    let handshake = format!(
        "GET /v1/ws HTTP/1.1\r\nHost: {address}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    tokio::io::AsyncWriteExt::write_all(&mut silent, handshake.as_bytes()).await.unwrap();
    let mut lively = server.connect().await;
    // The lively client reads (and so answers pings) for a while.
    let reading = tokio::time::timeout(std::time::Duration::from_millis(1_200), async {
        while let Some(Ok(_)) = lively.stream.next().await {}
    })
    .await;
    assert!(reading.is_err(), "the reading client was closed");
    lively.send(&ClientMessage::Ping { nonce: None }).await;
    assert_eq!(lively.receive().await, ServerMessage::Pong { nonce: None });

    // The silent one got pings, then a close frame (1001), then the end of the connection.
    let mut bytes = Vec::new();
    tokio::time::timeout(
        common::WAIT_MAX,
        tokio::io::AsyncReadExt::read_to_end(&mut silent, &mut bytes),
    )
    .await
    .expect("the silent socket was not closed")
    .unwrap();
    let start = bytes
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .expect("the upgrade was answered")
        + 4;
    assert!(bytes.starts_with(b"HTTP/1.1 101"), "{:?}", String::from_utf8_lossy(&bytes));
    // Server frames are unmasked and short here: [FIN|opcode, length, payload…].
    let mut frames = Vec::new();
    let mut at = start;
    while at + 2 <= bytes.len() {
        let (opcode, length) = (bytes[at] & 0x0f, (bytes[at + 1] & 0x7f) as usize);
        frames.push((opcode, bytes[at + 2..at + 2 + length].to_vec()));
        at += 2 + length;
    }
    let pings = frames.iter().filter(|(opcode, _)| *opcode == 0x9).count();
    assert!(pings >= 2, "pinged before it was closed: {frames:?}");
    let (opcode, payload) = frames.last().expect("frames");
    assert_eq!(*opcode, 0x8, "the last frame closes: {frames:?}");
    assert_eq!(u16::from_be_bytes([payload[0], payload[1]]), 1001);
    let reason = String::from_utf8_lossy(&payload[2..]);
    assert!(reason.contains("nothing received"), "{reason}");
}

/// A body sent a byte at a time (or never finished) is answered 408 once its read deadline
/// passes, on every route that reads a whole body — also those that wait for a run's end and
/// sit outside the request timeout. Streamed NDJSON bodies keep their idle bound instead.
#[tokio::test]
async fn trickled_bodies_are_cut_at_their_read_deadline() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const DEADLINE_MS: u64 = 400;
    let server =
        TestServer::start_with(|config| config.limits.body_read_ms_max = DEADLINE_MS).await;
    let agent_id = server.create_agent().await;
    let address = server.base.trim_start_matches("http://").to_owned();
    let paths = [
        format!("/v1/agents/{agent_id}/produce"),
        "/v1/streams/slow/one".to_owned(),
        "/v1/ai-sdk/chat".to_owned(),
        "/v1/ag-ui".to_owned(),
        format!("/v1/agents/{agent_id}/messages"),
        format!("/v1/agents/{agent_id}/messages/stream"),
    ];
    for path in paths {
        let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Producer-Id: p\r\nProducer-Epoch: 0\r\nProducer-Seq: 0\r\nContent-Length: 1000\r\n\r\n["
        );
        socket.write_all(head.as_bytes()).await.unwrap();
        let started = std::time::Instant::now();
        // A byte now and then: never silent, never done.
        let mut answer = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            tokio::select! {
                read = socket.read(&mut buffer) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(count) => {
                        answer.extend_from_slice(&buffer[..count]);
                        if answer.windows(4).any(|window| window == b"\r\n\r\n") { break; }
                    }
                },
                () = tokio::time::sleep(std::time::Duration::from_millis(50)) => {
                    if socket.write_all(b" ").await.is_err() { break; }
                }
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "{path}: still reading a trickled body after 10 s"
            );
        }
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            answer.starts_with("HTTP/1.1 408"),
            "{path}: {answer:?} after {:?}",
            started.elapsed()
        );
    }
    // A streamed producer body that sends a line within its idle bound goes on past the
    // deadline.
    let (sender, body) = common::streamed_body();
    let request = server
        .producer(agent_id, ("streamer", 0, 0))
        .header("Content-Type", "application/x-ndjson")
        .body(body)
        .send();
    let lines = async move {
        let mut batches = vec![json!([{ "kind": "run_started" }])];
        for _ in 0..6 {
            batches.push(json!([{ "kind": "text", "message_id": "0190d0c0-0000-7000-8000-00000000000a", "delta": "x", "delta_action": "append" }]));
        }
        batches.push(json!([{ "kind": "run_completed" }]));
        for batch in batches {
            tokio::time::sleep(std::time::Duration::from_millis(DEADLINE_MS / 4)).await;
            sender.send(Ok(format!("{batch}\n"))).await.unwrap();
        }
    };
    let (response, ()) = tokio::join!(request, lines);
    let response = response.unwrap();
    assert_eq!(response.status(), 200, "{:?}", response.text().await);
}
