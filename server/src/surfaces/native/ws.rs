//! `GET /v1/ws`: the WebSocket surface.
//!
//! A connection carries any number of subscriptions (up to a bound). Each subscription is a task
//! running [`subscription::follow`] into the connection's bounded outbound queue; one task writes
//! that queue to the socket. A slow socket therefore slows only its own subscriptions, which then
//! lag at the hub and catch up from the store; it never slows the writer or other clients.
//! The socket handling is generic over `Sink`/`Stream` so tests can drive it with channels.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use app::protocol::{ClientMessage, ServerMessage};
use axum::extract::ws::{close_code, CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::{Sink, SinkExt, Stream, StreamExt};
use serde::Deserialize;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use uuid::Uuid;

use super::follow::spawn_follow;
use crate::agent::approval::ApprovalDecision;
use crate::agent::cancel::request_cancel;
use crate::agent::start::Starter;
use crate::agent::RunOptions;
use crate::delivery::subscription::{self, Form, Outbound};
use crate::http::auth::Access;
use crate::http::caller::Caller;
use crate::http::error::ApiError;
use crate::http::params::{parse_agent_id, CountQuery};
use crate::http::token::Scope;
use crate::metrics::Metrics;
use crate::store::ClusterStore;
use crate::surfaces::Feeds;
use subscribe::reply_error;

mod subscribe;

/// The read buffer each connection allocates up front. Client frames are small commands; the
/// library's default (128 KiB) made an idle socket cost ~140 KB (`examples/bench/`).
pub const WS_READ_BUFFER_BYTES: usize = 4 * 1024;
/// Outgoing bytes gathered before they are written to the socket.
pub const WS_WRITE_BUFFER_BYTES: usize = 8 * 1024;
/// Outgoing bytes one socket may hold when writes are failing; past it the socket errors.
pub const WS_WRITE_BUFFER_BYTES_MAX: usize = 4 * 1024 * 1024;
/// The close code of a socket whose scoped token expired (an application code, 4000–4999; 4401
/// as in HTTP's 401): reconnect with a fresh token.
pub const WS_CLOSE_TOKEN_EXPIRED: u16 = 4401;

/// `GET /v1/ws?subscribe={agent_id}&since=N&coalesce=true`: the socket opens already subscribed,
/// as if its first message were that `subscribe` — the `subscribed` frame comes back with the
/// handshake, a round trip sooner than a message sent once the socket is open (the live view's
/// first connection on a slow link). Every parameter is optional; without `subscribe`, neither
/// of the others may be given.
#[derive(Debug, Deserialize)]
pub struct OpenQuery {
    subscribe: Option<String>,
    #[serde(flatten)]
    cursor: CountQuery,
}

impl OpenQuery {
    /// The subscription the query asks for, if any; a bad value is a 400 that names it.
    fn subscription(&self) -> Result<Option<ClientMessage>, ApiError> {
        let since = self.cursor.since_value()?;
        let coalesce = self.cursor.coalesce_value()?;
        let Some(agent_id) = self.subscribe.as_deref() else {
            if since.is_some() || coalesce {
                return Err(ApiError::bad_request(
                    "invalid_query",
                    "since= and coalesce= open a subscription only with subscribe={agent_id}",
                ));
            }
            return Ok(None);
        };
        let agent_id = parse_agent_id(agent_id)?;
        Ok(Some(ClientMessage::Subscribe { agent_id, since: since.unwrap_or(0), coalesce }))
    }
}

// An axum handler: each argument is an extractor.
#[allow(clippy::too_many_arguments)]
pub async fn upgrade(
    State(feeds): State<Feeds>,
    State(access): State<Access>,
    State(WsConnections(connections)): State<WsConnections>,
    State(starter): State<Starter>,
    caller: Caller,
    held: Option<axum::Extension<crate::http::subjects::HeldSlot>>,
    headers: axum::http::HeaderMap,
    Query(query): Query<OpenQuery>,
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
    let first = match query.subscription() {
        Ok(first) => first,
        Err(error) => return error.into_response(),
    };
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
        // Frames too: a message is checked once whole, and without this a single frame of up
        // to 16 MiB would be buffered before that check.
        .max_message_size(feeds.limits.ws_message_bytes_max)
        .max_frame_size(feeds.limits.ws_message_bytes_max)
        .read_buffer_size(WS_READ_BUFFER_BYTES)
        .write_buffer_size(WS_WRITE_BUFFER_BYTES)
        .max_write_buffer_size(WS_WRITE_BUFFER_BYTES_MAX)
        .on_upgrade(move |socket: WebSocket| async move {
            let (sink, stream) = socket.split();
            let cluster = starter.cluster.clone();
            serve_socket(feeds, starter, cluster, caller, first, sink, stream).await;
            // The connection's slots (the server's, and its token subject's) go with it.
            drop((permit, held));
        })
}

/// Runs one connection until the client leaves, the server shuts down or (a scoped token) the
/// token expires. `first` is handled before anything is read: a subscription the URL asked for.
pub async fn serve_socket<W, R>(
    feeds: Feeds,
    starter: Starter,
    cluster: Option<Arc<dyn ClusterStore>>,
    caller: Caller,
    first: Option<ClientMessage>,
    sink: W,
    mut stream: R,
) where
    W: Sink<Message> + Unpin + Send + 'static,
    R: Stream<Item = Result<Message, axum::Error>> + Unpin + Send + 'static,
{
    let (out, outbound) = mpsc::channel::<Outbound>(feeds.limits.subscriber_outbound_frames_max);
    let (close_sender, close_frame) = oneshot::channel::<CloseFrame>();
    let ping_every = Duration::from_millis(feeds.limits.ws_ping_interval_ms);
    let socket_writer =
        tokio::spawn(write_socket(sink, outbound, close_frame, ping_every, feeds.metrics.clone()));
    let idle_max = Duration::from_millis(feeds.limits.ws_idle_timeout_ms);
    let mut idle_deadline = tokio::time::Instant::now() + idle_max;
    let message_bytes_max = feeds.limits.ws_message_bytes_max;
    let mut close = None;
    let shutdown = feeds.shutdown.clone();
    // A scoped token's socket closes when the token expires; the client reconnects with a
    // fresh one and subscribes from its cursors.
    let expiry = tokio::time::sleep(match caller.expires_at() {
        Some(expires_at) => crate::http::auth::until_unix(expires_at),
        None => Duration::from_secs(u32::MAX.into()),
    });
    tokio::pin!(expiry);
    let mut connection =
        Connection { feeds, starter, cluster, caller, out, subscriptions: HashMap::new() };
    if let Some(message) = first {
        connection.handle(message).await;
    }
    loop {
        let frame = tokio::select! {
            _ = &mut expiry => {
                close = Some(CloseFrame {
                    code: WS_CLOSE_TOKEN_EXPIRED,
                    reason: "token_expired: reconnect with a fresh token".into(),
                });
                break;
            }
            _ = shutdown.cancelled() => {
                close = Some(CloseFrame {
                    code: close_code::AWAY,
                    reason: "the server is shutting down".into(),
                });
                break;
            }
            _ = tokio::time::sleep_until(idle_deadline) => {
                // Pinged, and nothing came back: the peer is gone without closing.
                close = Some(CloseFrame {
                    code: close_code::AWAY,
                    reason: format!("nothing received for {} ms", idle_max.as_millis()).into(),
                });
                break;
            }
            frame = stream.next() => frame,
        };
        idle_deadline = tokio::time::Instant::now() + idle_max;
        let text = match frame {
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(Message::Binary(_))) => {
                connection
                    .reply_error("unsupported_frame", "send JSON text frames, not binary", None)
                    .await;
                continue;
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Err(error)) => {
                // tungstenite's words for a message over `max_message_size`: the client hears
                // why (1009) instead of a bare close.
                if error.to_string().contains("Message too long") {
                    close = Some(CloseFrame {
                        code: close_code::SIZE,
                        reason: format!("a message over {message_bytes_max} bytes").into(),
                    });
                }
                break;
            }
            Some(Ok(Message::Close(_))) | None => break,
        };
        if let Some(message) = connection.read(text.as_str()).await {
            connection.handle(message).await;
        }
    }
    let Connection { out, subscriptions, .. } = connection;
    if let Some(frame) = close {
        let _ = close_sender.send(frame);
    }
    for (_, task) in subscriptions {
        task.abort();
    }
    drop(out);
    let _ = socket_writer.await;
}

