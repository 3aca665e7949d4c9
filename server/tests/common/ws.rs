//! A WebSocket client of the native protocol, for tests.

use app::protocol::{ClientMessage, ServerMessage};
use app::AgentEvent;
use futures::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use uuid::Uuid;

use super::WAIT_MAX;

pub struct WsClient {
    pub stream: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl WsClient {
    pub async fn send(&mut self, message: &ClientMessage) {
        let text = serde_json::to_string(message).unwrap();
        self.stream.send(Message::Text(text.into())).await.unwrap();
    }

    pub async fn send_raw(&mut self, message: Message) {
        self.stream.send(message).await.unwrap();
    }

    pub async fn subscribe(&mut self, agent_id: Uuid, since: u64) {
        self.subscribe_with(agent_id, since, false).await;
    }

    /// Subscribes as the live view does, asking for runs of appends merged (`coalesce`).
    pub async fn subscribe_with(&mut self, agent_id: Uuid, since: u64, coalesce: bool) {
        self.send(&ClientMessage::Subscribe { agent_id, since, coalesce }).await;
    }

    /// Subscribes and reads the `subscribed` answer; the head seq it names.
    pub async fn subscribed(&mut self, agent_id: Uuid, since: u64, coalesce: bool) -> u64 {
        self.subscribe_with(agent_id, since, coalesce).await;
        match self.receive().await {
            ServerMessage::Subscribed { head_seq, .. } => head_seq,
            other => panic!("expected subscribed, got {other:?}"),
        }
    }

    /// The next server message; fails the test after [`WAIT_MAX`].
    pub async fn receive(&mut self) -> ServerMessage {
        let text = self.receive_text().await;
        serde_json::from_str(&text)
            .unwrap_or_else(|error| panic!("unreadable frame {text}: {error}"))
    }

    /// The next text frame as sent, unparsed; fails the test after [`WAIT_MAX`].
    pub async fn receive_text(&mut self) -> String {
        loop {
            let frame = tokio::time::timeout(WAIT_MAX, self.stream.next())
                .await
                .expect("the server sent nothing in time")
                .expect("the socket closed")
                .expect("the socket failed");
            match frame {
                Message::Text(text) => return text.to_string(),
                Message::Ping(_) | Message::Pong(_) => continue,
                other => panic!("unexpected frame {other:?}"),
            }
        }
    }

    /// Receives until a run-end event arrives; returns every event received and whether the
    /// server said the subscriber lagged.
    pub async fn receive_until_run_end(&mut self) -> (Vec<AgentEvent>, bool) {
        let mut events = Vec::new();
        let mut lagged = false;
        loop {
            match self.receive().await {
                ServerMessage::Events { events: batch, .. } => {
                    let ended = batch.iter().any(|event| event.kind.is_run_end());
                    events.extend(batch);
                    if ended {
                        return (events, lagged);
                    }
                }
                ServerMessage::Lagged { .. } => lagged = true,
                ServerMessage::Subscribed { .. } => {}
                other => panic!("unexpected {other:?}"),
            }
        }
    }
}
