//! `use_agent_messages`: one agent's log as reactive signals.
//!
//! Loads history over REST, subscribes on the WebSocket from the timeline's cursor, folds every
//! batch into the shared [`Timeline`], fills gaps with `GET …/events?since=`, and reconnects with
//! bounded exponential backoff and jitter. The network side only exists in the browser build: on
//! the server the signals keep their initial values and no socket is ever opened.

use leptos::prelude::*;
use uuid::Uuid;

use crate::timeline::Timeline;

/// What the live connection is doing, for the connection indicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectionState {
    /// First load of history and first subscription.
    Connecting,
    /// Subscribed; events arrive as they are committed.
    Live,
    /// The socket closed; waiting out the backoff before the next attempt.
    Reconnecting,
    /// Reading missing events over REST.
    FillingGap,
}

impl ConnectionState {
    pub fn label(self) -> &'static str {
        match self {
            ConnectionState::Connecting => "connecting",
            ConnectionState::Live => "live",
            ConnectionState::Reconnecting => "reconnecting",
            ConnectionState::FillingGap => "filling gap",
        }
    }
}

/// The signals of one agent's log.
#[derive(Clone, Copy)]
pub struct AgentMessages {
    pub timeline: ReadSignal<Timeline>,
    pub connection: ReadSignal<ConnectionState>,
    /// The last error worth showing (failed load, refused subscription), if any.
    pub error: ReadSignal<Option<String>>,
}

