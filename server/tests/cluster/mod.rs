//! Two real server processes on one PostgreSQL database: events committed by one reach the
//! other's subscribers gap-free and in order; both write to one agent and its log stays gapless;
//! a killed server's run is ended as interrupted by the other; a cancel sent to one stops a run
//! on the other; a PostgreSQL restart mid-stream loses no committed event.
//!
//! Needs PostgreSQL (see `common::postgres_admin_url`); the restart test starts its own.

mod cancels;
use crate::common;
mod shared;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use app::protocol::{ClientMessage, ServerMessage};
use app::timeline::Timeline;
use app::{AgentEvent, EventKind};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

use crate::common::RequestExt;
use common::processes::{
    assert_calls_answered, ends_of, free_port, log_of, read, subscribe_all, Process, Seen,
};
use common::{
    assert_contiguous, create_postgres_database, postgres_admin_url, produce_request, WAIT_MAX,
};

/// A server process on `database`, with scripted replies of `reply_tokens` words
/// `token_delay_ms` apart and run leases of `lease_ms`.
async fn server(database: &str, reply_tokens: u32, token_delay_ms: u64, lease_ms: u64) -> Process {
    Process::start(
        free_port(),
        &[
            ("DATABASE_URL", database.to_owned()),
            ("AGENTSTREAM_SCRIPTED_TOKEN_DELAY_MS", token_delay_ms.to_string()),
            ("AGENTSTREAM_SCRIPTED_REPLY_TOKENS", reply_tokens.to_string()),
            ("AGENTSTREAM_RUN_LEASE_MS", lease_ms.to_string()),
        ],
    )
    .await
}

/// Two servers A and B on a fresh database (scripted replies and leases as [`server`]), a client,
/// and an agent created on A.
async fn pair(
    reply_tokens: u32,
    token_delay_ms: u64,
    lease_ms: u64,
) -> (Process, Process, reqwest::Client, Uuid) {
    let database = create_postgres_database(&postgres_admin_url()).await;
    let a = server(&database, reply_tokens, token_delay_ms, lease_ms).await;
    let b = server(&database, reply_tokens, token_delay_ms, lease_ms).await;
    let http = agentstream_server::http_client::client();
    let agent_id = create_agent(&http, &a.base).await;
    (a, b, http, agent_id)
}

async fn create_agent(http: &reqwest::Client, base: &str) -> Uuid {
    let agent: Value =
        http.post(format!("{base}/v1/agents")).json(&json!({ "name": "cluster" })).answer().await;
    Uuid::parse_str(agent["id"].as_str().unwrap()).unwrap()
}

