//! Branches over REST and the WebSocket: fork a conversation between runs, run on the branch
//! with the branch's path as the model's context, follow it from any seq, switch the current
//! branch, delete a branch and find its parent whole.

use crate::common;

use app::protocol::ServerMessage;
use app::{AgentEvent, EventKind};
use common::{reply_text, RequestExt, TestServer};
use serde_json::{json, Value};
use uuid::Uuid;

/// A finished run of `content` on `log`: the run and the log's events after it.
async fn run_to_end(server: &TestServer, log: Uuid, content: &str) -> (Uuid, Vec<AgentEvent>) {
    let run_id = server.start_run(log, content).await;
    (run_id, server.wait_for_run_end(log, run_id).await)
}

async fn fork(server: &TestServer, log: Uuid, body: Value) -> (u16, Value) {
    server.post_status(&format!("/v1/agents/{log}/branches"), &body).await
}

fn id(value: &Value) -> Uuid {
    value["id"].as_str().unwrap().parse().unwrap()
}

fn end_seq(events: &[AgentEvent], run_id: Uuid) -> u64 {
    let end = events.iter().find(|e| e.run_id == Some(run_id) && e.kind.is_run_end());
    end.unwrap().seq
}

#[tokio::test]
async fn a_branch_shares_its_prefix_runs_on_its_own_path_and_deletes_alone() {
    let server = TestServer::start_with(|config| config.scripted.token_delay_ms = 0).await;
    let agent = server.create_agent().await;
    let (first, _) = run_to_end(&server, agent, "/echo first").await;
    let (second, main) = run_to_end(&server, agent, "/echo second").await;
    let fork_seq = end_seq(&main, first);

    // Between runs only: inside a run, past the head and on unknown logs are refused.
    let (status, body) = fork(&server, agent, json!({ "after_seq": fork_seq - 1 })).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("fork_inside_run")), "{body}");
    let head = main.last().unwrap().seq;
    let (status, body) = fork(&server, agent, json!({ "after_seq": head + 1 })).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("after_seq_beyond_head")),
        "{body}"
    );
    let (status, _) = fork(&server, Uuid::new_v4(), json!({ "after_seq": 0 })).await;
    assert_eq!(status, 404);
    let (status, body) = fork(&server, agent, json!({ "after_seq": "one" })).await;
    assert_eq!(status, 422, "{body}");
    let listed = server.get_json(&format!("/v1/agents/{agent}/branches")).await;
    assert_eq!(listed["branches"], json!([]), "a refused fork makes nothing");

    let (status, branch) =
        fork(&server, agent, json!({ "after_seq": fork_seq, "current": true })).await;
    assert_eq!(status, 201, "{branch}");
    let branch_id = id(&branch);
    assert_eq!(branch["branch"], json!({ "root": agent, "parent": agent, "fork_seq": fork_seq }));
    assert_eq!(branch["head_seq"], json!(fork_seq));

    // The model on the branch sees the branch's path: the first turn, never the second.
    let (recall, on_branch) = run_to_end(&server, branch_id, "/recall").await;
    assert_eq!(reply_text(&on_branch, recall), "You said:\n- /echo first");
    assert_eq!(on_branch[..fork_seq as usize], main[..fork_seq as usize]);
    assert!(on_branch[fork_seq as usize..].iter().all(|e| e.agent_id == branch_id));
    common::assert_contiguous(&on_branch, 1);
    assert_eq!(server.all_events(agent).await, main, "the main line is untouched");
    assert_eq!(reply_text(&main, second), "second");

    // A subscriber of the branch from any seq gets exactly its path.
    for since in [0, fork_seq - 1, fork_seq, fork_seq + 1] {
        let mut client = server.connect().await;
        let head = client.subscribed(branch_id, since, false).await;
        assert_eq!(head, on_branch.last().unwrap().seq);
        let mut got = Vec::new();
        while got.len() < (head - since) as usize {
            match client.receive().await {
                ServerMessage::Events { events, .. } => got.extend(events),
                other => panic!("expected events, got {other:?}"),
            }
        }
        assert_eq!(got, on_branch[since as usize..], "since {since}");
    }

    // Listed, current, switched back; a branch id is no conversation to switch.
    let listed = server.get_json(&format!("/v1/agents/{branch_id}/branches")).await;
    assert_eq!(listed["agent"]["id"], json!(agent));
    assert_eq!(listed["current_branch"], json!(branch_id));
    assert_eq!(listed["branches"].as_array().unwrap().len(), 1);
    let switch = |to: Value| {
        let url = server.url(&format!("/v1/agents/{agent}/current-branch"));
        server.http.put(url).json(&json!({ "branch": to })).status_json()
    };
    assert_eq!(switch(json!(null)).await.0, 200);
    let (status, body) = switch(json!(Uuid::new_v4())).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("unknown_branch")));
    let agents = server.get_json("/v1/agents").await;
    assert_eq!(agents.as_array().unwrap().len(), 1, "a branch is no agent of the list");

    // A branch forked from the branch keeps it; deleting the leaf leaves the rest whole.
    let after_recall = on_branch.last().unwrap().seq;
    let (status, leaf) = fork(&server, branch_id, json!({ "after_seq": after_recall })).await;
    assert_eq!(status, 201);
    assert_eq!(leaf["branch"]["parent"], json!(branch_id));
    let delete = |log: Uuid, branch: Uuid| {
        let url = server.url(&format!("/v1/agents/{log}/branches/{branch}"));
        server.http.delete(url).status_json()
    };
    let (status, body) = delete(agent, branch_id).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("branch_has_branches")));
    assert_eq!(delete(agent, id(&leaf)).await.0, 204);
    assert_eq!(delete(agent, agent).await.0, 404, "the main line is no branch");
    assert_eq!(delete(agent, branch_id).await.0, 204);
    assert_eq!(server.get(&format!("/v1/agents/{branch_id}/events")).await.status(), 404);
    assert_eq!(server.all_events(agent).await, main);
    // Deleting the conversation deletes its branches.
    let (_, other) = fork(&server, agent, json!({ "after_seq": 0 })).await;
    assert_eq!(server.delete(&format!("/v1/agents/{agent}")).await.status(), 204);
    assert_eq!(server.get(&format!("/v1/agents/{}", id(&other))).await.status(), 404);
}

