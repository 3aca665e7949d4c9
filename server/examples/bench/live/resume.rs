//! Resuming a long gap: over WebSocket, over REST pages, and merged.

use std::time::{Duration, Instant};

use app::protocol::{frame::LogFrame, EventsPage};
use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

use super::readers::wait_for_run_end;
use super::Server;

pub struct Gap {
    pub events: u64,
    pub ws_first_ms: f64,
    pub ws_all_ms: f64,
    pub rest_first_ms: f64,
    pub rest_all_ms: f64,
    /// The same, read as the live view reads it: the first page, then the rest
    /// [`PAGES_IN_FLIGHT`] at a time (seqs have no holes, so every page's cursor is known).
    pub rest_parallel_first_ms: f64,
    pub rest_parallel_all_ms: f64,
}

/// Pages the live view reads at once while catching up (`FILL_PAGES_IN_FLIGHT_MAX`).
const PAGES_IN_FLIGHT: usize = 4;

/// Reads the whole log of `agent_id` from seq 0 as the live view does; the time to the first
/// page and to the last.
async fn rest_pages_in_flight(
    server: &Server,
    agent_id: Uuid,
    coalesce: bool,
) -> (Duration, Duration, usize) {
    let http = agentstream_server::http_client::client();
    let page = |since: u64| {
        let http = http.clone();
        let url = format!(
            "{}/v1/agents/{agent_id}/events?since={since}&limit=1000{}",
            server.base,
            if coalesce { "&coalesce=true" } else { "" }
        );
        async move { http.get(url).send().await.unwrap().json::<EventsPage>().await.unwrap() }
    };
    let started = Instant::now();
    let first = page(0).await;
    let first_ms = started.elapsed();
    let (mut newest, head, mut events) = (first.next_since, first.head_seq, first.events.len());
    if first.has_more {
        let cursors: Vec<u64> = (newest..head).step_by(1000).collect();
        let mut pages = futures::stream::iter(cursors).map(page).buffered(PAGES_IN_FLIGHT);
        while let Some(page) = pages.next().await {
            newest = page.next_since;
            events += page.events.len();
        }
    }
    assert_eq!(newest, head, "the pages in flight did not reach the head");
    (first_ms, started.elapsed(), events)
}

/// A fresh agent whose log holds one run of the server's reply length (`gap_events` tokens,
/// one event each), ended: its id and head seq.
async fn long_log(server: &Server) -> (Uuid, u64) {
    let agent_id = server.agent().await;
    server.run(agent_id, "a very long answer").await;
    (agent_id, wait_for_run_end(server, agent_id, 0).await)
}

/// A WebSocket client that subscribes from seq 0 and parses every frame until the head: the
/// time to the first events frame and to the last, and the events read.
async fn ws_resume(server: &Server, agent_id: Uuid, head: u64, coalesce: bool) -> WsResume {
    let (mut socket, subscribe) = super::subscription(server, agent_id, coalesce).await;
    let started = Instant::now();
    socket.send(subscribe).await.unwrap();
    let (mut first, mut seen, mut events_read) = (None, 0u64, 0);
    while seen < head {
        let Some(Ok(Message::Text(text))) = socket.next().await else {
            break;
        };
        if let Ok(LogFrame::Events(events)) = LogFrame::parse(text.as_str()) {
            first.get_or_insert_with(|| started.elapsed());
            seen = events.last().map_or(seen, |event| event.seq);
            events_read += events.len();
        }
    }
    WsResume { first: first.unwrap_or_default(), all: started.elapsed(), events: events_read }
}

struct WsResume {
    first: Duration,
    all: Duration,
    events: usize,
}

