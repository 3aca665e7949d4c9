//! The soak benchmark: minutes of mixed load on the release server binary, in its own process,
//! over real sockets. Per agent slot, generations of a few minutes: an agent is created, a
//! runner starts runs on it one after another (some with tool calls, some cancelled), and
//! subscribers over WebSocket and SSE join, lag, disconnect and resume; at the generation's end
//! every subscriber catches up and its record is checked against the log, and the agent is
//! deleted (conversations end; memory must come back). Beside it, a stream of bad input.
//!
//! Producer slots (`producer.rs`) are the same but for the runner: an external agent loop
//! writes the runs through the producer API, losing answers, crashing and resuming (same epoch
//! or a new one), cutting streamed bodies and vanishing mid-run; what each producer knows it
//! wrote is checked against the log (`produced.rs`), and a vanished producer's run must end at
//! its lease.
//!
//! Beside them, clients that reconnect in a loop (SSE and WebSocket, dropped after a few
//! frames) or ask for a whole log and read nothing (`ending.rs`). At the end the load stops, its
//! agents are deleted, and the server's live tasks and hub rooms must come back to where they
//! were before the load; then SIGTERM, with a client that never reads holding a stream, must
//! end the process within the drain and a few seconds.
//!
//! Every minute it prints the server's resident memory, open fds, threads, live tasks, sockets,
//! events/s and delivery p50/p99; at the end, whether memory, fds and tasks stayed within 10 %
//! of their value after warm-up, and the records' verdict (0 lost, 0 duplicated). Exits 1 when
//! anything failed.
//!
//! `cargo run --release -p server --example soak -- --minutes 30` (builds the server binary
//! first). Options: `--agents N` (6), `--producers N` (2 producer slots), `--subscribers N` per agent (6, one of them SSE),
//! `--generation-minutes N` (3), `--database URL` (a temporary SQLite file by default).

mod check;
mod ending;
mod load;
mod produced;
mod producer;
mod report;
/// The tests' short way of sending a request and reading its JSON.
#[allow(dead_code)]
#[path = "../../tests/common/requests.rs"]
mod requests;
mod server;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use app::protocol::EventsPage;
use app::AgentEvent;
use serde_json::{json, Value};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use requests::RequestExt;

use check::{quantile, Verdict};
use load::{Metrics, Random, Transport};
use producer::ProducerMetrics;
use report::{report, Series};
use server::{sample, Server};

/// Minutes that count as warm-up: the flatness check starts after them. Five: past the first
/// generation's end (3 minutes by default), when the first agents are deleted and replaced and
/// the allocator and the database's caches have seen a whole cycle.
const WARM_UP_MINUTES: usize = 5;
/// A series may stray this far from its value after warm-up and still count as flat.
const FLAT_PERCENT_MAX: f64 = 10.0;

struct Args {
    minutes: u64,
    agents: usize,
    producers: usize,
    subscribers: usize,
    generation_minutes: u64,
    database: Option<String>,
}

impl Args {
    fn parse() -> Args {
        let mut args = Args {
            minutes: 30,
            agents: 6,
            producers: 2,
            subscribers: 6,
            generation_minutes: 3,
            database: None,
        };
        let mut words = std::env::args().skip(1);
        while let Some(word) = words.next() {
            let mut value =
                || words.next().unwrap_or_else(|| usage(&format!("{word} needs a value")));
            let number = |text: String| {
                text.parse().unwrap_or_else(|_| usage(&format!("{text:?} is not a number")))
            };
            match word.as_str() {
                "--minutes" => args.minutes = number(value()),
                "--agents" => args.agents = number(value()) as usize,
                "--producers" => args.producers = number(value()) as usize,
                "--subscribers" => args.subscribers = number(value()) as usize,
                "--generation-minutes" => args.generation_minutes = number(value()),
                "--database" => args.database = Some(value()),
                other => usage(&format!("unknown option {other:?}")),
            }
        }
        if args.minutes == 0
            || args.agents == 0
            || args.subscribers == 0
            || args.generation_minutes == 0
        {
            usage("every count must be at least 1");
        }
        args
    }
}

fn usage(problem: &str) -> ! {
    eprintln!("soak: {problem}\nusage: soak [--minutes N] [--agents N] [--producers N] [--subscribers N] [--generation-minutes N] [--database URL]");
    std::process::exit(2)
}

fn main() {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let passed = runtime.block_on(soak(args));
    std::process::exit(if passed { 0 } else { 1 });
}

