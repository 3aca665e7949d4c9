//! Scoped tokens over real sockets: each surface × each scope, agents that belong to someone,
//! minting, expiry that ends streams without losing anything, and CORS for another origin.

mod common;

use std::time::Duration;

use agentstream_server::http::token::{Grant, Scope, Scopes, TokenKeys};
use common::{TestServer, WAIT_MAX};
use eventsource_stream::Eventsource;
use futures::{SinkExt, StreamExt};
use reqwest::header::{self, HeaderMap, HeaderValue};
use reqwest::Method;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

const OPERATOR: &str = "operator-s3cret";
const SECRET: &str = "0123456789abcdef0123456789abcdef-new";
const OLD_SECRET: &str = "fedcba9876543210fedcba9876543210-old";
const APP_ORIGIN: &str = "http://app.example:5173";

/// A server with an operator token, two token secrets (rotation) and one allowed origin; its
/// `http` client is the operator's.
async fn server_with(adjust: impl FnOnce(&mut agentstream_server::config::Config)) -> TestServer {
    let mut server = TestServer::start_with(|config| {
        config.api_token = Some(OPERATOR.to_owned());
        // A second of clock skew: expiries come within the test's patience.
        config.token_keys = Some(
            TokenKeys::new(&format!("{SECRET},{OLD_SECRET}"), 3600)
                .unwrap()
                .with_clock_skew_seconds(1),
        );
        config.allowed_origins = vec![APP_ORIGIN.to_owned()];
        adjust(config);
    })
    .await;
    let mut headers = HeaderMap::new();
    headers.insert(
        header::AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {OPERATOR}")).unwrap(),
    );
    server.http = reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap();
    server
}

/// A token for `sub` signed with `secret`, living `ttl_s` from now.
fn token_signed(secret: &str, sub: &str, agents: &[&str], scope: &[Scope], ttl_s: i64) -> String {
    let keys = TokenKeys::new(secret, 3600).unwrap();
    let now = chrono::Utc::now().timestamp();
    keys.sign(
        &Grant {
            sub: sub.to_owned(),
            agents: agents.iter().map(|agent| agent.to_string()).collect(),
            scopes: Scopes::of(scope),
            expires_at: now + ttl_s,
        },
        now,
    )
}

fn token(sub: &str, agents: &[&str], scope: &[Scope]) -> String {
    token_signed(SECRET, sub, agents, scope, 300)
}

/// `(status, error code or "")` of a request made with `token`.
async fn call(
    server: &TestServer,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, String) {
    let client = reqwest::Client::new();
    let mut request = client.request(method, server.url(path)).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.to_str().unwrap().starts_with("application/json"));
    let code = if status >= 400 && is_json {
        let body: Value = response.json().await.unwrap();
        body["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    } else {
        String::new()
    };
    (status, code)
}

