//! A stored row's event text: the JSON serde makes of the event, with the parts that repeat
//! from one event to the next written once. Both stores' JSON reads make their events here.
//!
//! **Why.** A catch-up reads thousands of events in a row that differ only in id, seq, delta and
//! time: a streamed reply's events share agent, run, thread, block, message, kind, delta path and
//! action, content and metadata. Writing each event's text from scratch formatted five ids,
//! checked `content` and `metadata` as JSON and formatted the date for every one of them: about
//! a third of the server's CPU in a 10 000-event WebSocket resume. Here each such part keeps the
//! text it made last ([`Memo`]) and reuses it when its inputs are the same, compared by value
//! (never by address), so the text is byte for byte what it would be written from scratch.
//!
//! The memo is per thread (reads run on the blocking pool, one row after another), holds one
//! entry per part, and keeps nothing longer than [`EVENT_TEXT_MEMO_BYTES_MAX`]. The body part
//! is kept for deltas only: other events' contents differ from one to the next.

use std::cell::RefCell;

use app::EventKind;
use uuid::Uuid;

use super::event_text::{
    self as event_text, write_head_ids, write_seconds, write_subseconds, Text,
    EVENT_JSON_FIXED_BYTES,
};
use crate::store::rows::{checked_json, EventRow};
use crate::store::{EventJson, StoreResult};

/// The longest part (and inputs) a thread's memo keeps, in bytes: longer `content` or `metadata`
/// (a tool's large result) is written each time, as before, rather than held.
pub const EVENT_TEXT_MEMO_BYTES_MAX: usize = 4 * 1024;

/// The last text of each repeating part, with what it was made from.
#[derive(Default)]
struct Memo {
    /// `,"agent_id":"…","seq":` of this agent.
    agent: Option<(Uuid, String)>,
    /// `,"run_id":…` through `"kind":"…"`.
    ids: Option<(Ids, String)>,
    /// `,"delta_path":…`, `,"delta_action":…` and `,"content":…`.
    body: Option<(Body, String)>,
    /// `,"metadata":…`.
    metadata: Option<(String, String)>,
    /// `,"created_at":"YYYY-MM-DDTHH:MM:SS` of this whole second since the epoch.
    second: Option<(i64, String)>,
}

#[derive(PartialEq)]
struct Ids {
    run_id: Option<Uuid>,
    thread_id: Option<Uuid>,
    block_id: Option<Uuid>,
    message_id: Option<Uuid>,
    kind: &'static str,
}

#[derive(PartialEq)]
struct Body {
    delta_path: Option<String>,
    delta_action: Option<String>,
    stream_message: bool,
    content: String,
}

thread_local! {
    static MEMO: RefCell<Memo> = RefCell::new(Memo::default());
}

/// The JSON serde makes of the row's event (field order, omitted `None`s), byte for byte; the
/// JSON columns are checked (once per distinct value) and copied.
pub fn event_json(row: &EventRow<'_>) -> StoreResult<EventJson> {
    let mut json = Text::with_capacity(
        EVENT_JSON_FIXED_BYTES
            + row.delta.map_or(0, str::len)
            + row.delta_path.map_or(0, str::len)
            + row.content.len()
            + row.raw.map_or(0, str::len)
            + row.metadata.len(),
    );
    write_event(row, &mut json)?;
    Ok(EventJson { seq: row.seq, json: json.done().into_boxed_str() })
}

/// [`event_json`]'s text, written at the end of `json` (a page of events).
pub fn write_event(row: &EventRow<'_>, json: &mut Text) -> StoreResult<()> {
    MEMO.with(|memo| write(&mut memo.borrow_mut(), row, json))
}

