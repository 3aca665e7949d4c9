//! The producer API over HTTP (`agent::produce` does the work):
//!
//! - `POST /v1/agents/{id}/produce` with `Producer-Id`, `Producer-Epoch`, `Producer-Seq`: one
//!   batch as a JSON array of events (`application/json`), answered 200 with the run and the
//!   seqs it got, 204 for a duplicate, 403 (stale epoch, with the current `Producer-Epoch`), 409
//!   (a gap, with `Producer-Expected-Seq` / `Producer-Received-Seq`; or the agent is busy, or
//!   the run ended without the producer), 400/422 for a malformed request or event (naming it;
//!   nothing of the batch is written), 413 past a limit.
//! - The same with `Content-Type: application/x-ndjson`: a streamed body, one batch per line
//!   (an array or one event), the lines taking `Producer-Seq`, +1, +2 …; each line commits as it
//!   arrives (subscribers see it live). Lines and silence are bounded (`body_lines`). The answer comes at the end, or at the first refused
//!   line, with the last producer seq acknowledged; a producer whose stream broke sends again
//!   from there (lines already committed are duplicates).
//! - `GET /v1/agents/{id}/producers/{producer_id}`: the producer's position (epoch, seq, run,
//!   whether that run is open): where a restarted producer picks up.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::body_lines::{BodyLines, LineError};
use super::error::ApiError;
use super::params::parse_agent_id;
use crate::agent::produce::check::parse::{parse_batch, BatchError};
use crate::agent::produce::check::ProducedEvent;
use crate::agent::produce::fence::ProducerHeaders;
use crate::agent::produce::{Appended, Batch, ProduceError, Produced, Producers};

/// A JSON batch body larger than this is refused (413) before it is parsed.
pub const PRODUCE_BODY_BYTES_MAX: usize = 8 * 1024 * 1024;

const PRODUCER_ID: &str = "producer-id";
const PRODUCER_EPOCH: &str = "producer-epoch";
const PRODUCER_SEQ: &str = "producer-seq";

fn headers_of(headers: &HeaderMap) -> Result<ProducerHeaders, ApiError> {
    let get = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    ProducerHeaders::parse(get(PRODUCER_ID), get(PRODUCER_EPOCH), get(PRODUCER_SEQ))
        .map_err(|message| ApiError::bad_request("invalid_producer_headers", message))
}

fn is_ndjson(headers: &HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim_start().starts_with("application/x-ndjson"))
}

/// A refusal as an HTTP answer, with the producer headers the protocol puts on it; `at` names
/// the part of a streamed body it is about (`line 3`, `chunk 5`).
pub fn refusal(error: ProduceError, at: Option<&str>) -> Response {
    let at = |message: String| match at {
        Some(at) => format!("{at}: {message}"),
        None => message,
    };
    let message = at(error.to_string());
    let mut extra: Vec<(&'static str, u64)> = Vec::new();
    let api = match error {
        ProduceError::UnknownAgent(agent_id) => ApiError::unknown_agent(agent_id),
        ProduceError::StaleEpoch { current, .. } => {
            extra.push((PRODUCER_EPOCH, current));
            ApiError::new(StatusCode::FORBIDDEN, "stale_producer_epoch", message)
        }
        ProduceError::Gap { expected, received } => {
            extra.push(("producer-expected-seq", expected));
            extra.push(("producer-received-seq", received));
            ApiError::new(StatusCode::CONFLICT, "producer_seq_gap", message)
        }
        ProduceError::EpochNotAtZero { .. } => {
            ApiError::bad_request("producer_epoch_not_at_zero", message)
        }
        ProduceError::Refused(refusal) if refusal.over_limit => {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "run_limit", message)
        }
        ProduceError::Refused(_) => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_event", message)
        }
        ProduceError::RunInProgress { .. } => {
            ApiError::new(StatusCode::CONFLICT, "run_in_progress", message)
        }
        ProduceError::RunEnded { .. } => ApiError::new(StatusCode::CONFLICT, "run_ended", message),
        ProduceError::CallWaiting { .. } => {
            ApiError::new(StatusCode::CONFLICT, "call_waiting", message)
        }
        ProduceError::Run(error) => ApiError::from(error),
        ProduceError::Store(error) => ApiError::from(error),
        ProduceError::WriterStopped => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "writer_stopped",
            "the server is shutting down; send again to another",
        ),
    };
    let mut response = api.into_response();
    for (name, value) in extra {
        response.headers_mut().insert(HeaderName::from_static(name), HeaderValue::from(value));
    }
    response
}

fn with_position(mut response: Response, headers: &ProducerHeaders, seq: u64) -> Response {
    let fields = response.headers_mut();
    fields.insert(PRODUCER_EPOCH, HeaderValue::from(headers.epoch));
    fields.insert(PRODUCER_SEQ, HeaderValue::from(seq));
    response
}

fn appended_json(appended: &Appended) -> Value {
    json!({
        "run_id": appended.run_id,
        "first_seq": appended.first_seq,
        "last_seq": appended.last_seq,
        "run_open": appended.run_open,
    })
}

