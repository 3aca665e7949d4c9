//! The Durable Streams protocol's pure parts: offsets, the request headers a stream takes, JSON
//! mode's messages, ETags, cursors and SSE framing. No I/O; every refusal says what was wrong.
//!
//! An offset is `0000000000000000_<seq, 16 digits>`: the seq of the last message a reader has,
//! so offsets sort as strings exactly as seqs do, and map one to one to the log's seqs (the same
//! cursor every other surface uses). `-1` is the start, `now` the tail.

use base64::Engine;
use chrono::{DateTime, Utc};
use serde_json::value::RawValue;
use serde_json::Value;
use uuid::Uuid;

/// Offset digits on each side of the `_`.
const OFFSET_DIGITS: usize = 16;
/// The start of a cursor's intervals (as the reference server counts them).
const CURSOR_EPOCH_MS: i64 = 1_728_432_000_000; // 2024-10-09T00:00:00Z
/// A cursor's interval.
pub const CURSOR_INTERVAL_SECONDS: i64 = 20;

/// Where a read starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offset {
    /// `-1`: from the first message.
    Start,
    /// `now`: from the tail.
    Now,
    /// After the message with this seq.
    After(u64),
}

impl Offset {
    /// Reads `offset=`: `-1`, `now`, or one of ours.
    pub fn parse(text: &str) -> Result<Offset, &'static str> {
        match text {
            "" => Err("Empty offset parameter"),
            "-1" => Ok(Offset::Start),
            "now" => Ok(Offset::Now),
            _ => {
                let (high, low) = text.split_once('_').ok_or("Invalid offset format")?;
                let digits =
                    |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
                if !digits(high) || !digits(low) {
                    return Err("Invalid offset format");
                }
                if !high.trim_start_matches('0').is_empty() {
                    // Not an offset this server made: it would sort after every one of ours.
                    return Err("Invalid offset format");
                }
                low.parse().map(Offset::After).map_err(|_| "Invalid offset format")
            }
        }
    }
}

/// The offset after the message with seq `seq` (0: before the first).
pub fn format_offset(seq: u64) -> String {
    format!("{:0w$}_{seq:0w$}", 0, w = OFFSET_DIGITS)
}

/// A content type without parameters, lower case (`application/json; charset=utf-8` →
/// `application/json`).
pub fn media_type(content_type: &str) -> String {
    content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase()
}

/// True for a JSON-mode stream.
pub fn is_json(content_type: &str) -> bool {
    media_type(content_type) == "application/json"
}

/// True when SSE sends the stream's messages as text (else base64).
pub fn is_text(content_type: &str) -> bool {
    let media = media_type(content_type);
    media.starts_with("text/") || media == "application/json"
}

/// A create's content type: the given one when it looks like `type/subtype` (none otherwise: a
/// stream's default is `application/octet-stream`, a fork's its source's).
pub fn create_content_type(given: Option<&str>) -> Option<String> {
    let valid = given.is_some_and(|given| {
        let media = given.split(';').next().unwrap_or("").trim();
        let (kind, sub) = media.split_once('/').unwrap_or(("", ""));
        let token = |part: &str| {
            !part.is_empty()
                && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        token(kind)
            && sub
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    given.filter(|_| valid).map(|given| given.trim().to_owned())
}

/// `Stream-TTL`: whole seconds, digits only, no leading zero.
pub fn parse_ttl(text: &str) -> Result<u64, &'static str> {
    let canonical = text == "0"
        || (!text.is_empty() && !text.starts_with('0') && text.bytes().all(|b| b.is_ascii_digit()));
    if !canonical {
        return Err("Invalid Stream-TTL value");
    }
    text.parse()
        .ok()
        .filter(|ttl| *ttl <= STREAM_TTL_SECONDS_MAX)
        .ok_or("Invalid Stream-TTL value: at most 9223372036854775 seconds")
}

/// The longest `Stream-TTL` taken (seconds): its milliseconds still fit the `i64` a row keeps
/// (a larger one wrapped, and deleted the stream at its first read).
pub const STREAM_TTL_SECONDS_MAX: u64 = i64::MAX as u64 / 1000;

/// `Stream-Expires-At`: an RFC 3339 time.
pub fn parse_expires_at(text: &str) -> Result<DateTime<Utc>, &'static str> {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|time| time.with_timezone(&Utc))
        .map_err(|_| "Invalid Stream-Expires-At timestamp")
}

/// The producer headers of an append: all three or none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerHeaders {
    pub id: String,
    pub epoch: u64,
    pub seq: u64,
}

