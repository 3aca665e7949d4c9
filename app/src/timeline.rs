//! The timeline: a pure fold of an agent's event log into what a reader sees.
//!
//! No I/O here: the browser feeds it from REST and WebSocket, the server from the store (history
//! pages), tests from literals. Delivery may repeat, reorder or drop events; the fold applies each
//! seq exactly once, in seq order, so every delivery of the same log that is eventually complete
//! ends in the same timeline (the property test below checks exactly that).
//!
//! The shape follows the hierarchy of the log: a run holds threads (concurrent streams), a thread
//! holds blocks (one LLM call, one tool call), a block holds messages (what deltas merge into).
//! Blocks and messages keep the order in which they first appeared in the log.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::event::{AgentEvent, DeltaAction, EventKind};

mod parts;
pub use parts::{RunStatus, RunSummary, TimelineBlock, TimelineMessage};

/// Events that arrived ahead of a missing seq are held until the gap is filled. Past this many the
/// newest held events are dropped again; they are re-read with the gap fill, so nothing is lost,
/// and memory stays bounded whatever a misbehaving connection sends.
pub const TIMELINE_HELD_EVENTS_MAX: usize = 4096;

/// The folded log of one agent. Serializable, so the server can fold history and hand the result
/// to the browser, which carries on folding live events into it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// Every seq up to this one has been applied.
    last_seq: u64,
    /// Seqs `1..=omitted_through` were left out on purpose: the fold started later in a long
    /// log ([`Timeline::starting_after`]). 0 for a fold from the start.
    #[serde(default)]
    omitted_through: u64,
    /// Events with a first seq > last_seq + 1, waiting for the gaps before them, keyed by that
    /// first seq (a merged event's `coalesced_from`, otherwise its seq).
    #[serde(skip)]
    held: BTreeMap<u64, AgentEvent>,
    /// Ids of the held events, so a re-sent early event is recognised without a scan.
    #[serde(skip)]
    held_ids: HashSet<Uuid>,
    blocks: Vec<TimelineBlock>,
    block_index: HashMap<Uuid, usize>,
    messages: Vec<TimelineMessage>,
    message_index: HashMap<Uuid, usize>,
    runs: Vec<RunSummary>,
    run_index: HashMap<Uuid, usize>,
}

impl Timeline {
    pub fn new() -> Timeline {
        Timeline::default()
    }

    /// A timeline that leaves out seqs `1..=seq`: the fold of a long log's tail, which starts
    /// at a run's first event so every message it holds is whole.
    pub fn starting_after(seq: u64) -> Timeline {
        Timeline { last_seq: seq, omitted_through: seq, ..Timeline::default() }
    }

    /// The seqs left out at the start (`1..=omitted_through`); 0 when none were.
    pub fn omitted_through(&self) -> u64 {
        self.omitted_through
    }

    /// Leaves out what began before `seq` (a run's first event): the runs, blocks and messages
    /// that started earlier go, and [`Timeline::omitted_through`] says so. Keeps a timeline that
    /// lives on (a snapshot the server keeps folding into) within a window of its log.
    pub fn forget_before(&mut self, seq: u64) {
        let seq = seq.min(self.last_seq + 1);
        if seq <= self.omitted_through + 1 {
            return;
        }
        self.messages.retain(|message| message.first_seq >= seq);
        self.blocks.retain(|block| block.first_seq >= seq);
        self.runs.retain(|run| run.first_seq >= seq);
        self.message_index = (self.messages.iter().enumerate())
            .map(|(index, message)| (message.message_id, index))
            .collect();
        self.block_index = (self.blocks.iter().enumerate())
            .map(|(index, block)| (block.block_id, index))
            .collect();
        self.run_index =
            (self.runs.iter().enumerate()).map(|(index, run)| (run.run_id, index)).collect();
        for block in &mut self.blocks {
            let kept = &self.message_index;
            block.message_ids.retain(|id| kept.contains_key(id));
        }
        self.omitted_through = seq - 1;
    }

    /// The cursor to resume from: every event up to it has been applied.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Blocks in order of first appearance.
    pub fn blocks(&self) -> &[TimelineBlock] {
        &self.blocks
    }

    /// Messages in order of first appearance.
    pub fn messages(&self) -> &[TimelineMessage] {
        &self.messages
    }

    pub fn message(&self, message_id: Uuid) -> Option<&TimelineMessage> {
        self.message_index.get(&message_id).map(|&index| &self.messages[index])
    }

    pub fn block(&self, block_id: Uuid) -> Option<&TimelineBlock> {
        self.block_index.get(&block_id).map(|&index| &self.blocks[index])
    }

    /// Runs in the order they started.
    pub fn runs(&self) -> &[RunSummary] {
        &self.runs
    }

    pub fn run(&self, run_id: Uuid) -> Option<&RunSummary> {
        self.run_index.get(&run_id).map(|&index| &self.runs[index])
    }

