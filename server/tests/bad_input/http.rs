//! Bad HTTP requests: each gets a JSON error saying what was wrong, and nothing is written.

use super::*;
use crate::common::RequestExt;

#[tokio::test]
async fn bad_http_requests_get_json_errors_and_write_nothing() {
    let (server, agent) = TestServer::start().await.with_agent().await;
    let stranger = Uuid::new_v4();
    let json_type = "application/json";
    let huge = json!({ "content": "x".repeat(200 * 1024) }).to_string();
    let (runs, cancel) =
        (format!("/v1/agents/{agent}/runs"), format!("/v1/agents/{agent}/messages/cancel"));
    let stranger_run = format!("/v1/runs/{stranger}/stream");
    let cases = vec![
        post_json("/v1/agents", "{not json", 400, "malformed_json"),
        post_json("/v1/agents", r#"{"name": 5}"#, 422, "invalid_body"),
        with_body(
            Method::POST,
            "/v1/agents".into(),
            "text/plain",
            "{}".into(),
            415,
            "expected_json",
        ),
        post_json("/v1/agents", json!({"name": "n".repeat(500)}).to_string(), 400, "invalid_body"),
        case(Method::GET, "/v1/agents?limit=0".into(), 400, "invalid_query"),
        case(Method::GET, "/v1/agents?limit=100000".into(), 400, "limit_too_large"),
        case(Method::GET, "/v1/agents/not-a-uuid".into(), 400, "invalid_id"),
        case(Method::GET, format!("/v1/agents/{stranger}"), 404, "unknown_agent"),
        case(Method::DELETE, format!("/v1/agents/{stranger}"), 404, "unknown_agent"),
        case(Method::DELETE, "/v1/agents/12345".into(), 400, "invalid_id"),
        case(Method::GET, format!("/v1/agents/{agent}/events?since=-1"), 400, "invalid_query"),
        case(Method::GET, format!("/v1/agents/{agent}/events?since=abc"), 400, "invalid_query"),
        case(Method::GET, format!("/v1/agents/{agent}/events?since=1.5"), 400, "invalid_query"),
        case(Method::GET, format!("/v1/agents/{agent}/events?limit=-3"), 400, "invalid_query"),
        case(Method::GET, format!("/v1/agents/{agent}/events?limit=1001"), 400, "limit_too_large"),
        case(Method::GET, format!("/v1/agents/{agent}/events?since=5"), 400, "since_beyond_head"),
        case(Method::GET, format!("/v1/agents/{stranger}/events"), 404, "unknown_agent"),
        case(Method::GET, "/v1/agents/xyz/events".into(), 400, "invalid_id"),
        post_json(
            format!("/v1/agents/{stranger}/runs"),
            r#"{"content":"hi"}"#,
            404,
            "unknown_agent",
        ),
        post_json("/v1/agents/nope/runs", r#"{"content":"hi"}"#, 400, "invalid_id"),
        post_json(&runs, r#"{"content": 5}"#, 422, "invalid_body"),
        post_json(&runs, r#"{}"#, 422, "invalid_body"),
        post_json(&runs, r#"{"content": "   "}"#, 400, "invalid_body"),
        post_json(&runs, r#"{"content": "hi""#, 400, "malformed_json"),
        post_json(&runs, huge, 413, "body_too_large"),
        case(Method::GET, "/v1/no/such/thing".into(), 404, "unknown_route"),
        case(Method::PUT, "/v1/agents".into(), 405, "method_not_allowed"),
        case(Method::PATCH, format!("/v1/agents/{agent}"), 405, "method_not_allowed"),
        case(Method::GET, "/v1/agents?after=nobody".into(), 400, "invalid_cursor"),
        case(Method::GET, "/v1/agents/?order=sideways".into(), 400, "invalid_query"),
        // Cancel.
        post_json(&cancel, "{bad", 400, "malformed_json"),
        post_json(&cancel, r#"{"run_ids":"x"}"#, 422, "invalid_body"),
        post_json(format!("/v1/agents/{stranger}/messages/cancel"), "{}", 404, "unknown_agent"),
        post_json("/v1/agents/nope/messages/cancel", "{}", 400, "invalid_id"),
        // Runs.
        case(Method::GET, "/v1/runs/not-a-run".into(), 400, "invalid_id"),
        case(Method::GET, format!("/v1/runs/{stranger}"), 404, "unknown_run"),
        post_json(&stranger_run, "{}", 404, "unknown_run"),
        post_json(&stranger_run, r#"{"starting_after":"x"}"#, 422, "invalid_body"),
        post_json(&runs, r#"{"content":"hi"}"#, 400, "invalid_idempotency_key")
            .header("idempotency-key", "k".repeat(300)),
        // The SSE tail.
        case(
            Method::GET,
            format!("/v1/agents/{agent}/events/stream?since=5"),
            400,
            "since_beyond_head",
        ),
        case(Method::GET, format!("/v1/agents/{agent}/events/stream"), 400, "invalid_cursor")
            .header("last-event-id", "abc".into()),
        case(Method::GET, format!("/v1/agents/{stranger}/events/stream"), 404, "unknown_agent"),
        case(Method::GET, "/v1/agents/x/events/stream".into(), 400, "invalid_id"),
        // Letta's message API.
        case(Method::GET, format!("/v1/agents/{agent}/messages?limit=0"), 400, "invalid_query"),
        case(
            Method::GET,
            format!("/v1/agents/{agent}/messages?limit=5000"),
            400,
            "limit_too_large",
        ),
        case(Method::GET, format!("/v1/agents/{stranger}/messages"), 404, "unknown_agent"),
        post_json(
            format!("/v1/agents/{agent}/messages"),
            r#"{"messages":[{"role":"user"}]}"#,
            422,
            "invalid_body",
        ),
        post_json(
            format!("/v1/agents/{agent}/messages/stream"),
            r#"{"input":"hi","max_steps":0}"#,
            422,
            "invalid_body",
        ),
        post_json(format!("/v1/agents/{agent}/messages/stream"), "[]", 422, "invalid_body"),
        // The page forms.
        with_body(
            Method::POST,
            "/agents".into(),
            "application/x-www-form-urlencoded",
            format!("name={}", "n".repeat(500)),
            400,
            "invalid_body",
        ),
        with_body(
            Method::POST,
            format!("/agents/{stranger}/runs"),
            "application/x-www-form-urlencoded",
            "content=hi".into(),
            404,
            "unknown_agent",
        ),
        with_body(
            Method::POST,
            format!("/agents/{agent}/runs"),
            "application/x-www-form-urlencoded",
            "content=".into(),
            400,
            "invalid_body",
        ),
        // Branches: a refused fork, switch or delete makes and changes nothing.
        post_json(format!("/v1/agents/{agent}/branches"), "{not json", 400, "malformed_json"),
        post_json(
            format!("/v1/agents/{agent}/branches"),
            r#"{"after_seq": -1}"#,
            422,
            "invalid_body",
        ),
        post_json(
            format!("/v1/agents/{agent}/branches"),
            r#"{"after_seq": 0, "at": 3}"#,
            422,
            "invalid_body",
        ),
        post_json(
            format!("/v1/agents/{agent}/branches"),
            r#"{"after_seq": 18446744073709551615}"#,
            400,
            "after_seq_beyond_head",
        ),
        post_json(
            format!("/v1/agents/{stranger}/branches"),
            r#"{"after_seq": 0}"#,
            404,
            "unknown_agent",
        ),
        case(Method::GET, format!("/v1/agents/{stranger}/branches"), 404, "unknown_agent"),
        with_body(
            Method::PUT,
            format!("/v1/agents/{agent}/current-branch"),
            json_type,
            json!({ "branch": stranger }).to_string(),
            404,
            "unknown_branch",
        ),
        with_body(
            Method::PUT,
            format!("/v1/agents/{agent}/current-branch"),
            json_type,
            r#"{"branch": "main"}"#.into(),
            422,
            "invalid_body",
        ),
        case(
            Method::DELETE,
            format!("/v1/agents/{agent}/branches/{stranger}"),
            404,
            "unknown_branch",
        ),
        case(Method::DELETE, format!("/v1/agents/{agent}/branches/not-a-uuid"), 400, "invalid_id"),
    ];
    for case in cases {
        let mut request = server.http.request(case.method.clone(), server.url(&case.path));
        if let Some((content_type, body)) = case.body {
            request = request.header("content-type", content_type).body(body);
        }
        if let Some((name, value)) = case.header {
            request = request.header(name, value);
        }
        let response = request.sent().await;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        assert_eq!(status, case.status, "{} {}: {text}", case.method, case.path);
        // The page forms answer a person: an HTML page saying why, not the API's JSON.
        if !case.path.starts_with("/v1")
            && case.method == Method::POST
            && text.starts_with("<!DOCTYPE html>")
        {
            assert!(text.contains("That did not go through"), "{}: {text}", case.path);
            continue;
        }
        let body: Value = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("{} {}: not JSON: {text}", case.method, case.path));
        assert_eq!(body["error"]["code"], case.code, "{} {}: {text}", case.method, case.path);
        assert!(
            !body["error"]["message"].as_str().unwrap_or("").is_empty(),
            "{} {}: no message",
            case.method,
            case.path
        );
    }
    assert_eq!(row_counts(&server).await, (1, 0), "bad input wrote something");
    // And the server is still serving.
    assert_eq!(server.events_page(agent, 0, 10).await.head_seq, 0);
}
