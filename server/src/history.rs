//! The server's [`HistorySource`] for the pages: reads an agent's log from the store and folds it
//! with the shared timeline reducer.

use std::sync::Arc;

use app::history::{AgentHistory, HistorySource};
use app::timeline::Timeline;
use futures::future::BoxFuture;
use uuid::Uuid;

use crate::store::Store;

/// Events read per store page while folding a history page.
const HISTORY_PAGE_EVENTS: u32 = 1000;

pub struct StoreHistory {
    pub store: Arc<dyn Store>,
}

impl HistorySource for StoreHistory {
    fn load(&self, agent_id: Uuid) -> BoxFuture<'static, Result<Option<AgentHistory>, String>> {
        let store = self.store.clone();
        Box::pin(async move {
            let failed = |error: crate::store::StoreError| {
                tracing::error!(%agent_id, %error, "history could not be read");
                "the server failed to read this history".to_owned()
            };
            let Some(agent) = store.get_agent(agent_id).await.map_err(failed)? else {
                return Ok(None);
            };
            let mut timeline = Timeline::new();
            loop {
                let events = store
                    .read_events(agent_id, timeline.last_seq(), HISTORY_PAGE_EVENTS)
                    .await
                    .map_err(failed)?;
                let full_page = events.len() as u32 == HISTORY_PAGE_EVENTS;
                timeline.apply_all(events);
                if !full_page {
                    return Ok(Some(AgentHistory { agent, timeline }));
                }
            }
        })
    }
}