#[tokio::test]
async fn a_run_keeps_to_its_branch_while_another_runs_beside_it() {
    let (server, agent) = TestServer::start_paced(40, 5).await.with_agent().await;
    let (first, main) = run_to_end(&server, agent, "/echo first").await;
    let fork_seq = end_seq(&main, first);
    let (_, branch) = fork(&server, agent, json!({ "after_seq": fork_seq })).await;
    let branch_id = id(&branch);

    // A run on each line at once; the current branch switches under them.
    let on_main = server.start_run(agent, "/echo main line").await;
    let on_branch = server.start_run(branch_id, "/echo the branch").await;
    let url = server.url(&format!("/v1/agents/{agent}/current-branch"));
    let answer = server.http.put(url).json(&json!({ "branch": branch_id }));
    assert_eq!(answer.status_json().await.0, 200);
    let main = server.wait_for_run_end(agent, on_main).await;
    let branched = server.wait_for_run_end(branch_id, on_branch).await;
    assert_eq!(reply_text(&main, on_main), "main line");
    assert_eq!(reply_text(&branched, on_branch), "the branch");
    assert!(main.iter().all(|event| event.run_id != Some(on_branch)));
    assert!(branched.iter().all(|event| event.run_id != Some(on_main)));
    common::assert_contiguous(&main, 1);
    common::assert_contiguous(&branched, 1);
    let kinds = |events: &[AgentEvent]| events.iter().filter(|e| e.kind.is_run_end()).count();
    assert_eq!((kinds(&main), kinds(&branched)), (2, 2));
    assert!(branched.iter().any(|e| e.kind == EventKind::User && e.agent_id == branch_id));
}

