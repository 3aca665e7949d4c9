//! The Letta-compatible API over real sockets: streams in both cuts, disconnect semantics,
//! resume from `starting_after`, otid idempotency, pings, the message list and Letta-style errors.

use crate::common;
mod requests;

use app::EventKind;
use common::{reply_text, TestServer, WAIT_MAX};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{json, Value};
use uuid::Uuid;

/// One SSE message of a Letta stream: its data as JSON, or `[DONE]` as a string.
#[derive(Debug)]
struct Frame {
    event: String,
    data: Value,
}

/// Reads a Letta SSE response frame by frame.
struct LettaStream {
    frames: std::pin::Pin<Box<dyn futures::Stream<Item = Frame> + Send>>,
}

impl LettaStream {
    fn new(response: reqwest::Response) -> LettaStream {
        assert_eq!(response.status(), 200, "a stream answers 200");
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let frames = response.bytes_stream().eventsource().map(|event| {
            let event = event.expect("the stream is well-formed SSE");
            let data = if event.data == "[DONE]" {
                Value::String(event.data)
            } else {
                serde_json::from_str(&event.data).expect("every data line is JSON or [DONE]")
            };
            Frame { event: event.event, data }
        });
        LettaStream { frames: Box::pin(frames) }
    }

    async fn next(&mut self) -> Option<Frame> {
        tokio::time::timeout(WAIT_MAX, self.frames.next()).await.expect("the stream went quiet")
    }

    /// Every frame up to and including `[DONE]`; asserts the stream ends right after it.
    async fn until_done(&mut self) -> Vec<Frame> {
        let mut frames = Vec::new();
        loop {
            let frame = self.next().await.expect("the stream ended before [DONE]");
            let done = frame.data == "[DONE]";
            frames.push(frame);
            if done {
                assert!(self.next().await.is_none(), "nothing follows [DONE]");
                return frames;
            }
        }
    }
}

fn message_type(frame: &Frame) -> &str {
    frame.data["message_type"].as_str().unwrap_or("")
}

/// The agent's text across `frames`, joined in order.
fn assistant_text(frames: &[Frame]) -> String {
    frames
        .iter()
        .filter(|frame| message_type(frame) == "assistant_message")
        .map(|frame| frame.data["content"].as_str().unwrap())
        .collect()
}

impl TestServer {
    async fn letta_stream(&self, agent_id: Uuid, body: Value) -> LettaStream {
        let response = self.post(&format!("/v1/agents/{agent_id}/messages/stream"), &body).await;
        LettaStream::new(response)
    }

    async fn resume(&self, run_id: &str, starting_after: u64) -> LettaStream {
        let response = self
            .post(
                &format!("/v1/runs/{run_id}/stream"),
                &json!({ "starting_after": starting_after }),
            )
            .await;
        LettaStream::new(response)
    }

    async fn run_status(&self, run_id: &str) -> Value {
        self.get_json(&format!("/v1/runs/{run_id}")).await
    }

    /// Polls `GET /v1/runs/{id}` until the run is no longer running.
    async fn wait_run_status(&self, run_id: &str) -> Value {
        common::wait_until(&format!("run {run_id} to end"), || async {
            let run = self.run_status(run_id).await;
            (run["status"] != "running").then_some(run)
        })
        .await
    }
}

fn user(text: &str) -> Value {
    json!([{ "role": "user", "content": text }])
}