    /// The result message of a tool call, found by the call's `tool_call_id`.
    pub fn tool_result(&self, tool_call_id: &str) -> Option<&TimelineMessage> {
        self.messages.iter().find(|message| {
            message.kind == EventKind::ToolResult
                && message.content.get("tool_call_id").and_then(Value::as_str) == Some(tool_call_id)
        })
    }

    /// Tool calls the model made together (one step's calls): consecutive tool-call blocks of a
    /// run, with no other block between. Each block of a group of two or more, to its place in
    /// the group and the group's size — what a page shows as "called 3 tools at once".
    pub fn call_groups(&self) -> HashMap<Uuid, (usize, usize)> {
        let is_call = |block: &TimelineBlock| {
            block.message_ids.first().is_some_and(|id| {
                self.message(*id).is_some_and(|message| message.kind == EventKind::ToolCall)
            })
        };
        let mut groups = HashMap::new();
        let mut group: Vec<&TimelineBlock> = Vec::new();
        let mut flush = |group: &mut Vec<&TimelineBlock>| {
            if group.len() >= 2 {
                for (index, block) in group.iter().enumerate() {
                    groups.insert(block.block_id, (index, group.len()));
                }
            }
            group.clear();
        };
        for block in &self.blocks {
            let joins = is_call(block)
                && group.last().is_none_or(|previous| previous.run_id == block.run_id);
            if !joins {
                flush(&mut group);
            }
            if is_call(block) {
                group.push(block);
            }
        }
        flush(&mut group);
        groups
    }

    /// Events held behind a gap.
    pub fn held_count(&self) -> usize {
        self.held.len()
    }

    /// The first missing range `(after, before)`: seqs `after + 1 .. before` are missing. The
    /// caller fetches `since = after`.
    pub fn missing(&self) -> Option<(u64, u64)> {
        self.missing_ranges().into_iter().next()
    }

    /// Every missing range `(after, before)` below the newest held event, in order.
    pub fn missing_ranges(&self) -> Vec<(u64, u64)> {
        let mut ranges = Vec::new();
        let mut previous = self.last_seq;
        for event in self.held.values() {
            let first = event.first_seq();
            if first > previous + 1 {
                ranges.push((previous, first));
            }
            previous = previous.max(event.seq);
        }
        ranges
    }

    /// Feeds events in any order, with duplicates. Returns true when the timeline changed.
    pub fn apply_all<I: IntoIterator<Item = AgentEvent>>(&mut self, events: I) -> bool {
        let mut changed = false;
        for event in events {
            changed |= self.apply(event);
        }
        changed
    }

    /// Feeds one event. Already-applied seqs are dropped (dedup by seq; ids are unique per seq,
    /// so this is dedup by id as well); future seqs are held until the gap before them is filled,
    /// and a held seq or id is not held twice. Returns true when the timeline changed.
    ///
    /// A merged event ([`crate::coalesce`]) stands for seqs `first_seq()..=seq` and applies as a
    /// whole when `first_seq()` is next. One that is partly applied already (a gap fill read some
    /// of its seqs one by one) cannot be split and is dropped: the seqs after the cursor come
    /// again one by one with the next gap fill, so nothing is lost and nothing applies twice.
    pub fn apply(&mut self, event: AgentEvent) -> bool {
        let first = event.first_seq();
        if first <= self.last_seq {
            return false;
        }
        if first > self.last_seq + 1 {
            let already_held = self.held.contains_key(&first) || self.held_ids.contains(&event.id);
            if !already_held && self.held.len() < TIMELINE_HELD_EVENTS_MAX {
                self.held_ids.insert(event.id);
                self.held.insert(first, event);
            }
            return false;
        }
        self.fold(event);
        loop {
            // Held events that start at or before the cursor are applied already, or partly
            // (an overlapping merged event): they can no longer apply.
            while let Some(entry) = self.held.first_entry() {
                if *entry.key() > self.last_seq {
                    break;
                }
                let stale = entry.remove();
                self.held_ids.remove(&stale.id);
            }
            let Some(next) = self.held.remove(&(self.last_seq + 1)) else {
                break;
            };
            self.held_ids.remove(&next.id);
            self.fold(next);
        }
        true
    }

    fn fold(&mut self, event: AgentEvent) {
        debug_assert_eq!(event.first_seq(), self.last_seq + 1, "the fold applies seqs in order");
        self.last_seq = event.seq;
        match event.kind {
            EventKind::RunStarted
            | EventKind::RunCompleted
            | EventKind::RunFailed
            | EventKind::RunCancelled
            | EventKind::Usage => self.fold_run(&event),
            _ => self.fold_message(event),
        }
    }

    fn run_entry(&mut self, run_id: Uuid, seq: u64) -> &mut RunSummary {
        let index = match self.run_index.get(&run_id) {
            Some(&index) => index,
            None => {
                self.runs.push(RunSummary {
                    run_id,
                    status: RunStatus::Running,
                    usage: None,
                    stop_reason: None,
                    error: None,
                    thread_ids: Vec::new(),
                    first_seq: seq,
                    started_at: None,
                    ended_at: None,
                    continues: None,
                    log: None,
                    trace_id: None,
                });
                self.run_index.insert(run_id, self.runs.len() - 1);
                self.runs.len() - 1
            }
        };
        &mut self.runs[index]
    }

