//! Two servers: a run killed on one, and cancels sent to the other.

use super::*;
use crate::common::RequestExt;

#[tokio::test]
async fn two_servers_killing_a_mid_run_marks_it_interrupted_and_bs_clients_converge() {
    // Short leases: B ends A's runs within a second of A's death.
    let (mut a, b, http, talker) = pair(3000, 3, 600).await;
    let tooler = create_agent(&http, &a.base).await;
    let agents = [talker, tooler];
    let mut seen = Seen::default();
    let mut socket = subscribe_all(&b.base, &agents, &seen).await;
    let runs = [
        run(&http, &a.base, talker, "a very long answer").await,
        run(&http, &a.base, tooler, "/tools slow 20; calculator 2+2").await,
    ];
    read(&mut socket, &mut seen, |seen| agents.iter().all(|&agent| seen.last_seq(agent) >= 8))
        .await;
    a.kill().await;

    // B notices A's leases ran out and ends both runs; its client sees that live.
    read(&mut socket, &mut seen, |seen| {
        agents.iter().zip(&runs).all(|(&agent, &run_id)| has_ended(seen, agent, run_id))
    })
    .await;
    for (&agent_id, &run_id) in agents.iter().zip(&runs) {
        let log = log_of(&http, &b.base, agent_id).await;
        assert_contiguous(&log, 1);
        assert_seen_is_committed(&seen, agent_id, &log);
        let ends = ends_of(&log, run_id);
        assert_eq!(ends.len(), 1, "exactly one end for run {run_id}");
        assert_eq!(ends[0].kind, EventKind::RunFailed);
        assert_eq!(ends[0].content["error"]["type"], "interrupted");
        assert_calls_answered(&log);
        let status: Value = http.get(format!("{}/v1/runs/{run_id}", b.base)).answer().await;
        assert_eq!(status["status"], "failed");
        // The client on B converged on the log.
        read(&mut socket, &mut seen, |seen| seen.last_seq(agent_id) >= log.len() as u64).await;
        let mut client = Timeline::new();
        client.apply_all(seen.events[&agent_id].iter().cloned());
        let mut folded = Timeline::new();
        folded.apply_all(log);
        assert_eq!(client, folded, "B's client converged");
    }
    // The slot is free again: B runs the agent.
    let again = run(&http, &b.base, tooler, "/echo still here").await;
    read(&mut socket, &mut seen, |seen| has_ended(seen, tooler, again)).await;
}

#[tokio::test]
async fn two_servers_a_cancel_sent_to_b_stops_a_run_on_a() {
    let (a, b, http, agent_id) = pair(3000, 3, 10_000).await;
    let mut seen = Seen::default();
    let mut socket = subscribe_all(&a.base, &[agent_id], &seen).await;
    let run_id = run(&http, &a.base, agent_id, "a very long answer").await;
    read(&mut socket, &mut seen, |seen| seen.last_seq(agent_id) >= 10).await;

    let cancelled: Value =
        http.post(format!("{}/v1/agents/{agent_id}/messages/cancel", b.base)).answer().await;
    assert_eq!(cancelled["cancelled_run_ids"], json!([run_id]), "{cancelled}");
    // B answered after the end reached the log: it is there, as a cancel.
    let log = log_of(&http, &b.base, agent_id).await;
    let ends = ends_of(&log, run_id);
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0].kind, EventKind::RunCancelled);
    assert!(log.len() < 3000, "the run stopped early ({} events)", log.len());
    let status: Value = http.get(format!("{}/v1/runs/{run_id}", a.base)).answer().await;
    assert_eq!(status["status"], "cancelled");
    // A's subscriber saw the cancel; nothing is cancelled when nothing runs.
    read(&mut socket, &mut seen, |seen| has_ended(seen, agent_id, run_id)).await;
    let nothing: Value =
        http.post(format!("{}/v1/agents/{agent_id}/messages/cancel", b.base)).answer().await;
    assert_eq!(nothing["cancelled_run_ids"], json!([]));
}

/// A WebSocket `cancel` sent to B stops a run executing on A, as the REST cancel does.
#[tokio::test]
async fn two_servers_a_websocket_cancel_sent_to_b_stops_a_run_on_a() {
    let (a, b, http, agent_id) = pair(3000, 3, 10_000).await;
    let mut seen = Seen::default();
    let mut socket = subscribe_all(&a.base, &[agent_id], &seen).await;
    let run_id = run(&http, &a.base, agent_id, "a very long answer").await;
    read(&mut socket, &mut seen, |seen| seen.last_seq(agent_id) >= 10).await;

    let url = format!("{}/v1/ws", b.base.replace("http://", "ws://"));
    let (mut on_b, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    let cancel = ClientMessage::Cancel { agent_id, run_ids: None };
    futures::SinkExt::send(
        &mut on_b,
        Message::Text(serde_json::to_string(&cancel).unwrap().into()),
    )
    .await
    .unwrap();
    let answer = loop {
        let frame = tokio::time::timeout(WAIT_MAX, on_b.next())
            .await
            .expect("B answered the cancel")
            .unwrap()
            .unwrap();
        if let Message::Text(text) = frame {
            break serde_json::from_str::<ServerMessage>(text.as_str()).unwrap();
        }
    };
    assert_eq!(answer, ServerMessage::CancelRequested { agent_id, run_ids: vec![run_id] });
    read(&mut socket, &mut seen, |seen| has_ended(seen, agent_id, run_id)).await;
    let end = seen.events[&agent_id]
        .iter()
        .find(|event| event.run_id == Some(run_id) && event.kind.is_run_end())
        .expect("A's subscriber saw the run end");
    assert_eq!(end.kind, EventKind::RunCancelled);
}
