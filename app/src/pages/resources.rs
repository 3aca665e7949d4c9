//! The pages' blocking resources: read through the server's [`HistorySource`] before any HTML
//! is sent, loaded over REST (`crate::api_client`) after a client-side navigation.

use uuid::Uuid;

use crate::history::AgentHistory;
#[cfg(feature = "ssr")]
use crate::history::HistorySourceHandle;
use crate::protocol::Agent;

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
                #[cfg(all(feature = "hydrate", not(feature = "ssr")))]
                {
                    crate::api_client::load_history(agent_id, follow_current).await
                }
                #[cfg(not(any(feature = "ssr", feature = "hydrate")))]
                {
                    Err::<AgentHistory, String>(format!(
                        "history of {agent_id} ({follow_current}) loads only on the server or in \
                         the browser"
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