/// Starts a run; the status and body as answered.
async fn try_run(
    http: &reqwest::Client,
    base: &str,
    agent_id: Uuid,
    content: &str,
) -> (u16, Value) {
    let response = http
        .post(format!("{base}/v1/agents/{agent_id}/runs"))
        .json(&json!({ "content": content }))
        .sent()
        .await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

async fn run(http: &reqwest::Client, base: &str, agent_id: Uuid, content: &str) -> Uuid {
    let (status, body) = try_run(http, base, agent_id, content).await;
    assert_eq!(status, 202, "{body}");
    Uuid::parse_str(body["run_id"].as_str().unwrap()).unwrap()
}

fn has_ended(seen: &Seen, agent_id: Uuid, run_id: Uuid) -> bool {
    seen.events.get(&agent_id).is_some_and(|events| {
        events.iter().any(|e| e.run_id == Some(run_id) && e.kind.is_run_end())
    })
}

/// What a client was delivered is exactly what the log holds at those seqs.
fn assert_seen_is_committed(seen: &Seen, agent_id: Uuid, log: &[AgentEvent]) {
    for event in seen.events.get(&agent_id).into_iter().flatten() {
        assert_eq!(
            log.get(event.seq as usize - 1),
            Some(event),
            "delivered event {} differs from the log",
            event.seq
        );
    }
}

#[tokio::test]
async fn two_servers_a_subscriber_on_b_sees_a_run_on_a_gap_free_and_in_order() {
    let (a, b, http, agent_id) = pair(400, 1, 10_000).await;

    // One client on B from the start, one that joins B mid-run.
    let mut seen = Seen::default();
    let mut socket = subscribe_all(&b.base, &[agent_id], &seen).await;
    let run_id = run(&http, &a.base, agent_id, "tell me a long story").await;
    read(&mut socket, &mut seen, |seen| seen.last_seq(agent_id) >= 50).await;
    let mut late = Seen::default();
    let mut late_socket = subscribe_all(&b.base, &[agent_id], &late).await;
    read(&mut socket, &mut seen, |seen| has_ended(seen, agent_id, run_id)).await;
    read(&mut late_socket, &mut late, |late| has_ended(late, agent_id, run_id)).await;

    let log_a = log_of(&http, &a.base, agent_id).await;
    let log_b = log_of(&http, &b.base, agent_id).await;
    assert_eq!(log_a, log_b, "both servers read the same log");
    assert_contiguous(&log_a, 1);
    assert!(log_a.len() > 400, "the whole reply is in the log: {} events", log_a.len());
    // `read` asserted once-and-in-order; here: all of it, and exactly the log.
    seen.assert_saw(agent_id, &log_a, "the client on B got A's run exactly");
    late.assert_saw(agent_id, &log_a, "the late client on B got A's run exactly");
}

#[tokio::test]
async fn two_servers_writing_to_one_agent_keep_its_log_gapless() {
    let (a, b, http, agent_id) = pair(30, 0, 10_000).await;

    // The agent's one run slot is cluster-wide: B cannot start a run while A's goes on.
    let slow = run(&http, &a.base, agent_id, "/tools slow 1").await;
    let (status, body) = try_run(&http, &b.base, agent_id, "hello").await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "run_in_progress");
    assert!(body["error"]["message"].as_str().unwrap().contains(&slow.to_string()), "{body}");

    // Then both servers race to start runs on the agent, back to back, while a subscriber on
    // each follows it.
    let mut seen_a = Seen::default();
    let mut seen_b = Seen::default();
    let mut socket_a = subscribe_all(&a.base, &[agent_id], &seen_a).await;
    let mut socket_b = subscribe_all(&b.base, &[agent_id], &seen_b).await;
    const RUNS_PER_SERVER: usize = 6;
    let race = |base: String| {
        let http = http.clone();
        async move {
            let mut started = Vec::new();
            let deadline = tokio::time::Instant::now() + WAIT_MAX;
            while started.len() < RUNS_PER_SERVER {
                assert!(tokio::time::Instant::now() < deadline, "{base} never got its runs in");
                match try_run(&http, &base, agent_id, "/echo one two three four five").await {
                    (202, body) => {
                        started.push(Uuid::parse_str(body["run_id"].as_str().unwrap()).unwrap())
                    }
                    (409, _) => tokio::time::sleep(Duration::from_millis(2)).await,
                    (status, body) => panic!("{status}: {body}"),
                }
            }
            started
        }
    };
    let (runs_a, runs_b) = tokio::join!(race(a.base.clone()), race(b.base.clone()));
    let last = *runs_a.last().unwrap();
    let other_last = *runs_b.last().unwrap();
    let log = loop {
        let log = log_of(&http, &a.base, agent_id).await;
        if !ends_of(&log, last).is_empty() && !ends_of(&log, other_last).is_empty() {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let head = log.len() as u64;
    assert_contiguous(&log, 1);
    // Runs never overlap: each run's events sit between its start and its end, and every run of
    // either server started and ended exactly once.
    let mut current: Option<Uuid> = None;
    for event in &log {
        match event.kind {
            EventKind::RunStarted => {
                assert_eq!(
                    current, None,
                    "a run started at seq {} while another was going",
                    event.seq
                );
                current = event.run_id;
            }
            kind if kind.is_run_end() => {
                assert_eq!(current, event.run_id, "seq {} ends a run that is not going", event.seq);
                current = None;
            }
            _ if event.run_id.is_some() => {
                assert_eq!(
                    current, event.run_id,
                    "seq {} belongs to a run that is not going",
                    event.seq
                );
            }
            _ => {}
        }
    }
    for run_id in runs_a.iter().chain(&runs_b).chain([&slow]) {
        assert_eq!(ends_of(&log, *run_id).len(), 1, "run {run_id} ended once");
        let starts = log
            .iter()
            .filter(|e| e.run_id == Some(*run_id) && e.kind == EventKind::RunStarted)
            .count();
        assert_eq!(starts, 1, "run {run_id} started once");
    }
    read(&mut socket_a, &mut seen_a, |seen| seen.last_seq(agent_id) >= head).await;
    read(&mut socket_b, &mut seen_b, |seen| seen.last_seq(agent_id) >= head).await;
    seen_a.assert_saw(agent_id, &log, "the subscriber on A saw the log");
    seen_b.assert_saw(agent_id, &log, "the subscriber on B saw the log");
}

/// A PostgreSQL cluster of this test's own, to restart without disturbing the other tests.
struct OwnPostgres {
    directory: PathBuf,
    bin: PathBuf,
    port: u16,
}

fn postgres_bin() -> PathBuf {
    std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is installed (scripts/test.sh installs it)")
        .filter_map(|entry| entry.ok().map(|entry| entry.path().join("bin")))
        .find(|bin| bin.join("initdb").exists())
        .expect("an initdb under /usr/lib/postgresql/*/bin")
}

fn is_root() -> bool {
    let id = Command::new("id").arg("-u").output().unwrap();
    id.stdout.starts_with(b"0")
}

/// A PostgreSQL program run as the owner of the cluster: as root, Debian's `postgres` user
/// (initdb and postgres refuse to run as root). Its chatter is dropped.
fn as_owner(program: &Path, arguments: &[&str]) -> Command {
    let mut command = if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    };
    command.args(arguments).stdout(std::process::Stdio::null());
    command
}

fn must(mut command: Command) {
    let status = command.status().unwrap();
    assert!(status.success(), "{command:?} failed");
}

impl OwnPostgres {
    fn start() -> OwnPostgres {
        let directory =
            std::env::temp_dir().join(format!("agentstream-pg-{}", Uuid::new_v4().simple()));
        std::fs::create_dir_all(&directory).unwrap();
        if is_root() {
            assert!(Command::new("chown")
                .arg("postgres:")
                .arg(&directory)
                .status()
                .unwrap()
                .success());
        }
        let own = OwnPostgres { directory, bin: postgres_bin(), port: free_port() };
        let data = own.data();
        must(as_owner(
            &own.bin.join("initdb"),
            &["-D", &data, "-U", "postgres", "-A", "trust", "--no-sync"],
        ));
        own.up();
        own
    }

    fn data(&self) -> String {
        self.directory.join("data").display().to_string()
    }

    fn up(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.directory.display()
        );
        let log = self.directory.join("log").display().to_string();
        must(as_owner(
            &self.bin.join("pg_ctl"),
            &["-D", &self.data(), "-l", &log, "-w", "-o", &options, "start"],
        ));
    }

    /// Stops at once, like a crash: no checkpoint; the next start replays the WAL.
    fn crash(&self) {
        must(as_owner(
            &self.bin.join("pg_ctl"),
            &["-D", &self.data(), "-m", "immediate", "-w", "stop"],
        ));
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        let _ =
            as_owner(&self.bin.join("pg_ctl"), &["-D", &self.data(), "-m", "immediate", "stop"])
                .stderr(std::process::Stdio::null())
                .status();
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

#[tokio::test]
async fn two_servers_survive_a_postgres_restart_mid_stream() {
    let postgres = OwnPostgres::start();
    let database = create_postgres_database(&postgres.url()).await;
    let a = server(&database, 2000, 2, 1_000).await;
    let b = server(&database, 2000, 2, 1_000).await;
    let http = agentstream_server::http_client::client();
    let agent_id = create_agent(&http, &a.base).await;
    let mut seen = Seen::default();
    let mut socket = subscribe_all(&b.base, &[agent_id], &seen).await;
    let run_id = run(&http, &a.base, agent_id, "a very long answer").await;
    read(&mut socket, &mut seen, |seen| seen.last_seq(agent_id) >= 30).await;

    postgres.crash();
    tokio::time::sleep(Duration::from_millis(300)).await;
    postgres.up();

    // The run ends one way or another (finished, failed on the store, or interrupted), exactly
    // once; B's client hears it, so B's notices came back.
    read(&mut socket, &mut seen, |seen| has_ended(seen, agent_id, run_id)).await;
    assert!(has_ended(&seen, agent_id, run_id), "B's client never saw the run end");
    let log = log_of(&http, &b.base, agent_id).await;
    assert_contiguous(&log, 1);
    assert_seen_is_committed(&seen, agent_id, &log);
    let ends = ends_of(&log, run_id);
    assert_eq!(ends.len(), 1, "exactly one end for the run");
    eprintln!(
        "the run in flight during the restart ended with {:?} {}",
        ends[0].kind, ends[0].content
    );
    assert_calls_answered(&log);

    // Both servers work again: a run on A reaches the client on B, in order, nothing missing.
    let again = loop {
        match try_run(&http, &a.base, agent_id, "/echo after the restart").await {
            (202, body) => break Uuid::parse_str(body["run_id"].as_str().unwrap()).unwrap(),
            (409 | 503, _) => tokio::time::sleep(Duration::from_millis(50)).await,
            (status, body) => panic!("{status}: {body}"),
        }
    };
    read(&mut socket, &mut seen, |seen| has_ended(seen, agent_id, again)).await;
    let log = log_of(&http, &a.base, agent_id).await;
    assert_contiguous(&log, 1);
    seen.assert_saw(agent_id, &log, "B's client has the whole log, once, in order");
}
