//! An external producer's batch, checked and made into drafts, pure. The producer writes in our
//! own event model (`AgentEvent` without what the server assigns: id, seq, agent, time); this
//! is where the rules our own loop follows by construction are checked, so every surface serves
//! a produced run as it serves ours:
//!
//! - a batch opens a run with `run_started` (first, and only when no run is open), or continues
//!   the producer's open run; nothing follows a run's end in its batch;
//! - text and thinking are deltas (or whole contents) of a message (`message_id`); a message
//!   keeps its kind; `append` takes a string, `merge` an object;
//! - a tool call opens with `content.tool_call_id` and `content.name` (unique in the run), its
//!   later pieces name it by `message_id` or `content.tool_call_id`, and it gets exactly one
//!   `tool_result` (its card's status merge is written with it, as our loop does);
//! - a run's end answers every call still open with an error result first, and carries the
//!   run's last usage when the producer gave none;
//! - approvals are not produced (a person answers them through the server), nor unknown kinds.
//!
//! One refusal refuses the whole batch, naming the event by its index.

use std::collections::HashMap;

use app::{DeltaAction, EventKind};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::agent::registry::RunLimits;
use crate::limits::PRODUCER_LEASE_MS_DEFAULT;
use crate::store::chunk::nth_id;
use crate::store::EventDraft;

/// Events one batch (one request, or one line of a streamed request) may hold.
pub const PRODUCE_BATCH_EVENTS_MAX: usize = 4096;
/// A tool call id or a tool name longer than this (in characters) is refused.
pub const PRODUCED_NAME_CHARS_MAX: usize = 256;
/// A delta path longer than this (in characters) is refused.
pub const DELTA_PATH_CHARS_MAX: usize = 256;
/// Tool calls one produced run may make.
pub const PRODUCED_CALLS_PER_RUN_MAX: usize = 4096;
/// The lease a producer may ask for in `run_started`'s `metadata.lease_ms`, at least and at most.
pub const PRODUCER_LEASE_MS_MIN: u64 = 1_000;
pub const PRODUCER_LEASE_MS_MAX: u64 = 600_000;

/// One event as a producer sends it. Unknown fields are refused by name (`id`, `seq`,
/// `agent_id` and `created_at` are the server's to assign).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProducedEvent {
    pub kind: String,
    #[serde(default)]
    pub run_id: Option<Uuid>,
    #[serde(default)]
    pub thread_id: Option<Uuid>,
    #[serde(default)]
    pub block_id: Option<Uuid>,
    #[serde(default)]
    pub message_id: Option<Uuid>,
    #[serde(default)]
    pub delta: Option<Value>,
    #[serde(default)]
    pub delta_path: Option<String>,
    #[serde(default)]
    pub delta_action: Option<DeltaAction>,
    #[serde(default)]
    pub content: Option<Value>,
    #[serde(default)]
    pub raw: Option<Value>,
    #[serde(default)]
    pub metadata: Option<Value>,
}

/// Why a batch was refused: the event (by index) and what was wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub index: Option<usize>,
    pub message: String,
    /// True when the refusal is the run's event or byte limit (413), not a malformed event.
    pub over_limit: bool,
    /// True when the batch goes on with a run the producer no longer has open (the caller may
    /// know how that run ended).
    pub no_open_run: bool,
}

impl Refusal {
    fn at(index: usize, message: impl Into<String>) -> Refusal {
        Refusal {
            index: Some(index),
            message: message.into(),
            over_limit: false,
            no_open_run: false,
        }
    }

    fn batch(message: impl Into<String>) -> Refusal {
        Refusal { index: None, message: message.into(), over_limit: false, no_open_run: false }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.index {
            Some(index) => write!(formatter, "event {index}: {}", self.message),
            None => write!(formatter, "{}", self.message),
        }
    }
}

/// A tool call of a produced run.
#[derive(Clone, Debug, PartialEq)]
struct Call {
    tool_call_id: String,
    name: String,
    thread_id: Uuid,
    block_id: Uuid,
    message_id: Uuid,
    answered: bool,
}

