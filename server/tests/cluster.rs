//! Two real server processes on one PostgreSQL database: events committed by one reach the
//! other's subscribers gap-free and in order; both write to one agent and its log stays gapless;
//! a killed server's run is ended as interrupted by the other; a cancel sent to one stops a run
//! on the other; a PostgreSQL restart mid-stream loses no committed event.
//!
//! Needs PostgreSQL (see `common::postgres_admin_url`); the restart test starts its own.

mod common;

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

use common::processes::{free_port, log_of, read, subscribe_all, Process, Seen};
use common::{assert_contiguous, create_postgres_database, postgres_admin_url, WAIT_MAX};

/// A server process on `database`, with scripted replies of `reply_tokens` words
/// `token_delay_ms` apart and run leases of `lease_ms`.
async fn server(database: &str, reply_tokens: u32, token_delay_ms: u64, lease_ms: u64) -> Process {
    Process::start(
        free_port(),
        &[
            ("DATABASE_URL", database.to_owned()),
            (
                "AGENTSTREAM_SCRIPTED_TOKEN_DELAY_MS",
                token_delay_ms.to_string(),
            ),
            (
                "AGENTSTREAM_SCRIPTED_REPLY_TOKENS",
                reply_tokens.to_string(),
            ),
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
    let http = reqwest::Client::new();
    let agent_id = create_agent(&http, &a.base).await;
    (a, b, http, agent_id)
}

async fn create_agent(http: &reqwest::Client, base: &str) -> Uuid {
    let agent: Value = http
        .post(format!("{base}/v1/agents"))
        .json(&json!({ "name": "cluster" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
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
        .send()
        .await
        .unwrap();
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
        events
            .iter()
            .any(|e| e.run_id == Some(run_id) && e.kind.is_run_end())
    })
}

fn ends_of(log: &[AgentEvent], run_id: Uuid) -> Vec<&AgentEvent> {
    log.iter()
        .filter(|e| e.run_id == Some(run_id) && e.kind.is_run_end())
        .collect()
}

/// Every tool call in the log has exactly one result.
fn assert_calls_answered(log: &[AgentEvent]) {
    let calls: Vec<&str> = log
        .iter()
        .filter(|e| e.kind == EventKind::ToolCall && e.delta_path.is_none())
        .filter_map(|e| e.content["tool_call_id"].as_str())
        .collect();
    for call in calls {
        let results = log
            .iter()
            .filter(|e| e.kind == EventKind::ToolResult && e.content["tool_call_id"] == call)
            .count();
        assert_eq!(results, 1, "tool call {call} has {results} results");
    }
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
    read(&mut socket, &mut seen, |seen| {
        has_ended(seen, agent_id, run_id)
    })
    .await;
    read(&mut late_socket, &mut late, |late| {
        has_ended(late, agent_id, run_id)
    })
    .await;

    let log_a = log_of(&http, &a.base, agent_id).await;
    let log_b = log_of(&http, &b.base, agent_id).await;
    assert_eq!(log_a, log_b, "both servers read the same log");
    assert_contiguous(&log_a, 1);
    assert!(
        log_a.len() > 400,
        "the whole reply is in the log: {} events",
        log_a.len()
    );
    // `read` asserted once-and-in-order; here: all of it, and exactly the log.
    assert_eq!(
        seen.events[&agent_id], log_a,
        "the client on B got A's run exactly"
    );
    assert_eq!(
        late.events[&agent_id], log_a,
        "the late client on B got A's run exactly"
    );
}

#[tokio::test]
async fn two_servers_writing_to_one_agent_keep_its_log_gapless() {
    let (a, b, http, agent_id) = pair(30, 0, 10_000).await;

    // The agent's one run slot is cluster-wide: B cannot start a run while A's goes on.
    let slow = run(&http, &a.base, agent_id, "/tools slow 1").await;
    let (status, body) = try_run(&http, &b.base, agent_id, "hello").await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "run_in_progress");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&slow.to_string()),
        "{body}"
    );

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
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "{base} never got its runs in"
                );
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
                assert_eq!(
                    current, event.run_id,
                    "seq {} ends a run that is not going",
                    event.seq
                );
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
    read(&mut socket_a, &mut seen_a, |seen| {
        seen.last_seq(agent_id) >= head
    })
    .await;
    read(&mut socket_b, &mut seen_b, |seen| {
        seen.last_seq(agent_id) >= head
    })
    .await;
    assert_eq!(
        seen_a.events[&agent_id], log,
        "the subscriber on A saw the log"
    );
    assert_eq!(
        seen_b.events[&agent_id], log,
        "the subscriber on B saw the log"
    );
}

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
    read(&mut socket, &mut seen, |seen| {
        agents.iter().all(|&agent| seen.last_seq(agent) >= 8)
    })
    .await;
    a.kill().await;

    // B notices A's leases ran out and ends both runs; its client sees that live.
    read(&mut socket, &mut seen, |seen| {
        agents
            .iter()
            .zip(&runs)
            .all(|(&agent, &run_id)| has_ended(seen, agent, run_id))
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
        let status: Value = http
            .get(format!("{}/v1/runs/{run_id}", b.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(status["status"], "failed");
        // The client on B converged on the log.
        read(&mut socket, &mut seen, |seen| {
            seen.last_seq(agent_id) >= log.len() as u64
        })
        .await;
        let mut client = Timeline::new();
        client.apply_all(seen.events[&agent_id].iter().cloned());
        let mut folded = Timeline::new();
        folded.apply_all(log);
        assert_eq!(client, folded, "B's client converged");
    }
    // The slot is free again: B runs the agent.
    let again = run(&http, &b.base, tooler, "/echo still here").await;
    read(&mut socket, &mut seen, |seen| {
        has_ended(seen, tooler, again)
    })
    .await;
}

#[tokio::test]
async fn two_servers_a_cancel_sent_to_b_stops_a_run_on_a() {
    let (a, b, http, agent_id) = pair(3000, 3, 10_000).await;
    let mut seen = Seen::default();
    let mut socket = subscribe_all(&a.base, &[agent_id], &seen).await;
    let run_id = run(&http, &a.base, agent_id, "a very long answer").await;
    read(&mut socket, &mut seen, |seen| seen.last_seq(agent_id) >= 10).await;

    let cancelled: Value = http
        .post(format!("{}/v1/agents/{agent_id}/messages/cancel", b.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        cancelled["cancelled_run_ids"],
        json!([run_id]),
        "{cancelled}"
    );
    // B answered after the end reached the log: it is there, as a cancel.
    let log = log_of(&http, &b.base, agent_id).await;
    let ends = ends_of(&log, run_id);
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0].kind, EventKind::RunCancelled);
    assert!(
        log.len() < 3000,
        "the run stopped early ({} events)",
        log.len()
    );
    let status: Value = http
        .get(format!("{}/v1/runs/{run_id}", a.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["status"], "cancelled");
    // A's subscriber saw the cancel; nothing is cancelled when nothing runs.
    read(&mut socket, &mut seen, |seen| {
        has_ended(seen, agent_id, run_id)
    })
    .await;
    let nothing: Value = http
        .post(format!("{}/v1/agents/{agent_id}/messages/cancel", b.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
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
    let cancel = ClientMessage::Cancel {
        agent_id,
        run_ids: None,
    };
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
    assert_eq!(
        answer,
        ServerMessage::CancelRequested {
            agent_id,
            run_ids: vec![run_id]
        }
    );
    read(&mut socket, &mut seen, |seen| {
        has_ended(seen, agent_id, run_id)
    })
    .await;
    let end = seen.events[&agent_id]
        .iter()
        .find(|event| event.run_id == Some(run_id) && event.kind.is_run_end())
        .expect("A's subscriber saw the run end");
    assert_eq!(end.kind, EventKind::RunCancelled);
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

/// A PostgreSQL program run as the owner of the cluster: as root, Debian's `postgres` user
/// (initdb and postgres refuse to run as root). Its chatter is dropped.
fn as_owner(program: &Path, arguments: &[&str]) -> Command {
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .unwrap()
        .stdout
        .starts_with(b"0");
    let mut command = if is_root {
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
        let is_root = Command::new("id")
            .arg("-u")
            .output()
            .unwrap()
            .stdout
            .starts_with(b"0");
        if is_root {
            assert!(Command::new("chown")
                .arg("postgres:")
                .arg(&directory)
                .status()
                .unwrap()
                .success());
        }
        let own = OwnPostgres {
            directory,
            bin: postgres_bin(),
            port: free_port(),
        };
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
            &[
                "-D",
                &self.data(),
                "-l",
                &log,
                "-w",
                "-o",
                &options,
                "start",
            ],
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
        let _ = as_owner(
            &self.bin.join("pg_ctl"),
            &["-D", &self.data(), "-m", "immediate", "stop"],
        )
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
    let http = reqwest::Client::new();
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
    read(&mut socket, &mut seen, |seen| {
        has_ended(seen, agent_id, run_id)
    })
    .await;
    assert!(
        has_ended(&seen, agent_id, run_id),
        "B's client never saw the run end"
    );
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
    read(&mut socket, &mut seen, |seen| {
        has_ended(seen, agent_id, again)
    })
    .await;
    let log = log_of(&http, &a.base, agent_id).await;
    assert_contiguous(&log, 1);
    assert_eq!(
        seen.events[&agent_id], log,
        "B's client has the whole log, once, in order"
    );
}

/// The store alone, as two processes' writers see it: two connection pools (two node ids)
/// appending to the same agents at once, many transactions in flight on each. Every seq is
/// handed out once, with no hole, and each writer's own appends come back in its order.
#[tokio::test]
async fn two_servers_worth_of_writers_on_shared_agents_never_gap_or_repeat_a_seq() {
    use agentstream_server::store::postgres::PgStore;
    use agentstream_server::store::{AppendBatch, ClusterOptions, EventDraft, NewAgent, Store};
    use std::sync::Arc;

    let database = create_postgres_database(&postgres_admin_url()).await;
    let options = ClusterOptions::default();
    let first: Arc<dyn Store> = Arc::new(PgStore::open(&database, &options).await.unwrap());
    let second: Arc<dyn Store> = Arc::new(PgStore::open(&database, &options).await.unwrap());
    let mut agents = Vec::new();
    for _ in 0..3 {
        agents.push(first.create_agent(NewAgent::default()).await.unwrap().id);
    }
    const TASKS_PER_STORE: usize = 8;
    const APPENDS_PER_TASK: usize = 40;
    let mut tasks = Vec::new();
    for (which, store) in [first.clone(), second.clone()].into_iter().enumerate() {
        for task in 0..TASKS_PER_STORE {
            let store = store.clone();
            let agents = agents.clone();
            tasks.push(tokio::spawn(async move {
                let mut mine: Vec<(Uuid, u64)> = Vec::new();
                for index in 0..APPENDS_PER_TASK {
                    // Groups that touch one or two agents, in varying order (lock ordering).
                    let a = agents[(task + index) % agents.len()];
                    let b = agents[(task + index + which + 1) % agents.len()];
                    let mut batches = vec![AppendBatch {
                        agent_id: a,
                        drafts: vec![EventDraft::new(EventKind::Text); 1 + index % 3],
                        producer: None,
                    }];
                    if index % 2 == 0 && a != b {
                        batches.push(AppendBatch {
                            agent_id: b,
                            drafts: vec![EventDraft::new(EventKind::Text); 2],
                            producer: None,
                        });
                    }
                    for batch in &mut batches {
                        for draft in &mut batch.drafts {
                            draft.id = Uuid::new_v4();
                        }
                    }
                    let committed = store.append(&batches).await.unwrap();
                    for events in committed {
                        mine.extend(events.iter().map(|event| (event.agent_id, event.seq)));
                    }
                }
                mine
            }));
        }
    }
    let mut handed_out: Vec<(Uuid, u64)> = Vec::new();
    for task in tasks {
        let mine = task.await.unwrap();
        for &agent in &agents {
            let seqs: Vec<u64> = mine
                .iter()
                .filter(|(a, _)| *a == agent)
                .map(|(_, seq)| *seq)
                .collect();
            assert!(
                seqs.windows(2).all(|pair| pair[0] < pair[1]),
                "a writer's appends commit in its order"
            );
        }
        handed_out.extend(mine);
    }
    for &agent in &agents {
        let mut seqs: Vec<u64> = handed_out
            .iter()
            .filter(|(a, _)| *a == agent)
            .map(|(_, seq)| *seq)
            .collect();
        seqs.sort_unstable();
        let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
        assert_eq!(seqs, expected, "agent {agent}: every seq once, no hole");
        let log = second.read_events(agent, 0, 100_000).await.unwrap();
        assert_eq!(log.len(), seqs.len());
        assert_eq!(
            first.head_seq(agent).await.unwrap(),
            Some(seqs.len() as u64)
        );
    }
}

/// A producer behind a load balancer: each batch goes to one server and its retry, at the same
/// time, to the other. Either server takes the producer's next batch (the run's slot and fence
/// live in the database), each batch is written once, and the run is whole.
#[tokio::test]
async fn two_servers_take_a_producers_batches_in_turn_and_write_each_once() {
    const BATCHES: u64 = 24;
    let (a, b, http, agent_id) = pair(5, 0, 2_000).await;
    let bases = [a.base.clone(), b.base.clone()];
    let send = |base: String, seq: u64, batch: Value| {
        let http = http.clone();
        async move {
            let response = http
                .post(format!("{base}/v1/agents/{agent_id}/produce"))
                .header("Producer-Id", "balanced")
                .header("Producer-Epoch", "0")
                .header("Producer-Seq", seq.to_string())
                .json(&batch)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let message = "0190d0c0-0000-7000-8000-0000000000c1";
    let mut expected_text = String::new();
    for seq in 0..BATCHES {
        let piece = format!("{seq} ");
        let text = json!({ "kind": "text", "message_id": message, "delta": piece, "delta_action": "append" });
        let batch = match seq {
            0 => json!([{ "kind": "run_started" }, text]),
            last if last == BATCHES - 1 => json!([text, { "kind": "run_completed" }]),
            _ if seq % 5 == 0 => json!([
                text,
                { "kind": "tool_call", "content": { "tool_call_id": format!("c{seq}"), "name": "lookup" } },
                { "kind": "tool_result", "content": { "tool_call_id": format!("c{seq}"), "result": "ok" } },
            ]),
            _ => json!([text]),
        };
        expected_text.push_str(&piece);
        let first = bases[(seq % 2) as usize].clone();
        let other = bases[((seq + 1) % 2) as usize].clone();
        let ((one, one_body), (two, two_body)) =
            tokio::join!(send(first, seq, batch.clone()), send(other, seq, batch));
        let mut statuses = [one, two];
        statuses.sort_unstable();
        assert_eq!(
            statuses,
            [200, 204],
            "batch {seq}: one server writes it, the other answers its duplicate: {one_body} {two_body}"
        );
        if seq == BATCHES / 2 {
            for base in &bases {
                let position: Value = http
                    .get(format!("{base}/v1/agents/{agent_id}/producers/balanced"))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                assert_eq!(position["run_open"], json!(true), "{base}: {position}");
                assert_eq!(position["seq"], json!(seq), "{base}: {position}");
            }
        }
    }
    let log = log_of(&http, &a.base, agent_id).await;
    assert_contiguous(&log, 1);
    let count = |kind: EventKind| log.iter().filter(|event| event.kind == kind).count();
    assert_eq!(count(EventKind::RunStarted), 1);
    assert_eq!(count(EventKind::RunCompleted), 1);
    assert_eq!(count(EventKind::RunFailed), 0);
    assert_eq!(count(EventKind::ToolResult), ((BATCHES - 2) / 5) as usize);
    let text: String = log
        .iter()
        .filter(|event| event.kind == EventKind::Text)
        .filter_map(|event| event.delta.as_ref().and_then(Value::as_str))
        .collect();
    assert_eq!(text, expected_text);
    // The agent is free on both servers.
    for base in &bases {
        let (status, body) = try_run(&http, base, agent_id, "/echo free").await;
        assert_eq!(status, 202, "{base}: {body}");
        let run_id: Uuid = body["run_id"].as_str().unwrap().parse().unwrap();
        common::wait_until("the run to end", || async {
            log_of(&http, base, agent_id)
                .await
                .iter()
                .any(|event| event.run_id == Some(run_id) && event.kind.is_run_end())
                .then_some(())
        })
        .await;
    }
}

/// One durable stream appended to through both servers in turn: each keeps the newest messages
/// it committed resident and serves reads from them, so every read — from any offset, on either
/// server, right after either's append — must be byte for byte what the other reads and hold
/// exactly the messages appended, in order (a resident tail that missed the other server's
/// appends must not answer for them).
#[tokio::test]
async fn two_servers_appending_to_one_stream_serve_the_same_bytes() {
    const APPENDS: usize = 40;
    let database = create_postgres_database(&postgres_admin_url()).await;
    let a = server(&database, 5, 0, 2_000).await;
    let b = server(&database, 5, 0, 2_000).await;
    let http = reqwest::Client::new();
    let bases = [a.base.clone(), b.base.clone()];
    let url = |base: &str| format!("{base}/v1/streams/shared/resident");
    let created = http
        .put(url(&bases[0]))
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let mut expected: Vec<Value> = Vec::new();
    // A fixed pattern of which server appends: runs on one, then switches.
    let writer_of = |index: usize| (index / 3 + index / 7) % 2;
    for index in 0..APPENDS {
        let batch: Vec<Value> = (0..1 + index % 3)
            .map(|k| json!({ "i": index, "k": k, "text": format!("é \"{index}\" \\ {k} 🚀"), "f": 1.5, "big": 9_007_199_254_740_991u64 }))
            .collect();
        let appended = http
            .post(url(&bases[writer_of(index)]))
            .header("content-type", "application/json")
            .body(Value::Array(batch.clone()).to_string())
            .send()
            .await
            .unwrap();
        assert!(appended.status().is_success(), "{}", appended.status());
        expected.extend(batch);
        // Read everything from a few offsets on both servers.
        for since in [0, expected.len() / 2, expected.len() - 1] {
            let offset = if since == 0 {
                "-1".to_owned()
            } else {
                format!("{:016}_{since:016}", 0)
            };
            let mut bodies = Vec::new();
            for base in &bases {
                let response = http
                    .get(format!("{}?offset={offset}", url(base)))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), 200);
                assert!(response.headers().contains_key("stream-up-to-date"));
                bodies.push(response.bytes().await.unwrap());
            }
            assert_eq!(
                String::from_utf8_lossy(&bodies[0]),
                String::from_utf8_lossy(&bodies[1]),
                "A and B read different bytes after append {index} from {offset}"
            );
            let messages: Vec<Value> = serde_json::from_slice(&bodies[0]).unwrap();
            assert_eq!(
                messages,
                expected[since..],
                "after append {index} from {offset}"
            );
        }
    }
}