async fn soak(args: Args) -> bool {
    let mut server = Server::start(args.database.as_deref()).await;
    let before = ending::held(&server.base).await.expect("the server's /v1/stats answers");
    let metrics = Arc::new(Metrics::default());
    let stop = CancellationToken::new();
    let hostile = Arc::new(ending::Hostile::default());
    let hostiles: Vec<_> = (0..HOSTILE_CLIENTS)
        .map(|index| {
            tokio::spawn(ending::hostile(
                server.base.clone(),
                metrics.clone(),
                hostile.clone(),
                stop.clone(),
                Random::new(0xbad_c0de + index),
            ))
        })
        .collect();
    let produced = Arc::new(ProducerMetrics::default());
    let mut slots = JoinSet::new();
    for slot in 0..args.agents + args.producers {
        let driver =
            if slot < args.agents { Driver::Runner } else { Driver::Producer(produced.clone()) };
        slots.spawn(agent_slot(
            server.base.clone(),
            slot,
            driver,
            args.subscribers,
            args.generation_minutes,
            metrics.clone(),
            stop.clone(),
        ));
    }
    let bad = tokio::spawn(load::bad_input(server.base.clone(), metrics.clone(), stop.clone()));

    println!("minute  rss_MiB  fds  threads  tasks  sockets  runs/min  events/s  delivered/s  p50_ms  p99_ms  lagged  sessions  bad_refused  failures");
    let mut series = Series::default();
    let mut delivered_before = 0;
    let mut appended_before = appended_total(&server.base, &metrics).await;
    for minute in 1..=args.minutes {
        let runs_before = metrics.runs_ended.load(Relaxed);
        tokio::time::sleep(Duration::from_secs(60)).await;
        let sample = sample(&server).await;
        let delivered = metrics.delivered.load(Relaxed);
        let appended = appended_total(&server.base, &metrics).await.max(appended_before);
        let mut latencies = std::mem::take(&mut *metrics.latencies_ms.lock().unwrap());
        let (p50, p99) = (quantile(&mut latencies, 0.5), quantile(&mut latencies, 0.99));
        println!(
            "{minute:>6}  {:>7.1}  {:>3}  {:>7}  {:>5}  {:>7}  {:>8}  {:>8.0}  {:>11.0}  {:>6.1}  {:>6.1}  {:>6}  {:>8}  {:>11}  {:>8}",
            sample.rss_mib, sample.fds, sample.threads, sample.tasks, sample.sockets,
            metrics.runs_ended.load(Relaxed) - runs_before,
            (appended - appended_before) as f64 / 60.0,
            (delivered - delivered_before) as f64 / 60.0,
            p50, p99,
            metrics.lagged_notices.load(Relaxed), metrics.sessions.load(Relaxed),
            metrics.bad_inputs_refused.load(Relaxed), metrics.failures.load(Relaxed),
        );
        series.push(&sample, p99);
        delivered_before = delivered;
        appended_before = appended;
    }
    stop.cancel();
    let mut verdict = Verdict::default();
    let mut checked = 0;
    while let Some(done) = slots.join_next().await {
        let (slot_verdict, slot_checked) = done.expect("an agent slot panicked");
        verdict.add(slot_verdict);
        checked += slot_checked;
    }
    let _ = bad.await;
    for task in hostiles {
        let _ = task.await;
    }
    let ended = end(&mut server, before, &hostile).await;
    report(&args, &metrics, &produced, &series, verdict, checked, &server) && ended
}

/// Hostile clients beside the load: reconnect loops and clients that never read.
const HOSTILE_CLIENTS: u64 = 2;

/// The end: with the load gone, tasks and rooms back to where they were; then SIGTERM with a
/// silent client. True when both held.
async fn end(server: &mut Server, before: ending::Held, hostile: &ending::Hostile) -> bool {
    println!(
        "hostile clients: {} streams opened and dropped, {} that never read",
        hostile.reconnects.load(Relaxed),
        hostile.silent.load(Relaxed)
    );
    let after = ending::settle(&server.base, before).await;
    let settled =
        after.is_some_and(|after| after.tasks <= before.tasks && after.rooms <= before.rooms);
    println!(
        "held before the load: {} tasks, {} hub rooms; after it: {} ({})",
        before.tasks,
        before.rooms,
        after.map_or("no answer".to_owned(), |after| format!(
            "{} tasks, {} hub rooms",
            after.tasks, after.rooms
        )),
        if settled { "back" } else { "NOT BACK" }
    );
    // One agent with a log for the silent client to ask for, and a run in flight at SIGTERM.
    let http = agentstream_server::http_client::client();
    let agent: Option<Uuid> = async {
        let agent: Value = http
            .post(format!("{}/v1/agents", server.base))
            .json(&json!({ "name": "soak end" }))
            .json_if_any()
            .await?;
        let agent_id = Uuid::parse_str(agent["id"].as_str()?).ok()?;
        http.post(format!("{}/v1/agents/{agent_id}/runs", server.base))
            .json(&json!({ "content": "one last answer" }))
            .send()
            .await
            .ok()?;
        Some(agent_id)
    }
    .await;
    let exited = ending::sigterm(&server.base, agent, &mut server.child).await;
    let stopped = exited.is_some_and(|(_, clean)| clean);
    match exited {
        Some((took, clean)) => println!(
            "SIGTERM with a client that never reads: exited in {:.1} s ({}; drain {} ms)",
            took.as_secs_f64(),
            if clean { "status 0" } else { "NOT status 0" },
            ending::SHUTDOWN_DRAIN_MS
        ),
        None => println!("SIGTERM: the server was STILL RUNNING past the drain and grace"),
    }
    settled && stopped
}

