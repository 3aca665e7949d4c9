//! The optional access token on the API, WebSocket, SSE and pages, and the WebSocket origin check.

use crate::common;

use crate::common::RequestExt;
use common::TestServer;
use futures::StreamExt;
use reqwest::header;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const TOKEN: &str = "s3cret-token";

/// A client that shows redirects instead of following them.
fn no_redirects() -> reqwest::Client {
    agentstream_server::http_client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn guarded() -> TestServer {
    TestServer::start_with(|config| config.api_token = Some(TOKEN.to_owned())).await
}

#[tokio::test]
async fn without_the_token_the_api_answers_401_and_changes_nothing() {
    let server = guarded().await;
    let no_redirects = no_redirects();
    for (method, path) in [
        ("GET", "/v1/agents"),
        ("POST", "/v1/agents"),
        ("GET", "/v1/runs/00000000-0000-4000-8000-000000000000"),
        ("POST", "/v1/agents/00000000-0000-4000-8000-000000000000/messages/stream"),
        ("GET", "/v1/agents/00000000-0000-4000-8000-000000000000/events/stream"),
    ] {
        let request = no_redirects
            .request(method.parse().unwrap(), server.url(path))
            .json(&json!({ "name": "x" }));
        for attempt in [request.try_clone().unwrap(), request.bearer_auth("wrong")] {
            let response = attempt.sent().await;
            assert_eq!(response.status(), 401, "{method} {path}");
            assert_eq!(response.headers()[header::WWW_AUTHENTICATE], "Bearer");
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["error"]["code"], "unauthorized");
        }
    }
    // Nothing was created by the refused POST.
    let agents: Vec<Value> =
        server.http.get(server.url("/v1/agents")).bearer_auth(TOKEN).answer().await;
    assert!(agents.is_empty());
    // The health check stays open for load balancers.
    assert_eq!(server.get("/healthz").await.status(), 200);
}

#[tokio::test]
async fn the_token_works_as_bearer_cookie_or_query_on_api_sse_and_websocket() {
    let server = guarded().await;
    let created = server
        .http
        .post(server.url("/v1/agents"))
        .bearer_auth(TOKEN)
        .json(&json!({ "name": "guarded" }))
        .sent()
        .await;
    assert_eq!(created.status(), 201);
    let agent_id = created.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let by_cookie = server
        .http
        .get(server.url(&format!("/v1/agents/{agent_id}")))
        .header(header::COOKIE, format!("agentstream_token={TOKEN}"))
        .sent()
        .await;
    assert_eq!(by_cookie.status(), 200);
    let sse = server.get(&format!("/v1/agents/{agent_id}/events/stream?token={TOKEN}")).await;
    assert_eq!(sse.status(), 200, "EventSource-style clients pass it in the query");
    drop(sse);

    // WebSocket: refused without the token, accepted with it.
    let refused = tokio_tungstenite::connect_async(&server.ws_url).await;
    match refused {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 401)
        }
        other => panic!("a WebSocket without the token was not refused: {:?}", other.map(|_| ())),
    }
    let mut request = server.ws_url.as_str().into_client_request().unwrap();
    request.headers_mut().insert(header::AUTHORIZATION, format!("Bearer {TOKEN}").parse().unwrap());
    let (mut socket, _) =
        tokio_tungstenite::connect_async(request).await.expect("the token opens the socket");
    use futures::SinkExt;
    socket
        .send(tokio_tungstenite::tungstenite::Message::Text(
            json!({ "type": "subscribe", "agent_id": agent_id, "since": 0 }).to_string().into(),
        ))
        .await
        .unwrap();
    let frame =
        tokio::time::timeout(common::WAIT_MAX, socket.next()).await.unwrap().unwrap().unwrap();
    assert!(frame.to_text().unwrap().contains("subscribed"), "{frame:?}");
}

