//! The Letta-compatible API over real sockets: streams in both cuts, disconnect semantics,
//! resume from `starting_after`, otid idempotency, pings, the message list and Letta-style errors.

mod common;

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
            Frame {
                event: event.event,
                data,
            }
        });
        LettaStream {
            frames: Box::pin(frames),
        }
    }

    async fn next(&mut self) -> Option<Frame> {
        tokio::time::timeout(WAIT_MAX, self.frames.next())
            .await
            .expect("the stream went quiet")
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
        let response = self
            .http
            .post(self.url(&format!("/v1/agents/{agent_id}/messages/stream")))
            .json(&body)
            .send()
            .await
            .unwrap();
        LettaStream::new(response)
    }

    async fn resume(&self, run_id: &str, starting_after: u64) -> LettaStream {
        let response = self
            .http
            .post(self.url(&format!("/v1/runs/{run_id}/stream")))
            .json(&json!({ "starting_after": starting_after }))
            .send()
            .await
            .unwrap();
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
    let server = TestServer::start().await;
    let agent_id = server.create_agent().await;
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
    assert_eq!(
        tail,
        ["stop_reason", "usage_statistics", ""],
        "stop_reason, usage, then [DONE]"
    );
    assert_eq!(frames[frames.len() - 3].data["stop_reason"], "end_turn");
    let fragments: Vec<&Frame> = frames
        .iter()
        .filter(|f| message_type(f) == "assistant_message")
        .collect();
    assert!(
        fragments.len() >= 4,
        "one fragment per token, got {}",
        fragments.len()
    );
    let id = &fragments[0].data["id"];
    assert!(
        fragments.iter().all(|f| &f.data["id"] == id),
        "the fragments of one message share its id"
    );

    let run_id = frames[0].data["run_id"].as_str().unwrap().to_owned();
    let log = server.all_events(agent_id).await;
    let run = Uuid::parse_str(&run_id).unwrap();
    assert_eq!(
        assistant_text(&frames),
        reply_text(&log, run),
        "the stream says what the log says"
    );
    assert_eq!(assistant_text(&frames), "one two three four");

    let mut last_seq = 0;
    for frame in frames
        .iter()
        .filter(|f| !f.data["id"].is_null() && message_type(f) != "ping")
    {
        for field in ["id", "date", "message_type", "otid", "run_id", "seq_id"] {
            assert!(
                !frame.data[field].is_null(),
                "{field} missing in {}",
                frame.data
            );
        }
        let seq_id = frame.data["seq_id"].as_u64().unwrap();
        assert!(seq_id > last_seq, "seq_id only goes up");
        last_seq = seq_id;
        assert!(
            log.iter().any(|event| event.seq == seq_id),
            "seq_id is a seq of the log"
        );
    }
    assert!(
        frames.iter().all(|f| f.event == "message"),
        "no named events on a good stream"
    );
}

#[tokio::test]
async fn step_stream_sends_one_whole_message_per_step() {
    let server = TestServer::start().await;
    let agent_id = server.create_agent().await;
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
    let call = frames
        .iter()
        .find(|f| message_type(f) == "tool_call_message")
        .unwrap();
    assert_eq!(call.data["tool_call"]["name"], "calculator");
    let arguments: Value =
        serde_json::from_str(call.data["tool_call"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments["expression"], "6*7");
    let result = frames
        .iter()
        .find(|f| message_type(f) == "tool_return_message")
        .unwrap();
    assert_eq!(result.data["status"], "success");
    assert_eq!(result.data["tool_return"], "42");
    assert_eq!(
        result.data["tool_call_id"],
        call.data["tool_call"]["tool_call_id"]
    );
    let texts: Vec<&Frame> = frames
        .iter()
        .filter(|f| message_type(f) == "assistant_message")
        .collect();
    let ids: std::collections::HashSet<_> =
        texts.iter().map(|f| f.data["id"].to_string()).collect();
    assert_eq!(
        ids.len(),
        texts.len(),
        "each assistant message comes whole, once"
    );
}

#[tokio::test]
async fn disconnecting_from_a_foreground_stream_cancels_its_run() {
    let server = TestServer::start_paced(2000, 5).await;
    let agent_id = server.create_agent().await;
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
    let server = TestServer::start_paced(300, 3).await;
    let agent_id = server.create_agent().await;
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
        assert!(rest
            .iter()
            .filter_map(|f| f.data["seq_id"].as_u64())
            .all(|seq| seq > cursor));
        let mut joined = first;
        joined.extend(rest);
        let log = server
            .wait_for_run_end(agent_id, Uuid::parse_str(&run_id).unwrap())
            .await;
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
        let stop = joined
            .iter()
            .find(|f| message_type(f) == "stop_reason")
            .unwrap();
        assert_eq!(stop.data["stop_reason"], "end_turn");
    }
}

