//! What an operator's Prometheus sees: `GET /metrics` (its access rule, its own listener, the
//! figures a run leaves, no unbounded labels), a real Prometheus scraping it and the Grafana
//! dashboard's expressions checked in it; request ids. (Traces and logs: `traces.rs`.)

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use crate::common::RequestExt;
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

/// `POST path` with the operator token; the answer's JSON.
async fn post_as_operator(server: &TestServer, path: &str, body: Value) -> Value {
    server.http.post(server.url(path)).bearer_auth(TOKEN).json(&body).answer().await
}

async fn scrape(server: &TestServer) -> String {
    let response = server.http.get(server.url("/metrics")).bearer_auth(TOKEN).sent().await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/plain; version=0.0.4; charset=utf-8");
    response.text().await.unwrap()
}

#[tokio::test]
async fn metrics_count_what_a_run_did_under_bounded_labels() {
    let server = TestServer::start_with(|config| config.api_token = Some(TOKEN.into())).await;
    let refused = server.get("/metrics").await;
    assert_eq!(refused.status(), 401, "the operator's figures need the token");

    let agent = post_as_operator(&server, "/v1/agents", json!({})).await;
    let agent_id = agent["id"].as_str().unwrap().to_owned();
    let accepted = post_as_operator(
        &server,
        &format!("/v1/agents/{agent_id}/runs"),
        json!({ "content": "/tools clock; calculator 6*7" }),
    )
    .await;
    let run_id = accepted["run_id"].as_str().unwrap().to_owned();
    let log: Vec<Value> = wait_until("the run's end", || async {
        let page: Value = server
            .http
            .get(server.url(&format!("/v1/agents/{agent_id}/events?since=0&limit=1000")))
            .bearer_auth(TOKEN)
            .json_if_any()
            .await?;
        let events = page["events"].as_array()?.clone();
        events.iter().any(|event| event["kind"] == "run_completed").then_some(events)
    })
    .await;

    let text = scrape(&server).await;
    let figures = samples(&text);
    let figure =
        |series: &str| *figures.get(series).unwrap_or_else(|| panic!("no {series} in:\n{text}"));
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
    assert_eq!(figure(&format!("gen_ai_client_operation_duration_seconds_count{calls}")), 2.0);
    assert_eq!(
        figure(&format!("gen_ai_client_operation_time_to_first_chunk_seconds_count{calls}")),
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
    // The run's events are moved into the log once appends pause (SQLite), or have no backlog.
    assert!(figure("agentstream_store_backlog_rows") < 1_000.0);
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
    let http = agentstream_server::http_client::client();
    let scraped = http.get(format!("http://127.0.0.1:{port}/metrics")).sent().await;
    assert_eq!(scraped.status(), 200);
    assert!(scraped
        .text()
        .await
        .unwrap()
        .contains("# TYPE agentstream_events_appended_total counter"));
    let other = http.get(format!("http://127.0.0.1:{port}/v1/agents")).sent().await;
    assert_eq!(other.status(), 404, "the metrics address serves nothing else");
    let main = server.get("/metrics").await;
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
        let response = request.sent().await;
        let id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
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
    server.run_to_end(agent_id, "/tools clock").await;

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
    let http = agentstream_server::http_client::client();
    let query = |expression: &'static str| {
        let http = http.clone();
        async move {
            let answer: Value = http
                .get(format!("http://127.0.0.1:{web_port}/api/v1/query"))
                .query(&[("query", expression)])
                .timeout(Duration::from_secs(2))
                .json_if_any()
                .await?;
            let value = answer["data"]["result"][0]["value"][1].as_str()?;
            value.parse::<f64>().ok()
        }
    };
    let up = wait_until("Prometheus to scrape the server", || async {
        query(r#"up{job="agentstream"}"#).await.filter(|up| *up == 1.0)
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
    let dashboard: Value =
        serde_json::from_str(include_str!("../../examples/operations/grafana-dashboard.json"))
            .unwrap();
    let listed = |path: &'static str| {
        let http = http.clone();
        async move {
            let answer: Value =
                http.get(format!("http://127.0.0.1:{web_port}/api/v1/{path}")).answer().await;
            let names: Vec<String> = answer["data"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|name| name.as_str().map(str::to_owned))
                .collect();
            names
        }
    };
    let scraped = listed("label/__name__/values").await;
    let label_names = listed("labels").await;
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
                .answer()
                .await;
            assert_eq!(answer["status"], "success", "{expression}: {answer}");
            for name in expression
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|word| word.starts_with("agentstream_") || word.starts_with("gen_ai_"))
                .filter(|word| !label_names.iter().any(|label| label == word))
            {
                assert!(
                    scraped.iter().any(|scraped| scraped == name)
                        || after_it_happens.contains(&name),
                    "{name} (in {expression:?}) is not a series the server exports"
                );
            }
        }
    }
    assert!(expressions > 30, "{expressions}");
    child.kill().await.unwrap();
}
