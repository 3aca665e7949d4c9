//! Letta's non-streaming send, cancel, bad requests, agent creation, model handles and long logs.

use super::*;
use crate::common::RequestExt;

#[tokio::test]
async fn non_streaming_send_answers_when_the_run_ends_and_the_list_reads_it_back() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let response = server
        .post_json(
            &format!("/v1/agents/{agent_id}/messages"),
            &json!({ "messages": user("/echo hello there") }),
        )
        .await;
    let messages = response["messages"].as_array().unwrap();
    let types: Vec<&str> = messages.iter().map(|m| m["message_type"].as_str().unwrap()).collect();
    assert_eq!(types, ["reasoning_message", "assistant_message"], "{response}");
    assert_eq!(messages[1]["content"], "hello there");
    assert_eq!(response["stop_reason"]["stop_reason"], "end_turn");
    assert!(response["usage"]["total_tokens"].as_u64().is_some());

    server
        .post(&format!("/v1/agents/{agent_id}/messages"), &json!({ "input": "/echo second turn" }))
        .await;
    let server = &server;
    let list = |query: String| async move {
        let messages = server.get_json(&format!("/v1/agents/{agent_id}/messages{query}")).await;
        messages.as_array().unwrap().clone()
    };
    // What a reader of the conversation sees: user and assistant messages (reasoning aside).
    let said = |messages: &[Value]| -> Vec<String> {
        messages
            .iter()
            .filter(|m| m["message_type"] != "reasoning_message")
            .map(|m| m["content"].as_str().unwrap().to_owned())
            .collect()
    };
    let newest_first = list(String::new()).await;
    assert_eq!(
        said(&newest_first),
        ["second turn", "/echo second turn", "hello there", "/echo hello there"]
    );
    let oldest_first = list("?order=asc&limit=3".into()).await;
    assert_eq!(oldest_first[0]["message_type"], "user_message");
    assert_eq!(said(&oldest_first), ["/echo hello there", "hello there"]);
    let after = oldest_first[2]["id"].as_str().unwrap();
    let next = list(format!("?order=asc&limit=3&after={after}")).await;
    assert_eq!(said(&next), ["/echo second turn", "second turn"]);
    let before = list(format!("?order=asc&before={after}")).await;
    assert_eq!(before.len(), 2);
    let everything = list("?limit=1000".into()).await;
    assert_eq!(everything.len(), 6, "two turns: user, reasoning, assistant each");
}

#[tokio::test]
async fn cancel_ends_a_streaming_run_with_stop_reason_cancelled() {
    let (server, agent_id) = TestServer::start_paced(2000, 5).await.with_agent().await;
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
    let stop = rest.iter().find(|f| message_type(f) == "stop_reason").unwrap();
    assert_eq!(stop.data["stop_reason"], "cancelled");
}

