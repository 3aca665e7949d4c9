//! `GET /v1/ws`: the WebSocket surface.
//!
//! A connection carries any number of subscriptions (up to a bound). Each subscription is a task
//! running [`subscription::follow`] into the connection's bounded outbound queue; one task writes
//! that queue to the socket. A slow socket therefore slows only its own subscriptions, which then
//! lag at the hub and catch up from the store; it never slows the writer or other clients.
//! The socket handling is generic over `Sink`/`Stream` so tests can drive it with channels.

use std::collections::HashMap;
use std::sync::Arc;

use app::protocol::{ClientMessage, ServerMessage};
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::{Sink, SinkExt, Stream, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::agent::Runs;
use crate::delivery::subscription::{self, FollowError, Form, Outbound};
use crate::http::error::ApiError;
use crate::state::{Access, Feeds, WsConnections};

/// Open WebSocket connections at most (by default; see `config::Limits`). Each costs a task, a queue and its subscriptions; past this
/// the upgrade is refused with 503 so the server stays responsive.
pub const WS_CONNECTIONS_MAX: usize = 1024;
/// The largest frame a client may send. Client messages are small commands; anything bigger is a
/// mistake or an attack.
pub const WS_MESSAGE_BYTES_MAX: usize = 64 * 1024;
/// The read buffer each connection allocates up front. Client frames are small commands; the
/// library's default (128 KiB) made an idle socket cost ~140 KB (`examples/bench.rs`).
pub const WS_READ_BUFFER_BYTES: usize = 4 * 1024;
/// Outgoing bytes gathered before they are written to the socket.
pub const WS_WRITE_BUFFER_BYTES: usize = 8 * 1024;
/// Outgoing bytes one socket may hold when writes are failing; past it the socket errors.
pub const WS_WRITE_BUFFER_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Subscriptions one connection may hold.
pub const WS_SUBSCRIPTIONS_PER_CONNECTION_MAX: usize = 64;
/// Frames queued for one socket. When full, the connection's subscriptions wait, lag at the hub,
/// and are caught up from the store: memory per slow client stays bounded.
pub const WS_OUTBOUND_FRAMES_MAX: usize = 64;

pub async fn upgrade(
    State(feeds): State<Feeds>,
    State(access): State<Access>,
    State(WsConnections(connections)): State<WsConnections>,
    State(runs): State<Arc<Runs>>,
    headers: axum::http::HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    if !crate::http::auth::origin_allowed(&headers, &access.allowed_origins) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            "this page's origin may not open a WebSocket here (see AGENTSTREAM_ALLOWED_ORIGINS)",
        )
        .into_response();
    }
    let Ok(permit) = connections.try_acquire_owned() else {
        return ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_connections",
            format!(
                "{} WebSocket connections are open; try again shortly",
                feeds.limits.ws_connections_max
            ),
        )
        .into_response();
    };
    upgrade
        .max_message_size(feeds.limits.ws_message_bytes_max)
        .read_buffer_size(WS_READ_BUFFER_BYTES)
        .write_buffer_size(WS_WRITE_BUFFER_BYTES)
        .max_write_buffer_size(WS_WRITE_BUFFER_BYTES_MAX)
        .on_upgrade(move |socket: WebSocket| async move {
            let (sink, stream) = socket.split();
            serve_socket(feeds, runs, sink, stream).await;
            drop(permit);
        })
}

/// Runs one connection until the client leaves or the server shuts down.
pub async fn serve_socket<W, R>(feeds: Feeds, runs: Arc<Runs>, mut sink: W, mut stream: R)
where
    W: Sink<Message> + Unpin + Send + 'static,
    R: Stream<Item = Result<Message, axum::Error>> + Unpin + Send + 'static,
{
    let (out, mut outbound) =
        mpsc::channel::<Outbound>(feeds.limits.subscriber_outbound_frames_max);
    let socket_writer = tokio::spawn(async move {
        'writing: while let Some(message) = outbound.recv().await {
            // Whatever queued up while the last frame was being written is this socket's
            // backlog: take it together, so subscriptions that asked for it are coalesced.
            let mut waiting = vec![message];
            while waiting.len() < subscription::OUTBOUND_DRAIN_MESSAGES_MAX {
                match outbound.try_recv() {
                    Ok(message) => waiting.push(message),
                    Err(_) => break,
                }
            }
            for message in subscription::coalesce_waiting(waiting) {
                if sink
                    .send(Message::Text(message.frame().into()))
                    .await
                    .is_err()
                {
                    break 'writing;
                }
            }
        }
        let _ = sink.close().await;
    });

    let mut subscriptions: HashMap<Uuid, JoinHandle<()>> = HashMap::new();
    loop {
        let frame = tokio::select! {
            _ = feeds.shutdown.cancelled() => break,
            frame = stream.next() => frame,
        };
        let text = match frame {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Binary(_))) => {
                reply_error(
                    &out,
                    "unsupported_frame",
                    "send JSON text frames, not binary",
                    None,
                )
                .await;
                continue;
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
        };
        let message = match serde_json::from_str::<ClientMessage>(text.as_str()) {
            Ok(message) => message,
            Err(error) => {
                let code = if serde_json::from_str::<serde_json::Value>(text.as_str()).is_ok() {
                    "invalid_message"
                } else {
                    "malformed_json"
                };
                reply_error(
                    &out,
                    code,
                    &format!("cannot read that message: {error}"),
                    None,
                )
                .await;
                continue;
            }
        };
        subscriptions.retain(|_, task| !task.is_finished());
        match message {
            ClientMessage::Subscribe {
                agent_id,
                since,
                coalesce,
            } => {
                if let Some(previous) = subscriptions.remove(&agent_id) {
                    // A new subscribe for the same agent replaces the old one (a new cursor).
                    previous.abort();
                } else if subscriptions.len() >= feeds.limits.ws_subscriptions_per_connection_max {
                    reply_error(
                        &out,
                        "too_many_subscriptions",
                        &format!(
                            "a connection holds at most {} subscriptions",
                            feeds.limits.ws_subscriptions_per_connection_max
                        ),
                        Some(agent_id),
                    )
                    .await;
                    continue;
                }
                let form = Form::Json { coalesce };
                let task = spawn_subscription(feeds.clone(), agent_id, since, form, out.clone());
                subscriptions.insert(agent_id, task);
            }
            ClientMessage::Unsubscribe { agent_id } => {
                if let Some(task) = subscriptions.remove(&agent_id) {
                    task.abort();
                }
                let _ = out
                    .send(Outbound::Message(ServerMessage::Unsubscribed { agent_id }))
                    .await;
            }
            ClientMessage::Cancel { agent_id, run_ids } => {
                // The outcome (`run_cancelled`) arrives through the log like everything else.
                let run_ids = runs
                    .cancel(agent_id, run_ids.as_deref())
                    .map(|cancelling| vec![cancelling.run_id])
                    .unwrap_or_default();
                let _ = out
                    .send(Outbound::Message(ServerMessage::CancelRequested {
                        agent_id,
                        run_ids,
                    }))
                    .await;
            }
            ClientMessage::Ping { nonce } => {
                let _ = out
                    .send(Outbound::Message(ServerMessage::Pong { nonce }))
                    .await;
            }
        }
    }
    for (_, task) in subscriptions {
        task.abort();
    }
    drop(out);
    let _ = socket_writer.await;
}

fn spawn_subscription(
    feeds: Feeds,
    agent_id: Uuid,
    since: u64,
    form: Form,
    out: mpsc::Sender<Outbound>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
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

async fn reply_error(
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
