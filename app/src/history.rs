//! An agent's history, folded: what `/agents/{id}` and `/agents/{id}/history` render first.
//!
//! On the server the history is read from the store and folded by the same [`Timeline`] the
//! browser uses; the folded timeline (bounded by content, not by the number of deltas) is
//! serialized into the page, so the browser hydrates without refetching it and carries on folding
//! live events from its cursor. When the browser navigates to an agent on its own, it loads the
//! same thing over REST.

use serde::{Deserialize, Serialize};
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
}

/// What the server provides to the pages (through Leptos context) to read history.
#[cfg(feature = "ssr")]
pub trait HistorySource: Send + Sync + 'static {
    /// `Ok(None)` for an unknown agent; `Err` with a sentence for a failure.
    fn load(
        &self,
        agent_id: Uuid,
    ) -> futures::future::BoxFuture<'static, Result<Option<AgentHistory>, String>>;

    /// The agents the agents page lists (newest first, a bounded number).
    fn agents(&self) -> futures::future::BoxFuture<'static, Result<Vec<Agent>, String>>;
}

/// The context value the server provides: a shared [`HistorySource`].
#[cfg(feature = "ssr")]
#[derive(Clone)]
pub struct HistorySourceHandle(pub std::sync::Arc<dyn HistorySource>);

/// The agents for the agents page, as a blocking resource: read on the server before any HTML
/// is sent (so the page lists them without JavaScript), loaded over REST after a client-side
/// navigation.
pub fn agents_resource() -> leptos::prelude::Resource<Result<Vec<Agent>, String>> {
    #[cfg(feature = "ssr")]
    let source = leptos::prelude::use_context::<HistorySourceHandle>();
    leptos::prelude::Resource::new_blocking(
        || (),
        move |_| {
            #[cfg(feature = "ssr")]
            let source = source.clone();
            let load = async move {
                #[cfg(feature = "ssr")]
                {
                    match source {
                        Some(source) => source.0.agents().await,
                        None => Err("the server has no history source".to_owned()),
                    }
                }
                #[cfg(all(feature = "hydrate", not(feature = "ssr")))]
                {
                    crate::api_client::list_agents().await
                }
                #[cfg(not(any(feature = "ssr", feature = "hydrate")))]
                {
                    Err::<Vec<Agent>, String>(
                        "agents load only on the server or in the browser".into(),
                    )
                }
            };
            #[cfg(feature = "hydrate")]
            let load = send_wrapper::SendWrapper::new(load);
            load
        },
    )
}

/// The history of `agent_id` as a blocking resource: on the server it is read from the store
/// before any HTML is sent and serialized into the page; in the browser the serialized value is
/// used as is, and only a client-side navigation loads it (over REST).
pub fn history_resource(agent_id: Uuid) -> leptos::prelude::Resource<Result<AgentHistory, String>> {
    #[cfg(feature = "ssr")]
    let source = leptos::prelude::use_context::<HistorySourceHandle>();
    #[cfg(feature = "ssr")]
    let response = leptos::prelude::use_context::<leptos_axum::ResponseOptions>();
    leptos::prelude::Resource::new_blocking(
        move || agent_id,
        move |agent_id| {
            #[cfg(feature = "ssr")]
            let (source, response) = (source.clone(), response.clone());
            let load = async move {
                #[cfg(feature = "ssr")]
                {
                    let Some(source) = source else {
                        return Err("the server has no history source".to_owned());
                    };
                    // The page's status says what its text says: 404 for an agent that is not
                    // there, 503 when the log could not be read.
                    let status = |code| {
                        if let Some(response) = &response {
                            response.set_status(code);
                        }
                    };
                    match source.0.load(agent_id).await {
                        Ok(Some(history)) => Ok(history),
                        Ok(None) => {
                            status(http::StatusCode::NOT_FOUND);
                            Err(format!("agent {agent_id} does not exist"))
                        }
                        Err(message) => {
                            status(http::StatusCode::SERVICE_UNAVAILABLE);
                            Err(message)
                        }
                    }
                }
                #[cfg(all(feature = "hydrate", not(feature = "ssr")))]
                {
                    crate::api_client::load_history(agent_id).await
                }
                #[cfg(not(any(feature = "ssr", feature = "hydrate")))]
                {
                    Err::<AgentHistory, String>(format!(
                        "history of {agent_id} loads only on the server or in the browser"
                    ))
                }
            };
            // Browser futures are not Send; the browser runs one thread, so this is sound.
            #[cfg(feature = "hydrate")]
            let load = send_wrapper::SendWrapper::new(load);
            load
        },
    )
}
