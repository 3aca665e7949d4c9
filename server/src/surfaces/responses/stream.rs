//! A response's events over SSE (`event: <type>` + `data: <json>`, keep-alive comments between
//! them, `data: [DONE]` after the terminal event), and a response read whole from the log.
//!
//! When the log cannot be followed, the server shuts down or the caller's token expires, the
//! body is cut without `[DONE]`: the SDKs then throw a connection error and the caller resumes
//! with `GET /v1/responses/{id}?stream=true&starting_after=N` — never an SSE `error` event,
//! which the SDKs take as the response's own failure.

use std::time::Duration;

use app::AgentEvent;
use axum::http::HeaderValue;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream;
use serde_json::Value;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::mapping::ResponseMapper;
use crate::delivery::subscription::FollowError;
use crate::http::error::ApiError;
use crate::store::Store;
use crate::surfaces::chat::ChatState;
use crate::surfaces::native::sse::SSE_KEEPALIVE_INTERVAL_MS;
use crate::surfaces::run_feed::ForegroundGuard;
use crate::surfaces::run_feed::RunCursor;

/// Stream events queued between a response's feed and its HTTP body (a slower reader makes the
/// feed wait; its log subscription then catches up from the store, and the run never waits).
pub const RESPONSES_FEED_EVENTS_MAX: usize = 64;
/// Events read from the log per page when a response is read whole.
const READ_PAGE_EVENTS_MAX: u32 = 1_000;
/// Pages read at most for one response read whole: a run's events are bounded by the run's own
/// limit, far below this.
const READ_PAGES_MAX: usize = 1_000;

/// Follows run `run_id` from `after_seq` (just before its start) and maps it to stream events,
/// keeping those numbered above `starting_after`.
pub fn feed(
    state: &ChatState,
    agent_id: Uuid,
    run_id: Uuid,
    after_seq: u64,
    starting_after: Option<u64>,
) -> mpsc::Receiver<Result<Value, FollowError>> {
    let mut mapper = ResponseMapper::new();
    let at = RunCursor::new(agent_id, run_id, after_seq);
    let log = (state.store.clone(), state.hub.clone());
    crate::surfaces::run_feed::feed(
        ("responses", RESPONSES_FEED_EVENTS_MAX),
        log,
        at,
        move |event| {
            let mut events = mapper.push(event);
            if let Some(after) = starting_after {
                events.retain(|event| event["sequence_number"].as_u64() > Some(after));
            }
            events
        },
    )
}

/// Run `run_id`'s events as the log holds them now, from its start at `start_seq`, mapped: the
/// response as it stands (whole once the run has ended).
pub async fn read(
    store: &dyn Store,
    agent_id: Uuid,
    run_id: Uuid,
    start_seq: u64,
) -> Result<ResponseMapper, ApiError> {
    let mut mapper = ResponseMapper::new();
    let mut since = start_seq.saturating_sub(1);
    for _ in 0..READ_PAGES_MAX {
        let page: Vec<AgentEvent> =
            store.read_events(agent_id, since, READ_PAGE_EVENTS_MAX).await?;
        let Some(last) = page.last() else {
            return Ok(mapper);
        };
        since = last.seq;
        for event in page.iter().filter(|event| event.run_id == Some(run_id)) {
            mapper.push(event);
        }
        if mapper.ended() || page.len() < READ_PAGE_EVENTS_MAX as usize {
            return Ok(mapper);
        }
    }
    Ok(mapper)
}

struct Streaming {
    events: mpsc::Receiver<Result<Value, FollowError>>,
    /// `[DONE]` went out, or the body was cut.
    finished: bool,
    /// Cancels a foreground run when the client leaves before its end.
    guard: Option<ForegroundGuard>,
    shutdown: tokio_util::sync::CancellationToken,
    /// When the caller's scoped token expires.
    expiry: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    /// The stream's slot, given back when the response is dropped.
    _slot: tokio::sync::OwnedSemaphorePermit,
}

/// Why a body was cut: its error ends the HTTP body uncleanly.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Cut(String);

fn frame(event: &Value) -> Event {
    let kind = event["type"].as_str().unwrap_or("response.unknown");
    Event::default().event(kind).data(event.to_string())
}

/// The SSE response for `events`.
pub fn sse_response(
    state: &ChatState,
    events: mpsc::Receiver<Result<Value, FollowError>>,
    guard: Option<ForegroundGuard>,
    slot: tokio::sync::OwnedSemaphorePermit,
    expires_at: Option<i64>,
) -> Response {
    let expiry = expires_at
        .map(|expires_at| Box::pin(tokio::time::sleep(crate::http::auth::until_unix(expires_at))));
    let streaming = Streaming {
        events,
        finished: false,
        guard,
        shutdown: state.shutdown.clone(),
        expiry,
        _slot: slot,
    };
    let body = stream::unfold(streaming, |mut streaming| async move {
        if streaming.finished {
            return None;
        }
        let expired = async {
            match streaming.expiry.as_mut() {
                Some(expiry) => expiry.await,
                None => std::future::pending().await,
            }
        };
        let next = tokio::select! {
            next = streaming.events.recv() => next,
            _ = streaming.shutdown.cancelled() => Some(Err(FollowError::SubscriberGone)),
            _ = expired => {
                streaming.finished = true;
                return Some((Err(Cut("the token expired".to_owned())), streaming));
            }
        };
        match next {
            Some(Ok(event)) => Some((Ok::<Event, Cut>(frame(&event)), streaming)),
            Some(Err(error)) => {
                streaming.finished = true;
                Some((Err(Cut(error.to_string())), streaming))
            }
            None => {
                // The run's end went out: the client had all of it.
                ForegroundGuard::disarm(&mut streaming.guard);
                streaming.finished = true;
                Some((Ok(Event::default().data("[DONE]")), streaming))
            }
        }
    });
    let mut response = Sse::new(body)
        .keep_alive(KeepAlive::new().interval(Duration::from_millis(SSE_KEEPALIVE_INTERVAL_MS)))
        .into_response();
    response.headers_mut().insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Drains `events` to the response of the last lifecycle event (the terminal one, once the run
/// ended); `None` when there was none.
pub async fn final_response(
    mut events: mpsc::Receiver<Result<Value, FollowError>>,
) -> Result<Option<Value>, FollowError> {
    let mut last = None;
    while let Some(event) = events.recv().await {
        let mut event = event?;
        if let Some(response) = event.get_mut("response") {
            last = Some(response.take());
        }
    }
    Ok(last)
}
