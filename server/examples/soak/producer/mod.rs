//! The producer population: an external agent loop per producer agent, writing its runs through
//! the producer API (`POST /v1/agents/{id}/produce`) as JSON batches or a streamed NDJSON body —
//! and misbehaving as real ones do:
//!
//! - answers lost: a request dropped before its answer is read, then sent again (200 or 204);
//! - crashes that resume: the process loses its state, asks `GET …/producers/{id}` where it
//!   stands and goes on with the same epoch;
//! - crashes that restart: the new process takes a higher epoch at seq 0 and takes the open run
//!   over; the old process's late batch must be fenced off (403);
//! - streamed bodies cut mid-line: the lines before the cut are committed, the rest resent;
//! - producers that vanish mid-run: the run must end `interrupted` at its lease, a late batch of
//!   theirs must be refused (409 `run_ended`), and a new producer takes the agent over.
//!
//! Each run's producer keeps what it knows it wrote (`produced::ProducedRun`); the slot checks
//! it against the log at the generation's end.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::{sleep, timeout, Instant};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

mod faults;

use crate::load::{Metrics, Random};
use crate::produced::{End, ProducedRun};

/// Past its lease, a vanished producer's run must have ended within this much more.
const LEASE_SLACK_MS: u64 = 5_000;
/// A request is sent at most this many times before the producer counts a failure.
const SEND_ATTEMPTS_MAX: u32 = 6;
/// A crashed producer is down at least this long before it resumes: longer than any request of
/// the old process can still be in flight here (they are answered within milliseconds). A new
/// process that read its position while its old one's last batch was still being written would
/// send that batch again under its new epoch — the protocol cannot tell the two apart (the
/// same holds for Durable Streams' `Producer-Epoch`), so a producer restarting with a new epoch
/// must let its old requests end (or time out) before it reads where it stands.
const CRASH_PAUSE_MS_MIN: u64 = 500;
/// … and at most this long.
const CRASH_PAUSE_MS_MAX: u64 = 1_500;

/// What the producer population did, for the report.
#[derive(Default)]
pub struct ProducerMetrics {
    pub runs: AtomicU64,
    pub completed: AtomicU64,
    pub cancelled: AtomicU64,
    pub vanished: AtomicU64,
    /// The latest a vanished producer's run ended past its lease, in ms.
    pub lease_overrun_ms_max: AtomicU64,
    pub crashes_resumed: AtomicU64,
    pub restarts_new_epoch: AtomicU64,
    pub zombies_fenced: AtomicU64,
    pub streamed: AtomicU64,
    pub streams_cut: AtomicU64,
    pub answers_lost: AtomicU64,
    pub duplicates: AtomicU64,
    pub runs_checked: AtomicU64,
}

/// How one run goes.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Fate {
    Plain,
    CrashResume,
    CrashNewEpoch,
    Streamed,
    Vanish,
}

/// One batch of a run's script and the text deltas it carries.
struct Batch {
    events: Value,
    texts: Vec<String>,
}

/// What the server answered a batch.
#[derive(Debug)]
enum Answer {
    Appended { run_id: Uuid },
    Duplicate,
    RunEnded,
}

/// The producer's position as `GET …/producers/{id}` tells it.
struct Position {
    epoch: u64,
    seq: u64,
    run_id: Option<Uuid>,
    run_open: bool,
}

struct Producer {
    base: String,
    agent_id: Uuid,
    http: reqwest::Client,
    id: String,
    epoch: u64,
    /// The seq the next batch takes.
    next_seq: u64,
    metrics: Arc<Metrics>,
    counts: Arc<ProducerMetrics>,
    random: Random,
    /// When the server last answered a batch of this producer's (its lease counts from there).
    last_answer: Instant,
}

/// Runs one producer after another on `agent_id` until `stop` (the last run is finished);
/// returns every run as its producers know it.
pub async fn producer(
    base: String,
    agent_id: Uuid,
    metrics: Arc<Metrics>,
    counts: Arc<ProducerMetrics>,
    stop: CancellationToken,
    random: Random,
) -> Vec<ProducedRun> {
    let mut producer = Producer {
        base,
        agent_id,
        http: agentstream_server::http_client::client(),
        id: format!("soak-{}-0", agent_id.simple()),
        epoch: 0,
        next_seq: 0,
        metrics,
        counts,
        random,
        last_answer: Instant::now(),
    };
    let mut runs = Vec::new();
    let mut successors = 0;
    while !stop.is_cancelled() {
        let fate = match producer.random.below(100) {
            0..=11 => Fate::CrashResume,
            12..=23 => Fate::CrashNewEpoch,
            24..=37 => Fate::Streamed,
            38..=49 => Fate::Vanish,
            _ => Fate::Plain,
        };
        let Some(run) = producer.run(runs.len() as u64, fate).await else {
            // A failure was counted; a new producer starts over on a fresh footing once the
            // run it left is surely past its lease.
            sleep(Duration::from_millis(4_000 + LEASE_SLACK_MS)).await;
            successors += 1;
            producer.become_new(successors);
            continue;
        };
        producer.counts.runs.fetch_add(1, Relaxed);
        let end = run.end;
        runs.push(run);
        match end {
            End::Completed => producer.counts.completed.fetch_add(1, Relaxed),
            End::Cancelled => producer.counts.cancelled.fetch_add(1, Relaxed),
            End::Vanished => {
                successors += 1;
                producer.become_new(successors);
                producer.counts.vanished.fetch_add(1, Relaxed)
            }
        };
        producer.metrics.runs_ended.fetch_add(1, Relaxed);
        sleep(producer.random.millis(0, 200)).await;
    }
    runs
}

