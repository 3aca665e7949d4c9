//! The edge: what every route's request goes through before its handler, as one middleware.
//! Outermost first: the request's id and span (`request_id`), its metrics (`metrics::http`; a
//! refusal is counted under the route it was aimed at), the security headers on every answer,
//! the cross-site refusal (`cross_site`), the token check (`auth`), the body's read deadline
//! (`body_deadline`).
//!
//! One middleware, not six: each `from_fn` layer boxed its inner service and its future, per
//! request, and moved the request between them (merged, with the body deadline's lazy timer, a
//! single append's server CPU fell 10–15 %: ARCHITECTURE.md, `edge.rs`). Here the steps are
//! plain async functions nested in one future.

use std::future::Future;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

use super::{auth, body_deadline, cross_site, request_id};
use crate::metrics::Metrics;
use crate::telemetry::Telemetry;

/// What the edge's steps need, built once with the router.
#[derive(Clone)]
pub struct Edge {
    pub telemetry: Arc<Telemetry>,
    pub metrics: Arc<Metrics>,
    pub access: auth::Access,
    pub body_read_ms_max: u64,
}

/// The middleware (a route layer, so the matched route's template is known to the metrics and
/// the span).
pub async fn edge(State(edge): State<Edge>, request: Request, next: Next) -> Response {
    let route = crate::metrics::http::route_of(&request);
    run(&edge, route, request, |request| next.run(request)).await
}

/// Every step of the edge around `handler`, for a request that matched `route`: the router's
/// middleware above, and the Durable Streams path that skips the router (`router/fast.rs`).
pub async fn run<F: Future<Output = Response>>(
    edge: &Edge,
    route: Arc<str>,
    request: Request,
    handler: impl FnOnce(Request) -> F,
) -> Response {
    request_id::tag(&edge.telemetry, &route.clone(), request, |request| {
        crate::metrics::http::observe(&edge.metrics, route, request, |request| async move {
            security_headers(admit(edge, request, handler).await)
        })
    })
    .await
}

/// The refusals, then the handler.
async fn admit<F: Future<Output = Response>>(
    edge: &Edge,
    request: Request,
    handler: impl FnOnce(Request) -> F,
) -> Response {
    let allowed_origins = &edge.access.allowed_origins;
    if let Err(message) = cross_site::check(request.method(), request.headers(), allowed_origins) {
        return cross_site::refused(message);
    }
    auth::require_token(&edge.access, request, |request| {
        body_deadline::limit(edge.body_read_ms_max, request, handler)
    })
    .await
}

/// Headers every response carries: the browser must not guess content types (`nosniff`), no
/// other site may frame these pages — a framed live view could be clicked into approving a tool
/// call (`frame-ancestors 'none'`, and `X-Frame-Options` for older browsers) — and no address
/// (which may hold `?token=`) leaves as a referrer.
fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // A page sends its own, whole policy (scripts by nonce: app/src/pages/mod.rs); the rest
    // only forbid framing.
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("frame-ancestors 'none'"),
        );
    }
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}
