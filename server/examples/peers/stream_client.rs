//! A Durable Streams client for the benches (JSON streams): create, append, and the two live
//! latencies — append request sent → long-poll answered, and → SSE data event read. Shared by
//! `examples/peers` (any server) and `examples/bench` (ours, beside the native surfaces).

use std::time::Duration;

use futures::StreamExt;
use serde_json::{json, Value};
use tokio::time::Instant;

pub fn nanos_now() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
}

/// Creates the JSON stream at `url`.
pub async fn create(http: &reqwest::Client, url: &str) {
    let response =
        http.put(url).header("content-type", "application/json").send().await.expect("a create");
    assert!(response.status().is_success(), "PUT {url}: {}", response.status());
}

/// Appends `body` (JSON) to the stream at `url`.
pub async fn append(http: &reqwest::Client, url: &str, body: String) {
    let response = http
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("an append");
    assert!(response.status().is_success(), "POST {url}: {}", response.status());
}

/// Append request sent → long-poll answered, in ms, `samples` times, on a new stream at `url`.
pub async fn long_poll_latencies(url: &str, samples: usize) -> Vec<f64> {
    let http = agentstream_server::http_client::client();
    create(&http, url).await;
    let mut offset = "now".to_owned();
    let mut latencies = Vec::new();
    for n in 0..samples {
        let poll = {
            let (http, url, offset) = (http.clone(), url.to_owned(), offset.clone());
            tokio::spawn(async move {
                let response = http
                    .get(format!("{url}?offset={offset}&live=long-poll"))
                    .send()
                    .await
                    .expect("a long-poll");
                let answered = nanos_now();
                let next = response
                    .headers()
                    .get("stream-next-offset")
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                (answered, next)
            })
        };
        // The poll is waiting at the tail before the append goes out.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let sent = nanos_now();
        append(&http, url, json!({ "n": n }).to_string()).await;
        let (answered, next) = poll.await.expect("the poll");
        latencies.push((answered - sent) as f64 / 1e6);
        offset = next;
    }
    latencies
}

/// Append request sent → SSE data event read, in ms, `samples` times on one connection, on a
/// new stream at `url` (fewer when the reader hears nothing for 10 s, or after 60 s).
pub async fn sse_latencies(url: &str, samples: usize) -> Vec<f64> {
    let http = agentstream_server::http_client::client();
    create(&http, url).await;
    let response =
        http.get(format!("{url}?offset=now&live=sse")).send().await.expect("an SSE read");
    let mut body = response.bytes_stream();
    let reader = tokio::spawn(async move {
        let mut latencies = Vec::new();
        let mut buffer = String::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while latencies.len() < samples && Instant::now() < deadline {
            let Ok(Some(Ok(chunk))) =
                tokio::time::timeout(Duration::from_secs(10), body.next()).await
            else {
                break;
            };
            let received = nanos_now();
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let event: String = buffer.drain(..end + 2).collect();
                if !event.starts_with("event: data") && !event.starts_with("event:data") {
                    continue;
                }
                let data =
                    event.lines().filter_map(|line| line.strip_prefix("data:")).collect::<String>();
                let messages: Vec<Value> = serde_json::from_str(data.trim()).unwrap_or_default();
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
        append(&http, url, json!({ "sent": nanos_now() }).to_string()).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    reader.await.expect("the SSE reader")
}
