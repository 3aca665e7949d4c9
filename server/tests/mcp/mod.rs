//! MCP servers as an agent's tools, with the reference server from npm
//! (`@modelcontextprotocol/server-everything`, pinned in end2end/package.json, installed by
//! `npm ci` there — `scripts/test.sh` does it first) over stdio: listing, calling, progress,
//! cancel, and a server that cannot start.

use crate::common;
mod http;

use std::path::PathBuf;

use app::EventKind;
use common::{wait_until, TestServer};
use serde_json::{json, Value};
use uuid::Uuid;

fn everything() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../end2end/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        path.exists(),
        "{} is missing: run `npm ci` in end2end/ (scripts/test.sh does)",
        path.display()
    );
    path
}

/// The agent's tools are the built-in ones alone.
async fn assert_builtins_only(server: &TestServer, agent_id: Uuid) {
    let tools = server.get_json(&format!("/v1/tools?agent_id={agent_id}")).await;
    let tools = tools.as_array().unwrap();
    assert!(tools.iter().all(|tool| tool["tool_type"] == "builtin"), "{tools:?}");
}

async fn server_with(servers: Value) -> TestServer {
    TestServer::start_with(|config| {
        config.mcp = agentstream_server::mcp::McpConfig::parse(
            &json!({ "mcpServers": servers }).to_string(),
        )
        .unwrap();
        config.tool_call_timeout_ms = 20_000;
    })
    .await
}

async fn everything_server() -> TestServer {
    let script = everything().display().to_string();
    server_with(json!({ "everything": { "command": "node", "args": [script, "stdio"] } })).await
}

impl TestServer {
    async fn agent_with(&self, metadata: Value) -> reqwest::Response {
        let body = json!({ "name": "mcp agent", "metadata": metadata });
        self.post("/v1/agents", &body).await
    }

    /// Starts a run of the `everything` server's long operation and waits for its first
    /// progress report; the run's id.
    async fn long_operation(&self, agent_id: Uuid, duration_s: u32, steps: u32) -> Uuid {
        let run_id = self
            .start_run(
                agent_id,
                &format!(
                    r#"/tools trigger-long-running-operation {{"duration": {duration_s}, "steps": {steps}}}"#
                ),
            )
            .await;
        // Progress reports land on the tool call's card, live.
        self.wait_for_progress(agent_id).await;
        run_id
    }

    /// Waits until a tool call's card in the agent's log has a progress report.
    async fn wait_for_progress(&self, agent_id: Uuid) {
        wait_until("a progress report in the log", || async {
            let events = self.all_events(agent_id).await;
            events.iter().any(is_progress).then_some(())
        })
        .await;
    }

    async fn mcp_agent(&self, servers: Value) -> Uuid {
        let response = self.agent_with(json!({ "mcp_servers": servers })).await;
        assert_eq!(response.status(), 201);
        let agent: Value = response.json().await.unwrap();
        agent["id"].as_str().unwrap().parse().unwrap()
    }
}

/// A progress report merged on a tool call's card.
fn is_progress(event: &app::AgentEvent) -> bool {
    event.kind == EventKind::ToolCall
        && event.delta.as_ref().is_some_and(|delta| delta.get("progress").is_some())
}

/// The results of a run's tool calls, by tool name: (result, is_error).
fn results(events: &[app::AgentEvent], run_id: Uuid) -> Vec<(String, Value, bool)> {
    events
        .iter()
        .filter(|event| event.run_id == Some(run_id) && event.kind == EventKind::ToolResult)
        .map(|event| {
            (
                event.content["name"].as_str().unwrap_or_default().to_owned(),
                event.content["result"].clone(),
                event.content["is_error"] == true,
            )
        })
        .collect()
}

