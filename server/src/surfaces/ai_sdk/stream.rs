//! The UI message stream over SSE: one run's chunks as `data: <chunk>` frames, keep-alive
//! comments between them, `data: [DONE]` at the end, and the headers `useChat`'s
//! transport looks for. Nothing here cancels a run: a client that goes away only stops reading.
//!
//! The cursor: the last frame made from a log event carries `id: <its seq>` (one event can make
//! several chunks, and only after the last of them has the client all of that event), so an
//! SSE client's `Last-Event-ID` is always a seq it has every chunk of.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderValue;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::chunks::{Chunk, ChunkMapper, Tagged};
use super::AiSdkState;
use crate::delivery::subscription::FollowError;
use crate::surfaces::native::sse::SSE_KEEPALIVE_INTERVAL_MS;

/// Chunks queued between a run's feed and its HTTP response (a slower reader makes the feed
/// wait; its log subscription then catches up from the store, and the run never waits).
pub const AI_SDK_FEED_CHUNKS_MAX: usize = 64;

/// A chunk, with the seq of its event when it is the last chunk of that event.
pub(super) type Framed = (Option<u64>, Chunk);

/// Follows run `run_id` from `after_seq` (just before its start) and maps it to chunks,
/// keeping those after `cursor` (a seq the client already has every chunk of; 0 for all).
pub(super) fn feed(
    state: &AiSdkState,
    agent_id: Uuid,
    run_id: Uuid,
    after_seq: u64,
    cursor: u64,
) -> mpsc::Receiver<Result<Framed, FollowError>> {
    let mut mapper = ChunkMapper::new();
    crate::surfaces::run_feed::feed(
        state.store.clone(),
        state.hub.clone(),
        agent_id,
        run_id,
        after_seq,
        AI_SDK_FEED_CHUNKS_MAX,
        move |event| frames(mapper.push(event), cursor),
    )
}

/// One event's chunks as frames: none at or before `cursor`, the seq on the last.
fn frames(chunks: Vec<Tagged>, cursor: u64) -> Vec<Framed> {
    let count = chunks.len();
    chunks
        .into_iter()
        .filter(|(seq, _)| *seq > cursor)
        .enumerate()
        .map(|(index, (seq, chunk))| ((index + 1 == count).then_some(seq), chunk))
        .collect()
}

struct Streaming {
    chunks: mpsc::Receiver<Result<Framed, FollowError>>,
    /// `[DONE]` was sent, or is next after an error.
    done: bool,
    finished: bool,
    shutdown: tokio_util::sync::CancellationToken,
    chat_id: String,
    /// The stream's slot, given back when the response is dropped.
    _slot: tokio::sync::OwnedSemaphorePermit,
}

fn chunk_event(seq: Option<u64>, chunk: &Chunk) -> Event {
    let data = serde_json::to_string(chunk).expect("chunks serialize");
    let event = Event::default().data(data);
    match seq {
        Some(seq) => event.id(seq.to_string()),
        None => event,
    }
}

/// The SSE response for `chunks`. If the log cannot be followed, or the server shuts down, the
/// stream says so in an `error` chunk (the run goes on; `GET …/stream` picks it up again) and
/// ends with `[DONE]`.
pub(super) fn sse_response(
    state: &AiSdkState,
    chat_id: &str,
    chunks: mpsc::Receiver<Result<Framed, FollowError>>,
    slot: tokio::sync::OwnedSemaphorePermit,
) -> Response {
    let streaming = Streaming {
        chunks,
        done: false,
        finished: false,
        shutdown: state.shutdown.clone(),
        chat_id: chat_id.to_owned(),
        _slot: slot,
    };
    let events = stream::unfold(streaming, |mut streaming| async move {
        if streaming.finished {
            return None;
        }
        if streaming.done {
            streaming.finished = true;
            return Some((
                Ok::<Event, Infallible>(Event::default().data("[DONE]")),
                streaming,
            ));
        }
        let error = |text: String| Chunk::Error { error_text: text };
        let event = tokio::select! {
            next = streaming.chunks.recv() => match next {
                Some(Ok((seq, chunk))) => chunk_event(seq, &chunk),
                Some(Err(follow)) => {
                    streaming.done = true;
                    chunk_event(None, &error(format!(
                        "the stream broke off ({}): {follow}; GET /v1/ai-sdk/chat/{}/stream resumes it",
                        follow.code(),
                        streaming.chat_id,
                    )))
                }
                None => {
                    streaming.finished = true;
                    Event::default().data("[DONE]")
                }
            },
            _ = streaming.shutdown.cancelled() => {
                // The server is going away, not the run: it is left to finish (or be
                // interrupted by the drain), and the client told where to pick it up.
                streaming.done = true;
                chunk_event(None, &error(format!(
                    "the server is shutting down; GET /v1/ai-sdk/chat/{}/stream resumes the answer",
                    streaming.chat_id,
                )))
            }
        };
        Some((Ok(event), streaming))
    });
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_millis(SSE_KEEPALIVE_INTERVAL_MS)))
        .into_response();
    let headers = response.headers_mut();
    headers.insert(
        "x-vercel-ai-ui-message-stream",
        HeaderValue::from_static("v1"),
    );
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::surfaces::ai_sdk::test_log::{text_run, tool_run};

    fn framed(events: &[app::AgentEvent], cursor: u64) -> Vec<Framed> {
        let mut mapper = ChunkMapper::new();
        events
            .iter()
            .flat_map(|event| frames(mapper.push(event), cursor))
            .collect()
    }

    /// A client cut off after any frame that carries an id resumes with that id as its
    /// `Last-Event-ID` and ends with exactly the whole stream: nothing skipped, nothing twice —
    /// also in the middle of a text part or a tool call's input.
    #[test]
    fn a_stream_resumed_from_any_id_it_sent_continues_exactly() {
        for log in [text_run(), tool_run()] {
            let whole = framed(&log.0, 0);
            assert!(
                whole.last().unwrap().0.is_some(),
                "the last frame has an id"
            );
            let mut resumed_mid_part = false;
            for (index, (id, chunk)) in whole.iter().enumerate() {
                let Some(cursor) = id else { continue };
                let mut joined: Vec<Chunk> = whole[..=index]
                    .iter()
                    .map(|(_, chunk)| chunk.clone())
                    .collect();
                joined.extend(framed(&log.0, *cursor).into_iter().map(|(_, chunk)| chunk));
                let expected: Vec<Chunk> = whole.iter().map(|(_, chunk)| chunk.clone()).collect();
                assert_eq!(joined, expected, "resumed after {cursor}");
                resumed_mid_part |= matches!(
                    chunk,
                    Chunk::TextDelta { .. } | Chunk::ToolInputDelta { .. }
                ) && index + 1 < whole.len();
            }
            assert!(resumed_mid_part);
        }
    }

    /// Several chunks from one event: only the last says the event is whole.
    #[test]
    fn only_the_last_chunk_of_an_event_carries_its_seq() {
        let whole = framed(&tool_run().0, 0);
        let ids: Vec<Option<u64>> = whole.iter().map(|(id, _)| *id).collect();
        // The first text event opens the step and the part and brings a delta.
        assert_eq!(&ids[..5], &[Some(1), None, None, Some(2), None]);
        let mut seen = std::collections::HashSet::new();
        assert!(ids.iter().flatten().all(|id| seen.insert(*id)));
    }
}
