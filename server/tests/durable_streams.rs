//! Durable streams over real sockets, beyond what the protocol's own suite checks
//! (`end2end/conformance/`): the log engine keeps them (a restart loses nothing), an agent's log
//! is a read-only stream, bounds and bad input, scoped tokens, and readers that wait and vanish
//! leave nothing behind.

use crate::common;

use std::time::Duration;

use crate::common::RequestExt;
use common::{wait_until, TestServer};
use futures::StreamExt;
use serde_json::{json, Value};

async fn put(server: &TestServer, path: &str, content_type: &str, body: &str) -> reqwest::Response {
    server
        .http
        .put(server.url(&format!("/v1/streams/{path}")))
        .header("content-type", content_type)
        .body(body.to_owned())
        .sent()
        .await
}

async fn post(
    server: &TestServer,
    path: &str,
    content_type: &str,
    body: &str,
) -> reqwest::Response {
    server
        .http
        .post(server.url(&format!("/v1/streams/{path}")))
        .header("content-type", content_type)
        .body(body.to_owned())
        .sent()
        .await
}

async fn get(server: &TestServer, path: &str, query: &str) -> reqwest::Response {
    server.get(&format!("/v1/streams/{path}?{query}")).await
}

fn header(response: &reqwest::Response, name: &str) -> String {
    response.headers().get(name).map(|value| value.to_str().unwrap().to_owned()).unwrap_or_default()
}

