//! Rows of stream messages: one append's messages in one row, every message back as appended.

use app::{AgentEvent, EventKind};
use chrono::{Duration, TimeZone, Utc};
use serde_json::{json, Value};
use uuid::Uuid;

use super::expand::Pick;
use super::join_tests::Stored;
use super::tests::{continues_only_where_named, Change};
use super::*;
use crate::limits::{CHUNK_EVENTS_MAX, MESSAGE_ROW_BYTES_MAX};

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
    // The columns as the stores write them: a row of messages' pieces carry its checksum.
    let stored = Stored::of_chunk(chunk);
    let mut out = Vec::new();
    stored.row().expand(pick, |row| row.to_event(), &mut out).unwrap();
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
    assert_eq!(column, Value::Array(contents()), "the column is their array");
    assert_eq!(read_back(&chunk, Pick::All), events);
    for since in 19..=28 {
        for limit in [1, 3, 100] {
            let want: Vec<_> =
                events.iter().filter(|event| event.seq > since).take(limit).cloned().collect();
            let read = read_back(&chunk, Pick::Range { since, limit: limit as u32 });
            assert_eq!(read, want, "since {since}, limit {limit}");
        }
    }
    assert_eq!(read_back(&chunk, Pick::Id(events[5].id)), vec![events[5].clone()]);
}

/// What ends a row of messages: each case changes one thing of the message that would have
/// continued it.
#[test]
fn a_row_of_messages_ends_where_a_message_does_not_continue_it() {
    let first = message(10, 0, json!(1), 0);
    let next = || message(11, 1, json!(2), 5);
    let cases: Vec<(&str, Change)> = vec![
        ("continues", Box::new(|_| {})),
        ("continues with other content", Box::new(|event| event.content = json!({"a": [1]}))),
        ("seq skips", Box::new(|event| event.seq = 12)),
        ("id not the next", Box::new(|event| event.id = Uuid::from_u128(99))),
        ("another append", Box::new(|event| event.block_id = Some(Uuid::nil()))),
        ("other kind", Box::new(|event| event.kind = EventKind::Text)),
        ("a delta", Box::new(|event| event.delta = Some(json!("x")))),
        ("a raw", Box::new(|event| event.raw = Some(json!({"t": 1})))),
        ("metadata", Box::new(|event| event.metadata = json!({"m": 1}))),
        ("a run", Box::new(|event| event.run_id = Some(Uuid::nil()))),
        ("too long", Box::new(|event| event.content = json!("x".repeat(MESSAGE_ROW_BYTES_MAX)))),
    ];
    continues_only_where_named(&first, next, cases, |chunk, name| {
        assert_eq!(chunk.content_column(), "[1]", "{name}")
    });
    let huge = message(10, 0, json!("x".repeat(MESSAGE_ROW_BYTES_MAX)), 0);
    assert!(Chunk::start(&huge).unwrap().is_none(), "a huge message is a row of its own");
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
    let mut chunk = Chunk::start(&message(1, 0, text.clone(), 0)).unwrap().unwrap();
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
    assert!(message_pieces("[1,22]", &[1, 0, 2, 0], 0, 3).is_err(), "count differs");
}

/// A row of messages' pieces carry its content's checksum: a content that differs by a byte is
/// refused, even when every message is still JSON; a row without one (written before rows had
/// it) reads, and its messages are left to be checked as JSON.
#[test]
fn a_row_of_messages_is_checked_by_its_checksum() {
    let content = "[1,22]";
    let pieces: &[u8] = &[1, 0, 2, 0];
    let column = columns::messages_pieces_column(content, pieces);
    assert_eq!(column.len(), columns::CHECKSUM_BYTES + pieces.len());
    let (cut, checked) = checked_message_pieces(content, &column, 0, 2).unwrap();
    assert!(checked);
    assert_eq!(cut.iter().map(|piece| piece.text).collect::<Vec<_>>(), ["1", "22"]);
    let (cut, checked) = checked_message_pieces(content, pieces, 0, 2).unwrap();
    assert!(!checked, "a row without a checksum");
    assert_eq!(cut.len(), 2);
    let refused: [(&str, &[u8]); 4] = [
        ("[1,23]", &column),     // still JSON, not what was written
        ("[2,22]", &column),     // the same
        (content, &column[..3]), // the checksum cut short
        (content, &[&column[..5], &[3, 0]][..].concat()), // the pieces changed after it
    ];
    // Lengths changed so that each cut still meets a comma, inside a string: every structural
    // check passes, and the first message would be `"a`. Only the checksum refuses it.
    let content = r#"["a,b",1]"#;
    let column = columns::messages_pieces_column(content, &[5, 0, 1, 0]);
    assert!(checked_message_pieces(content, &column, 0, 2).unwrap().1);
    let moved = [&column[..5], &[2, 0, 4, 0][..]].concat();
    assert!(message_pieces(content, &moved[5..], 0, 2).is_ok(), "the structure alone passes");
    let result = checked_message_pieces(content, &moved, 0, 2);
    assert!(result.is_err(), "{result:?}");
    for (index, (content, encoded)) in refused.iter().enumerate() {
        let result = checked_message_pieces(content, encoded, 0, 2);
        assert!(result.is_err(), "case {index}: {result:?}");
    }
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
    let mut first = AppendBatch::new(Uuid::from_u128(1), vec![draft(7), draft(7), draft(7)]);
    chains.assign(&mut first);
    assert_eq!(Some(first.drafts[1].id), next_id(first.drafts[0].id));
    assert_eq!(Some(first.drafts[2].id), next_id(first.drafts[1].id));
    let mut second = AppendBatch::new(Uuid::from_u128(1), vec![draft(8)]);
    let own = second.drafts[0].id;
    chains.assign(&mut second);
    assert_eq!(second.drafts[0].id, own, "the next append starts its own row");
}

