//! An agent's history, folded: what `/agents/{id}` and `/agents/{id}/history` render first.
//!
//! On the server the history is read from the store and folded by the same [`Timeline`] the
//! browser uses; the folded timeline (bounded by content, not by the number of deltas) is
//! serialized into the page as the props of the islands that draw it, so the browser hydrates
//! without refetching it and carries on folding live events from its cursor. When the live view
//! switches to another line of a conversation, it loads the same thing over REST.

use serde::{Deserialize, Serialize};
#[cfg(feature = "ssr")]
use uuid::Uuid;

use crate::protocol::Agent;
use crate::timeline::Timeline;

/// An agent and its log folded up to `timeline.last_seq()`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentHistory {
    pub agent: Agent,
    pub timeline: Timeline,
    /// The operator's link to a trace (`AGENTSTREAM_TRACE_URL_TEMPLATE`, `{trace_id}` in it),
    /// which the run inspector links a run's trace id with.
    #[serde(default)]
    pub trace_url_template: Option<String>,
    /// The conversation's branches, when it has any (`agent` is the line shown: its current
    /// branch, or the branch the page names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branches: Option<crate::protocol::BranchList>,
}

/// What the server provides to the pages (through Leptos context) to read history.
#[cfg(feature = "ssr")]
pub trait HistorySource: Send + Sync + 'static {
    /// `Ok(None)` for an unknown agent; `Err` with a sentence for a failure. A conversation's
    /// id loads its current branch when `follow_current`, else its own log (the main line).
    fn load(
        &self,
        agent_id: Uuid,
        follow_current: bool,
    ) -> futures::future::BoxFuture<'static, Result<Option<AgentHistory>, String>>;

    /// The agents the agents page lists (newest first, a bounded number).
    fn agents(&self) -> futures::future::BoxFuture<'static, Result<Vec<Agent>, String>>;
}

/// The context value the server provides: a shared [`HistorySource`].
#[cfg(feature = "ssr")]
#[derive(Clone)]
pub struct HistorySourceHandle(pub std::sync::Arc<dyn HistorySource>);
