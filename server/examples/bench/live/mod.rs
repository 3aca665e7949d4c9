//! The real server over real sockets: the server in this process, and what its clients measure.

use crate::requests::RequestExt;
use std::time::Duration;

use agentstream_server::config::Config;
use app::protocol::{frame::LogFrame, ClientMessage};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

use super::Sizes;

mod readers;
mod resume;

pub use readers::{history_page, idle_memory, slow_reader};
pub use resume::{resume_gap, resume_gap_coalesced, rounds as resume_rounds};

pub struct Server {
    pub base: String,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Server {
    /// The server in this process on port 0 on `database_url`, with the scripted provider
    /// paced as asked.
    pub async fn start(database_url: &str, token_delay_ms: u64, reply_tokens: u32) -> Server {
        Server::start_traced(database_url, token_delay_ms, reply_tokens, None).await
    }

    /// [`Server::start`], exporting traces to `otlp_traces_endpoint` when given.
    pub async fn start_traced(
        database_url: &str,
        token_delay_ms: u64,
        reply_tokens: u32,
        otlp_traces_endpoint: Option<String>,
    ) -> Server {
        let mut config = Config {
            database_url: database_url.to_owned(),
            otlp_traces_endpoint,
            ..Config::default()
        };
        config.scripted.token_delay_ms = token_delay_ms;
        config.scripted.reply_tokens = reply_tokens;
        config.limits.ws_connections_max = 20_000;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let options = leptos::prelude::get_configuration(None).unwrap().leptos_options;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(agentstream_server::serve(listener, config, options, async {
            let _ = stopped.await;
        }));
        let http = agentstream_server::http_client::client();
        while http.get(format!("{base}/healthz")).send().await.is_err() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Server { base, _stop: stop }
    }

    /// Stops the server and waits while it lets go of its database (the next server, or
    /// the measurement, opens the same file).
    pub async fn stop(self) {
        drop(self);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    pub async fn agent(&self) -> Uuid {
        let body: Value = agentstream_server::http_client::client()
            .post(format!("{}/v1/agents", self.base))
            .json(&json!({ "name": "bench" }))
            .answer()
            .await;
        Uuid::parse_str(body["id"].as_str().unwrap()).unwrap()
    }

    /// Starts a run of `agent_id` for `content`; its id.
    pub async fn run(&self, agent_id: Uuid, content: &str) -> Uuid {
        let response = agentstream_server::http_client::client()
            .post(format!("{}/v1/agents/{agent_id}/runs", self.base))
            .json(&json!({ "content": content }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 202);
        let accepted: Value = response.json().await.unwrap();
        Uuid::parse_str(accepted["run_id"].as_str().unwrap()).unwrap()
    }

    pub fn ws_url(&self) -> String {
        format!("{}/v1/ws", self.base.replace("http://", "ws://"))
    }

    /// GETs `path` with `http` (a caller that times keeps its connections), read as JSON.
    pub async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        http: &reqwest::Client,
        path: &str,
    ) -> T {
        let response = http.get(format!("{}{path}", self.base)).send().await;
        response.unwrap().json().await.unwrap()
    }
}

/// The frame that subscribes to `agent_id` from seq 0.
pub fn subscribe_frame(agent_id: Uuid, coalesce: bool) -> Message {
    let subscribe = ClientMessage::Subscribe { agent_id, since: 0, coalesce };
    Message::Text(serde_json::to_string(&subscribe).unwrap().into())
}

pub fn percentiles(mut samples: Vec<f64>) -> (f64, f64, f64) {
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |p: f64| {
        samples.get(((samples.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(0.0)
    };
    (at(0.5), at(0.99), at(1.0))
}

/// `streams` agents, each with a subscribed WebSocket client, each running a paced run at
/// once. Latency: the event's `created_at` (stamped when the provider's event reached the
/// run) to the moment its frame is read by the client.
pub async fn stream_latency(server: &Server, sizes: &Sizes) -> (f64, f64, f64) {
    let mut clients = Vec::new();
    let mut agents = Vec::new();
    for _ in 0..sizes.streams {
        let agent_id = server.agent().await;
        clients.push(subscriber(server, agent_id).await);
        agents.push(agent_id);
    }
    for &agent_id in &agents {
        server.run(agent_id, "stream at a steady pace").await;
    }
    let mut samples = Vec::new();
    for client in clients {
        samples.extend(client.await.unwrap());
    }
    percentiles(samples)
}

pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A WebSocket to `server` and the frame that subscribes it to `agent_id` from seq 0, not sent
/// yet (a caller may time from the send).
pub async fn subscription(server: &Server, agent_id: Uuid, coalesce: bool) -> (Socket, Message) {
    let (socket, _) = tokio_tungstenite::connect_async(server.ws_url()).await.unwrap();
    (socket, subscribe_frame(agent_id, coalesce))
}

/// A WebSocket client subscribed to `agent_id` that reads until the run ends; per event, the
/// milliseconds from when it was made — `metadata.sent_at_ns` when a producer stamped it,
/// else its `created_at` — to the moment its frame is read.
pub async fn subscriber(server: &Server, agent_id: Uuid) -> tokio::task::JoinHandle<Vec<f64>> {
    let (mut socket, subscribe) = subscription(server, agent_id, false).await;
    socket.send(subscribe).await.unwrap();
    tokio::spawn(async move {
        let mut latencies = Vec::new();
        while let Some(Ok(frame)) = socket.next().await {
            let Message::Text(text) = frame else { continue };
            let now = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0);
            let Ok(LogFrame::Events(events)) = LogFrame::parse(text.as_str()) else {
                continue;
            };
            let mut ended = false;
            for event in events {
                let made = event
                    .metadata
                    .get("sent_at_ns")
                    .and_then(Value::as_i64)
                    .unwrap_or_else(|| event.created_at.timestamp_nanos_opt().unwrap_or(0));
                latencies.push((now - made) as f64 / 1e6);
                ended |= event.kind.is_run_end();
            }
            if ended {
                break;
            }
        }
        latencies
    })
}
