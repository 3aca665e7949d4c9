//! `POST /v1/ai-sdk/chat/{id}/produce`: a backend that runs its own `streamText` pipes the UI
//! message stream into the chat's agent in one request — the body of
//! `toUIMessageStreamResponse()` (SSE, `data: {chunk}` frames up to `data: [DONE]`) or the
//! chunks as NDJSON — and `useChat` clients resume it from agentstream (`GET …/stream`), with a
//! cursor, no Redis.
//!
//! Each chunk that carries something becomes one producer batch (`inbound.rs` maps it, the
//! producer API checks and commits it), so subscribers see it as it arrives. With
//! `Producer-Id` / `Producer-Epoch` / `Producer-Seq` the stream is a producer like any other:
//! the chunks that carry something take seqs from `Producer-Seq` on, a retry of the same stream
//! is written once, and a broken stream's run waits for its producer until its lease. Without
//! them the request is its own producer (`ai-sdk`, a fresh epoch): a stream that breaks cannot
//! be resumed, so its run is ended at once, interrupted.
//!
//! The user's message the run answers goes in the `Agentstream-User-Text` header, percent-
//! encoded (`encodeURIComponent`): the stream itself holds only the assistant's message.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::inbound::Inbound;
use crate::agent::produce::fence::ProducerHeaders;
use crate::agent::produce::{Batch, Produced, Producers};
use crate::http::body_lines::{BodyLines, LineError, BODY_LINE_BYTES_MAX};
use crate::http::caller::Caller;
use crate::http::error::ApiError;
use crate::limits::RUN_CONTENT_BYTES_MAX;
use crate::surfaces::chat::{chat_agent, chat_id, unknown_chat, ChatState};

/// The header carrying the user's message (percent-encoded UTF-8).
pub const USER_TEXT_HEADER: &str = "agentstream-user-text";
/// The producer id of a stream sent without producer headers.
pub const IMPLICIT_PRODUCER_ID: &str = "ai-sdk";

fn user_text(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(USER_TEXT_HEADER) else {
        return Ok(None);
    };
    let bad = || {
        ApiError::bad_request(
            "invalid_user_text",
            "Agentstream-User-Text must be percent-encoded UTF-8 (encodeURIComponent)",
        )
    };
    let encoded = value.to_str().map_err(|_| bad())?;
    let text = percent_encoding::percent_decode_str(encoded).decode_utf8().map_err(|_| bad())?;
    if text.len() > RUN_CONTENT_BYTES_MAX {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "content_too_large",
            format!("the user's message is over {RUN_CONTENT_BYTES_MAX} bytes"),
        ));
    }
    Ok(Some(text.into_owned()).filter(|text| !text.trim().is_empty()))
}

/// The request's producer: its headers, or a fresh epoch of the implicit one.
fn producer_of(headers: &HeaderMap) -> Result<(ProducerHeaders, bool), ApiError> {
    let get = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let given = ["producer-id", "producer-epoch", "producer-seq"]
        .iter()
        .any(|name| headers.contains_key(*name));
    if given {
        let parsed =
            ProducerHeaders::parse(get("producer-id"), get("producer-epoch"), get("producer-seq"))
                .map_err(|message| ApiError::bad_request("invalid_producer_headers", message))?;
        return Ok((parsed, true));
    }
    // Milliseconds since the epoch, and above the last one this process gave: each request has
    // an epoch of its own (what `abandon` tells requests apart by), and a newer stream's is
    // higher.
    static LAST_EPOCH: AtomicU64 = AtomicU64::new(0);
    let now = chrono::Utc::now().timestamp_millis().max(0) as u64;
    let epoch = LAST_EPOCH
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |last| Some(now.max(last + 1)))
        .map_or(now, |last| now.max(last + 1));
    let implicit = ProducerHeaders { id: IMPLICIT_PRODUCER_ID.to_owned(), epoch, seq: 0 };
    Ok((implicit, false))
}

/// A chunk from one SSE frame's data or one NDJSON line; `None` for `[DONE]`.
fn chunk_of(data: &[u8]) -> Result<Option<Value>, String> {
    let text = std::str::from_utf8(data).map_err(|_| "a chunk is not UTF-8".to_owned())?;
    if text.trim() == "[DONE]" {
        return Ok(None);
    }
    serde_json::from_str(text).map(Some).map_err(|error| format!("a chunk is not JSON: {error}"))
}

pub async fn produce(
    State(state): State<ChatState>,
    State(producers): State<Arc<Producers>>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match pipe(&state, &producers, &caller, &id, &headers, body).await {
        Ok(summary) => Json(summary).into_response(),
        Err(response) => response,
    }
}

