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
mod read;
mod refusal;
mod response;
pub mod service;
mod source;
mod state;

use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};

use protocol::Settings;
use protocol::{format_offset, read_query};
use read::read_source;
use refusal::Refusal;
use response::{header_text, refused, secured, text, with, STREAM_CLOSED, STREAM_NEXT_OFFSET};
use service::Append;
pub use state::DurableState;

/// An append's (or a create's) body, at most. Larger is 413.
pub const STREAM_BODY_BYTES_MAX: usize = 8 * 1024 * 1024;

/// `/v1/streams/{path}`, every method (the route the router keeps for paths with escapes).
pub async fn stream(
    State(state): State<DurableState>,
    method: Method,
    Path(path): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let asked = Asked { method: &method, path: &path, query: query.as_deref(), headers: &headers };
    answer(&state, asked, &body).await
}

/// A request's head as both ways in take it: the router's extractors ([`stream`]) or the
/// request borrowed whole ([`serve`]).
#[derive(Clone, Copy)]
struct Asked<'a> {
    method: &'a Method,
    /// The stream's path (after [`STREAMS_PREFIX`]).
    path: &'a str,
    query: Option<&'a str>,
    headers: &'a HeaderMap,
}

/// Where the streams live.
pub const STREAMS_PREFIX: &str = "/v1/streams/";

/// The stream a request's path names, when [`serve`] can take it as the router's route would:
/// a path after [`STREAMS_PREFIX`] with no `%` escape (those the router's `Path` decodes, or
/// refuses).
pub fn stream_path(path: &str) -> Option<&str> {
    path.strip_prefix(STREAMS_PREFIX).filter(|rest| !rest.is_empty() && !rest.contains('%'))
}

/// `/v1/streams/{path}` for a request the router never saw (`router/fast.rs`): what [`stream`]
/// answers, with the request's head borrowed instead of extracted piece by piece and the body
/// read here — at most [`STREAM_BODY_BYTES_MAX`], refused as the router's body extractor
/// refuses (413, or 400 for a body that broke off).
pub async fn serve(state: &DurableState, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Some(path) = stream_path(parts.uri.path()) else {
        return text(StatusCode::NOT_FOUND, "Not a stream's path");
    };
    let body = match read_body(body).await {
        Ok(body) => body,
        Err((status, reason)) => {
            let message = format!("Failed to buffer the request body: {reason}");
            return (status, message).into_response();
        }
    };
    let asked =
        Asked { method: &parts.method, path, query: parts.uri.query(), headers: &parts.headers };
    answer(state, asked, &body).await
}

/// The body's bytes, at most [`STREAM_BODY_BYTES_MAX`]; one frame (a small append) is taken as
/// it came, without a copy. A body announced longer is read up to the bound before it is
/// refused, as the router's extractor does: refused at once, a client still sending it (Node's
/// `fetch` of 10 MiB) saw the connection close instead of the 413.
async fn read_body(mut body: Body) -> Result<Bytes, (StatusCode, String)> {
    use http_body::Body as _;
    let too_large = || (StatusCode::PAYLOAD_TOO_LARGE, "length limit exceeded".to_owned());
    let mut first: Option<Bytes> = None;
    let mut joined: Vec<u8> = Vec::new();
    while let Some(frame) =
        std::future::poll_fn(|context| std::pin::Pin::new(&mut body).poll_frame(context)).await
    {
        let frame = frame.map_err(|error| (StatusCode::BAD_REQUEST, error.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let read = first.as_ref().map_or(0, Bytes::len) + joined.len() + data.len();
        if read > STREAM_BODY_BYTES_MAX {
            return Err(too_large());
        }
        match first.take() {
            None if joined.is_empty() => first = Some(data),
            earlier => {
                joined.extend_from_slice(earlier.as_deref().unwrap_or_default());
                joined.extend_from_slice(&data);
            }
        }
    }
    Ok(first.unwrap_or_else(|| Bytes::from(joined)))
}

async fn answer(state: &DurableState, asked: Asked<'_>, body: &Bytes) -> Response {
    let Asked { method, path, query, headers } = asked;
    let response = match protocol::agent_of(path) {
        Some(agent) => agent::handle(state, method, agent, query, headers).await,
        None => handle(state, asked, body).await,
    };
    secured(response)
}

async fn handle(state: &DurableState, asked: Asked<'_>, body: &Bytes) -> Response {
    let Asked { method, path, query, headers } = asked;
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

async fn create(
    state: &DurableState,
    path: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, Refusal> {
    let ttl = header_text(headers, "stream-ttl");
    let expires_at = header_text(headers, "stream-expires-at");
    if ttl.is_some() && expires_at.is_some() {
        return Err(Refusal::Bad("Cannot specify both Stream-TTL and Stream-Expires-At"));
    }
    let ttl_seconds = ttl.map(protocol::parse_ttl).transpose().map_err(Refusal::Bad)?;
    if let Some(expires_at) = expires_at {
        protocol::parse_expires_at(expires_at).map_err(Refusal::Bad)?;
    }
    let fork = protocol::fork_request(
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
    let status = if made { StatusCode::CREATED } else { StatusCode::OK };
    let mut response = (status, [(header::CONTENT_TYPE, row.content_type.clone())]).into_response();
    response = with(response, STREAM_NEXT_OFFSET, format_offset(tail));
    if made {
        // Absolute, as the protocol asks: where the client reached this server.
        let scheme = header_text(headers, "x-forwarded-proto").unwrap_or("http");
        let host = header_text(headers, "host").unwrap_or("localhost");
        response = with(response, "location", format!("{scheme}://{host}/v1/streams/{path}"));
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
    if let (Some(epoch), Some(seq)) =
        (header_text(headers, "producer-epoch").filter(|_| by_producer), appended.producer_seq)
    {
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

async fn read(
    state: &DurableState,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Result<Response, Refusal> {
    let query = read_query(query).map_err(Refusal::Bad)?;
    let mut row = state.service.live(path).await?;
    state.service.touch(&mut row).await?;
    read_source(state, source::Source::Stream(Box::new(row)), query, headers).await
}
