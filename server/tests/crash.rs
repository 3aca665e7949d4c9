//! The real server binary, killed with SIGKILL mid-run under load, restarted on the same database
//! file: the log is intact up to the last commit, the runs that were in flight are marked
//! interrupted, and clients that reconnect from their last seq converge on the log.

use crate::common;

use std::path::Path;

use app::timeline::Timeline;
use app::EventKind;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::RequestExt;
use common::processes::{
    assert_calls_answered, ends_of, free_port, log_of, read, subscribe_all, Process, Seen,
};

async fn start(port: u16, database: &Path) -> Process {
    Process::start(
        port,
        &[
            ("DATABASE_URL", format!("sqlite://{}", database.display())),
            ("AGENTSTREAM_SCRIPTED_TOKEN_DELAY_MS", "3".into()),
            ("AGENTSTREAM_SCRIPTED_REPLY_TOKENS", "3000".into()),
        ],
    )
    .await
}

#[tokio::test]
async fn kill_9_mid_run_then_restart_keeps_the_log_and_marks_runs_interrupted() {
    let directory = tempfile::tempdir().unwrap();
    let database = directory.path().join("crash.db");
    let port = free_port();
    let http = agentstream_server::http_client::client();
    let mut server = start(port, &database).await;

    // Load: four agents streaming at once, two of them inside a slow tool when the kill comes.
    let mut agents = Vec::new();
    for index in 0..4 {
        let agent: Value = http
            .post(format!("{}/v1/agents", server.base))
            .json(&json!({ "name": format!("crash-{index}") }))
            .answer()
            .await;
        agents.push(Uuid::parse_str(agent["id"].as_str().unwrap()).unwrap());
    }
    let mut seen = Seen::default();
    let mut socket = subscribe_all(&server.base, &agents, &seen).await;
    let mut runs = Vec::new();
    for (index, &agent_id) in agents.iter().enumerate() {
        let content =
            if index % 2 == 0 { "a very long answer" } else { "/tools slow 20; calculator 2+2" };
        let accepted: Value = http
            .post(format!("{}/v1/agents/{agent_id}/runs", server.base))
            .json(&json!({ "content": content }))
            .answer()
            .await;
        runs.push(Uuid::parse_str(accepted["run_id"].as_str().unwrap()).unwrap());
    }
    // Wait until every agent is well into its run, then kill the process outright.
    read(&mut socket, &mut seen, |seen| agents.iter().all(|&agent| seen.last_seq(agent) >= 8))
        .await;
    server.kill().await;
    // Whatever was already on its way arrives; then the socket ends.
    read(&mut socket, &mut seen, |_| false).await;

    let server = start(port, &database).await;
    let mut socket = subscribe_all(&server.base, &agents, &seen).await;
    for (&agent_id, &run_id) in agents.iter().zip(&runs) {
        let log = log_of(&http, &server.base, agent_id).await;
        common::assert_contiguous(&log, 1);
        // Nothing a client was shown is missing or different: it was committed before it was sent.
        for event in seen.events.get(&agent_id).into_iter().flatten() {
            assert_eq!(
                &log[event.seq as usize - 1],
                event,
                "delivered event {} differs from the log",
                event.seq
            );
        }
        // The run that was in flight ends, once, as interrupted.
        let ends = ends_of(&log, run_id);
        assert_eq!(ends.len(), 1, "exactly one end for run {run_id}");
        assert_eq!(ends[0].kind, EventKind::RunFailed);
        assert_eq!(ends[0].content["error"]["type"], "interrupted");
        let run: Value = http.get(format!("{}/v1/runs/{run_id}", server.base)).answer().await;
        assert_eq!(run["status"], "failed");
        // Every tool call that started has exactly one result.
        assert_calls_answered(&log);
    }
    // The reconnected client catches up to each log's head and folds what the server folds.
    let heads: Vec<u64> = {
        let mut heads = Vec::new();
        for &agent_id in &agents {
            heads.push(log_of(&http, &server.base, agent_id).await.len() as u64);
        }
        heads
    };
    read(&mut socket, &mut seen, |seen| {
        agents.iter().zip(&heads).all(|(&agent, &head)| seen.last_seq(agent) >= head)
    })
    .await;
    for &agent_id in &agents {
        let log = log_of(&http, &server.base, agent_id).await;
        let mut client = Timeline::new();
        client.apply_all(seen.events[&agent_id].iter().cloned());
        let mut folded = Timeline::new();
        folded.apply_all(log);
        assert_eq!(client, folded, "the reconnected client converged");
        let run = client.runs().last().unwrap();
        assert!(
            format!("{run:?}").contains("interrupted"),
            "the client sees the run interrupted: {run:?}"
        );
    }
    // And the agent works again.
    let accepted: Value = http
        .post(format!("{}/v1/agents/{}/runs", server.base, agents[0]))
        .json(&json!({ "content": "/echo back again" }))
        .answer()
        .await;
    assert!(accepted["run_id"].is_string(), "{accepted}");
}
