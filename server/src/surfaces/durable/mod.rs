//! The Durable Streams protocol (PROTOCOL.md 1.0) at `/v1/streams/{path}`: general streams —
//! create, append (with `Stream-Seq` and idempotent producers), close, read from any offset,
//! long-poll and SSE, HEAD, DELETE, JSON and byte mode — kept in the log engine
//! (`service.rs`), and every agent's log as a read-only JSON stream at
//! `/v1/streams/agents/{agent_id}` whose messages are the agent's events as the native API
//! sends them (`agent.rs`). `protocol.rs` holds the pure parts; `live.rs` the waiting reads.

mod agent;
mod fork;
mod live;
pub mod messages;
pub mod protocol;
pub mod service;

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::agent::produce::fence::Fence;
use crate::delivery::hub::Hub;
use crate::store::Store;
use protocol::{format_offset, Offset};
use service::{Append, Refusal, Service, Settings};

/// An append's (or a create's) body, at most. Larger is 413.
pub const STREAM_BODY_BYTES_MAX: usize = 8 * 1024 * 1024;

pub const STREAM_NEXT_OFFSET: &str = "stream-next-offset";
pub const STREAM_UP_TO_DATE: &str = "stream-up-to-date";
pub const STREAM_CLOSED: &str = "stream-closed";
pub const STREAM_CURSOR: &str = "stream-cursor";

/// What the handlers see.
#[derive(Clone)]
pub struct DurableState {
    pub store: Arc<dyn Store>,
    pub hub: Arc<Hub>,
    pub service: Arc<Service>,
    pub sse_streams: Arc<Semaphore>,
    pub sse_streams_max: usize,
    pub shutdown: CancellationToken,
}

/// `/v1/streams/{path}`, every method.
pub async fn stream(
    State(state): State<DurableState>,
    method: Method,
    Path(path): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let response = match agent::agent_of(&path) {
        Some(agent) => agent::handle(&state, &method, agent, query.as_deref(), &headers).await,
        None => handle(&state, &method, &path, query.as_deref(), &headers, &body).await,
    };
    secured(response)
}

/// The browser security headers every answer carries.
fn secured(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("cross-origin"),
    );
    response
}

/// A plain-text answer.
pub(crate) fn text(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain")],
        message.to_owned(),
    )
        .into_response()
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// Adds `name: value` to a response's headers.
pub(crate) fn with(mut response: Response, name: &'static str, value: String) -> Response {
    if let Ok(value) = HeaderValue::from_str(&value) {
        response
            .headers_mut()
            .insert(HeaderName::from_static(name), value);
    }
    response
}