/// Writes what the connection's subscriptions queue to the socket. Whatever queued up while the
/// last frame was being written is this socket's backlog: it is taken together, so
/// subscriptions that asked for it are coalesced.
async fn write_socket<W>(
    mut sink: W,
    mut outbound: mpsc::Receiver<Outbound>,
    mut close_frame: oneshot::Receiver<CloseFrame>,
    ping_every: Duration,
    metrics: Arc<Metrics>,
) where
    W: Sink<Message> + Unpin + Send + 'static,
{
    let sent = metrics.sent_on("websocket");
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + ping_every, ping_every);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    'writing: loop {
        let message = tokio::select! {
            message = outbound.recv() => match message {
                Some(message) => message,
                None => break 'writing,
            },
            _ = ping.tick() => {
                if sink.send(Message::Ping(Default::default())).await.is_err() {
                    break 'writing;
                }
                continue;
            }
        };
        let mut waiting = vec![message];
        while waiting.len() < subscription::OUTBOUND_DRAIN_MESSAGES_MAX {
            match outbound.try_recv() {
                Ok(message) => waiting.push(message),
                Err(_) => break,
            }
        }
        for message in subscription::coalesce_waiting(waiting) {
            let frame = message.into_frame();
            sent.frame(frame.len());
            if sink.send(Message::Text(frame.into())).await.is_err() {
                break 'writing;
            }
        }
    }
    if let Ok(frame) = close_frame.try_recv() {
        let _ = sink.send(Message::Close(Some(frame))).await;
    }
    let _ = sink.close().await;
}