pub async fn produce(
    State(producers): State<Arc<Producers>>,
    Path(agent_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let agent_id = match parse_agent_id(&agent_id) {
        Ok(agent_id) => agent_id,
        Err(error) => return error.into_response(),
    };
    let producer = match headers_of(&headers) {
        Ok(producer) => producer,
        Err(error) => return error.into_response(),
    };
    if is_ndjson(&headers) {
        return streamed(&producers, agent_id, producer, body).await;
    }
    let bytes = match axum::body::to_bytes(body, PRODUCE_BODY_BYTES_MAX).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                format!("a batch is {PRODUCE_BODY_BYTES_MAX} bytes at most; send smaller batches"),
            )
            .into_response()
        }
    };
    let items = match batch_of(&bytes) {
        Ok(items) => items,
        Err(error) => return error.into_response(),
    };
    match producers.append(agent_id, &producer, Batch::parsed(items, bytes)).await {
        Ok(Produced::Appended(appended)) => {
            with_position(Json(appended_json(&appended)).into_response(), &producer, producer.seq)
        }
        Ok(Produced::Duplicate) => {
            with_position(StatusCode::NO_CONTENT.into_response(), &producer, producer.seq)
        }
        Err(error) => refusal(error, None),
    }
}

/// A batch's events from its bytes, or the error refusing it.
fn batch_of(bytes: &[u8]) -> Result<Vec<ProducedEvent>, ApiError> {
    parse_batch(bytes).map_err(|error| match error {
        BatchError::NotJson(error) => {
            ApiError::bad_request("invalid_json", format!("the batch is not JSON: {error}"))
        }
        BatchError::Refused(refusal) => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_event", refusal.to_string())
        }
    })
}

/// A streamed body: one batch per line, each committed as it arrives.
async fn streamed(
    producers: &Arc<Producers>,
    agent_id: uuid::Uuid,
    producer: ProducerHeaders,
    body: Body,
) -> Response {
    let mut lines = BodyLines::new(body);
    let mut index = 0usize;
    let mut acknowledged: Option<u64> = None;
    let mut last: Option<Appended> = None;
    let mut duplicates = 0u64;
    // A refusal mid-stream says, in `Producer-Seq`, the last line that was acknowledged.
    let fail = |response: Response, acknowledged: Option<u64>| {
        let mut response = response;
        if let Some(seq) = acknowledged {
            response.headers_mut().insert(PRODUCER_SEQ, HeaderValue::from(seq));
        }
        response
    };
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(error) => {
                let (status, code) = match error {
                    LineError::TooLong => (StatusCode::PAYLOAD_TOO_LARGE, "line_too_large"),
                    LineError::Idle | LineError::OpenTooLong => {
                        (StatusCode::REQUEST_TIMEOUT, "body_idle")
                    }
                    LineError::Broken(_) => (StatusCode::BAD_REQUEST, "body_broken"),
                };
                let message = format!("after {index} lines: {error}");
                return fail(ApiError::new(status, code, message).into_response(), acknowledged);
            }
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let items = match batch_of(&line) {
            Ok(items) => items,
            Err(mut error) => {
                error.message = format!("line {index}: {}", error.message);
                return fail(error.into_response(), acknowledged);
            }
        };
        let headers = ProducerHeaders { seq: producer.seq + index as u64, ..producer.clone() };
        match producers.append(agent_id, &headers, Batch::parsed(items, line)).await {
            Ok(Produced::Appended(appended)) => last = Some(appended),
            Ok(Produced::Duplicate) => duplicates += 1,
            Err(error) => {
                return fail(refusal(error, Some(&format!("line {index}"))), acknowledged);
            }
        }
        acknowledged = Some(headers.seq);
        index += 1;
    }
    let Some(seq) = acknowledged else {
        return ApiError::bad_request("empty_body", "the stream held no batch").into_response();
    };
    let summary = json!({
        "acknowledged_producer_seq": seq,
        "duplicates": duplicates,
        "last": last.as_ref().map(appended_json),
    });
    with_position(Json(summary).into_response(), &producer, seq)
}

/// `GET /v1/agents/{id}/producers/{producer_id}`.
pub async fn position(
    State(producers): State<Arc<Producers>>,
    Path((agent_id, producer_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let agent_id = parse_agent_id(&agent_id)?;
    match producers.position(agent_id, &producer_id).await {
        Ok(Some((stamp, run_open))) => Ok(Json(json!({
            "producer_id": stamp.producer_id,
            "epoch": stamp.epoch,
            "seq": stamp.seq,
            "run_id": stamp.run_id,
            "run_open": run_open,
        }))),
        Ok(None) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_producer",
            format!("producer {producer_id:?} has written nothing to agent {agent_id}"),
        )),
        Err(ProduceError::UnknownAgent(agent_id)) => Err(ApiError::unknown_agent(agent_id)),
        Err(ProduceError::Store(error)) => Err(error.into()),
        Err(other) => Err(ApiError::internal(other)),
    }
}
