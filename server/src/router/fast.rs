//! The Durable Streams path past the router: a request for `/v1/streams/{path}` goes through
//! the edge's steps (`http::edge::run`, the same functions the router's middleware runs) straight
//! to the surface's handler; every other request goes to the router.
//!
//! **Why.** A single append's CPU under load was ~30 % the router's: each `Router::layer` wraps
//! the route in a boxed service whose future is moved and boxed per request (the nested
//! `/v1` router, the body-limit layers, the edge), the extractors clone the headers and the
//! path, and the futures are large (copying them was the largest single cost). Here the
//! request goes from hyper to the handler in one future.
//!
//! **What stays the same.** The edge (request id and span, metrics under the route's template,
//! security headers, cross-site refusal, token check, body deadline), the body limit and its
//! refusals, and what the router's top level does to every answer (a `content-length` from an
//! exact body, no body for `HEAD`). A path with a `%` escape, or none after the prefix, goes to
//! the router, which decodes or refuses it as before.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, Method};
use axum::response::Response;
use axum::Router;
use futures::future::{BoxFuture, Either};
use http_body::Body as _;
use tower::Service;

use crate::http::edge::{self, Edge};
use crate::surfaces::durable::{self, DurableState};

/// The template the streams' requests are counted and traced under (the router's name for the
/// route it keeps for them).
pub const STREAMS_ROUTE: &str = "/v1/streams/{*path}";

/// The application's service: the streams' path, else the router.
#[derive(Clone)]
pub struct Fast {
    router: Router,
    streams: Arc<Streams>,
}

struct Streams {
    edge: Edge,
    state: DurableState,
    route: Arc<str>,
}

impl Fast {
    pub fn new(router: Router, edge: Edge, state: DurableState) -> Fast {
        Fast { router, streams: Arc::new(Streams { edge, state, route: Arc::from(STREAMS_ROUTE) }) }
    }
}

impl Service<Request> for Fast {
    type Response = Response;
    type Error = Infallible;
    type Future = Either<
        <Router as Service<Request>>::Future,
        BoxFuture<'static, Result<Response, Infallible>>,
    >;

    fn poll_ready(&mut self, _context: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The router is always ready, and so is the streams' path.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        if durable::stream_path(request.uri().path()).is_none() {
            return Either::Left(self.router.call(request));
        }
        let streams = self.streams.clone();
        Either::Right(Box::pin(async move { Ok(streams.serve(request).await) }))
    }
}

impl Streams {
    async fn serve(&self, request: Request) -> Response {
        let head = request.method() == Method::HEAD;
        let state = &self.state;
        let mut response = edge::run(&self.edge, self.route.clone(), request, |request| {
            durable::serve(state, request)
        })
        .await;
        finish(&mut response, head);
        response
    }
}

/// What the router's top level does to every answer: the length of an exact body when none is
/// set, and for `HEAD` the head alone.
fn finish(response: &mut Response, head: bool) {
    if !response.headers().contains_key(header::CONTENT_LENGTH) {
        if let Some(length) = response.body().size_hint().exact() {
            response.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        }
    }
    if head {
        *response.body_mut() = Body::empty();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_stream_paths_skip_the_router() {
        let cases = [
            ("/v1/streams/a", Some("a")),
            ("/v1/streams/chats/room-1", Some("chats/room-1")),
            ("/v1/streams/agents/0000", Some("agents/0000")),
            ("/v1/streams/a/", Some("a/")),
            ("/v1/streams/", None),
            ("/v1/streams", None),
            ("/v1/streams/a%20b", None),
            ("/v1/agents", None),
            ("/v1/streamsx/a", None),
        ];
        for (path, expected) in cases {
            assert_eq!(durable::stream_path(path), expected, "{path}");
        }
    }

    #[test]
    fn answers_get_what_the_routers_top_level_gives_them() {
        let cases = [
            // (body, content-length set by the handler, HEAD) → (content-length, body left)
            ("abc", None, false, Some("3"), "abc"),
            ("abc", None, true, Some("3"), ""),
            ("", None, true, Some("0"), ""),
            ("abc", Some("7"), true, Some("7"), ""),
        ];
        for (body, given, head, length, left) in cases {
            let mut response = Response::new(Body::from(body));
            if let Some(given) = given {
                response
                    .headers_mut()
                    .insert(header::CONTENT_LENGTH, HeaderValue::from_static(given));
            }
            finish(&mut response, head);
            let got =
                response.headers().get(header::CONTENT_LENGTH).map(|value| value.to_str().unwrap());
            assert_eq!(got, length, "{body} {head}");
            let bytes = futures::executor::block_on(axum::body::to_bytes(
                std::mem::take(response.body_mut()),
                usize::MAX,
            ))
            .unwrap();
            assert_eq!(bytes, left.as_bytes(), "{body} {head}");
        }
    }
}