/// Reads `Producer-Id`, `Producer-Epoch` and `Producer-Seq`.
pub fn producer_headers(
    id: Option<&str>,
    epoch: Option<&str>,
    seq: Option<&str>,
) -> Result<Option<ProducerHeaders>, &'static str> {
    let (id, epoch, seq) = match (id, epoch, seq) {
        (None, None, None) => return Ok(None),
        (Some(id), Some(epoch), Some(seq)) => (id, epoch, seq),
        _ => {
            return Err(
                "All producer headers (Producer-Id, Producer-Epoch, Producer-Seq) must be provided together",
            )
        }
    };
    if id.is_empty() {
        return Err("Invalid Producer-Id: must not be empty");
    }
    // Digits only, and a value JavaScript's numbers hold exactly (what clients send).
    let number = |text: &str| {
        (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
            .then(|| text.parse::<u64>().ok())
            .flatten()
            .filter(|value| *value < (1 << 53))
    };
    let epoch = number(epoch).ok_or("Invalid Producer-Epoch: must be a non-negative integer")?;
    let seq = number(seq).ok_or("Invalid Producer-Seq: must be a non-negative integer")?;
    Ok(Some(ProducerHeaders { id: id.to_owned(), epoch, seq }))
}

/// A JSON-mode body as its messages, each its JSON text exactly as the body has it (checked,
/// never built into a tree: a 64-message append spent a quarter of its CPU building, cloning,
/// printing and dropping the trees): an array is its elements (an empty one is no message:
/// allowed on create, refused on append), anything else one message.
pub fn json_messages(body: &[u8], create: bool) -> Result<Vec<String>, &'static str> {
    let invalid = |_| "Invalid JSON";
    let starts_an_array =
        body.iter().find(|byte| !byte.is_ascii_whitespace()).is_some_and(|byte| *byte == b'[');
    if !starts_an_array {
        let one: &RawValue = serde_json::from_slice(body).map_err(invalid)?;
        return Ok(vec![one.get().to_owned()]);
    }
    let items: Vec<&RawValue> = serde_json::from_slice(body).map_err(invalid)?;
    if items.is_empty() && !create {
        return Err("Empty arrays are not allowed");
    }
    Ok(items.into_iter().map(|item| item.get().to_owned()).collect())
}

/// How a message is kept in the log's event `content`: its JSON text as a JSON string (a stream
/// message's content is always its text — `store::rows::message_text` — so it is checked once,
/// on the way in, and copied from then on). JSON mode keeps the message; byte mode its bytes as
/// `{"bytes": <base64>}`.
pub fn stored(message: Message) -> Value {
    match message {
        Message::Json(text) => Value::String(text),
        Message::Bytes(bytes) => Value::String(bytes_content(&bytes)),
    }
}

/// A message of an append: JSON text (checked), or bytes.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    Json(String),
    Bytes(Vec<u8>),
}

fn bytes_content(bytes: &[u8]) -> String {
    serde_json::json!({ "bytes": base64::engine::general_purpose::STANDARD.encode(bytes) })
        .to_string()
}

/// A byte-mode message's bytes, from its event's content (JSON text, `{"bytes": <base64>}`).
pub fn message_bytes(content: &str) -> Vec<u8> {
    #[derive(serde::Deserialize)]
    struct Stored<'a> {
        #[serde(borrow)]
        bytes: std::borrow::Cow<'a, str>,
    }
    serde_json::from_str::<Stored>(content)
        .ok()
        .and_then(|stored| {
            base64::engine::general_purpose::STANDARD.decode(stored.bytes.as_bytes()).ok()
        })
        .unwrap_or_default()
}

/// A read's body: JSON mode's messages (JSON text each, as the log keeps them) as one array,
/// byte mode's bytes one after another.
pub fn body(content_type: &str, messages: super::messages::Messages) -> Vec<u8> {
    if is_json(content_type) {
        messages.into_json_array()
    } else {
        bytes_of(&messages)
    }
}

