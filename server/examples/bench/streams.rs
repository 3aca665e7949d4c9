//! Durable streams (`/v1/streams/…`) beside the native surfaces, in one run on the same server:
//! appends/s of general streams (one message per request, and JSON batches), catch-up read
//! throughput, and the latency of a long-poll and of SSE from an append's request to the
//! reader's answer — next to our own loop's event made → WebSocket frame.

use std::path::Path;
use std::time::Instant;

use serde_json::{json, Value};

use super::live::{self, percentiles, Server};
use super::stream_client::{self, append, create};
use super::Sizes;

/// Messages per JSON append in the batched figure.
const BATCH_MESSAGES: usize = 64;

fn stream_url(server: &Server, path: &str) -> String {
    format!("{}/v1/streams/{path}", server.base)
}

/// Messages/s of `writers` streams each appended `appends` times with `per_append` messages.
async fn append_rate(server: &Server, writers: u64, appends: u64, per_append: usize) -> f64 {
    let http = agentstream_server::http_client::client();
    let mut urls = Vec::new();
    for writer in 0..writers {
        let url = stream_url(server, &format!("bench/append-{per_append}-{writer}"));
        create(&http, &url).await;
        urls.push(url);
    }
    let started = Instant::now();
    let tasks: Vec<_> = urls
        .into_iter()
        .map(|url| {
            let http = http.clone();
            tokio::spawn(async move {
                for index in 0..appends {
                    let messages: Vec<Value> = (0..per_append)
                        .map(|k| json!({ "n": index, "k": k, "text": "a token of a reply" }))
                        .collect();
                    let body = if per_append == 1 {
                        messages[0].to_string()
                    } else {
                        Value::Array(messages).to_string()
                    };
                    append(&http, &url, body).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    (writers * appends * per_append as u64) as f64 / started.elapsed().as_secs_f64()
}

/// Messages/s of a catch-up read of `messages` messages, page by page.
async fn read_rate(server: &Server, messages: u64) -> f64 {
    let http = agentstream_server::http_client::client();
    let url = stream_url(server, "bench/read");
    create(&http, &url).await;
    let batch = BATCH_MESSAGES as u64;
    for start in (0..messages).step_by(BATCH_MESSAGES) {
        let body: Vec<Value> = (start..(start + batch).min(messages))
            .map(|n| json!({ "n": n, "text": "a token of a reply" }))
            .collect();
        append(&http, &url, Value::Array(body).to_string()).await;
    }
    let started = Instant::now();
    let mut offset = "-1".to_owned();
    let mut read = 0;
    loop {
        let response = http.get(format!("{url}?offset={offset}")).send().await.unwrap();
        let next = response.headers()["stream-next-offset"].to_str().unwrap().to_owned();
        let up_to_date = response.headers().contains_key("stream-up-to-date");
        let page: Vec<Value> = response.json().await.unwrap();
        read += page.len() as u64;
        offset = next;
        if up_to_date {
            break;
        }
    }
    assert_eq!(read, messages);
    read as f64 / started.elapsed().as_secs_f64()
}

/// Append request sent → long-poll answered: p50, p99 and max in ms of `samples`.
async fn long_poll_latency(server: &Server, samples: usize) -> (f64, f64, f64) {
    let url = stream_url(server, "bench/long-poll");
    percentiles(stream_client::long_poll_latencies(&url, samples).await)
}

/// Append request sent → SSE data event read: p50, p99 and max in ms of `samples`.
async fn sse_latency(server: &Server, samples: usize) -> (f64, f64, f64) {
    let url = stream_url(server, "bench/sse");
    percentiles(stream_client::sse_latencies(&url, samples).await)
}

pub async fn measure(directory: &Path, sizes: &Sizes) {
    let path = directory.join("streams.db");
    crate::baseline::remove_database(&path);
    let url = format!("sqlite://{}", path.display());
    let writers = sizes.producer_agents;
    let appends = (sizes.producer_events / BATCH_MESSAGES as u64).max(4);
    let server = Server::start(&url, sizes.stream_delay_ms, sizes.stream_events).await;
    let single = append_rate(&server, writers, appends, 1).await;
    let batched = append_rate(&server, writers, appends, BATCH_MESSAGES).await;
    let read = read_rate(&server, sizes.producer_events).await;
    let samples = (sizes.streams as usize).max(10);
    let long_poll = long_poll_latency(&server, samples).await;
    let sse = sse_latency(&server, samples).await;
    let ours = live::stream_latency(&server, sizes).await;
    server.stop().await;
    crate::baseline::remove_database(&path);
    let row = |label: String, value: f64, unit: &str| println!("{label:<66} {value:>12.0} {unit}");
    row(
        format!("durable streams: {writers} streams × {appends} appends of 1 message"),
        single,
        "messages/s",
    );
    row(
        format!("durable streams: {writers} streams × {appends} appends of {BATCH_MESSAGES}"),
        batched,
        "messages/s",
    );
    row(
        format!("durable streams: catch-up read of {} messages", sizes.producer_events),
        read,
        "messages/s",
    );
    let latency = |label: &str, (p50, p99, max): (f64, f64, f64)| {
        println!("{label:<66} {p50:>12.1} ms / {p99:.1} ms / {max:.1} ms");
    };
    latency(
        &format!("durable streams: append → long-poll answer p50/p99/max ({samples})"),
        long_poll,
    );
    latency(&format!("durable streams: append → SSE data event p50/p99/max ({samples})"), sse);
    latency("  beside: our own loop on the same server, event made → WS frame", ours);
}