/// The events of run number `ordinal`: its opening, 3–12 batches of text (a tool call in one of
/// them, sometimes), its end. Every delta is unique, so the log's copy can be matched exactly.
fn script(ordinal: u64, lease_ms: u64, random: &mut Random) -> Vec<Batch> {
    let message_id = Uuid::now_v7();
    let mut batches = vec![Batch {
        events: json!([
            { "kind": "run_started", "metadata": { "lease_ms": lease_ms, "model": "soak-producer" } },
            { "kind": "user", "message_id": Uuid::now_v7(), "content": { "text": format!("produced turn {ordinal}") } },
        ]),
        texts: Vec::new(),
    }];
    let text_batches = 3 + random.below(10);
    let tool_at = (random.below(5) == 0).then(|| random.below(text_batches));
    for number in 0..text_batches {
        let texts: Vec<String> =
            (0..1 + random.below(6)).map(|index| format!("{ordinal}.{number}.{index} ")).collect();
        let mut events: Vec<Value> = texts
            .iter()
            .map(|delta| json!({ "kind": "text", "message_id": message_id, "delta": delta, "delta_action": "append" }))
            .collect();
        if tool_at == Some(number) {
            let call = format!("call-{ordinal}");
            events.push(json!({ "kind": "tool_call", "content": { "tool_call_id": call, "name": "lookup", "input": { "q": ordinal } } }));
            events.push(json!({ "kind": "tool_result", "content": { "tool_call_id": call, "result": "42" } }));
        }
        batches.push(Batch { events: Value::Array(events), texts });
    }
    batches.push(Batch {
        events: json!([
            { "kind": "usage", "content": { "input_tokens": 7, "output_tokens": text_batches } },
            { "kind": "run_completed", "content": { "stop_reason": "end_turn" } },
        ]),
        texts: Vec::new(),
    });
    batches
}

impl Producer {
    fn fail(&self, what: String) {
        self.metrics.fail(format!("producer {} of agent {}: {what}", self.id, self.agent_id));
    }

    /// A new producer process with a new id: what comes after one that vanished or failed.
    fn become_new(&mut self, number: u64) {
        self.id = format!("soak-{}-{number}", self.agent_id.simple());
        self.epoch = 0;
        self.next_seq = 0;
        self.http = agentstream_server::http_client::client();
    }

    /// One run to its end; `None` when something failed (counted).
    async fn run(&mut self, ordinal: u64, fate: Fate) -> Option<ProducedRun> {
        let lease_ms = 2_000 + self.random.below(2_000);
        let batches = script(ordinal, lease_ms, &mut self.random);
        let last = batches.len() - 1;
        // Where the crash, the cut or the vanishing happens: after the run is open, before
        // its end.
        let turn = 1 + self.random.below(last as u64 - 1) as usize;
        let mut run = ProducedRun {
            run_id: None,
            texts: Vec::new(),
            uncertain: Vec::new(),
            end: End::Completed,
        };
        let mut index = 0;
        while index <= last {
            if index == turn {
                match fate {
                    Fate::Vanish => return self.vanish(run, lease_ms).await,
                    Fate::CrashResume | Fate::CrashNewEpoch => {
                        let new_epoch = fate == Fate::CrashNewEpoch;
                        let (committed, open) = self.crash(&batches[index], new_epoch).await?;
                        if committed {
                            run.texts.extend(batches[index].texts.iter().cloned());
                            index += 1;
                        }
                        if !open {
                            run.end = End::Cancelled;
                            return self.learn_run_id(run).await;
                        }
                        if new_epoch {
                            // The new process's first batch, then the old one's late batch.
                            let answer = self.deliver(&batches[index]).await?;
                            if !self.take(&mut run, &batches[index], answer) {
                                return self.learn_run_id(run).await;
                            }
                            index += 1;
                            self.zombie(self.epoch - 1, 403).await;
                        }
                        continue;
                    }
                    Fate::Streamed => {
                        let (committed, open) = self.stream(&batches[index..]).await?;
                        for batch in &batches[index..index + committed] {
                            run.texts.extend(batch.texts.iter().cloned());
                        }
                        index += committed;
                        if index > last {
                            break;
                        }
                        if !open {
                            run.end = End::Cancelled;
                            return self.learn_run_id(run).await;
                        }
                        continue;
                    }
                    Fate::Plain => {}
                }
            }
            let lose = self.random.below(8) == 0;
            let answer = if lose {
                self.deliver_losing_first(&batches[index], &mut run).await?
            } else {
                self.deliver(&batches[index]).await?
            };
            if !self.take(&mut run, &batches[index], answer) {
                return self.learn_run_id(run).await;
            }
            index += 1;
            sleep(self.random.millis(5, 120)).await;
        }
        self.learn_run_id(run).await
    }

