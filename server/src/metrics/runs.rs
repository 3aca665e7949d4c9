//! Runs as the log states them: started, ended (by outcome and stop reason) and how long they
//! took, read off the events the writer committed. Whoever wrote a run — this server's loop,
//! start-up recovery, the approval sweeper, another process's lease expiry — its end is counted
//! once, when it is committed. Pure: events in, observations out.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use app::{AgentEvent, EventKind};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::labels::bounded;
use crate::limits::LABEL_VALUES_MAX;

/// Runs whose start the fold remembers to time their end. Past this the oldest is forgotten
/// (its end is still counted, without a duration): a run open that long is an outlier, and the
/// map must not grow with runs that never end on this server.
pub const RUNS_TIMED_MAX: usize = 16_384;

/// Stop reasons a run's end may carry that get a label of their own; others count as `other`.
pub const STOP_REASONS: &[&str] = &[
    "end_turn",
    "stop_sequence",
    "max_tokens",
    "tool_use",
    "max_iterations",
    "requires_approval",
    "requires_client_tool",
    "max_events",
    "max_bytes",
    "cancelled",
    "error",
    "refusal",
    "pause_turn",
];

/// What one committed event says of runs.
#[derive(Clone, Debug, PartialEq)]
pub enum RunObservation {
    Started,
    Ended {
        outcome: &'static str,
        stop_reason: &'static str,
        /// From the run's `run_started` to its end, on the log's clock, when the start was seen.
        seconds: Option<f64>,
    },
}

/// The fold: the start time of each run seen starting and not yet ended.
#[derive(Default)]
pub struct RunTimes {
    started: HashMap<Uuid, DateTime<Utc>>,
    order: VecDeque<Uuid>,
}

impl RunTimes {
    pub fn observe(&mut self, event: &AgentEvent) -> Option<RunObservation> {
        let run_id = event.run_id?;
        match event.kind {
            EventKind::RunStarted => {
                if self.started.insert(run_id, event.created_at).is_none() {
                    self.order.push_back(run_id);
                    while self.order.len() > RUNS_TIMED_MAX {
                        if let Some(oldest) = self.order.pop_front() {
                            self.started.remove(&oldest);
                        }
                    }
                }
                Some(RunObservation::Started)
            }
            kind if kind.is_run_end() => {
                let seconds = self.started.remove(&run_id).map(|started| {
                    (event.created_at - started).to_std().unwrap_or_default().as_secs_f64()
                });
                // Ended runs leave the order lazily: a forgotten id only costs its slot until
                // it reaches the front.
                if self.order.len() > self.started.len() * 2 + 64 {
                    let started = &self.started;
                    self.order.retain(|id| started.contains_key(id));
                }
                let stop_reason = event
                    .content
                    .get("stop_reason")
                    .and_then(|reason| reason.as_str())
                    .unwrap_or("");
                Some(RunObservation::Ended {
                    outcome: match kind {
                        EventKind::RunCompleted => "completed",
                        EventKind::RunFailed => "failed",
                        _ => "cancelled",
                    },
                    stop_reason: bounded(stop_reason, STOP_REASONS),
                    seconds,
                })
            }
            _ => None,
        }
    }
}

/// Label values from outside (tool names, MCP server names), kept to the first
/// [`LABEL_VALUES_MAX`] distinct ones; later ones are `other`.
#[derive(Debug, Default)]
pub struct Names {
    /// A std mutex: held for a map look-up only.
    known: Mutex<HashMap<String, Arc<str>>>,
}