#[tokio::test]
async fn a_json_stream_keeps_its_messages_in_the_log_and_resumes_exactly() {
    let server = TestServer::start().await;
    let created = put(&server, "chats/room-1", "application/json", r#"[{"n":1}]"#).await;
    assert_eq!(created.status(), 201);
    let appended = post(&server, "chats/room-1", "application/json", r#"[{"n":2},{"n":3}]"#).await;
    assert_eq!(appended.status(), 204);
    let tail = header(&appended, "stream-next-offset");
    assert_eq!(tail, "0000000000000000_0000000000000003", "one offset per message");

    let all = get(&server, "chats/room-1", "offset=-1").await;
    assert_eq!(header(&all, "stream-up-to-date"), "true");
    let body: Value = all.json().await.unwrap();
    assert_eq!(body, json!([{"n": 1}, {"n": 2}, {"n": 3}]));
    let after_one = get(&server, "chats/room-1", "offset=0000000000000000_0000000000000001").await;
    assert_eq!(after_one.json::<Value>().await.unwrap(), json!([{"n": 2}, {"n": 3}]));

    // A long-poll at the tail answers with the next message as soon as it is appended.
    let waiting = tokio::spawn({
        let url = server.url(&format!("/v1/streams/chats/room-1?offset={tail}&live=long-poll"));
        let http = server.http.clone();
        async move { http.get(url).sent().await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    post(&server, "chats/room-1", "application/json", r#"{"n":4}"#).await;
    let answered = tokio::time::timeout(Duration::from_secs(10), waiting).await.unwrap().unwrap();
    assert_eq!(answered.status(), 200);
    assert_eq!(answered.json::<Value>().await.unwrap(), json!([{"n": 4}]));

    // The stream is no agent: the agent list does not show its log.
    let agents = server.get_json("/v1/agents").await;
    assert_eq!(agents.as_array().map(Vec::len), Some(0), "{agents}");
}

async fn next_chunk(
    body: &mut (impl futures::Stream<Item = reqwest::Result<axum::body::Bytes>> + Unpin),
) -> String {
    let chunk = tokio::time::timeout(Duration::from_secs(10), body.next()).await;
    String::from_utf8(chunk.unwrap().unwrap().unwrap().to_vec()).unwrap()
}

/// Over SSE a data event and the control event that gives its offset leave in one write. The
/// protocol's own client (0.1.5 to 0.2.7) pairs a data event with the next control event; when
/// its connection ends between the two (its reader aborted, the data in one read and the control
/// still in flight), it hands the data out with the offset from *before* it, and a reader that
/// resumes from there gets those messages twice — seen in the browser suite as seqs 1…k, 25….
#[tokio::test]
async fn sse_sends_each_data_event_with_its_control_event_in_one_write() {
    let server = TestServer::start().await;
    put(&server, "paired", "application/json", r#"[{"n":1},{"n":2}]"#).await;
    let response = get(&server, "paired", "offset=-1&live=sse").await;
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    // The catch-up, then a message appended live: each a data event and its control in one
    // chunk (the server's chunked encoding writes each of its frames as one chunk).
    let caught_up = next_chunk(&mut body).await;
    assert!(caught_up.starts_with("event: data\n"), "{caught_up:?}");
    assert!(caught_up.contains(r#"[{"n":1},{"n":2}]"#), "{caught_up:?}");
    assert!(caught_up.contains("\n\nevent: control\n"), "{caught_up:?}");
    assert!(caught_up.contains(r#""streamNextOffset":"0000000000000000_0000000000000002""#));
    post(&server, "paired", "application/json", r#"{"n":3}"#).await;
    let live = next_chunk(&mut body).await;
    assert!(live.starts_with("event: data\n") && live.contains(r#"[{"n":3}]"#), "{live:?}");
    assert!(live.contains(r#""streamNextOffset":"0000000000000000_0000000000000003""#), "{live:?}");
}

/// A reader gets each message as the bytes it was sent as — spacing, number forms, escapes —
/// from this server's memory and from the database alike (a second server on the same
/// database has none of the first's memory). Messages were once kept as trees and printed
/// again: `1e2` came back as `100.0`.
#[tokio::test]
async fn each_message_reads_back_exactly_as_it_was_sent() {
    let server = TestServer::start().await;
    assert_eq!(put(&server, "exact", "application/json", "").await.status(), 201);
    let batch = "[ {\"n\": 1e2, \"s\" : \"\\u00e9\"} ,\n 10.50 ]";
    for body in [batch, " \"x\"\r\n"] {
        let appended = post(&server, "exact", "application/json", body).await;
        assert_eq!(appended.status(), 204, "{body:?}");
    }
    let expected = "[{\"n\": 1e2, \"s\" : \"\\u00e9\"},10.50,\"x\"]";
    let read = get(&server, "exact", "offset=-1").await.text().await.unwrap();
    assert_eq!(read, expected, "from memory");
    let other = TestServer::start_with(|config| {
        config.database_url = server.database_url.clone();
    })
    .await;
    let read = get(&other, "exact", "offset=-1").await.text().await.unwrap();
    assert_eq!(read, expected, "from the database");
    let after_first = get(&other, "exact", "offset=0000000000000000_0000000000000001").await;
    assert_eq!(after_first.text().await.unwrap(), "[10.50,\"x\"]");
}

#[tokio::test]
async fn bad_requests_get_the_reason_and_change_nothing() {
    let server = TestServer::start().await;
    put(&server, "s", "text/plain", "hello").await;
    let cases: Vec<(reqwest::Response, u16, &str)> = vec![
        (get(&server, "s", "offset=bogus").await, 400, "Invalid offset format"),
        (get(&server, "s", "offset=-1&offset=now").await, 400, "Multiple offset"),
        (get(&server, "s", "live=sse").await, 400, "SSE requires offset"),
        (get(&server, "missing", "offset=-1").await, 404, "Stream not found"),
        (post(&server, "s", "application/json", "{}").await, 409, "Content-type mismatch"),
        (post(&server, "s", "text/plain", "").await, 400, "Empty body"),
        (put(&server, "s", "application/json", "").await, 409, "different configuration"),
    ];
    for (response, status, reason) in cases {
        assert_eq!(response.status().as_u16(), status);
        assert!(response.text().await.unwrap().contains(reason), "{reason}");
    }
    let huge = "x".repeat(9 * 1024 * 1024);
    assert_eq!(post(&server, "s", "text/plain", &huge).await.status(), 413);
    let read = get(&server, "s", "offset=-1").await;
    assert_eq!(read.text().await.unwrap(), "hello", "nothing written");
}

#[tokio::test]
async fn an_agents_log_is_a_read_only_stream_and_scoped_tokens_apply() {
    let server = TestServer::start_with(|config| {
        config.api_token = Some("operator".into());
        config.token_keys = Some(
            agentstream_server::http::token::TokenKeys::new(
                "a-secret-a-secret-a-secret-a-secret-0123",
                600,
            )
            .unwrap(),
        );
    })
    .await;
    let operator = |request: reqwest::RequestBuilder| request.bearer_auth("operator");
    let agent: Value = operator(server.http.post(server.url("/v1/agents")))
        .json(&json!({ "name": "streamed" }))
        .answer()
        .await;
    let agent_id = agent["id"].as_str().unwrap().to_owned();
    let other: Value = operator(server.http.post(server.url("/v1/agents")))
        .json(&json!({ "name": "other" }))
        .answer()
        .await;
    let run = operator(server.http.post(server.url(&format!("/v1/agents/{agent_id}/runs"))))
        .json(&json!({ "content": "/echo one two three" }))
        .sent()
        .await;
    assert_eq!(run.status(), 202);
    let minted: Value = operator(server.http.post(server.url("/v1/tokens")))
        .json(&json!({ "sub": "reader", "agents": [agent_id], "scope": "read", "ttl_s": 60 }))
        .answer()
        .await;
    let token = minted["token"].as_str().unwrap().to_owned();
    let stream = |id: &str| server.url(&format!("/v1/streams/agents/{id}?offset=-1"));
    let events = wait_until("the run's end in the stream", || async {
        let response = server.http.get(stream(&agent_id)).bearer_auth(&token).send().await.ok()?;
        let events: Vec<Value> = response.json().await.ok()?;
        events.iter().any(|event| event["kind"] == "run_completed").then_some(events)
    })
    .await;
    let seqs: Vec<u64> = events.iter().map(|event| event["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    // Another agent, a write, a named stream: refused for this token.
    let other_id = other["id"].as_str().unwrap();
    let refused = server.http.get(stream(other_id)).bearer_auth(&token).sent().await;
    assert_eq!(refused.status(), 404);
    let write = operator(server.http.post(server.url(&format!("/v1/streams/agents/{agent_id}"))))
        .header("content-type", "application/json")
        .body("{}")
        .sent()
        .await;
    assert_eq!(write.status(), 405);
    let named = server.http.put(server.url("/v1/streams/mine")).bearer_auth(&token).sent().await;
    assert_eq!(named.status(), 403);
}

/// Readers that wait — long-polls and SSE — and vanish leave no task, room or path behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_readers_that_vanish_leave_nothing_behind() {
    let server = TestServer::start().await.without_pooled_connections();
    put(&server, "idle", "text/plain", "x").await;
    let stats = || async {
        let stats = server.get_json("/v1/stats").await;
        (
            stats["tasks_alive"].as_u64().unwrap(),
            stats["hub_rooms"].as_u64().unwrap(),
            stats["stream_paths_held"].as_u64().unwrap(),
        )
    };
    let before = stats().await;
    let client =
        agentstream_server::http_client::builder().pool_max_idle_per_host(0).build().unwrap();
    for round in 0..20 {
        if round % 2 == 0 {
            // SSE: its headers and first control event, then the reader goes away.
            let url = server.url("/v1/streams/idle?offset=now&live=sse");
            let response = client.get(url).sent().await;
            assert_eq!(response.status(), 200);
            let mut body = response.bytes_stream();
            body.next().await.unwrap().unwrap();
        } else {
            // Long-poll: the reader goes away while the server waits (no answer yet).
            let url = server.url("/v1/streams/idle?offset=now&live=long-poll");
            let waited = tokio::time::timeout(Duration::from_millis(200), client.get(url).send());
            assert!(waited.await.is_err(), "a long-poll at the tail waits");
        }
    }
    let settled = wait_until("tasks, rooms and paths back", || async {
        let now = stats().await;
        (now.0 <= before.0 && now.1 <= before.1 && now.2 == 0).then_some(now)
    })
    .await;
    assert_eq!(settled.2, 0);
}

/// Reads of a stream with a TTL note their access time; they must not write back the rest of the
/// row they read, or a close committed meanwhile is undone (the stream reopens).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_racing_a_close_never_reopen_the_stream() {
    const STREAMS: usize = 40;
    const READERS_PER_STREAM: usize = 6;
    let server = TestServer::start().await;
    let mut tasks = Vec::new();
    for index in 0..STREAMS {
        let path = format!("ttl-race/{index}");
        let created = server
            .http
            .put(server.url(&format!("/v1/streams/{path}")))
            .header("content-type", "application/json")
            .header("stream-ttl", "3600")
            .body("[1]")
            .sent()
            .await;
        assert_eq!(created.status(), 201);
        for _ in 0..READERS_PER_STREAM {
            let (http, url) =
                (server.http.clone(), server.url(&format!("/v1/streams/{path}?offset=-1")));
            tasks.push(tokio::spawn(async move {
                let status = http.get(url).sent().await.status();
                assert_eq!(status, 200);
            }));
        }
        let (http, url) = (server.http.clone(), server.url(&format!("/v1/streams/{path}")));
        tasks.push(tokio::spawn(async move {
            let closed = http.post(url).header("stream-closed", "true").sent().await;
            assert_eq!(closed.status(), 204);
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let mut reopened = Vec::new();
    for index in 0..STREAMS {
        let path = format!("ttl-race/{index}");
        let append = post(&server, &path, "application/json", "[2]").await;
        if append.status() != 409 {
            reopened.push((index, append.status().as_u16()));
        }
    }
    assert!(
        reopened.is_empty(),
        "{} of {STREAMS} closed streams took an append: {reopened:?}",
        reopened.len()
    );
}

/// Every read of a fork walks its chain of sources: the chain is bounded, and a fork past the
/// bound is refused with the reason.
#[tokio::test]
async fn fork_chains_are_bounded() {
    let server = TestServer::start().await;
    assert_eq!(put(&server, "chain/0", "application/json", "[0]").await.status(), 201);
    let fork = |depth: usize| {
        server
            .http
            .put(server.url(&format!("/v1/streams/chain/{depth}")))
            .header("content-type", "application/json")
            .header("stream-forked-from", format!("/v1/streams/chain/{}", depth - 1))
            .send()
    };
    for depth in 1..=64 {
        assert_eq!(fork(depth).await.unwrap().status(), 201, "fork {depth}");
    }
    let refused = fork(65).await.unwrap();
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await.unwrap().contains("Fork chain too deep"));
    let deepest = get(&server, "chain/64", "offset=-1").await;
    assert_eq!(deepest.json::<Value>().await.unwrap(), json!([0]));
}