#[tokio::test]
async fn surfaces_without_branches_follow_the_current_one() {
    let server = TestServer::start_with(|config| config.scripted.token_delay_ms = 0).await;
    let agent = server.create_agent().await;
    let (first, _) = run_to_end(&server, agent, "/echo one").await;
    let (_, main) = run_to_end(&server, agent, "/echo two").await;
    let fork_seq = end_seq(&main, first);
    let (_, branch) = fork(&server, agent, json!({ "after_seq": fork_seq, "current": true })).await;
    run_to_end(&server, id(&branch), "/echo three").await;

    // Read by the conversation's id, every view shows the current branch's path.
    let letta = server.get(&format!("/v1/agents/{agent}/messages?order=asc")).await;
    let letta = letta.text().await.unwrap();
    assert!(letta.contains("three") && letta.contains("one") && !letta.contains("two"), "{letta}");
    let ai_sdk = server.get(&format!("/v1/ai-sdk/chat/{agent}/messages")).await;
    let ai_sdk = ai_sdk.text().await.unwrap();
    assert!(ai_sdk.contains("three") && !ai_sdk.contains("two"), "{ai_sdk}");
    let connect = server.post("/v1/ag-ui/connect", &json!({ "threadId": agent })).await;
    let ag_ui = connect.text().await.unwrap();
    assert!(ag_ui.contains("three") && !ag_ui.contains("two"), "{ag_ui}");

    // A Letta message to the conversation runs on the current branch, with its path as context.
    let url = format!("/v1/agents/{agent}/messages");
    let body = json!({ "messages": [{ "role": "user", "content": "/recall" }] });
    let (status, answer) = server.post_status(&url, &body).await;
    assert_eq!(status, 200, "{answer}");
    let said = answer["messages"].to_string();
    assert!(said.contains("- /echo one\\n- /echo three"), "{said}");
    assert_eq!(server.all_events(agent).await, main, "the main line is untouched");
}

#[tokio::test]
async fn an_approval_waits_on_its_branch_and_is_answered_there() {
    let server = TestServer::start_with(|config| config.scripted.token_delay_ms = 0).await;
    let body = json!({ "name": "guarded", "metadata": { "requires_approval": ["calculator"] } });
    let agent = id(&server.post_json("/v1/agents", &body).await);
    let (first, main) = run_to_end(&server, agent, "/echo one").await;
    let (_, branch) = fork(&server, agent, json!({ "after_seq": end_seq(&main, first) })).await;
    let branch_id = id(&branch);
    let (asked, on_branch) = run_to_end(&server, branch_id, "/tools calculator 2+3").await;
    assert_eq!(on_branch.last().unwrap().content["stop_reason"], "requires_approval");
    let requests = common::of_kind(&on_branch, asked, EventKind::ApprovalRequested);
    let call_id = requests[0]["tool_call_id"].as_str().unwrap().to_owned();

    // The branch waits, and no fork goes after its waiting run; the main line goes on.
    let url = format!("/v1/agents/{branch_id}/runs");
    let (status, body) = server.post_status(&url, &json!({ "content": "hello?" })).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("approval_pending")));
    let after = json!({ "after_seq": on_branch.last().unwrap().seq });
    let (status, body) = fork(&server, branch_id, after).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("fork_after_waiting_run")));
    let (_, main) = run_to_end(&server, agent, "/echo two").await;
    assert!(main.iter().all(|event| event.kind != EventKind::ApprovalRequested));

    // Answered on the main line it is no request at all; on its branch it runs, once.
    let answer = json!({ "call_id": call_id, "approve": true });
    let (status, _) = server.post_status(&format!("/v1/agents/{agent}/approvals"), &answer).await;
    assert!((400..500).contains(&status), "{status}");
    assert_eq!(server.all_events(agent).await, main);
    let url = format!("/v1/agents/{branch_id}/approvals");
    let (status, accepted) = server.post_status(&url, &answer).await;
    assert_eq!(status, 202, "{accepted}");
    let run_id: Uuid = accepted["run_id"].as_str().unwrap().parse().unwrap();
    let on_branch = server.wait_for_run_end(branch_id, run_id).await;
    let results = common::of_kind(&on_branch, run_id, EventKind::ToolResult);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].to_string().contains('5'), "{results:?}");
    assert_eq!(server.all_events(agent).await, main, "the main line never saw it");
}
