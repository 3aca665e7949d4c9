//! A row's columns read back: the per-event lengths and times (`pieces`) that cut a run row's
//! text or a row of messages' array, the raw provider events (`raws`), and the varints they are
//! made of. Pure; a damaged column is an error, never a wrong event.

use crate::limits::CHUNK_RAW_BYTES_MAX;
use crate::store::rows::corrupt;
use crate::store::StoreResult;

/// The raw provider events of a run row's `count` events, from its `raws` column.
pub fn raws(column: &[u8], count: u64) -> StoreResult<Vec<Option<String>>> {
    let bytes = miniz_oxide::inflate::decompress_to_vec_with_limit(column, CHUNK_RAW_BYTES_MAX)
        .map_err(|error| corrupt(format!("a run row's raw events do not inflate: {error}")))?;
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
/// the array's brackets and commas sit where the lengths say.
pub fn message_pieces<'a>(
    content: &'a str,
    encoded: &[u8],
    first_nanos: i64,
    count: u64,
) -> StoreResult<Vec<Piece<'a>>> {
    let inner = content
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .ok_or_else(|| corrupt("a row of messages is not a JSON array"))?;
    cut(inner, encoded, first_nanos, count, Some(b','))
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

fn read_varint(bytes: &[u8], at: &mut usize) -> StoreResult<u64> {
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

fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}