    /// Books an answer; false once the run ended without the producer (cancelled).
    fn take(&mut self, run: &mut ProducedRun, batch: &Batch, answer: Answer) -> bool {
        match answer {
            Answer::Appended { run_id } => {
                run.run_id = Some(run_id);
                run.texts.extend(batch.texts.iter().cloned());
                true
            }
            Answer::Duplicate => {
                run.texts.extend(batch.texts.iter().cloned());
                true
            }
            Answer::RunEnded => {
                run.end = End::Cancelled;
                false
            }
        }
    }

    /// A run whose answers were all lost or duplicates learns its id from the position.
    async fn learn_run_id(&mut self, mut run: ProducedRun) -> Option<ProducedRun> {
        if run.run_id.is_none() {
            run.run_id = self.position().await?.and_then(|position| position.run_id);
        }
        Some(run)
    }

    /// Sends `batch` at the next seq until it is answered; advances the seq when it was
    /// written (now or before).
    async fn deliver(&mut self, batch: &Batch) -> Option<Answer> {
        for _ in 0..SEND_ATTEMPTS_MAX {
            match self.send(self.epoch, self.next_seq, &batch.events).await {
                Ok(Some(answer)) => {
                    self.last_answer = Instant::now();
                    if !matches!(answer, Answer::RunEnded) {
                        self.next_seq += 1;
                    }
                    if matches!(answer, Answer::Duplicate) {
                        self.counts.duplicates.fetch_add(1, Relaxed);
                    }
                    return Some(answer);
                }
                Ok(None) => return None,
                Err(_) => sleep(Duration::from_millis(200)).await,
            }
        }
        self.fail(format!("seq {} unanswered {SEND_ATTEMPTS_MAX} times", self.next_seq));
        None
    }

    /// The first send's answer is lost (the request dropped within a few ms, before or after
    /// the server took it); the resend is 200 or 204. A resend that finds the run ended leaves
    /// the batch uncertain.
    async fn deliver_losing_first(
        &mut self,
        batch: &Batch,
        run: &mut ProducedRun,
    ) -> Option<Answer> {
        self.counts.answers_lost.fetch_add(1, Relaxed);
        let within = self.random.millis(0, 4);
        let _ = timeout(within, self.send(self.epoch, self.next_seq, &batch.events)).await;
        let answer = self.deliver(batch).await?;
        if matches!(answer, Answer::RunEnded) {
            run.uncertain = batch.texts.clone();
        }
        Some(answer)
    }

    /// One request. `Ok(None)`: an answer no producer should get (counted as a failure);
    /// `Err`: the connection failed (sent again).
    async fn send(&self, epoch: u64, seq: u64, events: &Value) -> Result<Option<Answer>, ()> {
        let response = self
            .http
            .post(format!("{}/v1/agents/{}/produce", self.base, self.agent_id))
            .header("Producer-Id", &self.id)
            .header("Producer-Epoch", epoch.to_string())
            .header("Producer-Seq", seq.to_string())
            .json(events)
            .send()
            .await
            .map_err(|_| ())?;
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let answer = match (status, body["error"]["code"].as_str()) {
            (200, _) => body["run_id"]
                .as_str()
                .and_then(|id| id.parse().ok())
                .map(|run_id| Answer::Appended { run_id }),
            (204, _) => Some(Answer::Duplicate),
            (409, Some("run_ended")) => Some(Answer::RunEnded),
            _ => None,
        };
        if answer.is_none() {
            self.fail(format!("epoch {epoch} seq {seq} answered {status}: {body}"));
        }
        Ok(answer)
    }

    async fn position(&self) -> Option<Option<Position>> {
        let url = format!("{}/v1/agents/{}/producers/{}", self.base, self.agent_id, self.id);
        let response = match self.http.get(url).send().await {
            Ok(response) => response,
            Err(error) => {
                self.fail(format!("its position could not be read: {error}"));
                return None;
            }
        };
        if response.status() == 404 {
            return Some(None);
        }
        let body: Value = response.json().await.unwrap_or(Value::Null);
        match (body["epoch"].as_u64(), body["seq"].as_u64()) {
            (Some(epoch), Some(seq)) => Some(Some(Position {
                epoch,
                seq,
                run_id: body["run_id"].as_str().and_then(|id| id.parse().ok()),
                run_open: body["run_open"].as_bool().unwrap_or(false),
            })),
            _ => {
                self.fail(format!("its position answered {body}"));
                None
            }
        }
    }
}