/// A single message at `seq`: an append by itself, its block its own id.
fn single(seq: u64, k: u64, content: Value) -> AgentEvent {
    let event = message(seq, k, content, k as i64 * 1_000);
    AgentEvent { block_id: Some(event.id), ..event }
}

/// Appends of one message each share a row (the fold joins their rows), and each message comes
/// back with its own block (its id): a fork's sub-offset still counts within its append alone.
#[test]
fn single_message_appends_share_a_row_and_keep_their_own_blocks() {
    let events: Vec<AgentEvent> = contents()
        .into_iter()
        .enumerate()
        .map(|(k, content)| single(40 + k as u64, k as u64, content))
        .collect();
    let mut chunk = Chunk::start(&events[0]).unwrap().unwrap();
    for event in &events[1..] {
        assert!(chunk.extend(event), "seq {}", event.seq);
    }
    let read = read_back(&chunk, Pick::All);
    assert_eq!(read, events);
    assert!(read.iter().all(|event| event.block_id == Some(event.id)));
    assert_eq!(read_back(&chunk, Pick::Range { since: 44, limit: 2 }), events[5..7]);

    // Singles and the messages of an append of several never share a row.
    let several = message(48, 8, json!(1), 0);
    assert!(!chunk.clone().extend(&several), "several after singles");
    let mut of_several = Chunk::start(&message(10, 0, json!(1), 0)).unwrap().unwrap();
    let mut lone = single(11, 1, json!(2));
    assert!(!of_several.extend(&lone), "a single after several");
    lone.block_id = Some(Uuid::nil());
    assert!(!chunk.clone().extend(&lone), "another append's block");

    // A row of singles is rewritten by each fold step that adds to it: it stays small.
    let text = json!("s".repeat(40));
    let mut chunk = Chunk::start(&single(1, 0, text.clone())).unwrap().unwrap();
    let mut seq = 1;
    while chunk.extend(&single(seq + 1, seq, text.clone())) {
        seq += 1;
    }
    let bytes = chunk.content_column().len() + chunk.pieces.len();
    assert!(bytes <= crate::limits::SINGLES_ROW_BYTES_MAX, "{bytes}");
    assert!(seq >= 40, "{seq} messages of 42 bytes");
}

/// The writer chains single-message appends of a stream across appends (each message's block
/// moving with its id), and never a single into an append of several or the reverse.
#[test]
fn ids_chain_across_single_message_appends() {
    use crate::store::{AppendBatch, EventDraft};
    let agent_id = Uuid::from_u128(1);
    let batch = |count: usize| {
        let first = Uuid::now_v7();
        let block = if count == 1 { first } else { Uuid::now_v7() };
        let drafts = (0..count as u64)
            .map(|k| {
                let mut draft = EventDraft::new(EventKind::StreamMessage);
                draft.id = nth_id(first, k).unwrap();
                draft.block_id = Some(block);
                draft.content = json!(r#"{"n":1}"#);
                draft
            })
            .collect();
        AppendBatch::new(agent_id, drafts)
    };
    let mut chains = IdChains::default();
    let mut singles = [batch(1), batch(1), batch(1)];
    for single in &mut singles {
        chains.assign(single);
    }
    for pair in singles.windows(2) {
        assert_eq!(Some(pair[1].drafts[0].id), next_id(pair[0].drafts[0].id));
    }
    for single in &singles {
        assert_eq!(single.drafts[0].block_id, Some(single.drafts[0].id));
    }
    let mut several = batch(2);
    let own = several.drafts[0].id;
    chains.assign(&mut several);
    assert_eq!(several.drafts[0].id, own, "an append of several starts its own row");
    let mut after = batch(1);
    let own = after.drafts[0].id;
    chains.assign(&mut after);
    assert_eq!(after.drafts[0].id, own, "a single after several starts its own row");
    assert_eq!(after.drafts[0].block_id, Some(own));
}
