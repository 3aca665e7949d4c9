use serde_json::{json, Value};
use uuid::Uuid;

use super::LogFrame;
use crate::protocol::ServerMessage;
use crate::{AgentEvent, EventKind};

const AGENT: Uuid = Uuid::from_u128(1);

/// Two events, one of them a run's text with quotes, a backslash and a frame inside it.
fn events() -> Vec<AgentEvent> {
    let text = json!({ "text": "\"quoted\" \\ {\"type\":\"error\"}" });
    let mut text = AgentEvent::bare(Uuid::from_u128(8), AGENT, 8, EventKind::Text, text);
    text.run_id = Some(Uuid::from_u128(2));
    let user = json!({ "text": "hi" });
    vec![AgentEvent::bare(Uuid::from_u128(7), AGENT, 7, EventKind::User, user), text]
}

/// Every kind the server sends, as it writes them, beside what a reader takes from each.
fn cases() -> Vec<(ServerMessage, LogFrame)> {
    vec![
        (
            ServerMessage::Subscribed { agent_id: AGENT, since: 3, head_seq: 9 },
            LogFrame::Subscribed { head_seq: 9 },
        ),
        (ServerMessage::Events { agent_id: AGENT, events: events() }, LogFrame::Events(events())),
        (
            ServerMessage::Events { agent_id: AGENT, events: Vec::new() },
            LogFrame::Events(Vec::new()),
        ),
        (
            ServerMessage::Error {
                code: "not_found".into(),
                message: "no agent".into(),
                agent_id: None,
            },
            LogFrame::Error { code: "not_found".into(), message: "no agent".into() },
        ),
        (
            ServerMessage::Lagged {
                agent_id: AGENT,
                last_delivered_seq: 4,
                missed_live_batches: 2,
            },
            LogFrame::Other("lagged".into()),
        ),
        (
            ServerMessage::Pong { nonce: Some(json!(12345678901234567890u64)) },
            LogFrame::Other("pong".into()),
        ),
        (
            ServerMessage::CancelRequested { agent_id: AGENT, run_ids: vec![Uuid::from_u128(5)] },
            LogFrame::Other("cancel_requested".into()),
        ),
    ]
}

#[test]
fn each_kind_as_the_server_writes_it_reads_as_that_kind() {
    for (message, expected) in cases() {
        let text = serde_json::to_string(&message).unwrap();
        assert!(text.starts_with(r#"{"type":""#), "{text}");
        assert_eq!(LogFrame::parse(&text).unwrap(), expected, "{text}");
    }
}

/// Another writer may order the keys otherwise or space them: the frame reads the same.
#[test]
fn the_tag_anywhere_in_the_object_reads_the_same() {
    for (message, expected) in cases() {
        let value = serde_json::to_value(&message).unwrap();
        let Value::Object(map) = value else { panic!("an object") };
        let mut entries: Vec<(String, Value)> = map.into_iter().collect();
        entries.rotate_left(1);
        let body: Vec<String> =
            entries.iter().map(|(key, value)| format!("{}: {value}", json!(key))).collect();
        let text = format!("{{ {} }}", body.join(", "));
        assert_eq!(LogFrame::parse(&text).unwrap(), expected, "{text}");
    }
}

#[test]
fn a_frame_that_is_not_one_whole_frame_is_an_error() {
    for text in [
        "",
        "not json",
        "[]",
        "{}",
        r#"{"type":7}"#,
        r#"{"agent_id":"00000000-0000-0000-0000-000000000001"}"#,
        r#"{"type":"events"}"#,
        r#"{"type":"events","events":[{"seq":1}]}"#,
        r#"{"type":"events","events":[]} trailing"#,
        r#"{"type":"subscribed","head_seq":"nine"}"#,
        r#"{"type":"error","message":"no code"}"#,
        r#"{"type":"pong""#,
        r#"{"type":"pong",}"#,
    ] {
        assert!(LogFrame::parse(text).is_err(), "{text:?} was read");
    }
}

/// An escaped tag is read the slow way, and means what it spells.
#[test]
fn an_escaped_tag_is_read_for_what_it_spells() {
    let text =
        r#"{"type":"event\u0073","agent_id":"00000000-0000-0000-0000-000000000001","events":[]}"#;
    assert_eq!(LogFrame::parse(text).unwrap(), LogFrame::Events(Vec::new()));
}
