//! Provider adapters over real HTTP, against a local server that replays streams in each
//! provider's published wire format, split at arbitrary byte boundaries.

mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentstream_server::config::ProviderChoice;
use agentstream_server::provider::anthropic::{AnthropicConfig, AnthropicProvider};
use agentstream_server::provider::openai::{OpenAiConfig, OpenAiProvider};
use agentstream_server::provider::{
    ConversationMessage, Provider, ProviderError, ProviderEvent, ProviderRequest, ToolSpec,
};
use app::EventKind;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::Router;
use futures::StreamExt;
use serde_json::{json, Value};

/// One recorded answer: status, extra headers, body.
#[derive(Clone)]
struct Recorded {
    status: u16,
    headers: Vec<(&'static str, &'static str)>,
    body: String,
}

fn sse(body: &str) -> Recorded {
    Recorded {
        status: 200,
        headers: vec![("content-type", "text/event-stream")],
        body: body.to_owned(),
    }
}

#[derive(Default)]
struct Replay {
    answers: Mutex<VecDeque<Recorded>>,
    requests: Mutex<Vec<(HeaderMap, Value)>>,
    chunk_bytes: usize,
}

/// What Anthropic answers a request with thinking on whose last assistant turn with tool calls
/// does not start with its thinking block (signed, unchanged), as the API words it.
fn thinking_refusal(request: &Value) -> Option<Recorded> {
    request.get("thinking")?;
    let messages = request["messages"].as_array()?;
    let (index, last) = messages
        .iter()
        .enumerate()
        .rev()
        .find(|(_, message)| message["role"] == "assistant")?;
    let blocks = last["content"].as_array()?;
    if !blocks.iter().any(|block| block["type"] == "tool_use") {
        return None;
    }
    let first = &blocks[0];
    let signed = (first["type"] == "thinking" && first["signature"] == "EqQBsig==")
        || (first["type"] == "redacted_thinking" && first["data"] == "EmwKAhgBEgy3va3pzix");
    if signed {
        return None;
    }
    let message = format!(
        "messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns.",
        first["type"].as_str().unwrap_or("?")
    );
    Some(Recorded {
        status: 400,
        headers: vec![("content-type", "application/json")],
        body: json!({ "type": "error", "error": { "type": "invalid_request_error", "message": message } })
            .to_string(),
    })
}

async fn replay(State(replay): State<Arc<Replay>>, headers: HeaderMap, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let refusal = thinking_refusal(&request);
    replay.requests.lock().unwrap().push((headers, request));
    if let Some(refusal) = refusal {
        return Response::builder()
            .status(refusal.status)
            .header("content-type", "application/json")
            .body(Body::from(refusal.body))
            .unwrap();
    }
    let answer = replay
        .answers
        .lock()
        .unwrap()
        .pop_front()
        .expect("no recorded answer left");
    let chunk_bytes = replay.chunk_bytes.max(1);
    let bytes = answer.body.into_bytes();
    let chunks: Vec<Result<Bytes, std::io::Error>> = bytes
        .chunks(chunk_bytes)
        .map(|chunk| Ok(Bytes::copy_from_slice(chunk)))
        .collect();
    // Each piece goes out on its own, so the client really sees split events.
    let body = Body::from_stream(futures::stream::iter(chunks).then(|chunk| async {
        tokio::time::sleep(Duration::from_micros(200)).await;
        chunk
    }));
    let mut response = Response::builder().status(answer.status);
    for (name, value) in answer.headers {
        response = response.header(name, value);
    }
    response.body(body).unwrap()
}

/// Starts a replay server answering with `answers` in turn; returns its base URL and state.
async fn replay_server(answers: Vec<Recorded>, chunk_bytes: usize) -> (String, Arc<Replay>) {
    let state = Arc::new(Replay {
        answers: Mutex::new(answers.into()),
        requests: Mutex::new(Vec::new()),
        chunk_bytes,
    });
    let app = Router::new().fallback(replay).with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}"), state)
}

/// A test server whose default provider is "Anthropic" at `base_url` (a replay server).
async fn server_on_anthropic(base_url: String) -> common::TestServer {
    common::TestServer::start_with(|config| {
        config.provider = ProviderChoice::Anthropic(AnthropicConfig {
            api_key: "test-key".into(),
            base_url,
            model: "claude-test".into(),
        });
    })
    .await
}

