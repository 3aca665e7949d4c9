use app::{AgentEvent, DeltaAction, EventKind};
use chrono::{Duration, TimeZone, Utc};
use serde_json::{json, Value};
use uuid::Uuid;

use super::*;
use crate::limits::{CHUNK_BYTES_MAX, CHUNK_EVENTS_MAX, CHUNK_RAW_BYTES_MAX};

fn append(seq: u64, id: Uuid, text: &str, nanos_after: i64) -> AgentEvent {
    let base = Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap();
    AgentEvent {
        run_id: Some(Uuid::from_u128(2)),
        thread_id: Some(Uuid::from_u128(3)),
        block_id: Some(Uuid::from_u128(4)),
        message_id: Some(Uuid::from_u128(5)),
        delta: Some(json!(text)),
        delta_path: Some("text".into()),
        delta_action: Some(DeltaAction::Append),
        created_at: base + Duration::nanoseconds(nanos_after),
        ..AgentEvent::bare(id, Uuid::from_u128(1), seq, EventKind::Text, Value::Null)
    }
}

/// Appends that continue one another: every event comes back, text, seq, id and time, exactly.
#[test]
fn a_run_row_gives_back_every_event() {
    let head = Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0010);
    let texts = ["Hel", "lo, ", "wörld", "", "🙂", " \"q\"\n"];
    let times = [0, 1_000, 999, 25_000_000_000, -3, 7];
    let events: Vec<AgentEvent> = (0..texts.len())
        .map(|k| append(10 + k as u64, nth_id(head, k as u64).unwrap(), texts[k], times[k]))
        .collect();
    let mut chunk = Chunk::start(&events[0]).unwrap().unwrap();
    for event in &events[1..] {
        assert!(chunk.extend(event), "seq {}", event.seq);
    }
    assert_eq!(chunk.last_seq, 15);
    let first_nanos = time_nanos(events[0].created_at).unwrap();
    let pieces = pieces(&chunk.text, &chunk.pieces, first_nanos, 6).unwrap();
    for (piece, event) in pieces.iter().zip(&events) {
        assert_eq!(Some(&json!(piece.text)), event.delta.as_ref());
        assert_eq!(time_from_nanos(piece.nanos), event.created_at);
    }
    // Bytes per event: the text and two varints, here 1 + 1..5.
    assert!(chunk.pieces.len() <= 6 * 7, "{}", chunk.pieces.len());
    assert_eq!(chunk.raws_column(), None, "no raw events, no column");
}

/// Raw provider events ride in the row, deflated, each back with its event (none where none).
#[test]
fn raw_events_come_back_with_their_events() {
    let head = Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0010);
    let raw = |k: u64| {
        (k != 2).then(|| json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": format!("t{k}")}}))
    };
    let events: Vec<AgentEvent> = (0..40u64)
        .map(|k| {
            let mut event = append(1 + k, nth_id(head, k).unwrap(), "t", k as i64);
            event.raw = raw(k);
            event
        })
        .collect();
    let mut chunk = Chunk::start(&events[0]).unwrap().unwrap();
    for event in &events[1..] {
        assert!(chunk.extend(event), "seq {}", event.seq);
    }
    let column = chunk.raws_column().unwrap();
    let back = raws(&column, 40).unwrap();
    for (k, text) in back.iter().enumerate() {
        let parsed = text.as_deref().map(|text| serde_json::from_str::<Value>(text).unwrap());
        assert_eq!(parsed, raw(k as u64), "event {k}");
    }
    let plain: usize = back.iter().flatten().map(String::len).sum();
    assert!(column.len() * 4 < plain, "{} deflated of {plain}", column.len());
    assert!(raws(&column, 41).is_err(), "count differs");
    assert!(raws(&column[..column.len() / 2], 40).is_err(), "cut short");
}

/// What ends a run: each case changes one thing of the event that would have continued it.
#[test]
fn a_run_ends_where_an_event_does_not_continue_it() {
    let head = Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0010);
    let first = append(10, head, "a", 0);
    let next = || append(11, next_id(head).unwrap(), "b", 5);
    let cases: Vec<(&str, Change)> = vec![
        ("continues", Box::new(|_| {})),
        ("seq skips", Box::new(|event| event.seq = 12)),
        ("id not the next", Box::new(|event| event.id = Uuid::from_u128(99))),
        ("other message", Box::new(|event| event.message_id = Some(Uuid::nil()))),
        ("other block", Box::new(|event| event.block_id = None)),
        ("other kind", Box::new(|event| event.kind = EventKind::Thinking)),
        ("other path", Box::new(|event| event.delta_path = Some("x".into()))),
        ("replace", Box::new(|event| event.delta_action = Some(DeltaAction::Replace))),
        ("not a string", Box::new(|event| event.delta = Some(json!(1)))),
        ("continues with a raw", Box::new(|event| event.raw = Some(json!({"t": 1})))),
        (
            "raw too long",
            Box::new(|event| event.raw = Some(json!("r".repeat(CHUNK_RAW_BYTES_MAX)))),
        ),
        ("metadata", Box::new(|event| event.metadata = json!({"m": 1}))),
        ("content", Box::new(|event| event.content = json!("c"))),
        ("other run", Box::new(|event| event.run_id = None)),
        ("too long", Box::new(|event| event.delta = Some(json!("x".repeat(CHUNK_BYTES_MAX))))),
    ];
    continues_only_where_named(&first, next, cases, |chunk, name| {
        assert_eq!(chunk.text, "a", "{name}")
    });
}

