//! Branches: a conversation's other lines, as the store keeps them.
//!
//! A branch is a log of its own — an agents row no agent list shows, the conversation's
//! settings copied — that shares its parent's events up to `fork_seq` without copying them: its
//! own events start at `fork_seq + 1`, and a read of it walks its chain of ancestors first
//! ([`read_along`]), each up to the seq the next one forked at. So forking a conversation of a
//! million events writes one row, and every branch is a gapless log from seq 1 that every
//! reader (catch-up, pages, every surface's replay, the model's context) reads like any other.
//!
//! A fork is flattened when it is made ([`fork`]): forking a branch at or before its own fork
//! point forks its parent instead, so along a chain the fork seqs strictly grow and each segment
//! holds events of its own. A chain never changes once made, so each store keeps the chains it
//! has read ([`ForkChains`]).

use crate::store::StoreResult;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use app::protocol::Agent;
use async_trait::async_trait;
use uuid::Uuid;

use super::gathered::Gathered;
use super::rows::corrupt;
use super::Agents;

/// Branches one conversation may have: each edit or regenerate makes one.
pub const BRANCHES_PER_CONVERSATION_MAX: u32 = 1000;
/// Logs a branch's chain may pass through (its ancestors). A fork that would go deeper is
/// refused; flattening keeps chains as short as the conversation's real divergences.
pub const BRANCH_DEPTH_MAX: usize = 64;
/// Chains a store remembers (logs that are no branch included); past it, it forgets them all.
pub const FORK_CHAINS_CACHED_MAX: usize = 65_536;

/// The store's half of branches: the rows. The rules (where a fork may be, who may) live in
/// the layers above; [`fork`] is the one way a branch is made.
#[async_trait]
pub trait Branches: Send + Sync + 'static {
    /// The log `log` was forked from and the seq it shares that log up to; `None` for a log
    /// that is no branch (or no log at all).
    async fn fork_origin(&self, log: Uuid) -> StoreResult<Option<(Uuid, u64)>>;
    /// Writes a branch of `source`'s conversation `root` sharing `source`'s log up to
    /// `fork_seq` (its settings copied from `source`). `None` when the conversation has
    /// [`BRANCHES_PER_CONVERSATION_MAX`] branches already.
    async fn insert_branch(
        &self,
        source: &Agent,
        root: Uuid,
        fork_seq: u64,
    ) -> StoreResult<Option<Agent>>;
    /// The conversation's branches (not its own log), oldest first.
    async fn list_branches(&self, root: Uuid) -> StoreResult<Vec<Agent>>;
    /// Makes `branch` (`None`: its own log) the branch the conversation's clients follow.
    /// False when `root` is no conversation, or `branch` is none of its branches.
    async fn set_current_branch(&self, root: Uuid, branch: Option<Uuid>) -> StoreResult<bool>;
    /// Deletes a branch and its own events; the conversation's current branch, if it was this
    /// one, becomes its parent. Refused while another branch forks from it.
    async fn delete_branch(&self, branch: Uuid) -> StoreResult<BranchDeletion>;
}

/// What [`Branches::delete_branch`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BranchDeletion {
    Deleted,
    /// Other branches read its events: it stays.
    HasBranches,
    /// No such branch.
    Unknown,
}

/// Why [`fork`] made no branch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ForkRefusal {
    /// No such conversation or branch.
    UnknownLog,
    /// The log does not reach that seq yet.
    PastHead { head_seq: u64 },
    /// [`BRANCHES_PER_CONVERSATION_MAX`].
    TooManyBranches,
    /// [`BRANCH_DEPTH_MAX`].
    TooDeep,
}

/// Forks `log` after its seq `after_seq`: a branch of its conversation sharing its events
/// `1..=after_seq`. Flattened: while `log` is a branch forked at or after `after_seq`, its
/// parent is forked instead (the events are the parent's).
pub async fn fork<S>(
    store: &S,
    log: Uuid,
    after_seq: u64,
) -> StoreResult<Result<Agent, ForkRefusal>>
where
    S: Agents + Branches + ?Sized,
{
    let Some(asked) = store.get_agent(log).await? else {
        return Ok(Err(ForkRefusal::UnknownLog));
    };
    if after_seq > asked.head_seq {
        return Ok(Err(ForkRefusal::PastHead { head_seq: asked.head_seq }));
    }
    let root = asked.branch.map_or(asked.id, |origin| origin.root);
    let mut source = asked;
    for _ in 0..BRANCH_DEPTH_MAX {
        match source.branch {
            Some(origin) if after_seq <= origin.fork_seq => {
                let Some(parent) = store.get_agent(origin.parent).await? else {
                    return Err(corrupt(format!("branch {} lost its parent", source.id)));
                };
                source = parent;
            }
            _ => {
                if chain_depth(store, source.id).await? + 1 > BRANCH_DEPTH_MAX {
                    return Ok(Err(ForkRefusal::TooDeep));
                }
                return Ok(store
                    .insert_branch(&source, root, after_seq)
                    .await?
                    .ok_or(ForkRefusal::TooManyBranches));
            }
        }
    }
    Ok(Err(ForkRefusal::TooDeep))
}

