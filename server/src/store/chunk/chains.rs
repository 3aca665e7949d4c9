//! The writer's memory of each agent's last draft, to chain ids: a string append (or a stream
//! message) that continues the previous draft gets the id after its id.

use uuid::Uuid;

use super::ids::next_id;
use super::row::continues;
use crate::store::{AppendBatch, EventDraft};

/// Agents whose last draft the writer remembers to chain ids ([`IdChains`]); past it, it
/// forgets them all (their next appends start runs of their own: fewer bytes saved, nothing
/// wrong).
pub const ID_CHAINS_AGENTS_MAX: usize = 4_096;

/// The writer's memory of each agent's last draft, to give a string append that continues it
/// the id after its id ([`next_id`]).
#[derive(Default)]
pub struct IdChains {
    last: std::collections::HashMap<Uuid, EventDraft>,
}

impl IdChains {
    /// Gives each draft of `batch` that continues the agent's previous draft the id after that
    /// one's, and remembers the batch's last draft.
    pub fn assign(&mut self, batch: &mut AppendBatch) {
        let follow = |previous: &EventDraft, draft: &mut EventDraft| {
            if continues(previous, draft) {
                if let Some(id) = next_id(previous.id) {
                    // A single message's block is its id (`chunk::row`): it moves with it.
                    if draft.block_id == Some(draft.id) {
                        draft.block_id = Some(id);
                    }
                    draft.id = id;
                }
            }
        };
        let Some(first) = batch.drafts.first_mut() else {
            return;
        };
        if let Some(previous) = self.last.get(&batch.agent_id) {
            follow(previous, first);
        }
        for index in 1..batch.drafts.len() {
            let (before, after) = batch.drafts.split_at_mut(index);
            follow(&before[index - 1], &mut after[0]);
        }
        if self.last.len() >= ID_CHAINS_AGENTS_MAX && !self.last.contains_key(&batch.agent_id) {
            self.last.clear();
        }
        let last = batch.drafts.last().expect("the batch has a draft").clone();
        self.last.insert(batch.agent_id, last);
    }
}