impl Names {
    pub fn bounded(&self, name: &str) -> Arc<str> {
        let mut known = self.known.lock().unwrap_or_else(|poison| poison.into_inner());
        if let Some(value) = known.get(name) {
            return value.clone();
        }
        if known.len() >= LABEL_VALUES_MAX {
            return Arc::from("other");
        }
        let value: Arc<str> = Arc::from(name);
        known.insert(name.to_owned(), value.clone());
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(run: u128, kind: EventKind, at_ms: i64, content: serde_json::Value) -> AgentEvent {
        AgentEvent {
            run_id: Some(Uuid::from_u128(run)),
            metadata: json!({}),
            created_at: DateTime::from_timestamp_millis(at_ms).unwrap(),
            ..AgentEvent::bare(Uuid::new_v4(), Uuid::nil(), 1, kind, content)
        }
    }

    #[test]
    fn runs_are_counted_from_their_committed_start_and_end() {
        let cases: Vec<(&str, Vec<AgentEvent>, Vec<RunObservation>)> = vec![
            (
                "a completed run, timed on the log's clock",
                vec![
                    event(1, EventKind::RunStarted, 1_000, json!({})),
                    event(1, EventKind::Text, 1_200, json!({})),
                    event(1, EventKind::RunCompleted, 3_500, json!({"stop_reason": "end_turn"})),
                ],
                vec![
                    RunObservation::Started,
                    RunObservation::Ended {
                        outcome: "completed",
                        stop_reason: "end_turn",
                        seconds: Some(2.5),
                    },
                ],
            ),
            (
                "an end whose start this server never saw (another server's run, recovery)",
                vec![event(2, EventKind::RunFailed, 9, json!({"stop_reason": "error"}))],
                vec![RunObservation::Ended {
                    outcome: "failed",
                    stop_reason: "error",
                    seconds: None,
                }],
            ),
            (
                "a stop reason from outside the known set is 'other'",
                vec![
                    event(3, EventKind::RunStarted, 0, json!({})),
                    event(3, EventKind::RunCancelled, 0, json!({"stop_reason": "x".repeat(300)})),
                ],
                vec![
                    RunObservation::Started,
                    RunObservation::Ended {
                        outcome: "cancelled",
                        stop_reason: "other",
                        seconds: Some(0.0),
                    },
                ],
            ),
            (
                "an end without a stop reason, and events without a run",
                vec![
                    event(4, EventKind::RunCompleted, 0, json!(null)),
                    AgentEvent { run_id: None, ..event(5, EventKind::RunStarted, 0, json!({})) },
                ],
                vec![RunObservation::Ended {
                    outcome: "completed",
                    stop_reason: "other",
                    seconds: None,
                }],
            ),
        ];
        for (name, events, expected) in cases {
            let mut times = RunTimes::default();
            let seen: Vec<_> = events.iter().filter_map(|e| times.observe(e)).collect();
            assert_eq!(seen, expected, "{name}");
            assert!(times.started.is_empty(), "{name}: every run ended");
        }
    }

    #[test]
    fn the_runs_it_times_are_bounded() {
        let mut times = RunTimes::default();
        for run in 0..(RUNS_TIMED_MAX as u128 + 10) {
            times.observe(&event(run, EventKind::RunStarted, 0, json!({})));
        }
        assert_eq!(times.started.len(), RUNS_TIMED_MAX);
        assert!(!times.started.contains_key(&Uuid::from_u128(0)), "the oldest forgotten");
        let ended = times.observe(&event(0, EventKind::RunCompleted, 5, json!({})));
        assert!(matches!(ended, Some(RunObservation::Ended { seconds: None, .. })));
        // Ending them all keeps the order list from growing past what is open.
        for run in 10..(RUNS_TIMED_MAX as u128 + 10) {
            times.observe(&event(run, EventKind::RunCompleted, 5, json!({})));
        }
        assert!(times.started.is_empty());
        assert!(times.order.len() <= 64, "{}", times.order.len());
    }

    #[test]
    fn outside_names_are_cut_to_a_bounded_set() {
        let names = Names::default();
        assert_eq!(&*names.bounded("clock"), "clock");
        for index in 0..LABEL_VALUES_MAX * 2 {
            names.bounded(&format!("tool-{index}"));
        }
        assert_eq!(&*names.bounded("clock"), "clock", "known names keep their label");
        assert_eq!(&*names.bounded("a-new-one"), "other");
    }
}
