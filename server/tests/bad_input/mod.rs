//! Bad input gets a 4xx (or a WebSocket error frame) with a stable code, and changes nothing.

use crate::common;
mod http;

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
    Case { method, path, body: None, header: None, status, code }
}

fn with_body(
    method: Method,
    path: String,
    content_type: &'static str,
    body: String,
    status: u16,
    code: &'static str,
) -> Case {
    Case { method, path, body: Some((content_type, body)), header: None, status, code }
}

/// A JSON POST refused with `status` and `code`.
fn post_json(
    path: impl Into<String>,
    body: impl Into<String>,
    status: u16,
    code: &'static str,
) -> Case {
    with_body(Method::POST, path.into(), "application/json", body.into(), status, code)
}

async fn row_counts(server: &TestServer) -> (i64, i64) {
    let database = server.database().await;
    (database.count_rows("agents").await, database.count_events().await)
}

#[tokio::test]
async fn bad_websocket_messages_get_error_frames_and_the_socket_stays_open() {
    let (server, agent) = TestServer::start().await.with_agent().await;
    let stranger = Uuid::new_v4();
    let mut client = server.connect().await;

    let text_cases: Vec<(String, &str)> = vec![
        ("garbage".into(), "malformed_json"),
        (r#"{"type":"dance"}"#.into(), "invalid_message"),
        (r#"{"type":"subscribe","agent_id":"not-a-uuid","since":0}"#.into(), "invalid_message"),
        (format!(r#"{{"type":"subscribe","agent_id":"{agent}","since":-1}}"#), "invalid_message"),
        (format!(r#"{{"type":"subscribe","agent_id":"{agent}","since":"x"}}"#), "invalid_message"),
        (r#"[1,2,3]"#.into(), "invalid_message"),
    ];
    for (text, code) in text_cases {
        client.send_raw(Message::Text(text.clone().into())).await;
        match client.receive().await {
            ServerMessage::Error { code: got, message, .. } => {
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
    client.send(&ClientMessage::Ping { nonce: Some(json!(42)) }).await;
    assert_eq!(client.receive().await, ServerMessage::Pong { nonce: Some(json!(42)) });
    assert_eq!(row_counts(&server).await, (1, 0), "bad input wrote something");
}

#[tokio::test]
async fn a_bad_subscription_in_the_socket_url_is_refused_before_the_upgrade() {
    let (server, agent) = TestServer::start().await.with_agent().await;
    let cases = [
        ("subscribe=nope".to_owned(), "invalid_id", "\"nope\""),
        ("since=3".to_owned(), "invalid_query", "subscribe={agent_id}"),
        ("coalesce=true".to_owned(), "invalid_query", "subscribe={agent_id}"),
        (format!("subscribe={agent}&since=-1"), "invalid_query", "since=\"-1\""),
        (format!("subscribe={agent}&coalesce=maybe"), "invalid_query", "coalesce=\"maybe\""),
    ];
    for (query, code, named) in cases {
        let Err((status, body)) = server.connect_with(Some(&query)).await else {
            panic!("?{query} opened a socket");
        };
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!((status, body["error"]["code"].as_str()), (400, Some(code)), "?{query}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(named), "?{query}: {message}");
    }
    // An agent that is not there is the subscription's own refusal, as for a message.
    let stranger = Uuid::new_v4();
    let mut client = server.connect_with(Some(&format!("subscribe={stranger}"))).await.unwrap();
    match client.receive().await {
        ServerMessage::Error { code, agent_id, .. } => {
            assert_eq!((code.as_str(), agent_id), ("unknown_agent", Some(stranger)));
        }
        other => panic!("expected unknown_agent, got {other:?}"),
    }
    assert_eq!(row_counts(&server).await, (1, 0), "bad input wrote something");
}

#[tokio::test]
async fn an_oversized_websocket_frame_closes_only_that_socket() {
    let server = TestServer::start().await;
    let mut reckless = server.connect().await;
    let mut bystander = server.connect().await;
    let big = format!(r#"{{"type":"ping","nonce":"{}"}}"#, "x".repeat(200 * 1024));
    let _ = futures::SinkExt::send(&mut reckless.stream, Message::Text(big.into())).await;
    let next =
        tokio::time::timeout(common::WAIT_MAX, futures::StreamExt::next(&mut reckless.stream))
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
    assert_eq!(bystander.receive().await, ServerMessage::Pong { nonce: None });
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
    assert_eq!(nonce.parse::<f64>().unwrap(), sent.parse::<f64>().unwrap(), "pong: {pong}");
}
