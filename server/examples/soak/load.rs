//! The load: per agent a runner (runs, tool runs, cancels) and subscribers that join, lag,
//! disconnect and resume over WebSocket and SSE; beside them a stream of bad input.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use app::protocol::{ClientMessage, RunAccepted, RunInfo, ServerMessage};
use app::AgentEvent;
use eventsource_stream::Eventsource;
use futures::{SinkExt, StreamExt};
use serde_json::json;
use tokio::time::{sleep, timeout, Instant};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::check::Record;

/// Live-delivery latency samples kept per minute, at most (the rest are not sampled).
const LATENCY_SAMPLES_PER_MINUTE_MAX: usize = 500_000;
/// Failures kept for the report, at most (all are counted).
const FAILURES_KEPT_MAX: usize = 50;
/// A run that has not ended after this long is a failure: something wedged it.
const RUN_END_WAIT_MS: u64 = 120_000;
/// A subscriber's last catch-up to the log's head may take this long.
const FINAL_CATCH_UP_WAIT_MS: u64 = 60_000;

/// Counters the load adds to and the minute report reads.
#[derive(Default)]
pub struct Metrics {
    pub delivered: AtomicU64,
    pub runs_ended: AtomicU64,
    pub tool_runs: AtomicU64,
    pub cancels: AtomicU64,
    pub sessions: AtomicU64,
    pub lagged_notices: AtomicU64,
    pub bad_inputs_refused: AtomicU64,
    pub failures: AtomicU64,
    pub latencies_ms: Mutex<Vec<f64>>,
    /// Agents of running generations, and the events of the deleted ones' logs.
    pub live_agents: Mutex<Vec<Uuid>>,
    pub retired_events: AtomicU64,
    failures_kept: Mutex<Vec<String>>,
}

impl Metrics {
    pub fn fail(&self, what: String) {
        self.failures.fetch_add(1, Relaxed);
        let mut kept = self.failures_kept.lock().unwrap();
        if kept.len() < FAILURES_KEPT_MAX {
            kept.push(what);
        }
    }

    pub fn failures_kept(&self) -> Vec<String> {
        self.failures_kept.lock().unwrap().clone()
    }

    fn latency(&self, event: &AgentEvent) {
        let age = chrono::Utc::now() - event.created_at;
        let mut samples = self.latencies_ms.lock().unwrap();
        if samples.len() < LATENCY_SAMPLES_PER_MINUTE_MAX {
            samples.push(age.num_microseconds().unwrap_or(i64::MAX) as f64 / 1000.0);
        }
    }
}

/// A small deterministic generator (xorshift), one per task.
pub struct Random(u64);

