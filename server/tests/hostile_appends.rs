//! Any sequence of events, in any order, thrown at the two append APIs over real sockets — the
//! producer API (`/v1/agents/{id}/produce`) and the Durable Streams append (`/v1/streams/{path}`)
//! — gets an answer (a 2xx or a 4xx, never a dropped connection or a 5xx), and the log stays
//! valid: gapless, each run started once and ended at most once with nothing after its end, each
//! tool call answered at most once (exactly once when its run ended); a stream holds exactly what
//! was acknowledged and stays closed once closed.
//!
//! Seeded and repeatable: `HOSTILE_SEED=<n>` replays one seed; a failure names its seed.

use crate::common;

use std::collections::HashMap;

use app::{AgentEvent, EventKind};
use common::rng::Rng;
use common::TestServer;
use serde_json::{json, Value};
use uuid::Uuid;

/// Seeds per run of the test, and requests per seed.
const SEEDS: u64 = 16;
const PRODUCER_REQUESTS_PER_SEED: usize = 200;
const STREAM_REQUESTS_PER_SEED: usize = 200;

fn seeds() -> Vec<u64> {
    match std::env::var("HOSTILE_SEED") {
        Ok(seed) => vec![seed.parse().expect("HOSTILE_SEED is a number")],
        Err(_) => (1..=SEEDS).collect(),
    }
}

const MESSAGES: [&str; 3] = [
    "0190d0c0-0000-7000-8000-0000000000a1",
    "0190d0c0-0000-7000-8000-0000000000a2",
    "0190d0c0-0000-7000-8000-0000000000a3",
];

/// One produced event, drawn from what producers send — well-formed or not.
fn any_event(rng: &mut Rng) -> Value {
    let message = *rng.pick(&MESSAGES);
    let long_id = "x".repeat(300);
    let call_ids = ["c1", "c1", "c2", "", "   ", long_id.as_str()];
    let call_id = *rng.pick(&call_ids);
    match rng.below(20) {
        0..=2 => json!({ "kind": "run_started" }),
        3 => {
            json!({ "kind": "run_started", "metadata": { "lease_ms": *rng.pick(&[0u64, 1_000, 5_000, u64::MAX]) } })
        }
        4 => json!({ "kind": "run_started", "run_id": Uuid::new_v4() }),
        5 => json!({ "kind": "user", "message_id": message, "content": { "text": "hi" } }),
        6 | 7 => {
            json!({ "kind": "text", "message_id": message, "delta": "word ", "delta_action": "append" })
        }
        8 => {
            json!({ "kind": "thinking", "message_id": message, "delta": { "a": 1 }, "delta_action": "merge" })
        }
        9 => json!({ "kind": "text", "message_id": message, "delta": 7, "delta_action": "append" }),
        10 | 11 => {
            json!({ "kind": "tool_call", "content": { "tool_call_id": call_id, "name": "lookup", "input": {} } })
        }
        12 | 13 => {
            json!({ "kind": "tool_result", "content": { "tool_call_id": call_id, "result": "42" } })
        }
        14 => {
            json!({ "kind": "usage", "content": { "input_tokens": *rng.pick(&[json!(3), json!(-1), json!("x")]) } })
        }
        15 => json!({ "kind": *rng.pick(&["run_completed", "run_failed", "run_cancelled"]) }),
        16 => json!({ "kind": "run_completed", "run_id": Uuid::new_v4() }),
        17 => {
            json!({ "kind": *rng.pick(&["approval_requested", "approval_response", "nope", ""]) })
        }
        18 => json!({ "kind": "text", "seq": 4, "message_id": message }),
        _ => rng.pick(&[json!(3), json!(null), json!("text"), json!([])]).clone(),
    }
}

