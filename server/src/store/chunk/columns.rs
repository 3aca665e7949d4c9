//! A row's columns read back: the per-event lengths and times (`pieces`) that cut a run row's
//! text or a row of messages' array, the raw provider events (`raws`), and the varints they are
//! made of. Pure; a damaged column is an error, never a wrong event.

use crate::limits::CHUNK_RAW_BYTES_MAX;
use crate::store::rows::corrupt;
use crate::store::StoreResult;

/// A run row's `raws` column inflated: per event, its raw event's length plus one (0: none),
/// then the JSON.
pub(super) fn inflate_raws(column: &[u8]) -> StoreResult<Vec<u8>> {
    miniz_oxide::inflate::decompress_to_vec_with_limit(column, CHUNK_RAW_BYTES_MAX)
        .map_err(|error| corrupt(format!("a run row's raw events do not inflate: {error}")))
}

/// A row of messages' array inside its brackets, and its pieces after the checksum (both
/// unchecked: for a row a read has just checked).
pub(super) fn message_pieces_rest<'a>(
    content: &'a str,
    encoded: &'a [u8],
) -> StoreResult<(&'a str, &'a [u8])> {
    let encoded = match encoded.split_first() {
        Some((&CHECKSUM_MARK, rest)) => rest.get(4..).unwrap_or_default(),
        _ => encoded,
    };
    let inner = content
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .ok_or_else(|| corrupt("a row of messages is not a JSON array"))?;
    Ok((inner, encoded))
}

/// The raw provider events of a run row's `count` events, from its `raws` column.
pub fn raws(column: &[u8], count: u64) -> StoreResult<Vec<Option<String>>> {
    let bytes = inflate_raws(column)?;
    let mut out = Vec::with_capacity(count as usize);
    let mut at = 0;
    while at < bytes.len() {
        let length = read_varint(&bytes, &mut at)? as usize;
        if length == 0 {
            out.push(None);
            continue;
        }
        let end = at
            .checked_add(length - 1)
            .filter(|end| *end <= bytes.len())
            .ok_or_else(|| corrupt("a run row's raw events are cut short"))?;
        let text = std::str::from_utf8(&bytes[at..end])
            .map_err(|_| corrupt("a run row's raw event is not UTF-8"))?;
        out.push(Some(text.to_owned()));
        at = end;
    }
    if out.len() as u64 != count {
        return Err(corrupt(format!("a run row holds {} raw events, not {count}", out.len())));
    }
    Ok(out)
}

/// One event of a run row, as [`pieces`] reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece<'a> {
    pub text: &'a str,
    pub nanos: i64,
}

/// The events of a run row: its concatenated `text` cut by the lengths in `pieces`, each with
/// its time (`first_nanos` plus the deltas). Checks that the lengths cover the text exactly and
/// cut it at character boundaries, and that there are `count` of them.
pub fn pieces<'a>(
    text: &'a str,
    encoded: &[u8],
    first_nanos: i64,
    count: u64,
) -> StoreResult<Vec<Piece<'a>>> {
    cut(text, encoded, first_nanos, count, None)
}

/// The messages of a row of stream messages: its `content` column (a JSON array) cut into each
/// message's JSON text by the lengths in `pieces`, with its time, as [`pieces`] does. Checks that
/// the array's brackets and commas sit where the lengths say, and the content's checksum when the
/// row has one ([`checked_message_pieces`]).
pub fn message_pieces<'a>(
    content: &'a str,
    encoded: &[u8],
    first_nanos: i64,
    count: u64,
) -> StoreResult<Vec<Piece<'a>>> {
    Ok(checked_message_pieces(content, encoded, first_nanos, count)?.0)
}

