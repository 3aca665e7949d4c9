//! Request ids and server spans: every response says `x-request-id`, and every log line
//! written while the request is handled carries it (a span around the handler). A caller's own
//! id (from its proxy or its app) is kept when it is a sensible token, so one id follows the
//! request across systems; otherwise the server makes one. With tracing on, the request is an
//! OpenTelemetry server span, the child of the caller's `traceparent`; what the handler starts
//! (a run) is its child.

use std::future::Future;

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue};
use axum::response::Response;
use opentelemetry::context::FutureExt as _;
use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;
use tracing::Instrument;

use crate::telemetry::{spans::remote_parent, Telemetry, Traced};

pub const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// A caller's id longer than this is replaced by one of the server's.
pub const REQUEST_ID_CHARS_MAX: usize = 128;

/// The caller's id when it is 1–[`REQUEST_ID_CHARS_MAX`] characters of letters, digits and
/// `-_.:`, else `None`.
pub fn accepted(value: &str) -> Option<&str> {
    let sensible = !value.is_empty()
        && value.len() <= REQUEST_ID_CHARS_MAX
        && value.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"-_.:".contains(&byte));
    sensible.then_some(value)
}

/// Part of the edge (`super::edge`), outermost: the request's id and span cover everything
/// below. `route` is the template the request matched (the server span's name).
pub async fn tag<F: Future<Output = Response>>(
    telemetry: &Telemetry,
    route: &str,
    mut request: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    let id = request
        .headers()
        .get(&REQUEST_ID_HEADER)
        .and_then(|value| value.to_str().ok())
        .and_then(accepted)
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
    let header = HeaderValue::from_str(&id).expect("checked or made of hex digits");
    request.headers_mut().insert(REQUEST_ID_HEADER, header.clone());
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        method = %request.method(),
        path = %request.uri().path(),
        trace_id = tracing::field::Empty,
        span_id = tracing::field::Empty,
    );
    let server_span = telemetry.tracer().map(|tracer| {
        let route = route.to_owned();
        let method = request.method().as_str().to_owned();
        Traced::start(
            Some(tracer),
            format!("{method} {route}"),
            SpanKind::Server,
            &remote_parent(request.headers()),
            vec![
                KeyValue::new("http.request.method", method),
                KeyValue::new("http.route", route),
                KeyValue::new("url.path", request.uri().path().to_owned()),
                KeyValue::new("agentstream.request_id", id.clone()),
            ],
        )
    });
    // Log lines of the request name its trace and span, so a log search finds the trace.
    if let Some((trace_id, span_id)) = server_span.as_ref().and_then(Traced::ids) {
        span.record("trace_id", trace_id.as_str());
        span.record("span_id", span_id.as_str());
    }
    let mut response = match &server_span {
        None => next(request).instrument(span.clone()).await,
        Some(traced) => next(request).instrument(span.clone()).with_context(traced.context()).await,
    };
    let status = response.status();
    if status.is_server_error() {
        tracing::warn!(parent: &span, status = status.as_u16(), "answered with a server error");
    } else {
        tracing::debug!(parent: &span, status = status.as_u16(), "answered");
    }
    if let Some(traced) = server_span {
        let status = status.as_u16();
        traced.set(vec![KeyValue::new("http.response.status_code", status as i64)]);
        if status >= 500 {
            traced.fail(&status.to_string());
        }
        traced.end();
    }
    response.headers_mut().insert(REQUEST_ID_HEADER, header);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_ids_are_kept_when_sensible() {
        let long = "a".repeat(REQUEST_ID_CHARS_MAX + 1);
        let cases = [
            ("4bf92f3577b34da6", true),
            ("req-1_2.3:4", true),
            ("", false),
            ("has space", false),
            ("line\nbreak", false),
            ("ünïcode", false),
            (long.as_str(), false),
        ];
        for (value, kept) in cases {
            assert_eq!(accepted(value).is_some(), kept, "{value:?}");
        }
    }
}
