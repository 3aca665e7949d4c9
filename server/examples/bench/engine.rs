//! The engine alone: agents appending through the writer with subscribers on the hub.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentstream_server::delivery::hub::Hub;
use agentstream_server::delivery::writer::{self, Writer};
use agentstream_server::store::{EventDraft, NewAgent, Store};
use app::{DeltaAction, EventKind};
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

/// Appends one producer keeps unacknowledged, as a run does (`RUN_APPENDS_IN_FLIGHT_MAX`).
const PRODUCER_IN_FLIGHT_MAX: usize = 64;

pub(crate) struct EngineFigures {
    pub(crate) events_per_second: f64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) max_ms: f64,
}

impl EngineFigures {
    /// Throughput, latency, and the ratio to the same backend's per-event baseline.
    pub(crate) fn print(&self, label: &str, agents: u64, baseline: f64) {
        println!(
            "{:<66} {:>12.0} events/s",
            format!("{label}engine: persisted + broadcast, {agents} agents at once"),
            self.events_per_second
        );
        println!(
            "{:<66} {:>12.1} ms / {:.1} ms / {:.1} ms",
            "  submit → received by a subscriber: p50 / p99 / max",
            self.p50_ms,
            self.p99_ms,
            self.max_ms
        );
        println!(
            "{:<66} {:>12.0} x",
            format!("{label}engine / {label}baseline"),
            self.events_per_second / baseline
        );
    }

    /// One line: throughput and latency (the `--engine` rounds).
    pub(crate) fn print_round(&self, label: &str, agents: u64) {
        println!(
            "{:<50} {:>10.0} events/s, p50 / p99 {:.1} / {:.1} ms",
            format!("{label}{agents} agents at once"),
            self.events_per_second,
            self.p50_ms,
            self.p99_ms
        );
    }
}

/// The real store, writer and hub: `agents` producers each append `events_per_agent` token
/// deltas, pipelined as runs do, while one subscriber per agent receives them from the hub.
/// The clock stops when every subscriber has its agent's last event.
pub(crate) async fn engine(
    store: Arc<dyn Store>,
    agents: u64,
    events_per_agent: u64,
) -> EngineFigures {
    engine_counting(store, agents, events_per_agent, false).await
}

/// [`engine`], with the writer counting into the server's metrics when `counting`.
pub(crate) async fn engine_counting(
    store: Arc<dyn Store>,
    agents: u64,
    events_per_agent: u64,
    counting: bool,
) -> EngineFigures {
    let hub = Arc::new(Hub::new(agentstream_server::limits::HUB_ROOM_BATCHES_MAX_DEFAULT));
    let writer = if counting {
        Writer::spawn_observed(
            store.clone(),
            hub.clone(),
            agentstream_server::limits::WRITER_COMMIT_RETRIES_MAX_DEFAULT,
            Arc::new(agentstream_server::metrics::Metrics::new()),
        )
    } else {
        Writer::spawn(store.clone(), hub.clone())
    };
    let mut agent_ids = Vec::new();
    for index in 0..agents {
        let agent = store
            .create_agent(NewAgent { name: format!("bench-{index}"), ..NewAgent::default() })
            .await
            .unwrap();
        agent_ids.push(agent.id);
    }
    // Submit times by (agent, seq), read by the subscribers to measure latency.
    let submitted: Arc<Vec<std::sync::Mutex<Vec<Instant>>>> =
        Arc::new((0..agents).map(|_| std::sync::Mutex::new(Vec::new())).collect());
    let mut subscribers = Vec::new();
    for (index, &agent_id) in agent_ids.iter().enumerate() {
        let mut live = hub.subscribe(agent_id);
        let submitted = submitted.clone();
        subscribers.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(events_per_agent as usize);
            let mut last = 0u64;
            while last < events_per_agent {
                match live.recv().await {
                    Ok(batch) => {
                        let now = Instant::now();
                        let sent = submitted[index].lock().unwrap();
                        for event in batch.iter() {
                            if let Some(at) = sent.get(event.seq as usize - 1) {
                                latencies.push(now.duration_since(*at));
                            }
                            last = event.seq;
                        }
                    }
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => break,
                }
            }
            latencies
        }));
    }
    let started = Instant::now();
    let mut producers = Vec::new();
    for (index, &agent_id) in agent_ids.iter().enumerate() {
        let writer = writer.clone();
        let submitted = submitted.clone();
        producers.push(tokio::spawn(async move {
            let message_id = Uuid::new_v4();
            let mut in_flight = std::collections::VecDeque::new();
            for _ in 0..events_per_agent {
                if in_flight.len() >= PRODUCER_IN_FLIGHT_MAX {
                    writer::wait(in_flight.pop_front().unwrap()).await.unwrap();
                }
                let mut draft = EventDraft::new(EventKind::Text);
                draft.message_id = Some(message_id);
                draft.delta = Some(serde_json::Value::String("token ".into()));
                draft.delta_path = Some("text".into());
                draft.delta_action = Some(DeltaAction::Append);
                submitted[index].lock().unwrap().push(Instant::now());
                in_flight.push_back(writer.submit(agent_id, vec![draft]).await.unwrap());
            }
            for receipt in in_flight {
                writer::wait(receipt).await.unwrap();
            }
        }));
    }
    for producer in producers {
        producer.await.unwrap();
    }
    let mut latencies: Vec<Duration> = Vec::new();
    for subscriber in subscribers {
        latencies.extend(subscriber.await.unwrap());
    }
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    let percentile = |p: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * p).round() as usize)
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    let figures = EngineFigures {
        events_per_second: (agents * events_per_agent) as f64 / elapsed.as_secs_f64(),
        p50_ms: percentile(0.50),
        p99_ms: percentile(0.99),
        max_ms: percentile(1.0),
    };
    drop(writer);
    figures
}
