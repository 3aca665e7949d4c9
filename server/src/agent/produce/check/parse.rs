//! A batch's events straight from its bytes. Parsed first into a `serde_json::Value` and then
//! into events, a 64-event batch built and dropped a tree of maps per event on the way: the
//! producer API's CPU was mostly that (`perf`: `Value`'s parse, its maps' inserts and drops, and
//! `from_value`), at 3.0–4.5 µs an event against 1.3 µs a message for Durable Streams appends of
//! the same batches. Here each event is deserialized where it lies; the index of the event being
//! read is kept, so a refusal still names the event.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::{ProducedEvent, Refusal, PRODUCE_BATCH_EVENTS_MAX};

/// Why a batch's bytes gave no events.
#[derive(Debug, PartialEq)]
pub enum BatchError {
    /// The bytes are not JSON (cut short, or not JSON at all): nothing was read as events.
    NotJson(String),
    /// JSON, but not a batch of events (naming the event when one was wrong).
    Refused(Refusal),
}

/// What the reader was at when the deserializer failed.
#[derive(Clone, Copy)]
enum At {
    /// The body itself (not an array or an object).
    Body,
    Event(usize),
    /// One event past [`PRODUCE_BATCH_EVENTS_MAX`].
    TooMany,
}

/// A batch's events from its JSON bytes: an array of events, or one event.
pub fn parse_batch(bytes: &[u8]) -> Result<Vec<ProducedEvent>, BatchError> {
    let at = Cell::new(At::Body);
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let parsed = Batch { at: &at }.deserialize(&mut deserializer).and_then(|items| {
        deserializer.end()?;
        Ok(items)
    });
    let error = match parsed {
        Ok(items) if items.is_empty() => {
            return Err(BatchError::Refused(Refusal::batch("the batch has no events")))
        }
        Ok(items) => return Ok(items),
        Err(error) => error,
    };
    if !error.is_data() {
        return Err(BatchError::NotJson(error.to_string()));
    }
    Err(BatchError::Refused(match at.get() {
        At::Body => Refusal::batch("the body must be a JSON array of events (or one event object)"),
        At::TooMany => {
            Refusal::batch(format!("a batch holds at most {PRODUCE_BATCH_EVENTS_MAX} events"))
        }
        At::Event(index) => Refusal::at(index, error.to_string()),
    }))
}

/// The seed that reads a batch, noting in `at` where it is.
struct Batch<'a> {
    at: &'a Cell<At>,
}

impl<'de> DeserializeSeed<'de> for Batch<'_> {
    type Value = Vec<ProducedEvent>;

    fn deserialize<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Batch<'_> {
    type Value = Vec<ProducedEvent>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON array of events (or one event object)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let hint = seq.size_hint().unwrap_or(0).min(PRODUCE_BATCH_EVENTS_MAX);
        let mut items = Vec::with_capacity(hint);
        loop {
            if items.len() == PRODUCE_BATCH_EVENTS_MAX {
                // One more is refused without being read as an event (nor kept).
                self.at.set(At::TooMany);
                return match seq.next_element::<IgnoredAny>()? {
                    Some(_) => Err(de::Error::custom("too many events")),
                    None => Ok(items),
                };
            }
            self.at.set(At::Event(items.len()));
            match seq.next_element::<ProducedEvent>()? {
                Some(item) => items.push(item),
                None => return Ok(items),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.at.set(At::Event(0));
        let item = ProducedEvent::deserialize(de::value::MapAccessDeserializer::new(map))?;
        Ok(vec![item])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a body parses into: the events' kinds, or the refusal's text.
    fn outcome(body: &str) -> Result<Vec<String>, String> {
        match parse_batch(body.as_bytes()) {
            Ok(items) => Ok(items.into_iter().map(|item| item.kind).collect()),
            Err(BatchError::NotJson(error)) => Err(format!("not JSON: {error}")),
            Err(BatchError::Refused(refusal)) => Err(refusal.to_string()),
        }
    }

    /// A case: its name, the body, and the kinds read or how the refusal begins.
    type Case = (&'static str, String, Result<Vec<&'static str>, &'static str>);

    #[test]
    fn a_batch_is_read_event_by_event_and_a_refusal_names_the_event() {
        let many = |count: usize| format!("[{}]", vec![r#"{"kind":"text"}"#; count].join(","));
        let cases: Vec<Case> = vec![
            (
                "two events",
                r#"[{"kind":"run_started"},{"kind":"text"}]"#.into(),
                Ok(vec!["run_started", "text"]),
            ),
            ("one event as an object", r#"{"kind":"text"}"#.into(), Ok(vec!["text"])),
            ("blanks around", " \n[ {\"kind\":\"text\"} ]\n".into(), Ok(vec!["text"])),
            ("empty", "[]".into(), Err("the batch has no events")),
            ("a string", r#""text""#.into(), Err("the body must be a JSON array")),
            ("a number", "7".into(), Err("the body must be a JSON array")),
            (
                "a field the server assigns",
                r#"[{"kind":"text"},{"kind":"text","seq":3}]"#.into(),
                Err("event 1: unknown field `seq`"),
            ),
            (
                "an event not an object",
                r#"[{"kind":"text"},1]"#.into(),
                Err("event 1: invalid type: integer `1`"),
            ),
            ("a wrong type", r#"[{"kind":"text","message_id":"nope"}]"#.into(), Err("event 0: ")),
            (
                "a field twice",
                r#"[{"kind":"text","kind":"error"}]"#.into(),
                Err("event 0: duplicate field `kind`"),
            ),
            ("cut short", r#"[{"kind":"te"#.into(), Err("not JSON: ")),
            ("broken inside an event", r#"[{"kind":"text",}]"#.into(), Err("not JSON: ")),
            ("garbage after", r#"[{"kind":"text"}] x"#.into(), Err("not JSON: ")),
            ("not JSON at all", "kind=text".into(), Err("not JSON: ")),
            (
                "at the bound",
                many(PRODUCE_BATCH_EVENTS_MAX),
                Ok(vec!["text"; PRODUCE_BATCH_EVENTS_MAX]),
            ),
            (
                "past the bound",
                many(PRODUCE_BATCH_EVENTS_MAX + 1),
                Err("a batch holds at most 4096 events"),
            ),
        ];
        for (name, body, expected) in cases {
            match (outcome(&body), expected) {
                (Ok(kinds), Ok(expected)) => assert_eq!(kinds, expected, "{name}"),
                (Err(said), Err(says)) => {
                    assert!(said.starts_with(says), "{name}: {said:?} should start with {says:?}")
                }
                (got, expected) => panic!("{name}: {got:?}, expected {expected:?}"),
            }
        }
    }
}