/// What a produced run has written so far: what its next batch is checked against.
#[derive(Clone, Debug, PartialEq)]
pub struct ProducedRun {
    pub run_id: Uuid,
    /// The run's main thread (events that name none go there).
    pub thread_id: Uuid,
    /// How long the producer may stay silent before its run is ended `interrupted`.
    pub lease_ms: u64,
    calls: Vec<Call>,
    /// The kind of each message the run has written to.
    messages: HashMap<Uuid, EventKind>,
    events: u64,
    bytes: u64,
    usage: Value,
}

/// The ids and the time of the drafts made at once (one batch, one stop): one UUIDv7 and one
/// clock read for them all, the k-th draft's id `k` after the first ([`nth_id`]). Per draft, a
/// UUIDv7 (a clock read, uuid's shared ordering context, random bits) and chrono's clock read
/// were ~6 % of the producer API's CPU at 64 events a batch.
pub(super) struct Stamp {
    first: Uuid,
    made: u64,
    at: DateTime<Utc>,
}

impl Stamp {
    pub(super) fn new() -> Stamp {
        Stamp { first: Uuid::now_v7(), made: 0, at: Utc::now() }
    }

    /// The next draft of `kind`, everything else empty.
    fn draft(&mut self, kind: EventKind) -> EventDraft {
        // Past the first id's low 32 bits (rare), an id of its own.
        let id = nth_id(self.first, self.made).unwrap_or_else(Uuid::now_v7);
        self.made += 1;
        EventDraft::made(kind, id, self.at)
    }
}

/// Who produces: recorded in `run_started`'s metadata.
#[derive(Clone, Debug)]
pub struct Producer<'a> {
    pub id: &'a str,
    pub epoch: u64,
}

/// A checked batch: its drafts, and the run after it (`None` once the batch ended it).
#[derive(Debug)]
pub struct Checked {
    /// The run the batch went to (also when the batch opened and ended it).
    pub run_id: Uuid,
    pub drafts: Vec<EventDraft>,
    pub run: Option<ProducedRun>,
    /// True when the batch opened the run.
    pub opened: bool,
}

/// How a run ends when its producer does not end it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Someone cancelled it (REST, WebSocket, the stop button, deleting the agent).
    Cancelled,
    /// The producer sent nothing for its lease.
    LeaseExpired,
    /// The server is shutting down.
    Shutdown,
    /// The producer's one request (a piped stream without producer headers, which cannot be
    /// resumed) ended before the run did.
    Abandoned,
}

/// Checks `items` against the producer's open run (`None`: no run is open) and makes them drafts.
pub fn check_batch(
    open: Option<&ProducedRun>,
    items: Vec<ProducedEvent>,
    producer: Producer<'_>,
    limits: RunLimits,
) -> Result<Checked, Refusal> {
    if items.is_empty() {
        return Err(Refusal::batch("the batch has no events"));
    }
    let stamp = &mut Stamp::new();
    let mut run = open.cloned();
    let mut run_id = open.map(|open| open.run_id);
    let mut drafts = Vec::with_capacity(items.len() + 2);
    let mut opened = false;
    let mut ended = false;
    for (index, item) in items.into_iter().enumerate() {
        let refuse = |message: String| Refusal::at(index, message);
        if ended {
            return Err(refuse("the run ended earlier in this batch".into()));
        }
        let kind = EventKind::parse(&item.kind);
        if kind == EventKind::RunStarted {
            if index > 0 {
                return Err(refuse("run_started must be a batch's first event".into()));
            }
            if let Some(open) = &run {
                return Err(refuse(format!(
                    "run {} is still open: end it (run_completed, run_failed or run_cancelled) before starting another",
                    open.run_id
                )));
            }
            let (started, produced) = open_run(stamp, item, &producer).map_err(refuse)?;
            drafts.push(started);
            run_id = Some(produced.run_id);
            run = Some(produced);
            opened = true;
            continue;
        }
        let Some(current) = run.as_mut() else {
            return Err(Refusal {
                no_open_run: true,
                ..refuse(
                    "no run is open for this producer: begin the batch with run_started".into(),
                )
            });
        };
        if item.run_id.is_some_and(|run_id| run_id != current.run_id) {
            return Err(refuse(format!("run_id must be the open run's, {}", current.run_id)));
        }
        let made = current.event(stamp, kind, item).map_err(refuse)?;
        ended = kind.is_run_end();
        for draft in made {
            current.count(&draft, limits).map_err(|message| Refusal {
                index: Some(index),
                message,
                over_limit: true,
                no_open_run: false,
            })?;
            drafts.push(draft);
        }
    }
    // Every event either opened the run or went to the open one (refused otherwise above).
    let Some(run_id) = run_id else {
        return Err(Refusal::batch("the batch has no events"));
    };
    Ok(Checked { run_id, drafts, run: if ended { None } else { run }, opened })
}