    fn fold_run(&mut self, event: &AgentEvent) {
        let Some(run_id) = event.run_id else { return };
        let run = self.run_entry(run_id, event.first_seq());
        let stop_reason =
            event.content.get("stop_reason").and_then(Value::as_str).map(str::to_owned);
        if event.kind.is_run_end() {
            run.ended_at = Some(event.created_at);
        }
        match event.kind {
            EventKind::RunStarted => {
                run.status = RunStatus::Running;
                run.started_at = Some(event.created_at);
                run.log = Some(event.agent_id);
                run.continues = event
                    .metadata
                    .get("continues")
                    .and_then(Value::as_str)
                    .and_then(|id| id.parse().ok());
                run.trace_id = event
                    .metadata
                    .get("trace_id")
                    .and_then(Value::as_str)
                    .filter(|id| id.len() == 32 && id.bytes().all(|byte| byte.is_ascii_hexdigit()))
                    .map(str::to_owned);
            }
            EventKind::Usage => run.usage = Some(event.content.clone()),
            EventKind::RunCompleted => {
                run.status = RunStatus::Completed;
                run.stop_reason = stop_reason;
                if let Some(usage) = event.content.get("usage").filter(|usage| !usage.is_null()) {
                    run.usage = Some(usage.clone());
                }
            }
            EventKind::RunFailed => {
                run.status = RunStatus::Failed;
                run.stop_reason = stop_reason;
                run.error = event.content.get("error").cloned();
            }
            EventKind::RunCancelled => {
                run.status = RunStatus::Cancelled;
                run.stop_reason = stop_reason;
            }
            _ => {}
        }
    }

    fn fold_message(&mut self, event: AgentEvent) {
        // Scenario 1 of the streaming design: an event without a message id is a message of its
        // own, and a message without a block is a block of its own.
        let message_id = event.message_id.unwrap_or(event.id);
        let block_id = event.block_id.unwrap_or(message_id);
        // Where a merged event's run, block or message begins: at the first seq it stands for.
        let first_seq = event.first_seq();
        if let Some(run_id) = event.run_id {
            let run = self.run_entry(run_id, first_seq);
            if let Some(thread_id) = event.thread_id {
                if !run.thread_ids.contains(&thread_id) {
                    run.thread_ids.push(thread_id);
                }
            }
        }
        if !self.block_index.contains_key(&block_id) {
            self.blocks.push(TimelineBlock {
                block_id,
                run_id: event.run_id,
                thread_id: event.thread_id,
                first_seq,
                message_ids: Vec::new(),
                first_at: Some(event.created_at),
                last_at: None,
                events: 0,
            });
            self.block_index.insert(block_id, self.blocks.len() - 1);
        }
        let block = &mut self.blocks[self.block_index[&block_id]];
        block.last_at = Some(event.created_at);
        block.events += event.seq - first_seq + 1;
        let index = match self.message_index.get(&message_id) {
            Some(&index) => index,
            None => {
                self.messages.push(TimelineMessage {
                    message_id,
                    block_id,
                    run_id: event.run_id,
                    thread_id: event.thread_id,
                    kind: event.kind,
                    content: Value::Null,
                    first_seq,
                    last_seq: event.seq,
                    raw: None,
                });
                self.message_index.insert(message_id, self.messages.len() - 1);
                let block = &mut self.blocks[self.block_index[&block_id]];
                block.message_ids.push(message_id);
                self.messages.len() - 1
            }
        };
        let message = &mut self.messages[index];
        message.last_seq = event.seq;
        if event.raw.is_some() {
            message.raw = event.raw;
        }
        match (event.delta, event.delta_action) {
            (Some(delta), Some(action)) => apply_delta(
                &mut message.content,
                event.delta_path.as_deref().unwrap_or(""),
                action,
                delta,
            ),
            _ => {
                if !event.content.is_null() {
                    message.content = event.content;
                }
            }
        }
    }
}

/// Applies one delta to `content` at a dot-separated `path` ("" = the root). Intermediate objects
/// are created as needed; a value of the wrong type at the path is replaced, never panicked on.
pub fn apply_delta(content: &mut Value, path: &str, action: DeltaAction, delta: Value) {
    let mut target = content;
    for key in path.split('.').filter(|key| !key.is_empty()) {
        if !target.is_object() {
            *target = Value::Object(Map::new());
        }
        target = target
            .as_object_mut()
            .expect("made an object above")
            .entry(key.to_owned())
            .or_insert(Value::Null);
    }
    match action {
        DeltaAction::Append => match (target, delta) {
            (Value::String(existing), Value::String(piece)) => existing.push_str(&piece),
            (target, piece) => *target = piece,
        },
        DeltaAction::Replace => *target = delta,
        DeltaAction::Merge => match (target, delta) {
            (Value::Object(existing), Value::Object(piece)) => existing.extend(piece),
            (target, piece) => *target = piece,
        },
    }
}

#[cfg(test)]
mod tests;
