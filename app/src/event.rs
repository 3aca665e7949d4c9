//! `AgentEvent`: the one record type of the per-agent log.
//!
//! Defined once here and compiled for the server and for wasm32, so the browser, the server, the
//! database conversion and the tests all agree on one shape. The server's database row is a
//! separate type with an explicit conversion (`server::store`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// One event of an agent's append-only log.
///
/// `seq` is assigned by the writer when the event is committed: 1, 2, 3 … per agent with no gap.
/// It is the cursor every client resumes from and the SSE `id:`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentEvent {
    /// Globally unique; the dedup key across retries.
    pub id: Uuid,
    pub agent_id: Uuid,
    pub seq: u64,
    /// Set only on an event the server merged for a slow subscriber that asked for it (see
    /// [`crate::coalesce`]): this one event stands for seqs `coalesced_from..=seq`, every one of
    /// them a string append to the same message. Never stored; the log holds each seq.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coalesced_from: Option<u64>,
    /// The run (one user turn and everything the agent does for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<Uuid>,
    /// A concurrent stream within a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<Uuid>,
    /// A UI block: one LLM call or one tool call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_id: Option<Uuid>,
    /// The logical message that deltas merge into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<Uuid>,
    pub kind: EventKind,
    /// The change this event makes to its message, when it is a delta.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<Value>,
    /// Dot-separated path into the message content the delta applies to (`""` = the root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_action: Option<DeltaAction>,
    /// The whole payload for non-delta events (user text, usage, error, stop reason …).
    #[serde(default)]
    pub content: Value,
    /// The provider's original event, for "show raw JSON" and debugging.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<Value>,
    /// Provider, model, timings.
    #[serde(default)]
    pub metadata: Value,
    #[serde(deserialize_with = "crate::time::deserialize")]
    pub created_at: DateTime<Utc>,
}

impl AgentEvent {
    /// An event of `kind` at `seq` with its content and nothing else: no run, thread, block or
    /// message, no delta, null metadata, created at the epoch. The rest is set with struct
    /// update syntax (`AgentEvent { run_id, ..AgentEvent::bare(…) }`), so a builder names only
    /// what it means.
    pub fn bare(id: Uuid, agent_id: Uuid, seq: u64, kind: EventKind, content: Value) -> AgentEvent {
        AgentEvent {
            id,
            agent_id,
            seq,
            coalesced_from: None,
            run_id: None,
            thread_id: None,
            block_id: None,
            message_id: None,
            kind,
            delta: None,
            delta_path: None,
            delta_action: None,
            content,
            raw: None,
            metadata: Value::Null,
            created_at: DateTime::<Utc>::default(),
        }
    }

    /// Where the event lands: see [`Place`].
    pub fn place(&self) -> Place<'_> {
        Place {
            kind: self.kind,
            run_id: self.run_id,
            thread_id: self.thread_id,
            block_id: self.block_id,
            message_id: self.message_id,
            delta_path: self.delta_path.as_deref(),
        }
    }

    /// The first seq this event stands for: its own, or the first of those merged into it.
    pub fn first_seq(&self) -> u64 {
        self.coalesced_from.unwrap_or(self.seq)
    }
}

/// Where an event lands: its kind, run, thread, block, message and delta path. Consecutive
/// string appends at one place are one growing text (what coalescing merges and the log stores
/// as one row).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place<'a> {
    pub kind: EventKind,
    pub run_id: Option<Uuid>,
    pub thread_id: Option<Uuid>,
    pub block_id: Option<Uuid>,
    pub message_id: Option<Uuid>,
    pub delta_path: Option<&'a str>,
}

/// What an event is. Unknown kinds from newer servers deserialize as `Other` rather than failing,
/// so an older client keeps working.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    User,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    Loading,
    Usage,
    RunStarted,
    RunCompleted,
    RunFailed,
    RunCancelled,
    Error,
    /// A tool call waits for a person's answer (`content`: `tool_call_id`, `name`, `input`);
    /// the run that asked ends with stop reason `requires_approval`.
    ApprovalRequested,
    /// The answer to an approval request (`content`: `tool_call_id`, `approve`, `reason`): the
    /// first event after `run_started` of the run it starts.
    ApprovalResponse,
    /// One message of a durable stream (`/v1/streams/…`): `content` is a string holding the
    /// message's JSON text as the producer sent it (in byte mode, `{"bytes": <base64>}`), so the
    /// server checks it once and copies it from then on. Only a stream's log holds these.
    StreamMessage,
    #[serde(other)]
    Other,
}

