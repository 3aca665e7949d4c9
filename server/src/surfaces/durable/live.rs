//! Reads that wait: long-poll (one answer, as soon as a message comes or the wait ends) and SSE
//! (`data` events and `control` events, open at most [`SSE_CONNECTION_MS`], then the client
//! reconnects from the last control event's offset, as the protocol has it). Both watch the
//! log's hub room (what this and, with PostgreSQL, other servers commit) and the path's closes,
//! and read what they send from the store, so a reader never misses or repeats a message.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::sync::{broadcast, mpsc};
use uuid::Uuid;

use super::protocol::ReadQuery;
use super::protocol::{self, format_offset, Offset};
use super::refusal::Refusal;
use super::response::{
    messages_response, text, with, STREAM_CLOSED, STREAM_CURSOR, STREAM_NEXT_OFFSET,
    STREAM_UP_TO_DATE,
};
use super::service::PathWatch;
use super::source::Source;
use super::state::DurableState;
use crate::delivery::hub::{EventBatch, Hub};

/// A long-poll waits this long for a message, then answers 204.
pub const LONG_POLL_WAIT_MS: u64 = 15_000;
/// An SSE connection is closed after this long; the client reconnects from its offset.
pub const SSE_CONNECTION_MS: u64 = 60_000;
/// An idle SSE connection gets a `control` event this often.
pub const SSE_KEEPALIVE_MS: u64 = 15_000;
/// SSE frames queued for one slow reader at most.
const SSE_FRAMES_QUEUED_MAX: usize = 16;

/// A log's hub room, left when dropped.
struct Room<'a> {
    hub: &'a Hub,
    log_id: Uuid,
    live: Option<broadcast::Receiver<EventBatch>>,
}