/// What writes an agent slot's runs.
enum Driver {
    /// Our own agent loop, started over REST (`load::runner`).
    Runner,
    /// An external producer population (`producer`), its runs checked against the log.
    Producer(Arc<ProducerMetrics>),
}

/// One agent slot: generations until `stop`. Returns the records' verdict and how many
/// records were checked.
async fn agent_slot(
    base: String,
    slot: usize,
    driver: Driver,
    subscribers: usize,
    generation_minutes: u64,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) -> (Verdict, u64) {
    let http = agentstream_server::http_client::client();
    let mut verdict = Verdict::default();
    let mut checked = 0;
    let mut generation = 0u64;
    while !stop.is_cancelled() {
        generation += 1;
        let seed = (slot as u64) << 32 | generation;
        let agent: Value = http
            .post(format!("{base}/v1/agents"))
            .json(&json!({ "name": format!("soak {slot}.{generation}") }))
            .answer()
            .await;
        let agent_id = Uuid::parse_str(agent["id"].as_str().unwrap()).unwrap();
        metrics.live_agents.lock().unwrap().push(agent_id);
        let ending = stop.child_token();
        let (head_sender, head) = tokio::sync::watch::channel(None);
        let mut readers = JoinSet::new();
        for index in 0..subscribers {
            let transport = if index == 0 { Transport::Sse } else { Transport::WebSocket };
            readers.spawn(load::subscriber(
                base.clone(),
                agent_id,
                transport,
                metrics.clone(),
                ending.clone(),
                head.clone(),
                Random::new(seed * 64 + index as u64),
            ));
        }
        let writer = match &driver {
            Driver::Runner => tokio::spawn({
                let runner = load::runner(
                    base.clone(),
                    agent_id,
                    metrics.clone(),
                    ending.clone(),
                    Random::new(seed),
                );
                async move {
                    runner.await;
                    Vec::new()
                }
            }),
            Driver::Producer(counts) => tokio::spawn(producer::producer(
                base.clone(),
                agent_id,
                metrics.clone(),
                counts.clone(),
                ending.clone(),
                Random::new(seed),
            )),
        };
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(60 * generation_minutes)) => ending.cancel(),
            _ = ending.cancelled() => {}
        }
        // The runner or producer lets its last run end; then the log's head is final.
        let produced_runs = writer.await.expect("a runner or producer panicked");
        let events = read_log(&http, &base, agent_id).await;
        if let Driver::Producer(counts) = &driver {
            for problem in produced::compare(&produced_runs, &events) {
                metrics.fail(format!("agent {agent_id}: {problem}"));
            }
            counts.runs_checked.fetch_add(produced_runs.len() as u64, Relaxed);
        }
        let log: Vec<Uuid> = events.iter().map(|event| event.id).collect();
        {
            let mut live = metrics.live_agents.lock().unwrap();
            live.retain(|live| *live != agent_id);
            metrics.retired_events.fetch_add(log.len() as u64, Relaxed);
        }
        let _ = head_sender.send(Some(log.len() as u64));
        while let Some(record) = readers.join_next().await {
            let record_verdict = record.expect("a subscriber panicked").compare(&log);
            if !record_verdict.clean() {
                metrics.fail(format!("agent {agent_id}: {record_verdict:?}"));
            }
            verdict.add(record_verdict);
            checked += 1;
        }
        let deleted = http.delete(format!("{base}/v1/agents/{agent_id}")).send().await;
        if !deleted.is_ok_and(|response| response.status().is_success()) {
            metrics.fail(format!("agent {agent_id} could not be deleted"));
        }
    }
    (verdict, checked)
}

/// The agent's whole log, in seq order, paged over REST.
async fn read_log(http: &reqwest::Client, base: &str, agent_id: Uuid) -> Vec<AgentEvent> {
    let mut ids: Vec<AgentEvent> = Vec::new();
    loop {
        let page: EventsPage = http
            .get(format!("{base}/v1/agents/{agent_id}/events?since={}&limit=1000", ids.len()))
            .answer()
            .await;
        for event in page.events {
            assert_eq!(event.seq, ids.len() as u64 + 1, "the log has no holes");
            ids.push(event);
        }
        if !page.has_more {
            return ids;
        }
    }
}

/// Events appended so far: the retired agents' logs plus the live agents' heads.
async fn appended_total(base: &str, metrics: &Metrics) -> u64 {
    let (retired, live) = {
        let live = metrics.live_agents.lock().unwrap();
        (metrics.retired_events.load(Relaxed), live.clone())
    };
    let http = agentstream_server::http_client::client();
    let mut total = retired;
    for agent_id in live {
        let page = http.get(format!("{base}/v1/agents/{agent_id}/events?limit=1")).send().await;
        if let Ok(response) = page {
            if let Ok(page) = response.json::<EventsPage>().await {
                total += page.head_seq;
            }
        }
    }
    total
}
