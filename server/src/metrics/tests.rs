use std::sync::Arc;
use std::time::Duration;

use super::labels::bounded;
use super::*;

/// Every series an operator's dashboards and alerts name, in Prometheus' own spelling.
#[test]
fn the_exposition_speaks_prometheus_names_and_units() {
    let metrics = Arc::new(Metrics::new());
    metrics.events_appended.inc_by(3);
    metrics.commit_duration.observe(0.002);
    metrics.tool_call("calculator", true, Duration::from_millis(5));
    metrics
        .token_usage
        .get_or_create(&TokenLabels {
            gen_ai_operation_name: "chat",
            gen_ai_provider_name: "scripted",
            gen_ai_token_type: "input",
        })
        .observe(12.0);
    metrics
        .model_call_duration
        .get_or_create(&ModelCallLabels {
            gen_ai_operation_name: "chat",
            gen_ai_provider_name: "scripted",
            error_type: "",
        })
        .observe(0.5);
    metrics.sent_on("native_sse").frame(100);
    let guard = metrics.subscriber("websocket");
    let text = metrics.encode();
    let expected = [
        "# TYPE agentstream_events_appended_total counter",
        "agentstream_events_appended_total 3",
        "# TYPE agentstream_commit_duration_seconds histogram",
        "agentstream_commit_duration_seconds_count 1",
        "agentstream_subscribers{surface=\"websocket\"} 1",
        "agentstream_tool_call_duration_seconds_count{gen_ai_tool_name=\"calculator\",outcome=\"ok\"} 1",
        "gen_ai_client_token_usage_sum{gen_ai_operation_name=\"chat\",gen_ai_provider_name=\"scripted\",gen_ai_token_type=\"input\"} 12",
        "# TYPE gen_ai_client_operation_duration_seconds histogram",
        "# TYPE agentstream_database_size_bytes gauge",
        "agentstream_response_body_bytes_total{surface=\"native_sse\"} 100",
        "agentstream_frames_sent_total{surface=\"native_sse\"} 1",
    ];
    for line in expected {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    drop(guard);
    assert!(metrics.encode().contains("agentstream_subscribers{surface=\"websocket\"} 0"));
    // Counters end in _total, and nothing else does.
    for line in text.lines().filter(|line| line.starts_with("# TYPE")) {
        let words: Vec<&str> = line.split(' ').collect();
        let (name, kind) = (words[2], words[3]);
        assert_eq!(name.ends_with("_total"), kind == "counter", "{line}");
        assert!(name.starts_with("agentstream_") || name.starts_with("gen_ai_client_"), "{line}");
    }
}

#[test]
fn mcp_sessions_are_counted_open_and_again() {
    let metrics = Metrics::new();
    metrics.mcp_session("files", McpSession::Opened { reconnect: false });
    metrics.mcp_session("files", McpSession::Closed);
    metrics.mcp_session("files", McpSession::Opened { reconnect: true });
    let text = metrics.encode();
    assert!(text.contains("agentstream_mcp_connections{server=\"files\"} 1"), "{text}");
    assert!(text.contains("agentstream_mcp_reconnects_total{server=\"files\"} 1"), "{text}");
}

#[test]
fn outside_values_get_known_labels_or_other() {
    assert_eq!(bounded("GET", &["GET"]), "GET");
    assert_eq!(bounded("BREW", &["GET"]), "other");
}

/// The backlog's help names the bound at which SQLite refuses appends: the limit's own value.
#[test]
fn the_backlog_help_names_the_refusal_bound_from_the_limit() {
    let text = Metrics::new().encode();
    let help = text
        .lines()
        .find(|line| line.starts_with("# HELP agentstream_store_backlog_rows "))
        .expect("the backlog gauge has a help line");
    let bound = crate::limits::RECENT_ROWS_HARD_MAX.to_string();
    assert!(help.contains(&format!("refused at {bound},")), "{help}");
}