/// One connection's reading side: its subscriptions and where their frames go.
struct Connection {
    feeds: Feeds,
    /// Runs: cancelled through it, and started by an approval's answer.
    starter: Starter,
    /// With several servers: where a cancel for a run of another server goes.
    cluster: Option<Arc<dyn ClusterStore>>,
    /// Who opened the socket: each subscription, cancel and answer is checked against it.
    caller: Caller,
    out: mpsc::Sender<Outbound>,
    subscriptions: HashMap<Uuid, JoinHandle<()>>,
}

impl Connection {
    /// The client's message, or `None` after telling the client what was wrong with it.
    async fn read(&self, text: &str) -> Option<ClientMessage> {
        match serde_json::from_str::<ClientMessage>(text) {
            Ok(message) => Some(message),
            Err(error) => {
                let code = if serde_json::from_str::<serde_json::Value>(text).is_ok() {
                    "invalid_message"
                } else {
                    "malformed_json"
                };
                self.reply_error(code, &format!("cannot read that message: {error}"), None).await;
                None
            }
        }
    }

    /// `Ok` when the socket's caller may do `scope` on `agent_id`; else the refusal's frame was
    /// sent (the same codes as the REST API's: 403 `insufficient_scope`, 404 `unknown_agent`).
    async fn allowed(&self, agent_id: Uuid, scope: Scope) -> bool {
        let checked = match self.caller.require(scope) {
            Ok(()) => self.caller.reach_id(self.feeds.store.as_ref(), agent_id).await.map(drop),
            Err(error) => Err(error),
        };
        match checked {
            Ok(()) => true,
            Err(error) => {
                self.reply_error(error.code, &error.message, Some(agent_id)).await;
                false
            }
        }
    }