#[tokio::test]
async fn an_agent_lists_and_calls_its_mcp_servers_tools() {
    let server = everything_server().await;
    let agent_id = server.mcp_agent(json!(["everything"])).await;
    let tools = server.get_json(&format!("/v1/tools?agent_id={agent_id}")).await;
    let tools = tools.as_array().unwrap();
    let find = |name: &str| tools.iter().find(|tool| tool["name"] == name);
    assert_eq!(find("clock").unwrap()["tool_type"], "builtin");
    let sum = find("get-sum").expect("the server's tools are listed");
    assert_eq!(sum["tool_type"], "external_mcp");
    assert_eq!(sum["mcp_server_name"], "everything");
    assert!(sum["json_schema"]["parameters"]["properties"]["a"].is_object());

    let run_id = server.start_run(agent_id, r#"/tools get-sum {"a": 2, "b": 3}"#).await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    let called = results(&events, run_id);
    assert_eq!(called.len(), 1, "{called:?}");
    let (name, result, is_error) = &called[0];
    assert_eq!(name, "get-sum");
    assert!(!is_error, "{result}");
    assert!(result.to_string().contains('5'), "{result}");
    let end = events.last().unwrap();
    assert_eq!(end.kind, EventKind::RunCompleted);

    // An agent that did not name the server has the built-ins only.
    let plain = server.create_agent().await;
    assert_builtins_only(&server, plain).await;
    let run_id = server.start_run(plain, r#"/tools get-sum {"a": 2, "b": 3}"#).await;
    let events = server.wait_for_run_end(plain, run_id).await;
    assert!(results(&events, run_id)[0].2, "an unknown tool is an error result");
}

#[tokio::test]
async fn a_long_running_tool_streams_progress_and_a_cancel_stops_it() {
    let server = everything_server().await;
    let agent_id = server.mcp_agent(json!(["everything"])).await;
    let run_id = server.long_operation(agent_id, 6, 12).await;
    let events = server.cancel_run(agent_id, run_id).await;
    assert_eq!(events.last().unwrap().kind, EventKind::RunCancelled);
    let called = results(&events, run_id);
    assert_eq!(called.len(), 1, "one result per call: {called:?}");
    assert!(called[0].2, "the cut call is an error result: {called:?}");
}

#[tokio::test]
async fn servers_that_are_not_configured_or_cannot_start_never_fail_a_run() {
    let server = server_with(json!({ "broken": { "command": "/nonexistent/mcp-server" } })).await;
    let refused = server.agent_with(json!({ "mcp_servers": ["nope"] })).await;
    assert_eq!(refused.status(), 422);
    let error: Value = refused.json().await.unwrap();
    assert!(error["error"]["message"].as_str().unwrap().contains("\"nope\""), "{error}");
    let refused = server.agent_with(json!({ "mcp_servers": "broken" })).await;
    assert_eq!(refused.status(), 422);

    let agent_id = server.mcp_agent(json!(["broken"])).await;
    assert_builtins_only(&server, agent_id).await;
    let run_id = server.start_run(agent_id, r#"/tools echo {"message": "hi"}; clock"#).await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    assert_eq!(events.last().unwrap().kind, EventKind::RunCompleted);
    let called = results(&events, run_id);
    assert_eq!(called.len(), 2, "{called:?}");
    assert!(called.iter().any(|(name, _, is_error)| name == "echo" && *is_error));
    assert!(called.iter().any(|(name, _, is_error)| name == "clock" && !*is_error));
}

#[tokio::test]
async fn a_server_killed_mid_call_gives_an_error_result_and_the_next_call_reconnects() {
    // A marker among the arguments (the server ignores it) finds this test's process.
    let marker = format!("agentstream-test-{}", Uuid::new_v4());
    let script = everything().display().to_string();
    let server = server_with(
        json!({ "everything": { "command": "node", "args": [script, "stdio", marker] } }),
    )
    .await;
    let agent_id = server.mcp_agent(json!(["everything"])).await;
    let run_id = server.long_operation(agent_id, 20, 40).await;
    let killed = std::process::Command::new("pkill").args(["-9", "-f", &marker]).status().unwrap();
    assert!(killed.success(), "the MCP server process was found and killed");
    let events = server.wait_for_run_end(agent_id, run_id).await;
    assert_eq!(events.last().unwrap().kind, EventKind::RunCompleted);
    let called = results(&events, run_id);
    assert!(called[0].2, "the cut call is an error result: {called:?}");

    let run_id = server.start_run(agent_id, r#"/tools get-sum {"a": 20, "b": 22}"#).await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    let called = results(&events, run_id);
    assert!(!called[0].2 && called[0].1.to_string().contains("42"), "{called:?}");
}

/// The reference server over streamable HTTP, on a free port; killed when dropped.
struct HttpEverything {
    child: std::process::Child,
    url: String,
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_call_past_its_timeout_is_an_error_result_and_the_run_goes_on() {
    let script = everything().display().to_string();
    let server = TestServer::start_with(|config| {
        config.mcp = agentstream_server::mcp::McpConfig::parse(
            &json!({ "mcpServers": { "everything": { "command": "node", "args": [script, "stdio"] } } })
                .to_string(),
        )
        .unwrap();
        config.tool_call_timeout_ms = 500;
    })
    .await;
    let agent_id = server.mcp_agent(json!(["everything"])).await;
    let run_id = server
        .start_run(
            agent_id,
            r#"/tools trigger-long-running-operation {"duration": 10, "steps": 5}"#,
        )
        .await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    assert_eq!(events.last().unwrap().kind, EventKind::RunCompleted);
    let called = results(&events, run_id);
    assert!(called[0].2, "{called:?}");
    assert!(called[0].1.to_string().contains("500 ms"), "{called:?}");
}

/// A server that never answers the handshake (here: a process that does not speak MCP) holds
/// back neither the run's opening nor its cancel: its tools are listed after `run_started`.
#[tokio::test]
async fn a_hung_server_holds_back_neither_the_runs_start_nor_its_cancel() {
    let server = server_with(json!({ "hung": { "command": "sleep", "args": ["60"] } })).await;
    let agent_id = server.mcp_agent(json!(["hung"])).await;
    let asked = std::time::Instant::now();
    let run_id = server.start_run(agent_id, "/echo hello").await;
    wait_until("run_started in the log", || async {
        let events = server.all_events(agent_id).await;
        events
            .iter()
            .any(|event| event.run_id == Some(run_id) && event.kind == EventKind::RunStarted)
            .then_some(())
    })
    .await;
    let connect_timeout = std::time::Duration::from_millis(
        agentstream_server::mcp::connection::MCP_CONNECT_TIMEOUT_MS,
    );
    assert!(
        asked.elapsed() < connect_timeout / 2,
        "run_started waited for the tool listing: {:?}",
        asked.elapsed()
    );
    let events = server.cancel_run(agent_id, run_id).await;
    assert_eq!(events.last().unwrap().kind, EventKind::RunCancelled);
    assert!(asked.elapsed() < connect_timeout, "the cancel waited for the tool listing");
}

/// The witness server (end2end/fixtures/mcp-witness.mjs, on the official MCP SDK) writes down
/// each cancellation it received: a cancel of our run reaches it as `notifications/cancelled`
/// for the very request that was in flight.
#[tokio::test]
async fn a_cancel_reaches_the_mcp_server_as_notifications_cancelled() {
    let directory = tempfile::tempdir().unwrap();
    let witness_file = directory.path().join("cancelled.jsonl");
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../end2end/fixtures/mcp-witness.mjs");
    let server = server_with(json!({ "witness": {
        "command": "node",
        "args": [script.display().to_string()],
        "env": { "WITNESS_FILE": witness_file.display().to_string() },
    } }))
    .await;
    let agent_id = server.mcp_agent(json!(["witness"])).await;
    let run_id = server.start_run(agent_id, r#"/tools wait {"seconds": 30}"#).await;
    server.wait_for_progress(agent_id).await;
    assert!(!witness_file.exists(), "nothing cancelled yet");
    server.post_json(&format!("/v1/agents/{agent_id}/messages/cancel"), &json!({})).await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    assert_eq!(events.last().unwrap().kind, EventKind::RunCancelled);
    let seen = wait_until("the MCP server to see the cancellation", || async {
        std::fs::read_to_string(&witness_file).ok().filter(|text| !text.is_empty())
    })
    .await;
    let lines: Vec<Value> = seen.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines.len(), 1, "one call, one cancellation: {seen}");
    assert!(lines[0]["cancelled"].is_number(), "the request's id: {seen}");
}

/// `requires_approval` in the config file: the server's tool waits for a person whichever agent
/// calls it; the answer runs it on the MCP server.
#[tokio::test]
async fn a_configured_server_can_require_approval_for_its_tools() {
    let script = everything().display().to_string();
    let server = server_with(json!({ "everything": {
        "command": "node", "args": [script, "stdio"], "requires_approval": ["get-sum"],
    } }))
    .await;
    let agent_id = server.mcp_agent(json!(["everything"])).await;
    let run_id = server
        .start_run(agent_id, r#"/tools get-sum {"a": 2, "b": 3}; echo {"message": "hi"}"#)
        .await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    assert_eq!(events.last().unwrap().content["stop_reason"], "requires_approval");
    let called = results(&events, run_id);
    assert_eq!(called.len(), 1, "echo ran, get-sum waits: {called:?}");
    assert_eq!(called[0].0, "echo");
    let request = common::first_of(&events, EventKind::ApprovalRequested);
    let call_id = request.content["tool_call_id"].as_str().unwrap();
    let accepted = server
        .post_json(
            &format!("/v1/agents/{agent_id}/approvals"),
            &json!({ "call_id": call_id, "approve": true }),
        )
        .await;
    let next: Uuid = accepted["run_id"].as_str().unwrap().parse().unwrap();
    let events = server.wait_for_run_end(agent_id, next).await;
    let called = results(&events, next);
    assert_eq!(called.len(), 1, "{called:?}");
    assert!(!called[0].2, "{called:?}");
    assert!(called[0].1.to_string().contains('5'), "{called:?}");
}

/// A stdio MCP server starts with `PATH`, `HOME` and its config's `env`: none of the server's
/// other variables, so none of its secrets. (The server here is the reference one behind a
/// shell that writes down the environment it was given.)
#[tokio::test]
async fn a_stdio_server_gets_only_path_home_and_its_configured_env() {
    let directory = tempfile::tempdir().unwrap();
    let dump = directory.path().join("env.txt");
    let script = everything().display().to_string();
    let server = server_with(json!({ "everything": {
        "command": "sh",
        "args": ["-c", format!("env > '{}'; exec node '{script}' stdio", dump.display())],
        "env": { "ITS_OWN": "configured" },
    } }))
    .await;
    let agent_id = server.mcp_agent(json!(["everything"])).await;
    let run_id = server.start_run(agent_id, r#"/tools get-sum {"a": 2, "b": 3}"#).await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    assert_eq!(results(&events, run_id).len(), 1);
    let text = std::fs::read_to_string(&dump).unwrap();
    let names: Vec<&str> =
        text.lines().filter_map(|line| line.split_once('=').map(|(name, _)| name)).collect();
    // Cargo gives this test process CARGO_* variables: a child that inherited the server's
    // environment would list them.
    assert!(std::env::var("CARGO_PKG_NAME").is_ok());
    for name in &names {
        assert!(
            ["PATH", "HOME", "ITS_OWN", "PWD", "SHLVL", "_", "OLDPWD"].contains(name),
            "the MCP server got {name}: {names:?}"
        );
    }
    assert!(text.contains("ITS_OWN=configured"), "{text}");
}