#[tokio::test]
async fn token_stream_fragments_join_to_the_logged_reply_and_carry_letta_fields() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let mut stream = server
        .letta_stream(
            agent_id,
            json!({ "messages": user("/echo one two three four"), "stream_tokens": true }),
        )
        .await;
    let frames = stream.until_done().await;
    let types: Vec<&str> = frames.iter().map(message_type).collect();
    assert_eq!(types.first(), Some(&"user_message"));
    let tail = &types[types.len() - 3..];
    assert_eq!(tail, ["stop_reason", "usage_statistics", ""], "stop_reason, usage, then [DONE]");
    assert_eq!(frames[frames.len() - 3].data["stop_reason"], "end_turn");
    let fragments: Vec<&Frame> =
        frames.iter().filter(|f| message_type(f) == "assistant_message").collect();
    assert!(fragments.len() >= 4, "one fragment per token, got {}", fragments.len());
    let id = &fragments[0].data["id"];
    assert!(
        fragments.iter().all(|f| &f.data["id"] == id),
        "the fragments of one message share its id"
    );

    let run_id = frames[0].data["run_id"].as_str().unwrap().to_owned();
    let log = server.all_events(agent_id).await;
    let run = Uuid::parse_str(&run_id).unwrap();
    assert_eq!(assistant_text(&frames), reply_text(&log, run), "the stream says what the log says");
    assert_eq!(assistant_text(&frames), "one two three four");

    let mut last_seq = 0;
    for frame in frames.iter().filter(|f| !f.data["id"].is_null() && message_type(f) != "ping") {
        for field in ["id", "date", "message_type", "otid", "run_id", "seq_id"] {
            assert!(!frame.data[field].is_null(), "{field} missing in {}", frame.data);
        }
        let seq_id = frame.data["seq_id"].as_u64().unwrap();
        assert!(seq_id > last_seq, "seq_id only goes up");
        last_seq = seq_id;
        assert!(log.iter().any(|event| event.seq == seq_id), "seq_id is a seq of the log");
    }
    assert!(frames.iter().all(|f| f.event == "message"), "no named events on a good stream");
}

#[tokio::test]
async fn step_stream_sends_one_whole_message_per_step() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let mut stream = server
        .letta_stream(
            agent_id,
            json!({ "messages": user("/tools calculator 6*7"), "stream_tokens": false, "include_pings": false }),
        )
        .await;
    let frames = stream.until_done().await;
    let types: Vec<&str> = frames.iter().map(message_type).collect();
    assert_eq!(
        types.iter().filter(|t| **t == "tool_call_message").count(),
        1,
        "one whole tool call: {types:?}"
    );
    let call = frames.iter().find(|f| message_type(f) == "tool_call_message").unwrap();
    assert_eq!(call.data["tool_call"]["name"], "calculator");
    let arguments: Value =
        serde_json::from_str(call.data["tool_call"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments["expression"], "6*7");
    let result = frames.iter().find(|f| message_type(f) == "tool_return_message").unwrap();
    assert_eq!(result.data["status"], "success");
    assert_eq!(result.data["tool_return"], "42");
    assert_eq!(result.data["tool_call_id"], call.data["tool_call"]["tool_call_id"]);
    let texts: Vec<&Frame> =
        frames.iter().filter(|f| message_type(f) == "assistant_message").collect();
    let ids: std::collections::HashSet<_> =
        texts.iter().map(|f| f.data["id"].to_string()).collect();
    assert_eq!(ids.len(), texts.len(), "each assistant message comes whole, once");
}

#[tokio::test]
async fn disconnecting_from_a_foreground_stream_cancels_its_run() {
    let (server, agent_id) = TestServer::start_paced(2000, 5).await.with_agent().await;
    let mut stream = server
        .letta_stream(
            agent_id,
            json!({ "messages": user("talk for a while"), "stream_tokens": true }),
        )
        .await;
    let mut run_id = None;
    for _ in 0..10 {
        let frame = stream.next().await.unwrap();
        run_id = frame.data["run_id"].as_str().map(str::to_owned).or(run_id);
    }
    drop(stream);
    let run = server.wait_run_status(run_id.as_deref().unwrap()).await;
    assert_eq!(run["status"], "cancelled");
    assert_eq!(run["stop_reason"], "cancelled");
    assert_eq!(run["background"], false);
}

