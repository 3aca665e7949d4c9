//! agentstream's server: persists every agent event first, broadcasts it second.
//!
//! Read in this order:
//! - [`store`]: the source of truth (agents, the per-agent log; SQLite today).
//! - [`writer`]: assigns seqs, group-commits, then hands committed batches to the [`hub`].
//! - [`hub`]: per-agent rooms with bounded buffers; [`subscription`] turns "store + hub" into an
//!   exactly-once, in-order feed for one subscriber, recovering from lag.
//! - [`runs`] and [`provider`]: the agent loop and where its words come from.
//! - [`api`] and [`ws`]: the HTTP and WebSocket surfaces; [`error`] is their error boundary.
//!
//! `main.rs` is thin: it reads the configuration, binds a listener and calls [`serve`], so tests
//! run the very same server on port 0.

pub mod agent;
pub mod api;
pub mod auth;
pub mod cluster;
pub mod config;
pub mod delivery;
pub mod error;
pub mod history;
pub mod letta;
pub mod provider;
pub mod recovery;
pub mod sse;
pub mod store;
pub mod tools;
pub mod ws;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use app::history::HistorySourceHandle;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::Router;
use leptos::prelude::{provide_context, LeptosOptions};
use leptos_axum::{generate_route_list, LeptosRoutes};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::agent::{Providers, Runs};
use crate::config::Config;
use crate::config::ProviderChoice;
use crate::delivery::hub::Hub;
use crate::delivery::writer::Writer;
use crate::provider::anthropic::AnthropicProvider;
use crate::provider::claude_cli::ClaudeCliProvider;
use crate::provider::openai::OpenAiProvider;
use crate::provider::scripted::ScriptedProvider;
use crate::provider::Provider;
use crate::store::{Store, StoreError};

/// Request bodies above this are refused with 413 before they are read in full (by default; see
/// `config::Limits`). The largest legitimate body is a run's user message
/// (`api::RUN_CONTENT_BYTES_MAX`) plus its JSON framing.
pub const REQUEST_BODY_BYTES_MAX: usize = 64 * 1024;
/// A REST request that takes longer than this is answered 408; WebSockets are exempt.
pub const REQUEST_TIMEOUT_MS: u64 = 30_000;

/// Exponential backoff: `initial_ms` doubled per `attempt` (from 0), never above `max_ms`.
pub(crate) fn backoff(initial_ms: u64, max_ms: u64, attempt: u32) -> Duration {
    Duration::from_millis(initial_ms.saturating_mul(1 << attempt.min(20)).min(max_ms))
}

/// Everything a handler needs. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub hub: Arc<Hub>,
    pub runs: Arc<Runs>,
    pub ws_connections: Arc<Semaphore>,
    /// Cancelled when the server shuts down, so long-lived sockets let go.
    pub shutdown: CancellationToken,
    /// How often a Letta stream that asked for pings gets one.
    pub letta_ping_interval: Duration,
    /// The access token every request must carry, when configured.
    pub api_token: Option<Arc<str>>,
    /// Origins besides the server's own whose pages may open a WebSocket.
    pub allowed_origins: Arc<Vec<String>>,
    pub limits: Arc<config::Limits>,
    /// With PostgreSQL: the other server processes on the same database.
    pub cluster: Option<Arc<cluster::Cluster>>,
    /// Folded timelines of recently read logs (history pages, the next turn's conversation).
    pub snapshots: Arc<history::Snapshots>,
}

impl AppState {
    /// Opens the store `DATABASE_URL` names and starts the writer (and, with PostgreSQL, the
    /// cluster tasks).
    pub async fn open(config: &Config) -> Result<AppState, StoreError> {
        let opened = store::open(&config.database_url, &config.cluster).await?;
        AppState::open_with(config, opened.store, opened.cluster).await
    }

    /// Starts the writer on `store` and ends the runs a crash left in flight
    /// ([`recovery::recover`]) before anything else can write.
    pub async fn open_with_store(
        config: &Config,
        store: Arc<dyn Store>,
    ) -> Result<AppState, StoreError> {
        AppState::open_with(config, store, None).await
    }

