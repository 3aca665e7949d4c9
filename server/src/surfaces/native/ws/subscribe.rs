//! A socket's subscriptions: each a task following one agent's log into the socket's outbound
//! queue, and the error frames a socket is sent.

use app::protocol::ServerMessage;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::delivery::subscription::{self, FollowError, Form, Outbound};
use crate::surfaces::Feeds;

pub(super) fn spawn_subscription(
    feeds: Feeds,
    agent_id: Uuid,
    since: u64,
    form: Form,
    out: mpsc::Sender<Outbound>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let _subscriber = feeds.metrics.subscriber("websocket");
        let result = subscription::follow(
            feeds.store.as_ref(),
            &feeds.hub,
            agent_id,
            since,
            form,
            &out,
        )
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

pub(super) async fn reply_error(
    out: &mpsc::Sender<Outbound>,
    code: &str,
    message: &str,
    agent_id: Option<Uuid>,
) {
    let _ = out
        .send(Outbound::Message(ServerMessage::Error {
            code: code.to_owned(),
            message: message.to_owned(),
            agent_id,
        }))
        .await;
}
