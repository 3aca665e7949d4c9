//! Durable streams (`/v1/streams/…`) beside the native surfaces, in one run on the same server:
//! appends/s of general streams (one message per request, and JSON batches), catch-up read
//! throughput, and the latency of a long-poll and of SSE from an append's request to the
//! reader's answer — next to our own loop's event made → WebSocket frame.

use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{json, Value};

use super::live::{self, percentiles, Server};
use super::Sizes;

/// Messages per JSON append in the batched figure.
const BATCH_MESSAGES: usize = 64;

fn nanos_now() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
}

fn stream_url(server: &Server, path: &str) -> String {
    format!("{}/v1/streams/{path}", server.base)
}

async fn create(http: &reqwest::Client, url: &str, content_type: &str) {
    let response = http
        .put(url)
        .header("content-type", content_type)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
}

async fn append(http: &reqwest::Client, url: &str, content_type: &str, body: String) {
    let response = http
        .post(url)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
}

/// Messages/s of `writers` streams each appended `appends` times with `per_append` messages.
async fn append_rate(server: &Server, writers: u64, appends: u64, per_append: usize) -> f64 {
    let http = reqwest::Client::new();
    let mut urls = Vec::new();
    for writer in 0..writers {
        let url = stream_url(server, &format!("bench/append-{per_append}-{writer}"));
        create(&http, &url, "application/json").await;
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
                    append(&http, &url, "application/json", body).await;
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
    let http = reqwest::Client::new();
    let url = stream_url(server, "bench/read");
    create(&http, &url, "application/json").await;
    let batch = BATCH_MESSAGES as u64;
    for start in (0..messages).step_by(BATCH_MESSAGES) {
        let body: Vec<Value> = (start..(start + batch).min(messages))
            .map(|n| json!({ "n": n, "text": "a token of a reply" }))
            .collect();
        append(
            &http,
            &url,
            "application/json",
            Value::Array(body).to_string(),
        )
        .await;
    }
    let started = Instant::now();
    let mut offset = "-1".to_owned();
    let mut read = 0;
    loop {
        let response = http
            .get(format!("{url}?offset={offset}"))
            .send()
            .await
            .unwrap();
        let next = response.headers()["stream-next-offset"]
            .to_str()
            .unwrap()
            .to_owned();
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

/// Append request sent → long-poll answered, in ms, `samples` times.
async fn long_poll_latency(server: &Server, samples: usize) -> (f64, f64, f64) {
    let http = reqwest::Client::new();
    let url = stream_url(server, "bench/long-poll");
    create(&http, &url, "application/json").await;
    let mut offset = "now".to_owned();
    let mut latencies = Vec::new();
    for n in 0..samples {
        let poll = {
            let (http, url, offset) = (http.clone(), url.clone(), offset.clone());
            tokio::spawn(async move {
                let response = http
                    .get(format!("{url}?offset={offset}&live=long-poll"))
                    .send()
                    .await
                    .unwrap();
                let answered = nanos_now();
                let next = response.headers()["stream-next-offset"]
                    .to_str()
                    .unwrap()
                    .to_owned();
                (answered, next)
            })
        };
        // The poll is waiting at the tail before the append goes out.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let sent = nanos_now();
        append(
            &http,
            &url,
            "application/json",
            json!({ "n": n }).to_string(),
        )
        .await;
        let (answered, next) = poll.await.unwrap();
        latencies.push((answered - sent) as f64 / 1e6);
        offset = next;
    }
    percentiles(latencies)
}

/// Append request sent → SSE data event read, in ms, `samples` times on one connection.
async fn sse_latency(server: &Server, samples: usize) -> (f64, f64, f64) {
    let http = reqwest::Client::new();
    let url = stream_url(server, "bench/sse");
    create(&http, &url, "application/json").await;
    let response = http
        .get(format!("{url}?offset=now&live=sse"))
        .send()
        .await
        .unwrap();
    let mut body = response.bytes_stream();
    let reader = tokio::spawn(async move {
        let mut latencies = Vec::new();
        let mut buffer = String::new();
        while latencies.len() < samples {
            let Some(Ok(chunk)) = body.next().await else {
                break;
            };
            let received = nanos_now();
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let event: String = buffer.drain(..end + 2).collect();
                if !event.starts_with("event: data") {
                    continue;
                }
                let data = event
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .collect::<String>();
                let messages: Vec<Value> = serde_json::from_str(&data).unwrap_or_default();
                for message in messages {
                    if let Some(sent) = message["sent"].as_i64() {
                        latencies.push((received - sent) as f64 / 1e6);
                    }
                }
            }
        }
        latencies
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    for _ in 0..samples {
        let body = json!({ "sent": nanos_now() }).to_string();
        append(&http, &url, "application/json", body).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    percentiles(reader.await.unwrap())
}

pub async fn measure(directory: &Path, sizes: &Sizes) {
    let path = directory.join("streams.db");
    super::remove_database(&path);
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
    super::remove_database(&path);
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
        format!(
            "durable streams: catch-up read of {} messages",
            sizes.producer_events
        ),
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
    latency(
        &format!("durable streams: append → SSE data event p50/p99/max ({samples})"),
        sse,
    );
    latency(
        "  beside: our own loop on the same server, event made → WS frame",
        ours,
    );
}