/// Byte mode's messages, one after another.
fn bytes_of(messages: &super::messages::Messages) -> Vec<u8> {
    messages.iter().flat_map(|(_, content)| message_bytes(content)).collect()
}

/// A page of messages as one SSE `data` payload: JSON as one array, text as it is, bytes as
/// base64.
pub fn sse_payload(content_type: &str, messages: &super::messages::Messages) -> String {
    if is_json(content_type) {
        // The texts are strings, so the array is too.
        String::from_utf8(messages.json_array()).unwrap_or_default()
    } else if is_text(content_type) {
        String::from_utf8_lossy(&bytes_of(messages)).into_owned()
    } else {
        base64::engine::general_purpose::STANDARD.encode(bytes_of(messages))
    }
}

/// An SSE event: every line of `payload` (CR, LF or CRLF end one) its own `data:` line, so no
/// payload can end the event or start another.
pub fn sse_event(event: &str, payload: &str) -> String {
    let mut out = format!("event: {event}\n");
    let normalized = payload.replace("\r\n", "\n").replace('\r', "\n");
    for line in normalized.split('\n') {
        out.push_str("data:");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out
}

/// A read's ETag: the stream, where the read started and ended, and whether it saw the close.
pub fn etag(path: &str, start: &str, end: &str, closed: bool) -> String {
    let path = base64::engine::general_purpose::STANDARD.encode(path);
    let closed = if closed { ":c" } else { "" };
    format!("\"{path}:{start}:{end}{closed}\"")
}

/// The cursor a live response carries: the current interval, or one past the client's when it
/// is already there (so a CDN never serves a client its own cached answer again). `jitter` is
/// a number of intervals, at least 1.
pub fn response_cursor(now_ms: i64, client: Option<&str>, jitter: i64) -> String {
    let current = (now_ms - CURSOR_EPOCH_MS).div_euclid(CURSOR_INTERVAL_SECONDS * 1000);
    match client.and_then(|client| client.parse::<i64>().ok()) {
        Some(client) if client >= current => client.saturating_add(jitter.max(1)).to_string(),
        _ => current.to_string(),
    }
}

/// True when a stream with these settings has expired at `now_ms`: past its `Expires-At`, or
/// idle longer than its TTL (counted from its last read or append).
pub fn expired(
    ttl_seconds: Option<u64>,
    expires_at: Option<&str>,
    accessed_at_ms: i64,
    now_ms: i64,
) -> bool {
    let past_expiry = expires_at.is_some_and(|text| {
        parse_expires_at(text).map_or(true, |time| now_ms >= time.timestamp_millis())
    });
    // Checked: a TTL whose end is past what an i64 of milliseconds holds never ends.
    let idle = ttl_seconds
        .and_then(|ttl| i64::try_from(ttl).ok()?.checked_mul(1000))
        .and_then(|ttl_ms| accessed_at_ms.checked_add(ttl_ms))
        .is_some_and(|end_ms| now_ms >= end_ms);
    past_expiry || idle
}

/// A read's query: `offset`, `live`, `cursor`.
#[derive(Debug, Default, PartialEq)]
pub struct ReadQuery {
    pub offset: Option<Offset>,
    /// The offset as the client wrote it (the ETag names it).
    pub offset_text: Option<String>,
    pub live: Option<Live>,
    pub cursor: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Live {
    LongPoll,
    Sse,
}

/// A read's query string: `offset` (once), `live` (`long-poll`, `sse`), `cursor`.
pub fn read_query(query: Option<&str>) -> Result<ReadQuery, &'static str> {
    let mut read = ReadQuery::default();
    let mut offsets = 0;
    for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match key.as_ref() {
            "offset" => {
                offsets += 1;
                if offsets > 1 {
                    return Err("Multiple offset parameters not allowed");
                }
                read.offset = Some(Offset::parse(&value)?);
                read.offset_text = Some(value.into_owned());
            }
            "live" => {
                read.live = match value.as_ref() {
                    "long-poll" => Some(Live::LongPoll),
                    "sse" => Some(Live::Sse),
                    "" | "false" => None,
                    _ => return Err("Invalid live parameter: use long-poll or sse"),
                }
            }
            "cursor" => read.cursor = Some(value.into_owned()),
            _ => {}
        }
    }
    match (read.live, read.offset) {
        (Some(Live::Sse), None) => Err("SSE requires offset parameter"),
        (Some(Live::LongPoll), None) => Err("Long-poll requires offset parameter"),
        _ => Ok(read),
    }
}

