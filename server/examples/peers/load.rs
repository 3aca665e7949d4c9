//! The loads, the same for every server: appends from wrk (64 connections over 64 JSON streams,
//! ~45-byte messages, one or 64 per POST) with every acknowledged message read back; catch-up
//! reads of a 10 000-message stream; append → long-poll and append → SSE latency.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use crate::servers::Target;
use crate::stream_client::{self, append, create};

/// Connections (and streams) of the append load.
pub const CONNECTIONS: usize = 64;
/// Messages per POST in the batched figure.
pub const BATCH_MESSAGES: usize = 64;
/// Messages in the catch-up stream.
pub const CATCH_UP_MESSAGES: usize = 10_000;
/// Concurrent catch-up readers.
const CATCH_UP_READERS: usize = 2;
/// Pages one catch-up may take before the bench gives up on the server.
const CATCH_UP_PAGES_MAX: usize = 10_000;

/// What one wrk run reported, and what reading the streams back found.
#[derive(Clone, Copy, Debug, Default)]
pub struct Appends {
    pub messages_per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Non-2xx answers and socket errors.
    pub errors: u64,
    pub acknowledged: u64,
    pub read_back: u64,
    pub duplicates: u64,
    /// Server CPU per message, µs.
    pub cpu_us_per_message: f64,
    /// Bytes the server wrote to storage per message.
    pub written_per_message: f64,
}

/// wrk against `target` for `seconds`: `per_append` messages per POST over [`CONNECTIONS`]
/// fresh streams named `{name}-N`; then every stream is read back.
pub async fn appends(
    target: &Target,
    name: &str,
    per_append: usize,
    seconds: u64,
    script: &Path,
) -> Appends {
    let http = agentstream_server::http_client::client();
    for stream in 0..CONNECTIONS {
        create(&http, &target.url(&format!("{name}-{stream}"))).await;
    }
    let (cpu_before, written_before) = (target.cpu_ms(), target.written_bytes());
    let output = tokio::process::Command::new("wrk")
        .args(["-t2", &format!("-c{CONNECTIONS}"), &format!("-d{seconds}s")])
        .args(["--timeout", "10s", "-s"])
        .arg(script)
        .arg(&target.origin)
        .env("PREFIX", format!("{}{name}-", target.prefix))
        .env("STREAMS", CONNECTIONS.to_string())
        .env("PER_APPEND", per_append.to_string())
        .output()
        .await
        .expect("wrk runs (scripts/bench.sh --peers installs it)");
    let (cpu, written) =
        (target.cpu_ms() - cpu_before, target.written_bytes().saturating_sub(written_before));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("wrk printed no report: {stdout}"));
    let number = |key: &str| report[key].as_f64().unwrap_or(0.0);
    let requests = number("requests");
    let errors = (number("non2xx") + number("socket_errors")) as u64;
    let acknowledged = (requests as u64).saturating_sub(errors) * per_append as u64;
    let mut read_back = 0;
    let mut seen = HashSet::new();
    let mut duplicates = 0;
    for stream in 0..CONNECTIONS {
        let url = target.url(&format!("{name}-{stream}"));
        for page in read_all(&http, &url).await {
            let messages: Vec<Value> = serde_json::from_slice(&page).expect("a JSON page");
            for message in messages {
                read_back += 1;
                let key = (message["t"].as_u64(), message["n"].as_u64(), message["k"].as_u64());
                if !seen.insert(key) {
                    duplicates += 1;
                }
            }
        }
    }
    let messages = acknowledged.max(1) as f64;
    Appends {
        messages_per_second: acknowledged as f64 / (number("duration_us") / 1e6),
        p50_ms: number("p50_us") / 1000.0,
        p99_ms: number("p99_us") / 1000.0,
        errors,
        acknowledged,
        read_back,
        duplicates,
        cpu_us_per_message: cpu * 1000.0 / messages,
        written_per_message: written as f64 / messages,
    }
}

