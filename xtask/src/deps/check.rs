//! `cargo xtask deps [--write]`: the module graphs of `server` and `app` against
//! `xtask/deps-known.txt`. Each crate's floors are here, top first (ARCHITECTURE.md, "Code map",
//! says the same in words).

use std::path::Path;

use super::{graph, new_findings, read_crate, report, Floors};
use crate::step::StepError;

/// The server's floors: the wiring (the crate root, the state it opens, the configuration that
/// gathers every floor's settings, the router); the client protocols (surfaces); the HTTP layer
/// they share (errors, parameters, access — which knows no surface); runs; what runs use; the
/// log; and at the bottom what every floor may use.
const SERVER_FLOORS: Floors = Floors(&[
    &["", "state", "config", "router", "stats", "process"],
    &["surfaces"],
    &["http"],
    &["agent", "cluster"],
    &["delivery", "provider", "tools", "mcp"],
    &["store"],
    &["limits", "metrics", "telemetry", "redact", "child_env", "backoff", "http_client"],
]);

/// The app's floors: the pages; the browser's hook and calls, and history; the pure folds;
/// the records; how the records read their times and JSON.
const APP_FLOORS: Floors = Floors(&[
    &["", "pages"],
    &["hook", "api_client", "history"],
    &["timeline", "inspect", "approvals", "coalesce", "testing", "markdown", "branches"],
    &["protocol", "event"],
    &["time", "json"],
]);

const KNOWN: &str = "xtask/deps-known.txt";

/// Prints every arrow of both crates (`crate: from -> to`): the graph, for reading.
pub fn print(root: &Path) -> Result<(), StepError> {
    for name in ["server", "app"] {
        let src = root.join(name).join("src");
        let files = read_crate(&src).map_err(|error| {
            StepError::new("read the crates", format!("{}: {error}", src.display()), "")
        })?;
        for (from, targets) in graph(&files).arrows {
            for to in targets {
                println!("{name}: {from} -> {to}");
            }
        }
    }
    Ok(())
}

pub fn check(root: &Path, write: bool) -> Result<(), StepError> {
    let step = "check the module graph (cargo xtask deps)";
    let mut found = Vec::new();
    for (name, floors) in [("server", &SERVER_FLOORS), ("app", &APP_FLOORS)] {
        let src = root.join(name).join("src");
        let files = read_crate(&src).map_err(|error| {
            StepError::new(step, format!("cannot read {}: {error}", src.display()), "")
        })?;
        let graph = graph(&files);
        let unplaced = floors.unplaced(&graph);
        if !unplaced.is_empty() {
            return Err(StepError::new(
                step,
                format!("{name}: modules on no floor: {unplaced:?}"),
                "add them to a floor in xtask/src/deps/check.rs (and ARCHITECTURE.md)",
            ));
        }
        found.extend(report(name, &graph, floors));
    }
    let known_path = root.join(KNOWN);
    if write {
        let mut text = String::from(
            "# Circles between files and arrows up the floors that exist today, to be taken apart\n\
             # (`cargo xtask deps` fails on any other; `cargo xtask deps --write` rewrites this).\n",
        );
        for line in &found {
            text.push_str(line);
            text.push('\n');
        }
        std::fs::write(&known_path, text)
            .map_err(|error| StepError::new(step, format!("cannot write {KNOWN}: {error}"), ""))?;
        println!("deps: {} findings written to {KNOWN}", found.len());
        return Ok(());
    }
    let known: Vec<String> = std::fs::read_to_string(&known_path)
        .unwrap_or_default()
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(str::to_owned)
        .collect();
    let new = new_findings(&found, &known);
    let gone: Vec<&String> = known.iter().filter(|line| !found.contains(line)).collect();
    let circles = found.iter().filter(|l| l.starts_with("circle")).count();
    println!(
        "deps: {circles} circles, {} upward arrows ({} known lines, {} of them gone or smaller)",
        found.len() - circles,
        known.len(),
        gone.len()
    );
    if new.is_empty() {
        return Ok(());
    }
    Err(StepError::new(
        step,
        format!("new circles or upward arrows:\n  {}", new.join("\n  ")),
        "name the item from a file on a lower floor (or move it there); the floors are in \
         xtask/src/deps/check.rs",
    ))
}
