//! Branches as the agent sees them: where a conversation may fork, and which log its clients
//! follow. The store keeps the rows (`store::branches`); this holds the rules.
//!
//! A fork goes between runs: after seq 0, or after a run's end that waits for nobody. Inside a
//! run the branch would hold a run with no end; after a run that waits for an approval or a
//! client's result, the branch would hold a request nobody could answer on it (the request's
//! open row is its parent's). Checked by reading the one event at the fork point, so forking a
//! long conversation costs what forking a short one does.

use app::protocol::{Agent, BranchList};
use app::{AgentEvent, EventKind};
use uuid::Uuid;

use super::approval::{REQUIRES_APPROVAL, REQUIRES_CLIENT_TOOL};
use crate::store::branches::{BRANCHES_PER_CONVERSATION_MAX, BRANCH_DEPTH_MAX};
use crate::store::{fork, ForkRefusal, Store, StoreError};

/// Why a fork was not made.
#[derive(Debug, thiserror::Error)]
pub enum ForkError {
    #[error("no conversation or branch {0}")]
    Unknown(Uuid),
    #[error("the log ends at seq {head_seq}: a fork goes at or before it")]
    PastHead { head_seq: u64 },
    #[error("seq {0} is inside a run: a fork goes after a run's end (or at 0)")]
    InsideRun(u64),
    #[error("the run ending at seq {0} waits for an answer: answer it before forking after it")]
    Waits(u64),
    #[error(
        "this conversation has {BRANCHES_PER_CONVERSATION_MAX} branches, the most it may have"
    )]
    TooManyBranches,
    #[error("branches of branches may nest {BRANCH_DEPTH_MAX} deep at most")]
    TooDeep,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Whether a fork may go after `event` (`None`: at seq 0). Pure.
pub fn fork_point(seq: u64, event: Option<&AgentEvent>) -> Result<(), ForkError> {
    let Some(event) = event else {
        return Ok(());
    };
    if !event.kind.is_run_end() {
        return Err(ForkError::InsideRun(seq));
    }
    let stop = event.content.get("stop_reason").and_then(|stop| stop.as_str());
    if event.kind == EventKind::RunCompleted
        && matches!(stop, Some(REQUIRES_APPROVAL | REQUIRES_CLIENT_TOOL))
    {
        return Err(ForkError::Waits(seq));
    }
    Ok(())
}

/// Forks `log` (a conversation or one of its branches) after its seq `after_seq`.
pub async fn fork_at(store: &dyn Store, log: Uuid, after_seq: u64) -> Result<Agent, ForkError> {
    // The head first: a seq past it is refused before any read (one past the store's column
    // range would be a store error, not the client's).
    let head_seq = store.head_seq(log).await?.ok_or(ForkError::Unknown(log))?;
    if after_seq > head_seq {
        return Err(ForkError::PastHead { head_seq });
    }
    let at = match after_seq {
        0 => None,
        seq => store.read_events(log, seq - 1, 1).await?.into_iter().next(),
    };
    fork_point(after_seq, at.as_ref())?;
    match fork(store, log, after_seq).await? {
        Ok(branch) => Ok(branch),
        Err(ForkRefusal::UnknownLog) => Err(ForkError::Unknown(log)),
        Err(ForkRefusal::PastHead { head_seq }) => Err(ForkError::PastHead { head_seq }),
        Err(ForkRefusal::TooManyBranches) => Err(ForkError::TooManyBranches),
        Err(ForkRefusal::TooDeep) => Err(ForkError::TooDeep),
    }
}

/// The conversation a log belongs to: its own id, or its branch's root.
pub fn conversation_of(agent: &Agent) -> Uuid {
    agent.branch.map_or(agent.id, |origin| origin.root)
}

/// The conversation `agent` belongs to and its branches (what `GET …/branches` answers and the
/// pages draw); `None` when the conversation is gone.
pub async fn branch_list(
    store: &dyn Store,
    agent: &Agent,
) -> Result<Option<BranchList>, StoreError> {
    let root = conversation_of(agent);
    let conversation = match root == agent.id {
        true => agent.clone(),
        false => match store.get_agent(root).await? {
            Some(conversation) => conversation,
            None => return Ok(None),
        },
    };
    let branches = store.list_branches(root).await?;
    Ok(Some(BranchList {
        current_branch: conversation.current_branch.unwrap_or(root),
        agent: conversation,
        branches,
    }))
}

/// The log the clients of a conversation follow: its current branch (or its own log). A
/// branch's id names that branch, whichever is current.
pub async fn followed_log(store: &dyn Store, log: Uuid) -> Result<Uuid, StoreError> {
    Ok(match store.get_agent(log).await? {
        Some(agent) if agent.branch.is_none() => agent.current_branch.unwrap_or(agent.id),
        _ => log,
    })
}

/// Forks `log` after `after_seq` for a turn that replaces what follows: the branch becomes the
/// conversation's current one once `start` (the turn's run on it) succeeded; refused, the
/// branch is deleted again and nothing changed.
pub async fn branch_for_turn<T, E, F, Fut>(
    store: &dyn Store,
    log: Uuid,
    after_seq: u64,
    start: F,
) -> Result<(Uuid, T), E>
where
    E: From<ForkError> + From<StoreError>,
    F: FnOnce(Uuid) -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let branch = fork_at(store, log, after_seq).await?;
    let root = conversation_of(&branch);
    match start(branch.id).await {
        Ok(started) => {
            store.set_current_branch(root, Some(branch.id)).await?;
            Ok((branch.id, started))
        }
        Err(error) => {
            if let Err(left) = store.delete_branch(branch.id).await {
                tracing::warn!(branch = %branch.id, error = %left, "a refused turn's branch stays");
            }
            Err(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use app::testing::event;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_fork_goes_between_runs_that_wait_for_nobody() {
        let end = |kind, stop: &str| event(7, kind, json!({ "stop_reason": stop }));
        let cases = [
            (None, true),
            (Some(end(EventKind::RunCompleted, "end_turn")), true),
            (Some(end(EventKind::RunFailed, "provider_error")), true),
            (Some(end(EventKind::RunCancelled, "cancelled")), true),
            (Some(end(EventKind::RunCompleted, "max_iterations")), true),
            (Some(end(EventKind::RunCompleted, REQUIRES_APPROVAL)), false),
            (Some(end(EventKind::RunCompleted, REQUIRES_CLIENT_TOOL)), false),
            (Some(event(7, EventKind::Text, json!({}))), false),
            (Some(event(7, EventKind::RunStarted, json!({}))), false),
            (Some(event(7, EventKind::User, json!({}))), false),
        ];
        for (at, forkable) in cases {
            let kind = at.as_ref().map(|event| event.kind);
            assert_eq!(fork_point(7, at.as_ref()).is_ok(), forkable, "{kind:?}");
        }
    }
}
