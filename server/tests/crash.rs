//! The real server binary, killed with SIGKILL mid-run under load, restarted on the same database
//! file: the log is intact up to the last commit, the runs that were in flight are marked
//! interrupted, and clients that reconnect from their last seq converge on the log.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use app::protocol::{ClientMessage, ServerMessage};
use app::timeline::Timeline;
use app::{AgentEvent, EventKind};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::process::{Child, Command};
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

use common::WAIT_MAX;

/// One server process on `port` with its database at `database`.
struct Process {
    child: Child,
    base: String,
}

async fn start(port: u16, database: &Path) -> Process {
    let child = Command::new(env!("CARGO_BIN_EXE_server"))
        .env("LEPTOS_SITE_ADDR", format!("127.0.0.1:{port}"))
        .env("DATABASE_URL", format!("sqlite://{}", database.display()))
        .env("AGENTSTREAM_SCRIPTED_TOKEN_DELAY_MS", "3")
        .env("AGENTSTREAM_SCRIPTED_REPLY_TOKENS", "3000")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("the server binary starts");
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + WAIT_MAX;
    while !http
        .get(format!("{base}/healthz"))
        .send()
        .await
        .is_ok_and(|response| response.status().is_success())
    {
        assert!(tokio::time::Instant::now() < deadline, "the server never came up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Process { child, base }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A client subscribed to several agents: everything it was delivered, per agent.
#[derive(Default)]
struct Seen {
    events: HashMap<Uuid, Vec<AgentEvent>>,
}

impl Seen {
    fn last_seq(&self, agent_id: Uuid) -> u64 {
        self.events.get(&agent_id).and_then(|events| events.last()).map_or(0, |event| event.seq)
    }
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn subscribe_all(base: &str, agents: &[Uuid], seen: &Seen) -> Socket {
    let url = format!("{}/v1/ws", base.replace("http://", "ws://"));
    let (mut socket, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    for &agent_id in agents {
        let message = ClientMessage::Subscribe { agent_id, since: seen.last_seq(agent_id) };
        socket.send(Message::Text(serde_json::to_string(&message).unwrap().into())).await.unwrap();
    }
    socket
}

/// Reads frames into `seen` until `done` says so or the socket ends (the server died).
async fn read(socket: &mut Socket, seen: &mut Seen, mut done: impl FnMut(&Seen) -> bool) {
    while !done(seen) {
        let Ok(Some(Ok(frame))) = tokio::time::timeout(WAIT_MAX, socket.next()).await else { return };
        let Message::Text(text) = frame else { continue };
        if let ServerMessage::Events { agent_id, events } = serde_json::from_str(text.as_str()).unwrap() {
            let mine = seen.events.entry(agent_id).or_default();
            for event in events {
                assert_eq!(event.seq, mine.last().map_or(0, |e| e.seq) + 1, "delivered in order, once");
                mine.push(event);
            }
        }
    }
}

async fn log_of(http: &reqwest::Client, base: &str, agent_id: Uuid) -> Vec<AgentEvent> {
    let mut events = Vec::new();
    loop {
        let page: Value = http
            .get(format!("{base}/v1/agents/{agent_id}/events?since={}&limit=1000", events.len()))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        events.extend(serde_json::from_value::<Vec<AgentEvent>>(page["events"].clone()).unwrap());
        if page["has_more"] != true {
            return events;
        }
    }
}

#[tokio::test]
async fn kill_9_mid_run_then_restart_keeps_the_log_and_marks_runs_interrupted() {
    let directory = tempfile::tempdir().unwrap();
    let database = directory.path().join("crash.db");
    let port = free_port();
    let http = reqwest::Client::new();
    let mut server = start(port, &database).await;

    // Load: four agents streaming at once, two of them inside a slow tool when the kill comes.
    let mut agents = Vec::new();
    for index in 0..4 {
        let agent: Value = http
            .post(format!("{}/v1/agents", server.base))
            .json(&json!({ "name": format!("crash-{index}") }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        agents.push(Uuid::parse_str(agent["id"].as_str().unwrap()).unwrap());
    }
    let mut seen = Seen::default();
    let mut socket = subscribe_all(&server.base, &agents, &seen).await;
    let mut runs = Vec::new();
    for (index, &agent_id) in agents.iter().enumerate() {
        let content = if index % 2 == 0 { "a very long answer" } else { "/tools slow 20; calculator 2+2" };
        let accepted: Value = http
            .post(format!("{}/v1/agents/{agent_id}/runs", server.base))
            .json(&json!({ "content": content }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        runs.push(Uuid::parse_str(accepted["run_id"].as_str().unwrap()).unwrap());
    }
    // Wait until every agent is well into its run, then kill the process outright.
    read(&mut socket, &mut seen, |seen| agents.iter().all(|&agent| seen.last_seq(agent) >= 8)).await;
    server.child.start_kill().unwrap();
    server.child.wait().await.unwrap();
    // Whatever was already on its way arrives; then the socket ends.
    read(&mut socket, &mut seen, |_| false).await;

    let server = start(port, &database).await;
    let mut socket = subscribe_all(&server.base, &agents, &seen).await;
    for (&agent_id, &run_id) in agents.iter().zip(&runs) {
        let log = log_of(&http, &server.base, agent_id).await;
        common::assert_contiguous(&log, 1);
        // Nothing a client was shown is missing or different: it was committed before it was sent.
        for event in seen.events.get(&agent_id).into_iter().flatten() {
            assert_eq!(&log[event.seq as usize - 1], event, "delivered event {} differs from the log", event.seq);
        }
        // The run that was in flight ends, once, as interrupted.
        let ends: Vec<&AgentEvent> = log.iter().filter(|e| e.run_id == Some(run_id) && e.kind.is_run_end()).collect();
        assert_eq!(ends.len(), 1, "exactly one end for run {run_id}");
        assert_eq!(ends[0].kind, EventKind::RunFailed);
        assert_eq!(ends[0].content["error"]["type"], "interrupted");
        let run: Value = http.get(format!("{}/v1/runs/{run_id}", server.base)).send().await.unwrap().json().await.unwrap();
        assert_eq!(run["status"], "failed");
        // Every tool call that started has exactly one result.
        let calls: Vec<&str> = log
            .iter()
            .filter(|e| e.kind == EventKind::ToolCall && e.delta_path.is_none())
            .filter_map(|e| e.content["tool_call_id"].as_str())
            .collect();
        for call in calls {
            let results = log.iter().filter(|e| e.kind == EventKind::ToolResult && e.content["tool_call_id"] == call).count();
            assert_eq!(results, 1, "tool call {call} has {results} results");
        }
    }
    // The reconnected client catches up to each log's head and folds what the server folds.
    let heads: Vec<u64> = {
        let mut heads = Vec::new();
        for &agent_id in &agents {
            heads.push(log_of(&http, &server.base, agent_id).await.len() as u64);
        }
        heads
    };
    read(&mut socket, &mut seen, |seen| agents.iter().zip(&heads).all(|(&agent, &head)| seen.last_seq(agent) >= head)).await;
    for &agent_id in &agents {
        let log = log_of(&http, &server.base, agent_id).await;
        let mut client = Timeline::new();
        client.apply_all(seen.events[&agent_id].iter().cloned());
        let mut folded = Timeline::new();
        folded.apply_all(log);
        assert_eq!(client, folded, "the reconnected client converged");
        let run = client.runs().last().unwrap();
        assert!(format!("{run:?}").contains("interrupted"), "the client sees the run interrupted: {run:?}");
    }
    // And the agent works again.
    let accepted: Value = http
        .post(format!("{}/v1/agents/{}/runs", server.base, agents[0]))
        .json(&json!({ "content": "/echo back again" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(accepted["run_id"].is_string(), "{accepted}");
}
