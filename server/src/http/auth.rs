//! Access: who is calling, and may they. A step of the edge (`super::edge`), around every route.
//!
//! With `AGENTSTREAM_API_TOKEN` set, every request but `/healthz`, `/readyz` and the site's
//! static files must carry a credential — the operator token, or a scoped token
//! ([`super::token`]: a short-lived JWT for one user, a few agents and a few operations) — in
//! one of three ways:
//! - `Authorization: Bearer <token>` — API clients, Letta's SDKs (`apiKey`), the AI SDK's
//!   transport headers;
//! - the `agentstream_token` cookie — the browser: the page's fetches, its WebSocket and an
//!   `EventSource` carry it by themselves;
//! - `?token=<token>` — clients that cannot set headers. A page opened as `/?token=<token>` sets
//!   the cookie (HttpOnly, SameSite=Strict, for as long as the token lives) and redirects to the
//!   same page without the token, so a browser needs the token once.
//!
//! A request without a valid one gets 401: JSON on the API, a small page asking for the token
//! elsewhere. Then the route's need ([`super::policy`]) is checked against the caller
//! ([`super::caller`]), and the caller goes on to the handler in the request's extensions.
//! Without the variable the server is open, as a local tool should be (and everyone is the
//! operator).
//!
//! Independently of the token, a WebSocket upgrade that carries an `Origin` (browsers always
//! send one) must come from the server's own origin or one listed in
//! `AGENTSTREAM_ALLOWED_ORIGINS`: another site's page cannot ride a visitor's cookie into the
//! socket.

use std::future::Future;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use futures::StreamExt;

use super::caller::Caller;
use super::params::parse_agent_id;
use super::params::{chat_id, unknown_chat, ChatId};
use super::policy::{self, Need};
use super::subjects;
use super::token::{Scope, TokenError};
use super::token_link;
use crate::http::error::ApiError;
use request::{bearer, cookie, over_https, query_token, query_value, same_secret};
pub use request::{host_allowed, origin_allowed, same_origin_request, TOKEN_COOKIE, TOKEN_QUERY};

mod request;

/// How long the browser keeps the cookie.
pub const TOKEN_COOKIE_MAX_AGE_SECONDS: u64 = 30 * 24 * 3600;

/// Part of the edge (`super::edge`): works out who is calling ([`Caller`]: the operator, or a user with a scoped
/// token), checks what the route needs of them ([`policy::need`]) and hands the caller on in the
/// request's extensions. Without an operator token the server is open and everyone is the
/// operator (loopback or allowed hosts only). A scoped token's SSE responses end when it expires
/// ([`end_streams_at`]).
pub async fn require_token<F: Future<Output = Response>>(
    access: &Access,
    mut request: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    let Some(expected) = access.api_token.clone() else {
        if !host_allowed(request.headers(), &access.allowed_hosts) {
            return unknown_host();
        }
        request.extensions_mut().insert(Caller::Operator);
        return next(request).await;
    };
    let uri = request.uri().clone();
    let path = uri.path();
    let need = policy::need(request.method(), path, uri.query());
    if need == Need::Public {
        return next(request).await;
    }
    let headers = request.headers();
    let from_query = query_token(uri.query());
    // A page opened with `?token=` is about the link's identity, whatever cookie is there.
    let is_page = request.method() == axum::http::Method::GET && !path.starts_with("/v1/");
    let link = from_query.clone().filter(|_| is_page);
    let Some(presented) = link.clone().or_else(|| {
        bearer(headers)
            .map(str::to_owned)
            .or_else(|| cookie(headers, TOKEN_COOKIE).map(str::to_owned))
            .or(from_query.clone())
    }) else {
        return unauthorized(path, None);
    };
    let now = chrono::Utc::now().timestamp();
    let caller = match identify(access, &expected, &presented, now) {
        Ok(caller) => caller,
        Err(error) => return unauthorized(path, error),
    };
    if let Err(error) = check(access, &caller, need).await {
        return refused(path, error);
    }
    // The link's token goes into the cookie (and out of the address bar) when the person opened
    // it or confirmed it; a link from another site, or one that would replace who this browser
    // is signed in as, first shows who it signs in as (`token_link`).
    if link.is_some() {
        let current = cookie(headers, TOKEN_COOKIE)
            .and_then(|token| identify(access, &expected, token, now).ok())
            .map(|current| (token_link::identity(&current), current));
        let site = headers.get("sec-fetch-site").and_then(|value| value.to_str().ok());
        let confirmed =
            query_value(uri.query(), token_link::CONTINUE_QUERY).as_deref() == Some("1");
        let decision = token_link::decide(
            site,
            confirmed,
            current.as_ref().map(|(name, _)| name.as_str()),
            &token_link::identity(&caller),
        );
        if decision == token_link::LinkDecision::Ask {
            let separator = if uri.query().is_some() { "&" } else { "?" };
            let continue_url = format!("{uri}{separator}{}=1", token_link::CONTINUE_QUERY);
            let page = token_link::confirm_page(
                &continue_url,
                &caller,
                current.as_ref().map(|(_, current)| current),
            );
            return (StatusCode::OK, Html(page)).into_response();
        }
        let max_age = caller.expires_at().map_or(TOKEN_COOKIE_MAX_AGE_SECONDS, |expires_at| {
            expires_at.saturating_sub(now).max(0) as u64
        });
        return keep_in_cookie(&uri, request.headers(), &presented, max_age);
    }
    // A user's requests in flight are bounded per subject; a stream's answer holds its slot
    // until its body ends, a WebSocket's task until the socket closes (`subjects`).
    let held = match &caller {
        Caller::User(grant, _) => match access.subjects.take(&grant.sub) {
            Some(slot) => Some(subjects::HeldSlot(Arc::new(slot))),
            None => return subjects::refused(access.subjects.max()),
        },
        Caller::Operator => None,
    };
    if let Some(held) = &held {
        request.extensions_mut().insert(held.clone());
    }
    request.extensions_mut().insert(caller.clone());
    let mut response = next(request).await;
    if let Some(held) = held.filter(|_| is_event_stream(&response)) {
        response = subjects::held_by_body(response, held);
    }
    match caller.expires_at() {
        Some(expires_at) => end_streams_at(response, expires_at),
        None => response,
    }
}

