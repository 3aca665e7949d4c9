//! Scoped tokens over real sockets: each surface × each scope, agents that belong to someone,
//! minting, expiry that ends streams without losing anything, and CORS for another origin.

use crate::common;
mod origins;
mod tokens;

use std::time::Duration;

use crate::common::RequestExt;
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
    server.http =
        agentstream_server::http_client::builder().default_headers(headers).build().unwrap();
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
    let client = agentstream_server::http_client::client();
    let mut request = client.request(method, server.url(path)).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.sent().await;
    let status = response.status().as_u16();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.to_str().unwrap().starts_with("application/json"));
    let code = if status >= 400 && is_json {
        let body: Value = response.json().await.unwrap();
        body["error"]["code"].as_str().unwrap_or_default().to_owned()
    } else {
        String::new()
    };
    (status, code)
}

/// GET `path` with `token`, as JSON.
async fn get_as(server: &TestServer, token: &str, path: &str) -> Value {
    let response = agentstream_server::http_client::client()
        .get(server.url(path))
        .bearer_auth(token)
        .sent()
        .await;
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
    let short =
        token_signed(SECRET, "alice", &[&agent.to_string()], &[Scope::Read, Scope::Write], 2);
    (server, agent, short)
}

async fn create_agent(server: &TestServer, body: Value) -> Uuid {
    let response = server.post("/v1/agents", &body).await;
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
type Case<'a> = (&'a str, &'a str, Method, String, Option<Value>, u16, &'a str);