/// One change to an event that would continue a row.
pub(super) type Change = Box<dyn Fn(&mut AgentEvent)>;

/// Each case changes one thing of `next()`: the row started at `first` takes the event only
/// where the case's name begins with "continues"; where it does not, the row is as it was
/// (its last seq, and what `unchanged` checks).
pub(super) fn continues_only_where_named(
    first: &AgentEvent,
    next: impl Fn() -> AgentEvent,
    cases: Vec<(&str, Change)>,
    unchanged: impl Fn(&Chunk, &str),
) {
    for (name, change) in cases {
        let mut chunk = Chunk::start(first).unwrap().unwrap();
        let mut event = next();
        change(&mut event);
        let continues = name.starts_with("continues");
        assert_eq!(chunk.extend(&event), continues, "{name}");
        if !continues {
            assert_eq!(chunk.last_seq, first.seq, "{name}: nothing changed");
            unchanged(&chunk, name);
        }
    }
}

#[test]
fn a_row_is_bounded_in_events_and_bytes() {
    let head = Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0010);
    let mut chunk = Chunk::start(&append(1, head, "", 0)).unwrap().unwrap();
    let mut seq = 1;
    while chunk.extend(&append(seq + 1, nth_id(head, seq).unwrap(), "", 0)) {
        seq += 1;
    }
    assert_eq!(seq, CHUNK_EVENTS_MAX);
    let mut chunk = Chunk::start(&append(1, head, "abc", 0)).unwrap().unwrap();
    let mut seq = 1;
    while chunk.extend(&append(seq + 1, nth_id(head, seq).unwrap(), "abcdefgh", 1_000_000)) {
        seq += 1;
    }
    assert!(chunk.text.len() + chunk.pieces.len() <= CHUNK_BYTES_MAX);
    assert!(chunk.text.len() + chunk.pieces.len() > CHUNK_BYTES_MAX - 40);
}

#[test]
fn ids_chain_within_the_low_bits_only() {
    let id = Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_ffff_fffe);
    assert_eq!(next_id(id), Some(Uuid::from_u128(id.as_u128() + 1)));
    assert_eq!(next_id(next_id(id).unwrap()), None);
    assert_eq!(nth_id(id, 1), next_id(id));
    assert_eq!(nth_id(id, 2), None);
}

/// A damaged row is an error, never a wrong event.
#[test]
fn damaged_pieces_are_refused() {
    let cases: [(&str, &[u8], u64); 5] = [
        ("ab", &[1, 0, 1, 0], 2),
        ("ab", &[1, 0], 1),       // text left over
        ("ab", &[3, 0], 1),       // beyond the text
        ("é", &[1, 0, 1, 0], 2),  // inside a character
        ("ab", &[1, 0, 0x81], 2), // cut short
    ];
    for (index, (text, encoded, count)) in cases.into_iter().enumerate() {
        let result = pieces(text, encoded, 0, count);
        assert_eq!(result.is_ok(), index == 0, "case {index}: {result:?}");
    }
    assert!(pieces("ab", &[1, 0, 1, 0], 0, 3).is_err(), "count differs");
}

/// The writer's chaining: an append that continues the agent's previous draft (in the batch or
/// the batch before) gets the id after its id; anything else keeps its own.
#[test]
fn ids_chain_across_batches_and_break_where_the_part_changes() {
    use crate::store::{AppendBatch, EventDraft};
    let (agent, other_agent, message) =
        (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(5));
    let token = |kind| {
        let mut draft = EventDraft::new(kind).appending("text", json!("x"));
        draft.message_id = Some(message);
        draft
    };
    let mut chains = IdChains::default();
    let mut first = AppendBatch::new(agent, vec![token(EventKind::Text), token(EventKind::Text)]);
    chains.assign(&mut first);
    assert_eq!(Some(first.drafts[1].id), next_id(first.drafts[0].id));
    let mut elsewhere = AppendBatch::new(other_agent, vec![token(EventKind::Text)]);
    let own = elsewhere.drafts[0].id;
    chains.assign(&mut elsewhere);
    assert_eq!(elsewhere.drafts[0].id, own, "another agent's chain is its own");
    let mut second = AppendBatch {
        agent_id: agent,
        drafts: vec![token(EventKind::Text), token(EventKind::Thinking), token(EventKind::Text)],
        producer: None,
    };
    let (thinking, text) = (second.drafts[1].id, second.drafts[2].id);
    chains.assign(&mut second);
    assert_eq!(Some(second.drafts[0].id), next_id(first.drafts[1].id));
    assert_eq!(second.drafts[1].id, thinking, "another kind starts anew");
    assert_eq!(second.drafts[2].id, text, "and so does the text after it");
}
