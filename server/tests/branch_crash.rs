//! The real server binary killed with SIGKILL while forks are being made and runs go on the
//! branches: after a restart every branch is whole (its prefix its parent's, its own events
//! gapless, its runs ended) and no half-made branch is left.

use crate::common;
use crate::common::RequestExt;

use std::time::Duration;

use app::EventKind;
use serde_json::{json, Value};
use uuid::Uuid;

use common::processes::{log_of, Restartable};

#[tokio::test]
async fn kill_9_while_forking_leaves_only_whole_branches() {
    let server = Restartable::new();
    let extra = [("AGENTSTREAM_SCRIPTED_TOKEN_DELAY_MS", "2".to_owned())];
    let mut process = server.start_with(&extra).await;
    let base = process.base.clone();
    let http = agentstream_server::http_client::client();
    let agent = process.create_agent(json!({ "name": "forked" })).await;
    process.start_run(agent, "/echo the first turn").await;
    let ended = |log: &[app::AgentEvent]| log.last().is_some_and(|e| e.kind.is_run_end());
    let root = common::wait_until("the first run to end", || async {
        let log = log_of(&http, &base, agent).await;
        ended(&log).then_some(log)
    })
    .await;
    let fork_seq = root.len() as u64;

    // Forks, each starting a run of its own, as fast as they go; the kill lands among them.
    let forking = {
        let (http, base) = (http.clone(), base.clone());
        tokio::spawn(async move {
            loop {
                let url = format!("{base}/v1/agents/{agent}/branches");
                let body = json!({ "after_seq": fork_seq });
                let Ok(answer) = http.post(&url).json(&body).send().await else {
                    return;
                };
                let Ok(branch) = answer.json::<Value>().await else {
                    return;
                };
                let Some(id) = branch["id"].as_str() else {
                    return;
                };
                let url = format!("{base}/v1/agents/{id}/runs");
                let body = json!({ "content": "/echo a turn of the branch's own" });
                if http.post(&url).json(&body).send().await.is_err() {
                    return;
                }
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    process.kill().await;
    forking.abort();

    let process = server.start_with(&extra).await;
    let base = process.base.clone();
    let listed: Value = http.get(format!("{base}/v1/agents/{agent}/branches")).answer().await;
    let branches = listed["branches"].as_array().unwrap();
    assert!(branches.len() > 1, "the kill came after some forks: {listed}");
    assert_eq!(log_of(&http, &base, agent).await, root, "the main line is untouched");
    for branch in branches {
        let id: Uuid = branch["id"].as_str().unwrap().parse().unwrap();
        assert_eq!(branch["branch"]["fork_seq"], json!(fork_seq));
        // Recovery ends what the kill cut off; then the branch is whole.
        let log = common::wait_until("the branch's runs to end", || async {
            let log = log_of(&http, &base, id).await;
            (log.len() as u64 == fork_seq || ended(&log)).then_some(log)
        })
        .await;
        common::assert_contiguous(&log, 1);
        assert_eq!(log[..fork_seq as usize], root[..], "branch {id} shares the prefix");
        assert!(log[fork_seq as usize..].iter().all(|event| event.agent_id == id));
        let starts = log.iter().filter(|e| e.kind == EventKind::RunStarted).count();
        let ends = log.iter().filter(|e| e.kind.is_run_end()).count();
        assert_eq!(starts, ends, "branch {id}: every run has its end");
    }
}
