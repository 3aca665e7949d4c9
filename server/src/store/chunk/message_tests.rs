//! Rows of stream messages: one append's messages in one row, every message back as appended.

use app::{AgentEvent, EventKind};
use chrono::{Duration, TimeZone, Utc};
use serde_json::{json, Value};
use uuid::Uuid;

use super::expand::{Pick, StoredRow};
use super::*;
use crate::limits::{CHUNK_EVENTS_MAX, MESSAGE_ROW_BYTES_MAX};
use crate::store::rows::EventRow;

const HEAD: Uuid = Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0010);

fn message(seq: u64, k: u64, content: Value, nanos_after: i64) -> AgentEvent {
    let base = Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap();
    AgentEvent {
        block_id: Some(Uuid::from_u128(4)),
        created_at: base + Duration::nanoseconds(nanos_after),
        ..AgentEvent::bare(
            nth_id(HEAD, k).unwrap(),
            Uuid::from_u128(1),
            seq,
            EventKind::StreamMessage,
            // A stream message's content is its JSON text.
            Value::String(content.to_string()),
        )
    }
}

fn contents() -> Vec<Value> {
    vec![
        json!({"t": 1, "text": "a token"}),
        json!("a string with , and ] and [ inside"),
        json!([1, [2, 3], {"a": "]"}]),
        json!(null),
        json!(-0.5),
        json!({"wörld": "🙂 \"q\"\n"}),
        json!([]),
        json!({}),
    ]
}

/// The row as a store reads it back, expanded with `pick`.
fn read_back(chunk: &Chunk, pick: Pick) -> Vec<AgentEvent> {
    let content = chunk.content_column();
    let head = &chunk.head;
    let metadata = crate::store::rows::json_text(&head.metadata);
    let row = StoredRow {
        event: EventRow {
            id: head.id,
            agent_id: head.agent_id,
            seq: head.seq,
            run_id: head.run_id,
            thread_id: head.thread_id,
            block_id: head.block_id,
            message_id: head.message_id,
            kind: head.kind.as_str(),
            delta: chunk.delta_column(),
            delta_path: head.delta_path.as_deref(),
            delta_action: head.delta_action.map(app::DeltaAction::as_str),
            content: &content,
            raw: None,
            metadata: &metadata,
            created_at: head.created_at,
        },
        last_seq: chunk.last_seq,
        pieces: Some(&chunk.pieces),
        raws: None,
    };
    let mut out = Vec::new();
    row.expand(pick, |row| row.to_event(), &mut out).unwrap();
    out
}

/// One append's messages: one row whose `content` is their JSON array, and every message comes
/// back — content, seq, id and time — from any cursor and by id.
#[test]
fn a_row_of_messages_gives_back_every_message() {
    let times = [0, 1_000, 999, 25_000_000_000, -3, 7, 7, 8];
    let events: Vec<AgentEvent> = contents()
        .into_iter()
        .enumerate()
        .map(|(k, content)| message(20 + k as u64, k as u64, content, times[k]))
        .collect();
    let mut chunk = Chunk::start(&events[0]).unwrap().unwrap();
    assert_eq!(chunk.form, Form::Messages);
    for event in &events[1..] {
        assert!(chunk.extend(event), "seq {}", event.seq);
    }
    assert_eq!(chunk.delta_column(), None);
    assert_eq!(chunk.raws_column(), None, "messages carry no raw events");
    let column: Value = serde_json::from_str(&chunk.content_column()).unwrap();
    assert_eq!(
        column,
        Value::Array(contents()),
        "the column is their array"
    );
    assert_eq!(read_back(&chunk, Pick::All), events);
    for since in 19..=28 {
        for limit in [1, 3, 100] {
            let want: Vec<_> = events
                .iter()
                .filter(|event| event.seq > since)
                .take(limit)
                .cloned()
                .collect();
            let read = read_back(
                &chunk,
                Pick::Range {
                    since,
                    limit: limit as u32,
                },
            );
            assert_eq!(read, want, "since {since}, limit {limit}");
        }
    }
    assert_eq!(
        read_back(&chunk, Pick::Id(events[5].id)),
        vec![events[5].clone()]
    );
}

