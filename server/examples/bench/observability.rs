//! What observability costs: the paced-stream latency with traces exported over OTLP (to a
//! receiver in this process that takes every batch) against the same with tracing off, one
//! after the other in the same run. (Metrics have no off switch: their atomic adds are in every
//! figure of the run.)

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use super::live;
use super::Sizes;

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

pub async fn cost(directory: &Path, sizes: &Sizes) {
    let (endpoint, received) = sink().await;
    let mut figures = Vec::new();
    for (name, otlp) in [("off", None), ("on", Some(endpoint))] {
        let path = directory.join(format!("traces-{name}.db"));
        super::remove_database(&path);
        let url = format!("sqlite://{}", path.display());
        let server =
            live::Server::start_traced(&url, sizes.stream_delay_ms, sizes.stream_events, otlp)
                .await;
        let latency = live::stream_latency(&server, sizes).await;
        server.stop().await;
        super::remove_database(&path);
        println!(
            "{:<66} {:>12.1} ms / {:.1} ms / {:.1} ms",
            format!("  same streams, traces {name}: event made -> WS frame p50/p99/max"),
            latency.0,
            latency.1,
            latency.2
        );
        figures.push(latency);
    }
    let change = |off: f64, on: f64| (on - off) / off.max(0.001) * 100.0;
    println!(
        "{:<66} {:>+12.1} % / {:+.1} %  ({} KB of spans exported)",
        "  traces on vs off: p50 / p99",
        change(figures[0].0, figures[1].0),
        change(figures[0].1, figures[1].1),
        received.load(Relaxed) / 1024
    );
}
