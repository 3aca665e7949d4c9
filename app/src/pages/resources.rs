//! The pages' blocking resources, read through the server's [`HistorySource`] before any HTML is
//! sent. Only the server reads them: the browser hydrates islands, which get what they need as
//! props (`#[island]` in this module's parent), and never renders a page itself.

use uuid::Uuid;

use crate::history::AgentHistory;
#[cfg(feature = "ssr")]
use crate::history::HistorySourceHandle;
use crate::protocol::Agent;

/// The agents for the agents page, as a blocking resource: the page lists them without
/// JavaScript.
pub fn agents_resource() -> leptos::prelude::Resource<Result<Vec<Agent>, String>> {
    #[cfg(feature = "ssr")]
    let source = leptos::prelude::use_context::<HistorySourceHandle>();
    leptos::prelude::Resource::new_blocking(
        || (),
        move |_| {
            #[cfg(feature = "ssr")]
            let source = source.clone();
            async move {
                #[cfg(feature = "ssr")]
                {
                    match source {
                        Some(source) => source.0.agents().await,
                        None => Err("the server has no history source".to_owned()),
                    }
                }
                #[cfg(not(feature = "ssr"))]
                {
                    Err::<Vec<Agent>, String>(SERVER_ONLY.into())
                }
            }
        },
    )
}

/// What a resource says where it was never meant to be read.
#[cfg(not(feature = "ssr"))]
const SERVER_ONLY: &str = "pages are read on the server";

/// The history of `agent_id` as a blocking resource, read from the store before any HTML is
/// sent; the islands that draw it get it as their props.
pub fn history_resource(
    agent_id: Uuid,
    follow_current: bool,
) -> leptos::prelude::Resource<Result<AgentHistory, String>> {
    #[cfg(feature = "ssr")]
    let source = leptos::prelude::use_context::<HistorySourceHandle>();
    #[cfg(feature = "ssr")]
    let response = leptos::prelude::use_context::<leptos_axum::ResponseOptions>();
    leptos::prelude::Resource::new_blocking(
        move || agent_id,
        move |agent_id| {
            #[cfg(feature = "ssr")]
            let (source, response) = (source.clone(), response.clone());
            async move {
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
                    match source.0.load(agent_id, follow_current).await {
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
                #[cfg(not(feature = "ssr"))]
                {
                    let _ = (agent_id, follow_current);
                    Err::<AgentHistory, String>(SERVER_ONLY.into())
                }
            }
        },
    )
}