fn write(memo: &mut Memo, row: &EventRow<'_>, json: &mut Text) -> StoreResult<()> {
    let mut buffer = Uuid::encode_buffer();
    json.push_str("{\"id\":\"");
    json.push_str(row.id.hyphenated().encode_lower(&mut buffer));
    json.push_str("\"");
    json.push_str(remembered(&mut memo.agent, row.agent_id, |text| {
        text.push_str(",\"agent_id\":\"");
        text.push_str(row.agent_id.hyphenated().encode_lower(&mut Uuid::encode_buffer()));
        text.push_str("\",\"seq\":");
        Ok(())
    })?);
    json.push_number(row.seq);
    let ids = Ids {
        run_id: row.run_id,
        thread_id: row.thread_id,
        block_id: row.block_id,
        message_id: row.message_id,
        kind: EventKind::parse(row.kind).as_str(),
    };
    let kind = ids.kind;
    json.push_str(remembered(&mut memo.ids, ids, |text| {
        write_head_ids(text, [row.run_id, row.thread_id, row.block_id, row.message_id], kind);
        Ok(())
    })?);
    if let Some(delta) = row.delta {
        json.push_str(",\"delta\":");
        json.push_str(checked_json(delta)?);
    }
    let stream_message = row.kind == EventKind::StreamMessage.as_str();
    let write_body = |text: &mut Text| -> StoreResult<()> {
        if let Some(path) = row.delta_path {
            text.push_str(",\"delta_path\":");
            text.push_string(path);
        }
        if let Some(name) = row.delta_action {
            event_text::write_action(text, crate::store::rows::delta_action(name)?);
        }
        text.push_str(",\"content\":");
        if stream_message {
            // The event's content is the message's text as a string.
            text.push_string(checked_json(row.content)?);
        } else {
            text.push_str(checked_json(row.content)?);
        }
        Ok(())
    };
    // A delta's event shares its body with the deltas before it (a reply's `null` content);
    // any other event's content is its own (a message, a call), so keeping it would only copy.
    let shared = row.delta.is_some();
    if shared && row.content.len() + row.delta_path.map_or(0, str::len) <= EVENT_TEXT_MEMO_BYTES_MAX
    {
        let body = || Body {
            delta_path: row.delta_path.map(str::to_owned),
            delta_action: row.delta_action.map(str::to_owned),
            stream_message,
            content: row.content.to_owned(),
        };
        let same = same_body(row, stream_message);
        json.push_str(remembered_by(&mut memo.body, same, body, write_body)?);
    } else {
        write_body(json)?;
    }
    if let Some(raw) = row.raw {
        json.push_str(",\"raw\":");
        json.push_str(checked_json(raw)?);
    }
    let write_metadata = |text: &mut Text| -> StoreResult<()> {
        text.push_str(",\"metadata\":");
        text.push_str(checked_json(row.metadata)?);
        Ok(())
    };
    if row.metadata.len() <= EVENT_TEXT_MEMO_BYTES_MAX {
        let same = |kept: &String| kept == row.metadata;
        let key = || row.metadata.to_owned();
        json.push_str(remembered_by(&mut memo.metadata, same, key, write_metadata)?);
    } else {
        write_metadata(json)?;
    }
    let time = row.created_at;
    // The memo holds only plain seconds, so a hit needs no check of the year.
    let (second, nanos) = (time.timestamp(), time.timestamp_subsec_nanos());
    let hit =
        nanos < 1_000_000_000 && memo.second.as_ref().is_some_and(|(kept, _)| *kept == second);
    if hit || event_text::has_plain_time(&time) {
        json.push_str(remembered(&mut memo.second, second, |text| {
            write_seconds(text, &time);
            Ok(())
        })?);
        write_subseconds(json, &time);
    } else {
        event_text::write_time(json, &time);
    }
    Ok(())
}

/// Whether the kept body is this row's, compared field by field without copying the row's.
fn same_body<'r>(row: &'r EventRow<'_>, stream_message: bool) -> impl Fn(&Body) -> bool + 'r {
    move |kept: &Body| {
        kept.stream_message == stream_message
            && kept.content == row.content
            && kept.delta_path.as_deref() == row.delta_path
            && kept.delta_action.as_deref() == row.delta_action
    }
}

/// The kept text when `key` equals the kept key; otherwise the text `write` makes, kept.
fn remembered<K: PartialEq>(
    slot: &mut Option<(K, String)>,
    key: K,
    write: impl FnOnce(&mut Text) -> StoreResult<()>,
) -> StoreResult<&str> {
    if slot.as_ref().is_some_and(|(kept, _)| *kept == key) {
        return Ok(slot.as_ref().map_or("", |(_, text)| text.as_str()));
    }
    remember(slot, key, write)
}

/// [`remembered`] with the key made (copied) only on a miss: `same` compares without it.
fn remembered_by<K>(
    slot: &mut Option<(K, String)>,
    same: impl Fn(&K) -> bool,
    key: impl FnOnce() -> K,
    write: impl FnOnce(&mut Text) -> StoreResult<()>,
) -> StoreResult<&str> {
    if slot.as_ref().is_some_and(|(kept, _)| same(kept)) {
        return Ok(slot.as_ref().map_or("", |(_, text)| text.as_str()));
    }
    remember(slot, key(), write)
}

fn remember<K>(
    slot: &mut Option<(K, String)>,
    key: K,
    write: impl FnOnce(&mut Text) -> StoreResult<()>,
) -> StoreResult<&str> {
    // A failed check keeps nothing: the next row is checked afresh.
    *slot = None;
    let mut text = Text::with_capacity(64);
    write(&mut text)?;
    Ok(slot.insert((key, text.done())).1.as_str())
}

#[cfg(test)]
mod tests;
