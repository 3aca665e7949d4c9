//! CORS: pages of the origins in `AGENTSTREAM_ALLOWED_ORIGINS` (a React or Next.js app on its own
//! origin, CopilotKit, a mobile web view) may call every route from the browser.
//!
//! A listed origin gets its preflight answered and `Access-Control-Allow-Origin` echoed (never
//! `*`); an unlisted one gets no CORS headers, so the browser keeps the answer from its script.
//! Credentials (cookies) are **not** allowed across origins: another origin's script presents a
//! token in `Authorization` (or `?token=` for `EventSource`/WebSocket), never the page cookie of
//! this server's own pages. Because the credential is a header the script must hold, the request
//! headers a client asks for are allowed as asked (Letta's SDK sends its own `X-Stainless-…`
//! headers; the AI SDK's transports whatever headers the app adds) — `Authorization`,
//! `Content-Type`, `Last-Event-ID` and `Idempotency-Key` among them.

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, Method};
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

/// How long a browser may keep a preflight's answer (Chromium caps it at two hours).
pub const CORS_PREFLIGHT_MAX_AGE_SECONDS: u64 = 600;

/// Response headers a client of another origin may read besides the safelisted ones: where a
/// created resource is, the AI SDK's stream marker, why a token was refused, when to retry, and
/// the Durable Streams protocol's answers (a browser's stream client resumes from
/// `Stream-Next-Offset`; without it exposed, every read started over).
const EXPOSED_HEADERS: [&str; 15] = [
    "location",
    "x-vercel-ai-ui-message-stream",
    "www-authenticate",
    "retry-after",
    "etag",
    "stream-next-offset",
    "stream-cursor",
    "stream-up-to-date",
    "stream-closed",
    "stream-ttl",
    "stream-expires-at",
    "producer-epoch",
    "producer-seq",
    "producer-expected-seq",
    "producer-received-seq",
];

/// The layer for `allowed_origins` (exact `scheme://host[:port]` strings).
pub fn layer(allowed_origins: &[String]) -> CorsLayer {
    let origins: Vec<HeaderValue> = allowed_origins
        .iter()
        .filter_map(|origin| match HeaderValue::from_str(origin) {
            Ok(value) => Some(value),
            Err(_) => {
                tracing::warn!(%origin, "AGENTSTREAM_ALLOWED_ORIGINS: not a header value, ignored");
                None
            }
        })
        .collect();
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins))
        .allow_methods([Method::GET, Method::HEAD, Method::POST, Method::PUT, Method::DELETE])
        .allow_headers(AllowHeaders::mirror_request())
        .expose_headers(EXPOSED_HEADERS.map(HeaderName::from_static))
        .max_age(Duration::from_secs(CORS_PREFLIGHT_MAX_AGE_SECONDS))
}
