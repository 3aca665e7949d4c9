//! An event's JSON written field by field, byte for byte what serde makes of `AgentEvent`
//! (field order, omitted `None`s), shared by the two places that print events: a stored row
//! ([`super::row_text::event_json`], whose JSON columns are copied as stored) and a committed
//! event in memory ([`super::EventJson::of`], what every live room sends).
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

/// An event's text being written: bytes, checked to be UTF-8 once at the end ([`Text::done`]).
pub(crate) struct Text(Vec<u8>);

impl Text {
    pub fn with_capacity(bytes: usize) -> Text {
        Text(Vec::with_capacity(bytes))
    }

    pub fn push_str(&mut self, text: &str) {
        self.0.extend_from_slice(text.as_bytes());
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Adds `other`'s bytes from `from` on.
    pub fn push_text_from(&mut self, other: &Text, from: usize) {
        self.0.extend_from_slice(other.0.get(from..).unwrap_or_default());
    }

    /// A number's decimal digits (without `fmt`'s machinery: one per event of a read).
    pub fn push_number(&mut self, mut number: u64) {
        let mut digits = [0u8; 20];
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (number % 10) as u8;
            number /= 10;
            if number == 0 {
                break;
            }
        }
        self.0.extend_from_slice(&digits[start..]);
    }

    /// `number`'s last `digits` decimal digits (at most 10), zeros in front.
    fn push_digits(&mut self, mut number: u32, digits: u32) {
        let mut text = [b'0'; 10];
        let digits = (digits as usize).min(text.len());
        for place in text[..digits].iter_mut().rev() {
            *place = b'0' + (number % 10) as u8;
            number /= 10;
        }
        self.0.extend_from_slice(&text[..digits]);
    }

    /// A JSON string's text (quoted and escaped as serde_json escapes it).
    pub fn push_string(&mut self, text: &str) {
        // Writing into a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut self.0, text);
    }

    /// A JSON value's text, as serde_json prints it.
    pub fn push_value(&mut self, value: &Value) {
        let start = self.0.len();
        // Writing into a `Vec` fails only for a map with non-string keys, which `Value` cannot
        // hold; were it to, the value would read `null` rather than half of it.
        if serde_json::to_writer(&mut self.0, value).is_err() {
            self.0.truncate(start);
            self.0.extend_from_slice(b"null");
        }
    }

    /// The text. Everything written came from `str`s, numbers and serde_json's writer, so the
    /// check never fails; were it ever to, the bad bytes would be replaced rather than a panic.
    pub fn done(self) -> String {
        match self.checked() {
            Ok(text) => text,
            Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
        }
    }

    /// The text, or the error when it is not UTF-8 (for text whose byte offsets were kept, which
    /// a replacement would move).
    pub fn checked(self) -> Result<String, std::string::FromUtf8Error> {
        String::from_utf8(self.0)
    }
}

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
pub(crate) fn write_head(json: &mut Text, head: &Head) {
    let mut buffer = Uuid::encode_buffer();
    let mut uuid = |json: &mut Text, name: &str, id: Option<Uuid>| {
        if let Some(id) = id {
            json.push_str(name);
            json.push_str("\"");
            json.push_str(id.hyphenated().encode_lower(&mut buffer));
            json.push_str("\"");
        }
    };
    uuid(json, "{\"id\":", Some(head.id));
    uuid(json, ",\"agent_id\":", Some(head.agent_id));
    json.push_str(",\"seq\":");
    json.push_number(head.seq);
    if let Some(from) = head.coalesced_from {
        json.push_str(",\"coalesced_from\":");
        json.push_number(from);
    }
    write_head_ids(json, [head.run_id, head.thread_id, head.block_id, head.message_id], head.kind);
}

/// Writes `,"run_id":…` (each of the four ids that is set) through `,"kind":"…"`.
pub(crate) fn write_head_ids(json: &mut Text, ids: [Option<Uuid>; 4], kind: &str) {
    let mut buffer = Uuid::encode_buffer();
    let names = [",\"run_id\":\"", ",\"thread_id\":\"", ",\"block_id\":\"", ",\"message_id\":\""];
    for (name, id) in names.into_iter().zip(ids) {
        if let Some(id) = id {
            json.push_str(name);
            json.push_str(id.hyphenated().encode_lower(&mut buffer));
            json.push_str("\"");
        }
    }
    // `as_str` is serde's name (checked in `app::event`'s tests).
    json.push_str(",\"kind\":\"");
    json.push_str(kind);
    json.push_str("\"");
}