/// Who `presented` (the operator token `expected`, or a scoped token) makes the caller; the
/// refusal's token error when it is a malformed or refused JWT.
fn identify(
    access: &Access,
    expected: &str,
    presented: &str,
    now: i64,
) -> Result<Caller, Option<TokenError>> {
    if same_secret(presented.as_bytes(), expected.as_bytes()) {
        return Ok(Caller::Operator);
    }
    let keys = access.token_keys.as_deref().ok_or(None)?;
    match keys.verify(presented, now) {
        Ok(grant) => {
            let usable_until = grant.usable_until(keys.clock_skew_seconds());
            Ok(Caller::User(Arc::new(grant), usable_until))
        }
        Err(error) if presented.contains('.') => Err(Some(error)),
        Err(_) => Err(None),
    }
}

/// What `need` asks of a scoped caller (the operator passes everything).
async fn check(access: &Access, caller: &Caller, need: Need<'_>) -> Result<(), ApiError> {
    if let Caller::Operator = caller {
        return Ok(());
    }
    let store = access.store.as_ref();
    match need {
        Need::Public | Need::Anyone | Need::Handler => Ok(()),
        Need::Operator => Err(super::caller::operator_only()),
        Need::Scoped(scope) => caller.require(scope),
        Need::Agent(agent_id, scope) => {
            match scope {
                Some(scope) => caller.require(scope)?,
                // A Letta message: a new turn (write) or an approval's answer (approve); the
                // handler checks which once it has read the body.
                None => caller.require(Scope::Write).or_else(|_| caller.require(Scope::Approve))?,
            }
            let agent_id = parse_agent_id(agent_id)?;
            caller.reach_id(store, agent_id).await.map(drop)
        }
        Need::Run(run_id, scope) => {
            caller.require(scope)?;
            let run_id = uuid::Uuid::parse_str(run_id).map_err(|_| {
                ApiError::bad_request("invalid_id", format!("run id {run_id:?} is not a UUID"))
            })?;
            let outline = store.run_outline(run_id).await?;
            let agent_id = outline
                .first()
                .map(|event| event.agent_id)
                .ok_or_else(|| ApiError::unknown_run(run_id))?;
            caller
                .reach_id(store, agent_id)
                .await
                .map(drop)
                .map_err(|_| ApiError::unknown_run(run_id))
        }
        Need::Chat(chat, scope) => {
            caller.require(scope)?;
            match chat_id(chat)? {
                ChatId::Agent(agent_id) => caller.reach_id(store, agent_id).await.map(drop),
                ChatId::Named(name) => match store.chat_agent(&name).await? {
                    Some(agent_id) => caller
                        .reach_id(store, agent_id)
                        .await
                        .map(drop)
                        .map_err(|_| unknown_chat(&name)),
                    // Not used yet: the token may name it (it gets its agent on first use).
                    None if caller.lists(&name) => Ok(()),
                    None => Err(unknown_chat(&name)),
                },
            }
        }
    }
}

/// A response marked with this ends its stream itself when the caller's token expires (the
/// Letta stream tells the client where to resume, and must not look like a client leaving).
#[derive(Clone, Copy, Debug)]
pub struct EndsAtExpiry;