/// Anthropic's 529 answer, asking to retry after `retry_after` seconds.
fn overloaded(retry_after: &'static str) -> Recorded {
    Recorded {
        status: 529,
        headers: vec![
            ("content-type", "application/json"),
            ("retry-after", retry_after),
        ],
        body: r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            .into(),
    }
}

fn request() -> ProviderRequest {
    ProviderRequest {
        system: Some("Be brief.".into()),
        model: None,
        messages: vec![ConversationMessage::User {
            text: "What is 6*7?".into(),
        }],
        tools: vec![ToolSpec {
            name: "calculator".into(),
            description: "math".into(),
            input_schema: json!({"type": "object"}),
        }],
        thinking_budget_tokens: None,
    }
}

async fn collect(provider: &dyn Provider) -> Vec<Result<ProviderEvent, ProviderError>> {
    provider.stream(request()).collect().await
}

const ANTHROPIC_TOOL_STREAM: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Six times seven."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBsig=="}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: ping
data: {"type": "ping"}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Let me "}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"calculate."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: brand_new_event
data: {"type":"brand_new_event","detail":"clients must ignore this"}

event: content_block_start
data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01","name":"calculator","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"expre"}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"ssion\": \"6"}}

event: content_block_delta
data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"*7\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":2}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}

event: message_stop
data: {"type":"message_stop"}

"#;

const ANTHROPIC_TEXT_STREAM: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_02","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"usage":{"input_tokens":60,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"It is 42."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}

event: message_stop
data: {"type":"message_stop"}

"#;

fn anthropic(base_url: String) -> AnthropicProvider {
    AnthropicProvider::new(AnthropicConfig {
        api_key: "test-key".into(),
        base_url,
        model: "claude-test".into(),
    })
}

fn expected_anthropic_events() -> Vec<ProviderEvent> {
    vec![
        ProviderEvent::ThinkingDelta("Six times seven.".into()),
        ProviderEvent::ThinkingSignature("EqQBsig==".into()),
        ProviderEvent::TextDelta("Let me ".into()),
        ProviderEvent::TextDelta("calculate.".into()),
        ProviderEvent::ToolCallStart {
            id: "toolu_01".into(),
            name: "calculator".into(),
        },
        ProviderEvent::ToolCallInputDelta {
            id: "toolu_01".into(),
            json: "".into(),
        },
        ProviderEvent::ToolCallInputDelta {
            id: "toolu_01".into(),
            json: "{\"expre".into(),
        },
        ProviderEvent::ToolCallInputDelta {
            id: "toolu_01".into(),
            json: "ssion\": \"6".into(),
        },
        ProviderEvent::ToolCallInputDelta {
            id: "toolu_01".into(),
            json: "*7\"}".into(),
        },
        ProviderEvent::ToolCallEnd {
            id: "toolu_01".into(),
        },
        ProviderEvent::Usage {
            input_tokens: 25,
            output_tokens: 42,
        },
        ProviderEvent::Stop {
            reason: "tool_use".into(),
        },
    ]
}

#[tokio::test]
async fn anthropic_stream_parses_the_same_however_it_is_split() {
    for chunk_bytes in [1, 3, 7, 64, 4096] {
        let (base_url, replay) = replay_server(vec![sse(ANTHROPIC_TOOL_STREAM)], chunk_bytes).await;
        let events = collect(&anthropic(base_url)).await;
        let events: Vec<ProviderEvent> = events.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            events,
            expected_anthropic_events(),
            "split every {chunk_bytes} bytes"
        );
        let (headers, body) = replay.requests.lock().unwrap()[0].clone();
        assert_eq!(headers["x-api-key"], "test-key");
        assert_eq!(headers["anthropic-version"], "2023-06-01");
        assert_eq!(body["stream"], true);
        assert_eq!(body["system"], "Be brief.");
        assert_eq!(body["model"], "claude-test");
        assert_eq!(body["tools"][0]["name"], "calculator");
        assert_eq!(
            body["messages"][0],
            json!({"role": "user", "content": "What is 6*7?"})
        );
    }
}