/// Follows the log of `agent_id` for as long as the calling component lives.
pub fn use_agent_messages(agent_id: Uuid) -> AgentMessages {
    let signals = Signals {
        timeline: RwSignal::new(Timeline::new()),
        connection: RwSignal::new(ConnectionState::Connecting),
        error: RwSignal::new(None::<String>),
    };

    #[cfg(feature = "hydrate")]
    {
        let (stop_sender, stop_receiver) = futures::channel::oneshot::channel::<()>();
        let stop_sender = std::sync::Mutex::new(Some(stop_sender));
        on_cleanup(move || {
            if let Some(sender) = stop_sender.lock().ok().and_then(|mut slot| slot.take()) {
                let _ = sender.send(());
            }
        });
        leptos::task::spawn_local(client::follow(agent_id, signals, stop_receiver));
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = agent_id;

    AgentMessages {
        timeline: signals.timeline.read_only(),
        connection: signals.connection.read_only(),
        error: signals.error.read_only(),
    }
}

/// The writable side of [`AgentMessages`], owned by the connection task.
#[derive(Clone, Copy)]
struct Signals {
    timeline: RwSignal<Timeline>,
    connection: RwSignal<ConnectionState>,
    error: RwSignal<Option<String>>,
}

#[cfg(feature = "hydrate")]
mod client {
    use futures::channel::oneshot;
    use futures::future::{select, Either};
    use futures::{SinkExt, StreamExt};
    use gloo_net::websocket::{futures::WebSocket, Message};
    use leptos::prelude::*;
    use uuid::Uuid;

    use super::{ConnectionState, Signals};
    use crate::api_client;
    use crate::protocol::{ClientMessage, ServerMessage};
    use crate::timeline::Timeline;

    /// First retry waits about this long; each further one doubles it.
    const RECONNECT_DELAY_INITIAL_MS: u32 = 250;
    /// No retry waits longer than this, however many attempts failed.
    const RECONNECT_DELAY_MAX_MS: u32 = 10_000;
    /// Events asked for per REST page while catching up or filling a gap.
    const FILL_PAGE_EVENTS: u32 = 1000;

    pub(super) async fn follow(agent_id: Uuid, signals: Signals, mut stop: oneshot::Receiver<()>) {
        let mut failed_attempts: u32 = 0;
        loop {
            signals.connection.set(if failed_attempts == 0 {
                ConnectionState::Connecting
            } else {
                ConnectionState::Reconnecting
            });
            match session(agent_id, signals, &mut stop).await {
                SessionEnd::Stopped => return,
                SessionEnd::Failed(message) => {
                    signals.error.set(Some(message));
                    failed_attempts = failed_attempts.saturating_add(1);
                }
                SessionEnd::Closed => failed_attempts = 1,
            }
            signals.connection.set(ConnectionState::Reconnecting);
            let delay_ms = backoff_ms(failed_attempts);
            let sleep = gloo_timers::future::TimeoutFuture::new(delay_ms);
            if let Either::Right(_) = select(sleep, &mut stop).await {
                return;
            }
        }
    }

    enum SessionEnd {
        Stopped,
        Closed,
        Failed(String),
    }

    /// Exponential backoff with full jitter, capped.
    fn backoff_ms(failed_attempts: u32) -> u32 {
        let exponent = failed_attempts.saturating_sub(1).min(16);
        let ceiling = RECONNECT_DELAY_INITIAL_MS
            .saturating_mul(1 << exponent)
            .min(RECONNECT_DELAY_MAX_MS);
        let jitter = js_sys::Math::random();
        (ceiling as f64 * (0.5 + jitter / 2.0)) as u32
    }

    /// Reads every event after the timeline's cursor over REST into the timeline.
    async fn fill(agent_id: Uuid, timeline: RwSignal<Timeline>) -> Result<(), String> {
        loop {
            let since = timeline.with_untracked(Timeline::last_seq);
            let page = api_client::events_page(agent_id, since, FILL_PAGE_EVENTS).await?;
            let has_more = page.has_more && !page.events.is_empty();
            timeline.update(|timeline| {
                timeline.apply_all(page.events);
            });
            if !has_more {
                return Ok(());
            }
        }
    }

    async fn session(
        agent_id: Uuid,
        signals: Signals,
        stop: &mut oneshot::Receiver<()>,
    ) -> SessionEnd {
        if let Err(message) = fill(agent_id, signals.timeline).await {
            return SessionEnd::Failed(message);
        }
        let socket = match WebSocket::open(&api_client::websocket_url()) {
            Ok(socket) => socket,
            Err(error) => return SessionEnd::Failed(format!("cannot open the socket: {error}")),
        };
        let (mut sender, mut receiver) = socket.split();
        let since = signals.timeline.with_untracked(Timeline::last_seq);
        let subscribe = ClientMessage::Subscribe { agent_id, since };
        let text = serde_json::to_string(&subscribe).expect("client messages serialize");
        if let Err(error) = sender.send(Message::Text(text)).await {
            return SessionEnd::Failed(format!("cannot subscribe: {error}"));
        }
        loop {
            let frame = match select(receiver.next(), &mut *stop).await {
                Either::Left((frame, _)) => frame,
                Either::Right(_) => return SessionEnd::Stopped,
            };
            let text = match frame {
                Some(Ok(Message::Text(text))) => text,
                Some(Ok(Message::Bytes(_))) => continue,
                Some(Err(_)) | None => return SessionEnd::Closed,
            };
            let Ok(message) = serde_json::from_str::<ServerMessage>(&text) else {
                continue;
            };
            match message {
                ServerMessage::Subscribed { .. } => {
                    signals.error.set(None);
                    signals.connection.set(ConnectionState::Live);
                }
                ServerMessage::Events { events, .. } => {
                    let mut missing = None;
                    signals.timeline.update(|timeline| {
                        timeline.apply_all(events);
                        missing = timeline.missing();
                    });
                    if missing.is_some() {
                        signals.connection.set(ConnectionState::FillingGap);
                        if let Err(message) = fill(agent_id, signals.timeline).await {
                            return SessionEnd::Failed(message);
                        }
                        signals.connection.set(ConnectionState::Live);
                    }
                }
                ServerMessage::Error { message, .. } => signals.error.set(Some(message)),
                ServerMessage::Lagged { .. }
                | ServerMessage::Unsubscribed { .. }
                | ServerMessage::Pong { .. } => {}
            }
        }
    }
}