#[tokio::test]
async fn a_browser_opens_the_site_once_with_the_token_then_keeps_it_in_a_cookie() {
    let server = guarded().await;
    let browser = agentstream_server::http_client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let page = browser.get(server.url("/")).sent().await;
    assert_eq!(page.status(), 401);
    assert!(page.text().await.unwrap().contains("<form"), "the page asks for the token");

    let opened = browser.get(server.url(&format!("/agents?x=1&token={TOKEN}"))).sent().await;
    assert!(opened.status().is_redirection());
    assert_eq!(
        opened.headers()[header::LOCATION],
        "/agents?x=1",
        "the token leaves the address bar"
    );
    let cookie = opened.headers()[header::SET_COOKIE].to_str().unwrap().to_owned();
    assert!(cookie.starts_with(&format!("agentstream_token={TOKEN};")));
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");

    let page = browser
        .get(server.url("/"))
        .header(header::COOKIE, format!("agentstream_token={TOKEN}"))
        .sent()
        .await;
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("<html"));
}

#[tokio::test]
async fn a_websocket_from_another_sites_page_is_refused() {
    let server = TestServer::start_with(|config| {
        config.allowed_origins = vec!["https://app.example".into()]
    })
    .await;
    let host = server.base.trim_start_matches("http://").to_owned();
    for (origin, allowed) in [
        (format!("http://{host}"), true),
        ("https://app.example".to_owned(), true),
        ("https://evil.example".to_owned(), false),
    ] {
        let mut request = server.ws_url.as_str().into_client_request().unwrap();
        request.headers_mut().insert(header::ORIGIN, origin.parse().unwrap());
        let outcome = tokio_tungstenite::connect_async(request).await;
        match (outcome, allowed) {
            (Ok(_), true) => {}
            (Err(tokio_tungstenite::tungstenite::Error::Http(response)), false) => {
                assert_eq!(response.status(), 403, "{origin}")
            }
            (outcome, _) => panic!("{origin}: allowed={allowed}, got {:?}", outcome.map(|_| ())),
        }
    }
}

/// Without a token the server answers only to requests that name this machine (or a host the
/// operator allowed): a page of another site whose name points at 127.0.0.1 is refused.
#[tokio::test]
async fn without_a_token_only_known_hosts_are_served() {
    let server = TestServer::start().await;
    let as_host = |host: &'static str| {
        server.http.get(server.url("/v1/agents")).header(header::HOST, host).send()
    };
    let answer = as_host("evil.example:3000").await.unwrap();
    assert_eq!(answer.status(), 403);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unknown_host", "{body}");
    assert_eq!(as_host("localhost").await.unwrap().status(), 200);

    let allowing = TestServer::start_with(|config| {
        config.allowed_hosts = vec!["agents.example.com".to_owned()];
    })
    .await;
    let answer = allowing
        .http
        .get(allowing.url("/v1/agents"))
        .header(header::HOST, "agents.example.com")
        .sent()
        .await;
    assert_eq!(answer.status(), 200);
}

/// A form posted by another site's page creates nothing and starts nothing.
#[tokio::test]
async fn a_form_posted_from_another_site_is_refused() {
    let server = TestServer::start().await;
    let no_redirects = no_redirects();
    let post = |headers: &[(&'static str, &'static str)]| {
        let mut request = no_redirects.post(server.url("/agents")).form(&[("name", "from a form")]);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send()
    };
    for headers in
        [&[("origin", "https://evil.example")][..], &[("sec-fetch-site", "cross-site")][..]]
    {
        let answer = post(headers).await.unwrap();
        assert_eq!(answer.status(), 403, "{headers:?}");
    }
    let agents: Vec<Value> = server.get("/v1/agents").await.json().await.unwrap();
    assert!(agents.is_empty(), "a cross-site form created {agents:?}");
    let same_site = post(&[("sec-fetch-site", "same-origin")]).await.unwrap();
    assert_eq!(same_site.status(), 303);
}

