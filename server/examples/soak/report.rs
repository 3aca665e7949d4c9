//! The soak's verdict: the per-minute series and the closing report.

use std::sync::atomic::Ordering::Relaxed;

use crate::check::{drift_percent, quantile, trend_percent, Verdict};
use crate::load::Metrics;
use crate::producer::ProducerMetrics;
use crate::server::{Sample, Server};
use crate::{Args, FLAT_PERCENT_MAX, WARM_UP_MINUTES};

/// The per-minute figures the flatness check reads.
#[derive(Default)]
pub struct Series {
    pub rss_mib: Vec<f64>,
    pub fds: Vec<f64>,
    pub tasks: Vec<f64>,
    pub p99_ms: Vec<f64>,
}

impl Series {
    pub fn push(&mut self, sample: &Sample, p99_ms: f64) {
        self.rss_mib.push(sample.rss_mib);
        self.fds.push(sample.fds as f64);
        self.tasks.push(sample.tasks as f64);
        self.p99_ms.push(p99_ms);
    }
}

/// Prints the verdict; true when everything held.
pub fn report(
    args: &Args,
    metrics: &Metrics,
    produced: &ProducerMetrics,
    series: &Series,
    verdict: Verdict,
    checked: u64,
    server: &Server,
) -> bool {
    println!();
    println!(
        "soak: {} min, {} agent slots × {} subscribers, generations of {} min: {} runs ended ({} with tools, {} cancels), {} subscriber connections, {} bad inputs refused",
        args.minutes, args.agents, args.subscribers, args.generation_minutes,
        metrics.runs_ended.load(Relaxed), metrics.tool_runs.load(Relaxed), metrics.cancels.load(Relaxed),
        metrics.sessions.load(Relaxed), metrics.bad_inputs_refused.load(Relaxed),
    );
    let count = |counter: &std::sync::atomic::AtomicU64| counter.load(Relaxed);
    println!(
        "producers: {} slots: {} runs ({} completed, {} cancelled by subscribers, {} vanished and ended at their lease, at most {} ms past it); {} crashes resumed from the position, {} restarts with a new epoch ({} late batches of gone processes refused); {} streamed bodies ({} cut mid-line); {} answers lost and sent again ({} duplicates answered 204); {} runs checked against the log",
        args.producers, count(&produced.runs), count(&produced.completed), count(&produced.cancelled),
        count(&produced.vanished), count(&produced.lease_overrun_ms_max), count(&produced.crashes_resumed),
        count(&produced.restarts_new_epoch), count(&produced.zombies_fenced), count(&produced.streamed),
        count(&produced.streams_cut), count(&produced.answers_lost), count(&produced.duplicates),
        count(&produced.runs_checked),
    );
    println!(
        "records: {checked} checked against the log: {} lost, {} duplicated, {} skipped, {} wrong",
        verdict.lost, verdict.duplicated, verdict.skipped, verdict.wrong
    );
    let mut flat = true;
    // Memory and fds must hold still; tasks follow the number of open connections, which the
    // load varies at random, so their spread and trend are shown but not judged.
    for (name, values, judged) in [
        ("rss", &series.rss_mib, true),
        ("fds", &series.fds, true),
        ("tasks", &series.tasks, false),
    ] {
        match drift_percent(values, WARM_UP_MINUTES) {
            Some(drift) => {
                let holds = drift <= FLAT_PERCENT_MAX || !judged;
                flat &= holds;
                let trend = trend_percent(values, WARM_UP_MINUTES)
                    .map_or("–".to_owned(), |trend| format!("{trend:+.1} %"));
                println!(
                    "{name}: after the {WARM_UP_MINUTES}-minute warm-up every minute within {drift:.1} % of the median ({}); first third → last third {trend}",
                    match (judged, holds) {
                        (false, _) => "not judged",
                        (true, true) => "flat",
                        (true, false) => "NOT FLAT",
                    }
                );
            }
            None => println!(
                "{name}: too few minutes after the {WARM_UP_MINUTES}-minute warm-up to judge"
            ),
        }
    }
    let mut p99 = series.p99_ms.clone();
    println!(
        "p99 delivery per minute: min {:.1} ms, median {:.1} ms, max {:.1} ms",
        quantile(&mut p99, 0.0),
        quantile(&mut p99, 0.5),
        quantile(&mut p99, 1.0)
    );
    let failures = metrics.failures.load(Relaxed);
    for failure in metrics.failures_kept() {
        println!("failure: {failure}");
    }
    let passed = verdict.clean() && checked > 0 && failures == 0 && flat;
    println!("soak: {}", if passed { "PASSED" } else { "FAILED" });
    if !passed {
        // The temporary directory goes with the process: the log is copied out for a look.
        let kept = std::env::temp_dir().join("agentstream-soak-server.log");
        if std::fs::copy(&server.log, &kept).is_ok() {
            println!("the server's log: {}", kept.display());
        }
    }
    passed
}
