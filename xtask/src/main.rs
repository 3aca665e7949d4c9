//! agentstream's build tool: builds the server and the site it serves (the wasm bundle, the
//! stylesheet, the assets) with nothing installed beyond the Rust toolchain, the wasm32 target
//! and npm's binaryen. It reads the same `[workspace.metadata.leptos]` section as cargo-leptos,
//! runs wasm-bindgen as a library of exactly the version Cargo.lock pins (no CLI to install),
//! and writes the same files, so `cargo leptos watch` keeps working for those who have it.
//!
//! ```text
//! cargo xtask build [--release]   the server binary and target/site
//! cargo xtask site [--release]    the site alone
//! cargo xtask watch [-- ARGS]     debug build, serve, rebuild and restart on every change
//! cargo xtask deps [--write|--graph]  the module graph: no new circle or upward arrow
//! ```
//!
//! Layout: `project` reads the workspace's section (pure), `compile` runs the cargo builds,
//! `deps` draws and checks the module graph,
//! `site` writes the bundle and copies files, `watch` is the development loop, `step` names
//! every step so a failure says which one, the command and what to do.

mod compile;
mod deps;
mod project;
mod site;
mod step;
mod watch;

use project::Project;
use std::process::{Command, ExitCode};
use step::StepError;

const USAGE: &str = "\
usage: cargo xtask <command> [--release]
  build [--release]   build the server and the site (target/site)
  site [--release]    build the site alone (wasm bundle, stylesheet, assets)
  watch [-- ARGS]     debug build, serve, rebuild and restart on every change;
                      ARGS go to the server (e.g. -- --provider openai)
  deps [--write|--graph]  check the module graph of server and app: no circle between
                      files or arrow up the floors beyond xtask/deps-known.txt (--write:
                      rewrite it; --graph: print every arrow)";

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    match run(&arguments) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(arguments: &[String]) -> Result<(), StepError> {
    let (command, rest) = match arguments.split_first() {
        Some((command, rest)) => (command.as_str(), rest),
        None => ("help", &[][..]),
    };
    let release = || -> Result<bool, StepError> {
        match rest {
            [] => Ok(false),
            [flag] if flag == "--release" => Ok(true),
            _ => Err(usage_error(format!("unexpected arguments {rest:?}"))),
        }
    };
    match command {
        "build" => {
            let release = release()?;
            compile::build(&load_project()?, release, compile::Parts::ALL)
        }
        "site" => {
            let release = release()?;
            let parts = compile::Parts { server: false, ..compile::Parts::ALL };
            compile::build(&load_project()?, release, parts)
        }
        "watch" => {
            let server_args = match rest {
                [] => &[][..],
                [separator, server_args @ ..] if separator == "--" => server_args,
                _ => return Err(usage_error(format!("unexpected arguments {rest:?}"))),
            };
            watch::watch(&load_project()?, server_args)
        }
        "deps" => {
            // `cargo run` names this checkout's xtask at run time; the compiled-in path is the
            // checkout that last linked `target/debug/xtask`, which is another one when two
            // checkouts share a target directory (cargo then runs that binary as it is).
            let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into());
            let root = manifest.parent().unwrap_or(std::path::Path::new("."));
            match rest {
                [] => deps::check(root, false),
                [flag] if flag == "--write" => deps::check(root, true),
                [flag] if flag == "--graph" => deps::print(root),
                _ => Err(usage_error(format!("unexpected arguments {rest:?}"))),
            }
        }
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(usage_error(format!("unknown command {other:?}"))),
    }
}

fn usage_error(cause: String) -> StepError {
    StepError::new("read the command line", cause, USAGE)
}

/// The project as `cargo metadata` describes it (which also applies CARGO_TARGET_DIR).
fn load_project() -> Result<Project, StepError> {
    let step = "read the workspace (cargo metadata)";
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.args(["metadata", "--format-version", "1", "--no-deps"]);
    let output = command.output().map_err(|error| {
        StepError::new(step, format!("cannot run cargo: {error}"), "install Rust with rustup")
            .with_command(&command)
    })?;
    if !output.status.success() {
        return Err(StepError::new(
            step,
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            "run it from inside the agentstream checkout",
        )
        .with_command(&command));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).map_err(|error| {
        StepError::new(step, format!("cargo printed no JSON: {error}"), "update the toolchain")
    })?;
    Project::from_metadata(&metadata).map_err(|cause| {
        StepError::new(step, cause, "fix [workspace.metadata.leptos] in Cargo.toml")
    })
}
