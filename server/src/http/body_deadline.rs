//! Every request body has a read deadline: a client that trickles bytes (or never sends the rest
//! it announced) is answered 408 and lets go of its connection and memory, on every route —
//! also those outside the request timeout because they answer when a run ends. Bodies read as
//! streams (`application/x-ndjson`, `text/event-stream`: a producer's run piped in) are bounded
//! by their idle time and total time instead (`body_lines`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use super::error::ApiError;

/// True for bodies read as streams, line by line, with their own bounds.
fn streamed(request: &Request) -> bool {
    request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(|value| value.trim_start().to_ascii_lowercase())
        .is_some_and(|value| {
            value.starts_with("application/x-ndjson") || value.starts_with("text/event-stream")
        })
}

/// The middleware: the body's chunks stop with an error at the deadline, and the answer is 408
/// whatever the handler made of the broken body.
pub async fn limit(State(deadline_ms): State<u64>, request: Request, next: Next) -> Response {
    let bodiless = matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if bodiless || streamed(&request) {
        return next.run(request).await;
    }
    let expired = Arc::new(AtomicBool::new(false));
    let deadline = tokio::time::Instant::now() + Duration::from_millis(deadline_ms);
    let (parts, body) = request.into_parts();
    let chunks = body.into_data_stream();
    let flag = expired.clone();
    let bounded = futures::stream::unfold(Some(chunks), move |chunks| {
        let flag = flag.clone();
        async move {
            let mut chunks = chunks?;
            tokio::select! {
                chunk = chunks.next() => chunk.map(|chunk| (chunk, Some(chunks))),
                () = tokio::time::sleep_until(deadline) => {
                    flag.store(true, Ordering::Release);
                    Some((Err(axum::Error::new(TimedOut(deadline_ms))), None))
                }
            }
        }
    });
    let request = Request::from_parts(parts, Body::from_stream(bounded));
    let response = next.run(request).await;
    if expired.load(Ordering::Acquire) {
        return ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            format!("the request body did not arrive within {deadline_ms} ms"),
        )
        .into_response();
    }
    response
}

#[derive(Debug)]
struct TimedOut(u64);

impl std::fmt::Display for TimedOut {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "the request body did not arrive within {} ms",
            self.0
        )
    }
}

impl std::error::Error for TimedOut {}