/// Behind a proxy that says the request came over HTTPS, the token cookie is `Secure`.
#[tokio::test]
async fn the_token_cookie_is_secure_behind_https() {
    let server = guarded().await;
    let no_redirects = no_redirects();
    for (proto, secure) in [(None, false), (Some("https"), true), (Some("http"), false)] {
        let mut request = no_redirects.get(server.url(&format!("/?token={TOKEN}")));
        if let Some(proto) = proto {
            request = request.header("x-forwarded-proto", proto);
        }
        let opened = request.sent().await;
        let cookie = opened.headers()[header::SET_COOKIE].to_str().unwrap().to_owned();
        assert_eq!(cookie.contains("; Secure"), secure, "{proto:?}: {cookie}");
    }
}

#[tokio::test]
async fn the_token_redirect_stays_on_this_site_and_pages_cannot_be_framed() {
    let server = guarded().await;
    let browser = no_redirects();
    // A path that a browser would read as another host must not become the redirect's target.
    for path in ["//evil.example/", "/\\evil.example/", "///evil.example/x"] {
        let opened = browser.get(format!("{}{path}?token={TOKEN}", server.base)).sent().await;
        assert!(opened.status().is_redirection(), "{path}");
        let location = opened.headers()[header::LOCATION].to_str().unwrap();
        assert!(
            location.starts_with('/')
                && !location.starts_with("//")
                && !location.starts_with("/\\"),
            "{path} redirected to {location}"
        );
    }
    // Every answer, page or API: no sniffing, no framing by another site, no referrer.
    for path in ["/", "/v1/agents"] {
        let response = server.http.get(server.url(path)).bearer_auth(TOKEN).sent().await;
        assert_eq!(response.status(), 200, "{path}");
        let headers = response.headers();
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert_eq!(headers["x-frame-options"], "DENY");
        // A page's own policy (scripts by nonce) forbids framing as the API's does.
        let policy = headers["content-security-policy"].to_str().unwrap();
        assert!(policy.contains("frame-ancestors 'none'"), "{path}: {policy}");
        if path == "/" {
            assert!(policy.contains("script-src 'self' 'nonce-"), "{policy}");
            assert!(policy.contains("object-src 'none'"), "{policy}");
        } else {
            assert_eq!(policy, "frame-ancestors 'none'");
        }
        assert_eq!(headers["referrer-policy"], "no-referrer");
    }
}

#[tokio::test]
async fn without_a_token_the_server_listens_on_loopback_only_and_wants_a_host() {
    use agentstream_server::config::Config;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let directory = tempfile::tempdir().unwrap();
    let config = || Config {
        database_url: format!("sqlite://{}", directory.path().join("a.db").display()),
        ..Config::default()
    };
    let options = leptos::prelude::get_configuration(None).unwrap().leptos_options;
    // Every address: refused before anything is opened, with what to do.
    let everywhere = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let refused = agentstream_server::serve(everywhere, config(), options.clone(), async {})
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("AGENTSTREAM_API_TOKEN"), "{refused}");
    assert!(!directory.path().join("a.db").exists(), "nothing was opened");
    // Said in so many words: it serves.
    let everywhere = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = everywhere.local_addr().unwrap().port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let insecure = Config { insecure_no_token: true, ..config() };
    let serving = tokio::spawn(agentstream_server::serve(everywhere, insecure, options, async {
        let _ = stopped.await;
    }));
    let url = format!("http://127.0.0.1:{port}/healthz");
    common::wait_until("the insecure server to answer", || async {
        reqwest::get(&url).await.is_ok_and(|response| response.status() == 200).then_some(())
    })
    .await;
    // A request without a Host header is refused (HTTP/1.0 lets a client leave it out).
    let mut raw = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    raw.write_all(b"GET /v1/agents HTTP/1.0\r\n\r\n").await.unwrap();
    let mut answer = String::new();
    raw.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.0 403") || answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("unknown_host"), "{answer}");
    let _ = stop.send(());
    serving.await.unwrap().unwrap();
}