#[tokio::test]
async fn bad_letta_requests_get_letta_style_errors_and_change_nothing() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let unknown = Uuid::new_v4();
    let post = |path: String, body: &'static str| {
        let request = server
            .http
            .post(server.url(&path))
            .header("content-type", "application/json")
            .body(body);
        async move { request.sent().await }
    };
    let cases = [
        (post(format!("/v1/runs/{unknown}/stream"), "{}").await, 404, "unknown_run"),
        (post("/v1/runs/not-a-run/stream".into(), "{}").await, 400, "invalid_id"),
        (
            post(format!("/v1/agents/{agent_id}/messages/stream"), "{\"messages\": [").await,
            400,
            "malformed_json",
        ),
        (
            post(format!("/v1/agents/{agent_id}/messages/stream"), "{\"messages\": 5}").await,
            422,
            "invalid_body",
        ),
        (post(format!("/v1/agents/{agent_id}/messages"), "{}").await, 422, "invalid_body"),
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
            post(format!("/v1/agents/{unknown}/messages/stream"), r#"{"input":"hi"}"#).await,
            404,
            "unknown_agent",
        ),
        (
            server.get(&format!("/v1/agents/{agent_id}/messages?after=message-nope")).await,
            400,
            "invalid_cursor",
        ),
        (
            server.get(&format!("/v1/agents/{agent_id}/messages?order=sideways")).await,
            400,
            "invalid_query",
        ),
    ];
    for (response, status, code) in cases {
        assert_eq!(response.status().as_u16(), status);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "{body}");
        assert!(
            body["detail"].as_str().is_some_and(|detail| !detail.is_empty()),
            "Letta clients read `detail`: {body}"
        );
    }
    // A bad cursor on a real run.
    let frames =
        server.letta_stream(agent_id, json!({ "input": "/echo ok" })).await.until_done().await;
    let run_id = frames[0].data["run_id"].as_str().unwrap();
    let response = post(format!("/v1/runs/{run_id}/stream"), r#"{"starting_after": 999999}"#).await;
    assert_eq!(response.status(), 400);
    let response = post(format!("/v1/runs/{run_id}/stream"), r#"{"starting_after": -1}"#).await;
    assert_eq!(response.status(), 422);
    // Nothing was written by the bad requests: one run only.
    let log = server.all_events(agent_id).await;
    assert_eq!(log.iter().filter(|e| e.kind == EventKind::RunStarted).count(), 1);
}

#[tokio::test]
async fn letta_create_agent_body_and_trailing_slash_paths_work() {
    let server = TestServer::start().await;
    let response = server
        .post(
            "/v1/agents/",
            &json!({
                "name": "letta-shaped",
                "model": "scripted/demo",
                "embedding": "openai/text-embedding-3-small",
                "memory_blocks": [{ "label": "human", "value": "likes tea" }],
                "tools": ["web_search"],
                "include_base_tools": true
            }),
        )
        .await;
    assert_eq!(response.status(), 201);
    let agent: Value = response.json().await.unwrap();
    assert_eq!(agent["name"], "letta-shaped");
    let list: Vec<Value> = server.get("/v1/agents/").await.json().await.unwrap();
    assert_eq!(list.len(), 1, "a bare array, as Letta answers");
    assert_eq!(list[0]["id"], agent["id"]);
}

/// A model handle names its provider, as Letta's do: one this server does not run is refused
/// when the agent is created, naming what to set; the scripted provider never stands in for a
/// real model.
#[tokio::test]
async fn a_model_handle_picks_its_provider_or_is_refused() {
    let server = TestServer::start().await;
    let create = |body: Value| server.http.post(server.url("/v1/agents")).json(&body).status_json();
    // (body, status, error code)
    let cases = [
        (json!({"model": "openai/gpt-4o"}), 400, Some("unknown_provider")),
        (json!({"model": "anthropic/claude-sonnet-4"}), 400, Some("unknown_provider")),
        (json!({"model": "gpt-4o"}), 400, Some("model_not_served")),
        (json!({"model": "scripted/demo"}), 201, None),
        (json!({"model": "scripted"}), 201, None),
        (json!({}), 201, None),
        (json!({"model": "gpt-4o", "metadata": {"provider": "scripted"}}), 201, None),
        (json!({"metadata": {"provider": "openai"}}), 400, Some("unknown_provider")),
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
    let response = server.http.get(url).sent().await;
    assert_eq!(response.status(), 200);
    let page: Vec<Value> = response.json().await.unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0]["message_type"], "assistant_message");
    let words = page[0]["content"].as_str().unwrap().split_whitespace().count();
    assert!(words >= REPLY_TOKENS as usize - 10, "{words} words");

    let oldest = server.url(&format!("/v1/agents/{agent_id}/messages?order=asc&limit=1"));
    let page: Vec<Value> = server.http.get(oldest).answer().await;
    assert_eq!(page[0]["message_type"], "user_message");

    // The history page folds at most the last 200 000 events, from a run's start: the second
    // run, and a line saying what was left out (it used to fold and render the whole log).
    let history = server.url(&format!("/agents/{agent_id}/history"));
    let html = server.http.get(history).sent().await.text().await.unwrap();
    let first_run_end = events.iter().find(|event| event.kind.is_run_end()).unwrap().seq;
    assert!(
        html.contains(&format!("Events 1–{first_run_end} (the earlier runs) are not shown")),
        "{:.300}",
        html
    );
    assert!(html.contains("another one") && !html.contains("a very long answer"));
}
