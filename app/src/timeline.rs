//! The timeline: a pure fold of an agent's event log into what a reader sees.
//!
//! No I/O here: the browser feeds it from REST and WebSocket, the server from the store, tests from
//! literals. Delivery may repeat or reorder events; the fold applies each seq exactly once, in seq
//! order, so every delivery of the same log ends in the same timeline.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};
use uuid::Uuid;

use crate::event::{AgentEvent, DeltaAction, EventKind};

/// Events that arrived ahead of a missing seq are held until the gap is filled. Past this many the
/// newest held events are dropped again; they are re-read with the gap fill, so nothing is lost,
/// and memory stays bounded whatever a misbehaving connection sends.
pub const TIMELINE_HELD_EVENTS_MAX: usize = 4096;

/// One logical message: the merge of every event that shares a `message_id`.
#[derive(Clone, Debug, PartialEq)]
pub struct TimelineMessage {
    pub message_id: Uuid,
    pub run_id: Option<Uuid>,
    pub kind: EventKind,
    /// The merged content: the non-delta content, with every delta applied in seq order.
    pub content: Value,
    pub first_seq: u64,
    pub last_seq: u64,
    /// The newest raw provider event, for "show raw JSON".
    pub raw: Option<Value>,
}

impl TimelineMessage {
    /// The text of text-like messages (`content.text`), or "" when there is none.
    pub fn text(&self) -> &str {
        self.content.get("text").and_then(Value::as_str).unwrap_or("")
    }
}

/// Where the latest run stands, as far as the log says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunStatus {
    Running,
    Completed,
    Failed,
    Cancelled,
}

/// The folded log of one agent.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    /// Every seq up to this one has been applied.
    last_seq: u64,
    /// Events with seq > last_seq + 1, waiting for the gap before them.
    held: BTreeMap<u64, AgentEvent>,
    messages: Vec<TimelineMessage>,
    message_index: HashMap<Uuid, usize>,
    runs: Vec<(Uuid, RunStatus)>,
}

impl Timeline {
    pub fn new() -> Timeline {
        Timeline::default()
    }

