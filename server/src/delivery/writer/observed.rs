//! What the writer counts: its commits (after they commit) and runs as their events commit
//! ([`RunTimes`]), so every writer of a run's end is counted alike.

use std::sync::Arc;

use crate::metrics::runs::{RunObservation, RunTimes};
use crate::metrics::Metrics;
use app::AgentEvent;

/// What the writer counts: its commits, and runs as their events commit.
pub(super) struct Observed {
    pub(super) metrics: Arc<Metrics>,
    runs: RunTimes,
    /// False for a writer that counts nothing (`Writer::spawn_with`).
    counting: bool,
}

impl Observed {
    pub(super) fn new(metrics: Arc<Metrics>, counting: bool) -> Observed {
        Observed { metrics, runs: RunTimes::default(), counting }
    }

    /// A group went to the store while the one before it was still committing.
    pub(super) fn sent_ahead(&self) {
        if self.counting {
            self.metrics.groups_sent_ahead.inc();
        }
    }

    /// A group sent ahead was not tried and goes again.
    pub(super) fn sent_again(&self) {
        if self.counting {
            self.metrics.groups_sent_again.inc();
        }
    }

    /// A group's outcomes: one transaction when all committed together, else one per request
    /// that committed on its own.
    pub(super) fn group<E>(
        &mut self,
        outcomes: &[Result<Vec<AgentEvent>, E>],
        took: std::time::Duration,
    ) {
        if !self.counting {
            return;
        }
        let committed = || outcomes.iter().filter_map(|outcome| outcome.as_ref().ok());
        let (requests, events) = committed()
            .fold((0, 0), |(requests, events), committed| (requests + 1, events + committed.len()));
        if requests == 0 {
            return;
        }
        let transactions = if requests == outcomes.len() { 1 } else { requests };
        let metrics = &self.metrics;
        metrics.commits.inc_by(transactions as u64);
        metrics.events_appended.inc_by(events as u64);
        metrics.commit_events.observe((events / transactions) as f64);
        metrics.commit_duration.observe(took.as_secs_f64());
        for event in committed().flatten() {
            match self.runs.observe(event) {
                None => {}
                Some(RunObservation::Started) => {
                    metrics.runs_started.inc();
                }
                Some(RunObservation::Ended { outcome, stop_reason, seconds }) => {
                    metrics
                        .runs_ended
                        .get_or_create(&crate::metrics::RunEndLabels { outcome, stop_reason })
                        .inc();
                    if let Some(seconds) = seconds {
                        metrics.run_duration.observe(seconds);
                    }
                }
            }
        }
    }
}