#[tokio::test]
async fn a_retried_send_with_the_same_otid_reattaches_to_the_one_run() {
    let server = TestServer::start().await;
    let agent_id = server.create_agent().await;
    let body = json!({ "messages": [{ "role": "user", "content": "/echo only once", "otid": "otid-7" }], "stream_tokens": true });
    let (first, second) = tokio::join!(
        server.letta_stream(agent_id, body.clone()),
        server.letta_stream(agent_id, body.clone())
    );
    let (mut first, mut second) = (first, second);
    let (first, second) = tokio::join!(first.until_done(), second.until_done());
    let run_of = |frames: &[Frame]| frames[0].data["run_id"].as_str().unwrap().to_owned();
    assert_eq!(
        run_of(&first),
        run_of(&second),
        "both requests see the same run"
    );
    assert_eq!(assistant_text(&first), "only once");
    assert_eq!(assistant_text(&second), "only once");
    // A third, after the run ended, replays it rather than running again.
    let third = server.letta_stream(agent_id, body).await.until_done().await;
    assert_eq!(run_of(&third), run_of(&first));
    let log = server.all_events(agent_id).await;
    assert_eq!(
        log.iter()
            .filter(|e| e.kind == EventKind::RunStarted)
            .count(),
        1
    );
    assert_eq!(
        log.iter().filter(|e| e.kind == EventKind::User).count(),
        1,
        "one user message"
    );
    let user = first
        .iter()
        .find(|f| message_type(f) == "user_message")
        .unwrap();
    assert_eq!(user.data["otid"], "otid-7", "the client's otid is echoed");
}

