//! Group commits sent one ahead: a store whose groups commit one after another, in the order they
//! were sent (SQLite's append thread), takes the writer's next group while the one before it is
//! still committing, so the thread starts it the moment that one is done.
//!
//! Waiting for each answer before sending the next group left the append thread idle for a
//! third of every cycle: the hop back to the writer task, the publish and the answers, the next
//! gather, the hop there (single-message appends: ~180 of ~540 µs a cycle; 64-message appends
//! ~640 of ~2 070 µs).
//!
//! What this must not change: a group commits only after the one sent before it did. A group sent
//! "after" another ([`Link::after`]) is not tried when that one failed ([`Piped::NotTried`],
//! nothing written), so the writer can deal with the failure (retries, one request at a time,
//! runs with a hole) and then commit it, in order, as if it had never been sent. A group whose
//! answer never comes (the append thread had stopped before it took the group) was not tried.

use app::AgentEvent;
use tokio::sync::oneshot;

use super::{AppendBatch, StoreError};

/// Where a group stands in the writer's order: its ticket (increasing), and the ticket of the
/// group it must follow, if it was sent while that one was still committing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    pub ticket: u64,
    pub after: Option<u64>,
}

/// A sent group's answer. The group itself went to the store (the writer keeps no copy of its
/// drafts); one that did not commit comes back with the answer, as it was sent, for the writer
/// to try again.
#[derive(Debug)]
pub enum Piped {
    /// Committed; the events of each batch, with their seqs.
    Committed(Vec<Vec<AgentEvent>>),
    /// Tried and refused (as [`super::EventLog::append`] would have refused it).
    Failed(StoreError, Vec<AppendBatch>),
    /// Not tried: the group it was to follow did not commit. Nothing of it was written.
    NotTried(Vec<AppendBatch>),
}

/// The receipt of a sent group.
pub type PipedReceipt = oneshot::Receiver<Piped>;

/// A store that commits sent groups one after another, in the order they were sent.
pub trait AppendPipeline: Send + Sync {
    /// Sends `batches` (one transaction, as [`super::EventLog::append`]) behind every group sent
    /// before, and returns at once. Not bounded by the store's queue: the writer keeps at most
    /// two groups sent and unanswered.
    fn send(&self, batches: Vec<AppendBatch>, link: Link) -> PipedReceipt;
}

/// What the committing side remembers of the writer's order: the last linked group it took, and
/// whether it committed. Groups sent without a link (direct appends, the writer's retries) leave
/// it as it is.
#[derive(Default, Debug)]
pub struct Chain {
    last: Option<(u64, bool)>,
}

impl Chain {
    /// Whether a group with `link` may be tried now: always, unless it follows a group that was
    /// not the last one taken, or that did not commit.
    pub fn may_try(&self, link: Option<Link>) -> bool {
        match link.and_then(|link| link.after) {
            None => true,
            Some(after) => self.last == Some((after, true)),
        }
    }

    /// A group with `link` was taken: tried (`committed` says how it went), or not tried (false).
    pub fn took(&mut self, link: Option<Link>, committed: bool) {
        if let Some(link) = link {
            self.last = Some((link.ticket, committed));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(ticket: u64, after: Option<u64>) -> Option<Link> {
        Some(Link { ticket, after })
    }

    /// A case: its name, the groups taken in order (link, whether a try would commit), and which
    /// of them are tried.
    type Case<'a> = (&'a str, &'a [(Option<Link>, bool)], &'a [bool]);

    #[test]
    fn a_group_is_tried_only_after_the_one_it_follows_committed() {
        let cases: &[Case<'_>] = &[
            (
                "fresh groups are always tried",
                &[(link(1, None), false), (link(2, None), true)],
                &[true, true],
            ),
            (
                "a follower of a commit is tried",
                &[(link(1, None), true), (link(2, Some(1)), true)],
                &[true, true],
            ),
            (
                "a follower of a refusal is not",
                &[(link(1, None), false), (link(2, Some(1)), true)],
                &[true, false],
            ),
            (
                "nor the follower of one not tried",
                &[(link(1, None), false), (link(2, Some(1)), true), (link(3, Some(2)), true)],
                &[true, false, false],
            ),
            (
                "unlinked groups between do not count",
                &[(link(1, None), false), (None, true), (link(2, Some(1)), true)],
                &[true, true, false],
            ),
            (
                "nor do they spoil a commit",
                &[(link(1, None), true), (None, false), (link(2, Some(1)), true)],
                &[true, true, true],
            ),
            (
                "a follower of another ticket is not tried",
                &[(link(1, None), true), (link(3, Some(2)), true)],
                &[true, false],
            ),
            ("a follower of nothing taken is not", &[(link(2, Some(1)), true)], &[false]),
            (
                "a fresh group after a refusal starts again",
                &[(link(1, None), false), (link(2, None), true), (link(3, Some(2)), true)],
                &[true, true, true],
            ),
        ];
        for (name, taken, tried) in cases {
            let mut chain = Chain::default();
            let seen: Vec<bool> = taken
                .iter()
                .map(|(link, commits)| {
                    let tried = chain.may_try(*link);
                    chain.took(*link, tried && *commits);
                    tried
                })
                .collect();
            assert_eq!(&seen, tried, "{name}");
        }
    }
}
