//! Runs through a provider end to end: tools, retries and their bound, choosing a provider, endless error bodies, wedging ids, signed thinking.

use super::*;

/// The whole path: a run on a server whose provider is "Anthropic" (the replay server): the tool
/// call runs, its result goes back to the model in Anthropic's format, and the reply lands in the
/// log.
#[tokio::test]
async fn an_anthropic_run_uses_tools_end_to_end() {
    let (base_url, replay) =
        replay_server(vec![sse(ANTHROPIC_TOOL_STREAM), sse(ANTHROPIC_TEXT_STREAM)], 11).await;
    let server = server_on_anthropic(base_url).await;
    let (_, _, events) = server.finished_run("What is 6*7?").await;
    common::assert_contiguous(&events, 1);
    let end = events.last().unwrap();
    assert_eq!(end.kind, EventKind::RunCompleted);
    assert_eq!(end.content["stop_reason"], "end_turn");
    assert_eq!(end.content["usage"], json!({"input_tokens": 85, "output_tokens": 47}));
    let timeline = common::fold(&events);
    let thinking = &common::messages_of(&events, EventKind::Thinking)[0];
    assert_eq!(thinking.content, json!({"text": "Six times seven.", "signature": "EqQBsig=="}));
    // The call has the server's id; the provider's is kept beside it.
    let call = timeline.messages().iter().find(|m| m.kind == EventKind::ToolCall).unwrap();
    assert_eq!(call.content["provider_call_id"], "toolu_01");
    let call_id = call.content["tool_call_id"].as_str().unwrap().to_owned();
    assert!(call_id.starts_with("call_"), "{call_id}");
    let result = timeline.tool_result(&call_id).unwrap();
    assert_eq!(result.content["result"], json!(42));
    let texts: Vec<_> = timeline
        .messages()
        .iter()
        .filter(|m| m.kind == EventKind::Text)
        .map(|m| m.text().to_owned())
        .collect();
    assert_eq!(texts, vec!["Let me calculate.", "It is 42."]);

    // The second request carried the call and its result back, as Anthropic expects.
    let requests = replay.requests.lock().unwrap();
    let messages = &requests[1].1["messages"];
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["content"][1]["type"], "tool_use");
    assert_eq!(messages[1]["content"][1]["input"], json!({"expression": "6*7"}));
    assert_eq!(messages[2]["content"][0]["type"], "tool_result");
    assert_eq!(messages[1]["content"][1]["id"], call_id.as_str());
    assert_eq!(messages[2]["content"][0]["tool_use_id"], call_id.as_str());
    assert_eq!(messages[2]["content"][0]["content"], "42");
}

/// Overload before any output is retried (honouring retry-after); the run then completes, and
/// the wait is visible in the log.
#[tokio::test]
async fn an_overloaded_provider_is_retried_and_the_run_completes() {
    let overloaded = overloaded("0.2");
    let (base_url, replay) =
        replay_server(vec![overloaded.clone(), overloaded, sse(ANTHROPIC_TEXT_STREAM)], 64).await;
    let server = server_on_anthropic(base_url).await;
    let (_, _, events) = server.finished_run("hi").await;
    assert_eq!(replay.requests.lock().unwrap().len(), 3);
    let notices: Vec<_> = events.iter().filter(|event| event.kind == EventKind::Loading).collect();
    assert_eq!(notices.len(), 2);
    assert_eq!(notices[0].content["retry_in_ms"], 200);
    assert_eq!(events.last().unwrap().kind, EventKind::RunCompleted);
}

/// A provider that keeps failing is given up on after the bounded retries, with the error in
/// the log.
#[tokio::test]
async fn retries_are_bounded_and_the_final_error_is_reported() {
    let overloaded = overloaded("0.05");
    let (base_url, replay) = replay_server(vec![overloaded; 10], 64).await;
    let server = server_on_anthropic(base_url).await;
    let (_, _, events) = server.finished_run("hi").await;
    assert_eq!(
        replay.requests.lock().unwrap().len(),
        agentstream_server::agent::PROVIDER_RETRIES_MAX as usize + 1
    );
    let error = common::first_of(&events, EventKind::Error);
    assert_eq!(error.content["type"], "overloaded_error");
    assert_eq!(error.content["retryable"], true);
    assert_eq!(events.last().unwrap().kind, EventKind::RunFailed);
}