#[tokio::test]
async fn anthropic_mid_stream_error_and_http_overload_are_classified() {
    let mid_stream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n\
event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n\
event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let overloaded = overloaded("2");
    let cut = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n";
    let (base_url, _) = replay_server(vec![sse(mid_stream), overloaded, sse(cut)], 5).await;
    let provider = anthropic(base_url);

    let events = collect(&provider).await;
    assert_eq!(
        events[0].as_ref().unwrap(),
        &ProviderEvent::TextDelta("Hi".into())
    );
    let error = events[1].as_ref().unwrap_err();
    assert_eq!(
        (error.kind.as_str(), error.retryable),
        ("overloaded_error", true)
    );
    assert_eq!(events.len(), 2);

    let events = collect(&provider).await;
    let error = events[0].as_ref().unwrap_err();
    assert_eq!(error.kind, "overloaded_error");
    assert!(error.retryable);
    assert_eq!(error.retry_after_ms, Some(2000));

    let events = collect(&provider).await;
    let error = events.last().unwrap().as_ref().unwrap_err();
    assert_eq!(
        error.kind, "connection_error",
        "a stream cut before message_stop is an error"
    );
}

const OPENAI_TOOL_STREAM: &str = r#"data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Let me "},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"calculate."},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"calculator","arguments":""}}]},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"expr"}}]},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ession\": \"6*7\"}"}}]},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}

data: [DONE]

"#;

#[tokio::test]
async fn openai_stream_merges_tool_call_pieces_by_index_however_it_is_split() {
    for chunk_bytes in [1, 4, 9, 4096] {
        let (base_url, replay) = replay_server(vec![sse(OPENAI_TOOL_STREAM)], chunk_bytes).await;
        let provider = OpenAiProvider::new(OpenAiConfig {
            api_key: Some("sk-test".into()),
            base_url,
            model: "m".into(),
        });
        let events: Vec<ProviderEvent> = collect(&provider)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            events,
            vec![
                ProviderEvent::TextDelta("Let me ".into()),
                ProviderEvent::TextDelta("calculate.".into()),
                ProviderEvent::ToolCallStart {
                    id: "call_1".into(),
                    name: "calculator".into()
                },
                ProviderEvent::ToolCallInputDelta {
                    id: "call_1".into(),
                    json: "{\"expr".into()
                },
                ProviderEvent::ToolCallInputDelta {
                    id: "call_1".into(),
                    json: "ession\": \"6*7\"}".into()
                },
                ProviderEvent::ToolCallEnd {
                    id: "call_1".into(),
                },
                ProviderEvent::Usage {
                    input_tokens: 10,
                    output_tokens: 5
                },
                ProviderEvent::Stop {
                    reason: "tool_use".into()
                },
            ],
            "split every {chunk_bytes} bytes"
        );
        let (headers, body) = replay.requests.lock().unwrap()[0].clone();
        assert_eq!(headers["authorization"], "Bearer sk-test");
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "Be brief."})
        );
        assert_eq!(body["tools"][0]["function"]["name"], "calculator");
    }
}

#[tokio::test]
async fn openai_rate_limit_is_retryable_with_its_retry_after() {
    let limited = Recorded {
        status: 429,
        headers: vec![("content-type", "application/json"), ("retry-after", "1.5")],
        body: r#"{"error":{"message":"Rate limit reached","type":"rate_limit_error"}}"#.into(),
    };
    let (base_url, _) = replay_server(vec![limited], 4096).await;
    let provider = OpenAiProvider::new(OpenAiConfig {
        api_key: None,
        base_url,
        model: "m".into(),
    });
    let events = collect(&provider).await;
    let error = events[0].as_ref().unwrap_err();
    assert_eq!(error.kind, "rate_limit_error");
    assert!(error.retryable);
    assert_eq!(error.retry_after_ms, Some(1500));
}

