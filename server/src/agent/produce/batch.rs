//! A producer's batch as the fence loop takes it: its events, and how to have them again for
//! another try. A try that loses a race (another server moved the producer's position between
//! our fence and our commit: rare) is fenced and checked again from the events as sent, and the
//! first try consumes its events into drafts. Kept as a copy, every batch paid for a deep copy
//! of its events and its drop (`perf`, 64-event batches: ~7 % of the producer API's CPU); a
//! batch parsed from bytes is parsed again from them instead, only when a try is lost.

use super::check::parse::{parse_batch, BatchError};
use super::check::ProducedEvent;
use super::ProduceError;
use crate::store::StoreError;

/// A batch's events ([`Batch::parsed`] or [`Batch::made`]), taken by `Producers::append`.
pub struct Batch {
    pub(super) items: Vec<ProducedEvent>,
    again: Again,
}

enum Again {
    /// The JSON the events were parsed from.
    Parse(Box<dyn AsRef<[u8]> + Send + Sync>),
    Copy(Vec<ProducedEvent>),
}

impl Batch {
    /// Events parsed from `json` ([`parse_batch`]): another try parses them again.
    pub fn parsed(
        items: Vec<ProducedEvent>,
        json: impl AsRef<[u8]> + Send + Sync + 'static,
    ) -> Batch {
        Batch { items, again: Again::Parse(Box::new(json)) }
    }

    /// Events made otherwise: a copy is kept for another try.
    pub fn made(items: Vec<ProducedEvent>) -> Batch {
        let copy = items.clone();
        Batch { items, again: Again::Copy(copy) }
    }

    /// The events as sent, for another try.
    pub(super) fn again(&self) -> Result<Vec<ProducedEvent>, ProduceError> {
        match &self.again {
            Again::Copy(items) => Ok(items.clone()),
            Again::Parse(json) => parse_batch((**json).as_ref()).map_err(|error| match error {
                BatchError::Refused(refusal) => ProduceError::Refused(refusal),
                // It parsed before: only a fault of this process could make it fail now.
                BatchError::NotJson(message) => ProduceError::Store(StoreError::Failed(format!(
                    "a batch parsed before did not parse again: {message}"
                ))),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSON: &str = r#"[{"kind":"run_started"},{"kind":"text","message_id":"0190d0c0-0000-7000-8000-0000000000b1","delta":"hi","delta_action":"append","metadata":{"at":1}}]"#;

    fn items() -> Vec<ProducedEvent> {
        parse_batch(JSON.as_bytes()).unwrap()
    }

    /// Another try gets the events as sent, whichever way they were kept, as often as asked.
    #[test]
    fn another_try_gets_the_events_as_sent() {
        let sent = format!("{:?}", items());
        for batch in [Batch::parsed(items(), JSON.as_bytes().to_vec()), Batch::made(items())] {
            for _ in 0..2 {
                assert_eq!(format!("{:?}", batch.again().unwrap()), sent);
            }
            assert_eq!(format!("{:?}", batch.items), sent);
        }
    }
}
