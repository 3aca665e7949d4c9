//! Other origins: CORS when listed, cross-site posts refused, token links that ask first, and each user's share of streams.

use super::*;
use crate::common::RequestExt;

#[tokio::test]
async fn another_origin_gets_cors_only_when_listed() {
    let server = server_with(|_| {}).await;
    let client = agentstream_server::http_client::client();
    let preflight = |origin: &str| {
        client
            .request(Method::OPTIONS, server.url("/v1/ai-sdk/chat"))
            .header(header::ORIGIN, origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization, content-type, last-event-id, idempotency-key",
            )
            .send()
    };
    let allowed = preflight(APP_ORIGIN).await.unwrap();
    assert!(allowed.status().is_success(), "{}", allowed.status());
    let headers = allowed.headers();
    assert_eq!(headers["access-control-allow-origin"], APP_ORIGIN);
    let allow_headers =
        headers["access-control-allow-headers"].to_str().unwrap().to_ascii_lowercase();
    for wanted in ["authorization", "content-type", "last-event-id", "idempotency-key"] {
        assert!(allow_headers.contains(wanted), "{allow_headers}");
    }
    assert!(headers["access-control-allow-methods"].to_str().unwrap().contains("POST"));
    assert!(headers.get("access-control-allow-credentials").is_none(), "never credentials");

    let refused = preflight("http://evil.example").await.unwrap();
    assert!(refused.headers().get("access-control-allow-origin").is_none());

    // The actual request: the origin echoed, the stream marker readable by the script.
    let agent = create_agent(&server, json!({})).await;
    let response = client
        .get(server.url(&format!("/v1/agents/{agent}")))
        .header(header::ORIGIN, APP_ORIGIN)
        .bearer_auth(OPERATOR)
        .sent()
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["access-control-allow-origin"], APP_ORIGIN);
    let exposed = response.headers()["access-control-expose-headers"].to_str().unwrap().to_owned();
    assert!(
        exposed.contains("x-vercel-ai-ui-message-stream") && exposed.contains("location"),
        "{exposed}"
    );
    // A refused request from a listed origin still carries CORS, so the script can read why.
    let unauthorized = client
        .get(server.url(&format!("/v1/agents/{agent}")))
        .header(header::ORIGIN, APP_ORIGIN)
        .sent()
        .await;
    assert_eq!(unauthorized.status(), 401);
    assert_eq!(unauthorized.headers()["access-control-allow-origin"], APP_ORIGIN);
    // The Durable Streams path skips the router, not the CORS layer, and a browser's stream
    // client reads its offsets (they were not exposed: every read started over).
    let stream = client
        .put(server.url("/v1/streams/cors"))
        .header(header::ORIGIN, APP_ORIGIN)
        .header(header::CONTENT_TYPE, "application/json")
        .bearer_auth(OPERATOR)
        .sent()
        .await;
    assert_eq!(stream.status(), 201);
    assert_eq!(stream.headers()["access-control-allow-origin"], APP_ORIGIN);
    let exposed = stream.headers()["access-control-expose-headers"].to_str().unwrap();
    for wanted in ["stream-next-offset", "stream-up-to-date", "stream-closed", "etag"] {
        assert!(exposed.contains(wanted), "{exposed}");
    }
}