/// A well-formed event of an open run.
fn plausible_event(rng: &mut Rng) -> Value {
    let message = *rng.pick(&MESSAGES);
    let call_id = *rng.pick(&["c1", "c2", "c3"]);
    match rng.below(4) {
        0 => {
            json!({ "kind": "text", "message_id": message, "delta": "word ", "delta_action": "append" })
        }
        1 => {
            json!({ "kind": "tool_call", "content": { "tool_call_id": call_id, "name": "lookup", "input": {} } })
        }
        2 => {
            json!({ "kind": "tool_result", "content": { "tool_call_id": call_id, "result": "42" } })
        }
        _ => json!({ "kind": "usage", "content": { "input_tokens": 3, "output_tokens": 1 } }),
    }
}

/// A batch: anything at all, or (half the time) what a producer that believes `open` would send
/// — which may still be refused (a call made twice, a result for no call).
fn any_batch(rng: &mut Rng, open: bool) -> Value {
    match rng.below(12) {
        0 => rng.pick(&[json!([]), json!({}), json!("x"), json!(12)]).clone(),
        1..=5 => {
            let length = 1 + rng.below(6) as usize;
            Value::Array((0..length).map(|_| any_event(rng)).collect())
        }
        _ => {
            let mut events = Vec::new();
            if !open || rng.chance(100) {
                events.push(json!({ "kind": "run_started" }));
            }
            for _ in 0..rng.below(5) {
                events.push(plausible_event(rng));
            }
            if rng.chance(350) {
                events.push(
                    json!({ "kind": *rng.pick(&["run_completed", "run_failed", "run_cancelled"]) }),
                );
            }
            if events.is_empty() {
                events.push(plausible_event(rng));
            }
            Value::Array(events)
        }
    }
}

/// A producer's headers: mostly its next seq, sometimes a retry, a gap, a new or stale epoch.
fn any_headers(rng: &mut Rng, next: &HashMap<&'static str, (u64, u64)>) -> Vec<(String, String)> {
    let producer = *rng.pick(&["p", "q"]);
    let (epoch, seq) = *next.get(producer).unwrap_or(&(0, 0));
    let (epoch, seq) = match rng.below(10) {
        0 => (epoch, seq.saturating_sub(1)),
        1 => (epoch, seq + 2),
        2 => (epoch + 1, 0),
        3 => (epoch.saturating_sub(1), seq),
        _ => (epoch, seq),
    };
    let mut headers = vec![
        ("producer-id".to_owned(), producer.to_owned()),
        ("producer-epoch".to_owned(), epoch.to_string()),
        ("producer-seq".to_owned(), seq.to_string()),
    ];
    if rng.chance(50) {
        headers[2].1 = "-1".into();
    }
    if rng.chance(30) {
        headers.pop();
    }
    headers
}

#[tokio::test]
async fn any_batch_sequence_is_answered_and_leaves_the_log_valid() {
    let server = TestServer::start().await;
    for seed in seeds() {
        let mut rng = Rng(seed);
        let agent_id = server.create_agent().await;
        // Each producer's next (epoch, seq) and whether it believes its run is open, from the
        // answers it got.
        let mut next: HashMap<&'static str, (u64, u64)> = HashMap::new();
        let mut open: HashMap<String, bool> = HashMap::new();
        let mut statuses: HashMap<u16, usize> = HashMap::new();
        for request in 0..PRODUCER_REQUESTS_PER_SEED {
            let headers = any_headers(&mut rng, &next);
            let producer = headers[0].1.clone();
            let batch = any_batch(&mut rng, open.get(&producer).copied().unwrap_or(false));
            let mut post = server
                .http
                .post(server.url(&format!("/v1/agents/{agent_id}/produce")))
                .json(&batch);
            for (name, value) in &headers {
                post = post.header(name, value);
            }
            let response = post.send().await.unwrap_or_else(|error| {
                panic!("seed {seed}, request {request}: no answer ({error}) to {headers:?} {batch}")
            });
            let status = response.status().as_u16();
            let body = response.text().await.unwrap_or_default();
            assert!(
                (200..500).contains(&status),
                "seed {seed}, request {request}: {status} {body} for {headers:?} {batch}"
            );
            *statuses.entry(status).or_default() += 1;
            if status == 200 && headers.len() == 3 {
                let epoch = headers[1].1.parse().unwrap_or(0);
                let seq: u64 = headers[2].1.parse().unwrap_or(0);
                let key = if producer == "p" { "p" } else { "q" };
                next.insert(key, (epoch, seq + 1));
                let answer: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                open.insert(producer, answer["run_open"] == json!(true));
            } else if body.contains("run_ended") || body.contains("no run is open") {
                open.insert(producer, false);
            }
        }
        check_log(seed, &server.all_events(agent_id).await);
        assert!(
            statuses.get(&200).copied().unwrap_or(0) > 5,
            "seed {seed}: too few batches were accepted to test anything: {statuses:?}"
        );
    }
}

