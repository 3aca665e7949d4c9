//! A Letta stream: the feed that follows the run into the mapper, the SSE response that
//! interleaves pings and ends with `[DONE]`, and the guard that cancels a foreground run when its
//! client goes away.

use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream;
use serde_json::json;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::mapping::{Cut, LettaItem, LettaMapper};
use super::state::LettaState;
use crate::delivery::subscription::FollowError;
use crate::limits::LETTA_FEED_ITEMS_MAX;
use crate::surfaces::native::sse::SSE_KEEPALIVE_INTERVAL_MS;
use crate::surfaces::run_feed::ForegroundGuard;
use crate::surfaces::run_feed::RunCursor;

/// Follows run `run_id` in the log from `after_seq` and cuts it into Letta items with
/// `seq_id > starting_after`. The channel closes after the run's last item (its usage), or after
/// an error item when the log cannot be followed.
pub(super) fn feed(
    state: LettaState,
    agent_id: Uuid,
    run_id: Uuid,
    after_seq: u64,
    cut: Cut,
    starting_after: u64,
) -> mpsc::Receiver<Result<LettaItem, FollowError>> {
    let mut mapper = LettaMapper::new(cut);
    let at = RunCursor::new(agent_id, run_id, after_seq);
    let log = (state.store, state.hub);
    crate::surfaces::run_feed::feed(("letta", LETTA_FEED_ITEMS_MAX), log, at, move |event| {
        let mut items = mapper.push(event);
        items.retain(|item| item.seq_id() > starting_after);
        items
    })
}

pub(super) fn wanted(types: &Option<Vec<String>>, message_type: &str) -> bool {
    types.as_ref().is_none_or(|types| types.iter().any(|wanted| wanted == message_type))
}

/// What the client asked the stream to carry: pings, and which message types.
pub(super) struct Shape {
    pub(super) include_pings: bool,
    pub(super) types: Option<Vec<String>>,
}

/// What the SSE response is doing.
pub(super) struct Streaming {
    pub(super) items: mpsc::Receiver<Result<LettaItem, FollowError>>,
    pub(super) ping: Option<tokio::time::Interval>,
    pub(super) run_id: Uuid,
    pub(super) types: Option<Vec<String>>,
    pub(super) finished: bool,
    pub(super) guard: Option<ForegroundGuard>,
    pub(super) shutdown: tokio_util::sync::CancellationToken,
    /// When the caller's scoped token expires.
    pub(super) expiry: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    /// The stream's slot, given back when the response is dropped.
    pub(super) _slot: tokio::sync::OwnedSemaphorePermit,
}

impl Streaming {
    /// Ends the response for a reason of the server's (`error_type`), not the client's: the run
    /// goes on, and the error says `why` and where to pick the run up.
    fn left(&mut self, error_type: &str, why: &str) -> Event {
        self.finished = true;
        ForegroundGuard::disarm(&mut self.guard);
        let run_id = self.run_id;
        let body = json!({
            "message_type": "error_message",
            "error_type": error_type,
            "message": format!("{why} with POST /v1/runs/{run_id}/stream"),
            "run_id": run_id,
        });
        Event::default().event("error").data(body.to_string())
    }
}

/// The Letta SSE framing: bare `data: {json}` lines, `ping`s between them when asked, a named
/// `error` event if the log cannot be followed, and `data: [DONE]` at the end.
pub(super) fn sse_response(
    state: &LettaState,
    items: mpsc::Receiver<Result<LettaItem, FollowError>>,
    run_id: Uuid,
    shape: Shape,
    guard: Option<ForegroundGuard>,
    slot: tokio::sync::OwnedSemaphorePermit,
    expires_at: Option<i64>,
) -> Response {
    let Shape { include_pings, types } = shape;
    let expiry = expires_at
        .map(|expires_at| Box::pin(tokio::time::sleep(crate::http::auth::until_unix(expires_at))));
    let ping = include_pings.then(|| {
        let period = state.ping_interval;
        let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval
    });
    let streaming = Streaming {
        items,
        ping,
        run_id,
        types,
        finished: false,
        guard,
        shutdown: state.shutdown.clone(),
        expiry,
        _slot: slot,
    };
    let events = stream::unfold(streaming, |mut streaming| async move {
        if streaming.finished {
            return None;
        }
        loop {
            let next = tokio::select! {
                item = streaming.items.recv() => Some(item),
                _ = next_ping(&mut streaming.ping) => None,
                _ = streaming.shutdown.cancelled() => {
                    // The server is going away, not the client: the run is left to finish (or
                    // be interrupted by the drain), and the client told where to pick it up.
                    let event = streaming.left("server_shutting_down", "the server is shutting down; resume");
                    return Some((Ok::<Event, std::convert::Infallible>(event), streaming));
                }
                _ = until_expiry(&mut streaming.expiry) => {
                    // The token ran out, not the client's patience: the run goes on, and the
                    // client, with a fresh token, resumes where it was.
                    let event = streaming.left("token_expired", "the token expired; with a fresh one, resume");
                    return Some((Ok::<Event, std::convert::Infallible>(event), streaming));
                }
            };
            let event = match next {
                None => ping_event(streaming.run_id),
                Some(Some(Ok(item))) => {
                    if let LettaItem::Message(message) = &item {
                        if !wanted(&streaming.types, message.body_type()) {
                            continue;
                        }
                    }
                    Event::default().data(item.to_json().to_string())
                }
                Some(Some(Err(error))) => {
                    streaming.finished = true;
                    let body = json!({
                        "message_type": "error_message",
                        "error_type": error.code(),
                        "message": error.to_string(),
                        "run_id": streaming.run_id,
                    });
                    Event::default().event("error").data(body.to_string())
                }
                Some(None) => {
                    streaming.finished = true;
                    ForegroundGuard::disarm(&mut streaming.guard);
                    Event::default().data("[DONE]")
                }
            };
            return Some((Ok::<Event, std::convert::Infallible>(event), streaming));
        }
    });
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_millis(SSE_KEEPALIVE_INTERVAL_MS)))
        .into_response();
    response.extensions_mut().insert(crate::http::auth::EndsAtExpiry);
    response
}

async fn until_expiry(expiry: &mut Option<std::pin::Pin<Box<tokio::time::Sleep>>>) {
    match expiry {
        Some(sleep) => sleep.as_mut().await,
        None => std::future::pending().await,
    }
}

pub(super) async fn next_ping(ping: &mut Option<tokio::time::Interval>) {
    match ping {
        Some(interval) => {
            interval.tick().await;
        }
        None => std::future::pending().await,
    }
}

pub(super) fn ping_event(run_id: Uuid) -> Event {
    let ping = json!({
        "id": format!("ping-{}", Uuid::new_v4()),
        "date": chrono::Utc::now(),
        "message_type": "ping",
        "run_id": run_id,
    });
    Event::default().data(ping.to_string())
}
