//! Every request body has a read deadline: a client that trickles bytes (or never sends the rest
//! it announced) is answered 408 and lets go of its connection and memory, on every route —
//! also those outside the request timeout because they answer when a run ends. Bodies read as
//! streams (`application/x-ndjson`, `text/event-stream`: a producer's run piped in) are bounded
//! by their idle time and total time instead (`body_lines`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};

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

/// Part of the edge (`super::edge`): the body's chunks stop with an error at the deadline, and the answer is 408
/// whatever the handler made of the broken body.
pub async fn limit<F: Future<Output = Response>>(
    deadline_ms: u64,
    request: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    let bodiless = matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if bodiless || streamed(&request) {
        return next(request).await;
    }
    let expired = Arc::new(AtomicBool::new(false));
    let (parts, body) = request.into_parts();
    let body = Deadlined {
        inner: body,
        deadline: tokio::time::Instant::now() + Duration::from_millis(deadline_ms),
        sleep: None,
        expired: expired.clone(),
        deadline_ms,
        ended: false,
    };
    let request = Request::from_parts(parts, Body::new(body));
    let response = next(request).await;
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

/// A body whose frames stop with an error at the deadline. The timer is made only when a frame
/// is not there at once: a small body that came with its head never sets one.
struct Deadlined {
    inner: Body,
    deadline: tokio::time::Instant,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    expired: Arc<AtomicBool>,
    deadline_ms: u64,
    /// The deadline passed: no frame after the error.
    ended: bool,
}

impl HttpBody for Deadlined {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(context) {
            return Poll::Ready(frame);
        }
        let deadline = this.deadline;
        let sleep = this.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match sleep.as_mut().poll(context) {
            Poll::Ready(()) => {
                this.expired.store(true, Ordering::Release);
                this.ended = true;
                Poll::Ready(Some(Err(axum::Error::new(TimedOut(this.deadline_ms)))))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[derive(Debug)]
struct TimedOut(u64);

impl std::fmt::Display for TimedOut {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "the request body did not arrive within {} ms", self.0)
    }
}

impl std::error::Error for TimedOut {}
