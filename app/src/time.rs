//! Timestamps read from JSON without chrono's general parser.
//!
//! Every time in the wire types is an RFC 3339 text (chrono writes `2026-01-02T03:04:05.123456Z`).
//! chrono's own `Deserialize` goes through its format-string machinery, ~17 KB of the browser's
//! bundle for the one shape it reads there; this reads that shape directly
//! (`#[serde(deserialize_with = "crate::time::deserialize")]` on each field). Natively, a text
//! this does not read is handed to chrono's parser, so the server accepts all it did before.

use std::borrow::Cow;

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use serde::{Deserialize, Deserializer};

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`: a year of four to six digits (signed past 9999 or
/// before 0, as chrono writes them), `T`, `t` or a space between date and time, a fraction of
/// any length (nanoseconds kept), second 60 for a leap second. `None` for anything else.
pub fn parse_rfc3339(text: &str) -> Option<DateTime<Utc>> {
    let mut cursor = Cursor { bytes: text.as_bytes(), at: 0 };
    let negative = cursor.peek() == Some(b'-');
    if matches!(cursor.peek(), Some(b'+' | b'-')) {
        cursor.at += 1;
    }
    let year_digits = cursor.digits_run();
    if !(4..=6).contains(&year_digits) {
        return None;
    }
    let year = cursor.number_before(year_digits) as i32;
    let year = if negative { -year } else { year };
    cursor.expect(b"-")?;
    let month = cursor.two_digits()?;
    cursor.expect(b"-")?;
    let day = cursor.two_digits()?;
    cursor.expect(b"Tt ")?;
    let hour = cursor.two_digits()?;
    cursor.expect(b":")?;
    let minute = cursor.two_digits()?;
    cursor.expect(b":")?;
    let mut second = cursor.two_digits()?;
    let mut nanos = 0;
    if cursor.peek() == Some(b'.') {
        cursor.at += 1;
        let digits = cursor.digits_run();
        if digits == 0 {
            return None;
        }
        let kept = digits.min(9);
        let start = cursor.at - digits;
        let fraction = number(&cursor.bytes[start..start + kept]);
        nanos = fraction * 10u32.pow(9 - kept as u32);
    }
    let offset_minutes = match cursor.peek()? {
        b'Z' | b'z' => {
            cursor.at += 1;
            0
        }
        b'+' | b'-' => {
            let sign = if cursor.peek() == Some(b'-') { -1 } else { 1 };
            cursor.at += 1;
            let hours = cursor.two_digits()?;
            cursor.expect(b":")?;
            let minutes = cursor.two_digits()?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            sign * (hours * 60 + minutes) as i64
        }
        _ => return None,
    };
    if cursor.at != cursor.bytes.len() {
        return None;
    }
    // chrono keeps a leap second as second 59 with a nanosecond count past one second.
    if second == 60 {
        second = 59;
        nanos += 1_000_000_000;
    }
    let local =
        NaiveDate::from_ymd_opt(year, month, day)?.and_hms_nano_opt(hour, minute, second, nanos)?;
    let utc = local.checked_sub_signed(TimeDelta::minutes(offset_minutes))?;
    Some(DateTime::from_naive_utc_and_offset(utc, Utc))
}

/// A required time field.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<DateTime<Utc>, D::Error> {
    let text = Cow::<str>::deserialize(deserializer)?;
    read(&text)
}

/// An optional time field (`null` or absent: `None`; give the field `#[serde(default)]`).
pub fn deserialize_option<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<DateTime<Utc>>, D::Error> {
    match Option::<Cow<str>>::deserialize(deserializer)? {
        Some(text) => read(&text).map(Some),
        None => Ok(None),
    }
}

fn read<E: serde::de::Error>(text: &str) -> Result<DateTime<Utc>, E> {
    parse_rfc3339(text)
        .or_else(|| other_shapes(text))
        .ok_or_else(|| E::custom(format!("{text:?} is not an RFC 3339 time")))
}

/// The server reads whatever chrono reads, as before.
#[cfg(not(target_arch = "wasm32"))]
fn other_shapes(text: &str) -> Option<DateTime<Utc>> {
    text.parse().ok()
}

#[cfg(target_arch = "wasm32")]
fn other_shapes(_: &str) -> Option<DateTime<Utc>> {
    None
}