async fn handle(
    state: &DurableState,
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let result = match *method {
        Method::PUT => create(state, path, headers, body).await,
        Method::POST => append(state, path, headers, body).await,
        Method::GET => read(state, path, query, headers).await,
        Method::HEAD => head(state, path).await,
        Method::DELETE => delete(state, path).await,
        _ => Ok(text(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed")),
    };
    result.unwrap_or_else(refused)
}

/// A refusal as the protocol answers it.
fn refused(refusal: Refusal) -> Response {
    match refusal {
        Refusal::NotFound => text(StatusCode::NOT_FOUND, "Stream not found"),
        Refusal::NotFoundSource => text(StatusCode::NOT_FOUND, "Source stream not found"),
        Refusal::Gone => text(StatusCode::GONE, "Stream is gone"),
        Refusal::Conflict(why) => text(StatusCode::CONFLICT, why),
        Refusal::Bad(why) => text(StatusCode::BAD_REQUEST, why),
        Refusal::Closed { tail } => {
            let response = text(StatusCode::CONFLICT, "Stream is closed");
            let response = with(response, STREAM_CLOSED, "true".into());
            with(response, STREAM_NEXT_OFFSET, format_offset(tail))
        }
        Refusal::Fenced(Fence::StaleEpoch { current }) => with(
            text(StatusCode::FORBIDDEN, "Stale producer epoch"),
            "producer-epoch",
            current.to_string(),
        ),
        Refusal::Fenced(Fence::EpochNotAtZero { .. }) => text(
            StatusCode::BAD_REQUEST,
            "New epoch must start with sequence 0",
        ),
        Refusal::Fenced(Fence::Gap { expected, received }) => {
            let response = text(StatusCode::CONFLICT, "Producer sequence gap");
            let response = with(response, "producer-expected-seq", expected.to_string());
            with(response, "producer-received-seq", received.to_string())
        }
        Refusal::Fenced(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "unexpected fence"),
        Refusal::Store(error) => {
            tracing::warn!(%error, "a durable stream's store operation failed");
            text(
                StatusCode::SERVICE_UNAVAILABLE,
                "the store is unavailable; retry",
            )
        }
    }
}

async fn create(
    state: &DurableState,
    path: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, Refusal> {
    let ttl = header_text(headers, "stream-ttl");
    let expires_at = header_text(headers, "stream-expires-at");
    if ttl.is_some() && expires_at.is_some() {
        return Err(Refusal::Bad(
            "Cannot specify both Stream-TTL and Stream-Expires-At",
        ));
    }
    let ttl_seconds = ttl
        .map(protocol::parse_ttl)
        .transpose()
        .map_err(Refusal::Bad)?;
    if let Some(expires_at) = expires_at {
        protocol::parse_expires_at(expires_at).map_err(Refusal::Bad)?;
    }
    let fork = fork::fork_request(
        header_text(headers, "stream-forked-from"),
        header_text(headers, "stream-fork-offset"),
        header_text(headers, "stream-fork-sub-offset"),
    )
    .map_err(Refusal::Bad)?;
    let settings = Settings {
        content_type: protocol::create_content_type(header_text(headers, "content-type")),
        ttl_seconds,
        expires_at: expires_at.map(str::to_owned),
        closed: header_text(headers, "stream-closed") == Some("true"),
        fork,
    };
    let (row, made) = state.service.create(path, settings, body).await?;
    let tail = state.service.tail(&row).await?;
    let status = if made {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut response = (status, [(header::CONTENT_TYPE, row.content_type.clone())]).into_response();
    response = with(response, STREAM_NEXT_OFFSET, format_offset(tail));
    if made {
        // Absolute, as the protocol asks: where the client reached this server.
        let scheme = header_text(headers, "x-forwarded-proto").unwrap_or("http");
        let host = header_text(headers, "host").unwrap_or("localhost");
        response = with(
            response,
            "location",
            format!("{scheme}://{host}/v1/streams/{path}"),
        );
    }
    if row.closed {
        response = with(response, STREAM_CLOSED, "true".into());
    }
    Ok(response)
}

async fn append(
    state: &DurableState,
    path: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, Refusal> {
    let producer = protocol::producer_headers(
        header_text(headers, "producer-id"),
        header_text(headers, "producer-epoch"),
        header_text(headers, "producer-seq"),
    )
    .map_err(Refusal::Bad)?;
    let close = header_text(headers, "stream-closed") == Some("true");
    let by_producer = producer.is_some();
    let appended = state
        .service
        .append(
            path,
            Append {
                body,
                content_type: header_text(headers, "content-type"),
                stream_seq: header_text(headers, "stream-seq"),
                producer,
                close,
            },
        )
        .await?;
    let status = if by_producer && !appended.duplicate && !(body.is_empty() && close) {
        StatusCode::OK
    } else {
        StatusCode::NO_CONTENT
    };
    let mut response = status.into_response();
    response = with(response, STREAM_NEXT_OFFSET, format_offset(appended.tail));
    if appended.closed {
        response = with(response, STREAM_CLOSED, "true".into());
    }
    if let (Some(epoch), Some(seq)) = (
        header_text(headers, "producer-epoch").filter(|_| by_producer),
        appended.producer_seq,
    ) {
        response = with(response, "producer-epoch", epoch.to_owned());
        response = with(response, "producer-seq", seq.to_string());
    }
    Ok(response)
}

async fn head(state: &DurableState, path: &str) -> Result<Response, Refusal> {
    let row = state.service.live(path).await?;
    let tail = state.service.tail(&row).await?;
    let mut response = (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, row.content_type.clone()),
            (header::CACHE_CONTROL, "no-store".to_owned()),
        ],
    )
        .into_response();
    response = with(response, STREAM_NEXT_OFFSET, format_offset(tail));
    if row.closed {
        response = with(response, STREAM_CLOSED, "true".into());
    }
    if let Some(ttl) = row.ttl_seconds {
        response = with(response, "stream-ttl", ttl.to_string());
    }
    if let Some(expires_at) = &row.expires_at {
        response = with(response, "stream-expires-at", expires_at.clone());
    }
    let etag = protocol::etag(path, "-1", &format_offset(tail), row.closed);
    Ok(with(response, "etag", etag))
}

async fn delete(state: &DurableState, path: &str) -> Result<Response, Refusal> {
    state.service.delete(path).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// A read's query: `offset`, `live`, `cursor`.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ReadQuery {
    pub offset: Option<Offset>,
    /// The offset as the client wrote it (the ETag names it).
    pub offset_text: Option<String>,
    pub live: Option<Live>,
    pub cursor: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Live {
    LongPoll,
    Sse,
}

pub(crate) fn read_query(query: Option<&str>) -> Result<ReadQuery, &'static str> {
    let mut read = ReadQuery::default();
    let mut offsets = 0;
    for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match key.as_ref() {
            "offset" => {
                offsets += 1;
                if offsets > 1 {
                    return Err("Multiple offset parameters not allowed");
                }
                read.offset = Some(Offset::parse(&value)?);
                read.offset_text = Some(value.into_owned());
            }
            "live" => {
                read.live = match value.as_ref() {
                    "long-poll" => Some(Live::LongPoll),
                    "sse" => Some(Live::Sse),
                    "" | "false" => None,
                    _ => return Err("Invalid live parameter: use long-poll or sse"),
                }
            }
            "cursor" => read.cursor = Some(value.into_owned()),
            _ => {}
        }
    }
    match (read.live, read.offset) {
        (Some(Live::Sse), None) => Err("SSE requires offset parameter"),
        (Some(Live::LongPoll), None) => Err("Long-poll requires offset parameter"),
        _ => Ok(read),
    }
}

async fn read(
    state: &DurableState,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Result<Response, Refusal> {
    let query = read_query(query).map_err(Refusal::Bad)?;
    let mut row = state.service.live(path).await?;
    state.service.touch(&mut row).await?;
    read_source(state, live::Source::Stream(Box::new(row)), query, headers).await
}

/// A read of `source`, live or not.
pub(crate) async fn read_source(
    state: &DurableState,
    source: live::Source,
    query: ReadQuery,
    headers: &HeaderMap,
) -> Result<Response, Refusal> {
    match query.live {
        Some(Live::Sse) => Ok(live::sse(state, source, query).await),
        Some(Live::LongPoll) => live::long_poll(state, source, query).await,
        None => catch_up(state, &source, &query, headers).await,
    }
}

/// A read that answers with what is there.
async fn catch_up(
    state: &DurableState,
    source: &live::Source,
    query: &ReadQuery,
    headers: &HeaderMap,
) -> Result<Response, Refusal> {
    if query.offset == Some(Offset::Now) {
        let (_, tail) = source.read(state, u64::MAX).await?;
        let body = if protocol::is_json(source.content_type()) {
            "[]"
        } else {
            ""
        };
        let mut response = (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, source.content_type().to_owned()),
                (header::CACHE_CONTROL, "no-store".to_owned()),
            ],
            body,
        )
            .into_response();
        response = with(response, STREAM_NEXT_OFFSET, format_offset(tail));
        response = with(response, STREAM_UP_TO_DATE, "true".into());
        if source.closed() {
            response = with(response, STREAM_CLOSED, "true".into());
        }
        return Ok(response);
    }
    let since = match query.offset {
        Some(Offset::After(seq)) => seq,
        _ => 0,
    };
    let (messages, tail) = source.read(state, since).await?;
    let last = messages.last_offset();
    Ok(messages_response(
        source.path(),
        source.content_type(),
        source.closed(),
        &messages,
        last,
        tail,
        query.offset_text.as_deref().unwrap_or("-1"),
        header_text(headers, "if-none-match"),
    ))
}

/// An answer carrying messages (or none, at the tail).
#[allow(clippy::too_many_arguments)]
pub(crate) fn messages_response(
    path: &str,
    content_type: &str,
    closed: bool,
    messages: &messages::Messages,
    last: Option<u64>,
    tail: u64,
    start: &str,
    if_none_match: Option<&str>,
) -> Response {
    // After the last message given, or the tail when none is (also past it).
    let next = last.unwrap_or(tail);
    let at_tail = next >= tail;
    let closed = closed && at_tail;
    let etag = protocol::etag(path, start, &format_offset(next), closed);
    if if_none_match == Some(etag.as_str()) {
        return with(StatusCode::NOT_MODIFIED.into_response(), "etag", etag);
    }
    let body = protocol::body(content_type, messages);
    let mut response = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, content_type.to_owned())],
        Body::from(body),
    )
        .into_response();
    response = with(response, STREAM_NEXT_OFFSET, format_offset(next));
    if at_tail {
        response = with(response, STREAM_UP_TO_DATE, "true".into());
    }
    if closed {
        response = with(response, STREAM_CLOSED, "true".into());
    }
    with(response, "etag", etag)
}

#[cfg(test)]
mod tests;
