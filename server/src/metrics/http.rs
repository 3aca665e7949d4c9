//! HTTP requests as metrics: counted by route template (never the path itself: ids would make
//! every request a series of its own), method and status class; timed to the response's head;
//! and the bytes of every response body, by the surface its route belongs to.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{MatchedPath, Request};
use axum::response::Response;

use super::labels::bounded;
use super::{HttpLabels, Metrics, RouteLabel};

/// Methods with a label of their own.
const METHODS: &[&str] = &["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"];

/// The label of a route no route matched (a 404 from a fallback): one series for all of them.
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// The client protocol a route template belongs to.
pub fn surface_of(route: &str) -> &'static str {
    let letta = route.starts_with("/v1/agents/{id}/messages") && !route.ends_with("/cancel")
        || route == "/v1/runs/{run_id}/stream";
    if route.starts_with("/v1/ai-sdk") {
        "ai_sdk"
    } else if route.starts_with("/v1/ag-ui") {
        "ag_ui"
    } else if route.starts_with("/v1/responses") {
        "responses"
    } else if letta {
        "letta"
    } else if route == "/v1/ws" {
        "websocket"
    } else if route == "/metrics" {
        "metrics"
    } else if route.starts_with("/v1/") {
        "native"
    } else {
        "pages"
    }
}

/// `5xx` for 503 and so on.
pub fn status_class(status: u16) -> &'static str {
    match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}

/// The route template a request matched ([`UNMATCHED_ROUTE`] when none did): known to a
/// route layer from the router's `MatchedPath`.
pub fn route_of(request: &Request) -> Arc<str> {
    request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| Arc::from(UNMATCHED_ROUTE), |path| Arc::from(path.as_str()))
}

/// Part of the edge (`crate::http::edge`), which knows the request's route template.
pub async fn observe<F: Future<Output = Response>>(
    metrics: &Metrics,
    route: Arc<str>,
    request: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    let started = std::time::Instant::now();
    let method = bounded(request.method().as_str(), METHODS);
    let response = next(request).await;
    let surface = surface_of(&route);
    metrics
        .http_requests
        .get_or_create(&HttpLabels {
            route: route.clone(),
            method,
            status_class: status_class(response.status().as_u16()),
        })
        .inc();
    metrics
        .http_request_duration
        .get_or_create(&RouteLabel { route })
        .observe(started.elapsed().as_secs_f64());
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, Body::new(Counted { inner: body, sent: metrics.sent_on(surface) }))
}

/// A response body that counts the bytes it sends.
struct Counted {
    inner: Body,
    sent: super::Sent,
}

impl HttpBody for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(context);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                self.sent.frame(data.len());
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_belong_to_their_surface() {
        let cases = [
            ("/v1/agents/{id}/events/stream", "native"),
            ("/v1/agents/{id}/events", "native"),
            ("/v1/agents/{id}/messages/cancel", "native"),
            ("/v1/agents/{id}/messages", "letta"),
            ("/v1/agents/{id}/messages/stream", "letta"),
            ("/v1/runs/{run_id}/stream", "letta"),
            ("/v1/runs/{run_id}", "native"),
            ("/v1/ai-sdk/chat/{id}/stream", "ai_sdk"),
            ("/v1/ag-ui/connect", "ag_ui"),
            ("/v1/responses/{id}", "responses"),
            ("/v1/responses", "responses"),
            ("/v1/ws", "websocket"),
            ("/metrics", "metrics"),
            ("/agents/{id}/history", "pages"),
            (UNMATCHED_ROUTE, "pages"),
        ];
        for (route, surface) in cases {
            assert_eq!(surface_of(route), surface, "{route}");
        }
    }

    #[test]
    fn statuses_fall_in_classes() {
        for (status, class) in
            [(101, "1xx"), (200, "2xx"), (304, "3xx"), (404, "4xx"), (503, "5xx")]
        {
            assert_eq!(status_class(status), class);
        }
    }
}
