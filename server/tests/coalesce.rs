//! Coalescing for subscribers that ask for it: runs of token appends that wait for one socket
//! (it fell behind, or it is catching up) arrive merged, each merged event naming the seqs it
//! stands for; the folded timeline is the one every event gives, and the cursor still ends at the
//! newest seq.

use crate::common;

use app::protocol::ServerMessage;
use app::AgentEvent;
use common::{assert_ranges_contiguous, fold, TestServer};

fn merged_count(events: &[AgentEvent]) -> usize {
    events.iter().filter(|event| event.coalesced_from.is_some()).count()
}

/// `merged` stands for every seq of `all` in a tenth of the events or fewer, and folds the same.
fn assert_merged(merged: &[AgentEvent], all: &[AgentEvent]) {
    assert_ranges_contiguous(merged, 1);
    let (events, seqs) = (merged.len(), all.len());
    assert!(events * 10 < seqs, "{events} events for {seqs} seqs");
    assert_eq!(fold(merged), fold(all));
}

#[tokio::test]
async fn a_slow_subscriber_that_asked_gets_the_backlog_merged_and_the_same_timeline() {
    let (_server, mut client, run_id, all) = common::flooded_subscriber(true).await;

    let (received, _) = client.receive_until_run_end().await;
    assert_ranges_contiguous(&received, 1);
    assert_eq!(received.last().unwrap().id, all.last().unwrap().id);
    assert!(
        received.len() * 10 < all.len(),
        "{} events arrived for {} seqs: the backlog was not merged",
        received.len(),
        all.len()
    );
    assert!(merged_count(&received) > 0);
    assert_eq!(fold(&received), fold(&all));
    assert_eq!(common::reply_text(&received, run_id), common::reply_text(&all, run_id));
}

#[tokio::test]
async fn a_coalesced_resume_merges_the_catch_up_then_goes_live() {
    let server = TestServer::start_with(|config| config.scripted.reply_tokens = 3_000).await;
    let (agent_id, _, history) = server.finished_run("one").await;

    let mut client = server.connect().await;
    client.subscribe_with(agent_id, 0, true).await;
    let (replayed, _) = client.receive_until_run_end().await;
    assert_merged(&replayed, &history);

    // The live view's way: the socket's URL subscribes, and the same catch-up comes without a
    // word sent on it.
    let mut opened = server
        .connect_with(Some(&format!("subscribe={agent_id}&since=0&coalesce=true")))
        .await
        .unwrap();
    match opened.receive().await {
        ServerMessage::Subscribed { agent_id: subscribed, since: 0, .. } => {
            assert_eq!(subscribed, agent_id)
        }
        other => panic!("expected subscribed, got {other:?}"),
    }
    let (opened_replay, _) = opened.receive_until_run_end().await;
    assert_merged(&opened_replay, &history);

    // The same subscription carries on live, from the seq after the merged catch-up.
    let second_run = server.start_run(agent_id, "two").await;
    let (live, _) = client.receive_until_run_end().await;
    assert_ranges_contiguous(&live, history.len() as u64 + 1);
    let all = server.all_events(agent_id).await;
    let received: Vec<AgentEvent> = replayed.into_iter().chain(live).collect();
    assert_eq!(fold(&received), fold(&all));
    assert!(received.iter().any(|event| event.run_id == Some(second_run)));

    // Without asking, the same resume gets every seq as its own event.
    let mut plain = server.connect().await;
    plain.subscribe(agent_id, 0).await;
    let (every, _) = plain.receive_until_run_end().await;
    // (The page that ends the first run may run on into the second.)
    assert!(every.len() >= history.len());
    assert!(every[..history.len()] == history[..], "the plain resume is not the log");
    assert_eq!(merged_count(&every), 0);
}

#[tokio::test]
async fn a_coalesced_rest_page_ends_at_the_same_cursor_and_folds_the_same() {
    let server = TestServer::start_with(|config| config.scripted.reply_tokens = 1_500).await;
    let (agent_id, _, all) = server.finished_run("page me").await;

    let mut merged = Vec::new();
    let mut since = 0;
    loop {
        let url = format!("/v1/agents/{agent_id}/events?since={since}&limit=400&coalesce=true");
        let page: app::protocol::EventsPage =
            serde_json::from_value(server.get_json(&url).await).unwrap();
        let plain = server.events_page(agent_id, since, 400).await;
        assert_eq!(
            (page.next_since, page.has_more, page.head_seq),
            (plain.next_since, plain.has_more, plain.head_seq)
        );
        merged.extend(page.events);
        since = page.next_since;
        if !page.has_more {
            break;
        }
    }
    assert_merged(&merged, &all);

    let response = server.get(&format!("/v1/agents/{agent_id}/events?coalesce=maybe")).await;
    assert_eq!(response.status(), 400);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_query");
    assert!(body["error"]["message"].as_str().unwrap().contains("coalesce"));
}
