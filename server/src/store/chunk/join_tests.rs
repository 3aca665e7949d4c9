//! The fold taking stored run rows whole: the rows it writes give back every event, in order,
//! within every bound, and are the very rows the event-by-event fold wrote.

use app::{AgentEvent, DeltaAction, EventKind};
use chrono::{Duration, TimeZone, Utc};
use serde_json::{json, Value};
use uuid::Uuid;

use super::expand::{Pick, StoredRow};
use super::*;
use crate::limits::{CHUNK_BYTES_MAX, CHUNK_EVENTS_MAX, SINGLES_ROW_BYTES_MAX};
use crate::store::rows::EventRow;

const HEAD: Uuid = Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0010);

/// A row's columns as the stores write them.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Stored {
    head: AgentEvent,
    last_seq: u64,
    delta: Option<String>,
    content: String,
    pieces: Option<Vec<u8>>,
    raws: Option<Vec<u8>>,
    metadata: String,
    raw: Option<String>,
}

impl Stored {
    pub(super) fn of_chunk(chunk: &Chunk) -> Stored {
        let content = chunk.content_column();
        let pieces = chunk.pieces_column(&content).into_owned();
        Stored {
            head: chunk.head.clone(),
            last_seq: chunk.last_seq,
            delta: chunk.delta_column().map(str::to_owned),
            content,
            pieces: Some(pieces),
            raws: chunk.raws_column(),
            metadata: crate::store::rows::json_text(&chunk.head.metadata),
            raw: None,
        }
    }

    fn of_event(event: &AgentEvent) -> Stored {
        Stored {
            head: event.clone(),
            last_seq: event.seq,
            delta: event.delta.as_ref().map(crate::store::rows::json_text),
            content: crate::store::rows::json_text(&event.content),
            pieces: None,
            raws: None,
            metadata: crate::store::rows::json_text(&event.metadata),
            raw: event.raw.as_ref().map(crate::store::rows::json_text),
        }
    }

    pub(super) fn row(&self) -> StoredRow<'_> {
        let head = &self.head;
        StoredRow {
            event: EventRow {
                id: head.id,
                agent_id: head.agent_id,
                seq: head.seq,
                run_id: head.run_id,
                thread_id: head.thread_id,
                block_id: head.block_id,
                message_id: head.message_id,
                kind: head.kind.as_str(),
                delta: self.delta.as_deref(),
                delta_path: head.delta_path.as_deref(),
                delta_action: head.delta_action.map(DeltaAction::as_str),
                content: &self.content,
                raw: self.raw.as_deref(),
                metadata: &self.metadata,
                created_at: head.created_at,
            },
            last_seq: self.last_seq,
            pieces: self.pieces.as_deref(),
            raws: self.raws.as_deref(),
        }
    }

    fn events(&self) -> Vec<AgentEvent> {
        let mut out = Vec::new();
        self.row().expand(Pick::All, |row| row.to_event(), &mut out).unwrap();
        out
    }

    /// The row's bytes of text and pieces, as [`Chunk::extend`] bounds them.
    fn bytes(&self) -> usize {
        let text = self.delta.as_ref().map_or(self.content.len() - 1, String::len);
        text + self.pieces.as_ref().map_or(0, Vec::len)
    }
}

/// The rows `events` make when commits of `commit` events each write their own run rows (as
/// the append thread writes `recent`).
fn commit_rows(events: &[AgentEvent], commit: usize) -> Vec<Stored> {
    let mut rows = Vec::new();
    for batch in events.chunks(commit) {
        let mut group = OpenChunks::default().take([]);
        let mut write = |row: Written<'_>| {
            rows.push(match row {
                Written::Event(event) => Stored::of_event(event),
                Written::Chunk(chunk) => Stored::of_chunk(chunk),
            });
            Ok(())
        };
        for event in batch {
            group.add(event, &mut write).unwrap();
        }
        group.finish(&mut write).unwrap();
    }
    rows.sort_by_key(|row| row.head.seq);
    rows
}

/// The rows a fold of `rows` writes (the last write of each first seq: an upsert), taking each
/// run row whole where it can (`whole`) or always event by event; and how many went whole.
fn fold(rows: &[Stored], whole: bool) -> (Vec<Stored>, usize) {
    let mut written: Vec<Stored> = Vec::new();
    let mut write = |row: Written<'_>| {
        let row = match row {
            Written::Event(event) => Stored::of_event(event),
            Written::Chunk(chunk) => Stored::of_chunk(chunk),
        };
        written.retain(|kept| kept.head.seq != row.head.seq);
        written.push(row);
        Ok(())
    };
    let mut group = OpenChunks::default().take([]);
    let mut taken_whole = 0;
    for row in rows {
        let stored = row.row();
        if stored.pieces.is_none() {
            group.add(&stored.event.to_event().unwrap(), &mut write).unwrap();
            continue;
        }
        if whole && group.add_row(&stored.whole().unwrap(), &mut write).unwrap() {
            taken_whole += 1;
            continue;
        }
        for event in row.events() {
            group.add(&event, &mut write).unwrap();
        }
    }
    group.finish(&mut write).unwrap();
    written.sort_by_key(|row| row.head.seq);
    (written, taken_whole)
}

