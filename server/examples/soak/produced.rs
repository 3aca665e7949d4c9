//! What a producer knows it wrote, and the check of that against the log: per run, the text
//! deltas its acknowledged batches carried (each unique), a tail it cannot be sure of (a batch
//! whose answer was lost just as the run was cancelled), and how the run must have ended.

use app::{AgentEvent, EventKind};
use uuid::Uuid;

/// How a produced run must end in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Its producer sent `run_completed`.
    Completed,
    /// A subscriber cancelled it (the producer's next batch was answered 409 `run_ended`).
    Cancelled,
    /// Its producer vanished: the lease ended it (`run_failed`, `interrupted`) — or a
    /// subscriber's cancel came first.
    Vanished,
}

/// One run as its producer knows it.
#[derive(Debug)]
pub struct ProducedRun {
    pub run_id: Option<Uuid>,
    /// The text deltas of its committed batches, in order.
    pub texts: Vec<String>,
    /// Deltas of a batch that may or may not have been committed (its answer was lost and
    /// the resend found the run ended): the log holds all of them after `texts`, or none.
    pub uncertain: Vec<String>,
    pub end: End,
}

/// What went wrong with one run, in a sentence each; empty when the log matches.
pub fn compare(runs: &[ProducedRun], log: &[AgentEvent]) -> Vec<String> {
    let mut problems = Vec::new();
    let known: Vec<Uuid> = runs.iter().filter_map(|run| run.run_id).collect();
    let mut strays: Vec<Uuid> = log
        .iter()
        .filter_map(|event| event.run_id)
        .filter(|run_id| !known.contains(run_id))
        .collect();
    strays.dedup();
    if !strays.is_empty() {
        problems.push(format!("runs no producer wrote: {strays:?}"));
    }
    for run in runs {
        let Some(run_id) = run.run_id else {
            problems.push("a produced run whose id its producer never learned".into());
            continue;
        };
        let events: Vec<&AgentEvent> =
            log.iter().filter(|event| event.run_id == Some(run_id)).collect();
        if let Some(problem) = check_run(run, &events) {
            problems.push(format!("run {run_id}: {problem}"));
        }
    }
    problems
}

