//! Provider adapters over real HTTP, against a local server that replays streams in each
//! provider's published wire format, split at arbitrary byte boundaries.

use crate::common;
mod runs;
mod tls;

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
    let (index, last) =
        messages.iter().enumerate().rev().find(|(_, message)| message["role"] == "assistant")?;
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
    let answer = replay.answers.lock().unwrap().pop_front().expect("no recorded answer left");
    let chunk_bytes = replay.chunk_bytes.max(1);
    let bytes = answer.body.into_bytes();
    let chunks: Vec<Result<Bytes, std::io::Error>> =
        bytes.chunks(chunk_bytes).map(|chunk| Ok(Bytes::copy_from_slice(chunk))).collect();
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
        headers: vec![("content-type", "application/json"), ("retry-after", retry_after)],
        body: r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            .into(),
    }
}

fn request() -> ProviderRequest {
    ProviderRequest {
        system: Some("Be brief.".into()),
        model: None,
        messages: vec![ConversationMessage::User { text: "What is 6*7?".into() }],
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

/// The providers' streams, byte for byte as their APIs send them (`streams/`).
const ANTHROPIC_TOOL_STREAM: &str = include_str!("streams/anthropic_tool.sse");

const ANTHROPIC_TEXT_STREAM: &str = include_str!("streams/anthropic_text.sse");

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
        ProviderEvent::ToolCallStart { id: "toolu_01".into(), name: "calculator".into() },
        ProviderEvent::ToolCallInputDelta { id: "toolu_01".into(), json: "".into() },
        ProviderEvent::ToolCallInputDelta { id: "toolu_01".into(), json: "{\"expre".into() },
        ProviderEvent::ToolCallInputDelta { id: "toolu_01".into(), json: "ssion\": \"6".into() },
        ProviderEvent::ToolCallInputDelta { id: "toolu_01".into(), json: "*7\"}".into() },
        ProviderEvent::ToolCallEnd { id: "toolu_01".into() },
        ProviderEvent::Usage { input_tokens: 25, output_tokens: 42 },
        ProviderEvent::Stop { reason: "tool_use".into() },
    ]
}

#[tokio::test]
async fn anthropic_stream_parses_the_same_however_it_is_split() {
    for chunk_bytes in [1, 3, 7, 64, 4096] {
        let (base_url, replay) = replay_server(vec![sse(ANTHROPIC_TOOL_STREAM)], chunk_bytes).await;
        let events = collect(&anthropic(base_url)).await;
        let events: Vec<ProviderEvent> = events.into_iter().map(Result::unwrap).collect();
        assert_eq!(events, expected_anthropic_events(), "split every {chunk_bytes} bytes");
        let (headers, body) = replay.requests.lock().unwrap()[0].clone();
        assert_eq!(headers["x-api-key"], "test-key");
        assert_eq!(headers["anthropic-version"], "2023-06-01");
        assert_eq!(body["stream"], true);
        assert_eq!(body["system"], "Be brief.");
        assert_eq!(body["model"], "claude-test");
        assert_eq!(body["tools"][0]["name"], "calculator");
        assert_eq!(body["messages"][0], json!({"role": "user", "content": "What is 6*7?"}));
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
    assert_eq!(events[0].as_ref().unwrap(), &ProviderEvent::TextDelta("Hi".into()));
    let error = events[1].as_ref().unwrap_err();
    assert_eq!((error.kind.as_str(), error.retryable), ("overloaded_error", true));
    assert_eq!(events.len(), 2);

    let events = collect(&provider).await;
    let error = events[0].as_ref().unwrap_err();
    assert_eq!(error.kind, "overloaded_error");
    assert!(error.retryable);
    assert_eq!(error.retry_after_ms, Some(2000));

    let events = collect(&provider).await;
    let error = events.last().unwrap().as_ref().unwrap_err();
    assert_eq!(error.kind, "connection_error", "a stream cut before message_stop is an error");
}

const OPENAI_TOOL_STREAM: &str = include_str!("streams/openai_tool.sse");

#[tokio::test]
async fn openai_stream_merges_tool_call_pieces_by_index_however_it_is_split() {
    for chunk_bytes in [1, 4, 9, 4096] {
        let (base_url, replay) = replay_server(vec![sse(OPENAI_TOOL_STREAM)], chunk_bytes).await;
        let provider = OpenAiProvider::new(OpenAiConfig {
            api_key: Some("sk-test".into()),
            base_url,
            model: "m".into(),
        });
        let events: Vec<ProviderEvent> =
            collect(&provider).await.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            events,
            vec![
                ProviderEvent::TextDelta("Let me ".into()),
                ProviderEvent::TextDelta("calculate.".into()),
                ProviderEvent::ToolCallStart { id: "call_1".into(), name: "calculator".into() },
                ProviderEvent::ToolCallInputDelta { id: "call_1".into(), json: "{\"expr".into() },
                ProviderEvent::ToolCallInputDelta {
                    id: "call_1".into(),
                    json: "ession\": \"6*7\"}".into()
                },
                ProviderEvent::ToolCallEnd { id: "call_1".into() },
                ProviderEvent::Usage { input_tokens: 10, output_tokens: 5 },
                ProviderEvent::Stop { reason: "tool_use".into() },
            ],
            "split every {chunk_bytes} bytes"
        );
        let (headers, body) = replay.requests.lock().unwrap()[0].clone();
        assert_eq!(headers["authorization"], "Bearer sk-test");
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["messages"][0], json!({"role": "system", "content": "Be brief."}));
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
    let provider = OpenAiProvider::new(OpenAiConfig { api_key: None, base_url, model: "m".into() });
    let events = collect(&provider).await;
    let error = events[0].as_ref().unwrap_err();
    assert_eq!(error.kind, "rate_limit_error");
    assert!(error.retryable);
    assert_eq!(error.retry_after_ms, Some(1500));
}

/// Two calls of one step, both with an empty id (and so the same one).
const ANTHROPIC_EMPTY_IDS_STREAM: &str = include_str!("streams/anthropic_empty_ids.sse");
