//! The producer API beside the built-in loop, in one run on the same machine: events/s of
//! agents written as fast as they go (a producer's batches of [`BENCH_BATCH_EVENTS`] against our
//! scripted provider unpaced), and the latency of paced streams — a producer's append (the
//! moment its request is sent) to the subscriber's WebSocket frame, against our loop's event
//! made → frame on the same server.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use uuid::Uuid;

use super::live::{self, percentiles, subscriber, Server};
use super::Sizes;

/// Text deltas per producer request when it writes as fast as it can.
pub const BENCH_BATCH_EVENTS: u64 = 64;

const MESSAGE: &str = "0190d0c0-0000-7000-8000-0000000000b1";

fn nanos_now() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
}

/// One producer request; panics on anything but 200 (the bench measures the happy path).
async fn append(http: &reqwest::Client, base: &str, agent_id: Uuid, seq: u64, batch: Value) {
    let response = http
        .post(format!("{base}/v1/agents/{agent_id}/produce"))
        .header("Producer-Id", "bench")
        .header("Producer-Epoch", "0")
        .header("Producer-Seq", seq.to_string())
        .json(&batch)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", response.text().await.unwrap());
}

/// The producer's first batch (seq 0): its run's start.
async fn start_run(http: &reqwest::Client, base: &str, agent_id: Uuid) {
    append(http, base, agent_id, 0, json!([{ "kind": "run_started" }])).await;
}

fn text(piece: &str) -> Value {
    json!({
        "kind": "text", "message_id": MESSAGE, "delta": piece, "delta_action": "append",
        "metadata": { "sent_at_ns": nanos_now() },
    })
}

/// Events/s of `agents` producers each writing one run of `events` text deltas in batches.
async fn producer_rate(server: &Server, agents: u64, events: u64) -> f64 {
    let mut agent_ids = Vec::new();
    for _ in 0..agents {
        agent_ids.push(server.agent().await);
    }
    let started = Instant::now();
    let producers: Vec<_> = agent_ids
        .into_iter()
        .map(|agent_id| {
            let base = server.base.clone();
            tokio::spawn(async move {
                let http = agentstream_server::http_client::client();
                start_run(&http, &base, agent_id).await;
                let mut seq = 1;
                let mut sent = 0;
                while sent < events {
                    let count = BENCH_BATCH_EVENTS.min(events - sent);
                    let batch: Vec<Value> = (0..count).map(|_| text("tok ")).collect();
                    append(&http, &base, agent_id, seq, Value::Array(batch)).await;
                    seq += 1;
                    sent += count;
                }
                append(&http, &base, agent_id, seq, json!([{ "kind": "run_completed" }])).await;
            })
        })
        .collect();
    for producer in producers {
        producer.await.unwrap();
    }
    (agents * (events + 2)) as f64 / started.elapsed().as_secs_f64()
}

/// Events/s of `agents` runs of our own loop, unpaced, `events` tokens each (this server's
/// scripted replies are that long), timed to the last run's end on its subscriber.
async fn builtin_rate(server: &Server, agents: u64) -> f64 {
    let mut agent_ids = Vec::new();
    let mut subscribers = Vec::new();
    for _ in 0..agents {
        let agent_id = server.agent().await;
        subscribers.push(subscriber(server, agent_id).await);
        agent_ids.push(agent_id);
    }
    let started = Instant::now();
    for &agent_id in &agent_ids {
        server.run(agent_id, "as fast as you can").await;
    }
    let mut events = 0;
    for subscriber in subscribers {
        events += subscriber.await.unwrap().len();
    }
    events as f64 / started.elapsed().as_secs_f64()
}

/// `sizes.streams` producers, each appending one event per request every
/// `sizes.stream_delay_ms`, read by a subscriber each: append → frame.
async fn producer_latency(server: &Server, sizes: &Sizes) -> (f64, f64, f64) {
    let mut runs = Vec::new();
    for _ in 0..sizes.streams {
        let agent_id = server.agent().await;
        let reader = subscriber(server, agent_id).await;
        let base = server.base.clone();
        let (events, delay) = (sizes.stream_events, sizes.stream_delay_ms);
        runs.push((
            reader,
            tokio::spawn(async move {
                let http = agentstream_server::http_client::client();
                let mut ticks = tokio::time::interval(Duration::from_millis(delay));
                start_run(&http, &base, agent_id).await;
                for seq in 1..=u64::from(events) {
                    ticks.tick().await;
                    append(&http, &base, agent_id, seq, json!([text("tok ")])).await;
                }
                let end =
                    json!([{ "kind": "run_completed", "metadata": { "sent_at_ns": nanos_now() } }]);
                append(&http, &base, agent_id, u64::from(events) + 1, end).await;
            }),
        ));
    }
    let mut samples = Vec::new();
    for (reader, producer) in runs {
        producer.await.unwrap();
        samples.extend(reader.await.unwrap());
    }
    percentiles(samples)
}

pub async fn measure(directory: &Path, sizes: &Sizes) {
    let path = directory.join("producer.db");
    crate::baseline::remove_database(&path);
    let url = format!("sqlite://{}", path.display());
    let agents = sizes.producer_agents;
    let events = sizes.producer_events;
    {
        let server = Server::start(&url, 0, events as u32).await;
        let builtin = builtin_rate(&server, agents).await;
        let produced = producer_rate(&server, agents, events).await;
        server.stop().await;
        println!(
            "{:<66} {:>12.0} events/s",
            format!(
                "producer API: {agents} agents × {events} events, {BENCH_BATCH_EVENTS} per request"
            ),
            produced
        );
        println!(
            "{:<66} {:>12.0} events/s",
            "  beside: our own loop, the same agents and events, unpaced", builtin
        );
    }
    crate::baseline::remove_database(&path);
    {
        let server = Server::start(&url, sizes.stream_delay_ms, sizes.stream_events).await;
        let ours = live::stream_latency(&server, sizes).await;
        let produced = producer_latency(&server, sizes).await;
        server.stop().await;
        println!(
            "{:<66} {:>12.1} ms / {:.1} ms / {:.1} ms",
            format!("producer API: {} paced streams, append → WS frame p50/p99/max", sizes.streams),
            produced.0,
            produced.1,
            produced.2
        );
        println!(
            "{:<66} {:>12.1} ms / {:.1} ms / {:.1} ms",
            "  beside: our own loop on the same server, event made → WS frame",
            ours.0,
            ours.1,
            ours.2
        );
    }
    crate::baseline::remove_database(&path);
}