/// A scoped token's event streams end when it expires: the client reconnects with a fresh token
/// and resumes from its cursor, losing nothing. Other responses are whole long before.
fn end_streams_at(response: Response, expires_at: i64) -> Response {
    if !is_event_stream(&response) || response.extensions().get::<EndsAtExpiry>().is_some() {
        return response;
    }
    let (parts, body) = response.into_parts();
    let deadline = tokio::time::sleep(until_unix(expires_at));
    let body = axum::body::Body::from_stream(body.into_data_stream().take_until(deadline));
    Response::from_parts(parts, body)
}

fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"))
}

/// How long until `unix_seconds` (zero once it passed).
pub fn until_unix(unix_seconds: i64) -> std::time::Duration {
    let remaining_ms =
        unix_seconds.saturating_mul(1000).saturating_sub(chrono::Utc::now().timestamp_millis());
    std::time::Duration::from_millis(remaining_ms.max(0) as u64)
}

/// Sets the token's cookie (HttpOnly, SameSite=Strict, for as long as the token lives) and
/// redirects to the same page without `?token=`.
fn keep_in_cookie(
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    token: &str,
    max_age_seconds: u64,
) -> Response {
    let rest: Vec<&str> = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|pair| {
            !pair.starts_with(&format!("{TOKEN_QUERY}="))
                && !pair.starts_with(&format!("{}=", super::token_link::CONTINUE_QUERY))
                && !pair.is_empty()
        })
        .collect();
    // One leading slash, always: `//other.host/` (or `/\other.host/`, which browsers read the
    // same) would send the browser to another site (an open redirect).
    let path = format!("/{}", uri.path().trim_start_matches(['/', '\\']));
    let location = if rest.is_empty() { path } else { format!("{path}?{}", rest.join("&")) };
    let mut response = Redirect::to(&location).into_response();
    let secure = if over_https(headers) { "; Secure" } else { "" };
    let cookie = format!(
        "{TOKEN_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_seconds}{secure}"
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// A refusal: JSON on the API, a short page on the site's pages.
fn refused(path: &str, error: ApiError) -> Response {
    if path.starts_with("/v1/") {
        return error.into_response();
    }
    let message = html_escape(&error.message);
    (
        error.status,
        Html(format!(
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>agentstream</title>\
             </head><body><main><h1>Not here</h1><p>{message}</p><p><a href=\"/\">Agents</a></p>\
             </main></body></html>"
        )),
    )
        .into_response()
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn unknown_host() -> Response {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "unknown_host",
        "without an access token this server answers only to localhost: set \
         AGENTSTREAM_ALLOWED_HOSTS to the names it is reached by (or AGENTSTREAM_API_TOKEN)",
    )
    .into_response()
}

fn unauthorized(path: &str, token_error: Option<TokenError>) -> Response {
    let (code, message) = match &token_error {
        Some(TokenError::Expired) => (
            "token_expired",
            "the token expired: get a fresh one and reconnect (resume from your cursor)".to_owned(),
        ),
        Some(error) => ("invalid_token", format!("the token was refused: {error}")),
        None => (
            "unauthorized",
            "this server needs its access token: send Authorization: Bearer <token>".to_owned(),
        ),
    };
    let mut response = if path.starts_with("/v1/") {
        ApiError::new(StatusCode::UNAUTHORIZED, code, message).into_response()
    } else {
        (
            StatusCode::UNAUTHORIZED,
            Html(
                "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>agentstream: \
                 access token</title></head><body><main><h1>This server needs its access token</h1>\
                 <form method=\"get\"><label>Token <input name=\"token\" type=\"password\" \
                 autocomplete=\"current-password\" required></label> <button>Open</button></form>\
                 </main></body></html>",
            ),
        )
            .into_response()
    };
    // RFC 6750: a refused token says so, so a client knows to fetch a new one.
    let challenge = match code {
        "unauthorized" => "Bearer".to_owned(),
        _ => format!("Bearer error=\"invalid_token\", error_description=\"{code}\""),
    };
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

#[cfg(test)]
mod tests;

/// Who may call: the access token, the scoped tokens' secrets, and the origins allowed besides
/// the server's own; the store, to tell which agents a scoped token reaches.
#[derive(Clone)]
pub struct Access {
    pub api_token: Option<Arc<str>>,
    pub token_keys: Option<Arc<crate::http::token::TokenKeys>>,
    pub allowed_origins: Arc<Vec<String>>,
    pub allowed_hosts: Arc<Vec<String>>,
    pub store: Arc<dyn crate::store::Store>,
    pub subjects: Arc<crate::http::subjects::SubjectSlots>,
}
