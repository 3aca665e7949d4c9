//! Bad input gets a 4xx (or a WebSocket error frame) with a stable code, and changes nothing.

mod common;

use app::protocol::{ClientMessage, ServerMessage};
use common::TestServer;
use reqwest::Method;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

struct Case {
    method: Method,
    path: String,
    body: Option<(&'static str, String)>,
    header: Option<(&'static str, String)>,
    status: u16,
    code: &'static str,
}

impl Case {
    fn header(mut self, name: &'static str, value: String) -> Case {
        self.header = Some((name, value));
        self
    }
}

fn case(method: Method, path: String, status: u16, code: &'static str) -> Case {
    Case {
        method,
        path,
        body: None,
        header: None,
        status,
        code,
    }
}

fn with_body(
    method: Method,
    path: String,
    content_type: &'static str,
    body: String,
    status: u16,
    code: &'static str,
) -> Case {
    Case {
        method,
        path,
        body: Some((content_type, body)),
        header: None,
        status,
        code,
    }
}

async fn row_counts(server: &TestServer) -> (i64, i64) {
    let database = server.database().await;
    (
        database.count_rows("agents").await,
        database.count_events().await,
    )
}

#[tokio::test]
async fn bad_http_requests_get_json_errors_and_write_nothing() {
    let server = TestServer::start().await;
    let agent = server.create_agent().await;
    let stranger = Uuid::new_v4();
    let json_type = "application/json";
    let huge = json!({ "content": "x".repeat(200 * 1024) }).to_string();
    let cases = vec![
        with_body(
            Method::POST,
            "/v1/agents".into(),
            json_type,
            "{not json".into(),
            400,
            "malformed_json",
        ),
        with_body(
            Method::POST,
            "/v1/agents".into(),
            json_type,
            r#"{"name": 5}"#.into(),
            422,
            "invalid_body",
        ),
        with_body(
            Method::POST,
            "/v1/agents".into(),
            "text/plain",
            "{}".into(),
            415,
            "expected_json",
        ),
        with_body(
            Method::POST,
            "/v1/agents".into(),
            json_type,
            json!({"name": "n".repeat(500)}).to_string(),
            400,
            "invalid_body",
        ),
        case(
            Method::GET,
            "/v1/agents?limit=0".into(),
            400,
            "invalid_query",
        ),
        case(
            Method::GET,
            "/v1/agents?limit=100000".into(),
            400,
            "limit_too_large",
        ),
        case(
            Method::GET,
            "/v1/agents/not-a-uuid".into(),
            400,
            "invalid_id",
        ),
        case(
            Method::GET,
            format!("/v1/agents/{stranger}"),
            404,
            "unknown_agent",
        ),
        case(
            Method::DELETE,
            format!("/v1/agents/{stranger}"),
            404,
            "unknown_agent",
        ),
        case(Method::DELETE, "/v1/agents/12345".into(), 400, "invalid_id"),
        case(
            Method::GET,
            format!("/v1/agents/{agent}/events?since=-1"),
            400,
            "invalid_query",
        ),
        case(
            Method::GET,
            format!("/v1/agents/{agent}/events?since=abc"),
            400,
            "invalid_query",
        ),
        case(
            Method::GET,
            format!("/v1/agents/{agent}/events?since=1.5"),
            400,
            "invalid_query",
        ),
        case(
            Method::GET,
            format!("/v1/agents/{agent}/events?limit=-3"),
            400,
            "invalid_query",
        ),
        case(
            Method::GET,
            format!("/v1/agents/{agent}/events?limit=1001"),
            400,
            "limit_too_large",
        ),
        case(
            Method::GET,
            format!("/v1/agents/{agent}/events?since=5"),
            400,
            "since_beyond_head",
        ),
        case(
            Method::GET,
            format!("/v1/agents/{stranger}/events"),
            404,
            "unknown_agent",
        ),
        case(
            Method::GET,
            "/v1/agents/xyz/events".into(),
            400,
            "invalid_id",
        ),
        with_body(
            Method::POST,
            format!("/v1/agents/{stranger}/runs"),
            json_type,
            r#"{"content":"hi"}"#.into(),
            404,
            "unknown_agent",
        ),
        with_body(
            Method::POST,
            "/v1/agents/nope/runs".into(),
            json_type,
            r#"{"content":"hi"}"#.into(),
            400,
            "invalid_id",
        ),
        with_body(
            Method::POST,
            format!("/v1/agents/{agent}/runs"),
            json_type,
            r#"{"content": 5}"#.into(),
            422,
            "invalid_body",
        ),
        with_body(
            Method::POST,
            format!("/v1/agents/{agent}/runs"),
            json_type,
            r#"{}"#.into(),
            422,
            "invalid_body",
        ),
        with_body(
            Method::POST,
            format!("/v1/agents/{agent}/runs"),
            json_type,
            r#"{"content": "   "}"#.into(),
            400,
            "invalid_body",
        ),
        with_body(
            Method::POST,
            format!("/v1/agents/{agent}/runs"),
            json_type,
            r#"{"content": "hi""#.into(),
            400,
            "malformed_json",
        ),
        with_body(
            Method::POST,
            format!("/v1/agents/{agent}/runs"),
            json_type,
            huge,
            413,
            "body_too_large",
        ),
        case(
            Method::GET,
            "/v1/no/such/thing".into(),
            404,
            "unknown_route",
        ),
        case(Method::PUT, "/v1/agents".into(), 405, "method_not_allowed"),
        case(
            Method::PATCH,
            format!("/v1/agents/{agent}"),
            405,
            "method_not_allowed",
        ),
        case(
            Method::GET,
            "/v1/agents?after=nobody".into(),
            400,
            "invalid_cursor",
        ),
        case(
            Method::GET,
            "/v1/agents/?order=sideways".into(),
            400,
            "invalid_query",
        ),
        // Cancel.
        with_body(
            Method::POST,
            format!("/v1/agents/{agent}/messages/cancel"),
            json_type,
            "{bad".into(),
            400,
            "malformed_json",
        ),
        with_body(
            Method::POST,
            format!("/v1/agents/{agent}/messages/cancel"),
            json_type,
            r#"{"run_ids":"x"}"#.into(),
            422,
            "invalid_body",
        ),
        with_body(
            Method::POST,
            format!("/v1/agents/{stranger}/messages/cancel"),
            json_type,
            "{}".into(),
            404,
            "unknown_agent",
        ),
        with_body(
            Method::POST,
            "/v1/agents/nope/messages/cancel".into(),
            json_type,
            "{}".into(),
            400,
            "invalid_id",
        ),
        // Runs.
        case(Method::GET, "/v1/runs/not-a-run".into(), 400, "invalid_id"),
        case(
            Method::GET,
            format!("/v1/runs/{stranger}"),
            404,
            "unknown_run",
        ),
        with_body(
            Method::POST,
            format!("/v1/runs/{stranger}/stream"),
            json_type,
            "{}".into(),
            404,
            "unknown_run",
        ),
        with_body(
            Method::POST,
            format!("/v1/runs/{stranger}/stream"),
            json_type,
            r#"{"starting_after":"x"}"#.into(),
            422,
            "invalid_body",
        ),
        with_body(
            Method::POST,
            format!("/v1/agents/{agent}/runs"),
            json_type,
            r#"{"content":"hi"}"#.into(),
            400,
            "invalid_idempotency_key",
        )
        .header("idempotency-key", "k".repeat(300)),
        // The SSE tail.
        case(
            Method::GET,
            format!("/v1/agents/{agent}/events/stream?since=5"),
            400,
            "since_beyond_head",
        ),
        case(
            Method::GET,
            format!("/v1/agents/{agent}/events/stream"),
            400,
            "invalid_cursor",
        )
        .header("last-event-id", "abc".into()),
        case(
            Method::GET,
            format!("/v1/agents/{stranger}/events/stream"),
            404,
            "unknown_agent",
        ),
        case(
            Method::GET,
            "/v1/agents/x/events/stream".into(),
            400,
            "invalid_id",
        ),
        // Letta's message API.
        case(
            Method::GET,
            format!("/v1/agents/{agent}/messages?limit=0"),
            400,
            "invalid_query",
        ),
        case(
            Method::GET,
            format!("/v1/agents/{agent}/messages?limit=5000"),
            400,
            "limit_too_large",
        ),
        case(
            Method::GET,
            format!("/v1/agents/{stranger}/messages"),
            404,
            "unknown_agent",
        ),
        with_body(
            Method::POST,
            format!("/v1/agents/{agent}/messages"),
            json_type,
            r#"{"messages":[{"role":"user"}]}"#.into(),
            422,
            "invalid_body",
        ),
        with_body(
            Method::POST,
            format!("/v1/agents/{agent}/messages/stream"),
            json_type,
            r#"{"input":"hi","max_steps":0}"#.into(),
            422,
            "invalid_body",
        ),
        with_body(
            Method::POST,
            format!("/v1/agents/{agent}/messages/stream"),
            json_type,
            "[]".into(),
            422,
            "invalid_body",
        ),
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
    ];
    for case in cases {
        let mut request = server
            .http
            .request(case.method.clone(), server.url(&case.path));
        if let Some((content_type, body)) = case.body {
            request = request.header("content-type", content_type).body(body);
        }
        if let Some((name, value)) = case.header {
            request = request.header(name, value);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        assert_eq!(status, case.status, "{} {}: {text}", case.method, case.path);
        // The page forms answer a person: an HTML page saying why, not the API's JSON.
        if !case.path.starts_with("/v1")
            && case.method == Method::POST
            && text.starts_with("<!DOCTYPE html>")
        {
            assert!(
                text.contains("That did not go through"),
                "{}: {text}",
                case.path
            );
            continue;
        }
        let body: Value = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("{} {}: not JSON: {text}", case.method, case.path));
        assert_eq!(
            body["error"]["code"], case.code,
            "{} {}: {text}",
            case.method, case.path
        );
        assert!(
            !body["error"]["message"].as_str().unwrap_or("").is_empty(),
            "{} {}: no message",
            case.method,
            case.path
        );
    }
    assert_eq!(
        row_counts(&server).await,
        (1, 0),
        "bad input wrote something"
    );
    // And the server is still serving.
    assert_eq!(server.events_page(agent, 0, 10).await.head_seq, 0);
}

#[tokio::test]
async fn bad_websocket_messages_get_error_frames_and_the_socket_stays_open() {
    let server = TestServer::start().await;
    let agent = server.create_agent().await;
    let stranger = Uuid::new_v4();
    let mut client = server.connect().await;

    let text_cases: Vec<(String, &str)> = vec![
        ("garbage".into(), "malformed_json"),
        (r#"{"type":"dance"}"#.into(), "invalid_message"),
        (
            r#"{"type":"subscribe","agent_id":"not-a-uuid","since":0}"#.into(),
            "invalid_message",
        ),
        (
            format!(r#"{{"type":"subscribe","agent_id":"{agent}","since":-1}}"#),
            "invalid_message",
        ),
        (
            format!(r#"{{"type":"subscribe","agent_id":"{agent}","since":"x"}}"#),
            "invalid_message",
        ),
        (r#"[1,2,3]"#.into(), "invalid_message"),
    ];
    for (text, code) in text_cases {
        client.send_raw(Message::Text(text.clone().into())).await;
        match client.receive().await {
            ServerMessage::Error {
                code: got, message, ..
            } => {
                assert_eq!(got, code, "{text}: {message}");
                assert!(!message.is_empty());
            }
            other => panic!("{text}: expected an error frame, got {other:?}"),
        }
    }
    client.send_raw(Message::Binary(vec![1, 2, 3].into())).await;
    assert!(matches!(
        client.receive().await,
        ServerMessage::Error { code, .. } if code == "unsupported_frame"
    ));
    client.subscribe(stranger, 0).await;
    assert!(matches!(
        client.receive().await,
        ServerMessage::Error { code, agent_id: Some(id), .. } if code == "unknown_agent" && id == stranger
    ));
    client.subscribe(agent, 9).await;
    assert!(matches!(
        client.receive().await,
        ServerMessage::Error { code, .. } if code == "since_beyond_head"
    ));

    // Still open and answering.
    client
        .send(&ClientMessage::Ping {
            nonce: Some(json!(42)),
        })
        .await;
    assert_eq!(
        client.receive().await,
        ServerMessage::Pong {
            nonce: Some(json!(42))
        }
    );
    assert_eq!(
        row_counts(&server).await,
        (1, 0),
        "bad input wrote something"
    );
}

#[tokio::test]
async fn an_oversized_websocket_frame_closes_only_that_socket() {
    let server = TestServer::start().await;
    let mut reckless = server.connect().await;
    let mut bystander = server.connect().await;
    let big = format!(r#"{{"type":"ping","nonce":"{}"}}"#, "x".repeat(200 * 1024));
    let _ = futures::SinkExt::send(&mut reckless.stream, Message::Text(big.into())).await;
    let next = tokio::time::timeout(
        common::WAIT_MAX,
        futures::StreamExt::next(&mut reckless.stream),
    )
    .await
    .expect("the server neither answered nor closed");
    // Closed with 1009 (message too big) and a reason that names the limit.
    match next {
        Some(Ok(Message::Close(Some(frame)))) => {
            assert_eq!(u16::from(frame.code), 1009, "{frame:?}");
            assert!(frame.reason.contains("bytes"), "{frame:?}");
        }
        other => panic!("expected a close frame with code 1009, got {other:?}"),
    }
    bystander.send(&ClientMessage::Ping { nonce: None }).await;
    assert_eq!(
        bystander.receive().await,
        ServerMessage::Pong { nonce: None }
    );
}

/// A number the client sends comes back as the same number, even one with more digits than a
/// double holds: it is read to the nearest double (serde_json's exact float parsing), not one
/// unit off, so it also serializes back to what it was parsed from.
#[tokio::test]
async fn a_ping_nonce_comes_back_as_the_number_sent() {
    let server = TestServer::start().await;
    let mut client = server.connect().await;
    let sent = format!("4{}2", "6".repeat(61));
    let ping = format!(r#"{{"type":"ping","nonce":{sent}}}"#);
    client.send_raw(Message::Text(ping.into())).await;
    let pong = client.receive_text().await;
    let nonce = pong
        .split(r#""nonce":"#)
        .nth(1)
        .and_then(|rest| rest.split([',', '}']).next())
        .unwrap_or_else(|| panic!("no nonce in {pong}"));
    // `str::parse` rounds correctly: both sides name the same double only if nothing drifted.
    assert_eq!(
        nonce.parse::<f64>().unwrap(),
        sent.parse::<f64>().unwrap(),
        "pong: {pong}"
    );
}
