//! A retried run request (same Idempotency-Key header or `idempotency_key`) never starts a
//! second run or writes a second user message; it gets the first run back.

use crate::common;

use crate::common::RequestExt;
use app::protocol::RunAccepted;
use app::EventKind;
use common::TestServer;
use serde_json::json;

/// Sends "hi" as a run request with `key` in the Idempotency-Key header.
async fn send_with_key(
    server: &TestServer,
    agent_id: uuid::Uuid,
    key: impl AsRef<str>,
) -> reqwest::Response {
    server
        .http
        .post(server.url(&format!("/v1/agents/{agent_id}/runs")))
        .header("Idempotency-Key", key.as_ref())
        .json(&json!({"content": "hi"}))
        .sent()
        .await
}

/// A run sent with `key`, accepted and waited out: its id.
async fn run_to_its_end(server: &TestServer, agent_id: uuid::Uuid, key: &str) -> uuid::Uuid {
    let response = send_with_key(server, agent_id, key).await;
    assert_eq!(response.status(), 202);
    let run_id = response.json::<RunAccepted>().await.unwrap().run_id;
    server.wait_for_run_end(agent_id, run_id).await;
    run_id
}

#[tokio::test]
async fn retries_with_the_same_key_get_the_same_run() {
    let server = TestServer::start_with(|config| config.scripted.reply_tokens = 200).await;
    let agent_id = server.create_agent().await;
    let url = server.url(&format!("/v1/agents/{agent_id}/runs"));

    // Five clients retry at once, two by header, three by body field.
    let mut requests = Vec::new();
    for attempt in 0..5 {
        let request = if attempt % 2 == 0 {
            server
                .http
                .post(&url)
                .header("Idempotency-Key", "send-1")
                .json(&json!({"content": "hi"}))
        } else {
            server.http.post(&url).json(&json!({"content": "hi", "idempotency_key": "send-1"}))
        };
        requests.push(tokio::spawn(request.send()));
    }
    let mut run_ids = Vec::new();
    for request in requests {
        let response = request.await.unwrap().unwrap();
        assert_eq!(response.status(), 202);
        run_ids.push(response.json::<RunAccepted>().await.unwrap().run_id);
    }
    run_ids.dedup();
    assert_eq!(run_ids.len(), 1, "one key, one run: {run_ids:?}");
    let events = server.wait_for_run_end(agent_id, run_ids[0]).await;
    let users = events.iter().filter(|event| event.kind == EventKind::User).count();
    let starts = events.iter().filter(|event| event.kind == EventKind::RunStarted).count();
    assert_eq!((users, starts), (1, 1));

    // After the run ended, the key still names that run.
    let again: RunAccepted = send_with_key(&server, agent_id, "send-1").await.json().await.unwrap();
    assert_eq!(again.run_id, run_ids[0]);
    assert_eq!(server.all_events(agent_id).await.len(), events.len());

    // A new key is a new run.
    let fresh: RunAccepted = send_with_key(&server, agent_id, "send-2").await.json().await.unwrap();
    assert_ne!(fresh.run_id, run_ids[0]);
}

#[tokio::test]
async fn a_refused_request_does_not_burn_its_key_and_bad_keys_are_refused() {
    let (server, agent_id) = TestServer::start_paced(300, 3).await.with_agent().await;
    let first = server.start_run(agent_id, "busy").await;
    // Refused while the first run goes (409)...
    let refused = send_with_key(&server, agent_id, "later").await;
    assert_eq!(refused.status(), 409);
    server.wait_for_run_end(agent_id, first).await;
    // ...so the same key starts a run once the agent is free.
    let accepted = send_with_key(&server, agent_id, "later").await;
    assert_eq!(accepted.status(), 202);
    assert_ne!(accepted.json::<RunAccepted>().await.unwrap().run_id, first);

    let too_long = send_with_key(&server, agent_id, "k".repeat(500)).await;
    assert_eq!(too_long.status(), 400);
    let body: serde_json::Value = too_long.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_idempotency_key");
}

/// A key names one request: sent again with another message it is refused (422), and the first
/// request's retry still gets its run.
#[tokio::test]
async fn a_key_used_for_another_message_is_refused() {
    let server = TestServer::start_with(|config| config.scripted.reply_tokens = 20).await;
    let agent_id = server.create_agent().await;
    let run_id = run_to_its_end(&server, agent_id, "k-1").await;

    let other = server
        .http
        .post(server.url(&format!("/v1/agents/{agent_id}/runs")))
        .header("Idempotency-Key", "k-1")
        .json(&json!({"content": "something else"}))
        .sent()
        .await;
    assert_eq!(other.status(), 422);
    let body: serde_json::Value = other.json().await.unwrap();
    assert_eq!(body["error"]["code"], "idempotency_key_reused", "{body}");

    let retry = send_with_key(&server, agent_id, "k-1").await;
    assert_eq!(retry.status(), 202);
    assert_eq!(retry.json::<RunAccepted>().await.unwrap().run_id, run_id);
    let users = server
        .all_events(agent_id)
        .await
        .iter()
        .filter(|event| event.kind == EventKind::User)
        .count();
    assert_eq!(users, 1, "nothing was written for the refused or the retried request");
}

/// A native key that reads like another surface's key (Letta's `otid:…`) is its own: it neither
/// takes that surface's message nor is taken by it. (The same holds for `approval:<call id>`,
/// which a client could otherwise claim before the call exists and so make it unanswerable.)
#[tokio::test]
async fn a_native_key_never_collides_with_another_surfaces_key() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let native = run_to_its_end(&server, agent_id, "otid:m-1").await;
    // Letta's send of the same words with otid `m-1`: a run of its own, not the native one.
    let letta = server
        .post_json(
            &format!("/v1/agents/{agent_id}/messages"),
            &json!({ "messages": [{ "role": "user", "content": "hi", "otid": "m-1" }] }),
        )
        .await;
    let letta_run = letta["messages"][0]["run_id"].as_str().unwrap().to_owned();
    assert_ne!(letta_run, native.to_string(), "{letta}");
    // And a key over the limit is refused with the limit clients have.
    let long = send_with_key(&server, agent_id, "k".repeat(201)).await;
    assert_eq!(long.status(), 400);
    let body: serde_json::Value = long.json().await.unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("200"), "{body}");
}
