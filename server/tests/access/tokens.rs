//! Minting scoped tokens, and what their expiry ends (streams, sockets) without losing anything.

use super::*;
use crate::common::RequestExt;

#[tokio::test]
async fn tokens_are_minted_by_the_operator_and_refused_when_forged_or_stale() {
    let server = server_with(|config| {
        config.token_keys = Some(TokenKeys::new(&format!("{SECRET},{OLD_SECRET}"), 600).unwrap());
    })
    .await;
    let agent = create_agent(&server, json!({ "owner": "alice" })).await;
    let minted = server
        .post(
            "/v1/tokens",
            &json!({ "sub": "alice", "agents": [agent], "scope": "read", "ttl_s": 60 }),
        )
        .await;
    assert_eq!(minted.status(), 201);
    let minted: Value = minted.json().await.unwrap();
    let expires_at =
        chrono::DateTime::parse_from_rfc3339(minted["expires_at"].as_str().unwrap()).unwrap();
    let lives = expires_at.timestamp() - chrono::Utc::now().timestamp();
    assert!((55..=61).contains(&lives), "{minted}");
    let minted = minted["token"].as_str().unwrap().to_owned();
    assert_eq!(
        call(&server, &minted, Method::GET, &format!("/v1/agents/{agent}"), None).await,
        (200, String::new())
    );
    // Bad mint requests: clear 422s, nothing minted.
    for (body, says) in [
        (
            json!({ "sub": "alice", "agents": [], "scope": "read", "ttl_s": 601 }),
            "ttl_s must be 1–600",
        ),
        (json!({ "sub": "alice", "agents": [], "scope": "read admin" }), "unknown scope \"admin\""),
        (json!({ "sub": "", "agents": [], "scope": "read" }), "sub must be"),
        (
            json!({ "sub": "alice", "agents": ["x".repeat(129)], "scope": "read" }),
            "is not 1–128 characters",
        ),
    ] {
        let response = server.post("/v1/tokens", &body).await;
        assert_eq!(response.status(), 422, "{body}");
        let error: Value = response.json().await.unwrap();
        assert!(error["error"]["message"].as_str().unwrap().contains(says), "{error}");
    }
    let unknown_field = server
        .post(
            "/v1/tokens",
            &json!({ "sub": "alice", "agents": [], "scope": "read", "admin": true }),
        )
        .await;
    assert_eq!(unknown_field.status(), 422);
    // Rotation: a token signed with the older secret still verifies.
    let old = token_signed(OLD_SECRET, "alice", &[&agent.to_string()], &[Scope::Read], 60);
    assert_eq!(call(&server, &old, Method::GET, &format!("/v1/agents/{agent}"), None).await.0, 200);
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
        let response = agentstream_server::http_client::client()
            .get(server.url(&format!("/v1/agents/{agent}")))
            .bearer_auth(token)
            .sent()
            .await;
        assert_eq!(response.status(), 401, "{what}");
        let challenge = response.headers()[header::WWW_AUTHENTICATE].to_str().unwrap().to_owned();
        assert!(challenge.contains("invalid_token"), "{what}: {challenge}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "{what}: {body}");
    }
}

#[tokio::test]
async fn a_server_without_a_secret_mints_nothing() {
    let server = server_with(|config| config.token_keys = None).await;
    let response =
        server.post("/v1/tokens", &json!({ "sub": "alice", "agents": [], "scope": "read" })).await;
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
    let client = agentstream_server::http_client::client();
    let native = client
        .get(server.url(&format!("/v1/agents/{agent}/events/stream?since=0&token={short}")))
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
        ag_ui.iter().all(|event| !event.data.contains("RUN_FINISHED")),
        "the AG-UI stream ended before the run did"
    );
    let seen: Vec<u64> = native
        .iter()
        .map(|event| serde_json::from_str::<Value>(&event.data).unwrap()["seq"].as_u64().unwrap())
        .collect();
    assert!(!seen.is_empty());
    let cursor = *seen.last().unwrap();
    let log = server.wait_for_run_end(agent, run_id).await;
    assert!(
        cursor < log.last().unwrap().seq,
        "the stream ended at the token's expiry, before the run's end (seq {cursor})"
    );
    assert_eq!(seen, (1..=cursor).collect::<Vec<_>>(), "every event once, in order");
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
    let page: Value = agentstream_server::http_client::client()
        .get(server.url(&format!("/v1/agents/{agent}/events?since={cursor}&limit=1000")))
        .bearer_auth(&fresh)
        .answer()
        .await;
    let rest: Vec<u64> =
        page["events"].as_array().unwrap().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(rest, ((cursor + 1)..=log.last().unwrap().seq).collect::<Vec<_>>());
}

#[tokio::test]
async fn an_expiring_token_closes_its_websocket_and_ends_a_letta_stream_without_cancelling() {
    let (server, agent, short) = slow_run_and_short_token().await;

    // WebSocket: closed with 4401 at expiry.
    let mut request = format!("{}?token={short}", server.ws_url).into_client_request().unwrap();
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
    let short =
        token_signed(SECRET, "alice", &[&agent.to_string()], &[Scope::Read, Scope::Write], 2);
    let response = agentstream_server::http_client::client()
        .post(server.url(&format!("/v1/agents/{agent}/messages/stream")))
        .bearer_auth(&short)
        .json(&json!({ "messages": [{ "role": "user", "content": "a long answer" }], "stream_tokens": true }))
        .sent().await;
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
    let end = log.iter().rev().find(|event| event.kind.is_run_end()).unwrap();
    assert_eq!(end.kind, app::EventKind::RunCompleted, "the run was not cancelled by the expiry");
}