/// `run_started`: a new run, its main thread, its lease.
fn open_run(
    stamp: &mut Stamp,
    item: ProducedEvent,
    producer: &Producer<'_>,
) -> Result<(EventDraft, ProducedRun), String> {
    if item.run_id.is_some() {
        return Err("run_id is the server's to assign: leave it out of run_started".into());
    }
    if item.delta.is_some() || item.delta_path.is_some() || item.delta_action.is_some() {
        return Err("run_started carries no delta".into());
    }
    let mut metadata = object_or_empty(item.metadata, "metadata")?;
    let lease_ms = match metadata.get("lease_ms") {
        None => PRODUCER_LEASE_MS_DEFAULT,
        Some(value) => value
            .as_u64()
            .filter(|ms| (PRODUCER_LEASE_MS_MIN..=PRODUCER_LEASE_MS_MAX).contains(ms))
            .ok_or_else(|| {
                format!("metadata.lease_ms must be a whole number of milliseconds from {PRODUCER_LEASE_MS_MIN} to {PRODUCER_LEASE_MS_MAX}")
            })?,
    };
    metadata["lease_ms"] = json!(lease_ms);
    metadata["producer"] = json!({ "id": producer.id, "epoch": producer.epoch });
    if metadata.get("provider").is_none() {
        metadata["provider"] = json!("producer");
    }
    let run = ProducedRun {
        run_id: Uuid::now_v7(),
        thread_id: item.thread_id.unwrap_or_else(Uuid::new_v4),
        lease_ms,
        calls: Vec::new(),
        messages: HashMap::new(),
        events: 1,
        bytes: 0,
        usage: Value::Null,
    };
    let mut draft = run.draft(stamp, EventKind::RunStarted, None);
    draft.content = object_or_null(item.content, "content")?;
    draft.raw = item.raw;
    draft.metadata = metadata;
    Ok((draft, run))
}

fn object_or_empty(value: Option<Value>, field: &str) -> Result<Value, String> {
    match object_or_null(value, field)? {
        Value::Null => Ok(json!({})),
        object => Ok(object),
    }
}

fn object_or_null(value: Option<Value>, field: &str) -> Result<Value, String> {
    match value {
        None | Some(Value::Null) => Ok(Value::Null),
        Some(object @ Value::Object(_)) => Ok(object),
        Some(_) => Err(format!("{field} must be a JSON object")),
    }
}

fn name_field<'a>(content: &'a Value, field: &str, kind: &str) -> Result<&'a str, String> {
    let text = content
        .get(field)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .ok_or_else(|| format!("{kind} needs content.{field}, a non-empty string"))?;
    if text.chars().count() > PRODUCED_NAME_CHARS_MAX {
        return Err(format!("content.{field} is longer than {PRODUCED_NAME_CHARS_MAX} characters"));
    }
    Ok(text)
}

mod events;
pub mod parse;
mod rebuild;

#[cfg(test)]
mod tests;
