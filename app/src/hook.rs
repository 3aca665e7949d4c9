//! `use_agent_messages`: one agent's log as reactive signals.
//!
//! Starts from history the server already folded into the page (or from nothing), opens a
//! WebSocket subscribed from the timeline's cursor (the server's catch-up, then live events;
//! after a reconnect, what it missed is read over REST first, pages at once), folds every batch
//! into the shared [`Timeline`], fills holes with `GET …/events?since=`, drops duplicates, and
//! reconnects with
//! bounded exponential backoff and jitter. Incoming events are buffered and folded at most once
//! per animation frame, so the DOM updates at most once per frame however fast tokens arrive.
//! The network side only exists in the browser build: during server rendering the signals keep
//! their initial values and no socket is ever opened.

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
    /// The socket closed or the network is gone; waiting out the backoff before the next attempt.
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

/// Follows the log of `agent_id` from its beginning, for as long as the calling component lives.
pub fn use_agent_messages(agent_id: Uuid) -> AgentMessages {
    use_agent_messages_from(agent_id, Timeline::new())
}

/// Follows the log of `agent_id` from `initial` (history the server already folded), for as long
/// as the calling component lives.
pub fn use_agent_messages_from(agent_id: Uuid, initial: Timeline) -> AgentMessages {
    let signals = Signals {
        timeline: RwSignal::new(initial),
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
    use std::cell::{Cell, RefCell};
    use std::rc::Rc;

    use futures::channel::{mpsc, oneshot};
    use futures::future::{select, Either};
    use futures::StreamExt;
    use gloo_net::websocket::{futures::WebSocket, Message};
    use leptos::prelude::*;
    use uuid::Uuid;
    use wasm_bindgen::closure::Closure;
    use wasm_bindgen::JsCast;

    use super::{ConnectionState, Signals};
    use crate::api_client;
    use crate::event::AgentEvent;
    use crate::protocol::frame::LogFrame;
    use crate::timeline::Timeline;

    /// First retry waits about this long; each further one doubles it.
    const RECONNECT_DELAY_INITIAL_MS: u32 = 250;
    /// No retry waits longer than this, however many attempts failed.
    const RECONNECT_DELAY_MAX_MS: u32 = 10_000;
    /// Events asked for per REST page while filling a hole.
    const FILL_PAGE_EVENTS: u32 = 1000;
    /// Pages read at once while filling a hole: seqs have no holes in the log, so once the first
    /// page told the head, the cursor of every later page is known without waiting for the one
    /// before.
    const FILL_PAGES_IN_FLIGHT_MAX: usize = 4;
    /// Events buffered for the next animation frame at most. Hidden tabs get no frames; past this
    /// the buffer is folded at once, so it never grows without bound.
    const FRAME_BUFFER_EVENTS_MAX: usize = 5000;

    /// Events waiting for the next animation frame.
    #[derive(Clone)]
    struct FrameBuffer {
        events: Rc<RefCell<Vec<AgentEvent>>>,
        scheduled: Rc<Cell<bool>>,
        timeline: RwSignal<Timeline>,
    }

    impl FrameBuffer {
        fn new(timeline: RwSignal<Timeline>) -> FrameBuffer {
            FrameBuffer {
                events: Rc::new(RefCell::new(Vec::new())),
                scheduled: Rc::new(Cell::new(false)),
                timeline,
            }
        }

        fn push(&self, events: Vec<AgentEvent>) {
            let buffered = {
                let mut buffer = self.events.borrow_mut();
                buffer.extend(events);
                buffer.len()
            };
            if buffered >= FRAME_BUFFER_EVENTS_MAX {
                self.flush();
            } else if !self.scheduled.replace(true) {
                let buffer = self.clone();
                // Without a frame to wait for (the browser refused one), fold them now.
                if request_animation_frame(move || buffer.flush()).is_err() {
                    self.flush();
                }
            }
        }

        /// Folds everything buffered in one signal update: one DOM update.
        fn flush(&self) {
            self.scheduled.set(false);
            let events = std::mem::take(&mut *self.events.borrow_mut());
            if events.is_empty() {
                return;
            }
            self.timeline.update(|timeline| {
                timeline.apply_all(events);
            });
        }
    }

    /// Network changes waiting for the connection loop. Only the newest matters; when the loop is
    /// busy, further changes are dropped rather than queued without bound.
    const NETWORK_CHANGES_QUEUE_MAX: usize = 4;

    /// The `online`/`offline` listeners of one live view; removed when it goes away.
    struct NetworkListeners {
        callbacks: Vec<(&'static str, Listener)>,
    }

    /// A browser event listener kept alive for as long as it is registered.
    type Listener = Closure<dyn FnMut()>;

    impl Drop for NetworkListeners {
        fn drop(&mut self) {
            if let Some(window) = web_sys::window() {
                for (name, callback) in &self.callbacks {
                    let _ = window.remove_event_listener_with_callback(
                        name,
                        callback.as_ref().unchecked_ref(),
                    );
                }
            }
        }
    }

    /// Wakes the connection loop when the browser goes offline or comes back online.
    fn network_changes() -> (mpsc::Receiver<bool>, NetworkListeners) {
        let (sender, receiver) = mpsc::channel(NETWORK_CHANGES_QUEUE_MAX);
        let mut listeners = NetworkListeners { callbacks: Vec::new() };
        if let Some(window) = web_sys::window() {
            for (name, online) in [("online", true), ("offline", false)] {
                let mut sender = sender.clone();
                let callback = Closure::<dyn FnMut()>::new(move || {
                    let _ = sender.try_send(online);
                });
                let _ = window
                    .add_event_listener_with_callback(name, callback.as_ref().unchecked_ref());
                listeners.callbacks.push((name, callback));
            }
        }
        (receiver, listeners)
    }

    fn browser_online() -> bool {
        web_sys::window().map(|window| window.navigator().on_line()).unwrap_or(true)
    }

    pub(super) async fn follow(agent_id: Uuid, signals: Signals, mut stop: oneshot::Receiver<()>) {
        let buffer = FrameBuffer::new(signals.timeline);
        // Dropped when this function returns: the view is gone, its listeners go too.
        let (mut network, _listeners) = network_changes();
        let mut failed_attempts: u32 = 0;
        let mut reconnect = false;
        loop {
            if browser_online() {
                signals.connection.set(if failed_attempts == 0 {
                    ConnectionState::Connecting
                } else {
                    ConnectionState::Reconnecting
                });
                let ended = session(agent_id, signals, &buffer, &mut stop, &mut network, reconnect);
                reconnect = true;
                match ended.await {
                    SessionEnd::Stopped => return,
                    SessionEnd::Failed(message) => {
                        signals.error.set(Some(message));
                        failed_attempts = failed_attempts.saturating_add(1);
                    }
                    SessionEnd::Closed => failed_attempts = 1,
                }
            }
            signals.connection.set(ConnectionState::Reconnecting);
            let sleep = gloo_timers::future::TimeoutFuture::new(backoff_ms(failed_attempts));
            // Coming back online cuts the wait short.
            let online = async {
                while let Some(online) = network.next().await {
                    if online {
                        return;
                    }
                }
                std::future::pending::<()>().await
            };
            let wake = select(Box::pin(sleep), Box::pin(online));
            if let Either::Right(_) = select(wake, &mut stop).await {
                return;
            }
        }
    }

    enum SessionEnd {
        Stopped,
        Closed,
        Failed(String),
    }

    /// Exponential backoff with jitter (between half and all of the step), capped.
    fn backoff_ms(failed_attempts: u32) -> u32 {
        let exponent = failed_attempts.saturating_sub(1).min(16);
        let ceiling =
            RECONNECT_DELAY_INITIAL_MS.saturating_mul(1 << exponent).min(RECONNECT_DELAY_MAX_MS);
        let jitter = js_sys::Math::random();
        (ceiling as f64 * (0.5 + jitter / 2.0)) as u32
    }

    /// Reads events after `after` over REST into the frame buffer, up to `until` (inclusive) or
    /// the head of the log. Returns the newest seq read. After the first page, the pages up to
    /// the head it reported are read [`FILL_PAGES_IN_FLIGHT_MAX`] at a time and buffered in
    /// order.
    async fn fill(
        agent_id: Uuid,
        buffer: &FrameBuffer,
        after: u64,
        until: Option<u64>,
    ) -> Result<u64, String> {
        let first = api_client::events_page(agent_id, after, FILL_PAGE_EVENTS).await?;
        let mut newest = first.events.last().map_or(after, |event| event.seq);
        let mut has_more = first.has_more && !first.events.is_empty();
        let mut head = first.head_seq;
        buffer.push(first.events);
        loop {
            if !has_more || until.is_some_and(|until| newest >= until) {
                return Ok(newest);
            }
            let end = until.map_or(head, |until| until.min(head)).max(newest + 1);
            let cursors: Vec<u64> = (newest..end).step_by(FILL_PAGE_EVENTS as usize).collect();
            let mut pages = futures::stream::iter(cursors)
                .map(|since| api_client::events_page(agent_id, since, FILL_PAGE_EVENTS))
                .buffered(FILL_PAGES_IN_FLIGHT_MAX);
            while let Some(page) = pages.next().await {
                let page = page?;
                if let Some(last) = page.events.last() {
                    newest = newest.max(last.seq);
                }
                has_more = page.has_more && !page.events.is_empty();
                head = head.max(page.head_seq);
                buffer.push(page.events);
            }
        }
    }

    async fn session(
        agent_id: Uuid,
        signals: Signals,
        buffer: &FrameBuffer,
        stop: &mut oneshot::Receiver<()>,
        network: &mut mpsc::Receiver<bool>,
        reconnect: bool,
    ) -> SessionEnd {
        // Whatever is still buffered counts as received: fold it before choosing the cursor.
        buffer.flush();
        let mut newest_seen = signals.timeline.with_untracked(Timeline::last_seq);
        // After a reconnect the view may be far behind (a tab that slept, a long outage): that
        // is read over REST first, several pages at once. The first session's cursor is the
        // server-rendered page's, a moment old.
        if reconnect {
            newest_seen = match fill(agent_id, buffer, newest_seen, None).await {
                Ok(newest) => newest,
                Err(message) => return SessionEnd::Failed(message),
            };
        }
        // The socket's URL subscribes from the cursor (a live view merges what it fell behind
        // on: the server may merge runs of token appends, the timeline folds them): the server
        // answers `subscribed` with the handshake and sends the catch-up, then live events. A
        // `subscribe` message would wait for the socket to open, a round trip later (on a
        // 150 ms link the live view was live 150 ms later).
        let url = api_client::subscribed_socket_url(agent_id, newest_seen);
        let mut receiver = match WebSocket::open(&url) {
            Ok(socket) => socket,
            Err(error) => return SessionEnd::Failed(format!("cannot open the socket: {error}")),
        };
        loop {
            let frame = match select(select(receiver.next(), network.next()), &mut *stop).await {
                Either::Left((Either::Left((frame, _)), _)) => frame,
                Either::Left((Either::Right((Some(false), _)), _)) => {
                    // The browser says the network is gone: stop trusting this socket now
                    // rather than wait for a timeout.
                    return SessionEnd::Closed;
                }
                Either::Left((Either::Right(_), _)) => continue,
                Either::Right(_) => return SessionEnd::Stopped,
            };
            let text = match frame {
                Some(Ok(Message::Text(text))) => text,
                Some(Ok(Message::Bytes(_))) => continue,
                Some(Err(_)) | None => return SessionEnd::Closed,
            };
            let Ok(frame) = LogFrame::parse(&text) else {
                continue;
            };
            match frame {
                LogFrame::Subscribed { .. } => {
                    signals.error.set(None);
                    signals.connection.set(ConnectionState::Live);
                }
                LogFrame::Events(events) => {
                    let (Some(first_event), Some(last)) = (events.first(), events.last()) else {
                        continue;
                    };
                    let (first, last) = (first_event.first_seq(), last.seq);
                    if first > newest_seen + 1 {
                        // A hole before this batch: read it before folding the batch. When the
                        // batch opens with a merged event, read through its end too, so the fill
                        // never stops inside it (a merged event cannot be applied in part).
                        let until = if first_event.coalesced_from.is_some() {
                            first_event.seq
                        } else {
                            first - 1
                        };
                        signals.connection.set(ConnectionState::FillingGap);
                        match fill(agent_id, buffer, newest_seen, Some(until)).await {
                            Ok(_) => signals.connection.set(ConnectionState::Live),
                            Err(message) => return SessionEnd::Failed(message),
                        }
                    }
                    newest_seen = newest_seen.max(last);
                    buffer.push(events);
                }
                LogFrame::Error { message, .. } => signals.error.set(Some(message)),
                LogFrame::Other(_) => {}
            }
        }
    }
}
