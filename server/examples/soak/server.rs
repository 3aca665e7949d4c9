//! The server under soak: the release binary in its own process, and a look at it each
//! minute (memory, fds, threads from `/proc`; live tasks and sockets from `/v1/stats`).

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::ending;

/// The release server binary in its own process.
pub struct Server {
    pub base: String,
    pub pid: u32,
    pub child: tokio::process::Child,
    pub log: std::path::PathBuf,
    _directory: tempfile::TempDir,
}

impl Server {
    pub async fn start(database: Option<&str>) -> Server {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        eprintln!("soak: building the release server binary…");
        let built = std::process::Command::new(cargo)
            .args(["build", "--release", "-p", "server", "--bin", "server"])
            .current_dir(root)
            .status()
            .expect("cargo runs");
        assert!(built.success(), "the server binary did not build");
        let binary =
            std::env::current_exe().unwrap().parent().unwrap().parent().unwrap().join("server");
        let directory = tempfile::tempdir().unwrap();
        let database = database
            .map(str::to_owned)
            .unwrap_or_else(|| format!("sqlite://{}", directory.path().join("soak.db").display()));
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = directory.path().join("server.log");
        let child = tokio::process::Command::new(&binary)
            .env("LEPTOS_SITE_ADDR", format!("127.0.0.1:{port}"))
            .env("DATABASE_URL", database)
            .env("AGENTSTREAM_SCRIPTED_TOKEN_DELAY_MS", "2")
            .env("AGENTSTREAM_SCRIPTED_REPLY_TOKENS", "200")
            // Small live buffers, so stalled readers fall behind the live stream and take the
            // catch-up path (`lagged`) many times a minute.
            .env("AGENTSTREAM_HUB_ROOM_BATCHES_MAX", "64")
            .env("AGENTSTREAM_SUBSCRIBER_OUTBOUND_FRAMES_MAX", "8")
            .env("AGENTSTREAM_SHUTDOWN_DRAIN_MS", ending::SHUTDOWN_DRAIN_MS.to_string())
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .kill_on_drop(true)
            .spawn()
            .expect("the server binary starts");
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while reqwest::get(format!("{base}/healthz")).await.is_err() {
            assert!(
                Instant::now() < deadline,
                "the server did not answer within 30 s; see {}",
                log.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let pid = child.id().unwrap();
        Server { base, pid, child, log, _directory: directory }
    }
}

/// One minute's look at the server process.
pub struct Sample {
    pub rss_mib: f64,
    pub fds: usize,
    pub threads: usize,
    pub tasks: usize,
    pub sockets: usize,
}

pub async fn sample(server: &Server) -> Sample {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", server.pid)).unwrap_or_default();
    let field = |name: &str| -> f64 {
        status
            .lines()
            .find(|line| line.starts_with(name))
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|value| value.parse().ok())
            .unwrap_or(0.0)
    };
    let fds = std::fs::read_dir(format!("/proc/{}/fd", server.pid)).map_or(0, Iterator::count);
    let stats: Value = match reqwest::get(format!("{}/v1/stats", server.base)).await {
        Ok(response) => response.json().await.unwrap_or_default(),
        Err(_) => Value::Null,
    };
    let count = |name: &str| stats[name].as_u64().unwrap_or(0) as usize;
    Sample {
        rss_mib: field("VmRSS:") / 1024.0,
        fds,
        threads: field("Threads:") as usize,
        tasks: count("tasks_alive"),
        sockets: count("websockets_open") + count("sse_streams_open"),
    }
}
