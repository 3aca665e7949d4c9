//! The cargo builds: the server (native) and the lib package (wasm32), started together, then
//! the site from their output. The commands are the ones cargo-leptos runs for the same
//! `[workspace.metadata.leptos]`, so both tools fill one target directory with the same files.

use crate::project::{Bundle, Project};
use crate::site;
use crate::step::{self, StepError};
use std::path::PathBuf;
use std::process::Command;

/// Which parts a build makes (the watch loop rebuilds only what a change touches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    pub server: bool,
    /// The wasm module and its bundle.
    pub bundle: bool,
    /// The stylesheet and the assets (a copy: always cheap).
    pub files: bool,
}

impl Parts {
    pub const ALL: Parts = Parts { server: true, bundle: true, files: true };
}

/// `cargo build` of the server binary, with the environment leptos reads at compile time.
pub fn server_command(project: &Project, release: bool) -> Command {
    let mut command = Command::new(cargo());
    command.current_dir(&project.root).args([
        "build",
        "--package",
        &project.bin_package,
        "--bin",
        &project.bin_package,
        "--no-default-features",
    ]);
    if release {
        command.arg("--release");
    }
    command.envs(project.leptos_env());
    command
}

/// `cargo build` of the lib package for wasm32, with the feature that makes `bundle`.
pub fn bundle_command(project: &Project, bundle: &Bundle, release: bool) -> Command {
    let mut command = Command::new(cargo());
    command.current_dir(&project.root).args([
        "build",
        "--package",
        &project.lib_package,
        "--lib",
        "--target",
        "wasm32-unknown-unknown",
        "--no-default-features",
        "--profile",
        project.lib_profile(release),
    ]);
    if let Some(feature) = bundle.feature {
        command.args(["--features", feature]);
    }
    command.envs(project.leptos_env());
    command
}

/// Builds what `parts` names; a failure names its step. Both cargo commands start at once, but
/// they share one target directory, whose lock lets one compile at a time. What the overlap
/// buys: when the bundle's compile takes the lock first (as in every build measured here),
/// its own steps (wasm-bindgen, and wasm-opt's 50 s in a release build) run while the server
/// compiles and add nothing to the wall time.
pub fn build(project: &Project, release: bool, parts: Parts) -> Result<(), StepError> {
    if parts.bundle {
        check_wasm_target()?;
    }
    let server = if parts.server {
        Some(step::start(
            "compile the server",
            server_command(project, release),
            "read the compiler's messages above",
        )?)
    } else {
        None
    };
    let bundle = if parts.bundle { bundles(project, release) } else { Ok(()) };
    // A failed bundle stops the server's build at once: its error is the one to read, and a
    // build left running would hold the target directory's lock.
    if let Err(error) = bundle {
        if let Some(server) = server {
            server.stop();
        }
        return Err(error);
    }
    if let Some(server) = server {
        server.wait()?;
    }
    if parts.files {
        site::style_and_assets(project)?;
    }
    if parts.bundle || parts.files {
        site::precompress(project, release)?;
    }
    Ok(())
}

/// Each bundle in turn (they share the lib package's output file): the wasm module, then its
/// JavaScript, then (release) wasm-opt.
fn bundles(project: &Project, release: bool) -> Result<(), StepError> {
    for bundle in project.bundles() {
        let step = match bundle.feature {
            None => "compile the browser bundle (wasm32)".to_owned(),
            Some(feature) => format!("compile the {feature} page's bundle (wasm32)"),
        };
        step::run(
            &step,
            bundle_command(project, &bundle, release),
            "read the compiler's messages above; after a toolchain change, \
             `rustup target add wasm32-unknown-unknown`",
        )?;
        site::bindgen(project, &bundle, release)?;
        if release {
            site::optimize(project, &bundle)?;
        }
    }
    Ok(())
}

/// The cargo that runs this tool (`cargo xtask`), else the one on PATH.
fn cargo() -> PathBuf {
    std::env::var_os("CARGO").map_or_else(|| PathBuf::from("cargo"), PathBuf::from)
}

/// The wasm32 standard library is a rustup component: say so before cargo's less direct error.
fn check_wasm_target() -> Result<(), StepError> {
    let step = "check the wasm32-unknown-unknown target";
    let hint = "run `rustup target add wasm32-unknown-unknown` (./scripts/run.sh does it)";
    let output = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .map_err(|error| StepError::new(step, format!("cannot run rustc: {error}"), hint))?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    let library = sysroot.join("lib/rustlib/wasm32-unknown-unknown/lib");
    if library.is_dir() {
        Ok(())
    } else {
        Err(StepError::new(
            step,
            format!("the toolchain at {} has no wasm32 standard library", sysroot.display()),
            hint,
        ))
    }
}