fn token(seq: u64, k: u64, text: &str, message: u128) -> AgentEvent {
    let base = Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap();
    AgentEvent {
        run_id: Some(Uuid::from_u128(2)),
        message_id: Some(Uuid::from_u128(message)),
        delta: Some(json!(text)),
        delta_path: Some("text".into()),
        delta_action: Some(DeltaAction::Append),
        created_at: base + Duration::nanoseconds(seq as i64 * 1_337 - (k as i64 % 3) * 7),
        ..AgentEvent::bare(
            nth_id(HEAD, k).unwrap(),
            Uuid::from_u128(1),
            seq,
            EventKind::Text,
            Value::Null,
        )
    }
}

/// `count` tokens of one message from seq 1 (ids chained), each made by `text`.
fn tokens(count: u64, text: impl Fn(u64) -> String) -> Vec<AgentEvent> {
    (0..count).map(|k| token(1 + k, k, &text(k), 5)).collect()
}

fn single(seq: u64, k: u64, content: Value) -> AgentEvent {
    let base = Utc.with_ymd_and_hms(2026, 11, 1, 12, 0, 0).unwrap();
    let id = nth_id(HEAD, k).unwrap();
    AgentEvent {
        block_id: Some(id),
        created_at: base + Duration::nanoseconds(k as i64 * 1_000),
        ..AgentEvent::bare(
            id,
            Uuid::from_u128(1),
            seq,
            EventKind::StreamMessage,
            Value::String(content.to_string()),
        )
    }
}

/// A case: its name, the events, and how many a commit writes.
type Case = (&'static str, Vec<AgentEvent>, usize);

#[test]
fn rows_taken_whole_give_back_every_event_within_bounds() {
    let with_raws = |count, every: usize| {
        let mut events = tokens(count, |k| format!("t{k}"));
        for (k, event) in events.iter_mut().enumerate() {
            if k % every == every - 1 {
                event.raw = Some(json!({"type": "delta", "text": format!("t{k}"), "i": k}));
            }
        }
        events
    };
    let two_messages = {
        let mut events = tokens(24, |_| "ab".into());
        for event in &mut events[10..] {
            event.message_id = Some(Uuid::from_u128(6));
        }
        events
    };
    let with_a_lone_event = {
        let mut events = tokens(12, |_| "x".into());
        events[5].delta_action = Some(DeltaAction::Replace);
        events
    };
    let singles: Vec<AgentEvent> =
        (0..60).map(|k| single(1 + k, k, json!({"n": k, "pad": "m".repeat(20)}))).collect();
    let cases: Vec<Case> = vec![
        ("small rows join", tokens(40, |k| "tok ".repeat(1 + k as usize % 3)), 3),
        ("one event a commit", tokens(20, |_| "é🙂".into()), 1),
        ("raw events ride along", with_raws(30, 1), 4),
        ("a raw event after rows without", with_raws(40, 10), 4),
        ("raw events split with their rows", with_raws(700, 3), 64),
        ("a part changes", two_messages, 5),
        ("an event that ends the run", with_a_lone_event, 4),
        ("rows past the bound", tokens(400, |_| "tok ".into()), 7),
        ("large rows split where the row is full", tokens(640, |_| "tok ".into()), 64),
        ("events past the count", tokens(600, |_| String::new()), 50),
        ("single messages", singles.clone(), 1),
        ("single messages, several a commit", singles, 7),
    ];
    for (name, events, commit) in cases {
        let rows = commit_rows(&events, commit);
        let (whole, taken) = fold(&rows, true);
        let (by_event, _) = fold(&rows, false);
        let back: Vec<AgentEvent> = whole.iter().flat_map(Stored::events).collect();
        assert_eq!(back, events, "{name}: every event back, in order");
        assert!(taken > 0, "{name}: rows taken whole");
        for row in &whole {
            let count = row.last_seq - row.head.seq + 1;
            assert!(count <= CHUNK_EVENTS_MAX, "{name}: {count} events in a row");
            let bound = match row.delta {
                Some(_) => CHUNK_BYTES_MAX,
                None => SINGLES_ROW_BYTES_MAX,
            };
            assert!(row.pieces.is_none() || row.bytes() <= bound, "{name}: {}", row.bytes());
        }
        assert_eq!(whole, by_event, "{name}: the event-by-event fold's rows, byte for byte");
    }
}

/// A row that does not continue the open row, or is damaged, changes nothing it should not.
#[test]
fn a_damaged_row_is_refused_whole() {
    let rows = commit_rows(&tokens(12, |_| "ab".into()), 4);
    let mut damaged = rows[1].clone();
    damaged.pieces.as_mut().unwrap().pop();
    assert!(damaged.row().whole().is_err(), "pieces cut short");
    let mut damaged = rows[1].clone();
    damaged.delta.as_mut().unwrap().push('x');
    assert!(damaged.row().whole().is_err(), "text left over");
    // Raw events for fewer or more events than the row holds.
    let mut events = tokens(8, |_| "ab".into());
    for event in &mut events {
        event.raw = Some(json!({"t": 1}));
    }
    let rows = commit_rows(&events, 4);
    assert!(rows[0].row().whole().is_ok());
    let mut damaged = rows[0].clone();
    damaged.raws = rows[0].raws.as_ref().map(|column| column[..column.len() / 2].to_vec());
    assert!(damaged.row().whole().is_err(), "raw events cut short");
    let mut damaged = rows[0].clone();
    damaged.last_seq -= 1;
    assert!(damaged.row().whole().is_err(), "an event fewer than its pieces");
}
