//! The event log end to end: persist, broadcast, resume — against a real server and SQLite file.

use crate::common;

use std::collections::HashSet;

use crate::common::RequestExt;
use app::protocol::ServerMessage;
use app::EventKind;
use common::{assert_contiguous, reply_text, TestServer};

#[tokio::test]
async fn every_run_writes_a_gapless_log_from_start_to_completion() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let mut run_ids = Vec::new();
    for prompt in ["first question", "second question", "third"] {
        let run_id = server.start_run(agent_id, prompt).await;
        server.wait_for_run_end(agent_id, run_id).await;
        run_ids.push(run_id);
    }
    let events = server.all_events(agent_id).await;
    assert_contiguous(&events, 1);
    let ids: HashSet<_> = events.iter().map(|event| event.id).collect();
    assert_eq!(ids.len(), events.len(), "event ids must be unique");
    for run_id in run_ids {
        let run: Vec<_> = events.iter().filter(|e| e.run_id == Some(run_id)).collect();
        assert_eq!(run.first().unwrap().kind, EventKind::RunStarted);
        assert_eq!(run[1].kind, EventKind::User);
        assert_eq!(run.last().unwrap().kind, EventKind::RunCompleted);
        assert_eq!(run.last().unwrap().content["stop_reason"], "end_turn");
        let reply = reply_text(&events, run_id);
        assert_eq!(reply.split_whitespace().count(), 40, "{reply}");
    }
    let agent: serde_json::Value =
        server.get(&format!("/v1/agents/{agent_id}")).await.json().await.unwrap();
    assert_eq!(agent["head_seq"], events.len() as u64);
}

#[tokio::test]
async fn concurrent_agents_each_get_their_own_gapless_log() {
    let server = TestServer::start_with(|config| config.scripted.reply_tokens = 300).await;
    let mut agents = Vec::new();
    for _ in 0..4 {
        let agent_id = server.create_agent().await;
        let run_id = server.start_run(agent_id, "go").await;
        agents.push((agent_id, run_id));
    }
    for (agent_id, run_id) in agents {
        let events = server.wait_for_run_end(agent_id, run_id).await;
        assert_contiguous(&events, 1);
        assert!(events.iter().all(|event| event.agent_id == agent_id));
        assert_eq!(events.last().unwrap().kind, EventKind::RunCompleted);
    }
}

#[tokio::test]
async fn every_event_sent_on_the_websocket_was_already_in_the_database() {
    let server = TestServer::start_with(|config| config.scripted.reply_tokens = 400).await;
    let database = server.database().await;
    let agent_id = server.create_agent().await;
    let mut client = server.connect().await;
    assert_eq!(client.subscribed(agent_id, 0, false).await, 0);
    server.start_run(agent_id, "tell me everything").await;

    let mut received = Vec::new();
    loop {
        let ServerMessage::Events { events, .. } = client.receive().await else {
            panic!("expected only events");
        };
        // Look the batch up in the file the moment it arrives, through another connection.
        let newest = events.last().unwrap().seq as i64;
        let (count, newest_id) = database.committed_through(agent_id, newest as u64).await;
        assert_eq!(count, newest, "seq {newest} reached a client before it was committed");
        assert_eq!(newest_id, Some(events.last().unwrap().id.to_string()));
        let ended = events.iter().any(|event| event.kind.is_run_end());
        received.extend(events);
        if ended {
            break;
        }
    }
    assert_contiguous(&received, 1);
    assert_eq!(received, server.all_events(agent_id).await);
}

#[tokio::test]
async fn since_paging_returns_exactly_the_events_after_n() {
    let server = TestServer::start_with(|config| config.scripted.reply_tokens = 120).await;
    let (agent_id, _, all) = server.finished_run("page me").await;
    let head = all.len() as u64;

    for since in [0, 1, 7, head / 2, head - 1, head] {
        let page = server.events_page(agent_id, since, 1000).await;
        assert_eq!(page.head_seq, head);
        assert_eq!(page.events, all[since as usize..].to_vec(), "since={since}");
        assert_eq!(page.next_since, head);
        assert!(!page.has_more);
    }

    // Small pages walk the log without overlap or hole.
    let mut walked = Vec::new();
    let mut since = 0;
    loop {
        let page = server.events_page(agent_id, since, 13).await;
        assert!(page.events.len() <= 13);
        assert_eq!(page.next_since, since + page.events.len() as u64);
        walked.extend(page.events);
        since = page.next_since;
        if !page.has_more {
            break;
        }
    }
    assert_eq!(walked, all);
}

#[tokio::test]
async fn subscribers_joining_mid_run_see_every_event_once_in_order() {
    // Paced (a few seconds of writing): unpaced, on a loaded machine the run could end before
    // the last subscriber joined, and the test would not be about joining mid-run.
    let (server, agent_id) = TestServer::start_paced(3000, 1).await.with_agent().await;
    server.start_run(agent_id, "a long answer please").await;

    // Join at several points while the run is writing, each with the cursor it had.
    let mut followers = Vec::new();
    let mut previous = 0;
    for _ in 0..4 {
        // Each joins at a head the one before it did not see (the run is writing meanwhile).
        let since = common::wait_until("the run to write more", || async {
            let head = server.events_page(agent_id, 0, 1).await.head_seq;
            (head > previous).then_some(head)
        })
        .await;
        previous = since;
        let mut client = server.connect().await;
        // The head when the subscription began: below the run's end, the run was still writing.
        let joined_at = client.subscribed(agent_id, since, false).await;
        followers.push(tokio::spawn(async move {
            let (events, _) = client.receive_until_run_end().await;
            (since, joined_at, events)
        }));
    }
    for follower in followers {
        let (since, joined_at, events) = follower.await.unwrap();
        assert_contiguous(&events, since + 1);
        let end = events.last().unwrap();
        assert_eq!(end.kind, EventKind::RunCompleted);
        assert!(
            joined_at < end.seq,
            "a subscriber joined at {joined_at}, after the run had ended at {}: not mid-run",
            end.seq
        );
    }
    let head = server.events_page(agent_id, 0, 1).await.head_seq;
    assert!(head > 3000);
}