    async fn handle(&mut self, message: ClientMessage) {
        self.subscriptions.retain(|_, task| !task.is_finished());
        let needs = match &message {
            ClientMessage::Subscribe { agent_id, .. } => Some((*agent_id, Scope::Read)),
            ClientMessage::Cancel { agent_id, .. } => Some((*agent_id, Scope::Write)),
            ClientMessage::Approve { agent_id, .. } => Some((*agent_id, Scope::Approve)),
            ClientMessage::ToolResult { agent_id, .. } => Some((*agent_id, Scope::Write)),
            ClientMessage::Unsubscribe { .. } | ClientMessage::Ping { .. } => None,
        };
        if let Some((agent_id, scope)) = needs {
            if !self.allowed(agent_id, scope).await {
                return;
            }
        }
        let reply = match message {
            ClientMessage::Subscribe { agent_id, since, coalesce } => {
                self.subscribe(agent_id, since, Form::Json { coalesce }).await;
                return;
            }
            ClientMessage::Unsubscribe { agent_id } => {
                if let Some(task) = self.subscriptions.remove(&agent_id) {
                    task.abort();
                }
                ServerMessage::Unsubscribed { agent_id }
            }
            ClientMessage::Cancel { agent_id, run_ids } => {
                // The outcome (`run_cancelled`) arrives through the log like everything else,
                // from whichever server executes the run.
                match request_cancel(
                    &self.starter.runs,
                    self.cluster.as_deref(),
                    agent_id,
                    run_ids.as_deref(),
                )
                .await
                {
                    Ok(requested) => ServerMessage::CancelRequested {
                        agent_id,
                        run_ids: requested
                            .map(|requested| requested.run_id())
                            .into_iter()
                            .collect(),
                    },
                    Err(error) => ServerMessage::Error {
                        code: "store_unavailable".to_owned(),
                        message: format!("the cancel could not be sent: {error}"),
                        agent_id: Some(agent_id),
                    },
                }
            }
            ClientMessage::Ping { nonce } => ServerMessage::Pong { nonce },
            ClientMessage::Approve { agent_id, call_id, approve, reason } => {
                let decision = ApprovalDecision {
                    tool_call_id: call_id.clone(),
                    approve,
                    reason,
                    output: None,
                };
                self.answer(agent_id, call_id, decision).await
            }
            ClientMessage::ToolResult { agent_id, call_id, output, error } => match (output, error)
            {
                (Some(output), None) => {
                    let decision = ApprovalDecision::returned(call_id.clone(), Ok(output));
                    self.answer(agent_id, call_id, decision).await
                }
                (None, Some(error)) => {
                    let decision = ApprovalDecision::returned(call_id.clone(), Err(error));
                    self.answer(agent_id, call_id, decision).await
                }
                _ => ServerMessage::Error {
                    code: "invalid_body".to_owned(),
                    message: "give the call's output or its error (one of them)".to_owned(),
                    agent_id: Some(agent_id),
                },
            },
        };
        let _ = self.out.send(Outbound::Message(reply)).await;
    }

    /// Takes an answer to a request of `agent_id` (a person's, or a client tool's result).
    async fn answer(
        &self,
        agent_id: Uuid,
        call_id: String,
        decision: ApprovalDecision,
    ) -> ServerMessage {
        match self.starter.answer_approval(agent_id, decision, RunOptions::default()).await {
            Ok(started) => {
                ServerMessage::ApprovalAccepted { agent_id, call_id, run_id: started.run_id }
            }
            Err(error) => {
                let error = ApiError::from(error);
                ServerMessage::Error {
                    code: error.code.to_owned(),
                    message: error.message,
                    agent_id: Some(agent_id),
                }
            }
        }
    }

    async fn subscribe(&mut self, agent_id: Uuid, since: u64, form: Form) {
        let limit = self.feeds.limits.ws_subscriptions_per_connection_max;
        if let Some(previous) = self.subscriptions.remove(&agent_id) {
            // A new subscribe for the same agent replaces the old one (a new cursor).
            previous.abort();
        } else if self.subscriptions.len() >= limit {
            self.reply_error(
                "too_many_subscriptions",
                &format!("a connection holds at most {limit} subscriptions"),
                Some(agent_id),
            )
            .await;
            return;
        }
        let task =
            spawn_follow(self.feeds.clone(), "websocket", agent_id, since, form, self.out.clone());
        self.subscriptions.insert(agent_id, task);
    }

    async fn reply_error(&self, code: &str, message: &str, agent_id: Option<Uuid>) {
        reply_error(&self.out, code, message, agent_id).await;
    }
}

/// The WebSocket connections that may still open (`AGENTSTREAM_WS_CONNECTIONS_MAX` permits).
#[derive(Clone)]
pub struct WsConnections(pub std::sync::Arc<tokio::sync::Semaphore>);
