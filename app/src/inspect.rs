//! One run as a timeline of lanes — what the run inspector draws. Pure: from the folded log
//! ([`Timeline`]) and its event times only (`created_at`, through the reducer's per-run and
//! per-block times), so the server's render and the live view's agree.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::timeline::{RunSummary, Timeline};
use crate::EventKind;

/// What one lane is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneKind {
    /// The user's message (or a person's answer) that started the run.
    Input,
    /// One LLM call: its thinking and text.
    Model,
    /// One tool call, from its first event to its result.
    Tool,
    /// A notice (retrying, waiting) or an error.
    Notice,
}

impl LaneKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LaneKind::Input => "input",
            LaneKind::Model => "model",
            LaneKind::Tool => "tool",
            LaneKind::Notice => "notice",
        }
    }
}

/// One bar of the inspector: a block of the run, placed on the run's clock.
#[derive(Clone, Debug, PartialEq)]
pub struct Lane {
    pub block_id: Uuid,
    pub kind: LaneKind,
    pub label: String,
    /// Milliseconds from the run's start to the block's first and newest event.
    pub start_ms: i64,
    pub end_ms: i64,
    /// For a model lane: from the end of what came before it (the run's start, or the last
    /// result it waited for) to its first output — the time to first token.
    pub wait_ms: Option<i64>,
    /// For a model lane: characters of text and thinking per second of output.
    pub chars_per_second: Option<f64>,
    /// For a model lane: its events (one per token the provider streamed) per second.
    pub tokens_per_second: Option<f64>,
    /// A tool call's outcome (`done`, `error`, `awaiting_approval`, …).
    pub status: Option<String>,
}

/// A run laid out for the inspector.
#[derive(Clone, Debug, PartialEq)]
pub struct Inspection {
    pub run: RunSummary,
    pub started_at: Option<DateTime<Utc>>,
    /// Milliseconds from the start to the end (or, for a run still going, to its newest event).
    pub total_ms: i64,
    pub lanes: Vec<Lane>,
}