/// A log of at least `gap_events` events, then a client that resumes from seq 0.
pub async fn resume_gap(server: &Server) -> Gap {
    let (agent_id, head) = long_log(server).await;
    let http = agentstream_server::http_client::client();
    let ws = ws_resume(server, agent_id, head, false).await;
    let started = Instant::now();
    let (mut rest_first, mut since) = (None, 0u64);
    loop {
        // Read into the page type, as the live view's client does.
        let page: EventsPage = server
            .get_json(&http, &format!("/v1/agents/{agent_id}/events?since={since}&limit=1000"))
            .await;
        rest_first.get_or_insert_with(|| started.elapsed());
        since = page.next_since;
        if !page.has_more {
            break;
        }
    }
    let rest_all = started.elapsed();
    let (parallel_first, parallel_all, _) = rest_pages_in_flight(server, agent_id, false).await;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Gap {
        events: head,
        ws_first_ms: ms(ws.first),
        ws_all_ms: ms(ws.all),
        rest_first_ms: ms(rest_first.unwrap_or_default()),
        rest_all_ms: ms(rest_all),
        rest_parallel_first_ms: ms(parallel_first),
        rest_parallel_all_ms: ms(parallel_all),
    }
}

pub struct CoalescedGap {
    pub ws_events: usize,
    pub ws_first_ms: f64,
    pub ws_all_ms: f64,
    pub rest_events: usize,
    pub rest_first_ms: f64,
    pub rest_all_ms: f64,
}

/// The same resume as [`resume_gap`], by a client that asks for coalescing (as the live
/// view does): runs of appends arrive merged.
pub async fn resume_gap_coalesced(server: &Server) -> CoalescedGap {
    let (agent_id, head) = long_log(server).await;
    let ws = ws_resume(server, agent_id, head, true).await;
    let (rest_first, rest_all, rest_events) = rest_pages_in_flight(server, agent_id, true).await;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    CoalescedGap {
        ws_events: ws.events,
        ws_first_ms: ms(ws.first),
        ws_all_ms: ms(ws.all),
        rest_events,
        rest_first_ms: ms(rest_first),
        rest_all_ms: ms(rest_all),
    }
}

/// The same WebSocket resume read as frames only: the time to the frame that holds the head's
/// seq, with no frame parsed (the server's share of [`resume_gap`]'s figure), and the bytes.
async fn resume_frames_only(server: &Server, agent_id: Uuid, head: u64) -> (f64, usize) {
    let (mut socket, subscribe) = super::subscription(server, agent_id, false).await;
    let last = format!("\"seq\":{head},");
    let started = Instant::now();
    socket.send(subscribe).await.unwrap();
    let mut bytes = 0;
    while let Some(Ok(message)) = socket.next().await {
        if let Message::Text(text) = message {
            bytes += text.len();
            if text.as_str().contains(&last) {
                break;
            }
        }
    }
    (started.elapsed().as_secs_f64() * 1000.0, bytes)
}

/// `--resume`: only the WebSocket resume of a `gap_events` gap, `rounds` times on one SQLite
/// server (a fresh agent each round), each round's figures and their medians: the loop to
/// profile the catch-up path with.
pub async fn rounds(database_url: &str, gap_events: u32, rounds: usize) {
    let server = Server::start(database_url, 0, gap_events).await;
    let (mut all_ms, mut frames_ms, mut again_ms) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let gap = resume_gap(&server).await;
        // A log nobody read yet, resumed twice: the second is a client reconnecting.
        let (agent_id, head) = long_log(&server).await;
        let (frames, bytes) = resume_frames_only(&server, agent_id, head).await;
        let (again, _) = resume_frames_only(&server, agent_id, head).await;
        println!(
            "round {round}: resume a {}-event gap over WebSocket: first {:.1} ms, all {:.1} ms; \
             frames only {frames:.1} ms ({bytes} bytes), again {again:.1} ms",
            gap.events, gap.ws_first_ms, gap.ws_all_ms
        );
        all_ms.push(gap.ws_all_ms);
        frames_ms.push(frames);
        again_ms.push(again);
    }
    let median = |mut figures: Vec<f64>| {
        figures.sort_by(f64::total_cmp);
        figures.get(figures.len() / 2).copied().unwrap_or_default()
    };
    println!(
        "median of {rounds}: all {:.1} ms, frames only {:.1} ms, again {:.1} ms",
        median(all_ms),
        median(frames_ms),
        median(again_ms)
    );
}