/// An agent can pick another configured provider in its metadata; the server default stays for
/// the others, and an unavailable choice is refused when the agent is created.
#[tokio::test]
async fn an_agent_chooses_its_provider() {
    let (base_url, replay) = replay_server(vec![sse(ANTHROPIC_TEXT_STREAM)], 64).await;
    let server = common::TestServer::start_with(|config| {
        config.agent_providers = vec![ProviderChoice::Anthropic(AnthropicConfig {
            api_key: "k".into(),
            base_url,
            model: "claude-test".into(),
        })];
    })
    .await;
    let response = server
        .post("/v1/agents", &json!({ "name": "claude", "metadata": { "provider": "anthropic" } }))
        .await;
    assert_eq!(response.status(), 201);
    let agent: Value = response.json().await.unwrap();
    let agent_id = uuid::Uuid::parse_str(agent["id"].as_str().unwrap()).unwrap();
    let run_id = server.start_run(agent_id, "hi").await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    assert_eq!(events[0].metadata["provider"], "anthropic");
    assert_eq!(replay.requests.lock().unwrap().len(), 1);

    // The default agent still uses the scripted provider.
    let (_, _, events) = server.finished_run("hi").await;
    assert_eq!(events[0].metadata["provider"], "scripted");

    let refused = server.post("/v1/agents", &json!({ "metadata": { "provider": "openai" } })).await;
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unknown_provider");
}

/// An error answer whose body never ends (a broken proxy, say) still ends the call, promptly;
/// the body is not read whole, and its start goes to the operator's log, not the run's error.
#[tokio::test]
async fn an_error_body_that_never_ends_is_cut() {
    async fn endless(_: Bytes) -> Response {
        let chunks =
            futures::stream::repeat_with(|| Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; 1024])))
                .then(|chunk| async {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    chunk
                });
        Response::builder()
            .status(502)
            .header("content-type", "text/plain")
            .body(Body::from_stream(chunks))
            .unwrap()
    }
    let app = Router::new().fallback(endless);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let provider = AnthropicProvider::new(AnthropicConfig {
        api_key: "test-key".into(),
        base_url: format!("http://{address}"),
        model: "claude-test".into(),
    });
    let first = tokio::time::timeout(common::WAIT_MAX, provider.stream(request()).next())
        .await
        .expect("the call ended");
    let Some(Err(error)) = first else {
        panic!("expected an error, got {first:?}");
    };
    assert_eq!(error.kind, "http_502");
    // A body that is not an error object (a proxy's page may echo the request) stays in the
    // operator's log; the run's error, which every client reads, names the status.
    assert!(!error.message.contains("xxxx"), "{}", error.message);
    assert!(error.message.starts_with("HTTP 502"), "{}", error.message);
}