/// Writes `,"delta_action":"…"`.
pub(crate) fn write_action(json: &mut Text, action: DeltaAction) {
    json.push_str(",\"delta_action\":\"");
    json.push_str(action.as_str());
    json.push_str("\"");
}

/// Writes `,"created_at":"…"}` and the end: serde's form of a `DateTime<Utc>`, RFC 3339 with
/// `Z` and as many fraction digits as it needs (none, 3, 6 or 9), as chrono writes it.
pub(crate) fn write_time(json: &mut Text, created_at: &DateTime<Utc>) {
    if has_plain_time(created_at) {
        write_seconds(json, created_at);
        write_subseconds(json, created_at);
    } else {
        // Years past four digits and leap seconds: chrono's own writer.
        json.push_str(",\"created_at\":\"");
        json.push_str(&created_at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true));
        json.push_str("\"}");
    }
}

/// A time [`write_seconds`] and [`write_subseconds`] write: a four-digit year, no leap second.
pub(crate) fn has_plain_time(created_at: &DateTime<Utc>) -> bool {
    use chrono::{Datelike, Timelike};
    (0..=9999).contains(&created_at.year()) && created_at.nanosecond() < 1_000_000_000
}

/// Writes `,"created_at":"YYYY-MM-DDTHH:MM:SS` (the same for every time of one second).
pub(crate) fn write_seconds(json: &mut Text, created_at: &DateTime<Utc>) {
    use chrono::{Datelike, Timelike};
    json.push_str(",\"created_at\":\"");
    json.push_digits(created_at.year() as u32, 4);
    for (separator, part) in [('-', created_at.month()), ('-', created_at.day())] {
        json.0.push(separator as u8);
        json.push_digits(part, 2);
    }
    for (separator, part) in
        [('T', created_at.hour()), (':', created_at.minute()), (':', created_at.second())]
    {
        json.0.push(separator as u8);
        json.push_digits(part, 2);
    }
}

/// Writes the fraction, `Z"` and the event's closing brace. chrono's `AutoSi`: no fraction, or
/// milli-, micro- or nanoseconds, the shortest exact.
pub(crate) fn write_subseconds(json: &mut Text, created_at: &DateTime<Utc>) {
    use chrono::Timelike;
    let nanos = created_at.nanosecond();
    let fraction = match nanos {
        0 => None,
        _ if nanos.is_multiple_of(1_000_000) => Some((nanos / 1_000_000, 3)),
        _ if nanos.is_multiple_of(1_000) => Some((nanos / 1_000, 6)),
        _ => Some((nanos, 9)),
    };
    if let Some((value, digits)) = fraction {
        json.push_str(".");
        json.push_digits(value, digits);
    }
    json.push_str("Z\"}");
}

/// The JSON serde makes of `event`, without serde's formatting of ids and time.
pub(crate) fn event_text(event: &AgentEvent) -> String {
    let values = [event.delta.as_ref(), Some(&event.content), event.raw.as_ref()];
    let room: usize = values.into_iter().flatten().map(guess_len).sum::<usize>()
        + guess_len(&event.metadata)
        + event.delta_path.as_ref().map_or(0, |path| path.len() + 2);
    let mut json = Text::with_capacity(EVENT_JSON_FIXED_BYTES + room);
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
        json.push_value(delta);
    }
    if let Some(path) = &event.delta_path {
        json.push_str(",\"delta_path\":");
        json.push_string(path);
    }
    if let Some(action) = event.delta_action {
        write_action(&mut json, action);
    }
    json.push_str(",\"content\":");
    json.push_value(&event.content);
    if let Some(raw) = &event.raw {
        json.push_str(",\"raw\":");
        json.push_value(raw);
    }
    json.push_str(",\"metadata\":");
    json.push_value(&event.metadata);
    write_time(&mut json, &event.created_at);
    json.done()
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
