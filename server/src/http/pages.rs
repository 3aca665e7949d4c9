//! The server's [`HistorySource`] for the pages: the agent and its folded log — as the request's
//! caller may see them (a scoped token's pages show its own agents only).

use std::sync::Arc;

use app::history::{AgentHistory, HistorySource};
use futures::future::BoxFuture;
use uuid::Uuid;

use crate::agent::branch::{branch_list, followed_log};
use crate::agent::history::{fold_log, Snapshots};
use crate::http::caller::Caller;
use crate::store::{Store, StoreError};

pub struct StoreHistory {
    pub store: Arc<dyn Store>,
    pub snapshots: Arc<Snapshots>,
    /// Who asked (`None`: a render without a request's caller, which is shown nothing).
    pub caller: Option<Caller>,
    /// `AGENTSTREAM_TRACE_URL_TEMPLATE`.
    pub trace_url_template: Option<Arc<str>>,
}

impl HistorySource for StoreHistory {
    fn load(
        &self,
        agent_id: Uuid,
        follow_current: bool,
    ) -> BoxFuture<'static, Result<Option<AgentHistory>, String>> {
        let store = self.store.clone();
        let snapshots = self.snapshots.clone();
        let caller = self.caller.clone();
        let trace_url_template = self.trace_url_template.as_deref().map(str::to_owned);
        Box::pin(async move {
            let failed = |error: StoreError| {
                tracing::error!(%agent_id, %error, "history could not be read");
                "the server failed to read this history".to_owned()
            };
            let Some(agent) = store.get_agent(agent_id).await.map_err(failed)? else {
                return Ok(None);
            };
            // The access middleware checked the page's agent already; a page reads no other.
            let Some(caller) = caller else {
                return Ok(None);
            };
            if caller.reach(store.as_ref(), &agent).await.is_err() {
                return Ok(None);
            }
            // A conversation's page shows its current branch; a branch's, that branch.
            let shown = match follow_current {
                true => followed_log(store.as_ref(), agent_id).await.map_err(failed)?,
                false => agent_id,
            };
            let agent = match shown == agent.id {
                true => agent,
                false => match store.get_agent(shown).await.map_err(failed)? {
                    Some(branch) => branch,
                    None => agent,
                },
            };
            let branches = branch_list(store.as_ref(), &agent)
                .await
                .map_err(failed)?
                .filter(|list| !list.branches.is_empty());
            let timeline = fold_log(store.as_ref(), &snapshots, agent.id).await.map_err(failed)?;
            Ok(Some(AgentHistory { agent, timeline, trace_url_template, branches }))
        })
    }

    fn agents(&self) -> BoxFuture<'static, Result<Vec<app::protocol::Agent>, String>> {
        let store = self.store.clone();
        let caller = self.caller.clone();
        Box::pin(async move {
            let Some(caller) = caller else {
                return Ok(Vec::new());
            };
            caller.agents(store.as_ref(), None, AGENTS_PAGE_AGENTS_MAX).await.map_err(|error| {
                tracing::error!(%error, "agents could not be listed");
                "the server failed to list the agents".to_owned()
            })
        })
    }
}

/// Agents the agents page lists at most (the newest; the API pages through all of them).
pub const AGENTS_PAGE_AGENTS_MAX: u32 = 200;
