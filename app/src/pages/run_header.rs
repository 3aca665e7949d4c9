//! A header per run (one user turn, or the run that carried out a person's answer): when it
//! started, how long it took, how it ended, what it cost — all from the log's own `created_at`
//! times, through the reducer's [`RunSummary`]. Times are absolute on the server and in the first
//! render, then relative ("2 min ago") once the page runs, with the exact time on hover.

use chrono::{DateTime, Datelike, Timelike, Utc};
use leptos::prelude::*;
use uuid::Uuid;

use crate::timeline::{RunStatus, RunSummary, Timeline};

/// The page's clock for relative times: `None` until the page runs (the server's render and the
/// first browser render then agree), then ticking every [`CLOCK_TICK_MS`].
#[derive(Clone, Copy)]
pub(super) struct Clock(pub ReadSignal<Option<DateTime<Utc>>>);

/// How often relative times are brought up to date.
pub const CLOCK_TICK_MS: u64 = 15_000;

/// Starts the page's clock (in the browser; on the server it stays `None`).
pub(super) fn clock() -> Clock {
    let (now, set_now) = signal(None::<DateTime<Utc>>);
    Effect::new(move |_| {
        #[cfg(feature = "hydrate")]
        {
            let read = move || DateTime::from_timestamp_millis(js_sys::Date::now() as i64);
            set_now.set(read());
            let _ = set_interval(
                move || set_now.set(read()),
                std::time::Duration::from_millis(CLOCK_TICK_MS),
            );
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = (set_now, CLOCK_TICK_MS);
    });
    Clock(now)
}

/// A duration as a person reads it: `850 ms`, `4.2 s`, `3 min 5 s`, `2 h 4 min`.
pub fn duration_text(milliseconds: i64) -> String {
    let milliseconds = milliseconds.max(0);
    match milliseconds {
        0..=999 => format!("{milliseconds} ms"),
        // Tenths in integers: float formatting would add its tables to the wasm bundle.
        1_000..=59_999 => {
            let tenths = (milliseconds + 50) / 100;
            format!("{}.{} s", tenths / 10, tenths % 10)
        }
        60_000..=3_599_999 => {
            format!("{} min {} s", milliseconds / 60_000, milliseconds / 1000 % 60)
        }
        _ => format!("{} h {} min", milliseconds / 3_600_000, milliseconds / 60_000 % 60),
    }
}

/// `2026-01-02`. (By hand rather than with `strftime`, whose parser the wasm bundle would carry.)
fn date_text(at: DateTime<Utc>) -> String {
    format!("{:04}-{:02}-{:02}", at.year(), at.month(), at.day())
}

/// `03:04:05`.
fn clock_text(at: DateTime<Utc>) -> String {
    format!("{:02}:{:02}:{:02}", at.hour(), at.minute(), at.second())
}

/// `at` as seen from `now`: `just now`, `40 s ago`, `5 min ago`, `3 h ago`, or the date.
pub fn relative_text(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let seconds = (now - at).num_seconds();
    match seconds {
        ..=9 => "just now".to_owned(),
        10..=59 => format!("{seconds} s ago"),
        60..=3_599 => format!("{} min ago", seconds / 60),
        3_600..=86_399 => format!("{} h ago", seconds / 3_600),
        _ => date_text(at),
    }
}

/// What the status bar says of the latest run: its state (`data-status`) and the words. A run
/// that ended to wait for a person is not "completed" to whoever reads the bar.
pub fn bar_status(run: Option<&RunSummary>) -> (&'static str, &'static str) {
    match run.map(|run| (run.status, run.stop_reason.as_deref())) {
        None => ("idle", "idle"),
        Some((RunStatus::Completed, Some("requires_approval"))) => {
            ("awaiting_approval", "waiting for approval")
        }
        Some((RunStatus::Completed, Some("requires_client_tool"))) => {
            ("awaiting_client", "waiting for the client")
        }
        Some((status, _)) => (status.as_str(), status.as_str()),
    }
}

/// How a run ended, in words.
pub fn outcome_text(run: &RunSummary) -> String {
    match (run.status, run.stop_reason.as_deref()) {
        (RunStatus::Running, _) => "running".to_owned(),
        (RunStatus::Completed, Some("requires_approval")) => "waiting for approval".to_owned(),
        (RunStatus::Completed, Some("max_iterations")) => "stopped: too many steps".to_owned(),
        (RunStatus::Completed, Some("max_events" | "max_bytes")) => "stopped: too long".to_owned(),
        (RunStatus::Completed, _) => "completed".to_owned(),
        (RunStatus::Cancelled, _) => "cancelled".to_owned(),
        (RunStatus::Failed, _) => {
            let message = run
                .error
                .as_ref()
                .and_then(|error| error.get("message"))
                .and_then(serde_json::Value::as_str);
            match message {
                Some(message) => format!("failed: {message}"),
                None => "failed".to_owned(),
            }
        }
    }
}

/// The header of run `run_id`.
#[component]
pub(super) fn RunHeader(timeline: ReadSignal<Timeline>, run_id: Uuid) -> impl IntoView {
    let clock = use_context::<Clock>();
    let run = move || timeline.with(|timeline| timeline.run(run_id).cloned());
    let started = move || run().and_then(|run| run.started_at);
    let when = move || {
        let at = started()?;
        let now = clock.and_then(|clock| clock.0.get());
        Some(match now {
            Some(now) => relative_text(at, now),
            None => format!("{} UTC", clock_text(at)),
        })
    };
    let exact = move || {
        started()
            .map(|at| {
                let milliseconds = at.timestamp_subsec_millis();
                format!("{} {}.{milliseconds:03} UTC", date_text(at), clock_text(at))
            })
            .unwrap_or_default()
    };
    let iso = move || started().map(|at| at.to_rfc3339()).unwrap_or_default();
    let took = move || {
        let run = run()?;
        let (started, ended) = (run.started_at?, run.ended_at?);
        Some(duration_text((ended - started).num_milliseconds()))
    };
    let status = move || run().map(|run| run.status.as_str()).unwrap_or("running");
    let outcome = move || run().map(|run| outcome_text(&run)).unwrap_or_default();
    let usage = move || {
        let usage = run()?.usage?;
        let count = |key: &str| usage.get(key).and_then(serde_json::Value::as_u64);
        Some(format!(
            "{} in · {} out tokens",
            count("input_tokens").unwrap_or(0),
            count("output_tokens").unwrap_or(0)
        ))
    };
    let continues = move || run().is_some_and(|run| run.continues.is_some());
    let inspect = use_context::<super::shared::AgentOfPage>()
        .map(|agent| format!("/agents/{}/runs/{run_id}", agent.0));
    view! {
        <header class="run-header" data-status=status>
            <span class="run-kind">{move || if continues() { "after approval" } else { "turn" }}</span>
            <time datetime=iso title=exact>{when}</time>
            <span class="run-outcome">{outcome}</span>
            {move || took().map(|took| view! { <span class="run-duration">{took}</span> })}
            {move || usage().map(|usage| view! { <span class="run-usage">{usage}</span> })}
            {inspect.map(|href| view! { <a class="run-inspect" href=href>"inspect"</a> })}
        </header>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_says_what_a_run_waits_for() {
        let run = |status, stop_reason: Option<&str>| RunSummary {
            run_id: uuid::Uuid::nil(),
            status,
            usage: None,
            stop_reason: stop_reason.map(str::to_owned),
            error: None,
            thread_ids: Vec::new(),
            started_at: None,
            ended_at: None,
            continues: None,
            log: None,
            first_seq: 1,
            trace_id: None,
        };
        let cases = [
            (None, ("idle", "idle")),
            (Some(run(RunStatus::Running, None)), ("running", "running")),
            (
                Some(run(RunStatus::Completed, Some("requires_approval"))),
                ("awaiting_approval", "waiting for approval"),
            ),
            (
                Some(run(RunStatus::Completed, Some("requires_client_tool"))),
                ("awaiting_client", "waiting for the client"),
            ),
            (Some(run(RunStatus::Completed, Some("end_turn"))), ("completed", "completed")),
            (Some(run(RunStatus::Cancelled, Some("cancelled"))), ("cancelled", "cancelled")),
        ];
        for (run, expected) in cases {
            assert_eq!(bar_status(run.as_ref()), expected, "{run:?}");
        }
    }

    #[test]
    fn durations_and_times_read_as_a_person_says_them() {
        let cases = [
            (0, "0 ms"),
            (850, "850 ms"),
            (4_240, "4.2 s"),
            (1_000, "1.0 s"),
            (4_250, "4.3 s"),
            (59_940, "59.9 s"),
            (185_000, "3 min 5 s"),
            (7_440_000, "2 h 4 min"),
            (-5, "0 ms"),
        ];
        for (milliseconds, text) in cases {
            assert_eq!(duration_text(milliseconds), text);
        }
        let at = DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z").unwrap().with_timezone(&Utc);
        let later = |seconds: i64| at + chrono::Duration::seconds(seconds);
        let cases = [
            (3, "just now"),
            (40, "40 s ago"),
            (300, "5 min ago"),
            (3 * 3600 + 5, "3 h ago"),
            (3 * 86_400, "2026-01-02"),
        ];
        for (seconds, text) in cases {
            assert_eq!(relative_text(at, later(seconds)), text);
        }
    }
}