/// A model that gives its calls empty (so repeated) ids cannot wedge an agent: each call gets
/// the server's id, each approval can be answered, both run, and the agent goes on.
#[tokio::test]
async fn empty_and_repeated_provider_call_ids_cannot_wedge_an_agent() {
    let (base_url, replay) = replay_server(
        vec![
            sse(ANTHROPIC_EMPTY_IDS_STREAM),
            sse(ANTHROPIC_TEXT_STREAM),
            sse(ANTHROPIC_TEXT_STREAM),
        ],
        64,
    )
    .await;
    let server = server_on_anthropic(base_url).await;
    let body = json!({ "metadata": { "requires_approval": ["calculator"] } });
    let agent = server.post_json("/v1/agents", &body).await;
    let agent_id: uuid::Uuid = agent["id"].as_str().unwrap().parse().unwrap();
    let run_id = server.start_run(agent_id, "What is 6*7 and 1+1?").await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    let end = events.last().unwrap();
    assert_eq!(end.content["stop_reason"], "requires_approval", "{}", end.content);
    let awaiting: Vec<String> = end.content["awaiting"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| call["tool_call_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(awaiting.len(), 2, "both calls wait: {awaiting:?}");
    assert_ne!(awaiting[0], awaiting[1]);

    let mut results = Vec::new();
    let mut last_end = Value::Null;
    for call_id in &awaiting {
        let response = server
            .post(
                &format!("/v1/agents/{agent_id}/approvals"),
                &json!({ "call_id": call_id, "approve": true }),
            )
            .await;
        assert_eq!(response.status(), 202);
        let accepted: Value = response.json().await.unwrap();
        let continuation: uuid::Uuid = accepted["run_id"].as_str().unwrap().parse().unwrap();
        let events = server.wait_for_run_end(agent_id, continuation).await;
        results.extend(
            events
                .iter()
                .filter(|event| {
                    event.kind == EventKind::ToolResult && event.run_id == Some(continuation)
                })
                .map(|event| event.content["result"].clone()),
        );
        last_end = events.last().unwrap().content.clone();
    }
    assert_eq!(results, [json!(42), json!(2)]);
    assert_eq!(last_end["stop_reason"], "end_turn");
    // The provider got each call back with the id its result names.
    {
        let requests = replay.requests.lock().unwrap();
        let messages = &requests[1].1["messages"];
        let uses: Vec<&Value> =
            messages[1]["content"].as_array().unwrap().iter().map(|block| &block["id"]).collect();
        let answered: Vec<&Value> = messages[2]["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|block| &block["tool_use_id"])
            .collect();
        assert_eq!(uses, answered);
        assert_eq!(uses, [&json!(awaiting[0]), &json!(awaiting[1])]);
    }
    let next = server.start_run(agent_id, "thanks").await;
    let events = server.wait_for_run_end(agent_id, next).await;
    assert_eq!(events.last().unwrap().kind, EventKind::RunCompleted);
}

/// With extended thinking on (the agent's `thinking_budget_tokens`), the request asks for it and
/// every tool loop's follow-up starts its assistant turn with the step's thinking exactly as it
/// came — signed, or redacted — which a stand-in that refuses it as the API does accepts.
#[tokio::test]
async fn extended_thinking_goes_back_signed_and_unchanged_through_a_tool_loop() {
    let redacted_stream = ANTHROPIC_TOOL_STREAM.replacen(
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"}}"#,
        1,
    )
    .replace("thinking_delta", "ignored_delta")
    .replace("signature_delta", "ignored_delta");
    for (first, expected) in [
        (
            ANTHROPIC_TOOL_STREAM.to_owned(),
            json!({ "type": "thinking", "thinking": "Six times seven.", "signature": "EqQBsig==" }),
        ),
        (redacted_stream, json!({ "type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix" })),
    ] {
        let (base_url, replay) =
            replay_server(vec![sse(&first), sse(ANTHROPIC_TEXT_STREAM)], 64).await;
        let server = server_on_anthropic(base_url).await;
        let agent = server
            .post_json(
                "/v1/agents",
                &json!({ "name": "thinker", "metadata": { "thinking_budget_tokens": 2048 } }),
            )
            .await;
        let agent_id: uuid::Uuid = agent["id"].as_str().unwrap().parse().unwrap();
        let run_id = server.start_run(agent_id, "What is 6*7?").await;
        let events = server.wait_for_run_end(agent_id, run_id).await;
        let end = events.last().unwrap();
        assert_eq!(end.kind, EventKind::RunCompleted, "{}", end.content);
        let requests = replay.requests.lock().unwrap();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0].1["thinking"], json!({ "type": "enabled", "budget_tokens": 2048 }));
        assert_eq!(requests[0].1["max_tokens"], json!(2048 + 4096));
        let follow_up = &requests[1].1["messages"][1];
        assert_eq!(follow_up["role"], "assistant");
        assert_eq!(follow_up["content"][0], expected);
        assert_eq!(follow_up["content"][2]["type"], "tool_use");
    }
    // A budget outside what the API takes is refused when the agent is created.
    let (base_url, _) = replay_server(vec![], 64).await;
    let server = server_on_anthropic(base_url).await;
    for budget in [json!(10), json!(1_000_000), json!("lots")] {
        let response = server
            .post("/v1/agents", &json!({ "metadata": { "thinking_budget_tokens": budget } }))
            .await;
        assert_eq!(response.status(), 422, "{budget}");
    }
    // Letta's llm_config asks for it the same way.
    let agent = server
        .post_json(
            "/v1/agents",
            &json!({ "name": "letta", "llm_config": { "enable_reasoner": true, "max_reasoning_tokens": 3000 } }),
        )
        .await;
    assert_eq!(agent["metadata"]["thinking_budget_tokens"], json!(3000), "{agent}");
}