/// The decimal value of ASCII digits (at most nine: no overflow).
fn number(digits: &[u8]) -> u32 {
    digits.iter().fold(0, |value, digit| value * 10 + u32::from(digit - b'0'))
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    /// Steps over the digits here; how many there were.
    fn digits_run(&mut self) -> usize {
        let start = self.at;
        while self.peek().is_some_and(|byte| byte.is_ascii_digit()) {
            self.at += 1;
        }
        self.at - start
    }

    /// The value of the `count` digits just stepped over.
    fn number_before(&self, count: usize) -> u32 {
        number(&self.bytes[self.at - count..self.at])
    }

    fn two_digits(&mut self) -> Option<u32> {
        let pair = self.bytes.get(self.at..self.at + 2)?;
        if !pair.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.at += 2;
        Some(number(pair))
    }

    /// Steps over one byte that is one of `allowed`.
    fn expect(&mut self, allowed: &[u8]) -> Option<()> {
        let byte = self.peek()?;
        allowed.contains(&byte).then(|| self.at += 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{FixedOffset, SecondsFormat, TimeZone};
    use proptest::prelude::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn reads_the_shapes_chrono_writes_and_refuses_the_rest() {
        let cases: [(&str, Option<&str>); 16] = [
            ("2026-01-02T03:04:05Z", Some("2026-01-02T03:04:05Z")),
            ("2026-01-02T03:04:05.5Z", Some("2026-01-02T03:04:05.500Z")),
            ("2026-01-02T03:04:05.123456789Z", Some("2026-01-02T03:04:05.123456789Z")),
            // Past nine digits the fraction is cut, not rounded.
            ("2026-01-02T03:04:05.1234567891Z", Some("2026-01-02T03:04:05.123456789Z")),
            ("2026-01-02t03:04:05z", Some("2026-01-02T03:04:05Z")),
            ("2026-01-02 03:04:05+02:30", Some("2026-01-02T00:34:05Z")),
            ("2026-01-01T23:30:00-01:00", Some("2026-01-02T00:30:00Z")),
            ("2016-12-31T23:59:60Z", Some("2016-12-31T23:59:60Z")),
            ("2026-13-02T03:04:05Z", None),
            ("2026-02-30T03:04:05Z", None),
            ("2026-01-02T03:04:05", None),
            ("2026-01-02T03:04:05.Z", None),
            ("2026-01-02T03:04:05Z ", None),
            ("26-01-02T03:04:05Z", None),
            ("2026-01-02T03:04:05+24:00", None),
            ("", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_rfc3339(text), expected.map(at), "{text:?}");
        }
    }

    #[test]
    fn a_field_reads_json_and_says_what_was_wrong() {
        #[derive(Deserialize, Debug)]
        struct Row {
            #[serde(deserialize_with = "deserialize")]
            at: DateTime<Utc>,
            #[serde(default, deserialize_with = "deserialize_option")]
            until: Option<DateTime<Utc>>,
        }
        let row: Row = serde_json::from_str(r#"{"at":"2026-01-02T03:04:05Z"}"#).unwrap();
        assert_eq!((row.at, row.until), (at("2026-01-02T03:04:05Z"), None));
        let row: Row =
            serde_json::from_str(r#"{"at":"2026-01-02T03:04:05Z","until":null}"#).unwrap();
        assert_eq!(row.until, None);
        let error = serde_json::from_str::<Row>(r#"{"at":"soon"}"#).unwrap_err().to_string();
        assert!(error.contains(r#""soon" is not an RFC 3339 time"#), "{error}");
        assert!(serde_json::from_str::<Row>(r#"{"at":5}"#).is_err());
    }

    proptest! {
        /// Whatever chrono writes — its JSON and its RFC 3339 at any offset — reads back as the
        /// same instant.
        #[test]
        fn reads_back_what_chrono_writes(
            seconds in -62_000_000_000i64..250_000_000_000,
            nanos in prop_oneof![Just(0u32), 0u32..1_000_000_000, (0u32..1000).prop_map(|n| n * 1_000_000)],
            offset_minutes in -1439i32..1440,
        ) {
            let time = Utc.timestamp_opt(seconds, nanos).unwrap();
            let json = serde_json::to_string(&time).unwrap();
            prop_assert_eq!(parse_rfc3339(json.trim_matches('"')), Some(time), "{}", json);
            let offset = FixedOffset::east_opt(offset_minutes * 60).unwrap();
            let text = time.with_timezone(&offset).to_rfc3339_opts(SecondsFormat::AutoSi, false);
            prop_assert_eq!(parse_rfc3339(&text), Some(time), "{}", text);
        }
    }
}