    /// [`AppState::open_with_store`], with the cluster side of a shared database.
    pub async fn open_with(
        config: &Config,
        store: Arc<dyn Store>,
        cluster_store: Option<Arc<dyn store::ClusterStore>>,
    ) -> Result<AppState, StoreError> {
        let hub = Arc::new(Hub::new(config.hub_room_batches_max));
        let writer =
            Writer::spawn_with(store.clone(), hub.clone(), config.writer_commit_retries_max);
        let recovered = recovery::recover(store.as_ref(), &writer, &[])
            .await
            .map_err(|error| match error {
                recovery::RecoveryError::Store(error)
                | recovery::RecoveryError::Append(delivery::writer::AppendError::Store(error)) => {
                    error
                }
                recovery::RecoveryError::Append(other) => {
                    StoreError::Unavailable(other.to_string())
                }
            })?;
        if recovered != recovery::Recovered::default() {
            tracing::warn!(?recovered, "recovered from an unclean stop");
        }
        let default = build_provider(&config.provider, config);
        let mut by_name = std::collections::HashMap::new();
        for choice in &config.agent_providers {
            let provider = build_provider(choice, config);
            by_name.insert(provider.name(), provider);
        }
        by_name.insert(default.name(), default.clone());
        let providers = Providers { default, by_name };
        let runs = Arc::new(Runs::new(
            writer.clone(),
            store.clone(),
            providers,
            tools::builtin(),
            config.run_iterations_max,
            agent::RunLimits {
                events_max: config.limits.run_events_max,
                tool_result_chars_max: config.limits.tool_result_chars_max,
            },
        ));
        let shutdown = CancellationToken::new();
        let cluster = cluster_store.map(|cluster_store| {
            cluster::Cluster::spawn(
                cluster_store,
                store.clone(),
                hub.clone(),
                runs.clone(),
                writer,
                shutdown.clone(),
            )
        });
        Ok(AppState {
            store,
            hub,
            runs,
            ws_connections: Arc::new(Semaphore::new(config.limits.ws_connections_max)),
            shutdown,
            letta_ping_interval: Duration::from_millis(config.letta_ping_interval_ms),
            api_token: config.api_token.as_deref().map(Arc::from),
            allowed_origins: Arc::new(config.allowed_origins.clone()),
            limits: Arc::new(config.limits.clone()),
            cluster,
            snapshots: Arc::new(history::Snapshots::default()),
        })
    }
}

fn build_provider(choice: &ProviderChoice, config: &Config) -> Arc<dyn Provider> {
    match choice {
        ProviderChoice::Scripted => Arc::new(ScriptedProvider::new(config.scripted.clone())),
        ProviderChoice::Anthropic(anthropic) => Arc::new(AnthropicProvider::new(anthropic.clone())),
        ProviderChoice::OpenAi(openai) => Arc::new(OpenAiProvider::new(openai.clone())),
        ProviderChoice::ClaudeCli(cli) => Arc::new(ClaudeCliProvider::new(cli.clone())),
    }
}

/// The API routes (`/v1/…`, the page forms, `/healthz`).
pub fn api_router(state: AppState) -> Router {
    // Unknown `/v1/…` paths get a JSON 404 from the nested router's fallback (a `/v1/{*rest}`
    // route would shadow `/v1/agents/{id}/events/stream` in the path matcher).
    let timeout = || {
        tower_http::timeout::TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            Duration::from_millis(REQUEST_TIMEOUT_MS),
        )
    };
    // Letta's SDKs call `/v1/agents/` (trailing slash) for create and list.
    let v1 = Router::new()
        .route("/agents", post(api::create_agent).get(api::list_agents))
        .route("/agents/", post(api::create_agent).get(api::list_agents))
        .route(
            "/agents/{id}",
            get(api::get_agent).delete(api::delete_agent),
        )
        .route("/agents/{id}/events", get(api::list_events))
        .route("/agents/{id}/events/stream", get(sse::stream_events))
        .route("/agents/{id}/runs", post(api::create_run))
        .route("/agents/{id}/messages/cancel", post(api::cancel_run))
        .route("/runs/{run_id}", get(api::get_run))
        // `Router::layer` wraps the routes added so far: the ones below answer when a run ends
        // (or stream until it does), so the request timeout does not apply to them.
        .layer(timeout())
        .route(
            "/agents/{id}/messages",
            post(letta::send_message).get(letta::list_messages),
        )
        .route("/agents/{id}/messages/stream", post(letta::stream_messages))
        .route("/runs/{run_id}/stream", post(letta::resume_run))
        .fallback(api::unknown_route)
        .method_not_allowed_fallback(api::method_not_allowed);
    let forms = Router::new()
        .route("/agents", post(api::forms::create_agent))
        .route("/agents/{id}/runs", post(api::forms::send))
        .route("/healthz", get(api::healthz))
        .layer(timeout());
    let rest = Router::new()
        .nest("/v1", v1)
        .merge(forms)
        .layer(DefaultBodyLimit::max(state.limits.request_body_bytes_max));
    Router::new()
        .route("/v1/ws", get(ws::upgrade))
        .merge(rest)
        .with_state(state)
}

/// The whole application: API routes plus the server-rendered pages and static files.
pub fn app(state: AppState, leptos_options: LeptosOptions) -> Router {
    let routes = generate_route_list(app::App);
    let history = HistorySourceHandle(Arc::new(history::StoreHistory {
        store: state.store.clone(),
        snapshots: state.snapshots.clone(),
    }));
    let pages = Router::new()
        .leptos_routes_with_context(
            &leptos_options,
            routes,
            move || provide_context(history.clone()),
            {
                let leptos_options = leptos_options.clone();
                move || app::shell(leptos_options.clone())
            },
        )
        .fallback(leptos_axum::file_and_error_handler(app::shell))
        .with_state(leptos_options);
    api_router(state.clone())
        .merge(pages)
        .layer(axum::middleware::from_fn_with_state(
            state,
            auth::require_token,
        ))
}

/// Serves on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    config: Config,
    leptos_options: LeptosOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    config
        .prepare_database_directory()
        .map_err(ServeError::Io)?;
    let state = AppState::open(&config).await?;
    let stop = state.shutdown.clone();
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
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            stop.cancel();
        })
        .await
        .map_err(ServeError::Io)
}

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
}
