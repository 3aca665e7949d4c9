//! The error frames a socket is sent.

use app::protocol::ServerMessage;
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::delivery::subscription::Outbound;

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
