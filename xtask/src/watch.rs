//! The development loop: a debug build served, and on every saved change the parts it touches
//! rebuilt and the server restarted. Watching is a poll of file times (no watcher dependency,
//! no platform differences); a failed build keeps the last good server running.
//!
//! Which parts a change touches is pure ([`parts_for`]) and tested with data.

use crate::compile::{self, Parts};
use crate::project::Project;
use crate::step::{self, StepError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

/// How often the sources are looked at: an edit is seen within this, and a poll of a few
/// hundred files costs well under a millisecond.
const POLL_INTERVAL_MS: u64 = 300;

/// Changes that arrive within this of each other are built once (an editor's save of several
/// files, a `git checkout`).
const SETTLE_MS: u64 = 200;

/// The directories and files whose changes matter, relative to the workspace root.
const WATCHED: &[&str] = &[
    "app/src",
    "server/src",
    "server/migrations",
    "server/migrations_postgres",
    "frontend/src",
    "style",
    "public",
    "Cargo.toml",
    "Cargo.lock",
    "app/Cargo.toml",
    "server/Cargo.toml",
    "frontend/Cargo.toml",
];

/// What a changed file (relative to the root) makes stale.
pub fn parts_for(changed: &Path) -> Parts {
    let none = Parts { server: false, bundle: false, files: false };
    if changed.starts_with("style") || changed.starts_with("public") {
        Parts { files: true, ..none }
    } else if changed.starts_with("server") {
        Parts { server: true, ..none }
    } else if changed.starts_with("frontend") {
        Parts { bundle: true, ..none }
    } else {
        // app/ is compiled into both; the manifests and the lock into everything.
        Parts { server: true, bundle: true, files: false }
    }
}

fn union(left: Parts, right: Parts) -> Parts {
    Parts {
        server: left.server || right.server,
        bundle: left.bundle || right.bundle,
        files: left.files || right.files,
    }
}

/// Every watched file with its modification time and length.
type Snapshot = BTreeMap<PathBuf, (SystemTime, u64)>;

fn snapshot(root: &Path) -> Snapshot {
    let mut files = Snapshot::new();
    for watched in WATCHED {
        collect(root, &root.join(watched), &mut files);
    }
    files
}

fn collect(root: &Path, path: &Path, files: &mut Snapshot) {
    let Ok(metadata) = path.metadata() else {
        return;
    };
    if metadata.is_dir() {
        let Ok(entries) = path.read_dir() else { return };
        for entry in entries.flatten() {
            collect(root, &entry.path(), files);
        }
    } else if let (Ok(relative), Ok(modified)) = (path.strip_prefix(root), metadata.modified()) {
        files.insert(relative.to_path_buf(), (modified, metadata.len()));
    }
}

/// The files that differ between two snapshots (added, removed or changed).
fn changed_files(before: &Snapshot, after: &Snapshot) -> Vec<PathBuf> {
    let mut changed: Vec<PathBuf> = after
        .iter()
        .filter(|(path, stamp)| before.get(*path) != Some(stamp))
        .map(|(path, _)| path.clone())
        .collect();
    changed.extend(before.keys().filter(|path| !after.contains_key(*path)).cloned());
    changed
}

/// Builds, serves, and rebuilds on change until interrupted. `server_args` go to the server.
pub fn watch(project: &Project, server_args: &[String]) -> Result<(), StepError> {
    compile::build(project, false, Parts::ALL)?;
    let mut server = Some(start_server(project, server_args)?);
    let mut seen = snapshot(&project.root);
    eprintln!("==> watching for changes (Ctrl-C stops); reload the page after a rebuild");
    loop {
        std::thread::sleep(Duration::from_millis(POLL_INTERVAL_MS));
        if let Some(running) = server.as_mut() {
            if let Some(how) = running.ended() {
                eprintln!("==> the server ended: {how}; it starts again after the next change");
                server = None;
            }
        }
        let mut now = snapshot(&project.root);
        if now == seen {
            continue;
        }
        // Let a burst of saves finish, then build what they touched once.
        loop {
            std::thread::sleep(Duration::from_millis(SETTLE_MS));
            let later = snapshot(&project.root);
            if later == now {
                break;
            }
            now = later;
        }
        let changed = changed_files(&seen, &now);
        seen = now;
        let parts = changed
            .iter()
            .map(|path| parts_for(path))
            .fold(Parts { server: false, bundle: false, files: false }, union);
        eprintln!("==> changed: {}", describe(&changed));
        let started = Instant::now();
        match compile::build(project, false, parts) {
            Ok(()) => {
                if parts.server || server.is_none() {
                    if let Some(old) = server.take() {
                        old.stop();
                    }
                    server = Some(start_server(project, server_args)?);
                }
                eprintln!(
                    "==> rebuilt in {:.1} s: reload the page",
                    started.elapsed().as_secs_f64()
                );
            }
            // The last good server keeps serving; the next save tries again.
            Err(error) => eprintln!("{error}\n==> still serving the last good build"),
        }
    }
}

fn describe(changed: &[PathBuf]) -> String {
    const LISTED_FILES_MAX: usize = 5;
    let mut names: Vec<String> =
        changed.iter().take(LISTED_FILES_MAX).map(|path| path.display().to_string()).collect();
    if changed.len() > LISTED_FILES_MAX {
        names.push(format!("and {} more", changed.len() - LISTED_FILES_MAX));
    }
    names.join(", ")
}

fn start_server(project: &Project, server_args: &[String]) -> Result<step::Running, StepError> {
    let mut command = Command::new(project.server_binary(false));
    command.current_dir(&project.root).args(server_args).envs(project.leptos_env());
    step::start(
        "start the server",
        command,
        "read the server's message above (another process on the port? set LEPTOS_SITE_ADDR)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_rebuilds_what_it_touches() {
        let (server, bundle, files) = (true, true, true);
        let cases = [
            ("style/main.css", (!server, !bundle, files)),
            ("public/favicon.svg", (!server, !bundle, files)),
            ("server/src/http/router.rs", (server, !bundle, !files)),
            ("server/migrations/0001.sql", (server, !bundle, !files)),
            ("frontend/src/lib.rs", (!server, bundle, !files)),
            ("app/src/timeline.rs", (server, bundle, !files)),
            ("Cargo.lock", (server, bundle, !files)),
        ];
        for (path, (server, bundle, files)) in cases {
            let expected = Parts { server, bundle, files };
            assert_eq!(parts_for(Path::new(path)), expected, "{path}");
        }
    }

    #[test]
    fn finds_added_removed_and_changed_files() {
        let time = SystemTime::UNIX_EPOCH;
        let later = time + Duration::from_secs(1);
        let before: Snapshot = [
            (PathBuf::from("a"), (time, 1)),
            (PathBuf::from("b"), (time, 1)),
            (PathBuf::from("c"), (time, 1)),
        ]
        .into();
        let after: Snapshot = [
            (PathBuf::from("a"), (time, 1)),
            (PathBuf::from("b"), (later, 1)),
            (PathBuf::from("d"), (time, 1)),
        ]
        .into();
        let mut changed = changed_files(&before, &after);
        changed.sort();
        assert_eq!(changed, [PathBuf::from("b"), "c".into(), "d".into()]);
        assert!(changed_files(&before, &before).is_empty());
    }
}