/// GET `path` with `token`, as JSON.
async fn get_as(server: &TestServer, token: &str, path: &str) -> Value {
    let response = reqwest::Client::new()
        .get(server.url(path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    response.json().await.unwrap()
}

/// Every event of an SSE response (200) until it ends (within `WAIT_MAX`), keep-alives left out.
async fn read_to_end(response: reqwest::Response) -> Vec<eventsource_stream::Event> {
    assert_eq!(response.status(), 200);
    let mut events = Box::pin(response.bytes_stream().eventsource());
    let mut seen = Vec::new();
    loop {
        match tokio::time::timeout(WAIT_MAX, events.next())
            .await
            .expect("the stream ended at expiry")
        {
            Some(Ok(event)) if !event.data.is_empty() => seen.push(event),
            Some(Ok(_)) => {}
            Some(Err(_)) | None => return seen,
        }
    }
}

/// A server whose runs outlive a two-second token, alice's agent on it, and such a token.
async fn slow_run_and_short_token() -> (TestServer, Uuid, String) {
    let server = server_with(|config| {
        config.scripted.reply_tokens = 400;
        config.scripted.token_delay_ms = 20;
    })
    .await;
    let agent = create_agent(&server, json!({ "owner": "alice" })).await;
    let short = token_signed(
        SECRET,
        "alice",
        &[&agent.to_string()],
        &[Scope::Read, Scope::Write],
        2,
    );
    (server, agent, short)
}

async fn create_agent(server: &TestServer, body: Value) -> Uuid {
    let response = server
        .http
        .post(server.url("/v1/agents"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.unwrap();
    body["id"].as_str().unwrap().parse().unwrap()
}

/// Runs one message on `agent_id` as the operator; its run id once it ended.
async fn run_once(server: &TestServer, agent_id: Uuid) -> Uuid {
    let run_id = server.start_run(agent_id, "hello").await;
    server.wait_for_run_end(agent_id, run_id).await;
    run_id
}

fn user_message(text: &str) -> Value {
    json!({ "id": Uuid::new_v4().to_string(), "role": "user", "parts": [{ "type": "text", "text": text }] })
}

/// (surface, token, method, path, body, expected status, expected error code)
type Case<'a> = (
    &'a str,
    &'a str,
    Method,
    String,
    Option<Value>,
    u16,
    &'a str,
);

#[tokio::test]
async fn each_surface_allows_each_scope_on_the_tokens_agents_only() {
    use Scope::{Approve, Read, Write};
    let server = server_with(|_| {}).await;
    let mine = create_agent(&server, json!({ "name": "alice's", "owner": "alice" })).await;
    let theirs = create_agent(&server, json!({ "name": "bob's", "owner": "bob" })).await;
    let my_run = run_once(&server, mine).await;
    let their_run = run_once(&server, theirs).await;
    let (m, t) = (mine.to_string(), theirs.to_string());
    let agents = [m.as_str(), "alice-chat", "alice-thread"];
    let read = token("alice", &agents, &[Read]);
    let write = token("alice", &agents, &[Write]);
    let approve = token("alice", &agents, &[Approve]);
    let all = token("alice", &agents, &[Read, Write, Approve]);
    // Bob's token names alice's agent and chat: the owner check keeps him out.
    let bob = token("bob", &[&m, "alice-chat"], &[Read, Write, Approve]);
    let letta_message = || json!({ "messages": [{ "role": "user", "content": "hi" }] });
    let letta_approval = || json!({ "messages": [{ "type": "approval", "approve": true, "approval_request_id": "x" }] });
    // A person's answer and a client tool's result in one request: it needs both scopes.
    let letta_mixed = || {
        json!({ "messages": [{ "type": "approval", "approvals": [
        { "type": "approval", "tool_call_id": "x", "approve": true },
        { "type": "tool", "tool_call_id": "y", "tool_return": "yes", "status": "success" },
    ] }] })
    };
    let ai_sdk_mixed = || {
        json!({ "id": "alice-chat", "trigger": "submit-message", "messages": [
        user_message("hi"),
        { "id": "a1", "role": "assistant", "parts": [
            { "type": "tool-calculator", "toolCallId": "x", "state": "approval-responded", "input": {},
              "approval": { "id": "x", "approved": true } },
            { "type": "tool-confirm", "toolCallId": "y", "state": "output-available", "input": {}, "output": "yes" },
        ] },
    ] })
    };
    let ag_ui = |thread: &str| {
        json!({ "threadId": thread, "runId": Uuid::new_v4().to_string(), "state": {}, "tools": [],
                "context": [], "forwardedProps": {},
                "messages": [{ "id": Uuid::new_v4().to_string(), "role": "user", "content": "hi" }] })
    };
    let get = Method::GET;
    let post = Method::POST;
    // (surface, token, method, path, body, expected status, expected code)
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        // Native REST and SSE.
        ("agent", &read, get.clone(), format!("/v1/agents/{m}"), None, 200, ""),
        ("agent", &write, get.clone(), format!("/v1/agents/{m}"), None, 403, "insufficient_scope"),
        ("agent", &read, get.clone(), format!("/v1/agents/{t}"), None, 404, "unknown_agent"),
        ("agent", &bob, get.clone(), format!("/v1/agents/{m}"), None, 404, "unknown_agent"),
        ("agent", &read, get.clone(), format!("/v1/agents/{}", Uuid::new_v4()), None, 404, "unknown_agent"),
        ("events", &read, get.clone(), format!("/v1/agents/{m}/events?since=0"), None, 200, ""),
        ("events", &approve, get.clone(), format!("/v1/agents/{m}/events?since=0"), None, 403, "insufficient_scope"),
        ("events", &read, get.clone(), format!("/v1/agents/{t}/events?since=0"), None, 404, "unknown_agent"),
        ("sse", &read, get.clone(), format!("/v1/agents/{m}/events/stream?since=0"), None, 200, ""),
        ("sse", &write, get.clone(), format!("/v1/agents/{m}/events/stream?since=0"), None, 403, "insufficient_scope"),
        ("sse", &read, get.clone(), format!("/v1/agents/{t}/events/stream?since=0"), None, 404, "unknown_agent"),
        ("run", &read, get.clone(), format!("/v1/runs/{my_run}"), None, 200, ""),
        ("run", &read, get.clone(), format!("/v1/runs/{their_run}"), None, 404, "unknown_run"),
        ("run", &write, get.clone(), format!("/v1/runs/{my_run}"), None, 403, "insufficient_scope"),
        ("send", &read, post.clone(), format!("/v1/agents/{m}/runs"), Some(json!({"content": "x"})), 403, "insufficient_scope"),
        ("send", &write, post.clone(), format!("/v1/agents/{t}/runs"), Some(json!({"content": "x"})), 404, "unknown_agent"),
        ("cancel", &read, post.clone(), format!("/v1/agents/{m}/messages/cancel"), None, 403, "insufficient_scope"),
        ("cancel", &write, post.clone(), format!("/v1/agents/{m}/messages/cancel"), None, 200, ""),
        ("cancel", &write, post.clone(), format!("/v1/agents/{t}/messages/cancel"), None, 404, "unknown_agent"),
        ("approvals", &write, post.clone(), format!("/v1/agents/{m}/approvals"), Some(json!({"call_id": "c", "approve": true})), 403, "insufficient_scope"),
        ("approvals", &approve, post.clone(), format!("/v1/agents/{m}/approvals"), Some(json!({"call_id": "c", "approve": true})), 404, "unknown_approval"),
        ("approvals", &approve, post.clone(), format!("/v1/agents/{t}/approvals"), Some(json!({"call_id": "c", "approve": true})), 404, "unknown_agent"),
        // Operator only, whatever the scope.
        ("operator", &all, post.clone(), "/v1/agents".into(), Some(json!({"name": "x"})), 403, "operator_only"),
        ("operator", &all, Method::DELETE, format!("/v1/agents/{m}"), None, 403, "operator_only"),
        ("operator", &all, get.clone(), "/v1/stats".into(), None, 403, "operator_only"),
        ("operator", &all, post.clone(), "/v1/tokens".into(), Some(json!({"sub": "alice", "agents": [], "scope": "read"})), 403, "operator_only"),
        ("operator", &all, get.clone(), "/v1/tools".into(), None, 403, "operator_only"),
        ("operator", &all, get.clone(), "/v1/agents?owner=bob".into(), None, 403, "operator_only"),
        ("tools", &read, get.clone(), format!("/v1/tools?agent_id={m}"), None, 200, ""),
        ("tools", &read, get.clone(), format!("/v1/tools?agent_id={t}"), None, 404, "unknown_agent"),
        // Letta.
        ("letta", &read, get.clone(), format!("/v1/agents/{m}/messages"), None, 200, ""),
        ("letta", &read, get.clone(), format!("/v1/agents/{t}/messages"), None, 404, "unknown_agent"),
        ("letta", &read, post.clone(), format!("/v1/agents/{m}/messages/stream"), Some(letta_message()), 403, "insufficient_scope"),
        ("letta", &approve, post.clone(), format!("/v1/agents/{m}/messages/stream"), Some(letta_message()), 403, "insufficient_scope"),
        ("letta", &write, post.clone(), format!("/v1/agents/{m}/messages"), Some(letta_approval()), 403, "insufficient_scope"),
        ("letta", &write, post.clone(), format!("/v1/agents/{t}/messages/stream"), Some(letta_message()), 404, "unknown_agent"),
        ("letta", &approve, post.clone(), format!("/v1/agents/{m}/messages"), Some(letta_mixed()), 403, "insufficient_scope"),
        ("letta", &write, post.clone(), format!("/v1/agents/{m}/messages"), Some(letta_mixed()), 403, "insufficient_scope"),
        ("letta", &read, post.clone(), format!("/v1/runs/{my_run}/stream"), Some(json!({})), 200, ""),
        ("letta", &read, post.clone(), format!("/v1/runs/{their_run}/stream"), Some(json!({})), 404, "unknown_run"),
        // AI SDK: a chat id the token names gets its agent on first use, owned by the user.
        ("ai-sdk", &read, post.clone(), "/v1/ai-sdk/chat".into(), Some(json!({"id": "alice-chat", "trigger": "submit-message", "messages": [user_message("hi")]})), 403, "insufficient_scope"),
        ("ai-sdk", &write, post.clone(), "/v1/ai-sdk/chat".into(), Some(json!({"id": "someone-elses", "trigger": "submit-message", "messages": [user_message("hi")]})), 404, "unknown_chat"),
        ("ai-sdk", &write, post.clone(), "/v1/ai-sdk/chat".into(), Some(json!({"id": t, "trigger": "submit-message", "messages": [user_message("hi")]})), 404, "unknown_agent"),
        ("ai-sdk", &write, post.clone(), "/v1/ai-sdk/chat".into(), Some(json!({"id": "alice-chat", "trigger": "submit-message", "messages": [user_message("hi")]})), 200, ""),
        ("ai-sdk", &approve, post.clone(), "/v1/ai-sdk/chat".into(), Some(ai_sdk_mixed()), 403, "insufficient_scope"),
        ("ai-sdk", &write, post.clone(), "/v1/ai-sdk/chat".into(), Some(ai_sdk_mixed()), 403, "insufficient_scope"),
        ("ai-sdk", &read, get.clone(), "/v1/ai-sdk/chat/alice-chat/messages".into(), None, 200, ""),
        ("ai-sdk", &bob, get.clone(), "/v1/ai-sdk/chat/alice-chat/messages".into(), None, 404, "unknown_chat"),
        ("ai-sdk", &read, get.clone(), "/v1/ai-sdk/chat/someone-elses/messages".into(), None, 404, "unknown_chat"),
        ("ai-sdk", &read, get.clone(), format!("/v1/ai-sdk/chat/{t}/stream"), None, 404, "unknown_agent"),
        ("ai-sdk", &read, post.clone(), "/v1/ai-sdk/chat/alice-chat/stop".into(), None, 403, "insufficient_scope"),
        ("ai-sdk", &write, post.clone(), "/v1/ai-sdk/chat/alice-chat/stop".into(), None, 200, ""),
        // AG-UI.
        ("ag-ui", &read, post.clone(), "/v1/ag-ui".into(), Some(ag_ui("alice-thread")), 403, "insufficient_scope"),
        ("ag-ui", &write, post.clone(), "/v1/ag-ui".into(), Some(ag_ui("bobs-thread")), 404, "unknown_chat"),
        ("ag-ui", &write, post.clone(), "/v1/ag-ui".into(), Some(ag_ui(&t)), 404, "unknown_agent"),
        ("ag-ui", &write, post.clone(), "/v1/ag-ui".into(), Some(ag_ui("alice-thread")), 200, ""),
        ("ag-ui", &read, post.clone(), "/v1/ag-ui/connect".into(), Some(json!({"threadId": m})), 200, ""),
        ("ag-ui", &read, post.clone(), "/v1/ag-ui/connect".into(), Some(json!({"threadId": t})), 404, "unknown_agent"),
        ("ag-ui", &write, post.clone(), "/v1/ag-ui/connect".into(), Some(json!({"threadId": m})), 403, "insufficient_scope"),
        ("ag-ui", &read, post.clone(), "/v1/ag-ui/cancel".into(), Some(json!({"threadId": m})), 403, "insufficient_scope"),
        ("ag-ui", &write, post.clone(), "/v1/ag-ui/cancel".into(), Some(json!({"threadId": t})), 404, "unknown_agent"),
        ("ag-ui", &write, post.clone(), "/v1/ag-ui/cancel".into(), Some(json!({"threadId": "alice-thread"})), 200, ""),
        // Pages.
        ("page", &read, get.clone(), format!("/agents/{m}/history"), None, 200, ""),
        ("page", &read, get.clone(), format!("/agents/{t}/history"), None, 404, ""),
        ("page", &read, get.clone(), format!("/agents/{m}/runs/{my_run}"), None, 200, ""),
        ("page", &write, get.clone(), format!("/agents/{m}"), None, 403, ""),
        ("page", &all, post.clone(), "/agents".into(), None, 403, ""),
    ];
    for (surface, token, method, path, body, status, code) in cases {
        let got = call(&server, token, method.clone(), &path, body.clone()).await;
        assert_eq!(
            got,
            (status, code.to_owned()),
            "{surface}: {method} {path} {body:?}"
        );
    }
    // What the allowed writes did: alice's chat and thread exist now, owned by her.
    let listed = get_as(&server, &read, "/v1/agents").await;
    let listed = listed.as_array().unwrap();
    let mut names: Vec<&str> = listed
        .iter()
        .map(|agent| agent["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["alice's", "chat alice-chat", "chat alice-thread"],
        "only the token's agents"
    );
    assert!(
        listed.iter().all(|agent| agent["owner"] == "alice"),
        "{listed:?}"
    );
    // The operator lists by owner; bob has one agent, and the refused requests made none.
    let bobs = get_as(&server, OPERATOR, "/v1/agents?owner=bob").await;
    assert_eq!(bobs.as_array().unwrap().len(), 1);
    assert_eq!(bobs[0]["id"], t);
    let everyone = get_as(&server, OPERATOR, "/v1/agents").await;
    assert_eq!(
        everyone.as_array().unwrap().len(),
        4,
        "alice's, bob's, alice's chat and thread: {everyone:?}"
    );
    // The agents page lists only the token's agents too.
    let page = reqwest::Client::new()
        .get(server.url("/"))
        .header(header::COOKIE, format!("agentstream_token={read}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("alice&#x27;s") || page.contains("alice's"),
        "{page}"
    );
    assert!(
        !page.contains("bob"),
        "another user's agent is listed on the page"
    );
}

#[tokio::test]
async fn a_websocket_with_a_scoped_token_reaches_its_agents_only() {
    let server = server_with(|_| {}).await;
    let mine = create_agent(&server, json!({ "owner": "alice" })).await;
    let theirs = create_agent(&server, json!({ "owner": "bob" })).await;
    let read = token("alice", &[&mine.to_string()], &[Scope::Read]);
    let mut request = server.ws_url.as_str().into_client_request().unwrap();
    request.headers_mut().insert(
        header::AUTHORIZATION,
        format!("Bearer {read}").parse().unwrap(),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let mut ask = async |message: Value| -> Value {
        socket
            .send(Message::Text(message.to_string().into()))
            .await
            .unwrap();
        let frame = tokio::time::timeout(WAIT_MAX, socket.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        serde_json::from_str(frame.to_text().unwrap()).unwrap()
    };
    let subscribed = ask(json!({"type": "subscribe", "agent_id": mine, "since": 0})).await;
    assert_eq!(subscribed["type"], "subscribed", "{subscribed}");
    let refused = ask(json!({"type": "subscribe", "agent_id": theirs, "since": 0})).await;
    assert_eq!(
        (refused["type"].as_str(), refused["code"].as_str()),
        (Some("error"), Some("unknown_agent"))
    );
    let cancel = ask(json!({"type": "cancel", "agent_id": mine})).await;
    assert_eq!(cancel["code"], "insufficient_scope", "{cancel}");
    let approve =
        ask(json!({"type": "approve", "agent_id": mine, "call_id": "c", "approve": true})).await;
    assert_eq!(approve["code"], "insufficient_scope", "{approve}");
}

#[tokio::test]
async fn tokens_are_minted_by_the_operator_and_refused_when_forged_or_stale() {
    let server = server_with(|config| {
        config.token_keys = Some(TokenKeys::new(&format!("{SECRET},{OLD_SECRET}"), 600).unwrap());
    })
    .await;
    let agent = create_agent(&server, json!({ "owner": "alice" })).await;
    let minted = server
        .http
        .post(server.url("/v1/tokens"))
        .json(&json!({ "sub": "alice", "agents": [agent], "scope": "read", "ttl_s": 60 }))
        .send()
        .await
        .unwrap();
    assert_eq!(minted.status(), 201);
    let minted: Value = minted.json().await.unwrap();
    let expires_at =
        chrono::DateTime::parse_from_rfc3339(minted["expires_at"].as_str().unwrap()).unwrap();
    let lives = expires_at.timestamp() - chrono::Utc::now().timestamp();
    assert!((55..=61).contains(&lives), "{minted}");
    let minted = minted["token"].as_str().unwrap().to_owned();
    assert_eq!(
        call(
            &server,
            &minted,
            Method::GET,
            &format!("/v1/agents/{agent}"),
            None
        )
        .await,
        (200, String::new())
    );
    // Bad mint requests: clear 422s, nothing minted.
    for (body, says) in [
        (
            json!({ "sub": "alice", "agents": [], "scope": "read", "ttl_s": 601 }),
            "ttl_s must be 1–600",
        ),
        (
            json!({ "sub": "alice", "agents": [], "scope": "read admin" }),
            "unknown scope \"admin\"",
        ),
        (
            json!({ "sub": "", "agents": [], "scope": "read" }),
            "sub must be",
        ),
        (
            json!({ "sub": "alice", "agents": ["x".repeat(129)], "scope": "read" }),
            "is not 1–128 characters",
        ),
    ] {
        let response = server
            .http
            .post(server.url("/v1/tokens"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 422, "{body}");
        let error: Value = response.json().await.unwrap();
        assert!(
            error["error"]["message"].as_str().unwrap().contains(says),
            "{error}"
        );
    }
    let unknown_field = server
        .http
        .post(server.url("/v1/tokens"))
        .json(&json!({ "sub": "alice", "agents": [], "scope": "read", "admin": true }))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown_field.status(), 422);
    // Rotation: a token signed with the older secret still verifies.
    let old = token_signed(
        OLD_SECRET,
        "alice",
        &[&agent.to_string()],
        &[Scope::Read],
        60,
    );
    assert_eq!(
        call(
            &server,
            &old,
            Method::GET,
            &format!("/v1/agents/{agent}"),
            None
        )
        .await
        .0,
        200
    );
    // Refused outright: another secret, alg none, expired, living too long. 401 with a reason.
    let other = token_signed(
        "another-secret-another-secret-xxx",
        "alice",
        &[&agent.to_string()],
        &[Scope::Read],
        60,
    );
    let expired = token_signed(SECRET, "alice", &[&agent.to_string()], &[Scope::Read], -120);
    let too_long = token_signed(SECRET, "alice", &[&agent.to_string()], &[Scope::Read], 3000);
    use base64::Engine;
    let b64 = |text: String| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text);
    let none = format!(
        "{}.{}.",
        b64(r#"{"alg":"none","typ":"JWT"}"#.into()),
        b64(json!({"sub": "alice", "agents": [agent], "scope": "read write approve", "exp": chrono::Utc::now().timestamp() + 60}).to_string())
    );
    for (what, token, code) in [
        ("another secret", &other, "invalid_token"),
        ("alg none", &none, "invalid_token"),
        ("expired", &expired, "token_expired"),
        ("too long", &too_long, "invalid_token"),
    ] {
        let response = reqwest::Client::new()
            .get(server.url(&format!("/v1/agents/{agent}")))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401, "{what}");
        let challenge = response.headers()[header::WWW_AUTHENTICATE]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(challenge.contains("invalid_token"), "{what}: {challenge}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "{what}: {body}");
    }
}

#[tokio::test]
async fn a_server_without_a_secret_mints_nothing() {
    let server = server_with(|config| config.token_keys = None).await;
    let response = server
        .http
        .post(server.url("/v1/tokens"))
        .json(&json!({ "sub": "alice", "agents": [], "scope": "read" }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 501);
    // And a JWT is just a wrong operator token there.
    let jwt = token("alice", &[], &[Scope::Read]);
    assert_eq!(
        call(&server, &jwt, Method::GET, "/v1/agents", None).await,
        (401, "unauthorized".to_owned())
    );
}

#[tokio::test]
async fn an_expiring_token_ends_its_streams_and_a_fresh_one_resumes_from_the_cursor() {
    let (server, agent, short) = slow_run_and_short_token().await;
    let run_id = server.start_run(agent, "a long answer").await;

    // Native SSE, the AI SDK's resume and AG-UI's connect, all open on the run: each ends at the
    // token's expiry, not at the run's end.
    let client = reqwest::Client::new();
    let native = client
        .get(server.url(&format!(
            "/v1/agents/{agent}/events/stream?since=0&token={short}"
        )))
        .send();
    let ai_sdk = client
        .get(server.url(&format!("/v1/ai-sdk/chat/{agent}/stream")))
        .bearer_auth(&short)
        .send();
    let ag_ui = client
        .post(server.url("/v1/ag-ui/connect"))
        .bearer_auth(&short)
        .json(&json!({ "threadId": agent }))
        .send();
    let (native, ai_sdk, ag_ui) = tokio::join!(
        read_to_end(native.await.unwrap()),
        read_to_end(ai_sdk.await.unwrap()),
        read_to_end(ag_ui.await.unwrap()),
    );
    assert!(!ai_sdk.is_empty() && !ag_ui.is_empty());
    assert!(
        ai_sdk.iter().all(|event| event.data != "[DONE]"),
        "the AI SDK stream ended before the answer did"
    );
    assert!(
        ag_ui
            .iter()
            .all(|event| !event.data.contains("RUN_FINISHED")),
        "the AG-UI stream ended before the run did"
    );
    let seen: Vec<u64> = native
        .iter()
        .map(|event| {
            serde_json::from_str::<Value>(&event.data).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert!(!seen.is_empty());
    let cursor = *seen.last().unwrap();
    let log = server.wait_for_run_end(agent, run_id).await;
    assert!(
        cursor < log.last().unwrap().seq,
        "the stream ended at the token's expiry, before the run's end (seq {cursor})"
    );
    assert_eq!(
        seen,
        (1..=cursor).collect::<Vec<_>>(),
        "every event once, in order"
    );
    // The expired token is refused now; a fresh one reads exactly what came after the cursor.
    assert_eq!(
        call(
            &server,
            &short,
            Method::GET,
            &format!("/v1/agents/{agent}/events?since={cursor}"),
            None
        )
        .await,
        (401, "token_expired".to_owned())
    );
    let fresh = token("alice", &[&agent.to_string()], &[Scope::Read]);
    let page: Value = reqwest::Client::new()
        .get(server.url(&format!(
            "/v1/agents/{agent}/events?since={cursor}&limit=1000"
        )))
        .bearer_auth(&fresh)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rest: Vec<u64> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(
        rest,
        ((cursor + 1)..=log.last().unwrap().seq).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn an_expiring_token_closes_its_websocket_and_ends_a_letta_stream_without_cancelling() {
    let (server, agent, short) = slow_run_and_short_token().await;

    // WebSocket: closed with 4401 at expiry.
    let mut request = format!("{}?token={short}", server.ws_url)
        .into_client_request()
        .unwrap();
    request.headers_mut().remove(header::AUTHORIZATION);
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let closed = tokio::time::timeout(WAIT_MAX, async {
        while let Some(frame) = socket.next().await {
            if let Ok(Message::Close(Some(frame))) = frame {
                return Some(frame);
            }
        }
        None
    })
    .await
    .expect("the socket was closed at expiry")
    .expect("with a close frame");
    assert_eq!(u16::from(closed.code), 4401, "{closed:?}");

    // Letta, foreground: the stream ends with `token_expired`, and the run goes on to its end.
    let short = token_signed(
        SECRET,
        "alice",
        &[&agent.to_string()],
        &[Scope::Read, Scope::Write],
        2,
    );
    let response = reqwest::Client::new()
        .post(server.url(&format!("/v1/agents/{agent}/messages/stream")))
        .bearer_auth(&short)
        .json(&json!({ "messages": [{ "role": "user", "content": "a long answer" }], "stream_tokens": true }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut events = Box::pin(response.bytes_stream().eventsource());
    let mut last = None;
    while let Some(event) = tokio::time::timeout(WAIT_MAX, events.next()).await.unwrap() {
        last = Some(event.unwrap());
    }
    let last = last.unwrap();
    let body: Value = serde_json::from_str(&last.data).unwrap();
    assert_eq!(
        (last.event.as_str(), body["error_type"].as_str()),
        ("error", Some("token_expired")),
        "{body}"
    );
    let run_id: Uuid = body["run_id"].as_str().unwrap().parse().unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let log = server.wait_for_run_end(agent, run_id).await;
    let end = log
        .iter()
        .rev()
        .find(|event| event.kind.is_run_end())
        .unwrap();
    assert_eq!(
        end.kind,
        app::EventKind::RunCompleted,
        "the run was not cancelled by the expiry"
    );
}

#[tokio::test]
async fn another_origin_gets_cors_only_when_listed() {
    let server = server_with(|_| {}).await;
    let client = reqwest::Client::new();
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
    let allow_headers = headers["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    for wanted in [
        "authorization",
        "content-type",
        "last-event-id",
        "idempotency-key",
    ] {
        assert!(allow_headers.contains(wanted), "{allow_headers}");
    }
    assert!(headers["access-control-allow-methods"]
        .to_str()
        .unwrap()
        .contains("POST"));
    assert!(
        headers.get("access-control-allow-credentials").is_none(),
        "never credentials"
    );

    let refused = preflight("http://evil.example").await.unwrap();
    assert!(refused
        .headers()
        .get("access-control-allow-origin")
        .is_none());

    // The actual request: the origin echoed, the stream marker readable by the script.
    let agent = create_agent(&server, json!({})).await;
    let response = client
        .get(server.url(&format!("/v1/agents/{agent}")))
        .header(header::ORIGIN, APP_ORIGIN)
        .bearer_auth(OPERATOR)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["access-control-allow-origin"],
        APP_ORIGIN
    );
    let exposed = response.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        exposed.contains("x-vercel-ai-ui-message-stream") && exposed.contains("location"),
        "{exposed}"
    );
    // A refused request from a listed origin still carries CORS, so the script can read why.
    let unauthorized = client
        .get(server.url(&format!("/v1/agents/{agent}")))
        .header(header::ORIGIN, APP_ORIGIN)
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorized.status(), 401);
    assert_eq!(
        unauthorized.headers()["access-control-allow-origin"],
        APP_ORIGIN
    );
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
            let list: Value = http.get(url).send().await.unwrap().json().await.unwrap();
            list.as_array().unwrap().len()
        }
    };
    let before = agents(&server).await;
    let evil = [
        ("origin", "https://evil.example"),
        ("sec-fetch-site", "cross-site"),
    ];
    let posts = [
        (
            "/agents",
            "application/x-www-form-urlencoded",
            "name=x".to_owned(),
        ),
        (
            &*format!("/agents/{agent_id}/runs"),
            "application/x-www-form-urlencoded",
            "content=hello".to_owned(),
        ),
        (
            &*format!("/v1/agents/{agent_id}/messages/cancel"),
            "text/plain",
            String::new(),
        ),
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
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 403, "{path}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["code"], "cross_site_request", "{path}");
    }
    assert_eq!(agents(&server).await, before, "nothing was created");
    assert!(
        server.all_events(agent_id).await.is_empty(),
        "no message was sent"
    );

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
        let response = request.send().await.unwrap();
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
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let alice = token("alice", &["chat-a"], &[Scope::Read, Scope::Write]);
    let mallory = token("mallory", &["chat-m"], &[Scope::Read, Scope::Write]);
    let open = |link: String, site: &'static str, cookie: Option<String>| {
        let mut request = browser
            .get(server.url(&link))
            .header("sec-fetch-site", site);
        if let Some(cookie) = cookie {
            request = request.header(header::COOKIE, format!("agentstream_token={cookie}"));
        }
        request.send()
    };
    let sets_cookie = |response: &reqwest::Response| {
        response
            .headers()
            .get(header::SET_COOKIE)
            .map(|value| value.to_str().unwrap().to_owned())
    };
    // Another site's link, alice signed in: a page that names mallory and alice; nothing set.
    let attacked = open(
        format!("/?token={mallory}"),
        "cross-site",
        Some(alice.clone()),
    )
    .await
    .unwrap();
    assert_eq!(attacked.status(), 200);
    assert_eq!(sets_cookie(&attacked), None);
    let page = attacked.text().await.unwrap();
    assert!(page.contains("Open agentstream as user mallory?"), "{page}");
    assert!(
        page.contains("signed in as <strong>user alice</strong>"),
        "{page}"
    );
    // Typed into the address bar while alice is signed in: asked too.
    let typed = open(format!("/?token={mallory}"), "none", Some(alice.clone()))
        .await
        .unwrap();
    assert_eq!(sets_cookie(&typed), None);
    // A forged "continue" from another site is still a question.
    let forged = open(
        format!("/?token={mallory}&continue=1"),
        "cross-site",
        Some(alice.clone()),
    )
    .await
    .unwrap();
    assert_eq!(sets_cookie(&forged), None);
    // The person clicks Continue on the page (a same-origin navigation): mallory's now.
    let continued = open(
        format!("/?token={mallory}&continue=1"),
        "same-origin",
        Some(alice.clone()),
    )
    .await
    .unwrap();
    assert!(continued.status().is_redirection());
    assert_eq!(continued.headers()[header::LOCATION], "/");
    assert!(sets_cookie(&continued).unwrap().contains(&mallory));
    // Nobody signed in, a link the person opened: at once; from another site: asked.
    let fresh = open(format!("/?token={alice}"), "none", None)
        .await
        .unwrap();
    assert!(sets_cookie(&fresh).unwrap().contains(&alice));
    let cross = open(format!("/?token={alice}"), "cross-site", None)
        .await
        .unwrap();
    assert_eq!(sets_cookie(&cross), None);
    assert!(cross
        .text()
        .await
        .unwrap()
        .contains("Continue as user alice"));
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
    let reader = reqwest::Client::new();
    let stream = |token: &str| {
        reader
            .get(server.url(&format!("/v1/agents/{agent}/events/stream?since=0")))
            .bearer_auth(token)
            .send()
    };
    let long_poll = |token: &str| {
        reader
            .get(server.url(&format!(
                "/v1/streams/agents/{agent}?offset=now&live=long-poll"
            )))
            .bearer_auth(token)
            .send()
    };
    let first = stream(&alice).await.unwrap();
    let second = stream(&alice).await.unwrap();
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
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
    assert_eq!(
        body["error"]["code"], "too_many_requests_for_token",
        "{body}"
    );
    let mut socket = format!("{}?token={alice}", server.ws_url)
        .into_client_request()
        .unwrap();
    socket.headers_mut().remove("origin");
    let refused = tokio_tungstenite::connect_async(socket).await;
    assert!(refused.is_err(), "a WebSocket past her share is refused");
    let plain = reader
        .get(server.url(&format!("/v1/agents/{agent}/events")))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
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
