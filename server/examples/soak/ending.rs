//! What the soak adds around the load: clients that reconnect in a loop or never read, and the
//! end — the load stopped and its agents deleted, the server's tasks and hub rooms must come
//! back to where they were before the load, and SIGTERM must end the process within the drain.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::time::{sleep, Instant};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::load::{Metrics, Random};

/// How long after the load ends the tasks and rooms may take to come back.
const SETTLE_WAIT_MS: u64 = 20_000;
/// The server's drain at SIGTERM (`AGENTSTREAM_SHUTDOWN_DRAIN_MS`, as the soak starts it) and
/// how long past it the process may take to be gone.
pub const SHUTDOWN_DRAIN_MS: u64 = 3_000;
const EXIT_GRACE_MS: u64 = 5_000;

/// Connections the hostile clients opened.
#[derive(Default)]
pub struct Hostile {
    pub reconnects: AtomicU64,
    pub silent: AtomicU64,
}

/// The server's own count of what it holds (`/v1/stats`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Held {
    pub tasks: u64,
    pub rooms: u64,
}

pub async fn held(base: &str) -> Option<Held> {
    let stats: Value = reqwest::get(format!("{base}/v1/stats")).await.ok()?.json().await.ok()?;
    Some(Held { tasks: stats["tasks_alive"].as_u64()?, rooms: stats["hub_rooms"].as_u64()? })
}

/// Until `stop`: a client that opens a stream of a live agent (SSE or WebSocket, at random),
/// reads a little or nothing and drops it, again and again — an `EventSource` in a reconnect
/// loop, a tab closed mid-stream — and now and then one that asks for the whole log and reads
/// nothing for seconds.
pub async fn hostile(
    base: String,
    metrics: Arc<Metrics>,
    hostile: Arc<Hostile>,
    stop: CancellationToken,
    mut random: Random,
) {
    let http = agentstream_server::http_client::client();
    let ws_url = format!("{}/v1/ws", base.replace("http://", "ws://"));
    while !stop.is_cancelled() {
        let agent = {
            let live = metrics.live_agents.lock().unwrap();
            (!live.is_empty()).then(|| live[random.below(live.len() as u64) as usize])
        };
        let Some(agent_id) = agent else {
            sleep(Duration::from_millis(100)).await;
            continue;
        };
        match random.below(10) {
            0 => {
                // Asks for the whole log and reads nothing, then vanishes.
                let address = base.trim_start_matches("http://");
                if let Ok(mut socket) = tokio::net::TcpStream::connect(address).await {
                    let request = format!(
                        "GET /v1/agents/{agent_id}/events/stream?since=0 HTTP/1.1\r\nHost: {address}\r\n\r\n"
                    );
                    let _ = socket.write_all(request.as_bytes()).await;
                    hostile.silent.fetch_add(1, Relaxed);
                    tokio::select! {
                        () = sleep(random.millis(1_000, 5_000)) => {}
                        () = stop.cancelled() => {}
                    }
                }
            }
            1..=5 => {
                let response = http
                    .get(format!("{base}/v1/agents/{agent_id}/events/stream?since=0"))
                    .send()
                    .await;
                if let Ok(response) = response {
                    let mut body = response.bytes_stream();
                    for _ in 0..random.below(4) {
                        let _ = tokio::time::timeout(Duration::from_millis(200), body.next()).await;
                    }
                }
                hostile.reconnects.fetch_add(1, Relaxed);
            }
            _ => {
                if let Ok((mut socket, _)) = tokio_tungstenite::connect_async(&ws_url).await {
                    let subscribe = json!({"type": "subscribe", "agent_id": agent_id, "since": 0});
                    let _ = socket.send(Message::Text(subscribe.to_string().into())).await;
                    for _ in 0..random.below(4) {
                        let _ =
                            tokio::time::timeout(Duration::from_millis(200), socket.next()).await;
                    }
                    // Dropped without a close frame: the peer just goes.
                }
                hostile.reconnects.fetch_add(1, Relaxed);
            }
        }
        sleep(random.millis(10, 150)).await;
    }
}

/// Waits until the server holds no more tasks and rooms than `before` (or the wait runs out);
/// returns what it holds then.
pub async fn settle(base: &str, before: Held) -> Option<Held> {
    let deadline = Instant::now() + Duration::from_millis(SETTLE_WAIT_MS);
    loop {
        let now = held(base).await;
        let back = now.is_some_and(|now| now.tasks <= before.tasks && now.rooms <= before.rooms);
        if back || Instant::now() >= deadline {
            return now;
        }
        sleep(Duration::from_millis(250)).await;
    }
}

/// SIGTERM, with a client holding a stream it never reads: how long the process took to exit,
/// and whether it exited cleanly; `None` when it was still running past the drain and grace.
pub async fn sigterm(
    base: &str,
    agent_id: Option<uuid::Uuid>,
    child: &mut tokio::process::Child,
) -> Option<(Duration, bool)> {
    let address = base.trim_start_matches("http://").to_owned();
    // Kept open (unread) through the shutdown.
    let _silent = match agent_id {
        Some(agent_id) => {
            let mut socket = tokio::net::TcpStream::connect(&address).await.ok();
            if let Some(socket) = socket.as_mut() {
                let request = format!(
                    "GET /v1/agents/{agent_id}/events/stream?since=0 HTTP/1.1\r\nHost: {address}\r\n\r\n"
                );
                let _ = socket.write_all(request.as_bytes()).await;
            }
            socket
        }
        None => None,
    };
    sleep(Duration::from_millis(500)).await;
    let pid = child.id()?;
    let signalled = Instant::now();
    std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().ok()?;
    let wait = Duration::from_millis(SHUTDOWN_DRAIN_MS + EXIT_GRACE_MS);
    let status = tokio::time::timeout(wait, child.wait()).await.ok()?.ok()?;
    Some((signalled.elapsed(), status.success()))
}