#[tokio::test]
async fn pings_arrive_while_a_slow_tool_runs() {
    let server = TestServer::start_with(|config| config.letta_ping_interval_ms = 100).await;
    let agent_id = server.create_agent().await;
    let frames = server
        .letta_stream(
            agent_id,
            json!({ "messages": user("/tools slow 1"), "include_pings": true }),
        )
        .await
        .until_done()
        .await;
    let call = frames
        .iter()
        .position(|f| message_type(f) == "tool_call_message")
        .unwrap();
    let result = frames
        .iter()
        .position(|f| message_type(f) == "tool_return_message")
        .unwrap();
    let pings = frames[call..result]
        .iter()
        .filter(|f| message_type(f) == "ping")
        .count();
    assert!(
        pings >= 3,
        "a 1 s tool with 100 ms pings: {pings} pings between call and result"
    );
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

#[tokio::test]
async fn non_streaming_send_answers_when_the_run_ends_and_the_list_reads_it_back() {
    let server = TestServer::start().await;
    let agent_id = server.create_agent().await;
    let response = server
        .post_json(
            &format!("/v1/agents/{agent_id}/messages"),
            &json!({ "messages": user("/echo hello there") }),
        )
        .await;
    let messages = response["messages"].as_array().unwrap();
    let types: Vec<&str> = messages
        .iter()
        .map(|m| m["message_type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["reasoning_message", "assistant_message"],
        "{response}"
    );
    assert_eq!(messages[1]["content"], "hello there");
    assert_eq!(response["stop_reason"]["stop_reason"], "end_turn");
    assert!(response["usage"]["total_tokens"].as_u64().is_some());

    server
        .http
        .post(server.url(&format!("/v1/agents/{agent_id}/messages")))
        .json(&json!({ "input": "/echo second turn" }))
        .send()
        .await
        .unwrap();
    let list = |query: &str| {
        let url = server.url(&format!("/v1/agents/{agent_id}/messages{query}"));
        let http = server.http.clone();
        async move {
            http.get(url)
                .send()
                .await
                .unwrap()
                .json::<Vec<Value>>()
                .await
                .unwrap()
        }
    };
    // What a reader of the conversation sees: user and assistant messages (reasoning aside).
    let said = |messages: &[Value]| -> Vec<String> {
        messages
            .iter()
            .filter(|m| m["message_type"] != "reasoning_message")
            .map(|m| m["content"].as_str().unwrap().to_owned())
            .collect()
    };
    let newest_first = list("").await;
    assert_eq!(
        said(&newest_first),
        [
            "second turn",
            "/echo second turn",
            "hello there",
            "/echo hello there"
        ]
    );
    let oldest_first = list("?order=asc&limit=3").await;
    assert_eq!(oldest_first[0]["message_type"], "user_message");
    assert_eq!(said(&oldest_first), ["/echo hello there", "hello there"]);
    let after = oldest_first[2]["id"].as_str().unwrap();
    let next = list(&format!("?order=asc&limit=3&after={after}")).await;
    assert_eq!(said(&next), ["/echo second turn", "second turn"]);
    let before = list(&format!("?order=asc&before={after}")).await;
    assert_eq!(before.len(), 2);
    let everything = list("?limit=1000").await;
    assert_eq!(
        everything.len(),
        6,
        "two turns: user, reasoning, assistant each"
    );
}

#[tokio::test]
async fn cancel_ends_a_streaming_run_with_stop_reason_cancelled() {
    let server = TestServer::start_paced(2000, 5).await;
    let agent_id = server.create_agent().await;
    let mut stream = server
        .letta_stream(
            agent_id,
            json!({ "messages": user("go on"), "stream_tokens": true, "background": true }),
        )
        .await;
    let first = stream.next().await.unwrap();
    let run_id = first.data["run_id"].as_str().unwrap().to_owned();
    let response = server
        .post_json(
            &format!("/v1/agents/{agent_id}/messages/cancel"),
            &json!({ "run_ids": [run_id] }),
        )
        .await;
    assert_eq!(response["cancelled_run_ids"][0], run_id.as_str());
    let rest = stream.until_done().await;
    let stop = rest
        .iter()
        .find(|f| message_type(f) == "stop_reason")
        .unwrap();
    assert_eq!(stop.data["stop_reason"], "cancelled");
}

#[tokio::test]
async fn bad_letta_requests_get_letta_style_errors_and_change_nothing() {
    let server = TestServer::start().await;
    let agent_id = server.create_agent().await;
    let unknown = Uuid::new_v4();
    let post = |path: String, body: &'static str| {
        let request = server
            .http
            .post(server.url(&path))
            .header("content-type", "application/json")
            .body(body);
        async move { request.send().await.unwrap() }
    };
    let cases = [
        (
            post(format!("/v1/runs/{unknown}/stream"), "{}").await,
            404,
            "unknown_run",
        ),
        (
            post("/v1/runs/not-a-run/stream".into(), "{}").await,
            400,
            "invalid_id",
        ),
        (
            post(
                format!("/v1/agents/{agent_id}/messages/stream"),
                "{\"messages\": [",
            )
            .await,
            400,
            "malformed_json",
        ),
        (
            post(
                format!("/v1/agents/{agent_id}/messages/stream"),
                "{\"messages\": 5}",
            )
            .await,
            422,
            "invalid_body",
        ),
        (
            post(format!("/v1/agents/{agent_id}/messages"), "{}").await,
            422,
            "invalid_body",
        ),
        (
            post(
                format!("/v1/agents/{agent_id}/messages"),
                r#"{"messages":[{"role":"system","content":"x"}]}"#,
            )
            .await,
            422,
            "invalid_body",
        ),
        (
            post(
                format!("/v1/agents/{agent_id}/messages"),
                r#"{"messages":[{"role":"user","content":[{"type":"image"}]}]}"#,
            )
            .await,
            422,
            "invalid_body",
        ),
        (
            post(
                format!("/v1/agents/{unknown}/messages/stream"),
                r#"{"input":"hi"}"#,
            )
            .await,
            404,
            "unknown_agent",
        ),
        (
            server
                .http
                .get(server.url(&format!(
                    "/v1/agents/{agent_id}/messages?after=message-nope"
                )))
                .send()
                .await
                .unwrap(),
            400,
            "invalid_cursor",
        ),
        (
            server
                .http
                .get(server.url(&format!("/v1/agents/{agent_id}/messages?order=sideways")))
                .send()
                .await
                .unwrap(),
            400,
            "invalid_query",
        ),
    ];
    for (response, status, code) in cases {
        assert_eq!(response.status().as_u16(), status);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "{body}");
        assert!(
            body["detail"]
                .as_str()
                .is_some_and(|detail| !detail.is_empty()),
            "Letta clients read `detail`: {body}"
        );
    }
    // A bad cursor on a real run.
    let frames = server
        .letta_stream(agent_id, json!({ "input": "/echo ok" }))
        .await
        .until_done()
        .await;
    let run_id = frames[0].data["run_id"].as_str().unwrap();
    let response = post(
        format!("/v1/runs/{run_id}/stream"),
        r#"{"starting_after": 999999}"#,
    )
    .await;
    assert_eq!(response.status(), 400);
    let response = post(
        format!("/v1/runs/{run_id}/stream"),
        r#"{"starting_after": -1}"#,
    )
    .await;
    assert_eq!(response.status(), 422);
    // Nothing was written by the bad requests: one run only.
    let log = server.all_events(agent_id).await;
    assert_eq!(
        log.iter()
            .filter(|e| e.kind == EventKind::RunStarted)
            .count(),
        1
    );
}