/// The whole path: a run on a server whose provider is "Anthropic" (the replay server): the tool
/// call runs, its result goes back to the model in Anthropic's format, and the reply lands in the
/// log.
#[tokio::test]
async fn an_anthropic_run_uses_tools_end_to_end() {
    let (base_url, replay) = replay_server(
        vec![sse(ANTHROPIC_TOOL_STREAM), sse(ANTHROPIC_TEXT_STREAM)],
        11,
    )
    .await;
    let server = server_on_anthropic(base_url).await;
    let agent_id = server.create_agent().await;
    let run_id = server.start_run(agent_id, "What is 6*7?").await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    common::assert_contiguous(&events, 1);
    let end = events.last().unwrap();
    assert_eq!(end.kind, EventKind::RunCompleted);
    assert_eq!(end.content["stop_reason"], "end_turn");
    assert_eq!(
        end.content["usage"],
        json!({"input_tokens": 85, "output_tokens": 47})
    );
    let mut timeline = app::timeline::Timeline::new();
    timeline.apply_all(events.clone());
    let thinking = timeline
        .messages()
        .iter()
        .find(|m| m.kind == EventKind::Thinking)
        .unwrap();
    assert_eq!(
        thinking.content,
        json!({"text": "Six times seven.", "signature": "EqQBsig=="})
    );
    // The call has the server's id; the provider's is kept beside it.
    let call = timeline
        .messages()
        .iter()
        .find(|m| m.kind == EventKind::ToolCall)
        .unwrap();
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
    assert_eq!(
        messages[1]["content"][1]["input"],
        json!({"expression": "6*7"})
    );
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
    let (base_url, replay) = replay_server(
        vec![overloaded.clone(), overloaded, sse(ANTHROPIC_TEXT_STREAM)],
        64,
    )
    .await;
    let server = server_on_anthropic(base_url).await;
    let agent_id = server.create_agent().await;
    let run_id = server.start_run(agent_id, "hi").await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    assert_eq!(replay.requests.lock().unwrap().len(), 3);
    let notices: Vec<_> = events
        .iter()
        .filter(|event| event.kind == EventKind::Loading)
        .collect();
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
    let agent_id = server.create_agent().await;
    let run_id = server.start_run(agent_id, "hi").await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    assert_eq!(
        replay.requests.lock().unwrap().len(),
        agentstream_server::agent::PROVIDER_RETRIES_MAX as usize + 1
    );
    let error = events
        .iter()
        .find(|event| event.kind == EventKind::Error)
        .unwrap();
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
        .http
        .post(server.url("/v1/agents"))
        .json(&json!({ "name": "claude", "metadata": { "provider": "anthropic" } }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let agent: Value = response.json().await.unwrap();
    let agent_id = uuid::Uuid::parse_str(agent["id"].as_str().unwrap()).unwrap();
    let run_id = server.start_run(agent_id, "hi").await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    assert_eq!(events[0].metadata["provider"], "anthropic");
    assert_eq!(replay.requests.lock().unwrap().len(), 1);

    // The default agent still uses the scripted provider.
    let plain = server.create_agent().await;
    let run_id = server.start_run(plain, "hi").await;
    let events = server.wait_for_run_end(plain, run_id).await;
    assert_eq!(events[0].metadata["provider"], "scripted");

    let refused = server
        .http
        .post(server.url("/v1/agents"))
        .json(&json!({ "metadata": { "provider": "openai" } }))
        .send()
        .await
        .unwrap();
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

/// Two calls of one step, both with an empty id (and so the same one).
const ANTHROPIC_EMPTY_IDS_STREAM: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_03","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"","name":"calculator","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"expression\": \"6*7\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"","name":"calculator","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"expression\": \"1+1\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}

event: message_stop
data: {"type":"message_stop"}

"#;

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
    assert_eq!(
        end.content["stop_reason"], "requires_approval",
        "{}",
        end.content
    );
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
            .http
            .post(server.url(&format!("/v1/agents/{agent_id}/approvals")))
            .json(&json!({ "call_id": call_id, "approve": true }))
            .send()
            .await
            .unwrap();
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
        let uses: Vec<&Value> = messages[1]["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|block| &block["id"])
            .collect();
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
        (
            redacted_stream,
            json!({ "type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix" }),
        ),
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
        assert_eq!(
            requests[0].1["thinking"],
            json!({ "type": "enabled", "budget_tokens": 2048 })
        );
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
            .http
            .post(server.url("/v1/agents"))
            .json(&json!({ "metadata": { "thinking_budget_tokens": budget } }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 422, "{budget}");
    }
    // Letta's llm_config asks for it the same way.
    let agent = server
        .post_json(
            "/v1/agents",
            &json!({ "name": "letta", "llm_config": { "enable_reasoner": true, "max_reasoning_tokens": 3000 } }),
        )
        .await;
    assert_eq!(
        agent["metadata"]["thinking_budget_tokens"],
        json!(3000),
        "{agent}"
    );
}
