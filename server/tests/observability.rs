//! What an operator sees: `GET /metrics` (its access rule, its own listener, the figures a run
//! leaves, no unbounded labels), a real Prometheus scraping it, request ids.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::processes::free_port;
use common::{wait_until, TestServer};
use serde_json::{json, Value};

const TOKEN: &str = "operator-secret";

/// The samples of a Prometheus text exposition: `name{labels}` → value.
fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse().ok()?))
        })
        .collect()
}

async fn scrape(server: &TestServer) -> String {
    let response = server
        .http
        .get(server.url("/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    response.text().await.unwrap()
}

#[tokio::test]
async fn metrics_count_what_a_run_did_under_bounded_labels() {
    let server = TestServer::start_with(|config| config.api_token = Some(TOKEN.into())).await;
    let refused = server
        .http
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        refused.status(),
        401,
        "the operator's figures need the token"
    );

    let agent: Value = server
        .http
        .post(server.url("/v1/agents"))
        .bearer_auth(TOKEN)
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let agent_id = agent["id"].as_str().unwrap().to_owned();
    let accepted: Value = server
        .http
        .post(server.url(&format!("/v1/agents/{agent_id}/runs")))
        .bearer_auth(TOKEN)
        .json(&json!({ "content": "/tools clock; calculator 6*7" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run_id = accepted["run_id"].as_str().unwrap().to_owned();
    let log: Vec<Value> = wait_until("the run's end", || async {
        let page: Value = server
            .http
            .get(server.url(&format!("/v1/agents/{agent_id}/events?since=0&limit=1000")))
            .bearer_auth(TOKEN)
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        let events = page["events"].as_array()?.clone();
        events
            .iter()
            .any(|event| event["kind"] == "run_completed")
            .then_some(events)
    })
    .await;

    let text = scrape(&server).await;
    let figures = samples(&text);
    let figure = |series: &str| {
        *figures
            .get(series)
            .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
    };
    assert_eq!(
        figure("agentstream_events_appended_total"),
        log.len() as f64,
        "every committed event counted once"
    );
    assert_eq!(figure("agentstream_runs_started_total"), 1.0);
    assert_eq!(
        figure(r#"agentstream_runs_ended_total{outcome="completed",stop_reason="end_turn"}"#),
        1.0
    );
    assert_eq!(figure("agentstream_run_duration_seconds_count"), 1.0);
    // Two model calls: the one that asked for the tools, the one that reported their results.
    let calls = r#"{gen_ai_operation_name="chat",gen_ai_provider_name="scripted",error_type=""}"#;
    assert_eq!(
        figure(&format!(
            "gen_ai_client_operation_duration_seconds_count{calls}"
        )),
        2.0
    );
    assert_eq!(
        figure(&format!(
            "gen_ai_client_operation_time_to_first_chunk_seconds_count{calls}"
        )),
        2.0
    );
    let tokens = |kind: &str| {
        format!(
            r#"gen_ai_client_token_usage_count{{gen_ai_operation_name="chat",gen_ai_provider_name="scripted",gen_ai_token_type="{kind}"}}"#
        )
    };
    assert_eq!(figure(&tokens("input")), 2.0);
    assert_eq!(figure(&tokens("output")), 2.0);
    for tool in ["clock", "calculator"] {
        assert_eq!(
            figure(&format!(
                r#"agentstream_tool_call_duration_seconds_count{{gen_ai_tool_name="{tool}",outcome="ok"}}"#
            )),
            1.0,
            "{tool}"
        );
    }
    assert_eq!(
        figure(
            r#"agentstream_http_requests_total{route="/v1/agents/{id}/runs",method="POST",status_class="2xx"}"#
        ),
        1.0
    );
    assert_eq!(
        figure(
            r#"agentstream_http_requests_total{route="/metrics",method="GET",status_class="4xx"}"#
        ),
        1.0,
        "the refused scrape, under its route"
    );
    assert!(figure("agentstream_commits_total") >= 1.0);
    assert!(figure("agentstream_database_size_bytes") > 0.0);
    assert_eq!(figure("agentstream_runs_in_flight"), 0.0);
    assert!(figure(r#"agentstream_connections_max{kind="websocket"}"#) >= 1.0);
    // No id of anything the server holds is a label value.
    for id in [&agent_id, &run_id] {
        assert!(!text.contains(id.as_str()), "{id} in the metrics:\n{text}");
    }
}

#[tokio::test]
async fn metrics_addr_serves_the_scrape_alone_without_the_token() {
    let port = free_port();
    let server = TestServer::start_with(|config| {
        config.api_token = Some(TOKEN.into());
        config.metrics_addr = Some(format!("127.0.0.1:{port}").parse().unwrap());
    })
    .await;
    let http = reqwest::Client::new();
    let scraped = http
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(scraped.status(), 200);
    assert!(scraped
        .text()
        .await
        .unwrap()
        .contains("# TYPE agentstream_events_appended_total counter"));
    let other = http
        .get(format!("http://127.0.0.1:{port}/v1/agents"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        other.status(),
        404,
        "the metrics address serves nothing else"
    );
    let main = server
        .http
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(main.status(), 401, "the main address still wants the token");
}

#[tokio::test]
async fn every_answer_has_a_request_id_and_a_sensible_one_is_kept() {
    let server = TestServer::start().await;
    // (path, the caller's id, the id the answer carries: `None` = one the server made)
    let cases = [
        ("/healthz", None, None),
        ("/v1/agents/nope", Some("app-req-42"), Some("app-req-42")),
        ("/healthz", Some("no spaces please"), None),
    ];
    for (path, sent, expected) in cases {
        let mut request = server.http.get(server.url(path));
        if let Some(sent) = sent {
            request = request.header("x-request-id", sent);
        }
        let response = request.send().await.unwrap();
        let id = response.headers()["x-request-id"]
            .to_str()
            .unwrap()
            .to_owned();
        match expected {
            Some(expected) => assert_eq!(id, expected),
            None => assert!(
                id.len() == 32 && id.bytes().all(|byte| byte.is_ascii_hexdigit()),
                "{path} {sent:?}: {id}"
            ),
        }
    }
}

/// Debian's Prometheus scrapes the server's metrics address every second; its query API then
/// answers with the run's figures.
#[tokio::test]
async fn a_real_prometheus_scrapes_the_server() {
    let prometheus =
        std::env::var("AGENTSTREAM_PROMETHEUS").unwrap_or_else(|_| "prometheus".into());
    let metrics_port = free_port();
    let server = TestServer::start_with(|config| {
        config.metrics_addr = Some(format!("127.0.0.1:{metrics_port}").parse().unwrap());
    })
    .await;
    let agent_id = server.create_agent().await;
    let run_id = server.start_run(agent_id, "/tools clock").await;
    server.wait_for_run_end(agent_id, run_id).await;

    let directory = tempfile::tempdir().unwrap();
    let config = directory.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: agentstream\n    \
             static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
        ),
    )
    .unwrap();
    let web_port = free_port();
    let mut child = tokio::process::Command::new(&prometheus)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", directory.path().join("tsdb").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{web_port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|error| {
            panic!("cannot start {prometheus:?} ({error}): the test command installs Debian's prometheus")
        });
    let http = reqwest::Client::new();
    let query = |expression: &'static str| {
        let http = http.clone();
        async move {
            let answer: Value = http
                .get(format!("http://127.0.0.1:{web_port}/api/v1/query"))
                .query(&[("query", expression)])
                .timeout(Duration::from_secs(2))
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            let value = answer["data"]["result"][0]["value"][1].as_str()?;
            value.parse::<f64>().ok()
        }
    };
    let up = wait_until("Prometheus to scrape the server", || async {
        query(r#"up{job="agentstream"}"#)
            .await
            .filter(|up| *up == 1.0)
    })
    .await;
    assert_eq!(up, 1.0);
    let ended = wait_until("the run's end in Prometheus", || async {
        query(r#"sum(agentstream_runs_ended_total{outcome="completed"})"#).await
    })
    .await;
    assert_eq!(ended, 1.0);
    let output_tokens = wait_until("the token usage in Prometheus", || async {
        query(r#"sum(gen_ai_client_token_usage_sum{gen_ai_token_type="output"})"#).await
    })
    .await;
    assert!(output_tokens > 0.0, "{output_tokens}");

    // The dashboard's every expression parses in this Prometheus, and names only series the
    // server exports (or ones that appear only once what they count has happened).
    let dashboard: Value = serde_json::from_str(include_str!(
        "../../examples/operations/grafana-dashboard.json"
    ))
    .unwrap();
    let names: Value = http
        .get(format!(
            "http://127.0.0.1:{web_port}/api/v1/label/__name__/values"
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let scraped: Vec<&str> = names["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let labels: Value = http
        .get(format!("http://127.0.0.1:{web_port}/api/v1/labels"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let label_names: Vec<&str> = labels["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let after_it_happens = [
        "agentstream_store_errors_total",
        "agentstream_mcp_connections",
        "agentstream_mcp_reconnects_total",
        "agentstream_subscribers",
        "agentstream_frames_sent_total",
    ];
    let mut expressions = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expression = target["expr"].as_str().unwrap();
            expressions += 1;
            let answer: Value = http
                .get(format!("http://127.0.0.1:{web_port}/api/v1/query"))
                .query(&[("query", expression)])
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(answer["status"], "success", "{expression}: {answer}");
            for name in expression
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|word| word.starts_with("agentstream_") || word.starts_with("gen_ai_"))
                .filter(|word| !label_names.contains(word))
            {
                assert!(
                    scraped.contains(&name) || after_it_happens.contains(&name),
                    "{name} (in {expression:?}) is not a series the server exports"
                );
            }
        }
    }
    assert!(expressions > 30, "{expressions}");
    child.kill().await.unwrap();
}

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
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run_id: uuid::Uuid = accepted["run_id"].as_str().unwrap().parse().unwrap();
    let log = server.wait_for_run_end(agent_id, run_id).await;
    let started = log
        .iter()
        .find(|event| event.kind == app::EventKind::RunStarted)
        .unwrap();
    assert_eq!(
        started.metadata["trace_id"], trace_id,
        "run_started names its trace"
    );

    let spans = wait_until("the run's spans at the receiver", || async {
        let spans = received.spans.lock().unwrap().clone();
        let names: Vec<&str> = spans.iter().map(|span| span.name.as_str()).collect();
        let chats = names
            .iter()
            .filter(|name| name.starts_with("chat "))
            .count();
        (names.iter().any(|name| name.starts_with("invoke_agent"))
            && names.contains(&"execute_tool clock")
            && chats == 2)
            .then_some(spans)
    })
    .await;
    let named = |prefix: &str| -> Vec<&opentelemetry_proto::tonic::trace::v1::Span> {
        spans
            .iter()
            .filter(|span| span.name.starts_with(prefix))
            .collect()
    };
    // (The test's other requests — creating the agent, reading the log — are traces of their
    // own.)
    for span in spans.iter().filter(|span| {
        [
            "POST /v1/agents/{id}/runs",
            "invoke_agent",
            "chat ",
            "execute_tool",
        ]
        .iter()
        .any(|prefix| span.name.starts_with(prefix))
    }) {
        assert_eq!(
            hex(&span.trace_id),
            trace_id,
            "{} is in the caller's trace",
            span.name
        );
    }
    let server_span = named("POST /v1/agents/{id}/runs")[0];
    assert_eq!(hex(&server_span.parent_span_id), caller_span);
    assert_eq!(server_span.kind, 2, "SPAN_KIND_SERVER");
    assert_eq!(
        attribute(server_span, "http.response.status_code").as_deref(),
        Some("202")
    );
    let run = named("invoke_agent")[0];
    assert_eq!(run.parent_span_id, server_span.span_id);
    assert_eq!(
        attribute(run, "gen_ai.operation.name").as_deref(),
        Some("invoke_agent")
    );
    assert_eq!(
        attribute(run, "gen_ai.agent.id"),
        Some(agent_id.to_string())
    );
    assert_eq!(
        attribute(run, "gen_ai.conversation.id"),
        Some(agent_id.to_string())
    );
    assert_eq!(
        attribute(run, "agentstream.run.id"),
        Some(run_id.to_string())
    );
    assert_eq!(
        attribute(run, "agentstream.run.outcome").as_deref(),
        Some("completed")
    );
    let (first, last) = (log.first().unwrap().seq, log.last().unwrap().seq);
    assert_eq!(
        attribute(run, "agentstream.run.first_seq"),
        Some(first.to_string())
    );
    assert_eq!(
        attribute(run, "agentstream.run.last_seq"),
        Some(last.to_string())
    );
    for chat in named("chat ") {
        assert_eq!(chat.parent_span_id, run.span_id);
        assert_eq!(
            attribute(chat, "gen_ai.provider.name").as_deref(),
            Some("scripted")
        );
        assert!(
            attribute(chat, "gen_ai.usage.output_tokens")
                .unwrap()
                .parse::<u64>()
                .unwrap()
                > 0
        );
        assert!(chat.events.iter().any(|event| event.name == "first_chunk"));
    }
    let tool = named("execute_tool clock")[0];
    assert_eq!(tool.parent_span_id, run.span_id);
    assert_eq!(
        attribute(tool, "gen_ai.tool.name").as_deref(),
        Some("clock")
    );
    let call_id = log
        .iter()
        .find_map(|event| event.content.get("tool_call_id").and_then(Value::as_str))
        .unwrap();
    assert_eq!(
        attribute(tool, "gen_ai.tool.call.id").as_deref(),
        Some(call_id)
    );
    assert!(
        received
            .resources
            .lock()
            .unwrap()
            .contains(&"service.name=agentstream".to_owned()),
        "the service is named"
    );
    // No prompt or completion text in any span.
    let reply = common::reply_text(&log, run_id);
    for span in spans.iter().filter(|span| hex(&span.trace_id) == trace_id) {
        for attribute in &span.attributes {
            let value = text(&attribute.value);
            assert!(
                value.len() < 8 || !reply.contains(&value),
                "{}: {value}",
                attribute.key
            );
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
        .env(
            "DATABASE_URL",
            format!("sqlite://{}", directory.path().join("log.db").display()),
        )
        .env("AGENTSTREAM_LOG_FORMAT", "json")
        .env("RUST_LOG", "agentstream_server=debug")
        .env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    wait_until("the server to come up", || async {
        let response = http.get(format!("{base}/healthz")).send().await;
        response
            .is_ok_and(|response| response.status().is_success())
            .then_some(())
    })
    .await;
    let trace_id = "0af7651916cd43dd8448eb211c80319c";
    let response = http
        .get(format!("{base}/v1/agents"))
        .header("x-request-id", "json-log-test-1")
        .header("traceparent", format!("00-{trace_id}-b7ad6b7169203331-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let line = tokio::time::timeout(common::WAIT_MAX, async {
        loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("the server's log goes on");
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
    assert_eq!(
        line["span"]["span_id"].as_str().map(str::len),
        Some(16),
        "{line}"
    );
    assert_eq!(line["span"]["path"], "/v1/agents", "{line}");
    child.kill().await.unwrap();
}
