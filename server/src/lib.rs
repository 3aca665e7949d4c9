//! agentstream's server: persists every agent event first, broadcasts it second.
//!
//! Read in this order (each folder's doc says what it owns and what it may use):
//! - [`store`]: the source of truth (agents, the per-agent log; SQLite or PostgreSQL).
//! - [`delivery`]: the writer (seqs, group commit), the hub (per-agent rooms) and the
//!   subscription (store + hub as an exactly-once, in-order feed for one subscriber).
//! - [`agent`] and [`provider`]: runs — the agent loop, its use cases — and where the words
//!   come from; [`tools`]: the built-in tools; [`mcp`]: MCP servers' tools.
//! - [`http`] and [`surfaces`]: the router, the REST API and the client protocols (native
//!   WebSocket/SSE, Letta, the AI SDK, AG-UI); [`state`]: what they are handed.
//! - [`cluster`]: several servers on one PostgreSQL database.
//!
//! `main.rs` is thin: it reads the configuration, binds a listener and calls [`serve`], so tests
//! run the very same server on port 0.

pub mod agent;
pub mod backoff;
pub mod child_env;
pub mod cluster;
pub mod config;
pub mod delivery;
pub mod http;
pub mod http_client;
pub mod limits;
pub mod mcp;
pub mod metrics;
pub mod process;
pub mod provider;
pub mod redact;
pub mod router;
pub mod state;
pub mod stats;
pub mod store;
pub mod surfaces;
pub mod telemetry;
pub mod tools;

pub use router::{api_router, app};
pub use state::AppState;

use std::future::{Future, IntoFuture};
use std::time::Duration;

use axum::serve::ListenerExt;
use leptos::prelude::LeptosOptions;
use tokio::net::TcpListener;

use crate::config::Config;
use crate::store::StoreError;

/// Serves on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    config: Config,
    leptos_options: LeptosOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    // Without a token the only gate is the Host check, and any remote client can send
    // `Host: localhost`: such a server is for this machine alone unless the operator says
    // otherwise in so many words.
    let address = listener.local_addr().map_err(ServeError::Io)?;
    if config.api_token.is_none() && !address.ip().is_loopback() && !config.insecure_no_token {
        return Err(ServeError::Refused(format!(
            "refusing to listen on {address} without an access token: anyone who can reach it \
             could read and run every agent. Set AGENTSTREAM_API_TOKEN, listen on 127.0.0.1, or \
             set AGENTSTREAM_INSECURE_NO_TOKEN=true if a proxy in front does the access control"
        )));
    }
    config.prepare_database_directory().map_err(ServeError::Io)?;
    // Bound before the state opens, so a taken address fails the start at once.
    let metrics_listener = match config.metrics_addr {
        Some(address) => Some(TcpListener::bind(address).await.map_err(|error| {
            ServeError::Refused(format!(
                "cannot listen on AGENTSTREAM_METRICS_ADDR {address}: {error}"
            ))
        })?),
        None => None,
    };
    let state = AppState::open(&config).await?;
    let stop = state.shutdown.clone();
    if let Some(listener) = metrics_listener {
        let stop = stop.clone();
        let router = router::metrics_router(state.clone());
        tokio::spawn(async move {
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await;
            if let Err(error) = served {
                tracing::error!(%error, "the metrics listener stopped");
            }
        });
    }
    let (runs, writer) = (state.runs.clone(), state.writer.clone());
    let telemetry = state.telemetry.clone();
    let router = app(state, leptos_options);
    // Nagle's algorithm holds a small write back until the previous one is acknowledged, and
    // the peer delays that acknowledgement by up to 40 ms: a token frame that follows another
    // within a round trip would wait for it. Events are small and latency is the product.
    let listener = listener.tap_io(|stream| {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY on an accepted connection");
        }
        limit_unsent_bytes(stream);
    });
    // At shutdown: no new connections; streams and sockets end (the shutdown token); runs in
    // flight get the drain to finish, then are interrupted. Connections get the drain and
    // [`SHUTDOWN_CONNECTIONS_CLOSE_GRACE_MS`] to finish what they were sending; one whose
    // client reads nothing would hold the process for ever, so past that it is dropped
    // unfinished. Whatever is still queued for the log is committed before the process exits.
    let shutdown_signalled = stop.clone();
    let serving = axum::serve(
        listener,
        axum::ServiceExt::<axum::extract::Request>::into_make_service(router),
    )
    .with_graceful_shutdown(async move {
        shutdown.await;
        tracing::info!("shutting down: no new connections; streams end");
        stop.cancel();
    })
    .into_future();
    tokio::pin!(serving);
    let served_before_signal = tokio::select! {
        served = &mut serving => Some(served),
        () = shutdown_signalled.cancelled() => None,
    };
    let drain = Duration::from_millis(config.shutdown_drain_ms);
    let connections_deadline = tokio::time::Instant::now()
        + drain
        + Duration::from_millis(SHUTDOWN_CONNECTIONS_CLOSE_GRACE_MS);
    let connections = async {
        match served_before_signal {
            Some(served) => served,
            None => match tokio::time::timeout_at(connections_deadline, &mut serving).await {
                Ok(served) => served,
                Err(_) => {
                    tracing::warn!(
                        "connections still sending after the drain and the close grace are \
                         dropped unfinished (clients that stopped reading)"
                    );
                    Ok(())
                }
            },
        }
    };
    let (served, drained) = tokio::join!(connections, runs.drain(drain));
    if let Err(error) = writer.barrier().await {
        tracing::error!(%error, "events still queued at shutdown could not be committed");
    }
    // The runs' last spans, to the collector (bounded: a collector that does not answer costs
    // this long at most).
    telemetry.flush(Duration::from_millis(SHUTDOWN_TRACES_FLUSH_WAIT_MS)).await;
    served.map_err(ServeError::Io)?;
    tracing::info!(
        interrupted = drained.interrupted.len(),
        unended = drained.unended.len(),
        "stopped"
    );
    Ok(())
}

/// At shutdown, how long past the drain a connection may go on sending before it is dropped
/// unfinished: enough for a reading client to take the end of its stream, not enough for a
/// client that reads nothing to hold the process.
pub const SHUTDOWN_CONNECTIONS_CLOSE_GRACE_MS: u64 = 2_000;

/// At shutdown, how long queued spans may take to reach the collector.
pub const SHUTDOWN_TRACES_FLUSH_WAIT_MS: u64 = 1_000;

/// Bytes a connection's kernel send queue holds that are not sent yet, at most: past this the
/// socket stops being writable, so a slow reader's backlog waits in this process, where it can
/// be coalesced ([`subscription::coalesce_waiting`]) and where the hub sees the reader lag,
/// rather than in a kernel buffer that autotuning may grow to megabytes. In-flight (sent,
/// unacknowledged) bytes are not limited by this, so a fast reader far away keeps its
/// throughput.
pub const TCP_UNSENT_BYTES_MAX: u32 = 16 * 1024;

fn limit_unsent_bytes(stream: &tokio::net::TcpStream) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Err(error) = socket2::SockRef::from(stream).set_tcp_notsent_lowat(TCP_UNSENT_BYTES_MAX) {
        tracing::debug!(%error, "cannot set TCP_NOTSENT_LOWAT on an accepted connection");
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = stream;
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("I/O error: {0}")]
    Io(std::io::Error),
    /// A configuration the server will not run with.
    #[error("{0}")]
    Refused(String),
}
