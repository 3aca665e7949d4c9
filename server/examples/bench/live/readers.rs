//! Readers that are not caught up: a slow one, a history page, idle sockets.

use crate::requests::RequestExt;
use std::path::Path;
use std::time::{Duration, Instant};

use app::protocol::frame::LogFrame;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

use super::Server;

pub struct SlowReader {
    /// Seqs the run wrote.
    pub seqs: u64,
    /// From the run's last event being made to this reader having it.
    pub behind_at_end_ms: f64,
    pub bytes: usize,
    pub frames: usize,
    pub events: usize,
}

/// A reader on a slow link (a small socket buffer, reading `bytes_per_second`) following one
/// fast stream live: how far behind it is when the run ends, and what it had to read.
pub async fn slow_reader(server: &Server, bytes_per_second: u64, coalesce: bool) -> SlowReader {
    let agent_id = server.agent().await;
    let address = server.base.trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let tcp = socket.connect(address).await.unwrap();
    let (mut socket, _) = tokio_tungstenite::client_async(server.ws_url(), tcp).await.unwrap();
    let subscribe = super::subscribe_frame(agent_id, coalesce);
    socket.send(subscribe).await.unwrap();
    server.run(agent_id, "a fast answer").await;
    let (mut bytes, mut frames, mut events) = (0, 0, 0);
    loop {
        let Some(Ok(Message::Text(text))) = socket.next().await else {
            panic!("the slow reader's socket ended early")
        };
        // The link's pace: this frame's bytes take this long to arrive.
        tokio::time::sleep(Duration::from_secs_f64(text.len() as f64 / bytes_per_second as f64))
            .await;
        bytes += text.len();
        frames += 1;
        let Ok(LogFrame::Events(batch)) = LogFrame::parse(text.as_str()) else {
            continue;
        };
        events += batch.len();
        if let Some(end) = batch.iter().find(|event| event.kind.is_run_end()) {
            let behind = chrono::Utc::now() - end.created_at;
            return SlowReader {
                seqs: end.seq,
                behind_at_end_ms: behind.num_microseconds().unwrap_or(0) as f64 / 1000.0,
                bytes,
                frames,
                events,
            };
        }
    }
}

/// Waits until the agent's newest event, past seq `after`, ends a run; returns the head seq.
pub(super) async fn wait_for_run_end(server: &Server, agent_id: Uuid, after: u64) -> u64 {
    let http = agentstream_server::http_client::client();
    loop {
        let events = format!("/v1/agents/{agent_id}/events");
        let first: Value = server.get_json(&http, &format!("{events}?since=0&limit=1")).await;
        let head = first["head_seq"].as_u64().unwrap();
        let since = head.saturating_sub(1);
        let last: Value = server.get_json(&http, &format!("{events}?since={since}&limit=1")).await;
        let kind = last["events"][0]["kind"].as_str().unwrap_or("");
        if head > after && kind.starts_with("run_") && kind != "run_started" {
            return head;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A conversation of two long replies (about 20 000 events), then its history page,
/// rendered on the server from the log: the first full response (the whole log folded)
/// and the median of three more (folded from the snapshot the first kept).
pub async fn history_page(server: &Server) -> (u64, f64, f64) {
    let agent_id = server.agent().await;
    server.run(agent_id, "a very long answer").await;
    let first = wait_for_run_end(server, agent_id, 0).await;
    server.run(agent_id, "and another one").await;
    let head = wait_for_run_end(server, agent_id, first).await;
    let http = agentstream_server::http_client::client();
    let mut times = Vec::new();
    for _ in 0..4 {
        let started = Instant::now();
        let response =
            http.get(format!("{}/agents/{agent_id}/history", server.base)).send().await.unwrap();
        assert!(response.status().is_success(), "history page: {}", response.status());
        let _body = response.bytes().await.unwrap();
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    // The first load folds the whole log; later ones start from the snapshot it kept.
    let cold = times[0];
    let mut warm = times.split_off(1);
    warm.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (head, cold, warm[1])
}

fn rss_bytes(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024.0)
}

/// The release server binary in its own process (so only its memory is counted), `sockets`
/// WebSockets each subscribed to an agent and then idle: the server's resident memory
/// growth per socket.
pub async fn idle_memory(directory: &Path, sockets: usize) -> Option<(usize, f64)> {
    let target = std::env::var("CARGO_TARGET_DIR").ok().or_else(|| {
        std::env::var("HOME").ok().map(|home| format!("{home}/.cache/agentstream/target"))
    })?;
    let binary =
        std::env::var("AGENTSTREAM_SERVER_BIN").unwrap_or(format!("{target}/release/server"));
    if !Path::new(&binary).exists() {
        return None;
    }
    let path = directory.join("idle.db");
    crate::baseline::remove_database(&path);
    let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
    let mut child = tokio::process::Command::new(&binary)
        .env("LEPTOS_SITE_ADDR", format!("127.0.0.1:{port}"))
        .env("DATABASE_URL", format!("sqlite://{}", path.display()))
        .env("AGENTSTREAM_WS_CONNECTIONS_MAX", (sockets + 16).to_string())
        .env("RUST_LOG", "error")
        .kill_on_drop(true)
        .spawn()
        .ok()?;
    let base = format!("http://127.0.0.1:{port}");
    let http = agentstream_server::http_client::client();
    while http.get(format!("{base}/healthz")).send().await.is_err() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let body: Value = http
        .post(format!("{base}/v1/agents"))
        .json(&json!({ "name": "idle" }))
        .json_if_any()
        .await?;
    let agent_id = Uuid::parse_str(body["id"].as_str()?).ok()?;
    let pid = child.id()?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = rss_bytes(pid)?;
    let url = format!("ws://127.0.0.1:{port}/v1/ws");
    let subscribe = super::subscribe_frame(agent_id, false);
    let mut open = Vec::with_capacity(sockets);
    for _ in 0..sockets {
        let Ok((mut socket, _)) = tokio_tungstenite::connect_async(&url).await else {
            break;
        };
        socket.send(subscribe.clone()).await.ok()?;
        let _subscribed = socket.next().await;
        open.push(socket);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_bytes(pid)?;
    let count = open.len();
    drop(open);
    let _ = child.kill().await;
    crate::baseline::remove_database(&path);
    Some((count, (after - before) / count.max(1) as f64))
}
