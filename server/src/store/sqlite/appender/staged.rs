//! A group's drafts made into events before its transaction starts, and made back into the
//! batches they came as when it does not commit.
//!
//! **Why.** The writer sends a group to the append thread while the one before it is still
//! committing ([`crate::store::pipeline`]), and used to keep a deep copy of every draft in case
//! the group came back refused or not tried: the copy (and freeing it) was ~6 % of the server's
//! CPU on 64-message Durable Streams appends. Now the group itself moves here; its drafts become
//! the events the commit writes and answers with (a move, no copy), and a group that does not
//! commit goes back as it was sent ([`Unwritten`]).

use std::any::Any;
use std::panic::AssertUnwindSafe;

use app::AgentEvent;
use uuid::Uuid;

use crate::store::rows::totals;
use crate::store::{AppendBatch, EventDraft, ProducerStamp, StoreError, StoreResult};

/// One batch of a group, its drafts made into events (their seqs set by the commit).
pub(super) struct Staged {
    pub(super) agent_id: Uuid,
    pub(super) events: Vec<AgentEvent>,
    pub(super) producer: Option<ProducerStamp>,
}

/// A group that did not commit: why, and its batches as they were sent.
#[derive(Debug)]
pub(crate) struct Unwritten {
    pub(crate) error: StoreError,
    pub(crate) batches: Vec<AppendBatch>,
    /// The commit panicked: the thread ends once the writer has the group back.
    pub(super) panic: Option<Box<dyn Any + Send>>,
}

/// `batches` staged and handed to `write` (with each agent's event count): their events when it
/// succeeded, else the batches back, also when it panicked (then before or after its `COMMIT`:
/// the writer asks the log before it tries again).
pub(super) fn write_staged(
    batches: Vec<AppendBatch>,
    write: impl FnOnce(&[(Uuid, u64)], &mut [Staged]) -> StoreResult<()>,
) -> Result<Vec<Vec<AgentEvent>>, Unwritten> {
    let totals = totals(&batches);
    let mut staged = stage(batches);
    let written = std::panic::catch_unwind(AssertUnwindSafe(|| write(&totals, &mut staged)));
    let (error, panic) = match written {
        Ok(Ok(())) => return Ok(staged.into_iter().map(|one| one.events).collect()),
        Ok(Err(error)) => (error, None),
        Err(panic) => {
            let error = StoreError::Unavailable(
                "the append thread failed during a commit; whether it committed is not known"
                    .into(),
            );
            (error, Some(panic))
        }
    };
    Err(Unwritten { error, batches: unstage(staged), panic })
}

/// `batches`' drafts as events (seq 0 until the commit numbers them).
fn stage(batches: Vec<AppendBatch>) -> Vec<Staged> {
    batches
        .into_iter()
        .map(|AppendBatch { agent_id, drafts, producer }| Staged {
            agent_id,
            events: drafts.into_iter().map(|draft| draft.into_event(agent_id, 0)).collect(),
            producer,
        })
        .collect()
}

/// The batches `staged` was made from.
fn unstage(staged: Vec<Staged>) -> Vec<AppendBatch> {
    staged
        .into_iter()
        .map(|Staged { agent_id, events, producer }| AppendBatch {
            agent_id,
            drafts: events.into_iter().map(EventDraft::from_event).collect(),
            producer,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::EventKind;
    use serde_json::json;

    #[test]
    fn a_group_staged_and_given_back_is_the_group_that_was_sent() {
        let agent = Uuid::from_u128(7);
        let mut message = EventDraft::new(EventKind::StreamMessage);
        message.content = json!({"n": 1});
        message.run_id = Some(Uuid::from_u128(9));
        message.raw = Some(json!("raw"));
        message.metadata = json!({"m": true});
        let mut delta = EventDraft::new(EventKind::Text);
        delta.delta = Some(json!("he"));
        delta.delta_path = Some("/text".into());
        let cases: Vec<(&str, Vec<AppendBatch>)> = vec![
            ("nothing", vec![]),
            ("one event", vec![AppendBatch::new(agent, vec![message.clone()])]),
            (
                "two batches of two agents",
                vec![
                    AppendBatch::new(agent, vec![message.clone(), delta.clone()]),
                    AppendBatch::new(Uuid::from_u128(8), vec![delta.clone()]),
                ],
            ),
            ("an empty batch", vec![AppendBatch::new(agent, vec![])]),
        ];
        for (name, batches) in cases {
            let staged = stage(batches.clone());
            let seen: Vec<_> = staged.iter().map(|one| (one.agent_id, one.events.len())).collect();
            let sent: Vec<_> =
                batches.iter().map(|batch| (batch.agent_id, batch.drafts.len())).collect();
            assert_eq!(seen, sent, "{name}: staged");
            assert_eq!(unstage(staged), batches, "{name}: given back");
        }
    }

    #[test]
    fn a_write_that_fails_or_panics_midway_gives_the_batches_back() {
        let agent = Uuid::from_u128(7);
        let sent = vec![AppendBatch::new(agent, vec![EventDraft::new(EventKind::Text); 3])];
        let numbered = |staged: &mut [Staged]| {
            for (seq, event) in staged[0].events.iter_mut().enumerate() {
                event.seq = seq as u64 + 1;
            }
        };
        let committed = write_staged(sent.clone(), |totals, staged| {
            assert_eq!(totals, [(agent, 3)]);
            numbered(staged);
            Ok(())
        })
        .unwrap();
        assert_eq!(committed[0].iter().map(|event| event.seq).collect::<Vec<_>>(), [1, 2, 3]);
        let failed = write_staged(sent.clone(), |_, staged| {
            numbered(staged);
            Err(StoreError::Unavailable("disk".into()))
        })
        .unwrap_err();
        assert_eq!((failed.batches, failed.panic.is_none()), (sent.clone(), true));
        let panicked = write_staged(sent.clone(), |_, staged| {
            numbered(staged);
            panic!("midway")
        })
        .unwrap_err();
        assert!(panicked.error.is_transient(), "{}", panicked.error);
        assert_eq!((panicked.batches, panicked.panic.is_some()), (sent, true));
    }
}