/// Every page of the stream at `url` from its start, following `Stream-Next-Offset` until
/// `Stream-Up-To-Date`.
async fn read_all(http: &reqwest::Client, url: &str) -> Vec<axum::body::Bytes> {
    let mut offset = "-1".to_owned();
    let mut pages = Vec::new();
    for _ in 0..CATCH_UP_PAGES_MAX {
        let response = http.get(format!("{url}?offset={offset}")).send().await.expect("a read");
        assert!(response.status().is_success(), "GET {url}: {}", response.status());
        let next = response
            .headers()
            .get("stream-next-offset")
            .and_then(|value| value.to_str().ok())
            .expect("Stream-Next-Offset")
            .to_owned();
        let up_to_date = response.headers().contains_key("stream-up-to-date");
        pages.push(response.bytes().await.expect("a page"));
        if up_to_date || next == offset {
            return pages;
        }
        offset = next;
    }
    panic!("{url} was not read to its end in {CATCH_UP_PAGES_MAX} pages")
}

/// Writes the [`CATCH_UP_MESSAGES`]-message stream `name` (appends of 100) and checks that it
/// reads back whole.
pub async fn fill_catch_up_stream(target: &Target, name: &str) {
    let http = agentstream_server::http_client::client();
    let url = target.url(name);
    create(&http, &url).await;
    for start in (0..CATCH_UP_MESSAGES).step_by(100) {
        let batch: Vec<Value> =
            (start..start + 100).map(|n| json!({ "n": n, "text": "a token of a reply" })).collect();
        append(&http, &url, Value::Array(batch).to_string()).await;
    }
    assert!(
        catch_up_reads(target, name, 0).await.is_some(),
        "{}: the catch-up stream",
        target.kind.label()
    );
}

/// The first whole catch-up read of the stream `name` (see [`fill_catch_up_stream`]), in ms, and
/// messages/s of whole reads by [`CATCH_UP_READERS`] readers for `seconds` after it (the first
/// included); `None` (and a line saying so) when the first read does not bring every message.
pub async fn catch_up_reads(target: &Target, name: &str, seconds: u64) -> Option<(f64, f64)> {
    let http = agentstream_server::http_client::client();
    let url = target.url(name);
    let started = Instant::now();
    let pages = read_all(&http, &url).await;
    let first_ms = started.elapsed().as_secs_f64() * 1000.0;
    let count: usize = pages
        .iter()
        .map(|page| serde_json::from_slice::<Vec<Value>>(page).map_or(0, |page| page.len()))
        .sum();
    if count != CATCH_UP_MESSAGES {
        eprintln!(
            "peers:   {}: {name} read back {count} of {CATCH_UP_MESSAGES} messages",
            target.kind.label()
        );
        return None;
    }
    let until = started + Duration::from_secs(seconds);
    let readers: Vec<_> = (0..CATCH_UP_READERS)
        .map(|_| {
            let (http, url) = (http.clone(), url.clone());
            tokio::spawn(async move {
                let mut reads = 0u64;
                while Instant::now() < until {
                    read_all(&http, &url).await;
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let mut reads = 1;
    for reader in readers {
        reads += reader.await.expect("a reader");
    }
    Some((first_ms, (reads * CATCH_UP_MESSAGES as u64) as f64 / started.elapsed().as_secs_f64()))
}

/// p50 and p99 of `samples`, in ms.
pub fn percentiles(mut samples: Vec<f64>) -> (f64, f64) {
    if samples.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}

/// Append request sent → long-poll answered: p50 and p99 in ms of `samples`.
pub async fn long_poll_latency(target: &Target, name: &str, samples: usize) -> (f64, f64) {
    percentiles(stream_client::long_poll_latencies(&target.url(name), samples).await)
}

/// Append request sent → SSE data event read: p50 and p99 in ms of `samples`.
pub async fn sse_latency(target: &Target, name: &str, samples: usize) -> (f64, f64) {
    percentiles(stream_client::sse_latencies(&target.url(name), samples).await)
}