impl Random {
    pub fn new(seed: u64) -> Random {
        Random(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound.max(1)
    }

    pub fn millis(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(low + self.below(high - low + 1))
    }
}

/// Starts runs on `agent_id` one after another until `stop`: most plain, some with tool calls,
/// some cancelled midway. Every run must end.
pub async fn runner(
    base: String,
    agent_id: Uuid,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
    mut random: Random,
) {
    let http = agentstream_server::http_client::client();
    let mut turn = 0u64;
    while !stop.is_cancelled() {
        turn += 1;
        let tools = random.below(5) == 0;
        let content = if tools {
            "/tools clock; calculator 2*(3+4); slow 1".to_owned()
        } else {
            format!("soak turn {turn}: tell me something")
        };
        let response = http
            .post(format!("{base}/v1/agents/{agent_id}/runs"))
            .json(&json!({ "content": content }))
            .send()
            .await;
        let accepted = match response {
            Ok(response) if response.status() == 202 => response.json::<RunAccepted>().await,
            Ok(response) => {
                metrics.fail(format!("run start answered {}", response.status()));
                sleep(Duration::from_secs(1)).await;
                continue;
            }
            Err(error) => {
                metrics.fail(format!("run start failed: {error}"));
                sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let Ok(RunAccepted { run_id, .. }) = accepted else {
            metrics.fail("run start answered no run id".into());
            continue;
        };
        if tools {
            metrics.tool_runs.fetch_add(1, Relaxed);
        }
        if random.below(8) == 0 {
            sleep(random.millis(20, 600)).await;
            let cancelled = http
                .post(format!("{base}/v1/agents/{agent_id}/messages/cancel"))
                .json(&json!({ "run_ids": [run_id] }))
                .send()
                .await;
            match cancelled {
                Ok(response) if response.status().is_success() => {
                    metrics.cancels.fetch_add(1, Relaxed);
                }
                other => metrics.fail(format!("cancel answered {other:?}")),
            }
        }
        if wait_for_end(&http, &base, run_id).await {
            metrics.runs_ended.fetch_add(1, Relaxed);
        } else {
            metrics.fail(format!("run {run_id} did not end within {RUN_END_WAIT_MS} ms"));
        }
        sleep(random.millis(0, 200)).await;
    }
}

async fn wait_for_end(http: &reqwest::Client, base: &str, run_id: Uuid) -> bool {
    let deadline = Instant::now() + Duration::from_millis(RUN_END_WAIT_MS);
    while Instant::now() < deadline {
        let info = http.get(format!("{base}/v1/runs/{run_id}")).send().await;
        if let Ok(response) = info {
            if let Ok(info) = response.json::<RunInfo>().await {
                if info.status != "running" {
                    return true;
                }
            }
        }
        sleep(Duration::from_millis(100)).await;
    }
    false
}

/// How a subscriber behaves in one connection.
#[derive(Clone, Copy, PartialEq)]
enum Manner {
    /// Reads as fast as frames come; its live deliveries are the latency samples.
    Prompt,
    /// Sleeps after every frame, so the server's buffers fill and it falls behind.
    Lagging,
}

/// Which transport a subscriber uses.
#[derive(Clone, Copy)]
pub enum Transport {
    WebSocket,
    Sse,
}

/// One subscriber of `agent_id` until `stop`: connections of a few seconds, each resuming from
/// the last seq it holds, some lagging, some cancelling the run; then, once `head` says where
/// the log ended, one last catch-up. Returns everything it was sent.
pub async fn subscriber(
    base: String,
    agent_id: Uuid,
    transport: Transport,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
    head: tokio::sync::watch::Receiver<Option<u64>>,
    mut random: Random,
) -> Record {
    let who = Who { base: &base, agent_id, transport, metrics: &metrics };
    let mut record = Record::default();
    // Some join late, and catch up from the store.
    sleep(random.millis(0, 20_000)).await;
    while !stop.is_cancelled() {
        let manner = if random.below(5) == 0 { Manner::Lagging } else { Manner::Prompt };
        let cancel = random.below(10) == 0;
        let until = Instant::now() + random.millis(1_000, 12_000);
        let ended = connection(who, &mut record, manner, cancel, &stop, until, None).await;
        if let Err(error) = ended {
            metrics.fail(format!("subscriber of {agent_id}: {error}"));
        }
        sleep(random.millis(0, 1_500)).await;
    }
    let mut head = head;
    let Ok(final_head) = head.wait_for(Option::is_some).await.map(|seq| seq.unwrap()) else {
        return record;
    };
    let until = Instant::now() + Duration::from_millis(FINAL_CATCH_UP_WAIT_MS);
    let never = CancellationToken::new();
    let last = Some(final_head);
    let ended = connection(who, &mut record, Manner::Prompt, false, &never, until, last).await;
    if let Err(error) = ended {
        metrics.fail(format!("subscriber of {agent_id}, last catch-up: {error}"));
    }
    record
}

/// Who a subscriber is: the same for each of its connections.
#[derive(Clone, Copy)]
struct Who<'a> {
    base: &'a str,
    agent_id: Uuid,
    transport: Transport,
    metrics: &'a Metrics,
}

/// One connection: subscribe from the record's cursor and read until `until`, `stop`, or the
/// cursor reaching `through`.
async fn connection(
    who: Who<'_>,
    record: &mut Record,
    manner: Manner,
    cancel: bool,
    stop: &CancellationToken,
    until: Instant,
    through: Option<u64>,
) -> Result<(), String> {
    let Who { base, agent_id, transport, metrics } = who;
    metrics.sessions.fetch_add(1, Relaxed);
    let since = record.last_seq();
    let done = |record: &Record| through.is_some_and(|through| record.last_seq() >= through);
    let mut lag = Random::new(since + 1);
    let take = |record: &mut Record, event: &AgentEvent, live_after: u64| {
        metrics.delivered.fetch_add(1, Relaxed);
        if manner == Manner::Prompt && event.seq > live_after {
            metrics.latency(event);
        }
        if !record.receive(event.seq, event.id) {
            metrics.fail(format!("{agent_id}: seq {} after {}", event.seq, record.last_seq()));
        }
    };
    match transport {
        Transport::WebSocket => {
            let url = format!("{}/v1/ws", base.replace("http://", "ws://"));
            // A lagging reader's link is narrow (a 4 KiB receive buffer), so the server's
            // buffers for it fill and it falls behind the live stream for real.
            let tcp = tokio::net::TcpSocket::new_v4().map_err(|error| error.to_string())?;
            if manner == Manner::Lagging {
                tcp.set_recv_buffer_size(4096).map_err(|error| error.to_string())?;
            }
            let address = base.trim_start_matches("http://").parse().map_err(|_| "address")?;
            let tcp = tcp.connect(address).await.map_err(|error| format!("connect: {error}"))?;
            let (mut socket, _) = tokio_tungstenite::client_async(&url, tcp)
                .await
                .map_err(|error| format!("upgrade: {error}"))?;
            let subscribe = ClientMessage::Subscribe { agent_id, since, coalesce: false };
            socket
                .send(Message::Text(serde_json::to_string(&subscribe).unwrap().into()))
                .await
                .map_err(|error| format!("subscribe: {error}"))?;
            let mut live_after = u64::MAX;
            let mut stalled = true;
            let mut cancel_at = cancel.then(|| Instant::now() + Duration::from_millis(300));
            while Instant::now() < until && !stop.is_cancelled() && !done(record) {
                if cancel_at.is_some_and(|at| Instant::now() >= at) {
                    cancel_at = None;
                    let message = ClientMessage::Cancel { agent_id, run_ids: None };
                    let text = serde_json::to_string(&message).unwrap();
                    socket.send(Message::Text(text.into())).await.map_err(|e| e.to_string())?;
                }
                let frame = match timeout(Duration::from_millis(250), socket.next()).await {
                    Err(_) => continue,
                    Ok(None) => return Err("the server closed the socket".into()),
                    Ok(Some(Err(error))) => return Err(format!("read: {error}")),
                    Ok(Some(Ok(frame))) => frame,
                };
                let Message::Text(text) = frame else { continue };
                match serde_json::from_str::<ServerMessage>(&text) {
                    Ok(ServerMessage::Subscribed { head_seq, .. }) => live_after = head_seq,
                    Ok(ServerMessage::Events { events, .. }) => {
                        for event in &events {
                            take(record, event, live_after);
                        }
                    }
                    Ok(ServerMessage::Lagged { .. }) => {
                        metrics.lagged_notices.fetch_add(1, Relaxed);
                    }
                    Ok(ServerMessage::Error { code, message, .. }) => {
                        return Err(format!("error frame {code}: {message}"));
                    }
                    Ok(_) => {}
                    Err(error) => return Err(format!("unreadable frame: {error}")),
                }
                if manner == Manner::Lagging {
                    // One stall of seconds (longer than the hub's room holds), then slow reads.
                    let stall = std::mem::take(&mut stalled);
                    sleep(if stall { lag.millis(2_000, 6_000) } else { lag.millis(20, 200) }).await;
                }
            }
            // Half close cleanly, half just go away.
            if lag.below(2) == 0 {
                let _ = timeout(Duration::from_secs(2), socket.close(None)).await;
            }
            Ok(())
        }
        Transport::Sse => {
            let response = agentstream_server::http_client::client()
                .get(format!("{base}/v1/agents/{agent_id}/events/stream"))
                .header("Last-Event-ID", since.to_string())
                .send()
                .await
                .map_err(|error| format!("connect: {error}"))?;
            if !response.status().is_success() {
                return Err(format!("stream answered {}", response.status()));
            }
            // SSE has no "subscribed" frame: what was committed before the connection is
            // catch-up, so the latency samples start a moment in.
            let live_from = Instant::now() + Duration::from_millis(500);
            let mut stream = response.bytes_stream().eventsource();
            while Instant::now() < until && !stop.is_cancelled() && !done(record) {
                let item = match timeout(Duration::from_millis(250), stream.next()).await {
                    Err(_) => continue,
                    Ok(None) => return Err("the server ended the stream".into()),
                    Ok(Some(Err(error))) => return Err(format!("read: {error}")),
                    Ok(Some(Ok(item))) => item,
                };
                // Events are the default `message` type; `lagged` and `error` notices carry no
                // id of their own, but an SSE parser keeps the last one it saw (the spec's last
                // event id), so the type is what tells them apart.
                if item.event != "message" || item.id.is_empty() {
                    continue;
                }
                let event: AgentEvent = serde_json::from_str(&item.data)
                    .map_err(|error| format!("unreadable event: {error}"))?;
                let live_after = if Instant::now() >= live_from { 0 } else { u64::MAX };
                take(record, &event, live_after);
                if manner == Manner::Lagging {
                    sleep(lag.millis(20, 200)).await;
                }
            }
            Ok(())
        }
    }
}

/// Bad input until `stop`, a few times a second: each must be refused with a 4xx or an error
/// frame, and the server must stay up.
pub async fn bad_input(base: String, metrics: Arc<Metrics>, stop: CancellationToken) {
    let http = agentstream_server::http_client::client();
    let mut random = Random::new(0xBAD);
    let ws_url = format!("{}/v1/ws", base.replace("http://", "ws://"));
    while !stop.is_cancelled() {
        let refused = match random.below(6) {
            0 => status(http.post(format!("{base}/v1/agents")).body("{not json")).await,
            1 => {
                let unknown = Uuid::now_v7();
                let request = http
                    .post(format!("{base}/v1/agents/{unknown}/runs"))
                    .json(&json!({ "content": "hello" }));
                status(request).await
            }
            2 => status(http.get(format!("{base}/v1/agents/not-a-uuid/events?since=-3"))).await,
            3 => status(http.post(format!("{base}/v1/agents")).body(vec![b'x'; 200_000])).await,
            4 => ws_refuses(&ws_url, Message::Text("{\"type\":\"subscribe\",".into())).await,
            _ => ws_refuses(&ws_url, Message::Binary(vec![0xff, 0x00, 0x13].into())).await,
        };
        match refused {
            Ok(()) => {
                metrics.bad_inputs_refused.fetch_add(1, Relaxed);
            }
            Err(error) => metrics.fail(format!("bad input: {error}")),
        }
        sleep(random.millis(100, 400)).await;
    }
}

async fn status(request: reqwest::RequestBuilder) -> Result<(), String> {
    let request = request.header("content-type", "application/json");
    match request.send().await {
        Ok(response) if response.status().is_client_error() => Ok(()),
        Ok(response) => Err(format!("answered {}", response.status())),
        Err(error) => Err(format!("no answer: {error}")),
    }
}

/// Sends `frame` and expects an error frame back.
async fn ws_refuses(url: &str, frame: Message) -> Result<(), String> {
    let (mut socket, _) =
        tokio_tungstenite::connect_async(url).await.map_err(|error| format!("connect: {error}"))?;
    socket.send(frame).await.map_err(|error| error.to_string())?;
    let answer = timeout(Duration::from_secs(5), socket.next()).await;
    let _ = socket.close(None).await;
    match answer {
        Ok(Some(Ok(Message::Text(text)))) if text.contains("\"type\":\"error\"") => Ok(()),
        other => Err(format!("no error frame: {other:?}")),
    }
}
