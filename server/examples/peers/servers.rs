//! The servers side by side, each in its own process on a fresh data directory: agentstream (the
//! release binary, SQLite), Electric's Rust Durable Streams server (default `--durability wal`:
//! every acknowledged append `fdatasync`ed, group-committed) and the protocol's Node reference
//! server (file-backed, every append fsynced).

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::Instant;

/// Which server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Agentstream,
    /// Another agentstream binary (`AGENTSTREAM_PEER_BASELINE_SERVER`): the same-run baseline,
    /// e.g. the code before a change.
    Baseline,
    RustPeer,
    NodeReference,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Agentstream => "agentstream (SQLite)",
            Kind::Baseline => "agentstream baseline (SQLite)",
            Kind::RustPeer => "Electric's Rust server 0.1.5",
            Kind::NodeReference => "Node reference 0.3.7",
        }
    }
}

/// One server under load.
pub struct Target {
    pub kind: Kind,
    /// `http://127.0.0.1:port`.
    pub origin: String,
    /// The path streams live under (`/v1/streams/` for agentstream, `/` for the peers).
    pub prefix: &'static str,
    pub pid: u32,
    child: tokio::process::Child,
    pub data: tempfile::TempDir,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port")
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where the Rust peer's binary is: `AGENTSTREAM_PEER_RUST_SERVER` (scripts/bench.sh sets it).
fn rust_peer_binary() -> PathBuf {
    std::env::var_os("AGENTSTREAM_PEER_RUST_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            eprintln!("peers: AGENTSTREAM_PEER_RUST_SERVER is not set; run ./scripts/bench.sh --peers, which installs the peers");
            std::process::exit(2)
        })
}

/// The baseline agentstream binary: `AGENTSTREAM_PEER_BASELINE_SERVER`.
fn baseline_binary() -> PathBuf {
    std::env::var_os("AGENTSTREAM_PEER_BASELINE_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            eprintln!("peers: --only baseline needs AGENTSTREAM_PEER_BASELINE_SERVER (an agentstream server binary)");
            std::process::exit(2)
        })
}

impl Target {
    pub async fn start(kind: Kind) -> Target {
        let data = tempfile::tempdir().expect("a temporary directory");
        let port = free_port();
        let (child, pid) = spawn(kind, port, &data).await;
        Target {
            kind,
            origin: format!("http://127.0.0.1:{port}"),
            prefix: prefix(kind),
            pid,
            child,
            data,
        }
    }

    /// Stops the server and starts it again on the same data and port: what it serves next comes
    /// from what it stored, none of its memory.
    pub async fn restart(&mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
        let port = self
            .origin
            .rsplit_once(':')
            .and_then(|(_, port)| port.parse().ok())
            .expect("the target's port");
        let (child, pid) = spawn(self.kind, port, &self.data).await;
        (self.child, self.pid) = (child, pid);
    }
}

fn prefix(kind: Kind) -> &'static str {
    match kind {
        Kind::Agentstream | Kind::Baseline => "/v1/streams/",
        Kind::RustPeer | Kind::NodeReference => "/",
    }
}

/// Starts `kind` on `port` with its data in `data`; returns once it answers.
async fn spawn(kind: Kind, port: u16, data: &tempfile::TempDir) -> (tokio::process::Child, u32) {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(data.path().join("server.log"))
        .expect("a log file");
    let mut command = match kind {
        Kind::Agentstream | Kind::Baseline => {
            let binary = match kind {
                Kind::Baseline => baseline_binary(),
                _ => std::env::current_exe()
                    .expect("the bench's own path")
                    .parent()
                    .and_then(Path::parent)
                    .expect("the target directory")
                    .join("server"),
            };
            let mut command = tokio::process::Command::new(binary);
            command
                .env("LEPTOS_SITE_ADDR", format!("127.0.0.1:{port}"))
                .env(
                    "DATABASE_URL",
                    format!("sqlite://{}", data.path().join("agentstream.db").display()),
                )
                // The load is one anonymous subject with 64 connections plus the latency
                // readers: above the default per-subject limit (64) it would be refused.
                .env("AGENTSTREAM_REQUESTS_PER_SUBJECT_MAX", "1024")
                .env("RUST_LOG", "warn");
            command
        }
        Kind::RustPeer => {
            let mut command = tokio::process::Command::new(rust_peer_binary());
            command
                .arg("--port")
                .arg(port.to_string())
                .arg("--data-dir")
                .arg(data.path().join("streams"));
            command
        }
        Kind::NodeReference => {
            let mut command = tokio::process::Command::new("node");
            command
                .arg(repository().join("scripts/peers/node-reference.mjs"))
                .arg(port.to_string())
                .arg(data.path().join("streams"));
            command
        }
    };
    let child = command
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|error| panic!("{} did not start: {error}", kind.label()));
    let probe = format!("http://127.0.0.1:{port}{}bench-ready", prefix(kind));
    let http = agentstream_server::http_client::client();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answered = http.put(&probe).header("content-type", "application/json").send().await;
        if answered.is_ok_and(|response| response.status().is_success()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} did not answer within 30 s (its log: {})",
            kind.label(),
            data.path().join("server.log").display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = child.id().expect("a running child");
    (child, pid)
}

impl Target {
    /// The URL of stream `name`.
    pub fn url(&self, name: &str) -> String {
        format!("{}{}{name}", self.origin, self.prefix)
    }

    /// CPU time the server process used so far, in ms (user + system, from `/proc`).
    pub fn cpu_ms(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        // Fields after the command name (which may hold spaces): utime is the 14th field.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks = |index: usize| fields.get(index).and_then(|value| value.parse::<f64>().ok());
        let per_second = 100.0; // USER_HZ on Linux
        match (ticks(11), ticks(12)) {
            (Some(user), Some(system)) => (user + system) * 1000.0 / per_second,
            _ => 0.0,
        }
    }

    /// Bytes the process caused to be written to storage so far (`/proc/<pid>/io`).
    pub fn written_bytes(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/io", self.pid))
            .unwrap_or_default()
            .lines()
            .find_map(|line| line.strip_prefix("write_bytes: "))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Bytes its data directory holds on disk.
    pub fn disk_bytes(&self) -> u64 {
        fn walk(path: &Path) -> u64 {
            let Ok(entries) = std::fs::read_dir(path) else {
                return 0;
            };
            entries
                .flatten()
                .filter(|entry| entry.file_name() != "server.log")
                .map(|entry| match entry.metadata() {
                    Ok(meta) if meta.is_dir() => walk(&entry.path()),
                    Ok(meta) => {
                        use std::os::unix::fs::MetadataExt;
                        meta.blocks() * 512
                    }
                    Err(_) => 0,
                })
                .sum()
        }
        walk(self.data.path())
    }

    pub async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}
