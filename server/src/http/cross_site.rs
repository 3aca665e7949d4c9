//! Requests that change something, sent by a page of another site, are refused.
//!
//! A page of any site can make a browser send a "simple" POST — a form, or `fetch` without
//! custom headers — to this server with no preflight: to cancel a run, stop a chat, create an
//! agent or send a message through the page forms. Without an access token (a server on
//! `localhost`) nothing else stands in the way. Browsers say where such a request comes from
//! (`Sec-Fetch-Site`, and `Origin` on every cross-origin POST), so a state-changing request is
//! refused when they say it is cross-site, unless its origin is one of
//! `AGENTSTREAM_ALLOWED_ORIGINS`. Clients that are not browsers send neither header and pass:
//! they are not a page that a person visited.

use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};

use super::auth::same_origin_request;
use super::error::ApiError;

/// Whether a request may go on: `Err` says why not.
pub fn check(
    method: &Method,
    headers: &HeaderMap,
    allowed_origins: &[String],
) -> Result<(), String> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    let origin = headers.get(header::ORIGIN).and_then(|value| value.to_str().ok());
    let listed =
        origin.is_some_and(|origin| allowed_origins.iter().any(|allowed| allowed == origin));
    if listed || same_origin_request(headers) {
        return Ok(());
    }
    Err(format!(
        "a page of another site ({}) may not change anything here; list its origin in \
         AGENTSTREAM_ALLOWED_ORIGINS if it should",
        origin.unwrap_or("origin not given")
    ))
}

/// [`check`]'s refusal as the answer: 403 `cross_site_request`.
pub fn refused(message: String) -> Response {
    ApiError::new(StatusCode::FORBIDDEN, "cross_site_request", message).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_changes_from_other_sites_are_refused() {
        let allowed = vec!["https://app.example".to_owned()];
        /// (method, request headers, passes)
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], bool);
        let cases: &[Case] = &[
            // Reads pass whatever their origin.
            ("GET", &[("sec-fetch-site", "cross-site")], true),
            // Not a browser: no Origin, no Sec-Fetch-Site.
            ("POST", &[("host", "localhost:3000")], true),
            // This server's own pages.
            ("POST", &[("sec-fetch-site", "same-origin")], true),
            ("POST", &[("sec-fetch-site", "none")], true),
            ("POST", &[("origin", "http://localhost:3000"), ("host", "localhost:3000")], true),
            // Another site's page: a form, or fetch without a preflight.
            (
                "POST",
                &[("sec-fetch-site", "cross-site"), ("origin", "https://evil.example")],
                false,
            ),
            ("POST", &[("sec-fetch-site", "same-site")], false),
            ("DELETE", &[("origin", "https://evil.example"), ("host", "localhost:3000")], false),
            ("POST", &[("origin", "null"), ("host", "localhost:3000")], false),
            ("POST", &[("origin", "http://localhost:3001"), ("host", "localhost:3000")], false),
            // A listed origin: the app the operator named.
            ("POST", &[("sec-fetch-site", "cross-site"), ("origin", "https://app.example")], true),
        ];
        for (method, headers, ok) in cases {
            let mut map = HeaderMap::new();
            for (name, value) in headers.iter() {
                map.insert(axum::http::HeaderName::from_static(name), value.parse().unwrap());
            }
            let method: Method = method.parse().unwrap();
            assert_eq!(check(&method, &map, &allowed).is_ok(), *ok, "{method} {headers:?}");
        }
    }
}