/// Run `run_id` of `timeline` as lanes, in the order its blocks began.
pub fn inspect(timeline: &Timeline, run_id: Uuid) -> Option<Inspection> {
    let run = timeline.run(run_id)?.clone();
    let started_at = run.started_at.or_else(|| {
        timeline
            .blocks()
            .iter()
            .find(|block| block.run_id == Some(run_id))
            .and_then(|block| block.first_at)
    });
    let since = |at: Option<DateTime<Utc>>| match (started_at, at) {
        (Some(start), Some(at)) => (at - start).num_milliseconds().max(0),
        _ => 0,
    };
    let mut lanes: Vec<Lane> = Vec::new();
    // The newest moment something before the next model call ended: its wait starts there.
    let mut ready_ms = 0;
    for block in timeline.blocks().iter().filter(|block| block.run_id == Some(run_id)) {
        let messages: Vec<_> =
            block.message_ids.iter().filter_map(|id| timeline.message(*id)).collect();
        let Some(first) = messages.first() else {
            continue;
        };
        let (start_ms, end_ms) = (since(block.first_at), since(block.last_at));
        let kind = match first.kind {
            EventKind::User | EventKind::ApprovalResponse => LaneKind::Input,
            EventKind::Text | EventKind::Thinking => LaneKind::Model,
            EventKind::ToolCall => LaneKind::Tool,
            _ => LaneKind::Notice,
        };
        let text_chars: usize = messages
            .iter()
            .filter(|message| matches!(message.kind, EventKind::Text | EventKind::Thinking))
            .map(|message| message.text().chars().count())
            .sum();
        let lane = match kind {
            LaneKind::Model => Lane {
                block_id: block.block_id,
                kind,
                label: "model call".to_owned(),
                start_ms,
                end_ms,
                wait_ms: Some((start_ms - ready_ms).max(0)),
                chars_per_second: (end_ms > start_ms)
                    .then(|| text_chars as f64 * 1000.0 / (end_ms - start_ms) as f64),
                tokens_per_second: (end_ms > start_ms)
                    .then(|| block.events as f64 * 1000.0 / (end_ms - start_ms) as f64),
                status: None,
            },
            LaneKind::Tool => Lane {
                block_id: block.block_id,
                kind,
                label: first
                    .content
                    .get("name")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("tool")
                    .to_owned(),
                start_ms,
                end_ms,
                wait_ms: None,
                chars_per_second: None,
                tokens_per_second: None,
                status: first
                    .content
                    .get("status")
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_owned),
            },
            _ => Lane {
                block_id: block.block_id,
                kind,
                label: match first.kind {
                    EventKind::User => "message".to_owned(),
                    EventKind::ApprovalResponse => "a person's answer".to_owned(),
                    other => other.as_str().replace('_', " "),
                },
                start_ms,
                end_ms,
                wait_ms: None,
                chars_per_second: None,
                tokens_per_second: None,
                status: None,
            },
        };
        ready_ms = ready_ms.max(end_ms);
        lanes.push(lane);
    }
    let newest = lanes.iter().map(|lane| lane.end_ms).max().unwrap_or(0);
    let total_ms = match run.ended_at {
        Some(ended) => since(Some(ended)).max(newest),
        None => newest,
    };
    Some(Inspection { run, started_at, total_ms, lanes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AgentEvent;
    use serde_json::{json, Value};

    fn event(seq: u64, kind: EventKind, block: u128, second: u32, content: Value) -> AgentEvent {
        AgentEvent {
            block_id: (block > 0).then(|| Uuid::from_u128(block)),
            message_id: (block > 0).then(|| Uuid::from_u128(block * 100 + seq as u128)),
            created_at: DateTime::parse_from_rfc3339(&format!("2026-01-02T03:04:{second:02}Z"))
                .unwrap()
                .with_timezone(&Utc),
            ..crate::testing::event(seq, kind, content)
        }
    }

    #[test]
    fn a_run_is_laid_out_on_its_own_clock() {
        let mut timeline = Timeline::new();
        timeline.apply_all([
            event(1, EventKind::RunStarted, 0, 0, Value::Null),
            event(2, EventKind::User, 10, 0, json!({"text": "add"})),
            event(3, EventKind::Text, 11, 2, json!({"text": "Let me add."})),
            event(
                4,
                EventKind::ToolCall,
                12,
                3,
                json!({"name": "calculator", "tool_call_id": "c", "status": "done"}),
            ),
            event(5, EventKind::ToolResult, 12, 7, json!({"tool_call_id": "c", "result": 5})),
            event(6, EventKind::Text, 13, 8, json!({"text": "It is 5."})),
            event(7, EventKind::Text, 13, 10, json!({"text": "It is 5."})),
            event(8, EventKind::RunCompleted, 0, 11, json!({"stop_reason": "end_turn"})),
        ]);
        let inspection = inspect(&timeline, Uuid::from_u128(2)).unwrap();
        assert_eq!(inspection.total_ms, 11_000);
        let lanes: Vec<(LaneKind, &str, i64, i64, Option<i64>)> = inspection
            .lanes
            .iter()
            .map(|lane| (lane.kind, lane.label.as_str(), lane.start_ms, lane.end_ms, lane.wait_ms))
            .collect();
        assert_eq!(
            lanes,
            [
                (LaneKind::Input, "message", 0, 0, None),
                (LaneKind::Model, "model call", 2_000, 2_000, Some(2_000)),
                (LaneKind::Tool, "calculator", 3_000, 7_000, None),
                // The second call waited from the result (7 s) to its first token (8 s).
                (LaneKind::Model, "model call", 8_000, 10_000, Some(1_000)),
            ]
        );
        assert_eq!(inspection.lanes[2].status.as_deref(), Some("done"));
        let tokens = inspection.lanes[3].tokens_per_second.unwrap();
        assert!((tokens - 2.0 / 2.0).abs() < 1e-9, "two events in 2 s: {tokens}");
        let speed = inspection.lanes[3].chars_per_second.unwrap();
        // Two messages of 8 characters in 2 s.
        assert!((speed - 16.0 / 2.0).abs() < 1e-9, "{speed}");
        assert!(inspect(&timeline, Uuid::from_u128(99)).is_none());
    }
}
