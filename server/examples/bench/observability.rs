//! What observability costs, measured as alternating rounds (off, on, on, off, off, on …) so
//! that neither side always runs first on a cold page cache or second on a warm one; each side's
//! figure is the median of its rounds.
//!
//! - Metrics: the engine's events/s with the writer counting into the server's metrics against
//!   the same engine uncounted.
//! - Traces: the paced-stream latency with traces exported over OTLP (to a receiver in this
//!   process that takes every batch) against the same with tracing off.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use agentstream_server::store::sqlite::SqliteStore;
use agentstream_server::store::Store;

use super::live;
use super::Sizes;

/// Rounds per side; odd so the median is one round's figure.
const COST_ROUNDS_PER_SIDE: usize = 5;

/// An OTLP/HTTP receiver that answers every `POST /v1/traces` and counts the bytes.
async fn sink() -> (String, Arc<AtomicU64>) {
    let received = Arc::new(AtomicU64::new(0));
    let router = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post({
            let received = received.clone();
            move |body: axum::body::Bytes| {
                received.fetch_add(body.len() as u64, Relaxed);
                async { axum::http::StatusCode::OK }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (format!("http://{address}/v1/traces"), received)
}

/// The order of the rounds: `false` is off, `true` is on, balanced as ABBA ABBA ….
fn rounds() -> impl Iterator<Item = bool> {
    (0..COST_ROUNDS_PER_SIDE * 2).map(|round| matches!(round % 4, 1 | 2))
}

fn median(mut figures: Vec<f64>) -> f64 {
    figures.sort_by(f64::total_cmp);
    figures[figures.len() / 2]
}

/// The process's CPU time so far (user + system, all threads) in seconds, from
/// `/proc/self/stat` (clock ticks of 10 ms). CPU per event is the steadier figure of cost: wall
/// rates on this disk swing ±20 % between identical rounds, CPU time much less.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |index: usize| fields.get(index).and_then(|f| f.parse::<f64>().ok());
    match (ticks(11), ticks(12)) {
        (Some(user), Some(system)) => (user + system) / 100.0,
        _ => f64::NAN,
    }
}

/// Each round's figure, in the order run, for the reader to see the spread.
fn listed(figures: &[f64], decimals: usize) -> String {
    let figures: Vec<String> = figures.iter().map(|f| format!("{f:.decimals$}")).collect();
    figures.join(" ")
}

fn change(off: f64, on: f64) -> f64 {
    (on - off) / off.max(0.001) * 100.0
}

/// The engine's events/s uncounted and counted; returns (off, on) medians.
pub async fn metrics(directory: &Path, sizes: &Sizes) -> (f64, f64) {
    let path = directory.join("counted.db");
    let (mut off, mut on) = (Vec::new(), Vec::new());
    let (mut cpu_off, mut cpu_on) = (Vec::new(), Vec::new());
    let events = (sizes.agents * sizes.events_per_agent) as f64;
    for counting in rounds() {
        crate::baseline::remove_database(&path);
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&format!("sqlite://{}", path.display())).await.unwrap());
        let cpu = cpu_seconds();
        let figures =
            crate::engine::engine_counting(store, sizes.agents, sizes.events_per_agent, counting)
                .await;
        let cpu_per_event_us = (cpu_seconds() - cpu) / events * 1e6;
        crate::baseline::remove_database(&path);
        crate::baseline::settle_disk();
        if counting { &mut on } else { &mut off }.push(figures.events_per_second);
        if counting { &mut cpu_on } else { &mut cpu_off }.push(cpu_per_event_us);
    }
    let rounds = on.len();
    println!(
        "{:<66} {} / {}",
        "  engine rounds, uncounted / counted (events/s)",
        listed(&off, 0),
        listed(&on, 0)
    );
    let (off, on) = (median(off), median(on));
    println!(
        "{:<66} {:>12.0} events/s ({:+.1} %, median of {rounds} alternating rounds each)",
        "  the same, metrics counted",
        on,
        change(off, on),
    );
    let (cpu_off, cpu_on) = (median(cpu_off), median(cpu_on));
    println!(
        "{:<66} {:>12.2} µs / {:.2} µs ({:+.1} %)",
        "  engine CPU per event (all threads), uncounted / counted",
        cpu_off,
        cpu_on,
        change(cpu_off, cpu_on),
    );
    (off, on)
}

/// The paced streams' latency with traces off and on.
pub async fn traces(directory: &Path, sizes: &Sizes) {
    let (endpoint, received) = sink().await;
    let (mut off, mut on) = (Vec::new(), Vec::new());
    let (mut cpu_off, mut cpu_on) = (Vec::new(), Vec::new());
    let events = (sizes.streams * u64::from(sizes.stream_events)) as f64;
    for traced in rounds() {
        let path = directory.join("traces.db");
        crate::baseline::remove_database(&path);
        let url = format!("sqlite://{}", path.display());
        let otlp = traced.then(|| endpoint.clone());
        let server =
            live::Server::start_traced(&url, sizes.stream_delay_ms, sizes.stream_events, otlp)
                .await;
        let cpu = cpu_seconds();
        let latency = live::stream_latency(&server, sizes).await;
        let cpu_per_event_us = (cpu_seconds() - cpu) / events * 1e6;
        server.stop().await;
        crate::baseline::remove_database(&path);
        if traced { &mut on } else { &mut off }.push(latency);
        if traced { &mut cpu_on } else { &mut cpu_off }.push(cpu_per_event_us);
    }
    let rounds = on.len();
    let p99s = |figures: &[(f64, f64, f64)]| figures.iter().map(|f| f.1).collect::<Vec<_>>();
    println!(
        "{:<66} {} / {}",
        "  stream rounds' p99, traces off / on (ms)",
        listed(&p99s(&off), 1),
        listed(&p99s(&on), 1)
    );
    let side = |figures: &[(f64, f64, f64)]| {
        (
            median(figures.iter().map(|f| f.0).collect()),
            median(figures.iter().map(|f| f.1).collect()),
            median(figures.iter().map(|f| f.2).collect()),
        )
    };
    let (off, on) = (side(&off), side(&on));
    for (name, figures) in [("off", off), ("on", on)] {
        println!(
            "{:<66} {:>12.1} ms / {:.1} ms / {:.1} ms",
            format!("  same streams, traces {name}: event made -> WS frame p50/p99/max"),
            figures.0,
            figures.1,
            figures.2
        );
    }
    println!(
        "{:<66} {:>+12.1} % / {:+.1} %  (medians of {rounds} alternating rounds; {} KB of spans)",
        "  traces on vs off: p50 / p99",
        change(off.0, on.0),
        change(off.1, on.1),
        received.load(Relaxed) / 1024
    );
    let (cpu_off, cpu_on) = (median(cpu_off), median(cpu_on));
    println!(
        "{:<66} {:>12.1} µs / {:.1} µs ({:+.1} %)",
        "  streams' CPU per event (server + clients), traces off / on",
        cpu_off,
        cpu_on,
        change(cpu_off, cpu_on),
    );
}
