//! What an operator's tracer and log search see: a run as a trace under the caller's request,
//! exported over OTLP/HTTP protobuf to a receiver that decodes it; the inspector's link to it;
//! JSON log lines naming the request and its trace.

use crate::common;

use crate::common::RequestExt;
use common::processes::free_port;
use common::{wait_until, TestServer};
use serde_json::{json, Value};

/// What an OTLP/HTTP receiver got: every span of every request, decoded from the protobuf.
#[derive(Clone, Default)]
struct Received {
    spans: std::sync::Arc<std::sync::Mutex<Vec<opentelemetry_proto::tonic::trace::v1::Span>>>,
    resources: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

/// An OTLP/HTTP traces receiver on port 0: `POST /v1/traces` with a protobuf body.
async fn otlp_receiver() -> (String, Received) {
    use axum::body::Bytes;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message;
    let received = Received::default();
    let router = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post({
            let received = received.clone();
            move |headers: axum::http::HeaderMap, body: Bytes| {
                let received = received.clone();
                async move {
                    assert_eq!(headers["content-type"], "application/x-protobuf");
                    let request = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                    for resource_spans in request.resource_spans {
                        if let Some(resource) = resource_spans.resource {
                            for attribute in resource.attributes {
                                received.resources.lock().unwrap().push(format!(
                                    "{}={}",
                                    attribute.key,
                                    text(&attribute.value)
                                ));
                            }
                        }
                        for scope in resource_spans.scope_spans {
                            received.spans.lock().unwrap().extend(scope.spans);
                        }
                    }
                    axum::http::StatusCode::OK
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (format!("http://{address}/v1/traces"), received)
}

fn text(value: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
    match value.as_ref().and_then(|value| value.value.as_ref()) {
        Some(V::StringValue(text)) => text.clone(),
        Some(V::IntValue(number)) => number.to_string(),
        Some(V::BoolValue(flag)) => flag.to_string(),
        Some(V::DoubleValue(number)) => number.to_string(),
        Some(V::ArrayValue(array)) => array
            .values
            .iter()
            .map(|value| text(&Some(value.clone())))
            .collect::<Vec<_>>()
            .join(","),
        _ => String::new(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn attribute(span: &opentelemetry_proto::tonic::trace::v1::Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|attribute| attribute.key == key)
        .map(|attribute| text(&attribute.value))
}

/// A request with a W3C `traceparent` starts a run: the server span is the caller's span's
/// child, the run's `invoke_agent` span the server span's, and each model call (`chat`) and tool
/// call (`execute_tool`) the run's — all in the caller's trace, exported over OTLP/HTTP
/// protobuf; the run's `run_started` names the trace.
#[tokio::test]
async fn a_run_is_a_trace_under_the_callers_request() {
    let (endpoint, received) = otlp_receiver().await;
    let server =
        TestServer::start_with(|config| config.otlp_traces_endpoint = Some(endpoint)).await;
    let agent_id = server.create_agent().await;
    let (trace_id, caller_span) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let accepted: Value = server
        .http
        .post(server.url(&format!("/v1/agents/{agent_id}/runs")))
        .header("traceparent", format!("00-{trace_id}-{caller_span}-01"))
        .json(&json!({ "content": "/tools clock" }))
        .answer()
        .await;
    let run_id: uuid::Uuid = accepted["run_id"].as_str().unwrap().parse().unwrap();
    let log = server.wait_for_run_end(agent_id, run_id).await;
    let started = log.iter().find(|event| event.kind == app::EventKind::RunStarted).unwrap();
    assert_eq!(started.metadata["trace_id"], trace_id, "run_started names its trace");

    let spans = wait_until("the run's spans at the receiver", || async {
        let spans = received.spans.lock().unwrap().clone();
        let names: Vec<&str> = spans.iter().map(|span| span.name.as_str()).collect();
        let chats = names.iter().filter(|name| name.starts_with("chat ")).count();
        (names.iter().any(|name| name.starts_with("invoke_agent"))
            && names.contains(&"execute_tool clock")
            && chats == 2)
            .then_some(spans)
    })
    .await;
    let named = |prefix: &str| -> Vec<&opentelemetry_proto::tonic::trace::v1::Span> {
        spans.iter().filter(|span| span.name.starts_with(prefix)).collect()
    };
    // (The test's other requests — creating the agent, reading the log — are traces of their
    // own.)
    for span in spans.iter().filter(|span| {
        ["POST /v1/agents/{id}/runs", "invoke_agent", "chat ", "execute_tool"]
            .iter()
            .any(|prefix| span.name.starts_with(prefix))
    }) {
        assert_eq!(hex(&span.trace_id), trace_id, "{} is in the caller's trace", span.name);
    }
    let server_span = named("POST /v1/agents/{id}/runs")[0];
    assert_eq!(hex(&server_span.parent_span_id), caller_span);
    assert_eq!(server_span.kind, 2, "SPAN_KIND_SERVER");
    assert_eq!(attribute(server_span, "http.response.status_code").as_deref(), Some("202"));
    let run = named("invoke_agent")[0];
    assert_eq!(run.parent_span_id, server_span.span_id);
    assert_eq!(attribute(run, "gen_ai.operation.name").as_deref(), Some("invoke_agent"));
    assert_eq!(attribute(run, "gen_ai.agent.id"), Some(agent_id.to_string()));
    assert_eq!(attribute(run, "gen_ai.conversation.id"), Some(agent_id.to_string()));
    assert_eq!(attribute(run, "agentstream.run.id"), Some(run_id.to_string()));
    assert_eq!(attribute(run, "agentstream.run.outcome").as_deref(), Some("completed"));
    let (first, last) = (log.first().unwrap().seq, log.last().unwrap().seq);
    assert_eq!(attribute(run, "agentstream.run.first_seq"), Some(first.to_string()));
    assert_eq!(attribute(run, "agentstream.run.last_seq"), Some(last.to_string()));
    for chat in named("chat ") {
        assert_eq!(chat.parent_span_id, run.span_id);
        assert_eq!(attribute(chat, "gen_ai.provider.name").as_deref(), Some("scripted"));
        assert!(attribute(chat, "gen_ai.usage.output_tokens").unwrap().parse::<u64>().unwrap() > 0);
        assert!(chat.events.iter().any(|event| event.name == "first_chunk"));
    }
    let tool = named("execute_tool clock")[0];
    assert_eq!(tool.parent_span_id, run.span_id);
    assert_eq!(attribute(tool, "gen_ai.tool.name").as_deref(), Some("clock"));
    let call_id = log
        .iter()
        .find_map(|event| event.content.get("tool_call_id").and_then(Value::as_str))
        .unwrap();
    assert_eq!(attribute(tool, "gen_ai.tool.call.id").as_deref(), Some(call_id));
    assert!(
        received.resources.lock().unwrap().contains(&"service.name=agentstream".to_owned()),
        "the service is named"
    );
    // No prompt or completion text in any span.
    let reply = common::reply_text(&log, run_id);
    for span in spans.iter().filter(|span| hex(&span.trace_id) == trace_id) {
        for attribute in &span.attributes {
            let value = text(&attribute.value);
            assert!(value.len() < 8 || !reply.contains(&value), "{}: {value}", attribute.key);
        }
    }
}

/// `AGENTSTREAM_LOG_FORMAT=json`: one JSON object a line; a request's lines carry its request
/// id, and with tracing on its trace and span ids (the caller's trace, from `traceparent`).
#[tokio::test]
async fn json_log_lines_carry_the_request_and_its_trace() {
    use tokio::io::AsyncBufReadExt;
    let (endpoint, _received) = otlp_receiver().await;
    let directory = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_server"))
        .env("LEPTOS_SITE_ADDR", format!("127.0.0.1:{port}"))
        .env("DATABASE_URL", format!("sqlite://{}", directory.path().join("log.db").display()))
        .env("AGENTSTREAM_LOG_FORMAT", "json")
        .env("RUST_LOG", "agentstream_server=debug")
        .env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let http = agentstream_server::http_client::client();
    let base = format!("http://127.0.0.1:{port}");
    wait_until("the server to come up", || async {
        let response = http.get(format!("{base}/healthz")).send().await;
        response.is_ok_and(|response| response.status().is_success()).then_some(())
    })
    .await;
    let trace_id = "0af7651916cd43dd8448eb211c80319c";
    let response = http
        .get(format!("{base}/v1/agents"))
        .header("x-request-id", "json-log-test-1")
        .header("traceparent", format!("00-{trace_id}-b7ad6b7169203331-01"))
        .sent()
        .await;
    assert_eq!(response.status(), 200);
    let line = tokio::time::timeout(common::WAIT_MAX, async {
        loop {
            let line = lines.next_line().await.unwrap().expect("the server's log goes on");
            let parsed: Value = serde_json::from_str(&line)
                .unwrap_or_else(|error| panic!("not JSON ({error}): {line}"));
            if parsed["span"]["request_id"] == "json-log-test-1" {
                return parsed;
            }
        }
    })
    .await
    .expect("a log line of the request");
    assert_eq!(line["span"]["trace_id"], trace_id, "{line}");
    assert_eq!(line["span"]["span_id"].as_str().map(str::len), Some(16), "{line}");
    assert_eq!(line["span"]["path"], "/v1/agents", "{line}");
    child.kill().await.unwrap();
}