#[tokio::test]
async fn each_surface_allows_each_scope_on_the_tokens_agents_only() {
    use Scope::{Approve, Read, Write};
    let server = server_with(|_| {}).await;
    let mine = create_agent(&server, json!({ "name": "alice's", "owner": "alice" })).await;
    let theirs = create_agent(&server, json!({ "name": "bob's", "owner": "bob" })).await;
    let my_run = run_once(&server, mine).await;
    let their_run = run_once(&server, theirs).await;
    let (m, t) = (mine.to_string(), theirs.to_string());
    let my_response = format!("resp_{}", my_run.simple());
    let their_response = format!("resp_{}", their_run.simple());
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
    // A branch of each: reached through its conversation, by its owner only.
    let fork = |agent: Uuid| {
        let (server, url) = (&server, format!("/v1/agents/{agent}/branches"));
        async move { server.post_json(&url, &json!({ "after_seq": 0 })).await["id"].clone() }
    };
    let (my_branch, their_branch) = (fork(mine).await, fork(theirs).await);
    let (mb, tb) = (my_branch.as_str().unwrap(), their_branch.as_str().unwrap());
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
        // The Responses API: a scoped token names its agent as the model; a model handle (a fresh
        // agent) is the operator's.
        ("responses", &read, post.clone(), "/v1/responses".into(), Some(json!({"model": m, "input": "hi"})), 403, "insufficient_scope"),
        ("responses", &write, post.clone(), "/v1/responses".into(), Some(json!({"model": t, "input": "hi"})), 404, "unknown_agent"),
        ("responses", &bob, post.clone(), "/v1/responses".into(), Some(json!({"model": m, "input": "hi"})), 404, "unknown_agent"),
        ("responses", &write, post.clone(), "/v1/responses".into(), Some(json!({"model": "scripted", "input": "hi"})), 403, "operator_only"),
        ("responses", &write, post.clone(), "/v1/responses".into(), Some(json!({"model": m, "input": "hi"})), 200, ""),
        ("responses", &read, get.clone(), format!("/v1/responses/{my_response}"), None, 200, ""),
        ("responses", &write, get.clone(), format!("/v1/responses/{my_response}"), None, 403, "insufficient_scope"),
        ("responses", &read, get.clone(), format!("/v1/responses/{their_response}"), None, 404, "response_not_found"),
        ("responses", &bob, get.clone(), format!("/v1/responses/{my_response}"), None, 404, "response_not_found"),
        ("responses", &read, get.clone(), format!("/v1/responses/{my_response}/input_items"), None, 200, ""),
        ("responses", &read, get.clone(), format!("/v1/responses/{their_response}/input_items"), None, 404, "response_not_found"),
        ("responses", &read, post.clone(), format!("/v1/responses/{my_response}/cancel"), None, 403, "insufficient_scope"),
        ("responses", &write, post.clone(), format!("/v1/responses/{their_response}/cancel"), None, 404, "response_not_found"),
        ("responses", &write, post.clone(), format!("/v1/responses/{my_response}/cancel"), None, 200, ""),
        // Branches.
        ("branches", &read, get.clone(), format!("/v1/agents/{m}/branches"), None, 200, ""),
        ("branches", &read, get.clone(), format!("/v1/agents/{t}/branches"), None, 404, "unknown_agent"),
        ("branches", &read, get.clone(), format!("/v1/agents/{mb}/events?since=0"), None, 200, ""),
        ("branches", &read, get.clone(), format!("/v1/agents/{tb}/events?since=0"), None, 404, "unknown_agent"),
        ("branches", &bob, get.clone(), format!("/v1/agents/{mb}/events?since=0"), None, 404, "unknown_agent"),
        ("branches", &read, post.clone(), format!("/v1/agents/{m}/branches"), Some(json!({"after_seq": 0})), 403, "insufficient_scope"),
        ("branches", &write, post.clone(), format!("/v1/agents/{t}/branches"), Some(json!({"after_seq": 0})), 404, "unknown_agent"),
        ("branches", &write, post.clone(), format!("/v1/agents/{mb}/branches"), Some(json!({"after_seq": 0})), 201, ""),
        ("branches", &write, Method::DELETE, format!("/v1/agents/{t}/branches/{tb}"), None, 404, "unknown_agent"),
        ("branches", &write, Method::DELETE, format!("/v1/agents/{m}/branches/{tb}"), None, 404, "unknown_branch"),
        // Pages.
        ("page", &read, get.clone(), format!("/agents/{m}/history"), None, 200, ""),
        ("page", &read, get.clone(), format!("/agents/{t}/history"), None, 404, ""),
        ("page", &read, get.clone(), format!("/agents/{m}/runs/{my_run}"), None, 200, ""),
        ("page", &write, get.clone(), format!("/agents/{m}"), None, 403, ""),
        ("page", &all, post.clone(), "/agents".into(), None, 403, ""),
    ];
    for (surface, token, method, path, body, status, code) in cases {
        let got = call(&server, token, method.clone(), &path, body.clone()).await;
        assert_eq!(got, (status, code.to_owned()), "{surface}: {method} {path} {body:?}");
    }
    // What the allowed writes did: alice's chat and thread exist now, owned by her.
    let listed = get_as(&server, &read, "/v1/agents").await;
    let listed = listed.as_array().unwrap();
    let mut names: Vec<&str> = listed.iter().map(|agent| agent["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(
        names,
        ["alice's", "chat alice-chat", "chat alice-thread"],
        "only the token's agents"
    );
    assert!(listed.iter().all(|agent| agent["owner"] == "alice"), "{listed:?}");
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
    let page = agentstream_server::http_client::client()
        .get(server.url("/"))
        .header(header::COOKIE, format!("agentstream_token={read}"))
        .sent()
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("alice&#x27;s") || page.contains("alice's"), "{page}");
    assert!(!page.contains("bob"), "another user's agent is listed on the page");
}

#[tokio::test]
async fn a_websocket_with_a_scoped_token_reaches_its_agents_only() {
    let server = server_with(|_| {}).await;
    let mine = create_agent(&server, json!({ "owner": "alice" })).await;
    let theirs = create_agent(&server, json!({ "owner": "bob" })).await;
    let read = token("alice", &[&mine.to_string()], &[Scope::Read]);
    let mut request = server.ws_url.as_str().into_client_request().unwrap();
    request.headers_mut().insert(header::AUTHORIZATION, format!("Bearer {read}").parse().unwrap());
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let mut ask = async |message: Value| -> Value {
        socket.send(Message::Text(message.to_string().into())).await.unwrap();
        let frame = tokio::time::timeout(WAIT_MAX, socket.next()).await.unwrap().unwrap().unwrap();
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
