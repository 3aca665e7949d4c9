//! What the fold is made of: messages (the merge of one `message_id`'s events), blocks (one
//! LLM call or tool call), and a run's summary with its status.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::event::EventKind;

/// One logical message: the merge of every event that shares a `message_id`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimelineMessage {
    pub message_id: Uuid,
    pub block_id: Uuid,
    pub run_id: Option<Uuid>,
    pub thread_id: Option<Uuid>,
    pub kind: EventKind,
    /// The merged content: whole contents replace it, deltas change it in seq order.
    pub content: Value,
    pub first_seq: u64,
    pub last_seq: u64,
    /// The newest raw provider event, for "show raw JSON". Only the newest is kept, so memory
    /// follows the content, not the number of deltas.
    pub raw: Option<Value>,
}

impl TimelineMessage {
    /// The text of text-like messages (`content.text`), or "" when there is none.
    pub fn text(&self) -> &str {
        self.content.get("text").and_then(Value::as_str).unwrap_or("")
    }
}

/// One UI block: one LLM call, one tool call, one user message.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TimelineBlock {
    pub block_id: Uuid,
    pub run_id: Option<Uuid>,
    pub thread_id: Option<Uuid>,
    pub first_seq: u64,
    /// Message ids in order of first appearance.
    pub message_ids: Vec<Uuid>,
    /// When the block's first and newest events were made (their `created_at`; a merged
    /// event counts at its last event's time): how long an LLM call or a tool call took.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::time::deserialize_option"
    )]
    pub first_at: Option<DateTime<Utc>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::time::deserialize_option"
    )]
    pub last_at: Option<DateTime<Utc>>,
    /// Events of the block (a merged event counts the seqs it stands for): for a model call,
    /// about one per token.
    #[serde(default)]
    pub events: u64,
}

/// Equal when they hold the same: `first_at` is left out. A merged event (coalesced delivery)
/// carries its last token's time only, so a block that begins with one starts a little later
/// than in a fold of every seq; every delivery of a log still ends in the same timeline.
impl PartialEq for TimelineBlock {
    fn eq(&self, other: &TimelineBlock) -> bool {
        self.block_id == other.block_id
            && self.run_id == other.run_id
            && self.thread_id == other.thread_id
            && self.first_seq == other.first_seq
            && self.message_ids == other.message_ids
            && self.last_at == other.last_at
            && self.events == other.events
    }
}

/// Where a run stands, as far as the log says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Running,
    Completed,
    Failed,
    Cancelled,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }
}

/// One run: its status, usage and outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub run_id: Uuid,
    pub status: RunStatus,
    /// The newest usage the log reported (providers report it cumulatively).
    pub usage: Option<Value>,
    pub stop_reason: Option<String>,
    /// `{type, message}` when the run failed.
    pub error: Option<Value>,
    /// Threads of this run in order of first appearance.
    pub thread_ids: Vec<Uuid>,
    /// When the run started and ended (`created_at` of its `run_started` and of its end): the
    /// log's own clock, no other.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::time::deserialize_option"
    )]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::time::deserialize_option"
    )]
    pub ended_at: Option<DateTime<Utc>>,
    /// For a run that carries out a person's answer to an approval request: the first run of
    /// the turn it continues (`run_started`'s `metadata.continues`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continues: Option<Uuid>,
    /// The log its `run_started` is in: on a branch, a run of the shared prefix is its
    /// ancestor's (`None` in snapshots saved before branches: the folded log's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<Uuid>,
    pub first_seq: u64,
    /// The run's trace, when the server exported one (`run_started`'s `metadata.trace_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}