async fn chain_depth<S: Branches + ?Sized>(store: &S, log: Uuid) -> StoreResult<usize> {
    Ok(load_chain(store, log).await?.len())
}

/// A stretch of a branch's history that lies in another log: that log's events up to `upto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub log: Uuid,
    pub upto: u64,
}

/// Each log's chain of ancestors, as read once (a chain never changes; a log that is no
/// branch has an empty one). Bounded by [`FORK_CHAINS_CACHED_MAX`].
#[derive(Default)]
pub struct ForkChains {
    known: Mutex<HashMap<Uuid, Arc<[Segment]>>>,
}

impl ForkChains {
    /// `log`'s ancestors, oldest first: read once from `store`, then remembered.
    pub async fn chain<S: Branches + ?Sized>(
        &self,
        store: &S,
        log: Uuid,
    ) -> StoreResult<Arc<[Segment]>> {
        if let Some(chain) = self.lock().get(&log) {
            return Ok(chain.clone());
        }
        let chain: Arc<[Segment]> = load_chain(store, log).await?.into();
        let mut known = self.lock();
        if known.len() >= FORK_CHAINS_CACHED_MAX {
            known.clear();
        }
        known.insert(log, chain.clone());
        Ok(chain)
    }

    /// Forgets a deleted branch's chain.
    pub fn forget(&self, log: Uuid) {
        self.lock().remove(&log);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Arc<[Segment]>>> {
        // A panic while holding this lock leaves a map that is still whole.
        self.known.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

async fn load_chain<S: Branches + ?Sized>(store: &S, log: Uuid) -> StoreResult<Vec<Segment>> {
    let mut chain = Vec::new();
    let mut at = log;
    while let Some((parent, fork_seq)) = store.fork_origin(at).await? {
        if chain.len() >= BRANCH_DEPTH_MAX {
            return Err(corrupt(format!("branch {log}: a chain past {BRANCH_DEPTH_MAX} logs")));
        }
        if let Some(Segment { upto, .. }) = chain.last() {
            if fork_seq >= *upto {
                return Err(corrupt(format!(
                    "branch {at}: forked at {fork_seq}, not before {upto}"
                )));
            }
        }
        chain.push(Segment { log: parent, upto: fork_seq });
        at = parent;
    }
    chain.reverse();
    Ok(chain)
}

/// The events of `log` after `since`, at most `limit`, read along its `chain`: each ancestor's
/// stretch first (`read` of that log, bounded to the stretch), then its own. A stretch that
/// comes back short is a corrupt store: the parent's events up to the fork are committed.
pub async fn read_along<C, F, Fut>(
    chain: &[Segment],
    log: Uuid,
    mut since: u64,
    limit: u32,
    mut read: F,
) -> StoreResult<C>
where
    C: Gathered,
    F: FnMut(Uuid, u64, u32) -> Fut,
    Fut: Future<Output = StoreResult<C>>,
{
    // The first stretch read is the start of the answer (a page keeps its room at the front);
    // the stretches after it are added to it.
    let mut out: Option<C> = None;
    let add = |out: &mut Option<C>, got: C| match out {
        Some(out) => out.append(got),
        None => *out = Some(got),
    };
    let mut left = limit;
    for segment in chain {
        if left == 0 {
            break;
        }
        if since >= segment.upto {
            continue;
        }
        let wanted = u32::try_from(segment.upto - since).unwrap_or(u32::MAX).min(left);
        let got = read(segment.log, since, wanted).await?;
        if got.count() != wanted as usize {
            return Err(corrupt(format!(
                "branch {log}: its parent {} holds {} of seqs {}..={}",
                segment.log,
                got.count(),
                since + 1,
                since + u64::from(wanted)
            )));
        }
        since += u64::from(wanted);
        left -= wanted;
        add(&mut out, got);
    }
    if left > 0 {
        add(&mut out, read(log, since, left).await?);
    }
    Ok(out.unwrap_or_default())
}

#[cfg(test)]
mod tests;
