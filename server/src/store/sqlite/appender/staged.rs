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

use app::AgentEvent;
use uuid::Uuid;

use crate::store::{AppendBatch, EventDraft, ProducerStamp, StoreError};

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

/// `batches`' drafts as events (seq 0 until the commit numbers them).
pub(super) fn stage(batches: Vec<AppendBatch>) -> Vec<Staged> {
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
pub(super) fn unstage(staged: Vec<Staged>) -> Vec<AppendBatch> {
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
}
