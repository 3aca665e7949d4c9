//! A Durable Streams answer's parts: the protocol's header names, plain-text answers, headers
//! added one by one, the browser security headers, a refusal as its status, and an answer
//! carrying messages (with its ETag and offsets).

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::messages;
use super::protocol::{self, format_offset};
use super::refusal::Refusal;
use super::source::Source;
use crate::agent::produce::fence::Fence;

pub const STREAM_NEXT_OFFSET: &str = "stream-next-offset";
pub const STREAM_UP_TO_DATE: &str = "stream-up-to-date";
pub const STREAM_CLOSED: &str = "stream-closed";
pub const STREAM_CURSOR: &str = "stream-cursor";

/// The browser security headers every answer carries.
pub fn secured(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert("cross-origin-resource-policy", HeaderValue::from_static("cross-origin"));
    response
}

/// A plain-text answer.
pub fn text(status: StatusCode, message: &str) -> Response {
    (status, [(header::CONTENT_TYPE, "text/plain")], message.to_owned()).into_response()
}

pub fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// Adds `name: value` to a response's headers.
pub fn with(mut response: Response, name: &'static str, value: String) -> Response {
    if let Ok(value) = HeaderValue::from_str(&value) {
        response.headers_mut().insert(HeaderName::from_static(name), value);
    }
    response
}

/// A refusal as the protocol answers it.
pub fn refused(refusal: Refusal) -> Response {
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
        Refusal::Fenced(Fence::EpochNotAtZero { .. }) => {
            text(StatusCode::BAD_REQUEST, "New epoch must start with sequence 0")
        }
        Refusal::Fenced(Fence::Gap { expected, received }) => {
            let response = text(StatusCode::CONFLICT, "Producer sequence gap");
            let response = with(response, "producer-expected-seq", expected.to_string());
            with(response, "producer-received-seq", received.to_string())
        }
        Refusal::Fenced(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "unexpected fence"),
        Refusal::Store(error) => {
            tracing::warn!(%error, "a durable stream's store operation failed");
            text(StatusCode::SERVICE_UNAVAILABLE, "the store is unavailable; retry")
        }
    }
}

/// An answer carrying `source`'s messages (or none, at the tail); `start` is the offset the
/// reader asked from, as it wrote it.
pub(super) fn messages_response(
    source: &Source,
    messages: messages::Messages,
    tail: u64,
    start: &str,
    if_none_match: Option<&str>,
) -> Response {
    let (path, content_type) = (source.path(), source.content_type());
    // After the last message given, or the tail when none is (also past it).
    let next = messages.last_offset().unwrap_or(tail);
    let at_tail = next >= tail;
    let closed = source.closed() && at_tail;
    let etag = protocol::etag(path, start, &format_offset(next), closed);
    if if_none_match == Some(etag.as_str()) {
        return with(StatusCode::NOT_MODIFIED.into_response(), "etag", etag);
    }
    let body = protocol::body(content_type, messages);
    let mut response =
        (StatusCode::OK, [(header::CONTENT_TYPE, content_type.to_owned())], Body::from(body))
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
