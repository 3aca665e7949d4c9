//! The server's [`HistorySource`] for the pages: the agent and its folded log.

use std::sync::Arc;

use app::history::{AgentHistory, HistorySource};
use futures::future::BoxFuture;
use uuid::Uuid;

use crate::agent::history::{fold_log, Snapshots};
use crate::store::{Store, StoreError};

pub struct StoreHistory {
    pub store: Arc<dyn Store>,
    pub snapshots: Arc<Snapshots>,
}

impl HistorySource for StoreHistory {
    fn load(&self, agent_id: Uuid) -> BoxFuture<'static, Result<Option<AgentHistory>, String>> {
        let store = self.store.clone();
        let snapshots = self.snapshots.clone();
        Box::pin(async move {
            let failed = |error: StoreError| {
                tracing::error!(%agent_id, %error, "history could not be read");
                "the server failed to read this history".to_owned()
            };
            let Some(agent) = store.get_agent(agent_id).await.map_err(failed)? else {
                return Ok(None);
            };
            let timeline = fold_log(store.as_ref(), &snapshots, agent_id)
                .await
                .map_err(failed)?;
            Ok(Some(AgentHistory { agent, timeline }))
        })
    }

    fn agents(&self) -> BoxFuture<'static, Result<Vec<app::protocol::Agent>, String>> {
        let store = self.store.clone();
        Box::pin(async move {
            store
                .list_agents(AGENTS_PAGE_AGENTS_MAX)
                .await
                .map_err(|error| {
                    tracing::error!(%error, "agents could not be listed");
                    "the server failed to list the agents".to_owned()
                })
        })
    }
}

/// Agents the agents page lists at most (the newest; the API pages through all of them).
pub const AGENTS_PAGE_AGENTS_MAX: u32 = 200;