#[tokio::test]
async fn a_background_run_survives_disconnect_and_resumes_with_no_gap_and_no_duplicate() {
    let (server, agent_id) = TestServer::start_paced(300, 3).await.with_agent().await;
    for cut in [true, false] {
        let mut stream = server
            .letta_stream(
                agent_id,
                json!({ "messages": user("a long answer please"), "stream_tokens": cut, "background": true }),
            )
            .await;
        let mut first = Vec::new();
        while first.len() < 20 {
            let frame = stream.next().await.unwrap();
            if message_type(&frame) != "ping" {
                first.push(frame);
            }
            if !cut && first.len() >= 2 {
                break;
            }
        }
        drop(stream);
        let run_id = first[0].data["run_id"].as_str().unwrap().to_owned();
        let cursor = first.last().unwrap().data["seq_id"].as_u64().unwrap();
        let run = server.run_status(&run_id).await;
        assert_eq!(run["background"], true);

        let rest = server.resume(&run_id, cursor).await.until_done().await;
        let mut seen = std::collections::HashSet::new();
        for frame in first.iter().chain(rest.iter()) {
            if let Some(seq_id) = frame.data["seq_id"].as_u64() {
                assert!(seen.insert(seq_id), "seq_id {seq_id} delivered twice");
            }
        }
        assert!(rest.iter().filter_map(|f| f.data["seq_id"].as_u64()).all(|seq| seq > cursor));
        let mut joined = first;
        joined.extend(rest);
        let log = server.wait_for_run_end(agent_id, Uuid::parse_str(&run_id).unwrap()).await;
        let run = Uuid::parse_str(&run_id).unwrap();
        assert_eq!(
            assistant_text(&joined),
            reply_text(&log, run),
            "stream_tokens={cut}: resumed text is the whole reply"
        );
        assert_eq!(
            server.run_status(&run_id).await["status"],
            "completed",
            "disconnect did not cancel it"
        );
        let stop = joined.iter().find(|f| message_type(f) == "stop_reason").unwrap();
        assert_eq!(stop.data["stop_reason"], "end_turn");
    }
}

#[tokio::test]
async fn a_retried_send_with_the_same_otid_reattaches_to_the_one_run() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let body = json!({ "messages": [{ "role": "user", "content": "/echo only once", "otid": "otid-7" }], "stream_tokens": true });
    let (first, second) = tokio::join!(
        server.letta_stream(agent_id, body.clone()),
        server.letta_stream(agent_id, body.clone())
    );
    let (mut first, mut second) = (first, second);
    let (first, second) = tokio::join!(first.until_done(), second.until_done());
    let run_of = |frames: &[Frame]| frames[0].data["run_id"].as_str().unwrap().to_owned();
    assert_eq!(run_of(&first), run_of(&second), "both requests see the same run");
    assert_eq!(assistant_text(&first), "only once");
    assert_eq!(assistant_text(&second), "only once");
    // A third, after the run ended, replays it rather than running again.
    let third = server.letta_stream(agent_id, body).await.until_done().await;
    assert_eq!(run_of(&third), run_of(&first));
    let log = server.all_events(agent_id).await;
    assert_eq!(log.iter().filter(|e| e.kind == EventKind::RunStarted).count(), 1);
    assert_eq!(log.iter().filter(|e| e.kind == EventKind::User).count(), 1, "one user message");
    let user = first.iter().find(|f| message_type(f) == "user_message").unwrap();
    assert_eq!(user.data["otid"], "otid-7", "the client's otid is echoed");
}

#[tokio::test]
async fn pings_arrive_while_a_slow_tool_runs() {
    let server = TestServer::start_with(|config| config.letta_ping_interval_ms = 100).await;
    let agent_id = server.create_agent().await;
    let frames = server
        .letta_stream(agent_id, json!({ "messages": user("/tools slow 1"), "include_pings": true }))
        .await
        .until_done()
        .await;
    let call = frames.iter().position(|f| message_type(f) == "tool_call_message").unwrap();
    let result = frames.iter().position(|f| message_type(f) == "tool_return_message").unwrap();
    let pings = frames[call..result].iter().filter(|f| message_type(f) == "ping").count();
    assert!(pings >= 3, "a 1 s tool with 100 ms pings: {pings} pings between call and result");
    let ping = frames.iter().find(|f| message_type(f) == "ping").unwrap();
    assert!(ping.data["id"].is_string() && ping.data["date"].is_string());
    // Without pings asked for, none come.
    let quiet = server
        .letta_stream(
            agent_id,
            json!({ "messages": user("/tools slow 0.5"), "include_pings": false }),
        )
        .await
        .until_done()
        .await;
    assert!(quiet.iter().all(|f| message_type(f) != "ping"));
}