fn check_run(run: &ProducedRun, events: &[&AgentEvent]) -> Option<String> {
    let starts = events.iter().filter(|event| event.kind == EventKind::RunStarted).count();
    if starts != 1 || events.first().map(|event| event.kind) != Some(EventKind::RunStarted) {
        return Some(format!("{starts} run_started, not one at its start"));
    }
    let ends: Vec<&&AgentEvent> = events.iter().filter(|event| event.kind.is_run_end()).collect();
    let [end] = ends.as_slice() else {
        return Some(format!("{} ends, not one", ends.len()));
    };
    if events.last().map(|event| event.id) != Some(end.id) {
        return Some("events after its end".into());
    }
    let interrupted = end.kind == EventKind::RunFailed
        && end.content["error"]["type"].as_str() == Some("interrupted");
    let ended_right = match run.end {
        End::Completed => end.kind == EventKind::RunCompleted,
        End::Cancelled => end.kind == EventKind::RunCancelled,
        End::Vanished => interrupted || end.kind == EventKind::RunCancelled,
    };
    if !ended_right {
        return Some(format!(
            "ended {:?} ({}), its producer expected {:?}",
            end.kind, end.content, run.end
        ));
    }
    let logged: Vec<&str> = events
        .iter()
        .filter(|event| event.kind == EventKind::Text)
        .filter_map(|event| event.delta.as_ref()?.as_str())
        .collect();
    let certain: Vec<&str> = run.texts.iter().map(String::as_str).collect();
    let with_tail: Vec<&str> =
        certain.iter().copied().chain(run.uncertain.iter().map(String::as_str)).collect();
    if logged != certain && logged != with_tail {
        let first_difference = logged
            .iter()
            .zip(&certain)
            .position(|(logged, sent)| logged != sent)
            .unwrap_or(logged.len().min(certain.len()));
        return Some(format!(
            "text deltas differ from what its producer had acknowledged: {} logged, {} sent (+{} uncertain), first difference at {first_difference}",
            logged.len(),
            certain.len(),
            run.uncertain.len()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(
        run_id: Uuid,
        seq: u64,
        kind: EventKind,
        delta: Option<&str>,
        content: serde_json::Value,
    ) -> AgentEvent {
        AgentEvent {
            run_id: Some(run_id),
            delta: delta.map(|text| json!(text)),
            metadata: json!({}),
            created_at: chrono::Utc::now(),
            ..AgentEvent::bare(Uuid::from_u128(seq as u128), Uuid::nil(), seq, kind, content)
        }
    }

    /// A run's log: its start, the texts, then its end.
    fn logged(
        run_id: Uuid,
        texts: &[&str],
        end: EventKind,
        content: serde_json::Value,
    ) -> Vec<AgentEvent> {
        let mut log = vec![event(run_id, 1, EventKind::RunStarted, None, json!({}))];
        for text in texts {
            let seq = log.len() as u64 + 1;
            log.push(event(run_id, seq, EventKind::Text, Some(text), json!({})));
        }
        let seq = log.len() as u64 + 1;
        log.push(event(run_id, seq, end, None, content));
        log
    }

    fn run(run_id: Uuid, texts: &[&str], uncertain: &[&str], end: End) -> ProducedRun {
        ProducedRun {
            run_id: Some(run_id),
            texts: texts.iter().map(|text| text.to_string()).collect(),
            uncertain: uncertain.iter().map(|text| text.to_string()).collect(),
            end,
        }
    }

    #[test]
    fn a_log_that_holds_what_the_producer_knows_passes_and_anything_else_is_named() {
        let id = Uuid::from_u128(1);
        let interrupted = json!({ "error": { "type": "interrupted" } });
        let cases: Vec<(&str, ProducedRun, Vec<AgentEvent>, bool)> = vec![
            (
                "completed",
                run(id, &["a", "b"], &[], End::Completed),
                logged(id, &["a", "b"], EventKind::RunCompleted, json!({})),
                true,
            ),
            (
                "a batch written twice",
                run(id, &["a", "b"], &[], End::Completed),
                logged(id, &["a", "a", "b"], EventKind::RunCompleted, json!({})),
                false,
            ),
            (
                "a batch lost",
                run(id, &["a", "b"], &[], End::Completed),
                logged(id, &["a"], EventKind::RunCompleted, json!({})),
                false,
            ),
            (
                "the wrong end",
                run(id, &["a"], &[], End::Completed),
                logged(id, &["a"], EventKind::RunCancelled, json!({})),
                false,
            ),
            (
                "cancelled, uncertain tail in",
                run(id, &["a"], &["b"], End::Cancelled),
                logged(id, &["a", "b"], EventKind::RunCancelled, json!({})),
                true,
            ),
            (
                "cancelled, uncertain tail out",
                run(id, &["a"], &["b"], End::Cancelled),
                logged(id, &["a"], EventKind::RunCancelled, json!({})),
                true,
            ),
            (
                "vanished, ended at the lease",
                run(id, &["a"], &[], End::Vanished),
                logged(id, &["a"], EventKind::RunFailed, interrupted.clone()),
                true,
            ),
            (
                "vanished, failed otherwise",
                run(id, &["a"], &[], End::Vanished),
                logged(
                    id,
                    &["a"],
                    EventKind::RunFailed,
                    json!({ "error": { "type": "store_error" } }),
                ),
                false,
            ),
        ];
        for (name, produced, log, passes) in cases {
            let problems = compare(&[produced], &log);
            assert_eq!(problems.is_empty(), passes, "{name}: {problems:?}");
        }
        // A run in the log no producer wrote is named.
        let stray = logged(Uuid::from_u128(2), &["x"], EventKind::RunCompleted, json!({}));
        assert_eq!(compare(&[], &stray).len(), 1);
    }
}
