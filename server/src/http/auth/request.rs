//! What a request says about its caller, read without deciding anything: the credential it
//! carries (bearer, cookie, query), its host and origin. Pure.

use axum::http::{header, HeaderMap};

/// The cookie a browser keeps the token in.
pub const TOKEN_COOKIE: &str = "agentstream_token";
/// The query parameter that carries the token for clients that cannot set headers.
pub const TOKEN_QUERY: &str = "token";

/// Compares in constant time (`subtle`), so response time does not tell how much of a guess
/// was right. (A wrong length answers at once: the token's length is not the secret.)
pub(super) fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    given.ct_eq(expected).into()
}

/// True when the request came over HTTPS: this server speaks plain HTTP, so only through a
/// proxy that says so (`X-Forwarded-Proto: https`). The token cookie is `Secure` then.
pub(super) fn over_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(',').next())
        .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
}

/// The host a `Host` header names, lower case, without its port.
pub(super) fn host_name(host: &str) -> String {
    let host = host.trim().to_ascii_lowercase();
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default().to_owned();
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name.to_owned(),
        _ => host,
    }
}

/// Without an access token, a request must name this machine (`Host`: localhost, a loopback
/// address) or a host the operator allowed: DNS-rebinding protection — a page of another site
/// whose name was made to point at 127.0.0.1 names its own host and is refused. (It is not
/// access control: a remote client can send any `Host`; that is why a server without a token
/// listens on loopback only, see `serve`.) A request without `Host` is refused too.
pub fn host_allowed(headers: &HeaderMap, allowed: &[String]) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|value| value.to_str().ok()) else {
        return false;
    };
    let name = host_name(host);
    let loopback = name == "localhost"
        || name.parse::<std::net::IpAddr>().is_ok_and(|address| address.is_loopback());
    loopback
        || allowed
            .iter()
            .any(|allowed| *allowed == name || allowed.eq_ignore_ascii_case(host.trim()))
}

/// True unless a browser says the request came from another site: `Sec-Fetch-Site`
/// `cross-site`/`same-site`, or an `Origin` whose host is not the request's `Host`. A form of
/// another site must not start runs here. Requests without either header are not a browser's.
pub fn same_origin_request(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|value| value.to_str().ok()) {
        return matches!(site, "same-origin" | "none");
    }
    origin_allowed(headers, &[])
}

pub(super) fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::AUTHORIZATION)?.to_str().ok()?.strip_prefix("Bearer ").map(str::trim)
}

pub(super) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find_map(|(key, value)| (key == name).then_some(value))
}

pub(super) fn query_token(query: Option<&str>) -> Option<String> {
    query_value(query, TOKEN_QUERY)
}

pub(super) fn query_value(query: Option<&str>, name: &str) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == name).then(|| percent_decode(value))
    })
}

/// Decodes `%XX` and `+` in a query value (enough for a token).
pub(super) fn percent_decode(text: &str) -> String {
    let hex = |byte: u8| (byte as char).to_digit(16).map(|digit| digit as u8);
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let decoded = match bytes[index] {
            b'%' if index + 2 < bytes.len() => {
                hex(bytes[index + 1]).zip(hex(bytes[index + 2])).map(|(high, low)| high << 4 | low)
            }
            _ => None,
        };
        match (decoded, bytes[index]) {
            (Some(byte), _) => {
                out.push(byte);
                index += 3;
                continue;
            }
            (None, b'+') => out.push(b' '),
            (None, byte) => out.push(byte),
        }
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// True when a WebSocket upgrade may proceed: no `Origin` (not a browser), the server's own
/// origin (same host and port as `Host`), or one the operator allowed.
pub fn origin_allowed(headers: &HeaderMap, allowed: &[String]) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|value| value.to_str().ok()) else {
        return true;
    };
    if allowed.iter().any(|allowed| allowed == origin) {
        return true;
    }
    let host = headers.get(header::HOST).and_then(|value| value.to_str().ok());
    let origin_host = origin.split_once("://").map(|(_, rest)| rest);
    matches!((origin_host, host), (Some(origin_host), Some(host)) if origin_host == host)
}