async fn pipe(
    state: &ChatState,
    producers: &Arc<Producers>,
    caller: &Caller,
    id: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<Value, Response> {
    let chat = chat_id(id).map_err(IntoResponse::into_response)?;
    let agent_id = chat_agent(state, caller, &chat, true)
        .await
        .map_err(IntoResponse::into_response)?
        .ok_or_else(|| unknown_chat(id).into_response())?;
    let user = user_text(headers).map_err(IntoResponse::into_response)?;
    let (producer, resumable) = producer_of(headers).map_err(IntoResponse::into_response)?;
    let ndjson = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/x-ndjson"));
    let mut lines = BodyLines::new(body);
    let mut inbound = Inbound::new();
    let (mut chunks, mut batches, mut events) = (0u64, 0u64, 0u64);
    let mut run_id = None;
    let mut data: Vec<u8> = Vec::new();
    // Whatever ends the stream early: a broken body, a refused chunk, a refused batch.
    let outcome: Result<(), Response> = async {
        loop {
            let line = lines.next_line().await.map_err(|error| {
                let status = match error {
                    LineError::TooLong => StatusCode::PAYLOAD_TOO_LARGE,
                    LineError::Idle | LineError::OpenTooLong => StatusCode::REQUEST_TIMEOUT,
                    LineError::Broken(_) => StatusCode::BAD_REQUEST,
                };
                ApiError::new(status, "stream_broken", format!("after {chunks} chunks: {error}"))
                    .into_response()
            })?;
            // One chunk's data: an NDJSON line, or an SSE frame's `data:` lines up to its blank
            // line (or the body's end).
            let (frame, at_end) = match (ndjson, line) {
                (_, None) => (std::mem::take(&mut data), true),
                (true, Some(line)) => (line, false),
                (false, Some(line)) if line.is_empty() => (std::mem::take(&mut data), false),
                (false, Some(line)) => {
                    if let Some(rest) = line.strip_prefix(b"data:") {
                        if !data.is_empty() {
                            data.push(b'\n');
                        }
                        let rest = rest.strip_prefix(b" ").unwrap_or(rest);
                        if data.len() + rest.len() > BODY_LINE_BYTES_MAX {
                            let message =
                                format!("chunk {chunks} is over {BODY_LINE_BYTES_MAX} bytes");
                            return Err(ApiError::new(
                                StatusCode::PAYLOAD_TOO_LARGE,
                                "chunk_too_large",
                                message,
                            )
                            .into_response());
                        }
                        data.extend_from_slice(rest);
                    }
                    continue;
                }
            };
            if frame.iter().all(u8::is_ascii_whitespace) {
                if at_end {
                    return Ok(());
                }
                continue;
            }
            let refused = |message: String| {
                ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_chunk",
                    format!("chunk {chunks}: {message}"),
                )
                .into_response()
            };
            let Some(chunk) = chunk_of(&frame).map_err(refused)? else {
                return Ok(()); // [DONE]
            };
            let produced = inbound.push(&chunk, user.as_deref()).map_err(refused)?;
            chunks += 1;
            if produced.is_empty() {
                if at_end {
                    return Ok(());
                }
                continue;
            }
            let batch = ProducerHeaders { seq: producer.seq + batches, ..producer.clone() };
            events += produced.len() as u64;
            match producers.append(agent_id, &batch, Batch::made(produced)).await {
                Ok(Produced::Appended(appended)) => run_id = Some(appended.run_id),
                Ok(Produced::Duplicate) => {}
                Err(error) => {
                    return Err(crate::http::produce::refusal(
                        error,
                        Some(&format!("chunk {}", chunks - 1)),
                    ))
                }
            }
            batches += 1;
            // After `finish` the body is still read to its end (`[DONE]`): answering while the
            // client still writes would break its request.
            if at_end {
                return Ok(());
            }
        }
    }
    .await;
    if let Err(response) = outcome {
        if !resumable {
            producers.abandon(agent_id, &producer).await;
        }
        return Err(response);
    }
    if !inbound.ended() && !resumable {
        // The stream ended without `finish`: nobody can send the rest.
        producers.abandon(agent_id, &producer).await;
    }
    Ok(json!({
        "agent_id": agent_id,
        "run_id": run_id,
        "chunks": chunks,
        "events": events,
        "skipped_chunks": inbound.skipped,
        "finished": inbound.ended(),
        "producer": { "id": producer.id, "epoch": producer.epoch, "last_seq": (batches > 0).then(|| producer.seq + batches - 1) },
    }))
}