/// The log's invariants (the simulation's, for runs a producer writes).
fn check_log(seed: u64, log: &[AgentEvent]) {
    for (index, event) in log.iter().enumerate() {
        assert_eq!(event.seq, index as u64 + 1, "seed {seed}: the log has a gap");
    }
    let mut runs: Vec<Uuid> = Vec::new();
    let mut ended: HashMap<Uuid, u64> = HashMap::new();
    for event in log {
        let Some(run_id) = event.run_id else { continue };
        if event.kind == EventKind::RunStarted {
            assert!(!runs.contains(&run_id), "seed {seed}: run {run_id} started twice");
            runs.push(run_id);
            continue;
        }
        assert!(
            runs.contains(&run_id),
            "seed {seed}: seq {} of run {run_id} before its run_started",
            event.seq
        );
        assert!(
            !ended.contains_key(&run_id),
            "seed {seed}: seq {} ({}) after the end of run {run_id}",
            event.seq,
            event.kind.as_str()
        );
        if event.kind.is_run_end() {
            ended.insert(run_id, event.seq);
        }
    }
    let open = runs.iter().filter(|run| !ended.contains_key(run)).count();
    assert!(open <= 1, "seed {seed}: {open} runs open at once");
    for message in common::messages_of(log, EventKind::ToolCall) {
        let call_id = message.content.get("tool_call_id").and_then(Value::as_str);
        let results = log
            .iter()
            .filter(|event| {
                event.kind == EventKind::ToolResult
                    && event.run_id == message.run_id
                    && event.content.get("tool_call_id").and_then(Value::as_str) == call_id
            })
            .count();
        let run_ended = message.run_id.is_some_and(|run| ended.contains_key(&run));
        assert!(
            results == 1 || (results == 0 && !run_ended),
            "seed {seed}: tool call {call_id:?} has {results} results (its run ended: {run_ended})"
        );
    }
}

/// What a stream should hold, from the answers its requests got.
#[derive(Debug, Default)]
struct StreamModel {
    json: bool,
    closed: bool,
    messages: usize,
}