/// [`message_pieces`], and whether the row's checksum proved its content is the JSON the writer
/// wrote, cut where the writer cut it (true), or the row has none and each message must be
/// checked as JSON (false).
///
/// **Why a checksum.** A read serves each message as the log keeps its text, so a damaged row
/// must be an error, never a broken answer: each message was parsed as JSON on every read, the
/// largest part of reading a long stream from the database (~45 % of the page read of a
/// 10 000-message stream). The writer made the content from parsed values, so it was JSON; a
/// CRC-32 of it and of its pieces, checked at several GB/s, proves both are still what was
/// written.
pub fn checked_message_pieces<'a>(
    content: &'a str,
    encoded: &[u8],
    first_nanos: i64,
    count: u64,
) -> StoreResult<(Vec<Piece<'a>>, bool)> {
    let (encoded, checked) = match encoded.split_first() {
        Some((&CHECKSUM_MARK, rest)) => {
            let (sum, rest) = rest
                .split_first_chunk::<4>()
                .ok_or_else(|| corrupt("a row of messages' checksum is cut short"))?;
            if u32::from_le_bytes(*sum) != checksum(content, rest) {
                return Err(corrupt("a row of messages does not match its checksum"));
            }
            (rest, true)
        }
        _ => (encoded, false),
    };
    let inner = content
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .ok_or_else(|| corrupt("a row of messages is not a JSON array"))?;
    Ok((cut(inner, encoded, first_nanos, count, Some(b','))?, checked))
}

/// The first byte of a row of messages' `pieces` when a checksum of its content and pieces
/// follows (4 bytes, CRC-32, little-endian), then the pieces. A row without one (written before
/// rows had it) starts with its first message's length, a varint that is never 0: a JSON text
/// has at least one byte.
const CHECKSUM_MARK: u8 = 0;

/// The bytes [`messages_pieces_column`] adds to a row's pieces.
pub const CHECKSUM_BYTES: usize = 5;

/// The `pieces` column of a row of messages whose `content` column is `content`: the checksum,
/// then the pieces.
pub fn messages_pieces_column(content: &str, pieces: &[u8]) -> Vec<u8> {
    let mut column = Vec::with_capacity(CHECKSUM_BYTES + pieces.len());
    column.push(CHECKSUM_MARK);
    column.extend_from_slice(&checksum(content, pieces).to_le_bytes());
    column.extend_from_slice(pieces);
    column
}

/// The CRC-32 of a row's content and its pieces: the pieces too, since lengths changed so that
/// each cut still meets a comma (inside a string) would cut messages that are not JSON.
fn checksum(content: &str, pieces: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(content.as_bytes());
    hasher.update(pieces);
    hasher.finalize()
}

fn cut<'a>(
    text: &'a str,
    encoded: &[u8],
    first_nanos: i64,
    count: u64,
    separator: Option<u8>,
) -> StoreResult<Vec<Piece<'a>>> {
    let mut out = Vec::with_capacity(count as usize);
    let (mut at, mut offset, mut nanos) = (0usize, 0usize, first_nanos);
    while at < encoded.len() {
        let length = read_varint(encoded, &mut at)? as usize;
        let delta = unzigzag(read_varint(encoded, &mut at)?);
        nanos = nanos.wrapping_add(delta);
        if let (Some(separator), false) = (separator, out.is_empty()) {
            if text.as_bytes().get(offset) != Some(&separator) {
                return Err(corrupt("a row's pieces are not where its lengths say"));
            }
            offset += 1;
        }
        let end = offset
            .checked_add(length)
            .filter(|end| *end <= text.len() && text.is_char_boundary(*end))
            .ok_or_else(|| corrupt("a run row's lengths do not cut its text"))?;
        out.push(Piece { text: &text[offset..end], nanos });
        offset = end;
    }
    if offset != text.len() || out.len() as u64 != count {
        return Err(corrupt(format!(
            "a run row holds {} events and {offset} of {} bytes, not {count}",
            out.len(),
            text.len()
        )));
    }
    Ok(out)
}

/// A u64 as LEB128 takes at most this many bytes.
pub(super) const VARINT_BYTES_MAX: usize = 10;

pub(super) fn push_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

pub(super) fn read_varint(bytes: &[u8], at: &mut usize) -> StoreResult<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at).ok_or_else(|| corrupt("a run row's varint is cut short"))?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(corrupt("a run row's varint is too long"))
}

pub(super) fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

pub(super) fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}