#[tokio::test]
async fn letta_create_agent_body_and_trailing_slash_paths_work() {
    let server = TestServer::start().await;
    let response = server
        .http
        .post(server.url("/v1/agents/"))
        .json(&json!({
            "name": "letta-shaped",
            "model": "scripted/demo",
            "embedding": "openai/text-embedding-3-small",
            "memory_blocks": [{ "label": "human", "value": "likes tea" }],
            "tools": ["web_search"],
            "include_base_tools": true
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let agent: Value = response.json().await.unwrap();
    assert_eq!(agent["name"], "letta-shaped");
    let list: Vec<Value> = server
        .http
        .get(server.url("/v1/agents/"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list.len(), 1, "a bare array, as Letta answers");
    assert_eq!(list[0]["id"], agent["id"]);
}

/// A model handle names its provider, as Letta's do: one this server does not run is refused
/// when the agent is created, naming what to set; the scripted provider never stands in for a
/// real model.
#[tokio::test]
async fn a_model_handle_picks_its_provider_or_is_refused() {
    let server = TestServer::start().await;
    let create = |body: Value| {
        let request = server.http.post(server.url("/v1/agents")).json(&body);
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    // (body, status, error code)
    let cases = [
        (
            json!({"model": "openai/gpt-4o"}),
            400,
            Some("unknown_provider"),
        ),
        (
            json!({"model": "anthropic/claude-sonnet-4"}),
            400,
            Some("unknown_provider"),
        ),
        (json!({"model": "gpt-4o"}), 400, Some("model_not_served")),
        (json!({"model": "scripted/demo"}), 201, None),
        (json!({"model": "scripted"}), 201, None),
        (json!({}), 201, None),
        (
            json!({"model": "gpt-4o", "metadata": {"provider": "scripted"}}),
            201,
            None,
        ),
        (
            json!({"metadata": {"provider": "openai"}}),
            400,
            Some("unknown_provider"),
        ),
    ];
    for (body, status, code) in cases {
        let (got, answer) = create(body.clone()).await;
        assert_eq!(got, status, "{body}: {answer}");
        if let Some(code) = code {
            assert_eq!(answer["error"]["code"], code, "{body}: {answer}");
        }
    }
    let (_, answer) = create(json!({"model": "openai/gpt-4o"})).await;
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("OPENAI_API_KEY"), "{message}");
}

/// The message list of a log longer than 200 000 events answers a page: it used to read the
/// whole log into memory and refuse past that (413); now it holds only the page it builds.
#[tokio::test]
async fn a_long_log_is_listed_and_shown_within_bounds() {
    // Two runs of the scripted provider's longest reply.
    const REPLY_TOKENS: u32 = 100_000;
    let server = TestServer::start_with(|config| {
        config.scripted.reply_tokens = REPLY_TOKENS;
        config.scripted.token_delay_ms = 0;
        config.limits.run_events_max = 2 * REPLY_TOKENS as u64;
    })
    .await;
    let agent_id = server.create_agent().await;
    let mut events = Vec::new();
    for turn in ["a very long answer", "another one"] {
        let run_id = server.start_run(agent_id, turn).await;
        events = server.wait_for_run_end(agent_id, run_id).await;
    }
    assert!(events.len() > 2 * REPLY_TOKENS as usize, "{}", events.len());
    let url = server.url(&format!("/v1/agents/{agent_id}/messages?limit=1"));
    let response = server.http.get(url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let page: Vec<Value> = response.json().await.unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0]["message_type"], "assistant_message");
    let words = page[0]["content"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .count();
    assert!(words >= REPLY_TOKENS as usize - 10, "{words} words");

    let oldest = server.url(&format!("/v1/agents/{agent_id}/messages?order=asc&limit=1"));
    let page: Vec<Value> = server
        .http
        .get(oldest)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page[0]["message_type"], "user_message");

    // The history page folds at most the last 200 000 events, from a run's start: the second
    // run, and a line saying what was left out (it used to fold and render the whole log).
    let history = server.url(&format!("/agents/{agent_id}/history"));
    let html = server
        .http
        .get(history)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let first_run_end = events
        .iter()
        .find(|event| event.kind.is_run_end())
        .unwrap()
        .seq;
    assert!(
        html.contains(&format!(
            "Events 1–{first_run_end} (the earlier runs) are not shown"
        )),
        "{:.300}",
        html
    );
    assert!(html.contains("another one") && !html.contains("a very long answer"));
}
