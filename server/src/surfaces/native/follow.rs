//! Following one agent's log into a subscriber's outbound queue: the task the WebSocket runs per
//! subscription and the SSE stream runs once.

use app::protocol::ServerMessage;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::delivery::subscription::{self, FollowError, Form, Outbound};
use crate::surfaces::Feeds;

/// A task that follows `agent_id`'s log from `since` into `out` for a subscriber of `surface`
/// (a label of the subscriber metric). A failure ends it with an error frame; a store's cause
/// is logged here and not sent (the client learns to subscribe again, not the database's words).
pub(super) fn spawn_follow(
    feeds: Feeds,
    surface: &'static str,
    agent_id: Uuid,
    since: u64,
    form: Form,
    out: mpsc::Sender<Outbound>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let _subscriber = feeds.metrics.subscriber(surface);
        let result =
            subscription::follow(feeds.store.as_ref(), &feeds.hub, agent_id, since, form, &out)
                .await;
        match result {
            Ok(()) | Err(FollowError::SubscriberGone) => {}
            Err(error) => {
                if let FollowError::Store(cause) = &error {
                    tracing::error!(%agent_id, %cause, "subscription failed");
                }
                let message = match &error {
                    FollowError::Store(_) => {
                        "the server failed to read this log; subscribe again".to_owned()
                    }
                    other => other.to_string(),
                };
                let _ = out
                    .send(Outbound::Message(ServerMessage::Error {
                        code: error.code().to_owned(),
                        message,
                        agent_id: Some(agent_id),
                    }))
                    .await;
            }
        }
    })
}