#[tokio::test]
async fn a_lagging_subscriber_is_told_and_recovers_everything() {
    let (_server, mut client, _, all) = common::flooded_subscriber(false).await;

    let (received, lagged) = client.receive_until_run_end().await;
    assert!(lagged, "the subscriber fell behind but was never told");
    assert_contiguous(&received, 1);
    assert_eq!(received.len(), all.len());
    assert_eq!(received.last().unwrap().id, all.last().unwrap().id);
}

#[tokio::test]
async fn resuming_from_a_cursor_after_the_run_replays_the_rest_then_goes_live() {
    let server = TestServer::start().await;
    let (agent_id, _, all) = server.finished_run("one").await;
    let cursor = all.len() as u64 / 2;

    let mut client = server.connect().await;
    client.subscribe(agent_id, cursor).await;
    let (replayed, _) = client.receive_until_run_end().await;
    assert_eq!(replayed, all[cursor as usize..].to_vec());

    let second_run = server.start_run(agent_id, "two").await;
    let (live, _) = client.receive_until_run_end().await;
    assert_contiguous(&live, all.len() as u64 + 1);
    assert!(live.iter().all(|event| event.run_id == Some(second_run)));
}

#[tokio::test]
async fn a_second_run_while_one_is_going_is_refused() {
    let (server, agent_id) = TestServer::start_paced(200, 5).await.with_agent().await;
    server.start_run(agent_id, "slow").await;
    let response = server
        .post(
            &format!("/v1/agents/{agent_id}/runs"),
            &serde_json::json!({ "content": "impatient" }),
        )
        .await;
    assert_eq!(response.status(), 409);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "run_in_progress");
}

#[tokio::test]
async fn deleting_an_agent_removes_it_and_its_log() {
    let server = TestServer::start().await;
    let database = server.database().await;
    let agent_id = server.create_agent().await;
    server.run_to_end(agent_id, "hi").await;
    let url = server.url(&format!("/v1/agents/{agent_id}"));
    assert_eq!(server.http.delete(&url).sent().await.status(), 204);
    assert_eq!(server.http.get(&url).sent().await.status(), 404);
    assert_eq!(database.count_events().await, 0);
}

/// Resumes send each event's JSON written straight from its row; a client must get exactly
/// what the live path (serde, from the event) sends for the same event — every field, omitted
/// `None`s, escapes, unicode, nested values, the time's `Z` — on either backend.
#[tokio::test]
async fn events_read_as_json_are_the_events_serialized() {
    use agentstream_server::store::{
        self, AppendBatch, ClusterOptions, EventDraft, EventJson, NewAgent,
    };
    let directory = tempfile::tempdir().unwrap();
    let url = common::fresh_database_url(&directory.path().join("json.db")).await;
    let opened = store::open(&url, &ClusterOptions::default()).await.unwrap();
    let store = opened.store;
    let agent = store.create_agent(NewAgent::default()).await.unwrap();
    let run_id = uuid::Uuid::now_v7();
    if let Some(cluster) = opened.cluster {
        // PostgreSQL writes a run's events only for the server that holds the run.
        assert_eq!(cluster.claim_agent_run(agent.id, run_id).await.unwrap(), None);
    }
    let mut full = EventDraft::new(EventKind::ToolCall);
    full.run_id = Some(run_id);
    full.thread_id = Some(uuid::Uuid::now_v7());
    full.block_id = Some(uuid::Uuid::now_v7());
    full.message_id = Some(uuid::Uuid::now_v7());
    full.delta =
        Some(serde_json::json!({ "arguments": "{\"q\": \"caf\u{e9} \\ \\n\"}", "n": 1.5 }));
    full.delta_path = Some("tool \"calls\".0".into());
    full.delta_action = Some(app::DeltaAction::Merge);
    full.content =
        serde_json::json!({ "zeta": [1, null, true], "alpha": { "nested": "\u{1f600}" } });
    full.raw = Some(serde_json::json!({ "type": "content_block_delta", "index": 0 }));
    full.metadata = serde_json::json!({ "provider": "scripted", "latency_ms": 12 });
    let bare = EventDraft::new(EventKind::RunCompleted);
    let mut text = EventDraft::new(EventKind::Text);
    text.delta = Some(serde_json::Value::String("token ".into()));
    text.delta_action = Some(app::DeltaAction::Append);
    store.append(&[AppendBatch::new(agent.id, vec![full, bare, text])]).await.unwrap();
    let events = store.read_events(agent.id, 0, 10).await.unwrap();
    let json = store.read_events_json(agent.id, 0, 10).await.unwrap();
    let serialized: Vec<EventJson> = events.iter().map(EventJson::of).collect();
    assert_eq!(json.len(), 3);
    assert_eq!(json, serialized);
    assert_eq!(store.read_events_json(agent.id, 1, 1).await.unwrap(), serialized[1..2]);
}