/// The agent a stream path names (`agents/<uuid>`), if it names one.
pub fn agent_of(path: &str) -> Option<Uuid> {
    path.strip_prefix("agents/").filter(|id| !id.contains('/')).and_then(|id| id.parse().ok())
}

/// A create's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// `None`: not given (a fork takes its source's; a stream `application/octet-stream`).
    pub content_type: Option<String>,
    pub ttl_seconds: Option<u64>,
    pub expires_at: Option<String>,
    pub closed: bool,
    pub fork: Option<ForkRequest>,
}

/// A create's fork headers.
#[derive(Clone, Debug, PartialEq)]
pub struct ForkRequest {
    /// The source's path.
    pub from: String,
    /// `Stream-Fork-Offset`'s seq (none: the source's tail).
    pub offset: Option<u64>,
    pub sub_offset: Option<u64>,
}

/// Reads the fork headers: `Stream-Forked-From` (a path under `/v1/streams/`, or relative to
/// it), `Stream-Fork-Offset`, `Stream-Fork-Sub-Offset`.
pub fn fork_request(
    from: Option<&str>,
    offset: Option<&str>,
    sub_offset: Option<&str>,
) -> Result<Option<ForkRequest>, &'static str> {
    let offset = offset
        .map(|text| {
            let (high, low) = text.split_once('_').ok_or("Invalid Stream-Fork-Offset format")?;
            let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
            if !digits(high) || !digits(low) {
                return Err("Invalid Stream-Fork-Offset format");
            }
            match Offset::parse(text) {
                Ok(Offset::After(seq)) => Ok(seq),
                _ => Err("Fork offset beyond source stream length"),
            }
        })
        .transpose()?;
    let Some(from) = from else {
        if sub_offset.is_some() {
            return Err("Stream-Fork-Sub-Offset requires Stream-Forked-From");
        }
        return Ok(None);
    };
    if sub_offset.is_some_and(|text| text != "0") && offset.is_none() {
        return Err("Stream-Fork-Sub-Offset requires Stream-Fork-Offset");
    }
    let sub_offset = sub_offset
        .map(|text| {
            let canonical = text == "0"
                || (!text.is_empty()
                    && !text.starts_with('0')
                    && text.bytes().all(|b| b.is_ascii_digit()));
            if !canonical {
                return Err("Invalid Stream-Fork-Sub-Offset format");
            }
            text.parse::<u64>().map_err(|_| "Invalid Stream-Fork-Sub-Offset format")
        })
        .transpose()?;
    let from = from.trim();
    let from = from.strip_prefix("/v1/streams/").unwrap_or_else(|| from.trim_start_matches('/'));
    Ok(Some(ForkRequest { from: from.to_owned(), offset, sub_offset }))
}

/// Whether a create asks for the stream that is there.
pub fn same_settings(existing: &crate::store::StreamRow, settings: &Settings) -> bool {
    let media = |text: &str| media_type(text);
    let content_type = match &settings.content_type {
        Some(given) => media(given) == media(&existing.content_type),
        None => {
            settings.fork.is_some() || media(&existing.content_type) == "application/octet-stream"
        }
    };
    let fork = match (&settings.fork, &existing.forked_from) {
        (None, None) => true,
        (Some(fork), Some(from)) => {
            *from == fork.from
                && fork.offset.is_none_or(|offset| Some(offset) == existing.fork_offset)
                && fork.sub_offset.unwrap_or(0) == existing.fork_sub_offset.unwrap_or(0)
        }
        _ => false,
    };
    let lifetime = settings.fork.is_some()
        || (existing.ttl_seconds == settings.ttl_seconds
            && existing.expires_at == settings.expires_at);
    content_type && fork && lifetime && existing.closed == settings.closed
}

#[cfg(test)]
mod tests;
