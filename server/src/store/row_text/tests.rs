//! A stored row's text with the memo: rows one after another, each changing one thing the
//! memo keeps, each written as serde writes the event the row holds; damaged rows are errors
//! whatever the memo held.

use chrono::{DateTime, TimeZone, Utc};
use uuid::Uuid;

use super::event_json as stored_event_json;
use crate::store::rows::EventRow;

fn at(seconds: i64, nanos: u32) -> DateTime<Utc> {
    Utc.timestamp_opt(seconds, nanos).unwrap()
}

/// The text serde makes of the event the row holds (parsed as a read parses it).
fn serdes(row: &EventRow<'_>) -> String {
    serde_json::to_string(&row.to_event().unwrap()).unwrap()
}

#[test]
fn each_row_is_serdes_text_whatever_the_row_before_it_was() {
    let (agent, other_agent, run, block, message) =
        (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    let big = format!("{{\"text\":\"{}\"}}", "x".repeat(super::EVENT_TEXT_MEMO_BYTES_MAX));
    let base = EventRow {
        id: Uuid::now_v7(),
        agent_id: agent,
        seq: 1,
        run_id: Some(run),
        thread_id: None,
        block_id: Some(block),
        message_id: Some(message),
        kind: "text",
        delta: Some("\"tok\""),
        delta_path: Some("text"),
        delta_action: Some("append"),
        content: "null",
        raw: None,
        metadata: "null",
        created_at: at(1_764_000_000, 1),
    };
    // Each row changes what the comment says from the row before it.
    let rows: Vec<(&str, EventRow<'_>)> = vec![
        ("first", EventRow { ..base }),
        (
            "next token, same second",
            EventRow {
                seq: 2,
                delta: Some("\" more\""),
                created_at: at(1_764_000_000, 500),
                ..base
            },
        ),
        ("escapes in the delta", EventRow { seq: 3, delta: Some("\"a \\\"q\\\" \\n é\""), ..base }),
        ("the next second", EventRow { seq: 4, created_at: at(1_764_000_001, 0), ..base }),
        ("another agent", EventRow { agent_id: other_agent, ..base }),
        ("back, a long seq", EventRow { seq: u64::MAX >> 1, ..base }),
        ("no run, a thread", EventRow { run_id: None, thread_id: Some(run), ..base }),
        ("no block", EventRow { block_id: None, ..base }),
        ("another kind", EventRow { kind: "thinking", ..base }),
        ("an unknown kind", EventRow { kind: "no_such_kind", ..base }),
        ("another path", EventRow { delta_path: Some("parts.0.\"x\""), ..base }),
        ("no path", EventRow { delta_path: None, ..base }),
        ("another action", EventRow { delta_action: Some("replace"), ..base }),
        ("a delta beside content", EventRow { content: "{\"a\":1}", ..base }),
        ("the same, other content", EventRow { content: "{\"a\":2}", ..base }),
        (
            "content",
            EventRow { delta: None, delta_action: None, content: "{\"text\":\"hi\"}", ..base },
        ),
        (
            "other content",
            EventRow { delta: None, delta_action: None, content: "{\"text\":\"ho\"}", ..base },
        ),
        ("content past the memo's bound", EventRow { delta: None, content: &big, ..base }),
        ("a stream message", EventRow { kind: "stream_message", content: "{\"n\":1}", ..base }),
        ("the same text, another kind", EventRow { kind: "text", content: "{\"n\":1}", ..base }),
        ("raw", EventRow { raw: Some("{\"provider\":[1,2]}"), ..base }),
        ("metadata", EventRow { metadata: "{\"model\":\"m\"}", ..base }),
        ("other metadata", EventRow { metadata: "{\"model\":\"n\"}", ..base }),
        ("metadata past the memo's bound", EventRow { metadata: &big, ..base }),
        ("year 10000", EventRow { created_at: at(253_402_300_800, 0), ..base }),
        ("a leap second", EventRow { created_at: at(1_483_228_799, 1_500_000_000), ..base }),
        ("the first again", EventRow { ..base }),
    ];
    // Twice over: the second pass starts with the memo full of the last row's parts.
    for pass in 0..2 {
        for (name, row) in &rows {
            let written = stored_event_json(row).unwrap();
            assert_eq!(&*written.json, serdes(row), "pass {pass}: {name}");
            assert_eq!(written.seq, row.seq);
        }
    }
}

#[test]
fn a_damaged_column_is_an_error_after_a_good_row_with_the_same_everything_else() {
    let good = EventRow {
        id: Uuid::now_v7(),
        agent_id: Uuid::now_v7(),
        seq: 1,
        run_id: None,
        thread_id: None,
        block_id: None,
        message_id: None,
        kind: "user",
        delta: None,
        delta_path: None,
        delta_action: None,
        content: "{\"text\":\"hi\"}",
        raw: None,
        metadata: "{}",
        created_at: at(1_764_000_000, 0),
    };
    let damaged: [(&str, EventRow<'_>); 5] = [
        ("content", EventRow { content: "{\"text\":", ..good }),
        ("metadata", EventRow { metadata: "{]", ..good }),
        ("delta", EventRow { delta: Some("\"open"), ..good }),
        ("raw", EventRow { raw: Some("nul"), ..good }),
        ("delta action", EventRow { delta_action: Some("explode"), ..good }),
    ];
    for (name, row) in damaged {
        stored_event_json(&good).unwrap();
        assert!(stored_event_json(&row).is_err(), "a damaged {name} read as text");
        // And the good row after it is whole again.
        assert_eq!(&*stored_event_json(&good).unwrap().json, serdes(&good), "{name}");
    }
}

#[test]
fn a_string_is_checked_whether_or_not_it_has_escapes() {
    use crate::store::rows::checked_json;
    for good in ["\"\"", "\"tok\"", "\" é 🦀 \u{7f}\"", "\"a \\\"q\\\"\"", "\"\\u0001\"", "null"]
    {
        assert_eq!(checked_json(good).unwrap(), good);
    }
    for bad in ["\"", "\"a\"b\"", "\"a\\\"", "\"\u{1}\"", "\"open", "open\"", "\"a\" \"b\""] {
        assert!(checked_json(bad).is_err(), "{bad:?} passed as JSON");
    }
}