impl<'a> Room<'a> {
    fn join(hub: &'a Hub, log_id: Uuid) -> Room<'a> {
        Room { hub, log_id, live: Some(hub.subscribe(log_id)) }
    }

    /// Returns when something was committed to the log (or the room lagged: read anyway).
    async fn committed(&mut self) {
        match self.live.as_mut() {
            Some(live) => match live.recv().await {
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => {
                    self.live = None;
                    std::future::pending::<()>().await
                }
            },
            None => std::future::pending::<()>().await,
        }
    }
}

impl Drop for Room<'_> {
    fn drop(&mut self) {
        drop(self.live.take());
        self.hub.release(self.log_id);
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A cursor for this response (a random jitter when the client's is current).
fn cursor(client: Option<&str>) -> String {
    let jitter = 1 + (rand_below(180) as i64);
    protocol::response_cursor(now_ms(), client, jitter)
}

fn rand_below(bound: u64) -> u64 {
    (uuid::Uuid::new_v4().as_u128() % u128::from(bound)) as u64
}

/// Where a read starts, given the tail.
fn start(offset: Option<Offset>, tail: u64) -> u64 {
    match offset {
        Some(Offset::Now) => tail,
        Some(Offset::After(seq)) => seq,
        Some(Offset::Start) | None => 0,
    }
}

/// `GET …?live=long-poll`.
pub(crate) async fn long_poll(
    state: &DurableState,
    source: Source,
    query: ReadQuery,
) -> Result<Response, Refusal> {
    // A waiting read holds a stream slot like an SSE stream (it holds a connection as long).
    let Ok(_slot) = state.sse_streams.clone().try_acquire_owned() else {
        return Ok(text(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("{} streams are open; retry later", state.sse_streams_max),
        ));
    };
    let mut room = Room::join(&state.hub, source.log_id());
    let mut watch: Option<PathWatch> = match &source {
        Source::Stream(row) => Some(state.service.watch(&row.path)),
        Source::Agent { .. } => None,
    };
    let mut source = source;
    let (_, tail) = source.read(state, u64::MAX).await?;
    let since = start(query.offset, tail);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(LONG_POLL_WAIT_MS);
    let start_text = query.offset_text.clone().unwrap_or_else(|| "-1".into());
    loop {
        let (messages, tail) = source.read(state, since).await?;
        if !messages.is_empty() {
            let response = messages_response(&source, messages, tail, &start_text, None);
            return Ok(with(response, STREAM_CURSOR, cursor(query.cursor.as_deref())));
        }
        if source.closed() && since >= tail {
            let response = with(
                StatusCode::NO_CONTENT.into_response(),
                STREAM_NEXT_OFFSET,
                format_offset(tail),
            );
            let response = with(response, STREAM_UP_TO_DATE, "true".into());
            return Ok(with(response, STREAM_CLOSED, "true".into()));
        }
        let closed = async {
            match watch.as_mut() {
                Some(watch) => watch.changed().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = room.committed() => {}
            () = closed => {}
            () = tokio::time::sleep_until(deadline) => {
                let response = with(
                    StatusCode::NO_CONTENT.into_response(),
                    STREAM_NEXT_OFFSET,
                    format_offset(since),
                );
                let response = with(response, STREAM_UP_TO_DATE, "true".into());
                return Ok(with(response, STREAM_CURSOR, cursor(query.cursor.as_deref())));
            }
            () = state.shutdown.cancelled() => {
                return Ok(text(StatusCode::SERVICE_UNAVAILABLE, "the server is shutting down"));
            }
        }
        source = source.refreshed(state).await?.ok_or(Refusal::NotFound)?;
    }
}

/// `GET …?live=sse`.
pub(crate) async fn sse(state: &DurableState, source: Source, query: ReadQuery) -> Response {
    let Ok(slot) = state.sse_streams.clone().try_acquire_owned() else {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("{} streams are open; retry later", state.sse_streams_max),
        );
    };
    let base64 = !protocol::is_text(source.content_type());
    let (frames, body) = mpsc::channel::<Result<Bytes, Infallible>>(SSE_FRAMES_QUEUED_MAX);
    let task_state = state.clone();
    tokio::spawn(async move {
        let _slot = slot;
        let sent = frames.clone();
        tokio::select! {
            () = follow(&task_state, source, query, &frames) => {}
            () = sent.closed() => {}
        }
    });
    let stream = futures::stream::unfold(body, |mut body| async move {
        body.recv().await.map(|frame| (frame, body))
    });
    let mut response = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")],
        Body::from_stream(stream),
    )
        .into_response();
    if base64 {
        response = with(response, "stream-sse-data-encoding", "base64".into());
    }
    response
}

/// The SSE connection's writer: data and control events until the connection's time is up,
/// the stream is closed (the last control event says so) or gone, or the reader left.
async fn follow(
    state: &DurableState,
    source: Source,
    query: ReadQuery,
    frames: &mpsc::Sender<Result<Bytes, Infallible>>,
) {
    let send = |frame: String| async move { frames.send(Ok(Bytes::from(frame))).await.is_ok() };
    let mut room = Room::join(&state.hub, source.log_id());
    let mut watch: Option<PathWatch> = match &source {
        Source::Stream(row) => Some(state.service.watch(&row.path)),
        Source::Agent { .. } => None,
    };
    let mut source = source;
    let Ok((_, tail)) = source.read(state, u64::MAX).await else {
        return;
    };
    let mut since = start(query.offset, tail);
    let ends = tokio::time::Instant::now() + Duration::from_millis(SSE_CONNECTION_MS);
    loop {
        let Ok((messages, tail)) = source.read(state, since).await else {
            return;
        };
        // A page is one data event (JSON: one array; bytes: one run of them), followed by the
        // control event that says where it left the reader — per message, a catch-up of 10 000
        // was 20 000 events. Both go in one frame, one write: the protocol's client pairs data
        // with the next control event, and a connection that ends between the two hands the
        // data out with the offset from before it (its reader then gets it twice).
        let last = messages.last_offset();
        let mut frame = String::new();
        if !messages.is_empty() {
            let payload = protocol::sse_payload(source.content_type(), &messages);
            frame = protocol::sse_event("data", &payload);
        }
        // After the last message sent, or the tail when none was.
        since = last.unwrap_or(tail);
        let at_tail = since >= tail;
        let control = if source.closed() && at_tail {
            json!({ "streamNextOffset": format_offset(since), "streamClosed": true })
        } else {
            let mut control = json!({
                "streamNextOffset": format_offset(since),
                "streamCursor": cursor(query.cursor.as_deref()),
            });
            if at_tail {
                control["upToDate"] = json!(true);
            }
            control
        };
        frame.push_str(&protocol::sse_event("control", &control.to_string()));
        if !send(frame).await {
            return;
        }
        if source.closed() && at_tail {
            return;
        }
        if !at_tail {
            continue;
        }
        let closed = async {
            match watch.as_mut() {
                Some(watch) => watch.changed().await,
                None => std::future::pending().await,
            }
        };
        let keepalive = tokio::time::sleep(Duration::from_millis(SSE_KEEPALIVE_MS));
        tokio::select! {
            () = room.committed() => {}
            () = closed => {}
            () = keepalive => {}
            () = tokio::time::sleep_until(ends) => return,
            () = state.shutdown.cancelled() => return,
        }
        match source.refreshed(state).await {
            Ok(Some(now)) => source = now,
            _ => return,
        }
    }
}
