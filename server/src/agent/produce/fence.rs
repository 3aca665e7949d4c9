//! The idempotent producer's fence, pure: `Producer-Id`, `Producer-Epoch` and `Producer-Seq` as
//! the Durable Streams protocol defines them (Kafka's idempotent producer). A batch is written
//! once however often it is sent; a producer that restarted with a higher epoch fences off the
//! old one (whose late requests get 403 with the current epoch).

/// A producer id longer than this (in characters) is refused.
pub const PRODUCER_ID_CHARS_MAX: usize = 128;
/// The largest epoch or seq: 2^53 − 1, what a JavaScript number holds exactly.
pub const PRODUCER_NUMBER_MAX: u64 = (1 << 53) - 1;

/// The three producer headers of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerHeaders {
    pub id: String,
    pub epoch: u64,
    pub seq: u64,
}

impl ProducerHeaders {
    /// The headers as sent (`None` for one missing): all three, or a sentence saying what is
    /// wrong.
    pub fn parse(
        id: Option<&str>,
        epoch: Option<&str>,
        seq: Option<&str>,
    ) -> Result<ProducerHeaders, String> {
        let (Some(id), Some(epoch), Some(seq)) = (id, epoch, seq) else {
            let missing: Vec<&str> = [
                ("Producer-Id", id.is_none()),
                ("Producer-Epoch", epoch.is_none()),
                ("Producer-Seq", seq.is_none()),
            ]
            .into_iter()
            .filter_map(|(name, missing)| missing.then_some(name))
            .collect();
            return Err(format!(
                "Producer-Id, Producer-Epoch and Producer-Seq go together; missing: {}",
                missing.join(", ")
            ));
        };
        let id = id.trim();
        if id.is_empty() {
            return Err("Producer-Id must not be empty".into());
        }
        if id.chars().count() > PRODUCER_ID_CHARS_MAX {
            return Err(format!("Producer-Id is longer than {PRODUCER_ID_CHARS_MAX} characters"));
        }
        if id.chars().any(char::is_control) {
            return Err("Producer-Id must not contain control characters".into());
        }
        let number = |name: &str, text: &str| -> Result<u64, String> {
            let value = text
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("{name} must be a whole number ≥ 0, not {text:?}"))?;
            if value > PRODUCER_NUMBER_MAX {
                return Err(format!("{name} is above {PRODUCER_NUMBER_MAX}"));
            }
            Ok(value)
        };
        Ok(ProducerHeaders {
            id: id.to_owned(),
            epoch: number("Producer-Epoch", epoch)?,
            seq: number("Producer-Seq", seq)?,
        })
    }
}

/// What to do with a request, given the producer's position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fence {
    /// The next batch: check it and write it.
    Append,
    /// Written already (a retry): answered 204, nothing written.
    Duplicate,
    /// An older epoch than the producer's current one: 403 naming the current epoch.
    StaleEpoch { current: u64 },
    /// A seq past the next one: 409 with the expected and the received seq.
    Gap { expected: u64, received: u64 },
    /// A new epoch must start at seq 0: 400.
    EpochNotAtZero { epoch: u64, seq: u64 },
}

/// The fence for a request of `epoch` and `seq` from a producer whose last committed batch was
/// `(epoch, seq)` (`None`: it never committed one).
pub fn fence(position: Option<(u64, u64)>, epoch: u64, seq: u64) -> Fence {
    match position {
        None if seq == 0 => Fence::Append,
        None => Fence::Gap { expected: 0, received: seq },
        Some((current, _)) if epoch < current => Fence::StaleEpoch { current },
        Some((current, _)) if epoch > current && seq == 0 => Fence::Append,
        Some((current, _)) if epoch > current => Fence::EpochNotAtZero { epoch, seq },
        Some((_, last)) if seq <= last => Fence::Duplicate,
        Some((_, last)) if seq == last + 1 => Fence::Append,
        Some((_, last)) => Fence::Gap { expected: last + 1, received: seq },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences() {
        let gap = |expected, received| Fence::Gap { expected, received };
        // (position, epoch, seq, fence)
        let cases = [
            (None, 0, 0, Fence::Append),
            (None, 7, 0, Fence::Append),
            (None, 0, 1, gap(0, 1)),
            (Some((0, 0)), 0, 0, Fence::Duplicate),
            (Some((0, 4)), 0, 2, Fence::Duplicate),
            (Some((0, 4)), 0, 4, Fence::Duplicate),
            (Some((0, 4)), 0, 5, Fence::Append),
            (Some((0, 4)), 0, 7, gap(5, 7)),
            (Some((2, 4)), 1, 5, Fence::StaleEpoch { current: 2 }),
            (Some((2, 4)), 1, 0, Fence::StaleEpoch { current: 2 }),
            (Some((2, 4)), 3, 0, Fence::Append),
            (Some((2, 4)), 3, 5, Fence::EpochNotAtZero { epoch: 3, seq: 5 }),
        ];
        for (position, epoch, seq, expected) in cases {
            assert_eq!(
                fence(position, epoch, seq),
                expected,
                "{position:?} epoch {epoch} seq {seq}"
            );
        }
    }

    #[test]
    fn headers() {
        let ok = ProducerHeaders::parse(Some(" worker-1 "), Some("3"), Some("0")).unwrap();
        assert_eq!(ok, ProducerHeaders { id: "worker-1".into(), epoch: 3, seq: 0 });
        let refused = [
            (None, Some("0"), Some("0"), "missing: Producer-Id"),
            (Some("p"), None, None, "missing: Producer-Epoch, Producer-Seq"),
            (Some(" "), Some("0"), Some("0"), "must not be empty"),
            (Some("p"), Some("-1"), Some("0"), "Producer-Epoch must be a whole number"),
            (Some("p"), Some("0"), Some("1.5"), "Producer-Seq must be a whole number"),
            (Some("p"), Some("9007199254740992"), Some("0"), "above"),
            (Some("a\u{7}b"), Some("0"), Some("0"), "control characters"),
        ];
        for (id, epoch, seq, says) in refused {
            let error = ProducerHeaders::parse(id, epoch, seq).unwrap_err();
            assert!(error.contains(says), "{error:?} should say {says:?}");
        }
        let long = "p".repeat(PRODUCER_ID_CHARS_MAX + 1);
        assert!(ProducerHeaders::parse(Some(&long), Some("0"), Some("0")).is_err());
    }
}