/// Without a token (a server on localhost), a page of another site could still make a browser
/// post a form or a header-less `fetch` to it: cancel a run, stop a chat, create an agent. Such
/// requests are refused when the browser says they are cross-site; the server's own pages,
/// listed origins and clients that are not browsers pass.
#[tokio::test]
async fn cross_site_posts_change_nothing_on_a_server_without_a_token() {
    let server = TestServer::start_with(|config| {
        config.allowed_origins = vec![APP_ORIGIN.to_owned()];
    })
    .await;
    let agent_id = server.create_agent().await;
    let agents = |server: &TestServer| {
        let url = server.url("/v1/agents");
        let http = server.http.clone();
        async move {
            let list: Value = http.get(url).answer().await;
            list.as_array().unwrap().len()
        }
    };
    let before = agents(&server).await;
    let evil = [("origin", "https://evil.example"), ("sec-fetch-site", "cross-site")];
    let posts = [
        ("/agents", "application/x-www-form-urlencoded", "name=x".to_owned()),
        (
            &*format!("/agents/{agent_id}/runs"),
            "application/x-www-form-urlencoded",
            "content=hello".to_owned(),
        ),
        (&*format!("/v1/agents/{agent_id}/messages/cancel"), "text/plain", String::new()),
        ("/v1/agents", "text/plain", "{}".to_owned()),
    ];
    for (path, content_type, body) in &posts {
        let mut request = server
            .http
            .post(server.url(path))
            .header("content-type", *content_type)
            .body(body.clone());
        for (name, value) in evil {
            request = request.header(name, value);
        }
        let response = request.sent().await;
        assert_eq!(response.status(), 403, "{path}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["code"], "cross_site_request", "{path}");
    }
    assert_eq!(agents(&server).await, before, "nothing was created");
    assert!(server.all_events(agent_id).await.is_empty(), "no message was sent");

    // The same requests from this server's own page, a listed origin, or a client that is not a
    // browser go through.
    let fine: [&[(&str, &str)]; 3] = [
        &[("sec-fetch-site", "same-origin")],
        &[("origin", APP_ORIGIN), ("sec-fetch-site", "cross-site")],
        &[],
    ];
    for headers in fine {
        let mut request = server.http.post(server.url("/v1/agents")).json(&json!({}));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.sent().await;
        assert_eq!(response.status(), 201, "{headers:?}");
    }
}

/// `?token=` never swaps who a page acts as behind the person's back: a link from another site,
/// or one for someone other than the browser's signed-in user, first shows whom it signs in as;
/// the page's own Continue link (a navigation of this site) takes it; a link the person opened
/// with nobody signed in works at once.
#[tokio::test]
async fn a_token_link_from_elsewhere_asks_before_it_swaps_the_identity() {
    let server = server_with(|_| {}).await;
    let browser = agentstream_server::http_client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let alice = token("alice", &["chat-a"], &[Scope::Read, Scope::Write]);
    let mallory = token("mallory", &["chat-m"], &[Scope::Read, Scope::Write]);
    let open = |link: String, site: &'static str, cookie: Option<String>| {
        let mut request = browser.get(server.url(&link)).header("sec-fetch-site", site);
        if let Some(cookie) = cookie {
            request = request.header(header::COOKIE, format!("agentstream_token={cookie}"));
        }
        request.send()
    };
    let sets_cookie = |response: &reqwest::Response| {
        response.headers().get(header::SET_COOKIE).map(|value| value.to_str().unwrap().to_owned())
    };
    // Another site's link, alice signed in: a page that names mallory and alice; nothing set.
    let attacked =
        open(format!("/?token={mallory}"), "cross-site", Some(alice.clone())).await.unwrap();
    assert_eq!(attacked.status(), 200);
    assert_eq!(sets_cookie(&attacked), None);
    let page = attacked.text().await.unwrap();
    assert!(page.contains("Open agentstream as user mallory?"), "{page}");
    assert!(page.contains("signed in as <strong>user alice</strong>"), "{page}");
    // Typed into the address bar while alice is signed in: asked too.
    let typed = open(format!("/?token={mallory}"), "none", Some(alice.clone())).await.unwrap();
    assert_eq!(sets_cookie(&typed), None);
    // A forged "continue" from another site is still a question.
    let forged = open(format!("/?token={mallory}&continue=1"), "cross-site", Some(alice.clone()))
        .await
        .unwrap();
    assert_eq!(sets_cookie(&forged), None);
    // The person clicks Continue on the page (a same-origin navigation): mallory's now.
    let continued =
        open(format!("/?token={mallory}&continue=1"), "same-origin", Some(alice.clone()))
            .await
            .unwrap();
    assert!(continued.status().is_redirection());
    assert_eq!(continued.headers()[header::LOCATION], "/");
    assert!(sets_cookie(&continued).unwrap().contains(&mallory));
    // Nobody signed in, a link the person opened: at once; from another site: asked.
    let fresh = open(format!("/?token={alice}"), "none", None).await.unwrap();
    assert!(sets_cookie(&fresh).unwrap().contains(&alice));
    let cross = open(format!("/?token={alice}"), "cross-site", None).await.unwrap();
    assert_eq!(sets_cookie(&cross), None);
    assert!(cross.text().await.unwrap().contains("Continue as user alice"));
}

/// One user's token cannot take every slot: its requests in flight (SSE streams, Durable
/// Streams long-polls, WebSockets) are bounded per subject (429), other users are not affected,
/// and the slots come back as the streams close.
#[tokio::test]
async fn one_users_token_holds_at_most_its_share_of_streams() {
    const SHARE: usize = 3;
    let server = server_with(|config| config.limits.requests_per_subject_max = SHARE).await;
    let agent = server.create_agent().await.to_string();
    let alice = token("alice", &[&agent], &[Scope::Read]);
    let bob = token("bob", &[&agent], &[Scope::Read]);
    let reader = agentstream_server::http_client::client();
    let stream = |token: &str| {
        reader
            .get(server.url(&format!("/v1/agents/{agent}/events/stream?since=0")))
            .bearer_auth(token)
            .send()
    };
    let long_poll = |token: &str| {
        reader
            .get(server.url(&format!("/v1/streams/agents/{agent}?offset=now&live=long-poll")))
            .bearer_auth(token)
            .send()
    };
    let first = stream(&alice).await.unwrap();
    let second = stream(&alice).await.unwrap();
    assert_eq!((first.status().as_u16(), second.status().as_u16()), (200, 200));
    // The third: a long-poll that waits. (Probing with a stream of hers before it holds its slot
    // would take the slot itself and refuse the long-poll: watch the server's count instead.)
    let waiting = tokio::spawn(long_poll(&alice));
    common::wait_until("the long-poll to hold its slot", || async {
        let stats = server.get_json("/v1/stats").await;
        (stats["sse_streams_open"].as_u64() >= Some(3)).then_some(())
    })
    .await;
    // Her share is taken: another stream, a WebSocket, even a plain read.
    let body: Value = stream(&alice).await.unwrap().json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_requests_for_token", "{body}");
    let mut socket = format!("{}?token={alice}", server.ws_url).into_client_request().unwrap();
    socket.headers_mut().remove("origin");
    let refused = tokio_tungstenite::connect_async(socket).await;
    assert!(refused.is_err(), "a WebSocket past her share is refused");
    let plain = reader
        .get(server.url(&format!("/v1/agents/{agent}/events")))
        .bearer_auth(&alice)
        .sent()
        .await;
    assert_eq!(plain.status(), 429);
    // Bob is not affected.
    assert_eq!(stream(&bob).await.unwrap().status(), 200);
    // A stream closed gives its slot back; once all are gone, nothing is held.
    drop(first);
    common::wait_until("alice's slot to come back", || async {
        let again = stream(&alice).await.unwrap();
        (again.status() == 200).then_some(())
    })
    .await;
    drop(second);
    waiting.abort();
    common::wait_until("every subject's slots to be given back", || async {
        let stats = server.get_json("/v1/stats").await;
        (stats["token_subjects_held"] == 0).then_some(())
    })
    .await;
}