    /// The cursor to resume from: every event up to it has been applied.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    pub fn messages(&self) -> &[TimelineMessage] {
        &self.messages
    }

    pub fn message(&self, message_id: Uuid) -> Option<&TimelineMessage> {
        self.message_index
            .get(&message_id)
            .map(|&index| &self.messages[index])
    }

    /// Status of each run in the order runs started.
    pub fn runs(&self) -> &[(Uuid, RunStatus)] {
        &self.runs
    }

    /// The seq range `(after, before)` that is missing, when events are held behind a gap: the
    /// caller fetches `since = after` until it has everything below `before`.
    pub fn missing(&self) -> Option<(u64, u64)> {
        self.held
            .keys()
            .next()
            .map(|&first_held| (self.last_seq, first_held))
    }

    /// Feeds events in any order, with duplicates. Returns true when the timeline changed.
    pub fn apply_all<I: IntoIterator<Item = AgentEvent>>(&mut self, events: I) -> bool {
        let mut changed = false;
        for event in events {
            changed |= self.apply(event);
        }
        changed
    }

    /// Feeds one event. Already-applied seqs are ignored; future seqs are held until the gap
    /// before them is filled. Returns true when the timeline changed.
    pub fn apply(&mut self, event: AgentEvent) -> bool {
        if event.seq <= self.last_seq {
            return false;
        }
        if event.seq > self.last_seq + 1 {
            if self.held.len() < TIMELINE_HELD_EVENTS_MAX || self.held.contains_key(&event.seq) {
                self.held.insert(event.seq, event);
            }
            return false;
        }
        self.fold(event);
        while let Some(next) = self.held.remove(&(self.last_seq + 1)) {
            self.fold(next);
        }
        true
    }

    fn fold(&mut self, event: AgentEvent) {
        debug_assert_eq!(event.seq, self.last_seq + 1, "the fold applies seqs in order");
        self.last_seq = event.seq;
        self.track_run(&event);
        let Some(message_id) = event.message_id else {
            return;
        };
        let index = match self.message_index.get(&message_id) {
            Some(&index) => index,
            None => {
                self.messages.push(TimelineMessage {
                    message_id,
                    run_id: event.run_id,
                    kind: event.kind,
                    content: Value::Null,
                    first_seq: event.seq,
                    last_seq: event.seq,
                    raw: None,
                });
                self.message_index.insert(message_id, self.messages.len() - 1);
                self.messages.len() - 1
            }
        };
        let message = &mut self.messages[index];
        message.last_seq = event.seq;
        if event.raw.is_some() {
            message.raw = event.raw;
        }
        match (event.delta, event.delta_action) {
            (Some(delta), Some(action)) => {
                apply_delta(
                    &mut message.content,
                    event.delta_path.as_deref().unwrap_or(""),
                    action,
                    delta,
                );
            }
            _ => {
                if !event.content.is_null() {
                    message.content = event.content;
                }
            }
        }
    }

    fn track_run(&mut self, event: &AgentEvent) {
        let Some(run_id) = event.run_id else { return };
        let status = match event.kind {
            EventKind::RunStarted => RunStatus::Running,
            EventKind::RunCompleted => RunStatus::Completed,
            EventKind::RunFailed => RunStatus::Failed,
            EventKind::RunCancelled => RunStatus::Cancelled,
            _ => return,
        };
        match self.runs.iter_mut().find(|(id, _)| *id == run_id) {
            Some(entry) => entry.1 = status,
            None => self.runs.push((run_id, status)),
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
            (target @ Value::Null, piece) => *target = piece,
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
mod tests {
    use super::*;
    use serde_json::json;

    fn event(seq: u64, message: u128, kind: EventKind, delta: Option<&str>) -> AgentEvent {
        AgentEvent {
            id: Uuid::from_u128(1000 + seq as u128),
            agent_id: Uuid::from_u128(1),
            seq,
            run_id: Some(Uuid::from_u128(2)),
            thread_id: None,
            block_id: None,
            message_id: Some(Uuid::from_u128(message)),
            kind,
            delta: delta.map(|text| json!(text)),
            delta_path: delta.map(|_| "text".to_owned()),
            delta_action: delta.map(|_| DeltaAction::Append),
            content: if delta.is_some() { Value::Null } else { json!({"text": "hello"}) },
            raw: None,
            metadata: Value::Null,
            created_at: Default::default(),
        }
    }

    fn log() -> Vec<AgentEvent> {
        vec![
            event(1, 10, EventKind::User, None),
            event(2, 11, EventKind::Text, Some("Hi")),
            event(3, 11, EventKind::Text, Some(" there")),
            event(4, 11, EventKind::Text, Some(".")),
        ]
    }

    #[test]
    fn deltas_merge_into_one_message() {
        let mut timeline = Timeline::new();
        timeline.apply_all(log());
        assert_eq!(timeline.messages().len(), 2);
        assert_eq!(timeline.messages()[0].text(), "hello");
        assert_eq!(timeline.messages()[1].text(), "Hi there.");
        assert_eq!(timeline.last_seq(), 4);
        assert_eq!(timeline.missing(), None);
    }

    #[test]
    fn duplicates_and_reordering_converge() {
        let mut in_order = Timeline::new();
        in_order.apply_all(log());
        let mut shuffled = Timeline::new();
        let mut events = log();
        events.reverse();
        events.extend(log());
        shuffled.apply_all(events);
        assert_eq!(shuffled.messages(), in_order.messages());
        assert_eq!(shuffled.last_seq(), 4);
    }

    #[test]
    fn a_gap_is_reported_until_filled() {
        let mut timeline = Timeline::new();
        let events = log();
        timeline.apply(events[0].clone());
        timeline.apply(events[3].clone());
        assert_eq!(timeline.missing(), Some((1, 4)));
        assert_eq!(timeline.last_seq(), 1);
        timeline.apply_all(events[1..3].iter().cloned());
        assert_eq!(timeline.missing(), None);
        assert_eq!(timeline.messages()[1].text(), "Hi there.");
    }

    #[test]
    fn delta_actions_at_paths() {
        let mut content = Value::Null;
        apply_delta(&mut content, "input.city", DeltaAction::Append, json!("Par"));
        apply_delta(&mut content, "input.city", DeltaAction::Append, json!("is"));
        apply_delta(&mut content, "", DeltaAction::Merge, json!({"status": "running"}));
        apply_delta(&mut content, "status", DeltaAction::Replace, json!("done"));
        assert_eq!(content, json!({"input": {"city": "Paris"}, "status": "done"}));
    }
}