#[tokio::test]
async fn any_stream_request_sequence_is_answered_and_keeps_what_was_acknowledged() {
    let server = TestServer::start().await;
    for seed in seeds() {
        let mut rng = Rng(seed);
        let paths = [format!("hostile/{seed}/a"), format!("hostile/{seed}/b")];
        let mut model: HashMap<String, StreamModel> = HashMap::new();
        let mut producer_seq: HashMap<String, u64> = HashMap::new();
        let mut acknowledged = 0;
        for request in 0..STREAM_REQUESTS_PER_SEED {
            let path = rng.pick(&paths).clone();
            let url = server.url(&format!("/v1/streams/{path}"));
            let what = rng.below(10);
            let mut close_only = false;
            let (builder, description, messages) = match what {
                0 => {
                    let json = rng.chance(700);
                    let content_type = if json { "application/json" } else { "text/plain" };
                    let mut put = server.http.put(&url).header("content-type", content_type);
                    if rng.chance(200) {
                        put = put.header(
                            "stream-ttl",
                            *rng.pick(&["60", "18446744073709551615", "-1", "x"]),
                        );
                    }
                    (put, format!("PUT {content_type}"), json as usize)
                }
                1 => (server.http.delete(&url), "DELETE".into(), 0),
                2 => (server.http.head(&url), "HEAD".into(), 0),
                3 => {
                    let offset =
                        *rng.pick(&["-1", "now", "0", "garbage", "99999999999999999999_1"]);
                    (
                        server.http.get(format!("{url}?offset={offset}")),
                        format!("GET offset={offset}"),
                        0,
                    )
                }
                _ => {
                    let (body, count) = match rng.below(8) {
                        0 => ("[]".to_owned(), 0),
                        1 => ("{not json".to_owned(), 0),
                        2 => (String::new(), 0),
                        3 => ("{\"m\":1}".to_owned(), 1),
                        _ => {
                            let count = 1 + rng.below(4) as usize;
                            let items: Vec<Value> = (0..count).map(|i| json!({ "i": i })).collect();
                            (Value::Array(items).to_string(), count)
                        }
                    };
                    let mut post = server
                        .http
                        .post(&url)
                        .header(
                            "content-type",
                            *rng.pick(&["application/json", "application/json", "text/plain"]),
                        )
                        .body(body.clone());
                    let mut description = format!("POST {body}");
                    if rng.chance(150) {
                        post = post.header("stream-closed", "true");
                        description += " +close";
                        close_only = body.is_empty();
                    }
                    if rng.chance(150) {
                        let seq = *rng.pick(&["1", "2", "10", "a", ""]);
                        post = post.header("stream-seq", seq);
                        description += &format!(" Stream-Seq {seq}");
                    }
                    if rng.chance(300) {
                        let next = producer_seq.entry(path.clone()).or_default();
                        let seq = if rng.chance(200) { next.saturating_sub(1) } else { *next };
                        post = post
                            .header("producer-id", "w")
                            .header("producer-epoch", "0")
                            .header("producer-seq", seq.to_string());
                        description += &format!(" Producer-Seq {seq}");
                    }
                    (post, description, count)
                }
            };
            let response = builder.send().await.unwrap_or_else(|error| {
                panic!("seed {seed}, request {request} ({description} {path}): no answer ({error})")
            });
            let status = response.status().as_u16();
            let by_producer = description.contains("Producer-Seq");
            let closed_header = response.headers().get("stream-closed").is_some();
            let body = response.text().await.unwrap_or_default();
            assert!(
                (200..500).contains(&status),
                "seed {seed}, request {request}: {status} {body} for {description} {path}"
            );
            // The model follows what the server acknowledged.
            match what {
                0 if status == 201 => {
                    model.insert(
                        path.clone(),
                        StreamModel { json: messages == 1, ..StreamModel::default() },
                    );
                    producer_seq.remove(&path);
                }
                1 if status == 204 => {
                    model.remove(&path);
                    producer_seq.remove(&path);
                }
                4..=9 if (200..300).contains(&status) => {
                    let Some(stream) = model.get_mut(&path) else {
                        panic!("seed {seed}, request {request}: {description} to {path}, which does not exist, answered {status}");
                    };
                    assert!(
                        !stream.closed || close_only || (by_producer && status == 204),
                        "seed {seed}, request {request}: {description} to the closed {path} answered {status}"
                    );
                    let appended = if by_producer { status == 200 } else { messages > 0 };
                    if appended {
                        acknowledged += 1;
                        stream.messages += if stream.json { messages } else { 1 };
                    }
                    if by_producer && status == 200 {
                        *producer_seq.entry(path.clone()).or_default() += 1;
                    }
                    if closed_header {
                        stream.closed = true;
                    }
                }
                _ => {}
            }
        }
        assert!(
            acknowledged > 5,
            "seed {seed}: only {acknowledged} appends were acknowledged: too few to test anything"
        );
        for (path, stream) in &model {
            if !stream.json {
                continue;
            }
            let response = server.get(&format!("/v1/streams/{path}?offset=-1")).await;
            assert_eq!(response.status(), 200, "seed {seed}: reading {path}");
            let closed = response.headers().get("stream-closed").is_some();
            let read: Vec<Value> = response.json().await.unwrap();
            assert_eq!(
                (read.len(), closed),
                (stream.messages, stream.closed),
                "seed {seed}: {path} holds {} messages (closed: {closed}); acknowledged: {stream:?}",
                read.len()
            );
        }
    }
}