/// What ends a row of messages: each case changes one thing of the message that would have
/// continued it.
#[test]
fn a_row_of_messages_ends_where_a_message_does_not_continue_it() {
    let first = message(10, 0, json!(1), 0);
    let next = || message(11, 1, json!(2), 5);
    type Change = Box<dyn Fn(&mut AgentEvent)>;
    let cases: Vec<(&str, Change)> = vec![
        ("continues", Box::new(|_| {})),
        (
            "continues with other content",
            Box::new(|event| event.content = json!({"a": [1]})),
        ),
        ("seq skips", Box::new(|event| event.seq = 12)),
        (
            "id not the next",
            Box::new(|event| event.id = Uuid::from_u128(99)),
        ),
        (
            "another append",
            Box::new(|event| event.block_id = Some(Uuid::nil())),
        ),
        ("other kind", Box::new(|event| event.kind = EventKind::Text)),
        ("a delta", Box::new(|event| event.delta = Some(json!("x")))),
        ("a raw", Box::new(|event| event.raw = Some(json!({"t": 1})))),
        (
            "metadata",
            Box::new(|event| event.metadata = json!({"m": 1})),
        ),
        ("a run", Box::new(|event| event.run_id = Some(Uuid::nil()))),
        (
            "too long",
            Box::new(|event| event.content = json!("x".repeat(MESSAGE_ROW_BYTES_MAX))),
        ),
    ];
    for (name, change) in cases {
        let mut chunk = Chunk::start(&first).unwrap().unwrap();
        let mut event = next();
        change(&mut event);
        let continues = name.starts_with("continues");
        assert_eq!(chunk.extend(&event), continues, "{name}");
        if !continues {
            assert_eq!(chunk.last_seq, 10, "{name}: nothing changed");
            assert_eq!(chunk.content_column(), "[1]", "{name}");
        }
    }
    let huge = message(10, 0, json!("x".repeat(MESSAGE_ROW_BYTES_MAX)), 0);
    assert!(
        Chunk::start(&huge).unwrap().is_none(),
        "a huge message is a row of its own"
    );
}

#[test]
fn a_row_of_messages_is_bounded_in_messages_and_bytes() {
    let mut chunk = Chunk::start(&message(1, 0, json!(0), 0)).unwrap().unwrap();
    let mut seq = 1;
    while chunk.extend(&message(seq + 1, seq, json!(seq), 0)) {
        seq += 1;
    }
    assert_eq!(seq, CHUNK_EVENTS_MAX);
    let text = json!("m".repeat(1_000));
    let mut chunk = Chunk::start(&message(1, 0, text.clone(), 0))
        .unwrap()
        .unwrap();
    let mut seq = 1;
    while chunk.extend(&message(seq + 1, seq, text.clone(), 1_000_000)) {
        seq += 1;
    }
    let bytes = chunk.content_column().len() + chunk.pieces.len();
    assert!(bytes <= MESSAGE_ROW_BYTES_MAX, "{bytes}");
    assert!(bytes > MESSAGE_ROW_BYTES_MAX - 1_100, "{bytes}");
}

/// A damaged row of messages is an error, never a wrong message.
#[test]
fn damaged_rows_of_messages_are_refused() {
    let cases: [(&str, &[u8], u64); 7] = [
        ("[1,22]", &[1, 0, 2, 0], 2),
        ("[1,22", &[1, 0, 2, 0], 2),   // not an array
        ("1,22]", &[1, 0, 2, 0], 2),   // not an array
        ("[1;22]", &[1, 0, 2, 0], 2),  // no comma where the lengths say
        ("[1,22]", &[2, 0, 1, 0], 2),  // lengths cut elsewhere
        ("[1,22]", &[1, 0, 1, 0], 2),  // text left over
        ("[1,22,]", &[1, 0, 2, 0], 2), // a trailing comma
    ];
    for (index, (content, encoded, count)) in cases.into_iter().enumerate() {
        let result = message_pieces(content, encoded, 0, count);
        assert_eq!(result.is_ok(), index == 0, "case {index}: {result:?}");
    }
    assert!(
        message_pieces("[1,22]", &[1, 0, 2, 0], 0, 3).is_err(),
        "count differs"
    );
}

/// The writer chains the ids of one append's messages, and only those.
#[test]
fn ids_chain_within_one_append_of_messages() {
    use crate::store::{AppendBatch, EventDraft};
    let draft = |block: u128| {
        let mut draft = EventDraft::new(EventKind::StreamMessage);
        draft.block_id = Some(Uuid::from_u128(block));
        draft.content = json!(r#"{"n":1}"#);
        draft
    };
    let mut chains = IdChains::default();
    let mut first = AppendBatch {
        agent_id: Uuid::from_u128(1),
        drafts: vec![draft(7), draft(7), draft(7)],
        producer: None,
    };
    chains.assign(&mut first);
    assert_eq!(Some(first.drafts[1].id), next_id(first.drafts[0].id));
    assert_eq!(Some(first.drafts[2].id), next_id(first.drafts[1].id));
    let mut second = AppendBatch {
        agent_id: Uuid::from_u128(1),
        drafts: vec![draft(8)],
        producer: None,
    };
    let own = second.drafts[0].id;
    chains.assign(&mut second);
    assert_eq!(
        second.drafts[0].id, own,
        "the next append starts its own row"
    );
}
