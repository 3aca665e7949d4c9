//! The UI message stream over SSE: one run's chunks as `data: <chunk>` frames, keep-alive
//! comments between them, `data: [DONE]` at the end, and the headers `useChat`'s
//! transport looks for. Nothing here cancels a run: a client that goes away only stops reading.
//!
//! The cursor: every frame's `id:` is a [`FrameId`] (`<seq>`, or `<seq>:<k>` inside one event's
//! chunks), so an SSE client's `Last-Event-ID`, sent back to `GET …/stream`, skips exactly what
//! it has — also when it was cut off in the middle of one event's chunks.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderValue;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::mapping::{Chunk, ChunkMapper};
use crate::delivery::subscription::FollowError;
use crate::surfaces::chat::ChatState;
use crate::surfaces::native::sse::SSE_KEEPALIVE_INTERVAL_MS;
use crate::surfaces::run_feed::RunCursor;
use crate::surfaces::run_feed::{frames, FrameId};

/// Chunks queued between a run's feed and its HTTP response (a slower reader makes the feed
/// wait; its log subscription then catches up from the store, and the run never waits).
pub const AI_SDK_FEED_CHUNKS_MAX: usize = 64;

/// A chunk and its frame's id.
pub(super) type Framed = (FrameId, Chunk);

/// Follows run `run_id` from `after_seq` (just before its start) and maps it to chunks,
/// keeping those after `cursor` (where the client is; the default for all).
pub(super) fn feed(
    state: &ChatState,
    agent_id: Uuid,
    run_id: Uuid,
    after_seq: u64,
    cursor: FrameId,
) -> mpsc::Receiver<Result<Framed, FollowError>> {
    let mut mapper = ChunkMapper::new();
    let at = RunCursor::new(agent_id, run_id, after_seq);
    let log = (state.store.clone(), state.hub.clone());
    crate::surfaces::run_feed::feed(("ai_sdk", AI_SDK_FEED_CHUNKS_MAX), log, at, move |event| {
        frames(mapper.push(event), cursor)
    })
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

fn chunk_event(id: Option<FrameId>, chunk: &Chunk) -> Event {
    let data = serde_json::to_string(chunk).expect("chunks serialize");
    let event = Event::default().data(data);
    match id {
        Some(id) => event.id(id.to_string()),
        None => event,
    }
}

/// The SSE response for `chunks`. If the log cannot be followed, or the server shuts down, the
/// stream says so in an `error` chunk (the run goes on; `GET …/stream` picks it up again) and
/// ends with `[DONE]`.
pub(super) fn sse_response(
    state: &ChatState,
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
            return Some((Ok::<Event, Infallible>(Event::default().data("[DONE]")), streaming));
        }
        let error = |text: String| Chunk::Error { error_text: text };
        let event = tokio::select! {
            next = streaming.chunks.recv() => match next {
                Some(Ok((id, chunk))) => chunk_event(Some(id), &chunk),
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
    headers.insert("x-vercel-ai-ui-message-stream", HeaderValue::from_static("v1"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::surfaces::test_log::{text_run, tool_run};

    fn framed(events: &[app::AgentEvent], cursor: FrameId) -> Vec<Framed> {
        let mut mapper = ChunkMapper::new();
        events.iter().flat_map(|event| frames(mapper.push(event), cursor)).collect()
    }

    /// A client cut off after any frame resumes with that frame's id as its `Last-Event-ID`
    /// and ends with exactly the whole stream: nothing skipped, nothing twice — also inside one
    /// event's chunks, a text part or a tool call's input.
    #[test]
    fn a_stream_resumed_from_any_frame_continues_exactly() {
        for log in [text_run(), tool_run()] {
            let whole = framed(&log.0, FrameId::default());
            let expected: Vec<Chunk> = whole.iter().map(|(_, chunk)| chunk.clone()).collect();
            let mut inside_an_event = 0;
            for (index, (id, _)) in whole.iter().enumerate() {
                let cursor = FrameId::parse(&id.to_string()).expect("ids read back");
                assert_eq!(cursor, *id);
                let mut joined: Vec<Chunk> =
                    whole[..=index].iter().map(|(_, chunk)| chunk.clone()).collect();
                joined.extend(framed(&log.0, cursor).into_iter().map(|(_, chunk)| chunk));
                assert_eq!(joined, expected, "resumed after {id}");
                inside_an_event += usize::from(id.index.is_some());
            }
            assert!(inside_an_event > 0);
        }
    }

    #[test]
    fn frame_ids_say_which_chunk_of_which_event() {
        let whole = framed(&tool_run().0, FrameId::default());
        let ids: Vec<String> = whole.iter().map(|(id, _)| id.to_string()).collect();
        // The first text event opens the step and the part and brings a delta.
        assert_eq!(&ids[..5], &["1", "2:0", "2:1", "2", "3:0"]);
        let mut seen = std::collections::HashSet::new();
        assert!(ids.iter().all(|id| seen.insert(id.clone())), "{ids:?}");
        for bad in ["", "x", "3:", ":1", "-1", "3:x", "1:2:3"] {
            assert_eq!(FrameId::parse(bad), None, "{bad:?}");
        }
    }
}
