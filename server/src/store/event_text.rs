//! An event's JSON written field by field, byte for byte what serde makes of `AgentEvent`
//! (field order, omitted `None`s), shared by the two places that print events: a stored row
//! ([`super::rows::EventRow::to_json`], whose JSON columns are copied as stored) and a committed
//! event in memory ([`super::EventJson::of`], the live path and the resident tail).
//!
//! **Why not serde.** `serde_json::to_string(&event)` spent ~1.5–2 µs per token event on this
//! machine, most of it formatting six UUIDs and the time through `fmt` (a 10 000-event batch:
//! 15–20 ms), more than reading the same events from SQLite. The ids are written with `uuid`'s
//! encoder and the JSON values with serde_json's writer into one buffer.

use app::{AgentEvent, DeltaAction, EventKind};
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

/// Names, punctuation, six ids and the time come to about 490 bytes: an event's text starts
/// with this room (plus its values' text) and never grows.
pub(crate) const EVENT_JSON_FIXED_BYTES: usize = 512;

/// The fields before `delta`: ids, seq and kind.
pub(crate) struct Head {
    pub id: Uuid,
    pub agent_id: Uuid,
    pub seq: u64,
    pub coalesced_from: Option<u64>,
    pub run_id: Option<Uuid>,
    pub thread_id: Option<Uuid>,
    pub block_id: Option<Uuid>,
    pub message_id: Option<Uuid>,
    pub kind: &'static str,
}

/// Writes `{"id":…` through `"kind":"…"` (no comma after).
pub(crate) fn write_head(json: &mut String, head: &Head) {
    use std::fmt::Write as _;
    let mut buffer = Uuid::encode_buffer();
    let mut uuid = |json: &mut String, name: &str, id: Option<Uuid>| {
        if let Some(id) = id {
            json.push_str(name);
            json.push('"');
            json.push_str(id.hyphenated().encode_lower(&mut buffer));
            json.push('"');
        }
    };
    uuid(json, "{\"id\":", Some(head.id));
    uuid(json, ",\"agent_id\":", Some(head.agent_id));
    let _ = write!(json, ",\"seq\":{}", head.seq);
    if let Some(from) = head.coalesced_from {
        let _ = write!(json, ",\"coalesced_from\":{from}");
    }
    uuid(json, ",\"run_id\":", head.run_id);
    uuid(json, ",\"thread_id\":", head.thread_id);
    uuid(json, ",\"block_id\":", head.block_id);
    uuid(json, ",\"message_id\":", head.message_id);
    // `as_str` is serde's name (checked in `app::event`'s tests).
    json.push_str(",\"kind\":\"");
    json.push_str(head.kind);
    json.push('"');
}

/// Writes `,"delta_action":"…"`.
pub(crate) fn write_action(json: &mut String, action: DeltaAction) {
    json.push_str(",\"delta_action\":\"");
    json.push_str(action.as_str());
    json.push('"');
}

/// Writes `,"created_at":"…"}`: serde's form of a `DateTime<Utc>` (RFC 3339, `Z`), and the end.
pub(crate) fn write_time(json: &mut String, created_at: &DateTime<Utc>) {
    json.push_str(",\"created_at\":\"");
    json.push_str(&created_at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true));
    json.push_str("\"}");
}

/// A JSON string's text (quoted and escaped as serde_json escapes it).
pub(crate) fn write_string(json: &mut String, text: &str) {
    write_value_with(json, |buffer| serde_json::to_writer(buffer, text));
}

/// A JSON value's text, as serde_json prints it.
pub(crate) fn write_value(json: &mut String, value: &Value) {
    write_value_with(json, |buffer| serde_json::to_writer(buffer, value));
}

/// Runs serde_json's writer into the string's bytes. serde_json writes UTF-8 (its input is
/// `str`s and numbers), so the check that takes the bytes back never fails; were it ever to, the
/// text would be kept with the bad bytes replaced rather than a panic.
fn write_value_with(
    json: &mut String,
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), serde_json::Error>,
) {
    let mut bytes = std::mem::take(json).into_bytes();
    let start = bytes.len();
    // Writing into a `Vec` fails only for a map with non-string keys, which `Value` cannot hold.
    if write(&mut bytes).is_err() {
        bytes.truncate(start);
        bytes.extend_from_slice(b"null");
    }
    *json = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
    };
}

/// The JSON serde makes of `event`, without serde's field-by-field formatting.
pub(crate) fn event_text(event: &AgentEvent) -> String {
    let values = [event.delta.as_ref(), Some(&event.content), event.raw.as_ref()];
    let room: usize = values.into_iter().flatten().map(guess_len).sum::<usize>()
        + guess_len(&event.metadata)
        + event.delta_path.as_ref().map_or(0, |path| path.len() + 2);
    let mut json = String::with_capacity(EVENT_JSON_FIXED_BYTES + room);
    write_head(
        &mut json,
        &Head {
            id: event.id,
            agent_id: event.agent_id,
            seq: event.seq,
            coalesced_from: event.coalesced_from,
            run_id: event.run_id,
            thread_id: event.thread_id,
            block_id: event.block_id,
            message_id: event.message_id,
            kind: EventKind::as_str(event.kind),
        },
    );
    if let Some(delta) = &event.delta {
        json.push_str(",\"delta\":");
        write_value(&mut json, delta);
    }
    if let Some(path) = &event.delta_path {
        json.push_str(",\"delta_path\":");
        write_string(&mut json, path);
    }
    if let Some(action) = event.delta_action {
        write_action(&mut json, action);
    }
    json.push_str(",\"content\":");
    write_value(&mut json, &event.content);
    if let Some(raw) = &event.raw {
        json.push_str(",\"raw\":");
        write_value(&mut json, raw);
    }
    json.push_str(",\"metadata\":");
    write_value(&mut json, &event.metadata);
    write_time(&mut json, &event.created_at);
    json
}

/// About how long a value's text is: exact for a string without escapes (the token deltas of
/// the live path), a guess otherwise (the string grows when it is short).
fn guess_len(value: &Value) -> usize {
    match value {
        Value::String(text) => text.len() + 2,
        _ => 64,
    }
}

#[cfg(test)]
mod tests;
