//! Real `server` processes (the binary cargo built), and a WebSocket client that follows several
//! agents across them.

use std::collections::HashMap;
use std::process::Stdio;

use app::protocol::{ClientMessage, ServerMessage};
use app::AgentEvent;
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::process::{Child, Command};
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

use super::{RequestExt, WAIT_MAX};

/// One server process listening on `port`.
pub struct Process {
    pub child: Child,
    pub base: String,
    /// The database's folder when `env` named none (kept until the process is dropped): the
    /// server's default, `data/` under the working directory, would land in the checkout.
    _database_directory: Option<tempfile::TempDir>,
}

/// A server the test kills and starts again: one port and one SQLite file for every start.
pub struct Restartable {
    pub port: u16,
    /// `DATABASE_URL`, naming the file in the folder below.
    pub env: Vec<(&'static str, String)>,
    _directory: tempfile::TempDir,
}

impl Restartable {
    pub fn new() -> Restartable {
        let directory = tempfile::tempdir().unwrap();
        let database = directory.path().join("log.db");
        Restartable {
            port: free_port(),
            env: vec![("DATABASE_URL", format!("sqlite://{}", database.display()))],
            _directory: directory,
        }
    }

    /// The server on this port and file, with `extra` variables on top.
    pub async fn start_with(&self, extra: &[(&'static str, String)]) -> Process {
        let env: Vec<_> = self.env.iter().chain(extra).cloned().collect();
        Process::start(self.port, &env).await
    }

    pub async fn start(&self) -> Process {
        self.start_with(&[]).await
    }

    /// An agent made from `agent` runs `run` until a call waits; the server is killed with
    /// SIGKILL and started again, and the call still waits. The restarted server, the agent and
    /// the call's id.
    pub async fn kill_while_a_call_waits(
        &self,
        http: &reqwest::Client,
        agent: Value,
        run: Value,
    ) -> (Process, Uuid, String) {
        let mut server = self.start().await;
        let agent_id = server.create_agent(agent).await;
        let (status, body) = http
            .post(format!("{}/v1/agents/{agent_id}/runs", server.base))
            .json(&run)
            .status_json()
            .await;
        assert_eq!(status, 202, "{body}");
        let call_id = waiting_call(http, &server.base, agent_id).await;
        server.kill().await;
        let server = self.start().await;
        let log = log_of(http, &server.base, agent_id).await;
        assert_eq!(
            pending_calls(&log),
            std::slice::from_ref(&call_id),
            "still waiting after the restart"
        );
        (server, agent_id, call_id)
    }
}

impl Process {
    /// Starts the server binary with `env` (on top of this process's environment) and waits
    /// until it answers `/healthz`. Without a `DATABASE_URL` in `env` its log is a SQLite file in
    /// a temporary folder.
    pub async fn start(port: u16, env: &[(&str, String)]) -> Process {
        let mut command = Command::new(env!("CARGO_BIN_EXE_server"));
        let database_directory =
            (!env.iter().any(|(name, _)| *name == "DATABASE_URL")).then(|| {
                let directory = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}", directory.path().join("log.db").display());
                command.env("DATABASE_URL", url);
                directory
            });
        command
            .env("LEPTOS_SITE_ADDR", format!("127.0.0.1:{port}"))
            .env("RUST_LOG", "warn")
            // The server logs (warnings and up) to stdout: into the test output's stderr.
            .stdout(Stdio::from(std::io::stderr()))
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        for (name, value) in env {
            command.env(name, value);
        }
        let child = command.spawn().expect("the server binary starts");
        let base = format!("http://127.0.0.1:{port}");
        let http = agentstream_server::http_client::client();
        super::wait_until("the server to come up", || async {
            let response = http.get(format!("{base}/healthz")).send().await;
            response.is_ok_and(|response| response.status().is_success()).then_some(())
        })
        .await;
        Process { child, base, _database_directory: database_directory }
    }

    /// `POST /v1/agents` with `body`: the new agent's id.
    pub async fn create_agent(&self, body: serde_json::Value) -> Uuid {
        let agent: Value = agentstream_server::http_client::client()
            .post(format!("{}/v1/agents", self.base))
            .json(&body)
            .answer()
            .await;
        agent["id"].as_str().unwrap().parse().unwrap()
    }

    /// `POST /v1/agents/{id}/runs` with `content` (the answer is not waited for).
    pub async fn start_run(&self, agent_id: Uuid, content: &str) {
        let response = agentstream_server::http_client::client()
            .post(format!("{}/v1/agents/{agent_id}/runs", self.base))
            .json(&serde_json::json!({ "content": content }))
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{}", response.status());
    }

    /// SIGTERM (what a service manager sends to stop it).
    pub fn sigterm(&self) {
        let pid = self.child.id().expect("the server is running");
        let status =
            std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap();
        assert!(status.success());
    }

    /// SIGKILL, and wait for the process to be gone.
    pub async fn kill(&mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A client subscribed to several agents: everything it was delivered, per agent.
#[derive(Default)]
pub struct Seen {
    pub events: HashMap<Uuid, Vec<AgentEvent>>,
}

impl Seen {
    /// Asserts the client got exactly `log` of `agent_id`, once and in order (`what` says so
    /// in the failure's message).
    pub fn assert_saw(&self, agent_id: Uuid, log: &[AgentEvent], what: &str) {
        assert_eq!(self.events[&agent_id], log, "{what}");
    }

    pub fn last_seq(&self, agent_id: Uuid) -> u64 {
        self.events.get(&agent_id).and_then(|events| events.last()).map_or(0, |event| event.seq)
    }
}

pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A WebSocket to `base`, subscribed to each agent from what `seen` already has.
pub async fn subscribe_all(base: &str, agents: &[Uuid], seen: &Seen) -> Socket {
    let url = format!("{}/v1/ws", base.replace("http://", "ws://"));
    let (mut socket, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    for &agent_id in agents {
        let message =
            ClientMessage::Subscribe { agent_id, since: seen.last_seq(agent_id), coalesce: false };
        socket.send(Message::Text(serde_json::to_string(&message).unwrap().into())).await.unwrap();
    }
    socket
}

/// Reads frames into `seen` until `done` says so, the socket ends (the server died) or nothing
/// comes for [`WAIT_MAX`]. Asserts that each agent's events arrive once and in order.
pub async fn read(socket: &mut Socket, seen: &mut Seen, mut done: impl FnMut(&Seen) -> bool) {
    while !done(seen) {
        let Ok(Some(Ok(frame))) = tokio::time::timeout(WAIT_MAX, socket.next()).await else {
            return;
        };
        let Message::Text(text) = frame else { continue };
        if let ServerMessage::Events { agent_id, events } =
            serde_json::from_str(text.as_str()).unwrap()
        {
            let mine = seen.events.entry(agent_id).or_default();
            for event in events {
                assert_eq!(
                    event.seq,
                    mine.last().map_or(0, |e| e.seq) + 1,
                    "delivered in order, once"
                );
                mine.push(event);
            }
        }
    }
}

/// The agent's whole log, through the REST API of `base`.
pub async fn log_of(http: &reqwest::Client, base: &str, agent_id: Uuid) -> Vec<AgentEvent> {
    let mut events = Vec::new();
    loop {
        let page: Value = http
            .get(format!("{base}/v1/agents/{agent_id}/events?since={}&limit=1000", events.len()))
            .answer()
            .await;
        events.extend(serde_json::from_value::<Vec<AgentEvent>>(page["events"].clone()).unwrap());
        if page["has_more"] != true {
            return events;
        }
    }
}

/// The id of the call that waits in `agent_id`'s log once the run that made it has ended.
pub async fn waiting_call(http: &reqwest::Client, base: &str, agent_id: Uuid) -> String {
    super::wait_until("the call to wait", || async {
        let log = log_of(http, base, agent_id).await;
        let ended = log.iter().any(|event| event.kind.is_run_end());
        log.iter()
            .find(|event| event.kind == app::EventKind::ApprovalRequested)
            .filter(|_| ended)
            .map(|event| event.content["tool_call_id"].as_str().unwrap().to_owned())
    })
    .await
}

/// The ids of the calls that still wait in `log`.
pub fn pending_calls(log: &[AgentEvent]) -> Vec<String> {
    app::approvals::pending(&super::fold(log))
        .iter()
        .map(|request| request.tool_call_id.to_owned())
        .collect()
}

/// `agent_id`'s log once `run_id` has ended.
pub async fn log_after_run(
    http: &reqwest::Client,
    base: &str,
    agent_id: Uuid,
    run_id: Uuid,
) -> Vec<AgentEvent> {
    super::wait_until("the run's end", || async {
        let log = log_of(http, base, agent_id).await;
        log.iter()
            .any(|event| event.run_id == Some(run_id) && event.kind.is_run_end())
            .then_some(log)
    })
    .await
}

/// The ends of `run_id` in `log` (a run that ended once has one).
pub fn ends_of(log: &[AgentEvent], run_id: Uuid) -> Vec<&AgentEvent> {
    log.iter().filter(|e| e.run_id == Some(run_id) && e.kind.is_run_end()).collect()
}

/// Every tool call in the log has exactly one result.
pub fn assert_calls_answered(log: &[AgentEvent]) {
    let calls: Vec<&str> = log
        .iter()
        .filter(|e| e.kind == app::EventKind::ToolCall && e.delta_path.is_none())
        .filter_map(|e| e.content["tool_call_id"].as_str())
        .collect();
    for call in calls {
        let results = log
            .iter()
            .filter(|e| e.kind == app::EventKind::ToolResult && e.content["tool_call_id"] == call)
            .count();
        assert_eq!(results, 1, "tool call {call} has {results} results");
    }
}