impl EventKind {
    /// The stable name used on the wire and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::User => "user",
            EventKind::Text => "text",
            EventKind::Thinking => "thinking",
            EventKind::ToolCall => "tool_call",
            EventKind::ToolResult => "tool_result",
            EventKind::Loading => "loading",
            EventKind::Usage => "usage",
            EventKind::RunStarted => "run_started",
            EventKind::RunCompleted => "run_completed",
            EventKind::RunFailed => "run_failed",
            EventKind::RunCancelled => "run_cancelled",
            EventKind::Error => "error",
            EventKind::ApprovalRequested => "approval_requested",
            EventKind::ApprovalResponse => "approval_response",
            EventKind::StreamMessage => "stream_message",
            EventKind::Other => "other",
        }
    }

    /// Every kind but `Other`.
    pub const KNOWN: [EventKind; 15] = [
        EventKind::User,
        EventKind::Text,
        EventKind::Thinking,
        EventKind::ToolCall,
        EventKind::ToolResult,
        EventKind::Loading,
        EventKind::Usage,
        EventKind::RunStarted,
        EventKind::RunCompleted,
        EventKind::RunFailed,
        EventKind::RunCancelled,
        EventKind::Error,
        EventKind::ApprovalRequested,
        EventKind::ApprovalResponse,
        EventKind::StreamMessage,
    ];

    /// The inverse of [`EventKind::as_str`]; unknown names map to `Other`. A plain match: it
    /// runs for every event read from the log (through serde it was a string copy and a tree).
    pub fn parse(name: &str) -> EventKind {
        EventKind::KNOWN.into_iter().find(|kind| kind.as_str() == name).unwrap_or(EventKind::Other)
    }

    /// True for the kinds that end a run.
    pub fn is_run_end(self) -> bool {
        matches!(self, EventKind::RunCompleted | EventKind::RunFailed | EventKind::RunCancelled)
    }
}

/// How a delta changes its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeltaAction {
    /// Append a string to the string at `delta_path`.
    Append,
    /// Replace the value at `delta_path`.
    Replace,
    /// Merge an object into the object at `delta_path` (keys of the delta win).
    Merge,
}

impl DeltaAction {
    pub fn as_str(self) -> &'static str {
        match self {
            DeltaAction::Append => "append",
            DeltaAction::Replace => "replace",
            DeltaAction::Merge => "merge",
        }
    }

    pub fn parse(name: &str) -> Option<DeltaAction> {
        [DeltaAction::Append, DeltaAction::Replace, DeltaAction::Merge]
            .into_iter()
            .find(|action| action.as_str() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The database and the server's hand-written JSON use `as_str`; clients use serde. They
    /// must agree, and `parse` must invert both.
    #[test]
    fn kind_names_round_trip() {
        for kind in EventKind::KNOWN.into_iter().chain([EventKind::Other]) {
            assert_eq!(serde_json::to_value(kind).unwrap(), Value::String(kind.as_str().into()));
        }
        for kind in EventKind::KNOWN {
            assert_eq!(EventKind::parse(kind.as_str()), kind);
            assert_eq!(serde_json::from_value::<EventKind>(kind.as_str().into()).unwrap(), kind);
        }
        assert_eq!(EventKind::parse("kind_from_the_future"), EventKind::Other);
        for action in [DeltaAction::Append, DeltaAction::Replace, DeltaAction::Merge] {
            assert_eq!(
                serde_json::to_value(action).unwrap(),
                Value::String(action.as_str().into())
            );
            assert_eq!(DeltaAction::parse(action.as_str()), Some(action));
        }
        assert_eq!(DeltaAction::parse("prepend"), None);
    }

    #[test]
    fn event_json_omits_empty_optionals_and_round_trips() {
        let event = AgentEvent {
            id: Uuid::nil(),
            agent_id: Uuid::nil(),
            seq: 7,
            coalesced_from: None,
            run_id: None,
            thread_id: None,
            block_id: None,
            message_id: None,
            kind: EventKind::Text,
            delta: Some(Value::String("hi".into())),
            delta_path: Some("text".into()),
            delta_action: Some(DeltaAction::Append),
            content: Value::Null,
            raw: None,
            metadata: Value::Null,
            created_at: DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z")
                .unwrap()
                .with_timezone(&Utc),
        };
        let json = serde_json::to_value(&event).unwrap();
        assert!(json.get("run_id").is_none());
        assert!(json.get("coalesced_from").is_none());
        assert_eq!(json["kind"], "text");
        assert_eq!(json["delta_action"], "append");
        let back: AgentEvent = serde_json::from_value(json).unwrap();
        assert_eq!(back, event);
    }
}
