//! The server's state: what it opened at start, and the narrow views handlers take of it
//! (axum's `FromRef`): a handler names what it uses — the store, the run starter, the
//! streams' feed, the limits — rather than seeing everything.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::FromRef;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::agent::history::Snapshots;
use crate::agent::produce::Producers;
use crate::agent::start::Starter;
use crate::agent::{recovery, Providers, Runs};
use crate::cluster::{self, Cluster};
use crate::config::{Config, ProviderChoice};
use crate::delivery::hub::Hub;
use crate::delivery::writer::{self, Writer};
use crate::http::token::TokenKeys;
use crate::metrics::Metrics;
use crate::provider::anthropic::AnthropicProvider;
use crate::provider::claude_cli::ClaudeCliProvider;
use crate::provider::openai::OpenAiProvider;
use crate::provider::scripted::ScriptedProvider;
use crate::provider::Provider;
use crate::store::{self, Store, StoreError};
use crate::telemetry::Telemetry;

/// Everything a handler needs: one pointer to what the server opened ([`Opened`]), so cloning it
/// (axum does, for every request's handler and state-taking middleware) is one counter, not
/// one per field.
#[derive(Clone)]
pub struct AppState(Arc<Opened>);

impl std::ops::Deref for AppState {
    type Target = Opened;

    fn deref(&self) -> &Opened {
        &self.0
    }
}

/// What the server opened at start; handlers see it through [`AppState`].
pub struct Opened {
    pub store: Arc<dyn Store>,
    pub hub: Arc<Hub>,
    pub runs: Arc<Runs>,
    pub ws_connections: Arc<Semaphore>,
    /// Open SSE streams (native and Letta): `limits.sse_streams_max` permits.
    pub sse_streams: Arc<Semaphore>,
    /// Cancelled when the server shuts down, so long-lived sockets let go.
    pub shutdown: CancellationToken,
    /// How often a Letta stream that asked for pings gets one.
    pub letta_ping_interval: Duration,
    /// The access token every request must carry, when configured.
    pub api_token: Option<Arc<str>>,
    /// The secrets scoped tokens are signed with (`AGENTSTREAM_TOKEN_SECRET`), when configured.
    pub token_keys: Option<Arc<TokenKeys>>,
    /// Origins besides the server's own whose pages may open a WebSocket.
    pub allowed_origins: Arc<Vec<String>>,
    /// Hosts besides loopback that requests may name when no token is set.
    pub allowed_hosts: Arc<Vec<String>>,
    /// Requests each token subject holds now (`limits.requests_per_subject_max` each).
    pub subjects: Arc<crate::http::subjects::SubjectSlots>,
    pub limits: Arc<crate::limits::Limits>,
    /// With PostgreSQL: the other server processes on the same database.
    pub cluster: Option<Arc<Cluster>>,
    /// Folded timelines of recently read logs (history pages, the next turn's conversation).
    pub snapshots: Arc<Snapshots>,
    /// Starting runs: the use case every surface calls.
    pub starter: Starter,
    /// The one writer (for readiness: it must be running).
    pub writer: Writer,
    /// What the server counts (`GET /metrics`).
    pub metrics: Arc<Metrics>,
    /// The SQLite file (and its WAL) whose size `/metrics` reports; `None` with PostgreSQL.
    pub database_file: Option<std::path::PathBuf>,
    /// Traces (off unless an OTLP endpoint is configured).
    pub telemetry: Arc<Telemetry>,
    /// Where the inspector links a run's trace (`AGENTSTREAM_TRACE_URL_TEMPLATE`).
    pub trace_url_template: Option<Arc<str>>,
    /// Runs external producers write (the producer API).
    pub producers: Arc<Producers>,
    /// Durable streams (`surfaces::durable`): one writer per path, and the readers' watches.
    pub durable: Arc<crate::surfaces::durable::service::Service>,
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
        let metrics = Arc::new(Metrics::new());
        let hub = Arc::new(Hub::new(config.hub_room_batches_max).observed(metrics.clone()));
        let writer = Writer::spawn_observed(
            store.clone(),
            hub.clone(),
            config.writer_commit_retries_max,
            metrics.clone(),
        );
        let recovered =
            recovery::recover(store.as_ref(), &writer, &[]).await.map_err(|error| match error {
                recovery::RecoveryError::Store(error)
                | recovery::RecoveryError::Append(writer::AppendError::Store(error)) => error,
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
        let mcp = Arc::new(crate::mcp::McpHub::observed(
            &config.mcp,
            Duration::from_millis(config.tool_call_timeout_ms),
            metrics.clone(),
        ));
        let telemetry = Arc::new(match &config.otlp_traces_endpoint {
            None => Telemetry::off(),
            Some(endpoint) => Telemetry::start(endpoint, metrics.clone()).unwrap_or_else(|error| {
                tracing::error!(%error, "traces are off");
                Telemetry::off()
            }),
        });
        let runs = Arc::new(
            Runs::new(
                writer.clone(),
                store.clone(),
                providers,
                crate::tools::builtin(),
                config.run_iterations_max,
                crate::agent::RunLimits {
                    events_max: config.limits.run_events_max,
                    bytes_max: config.limits.run_bytes_max,
                    tool_result_chars_max: config.limits.tool_result_chars_max,
                },
            )
            .with_mcp(mcp)
            .with_telemetry(telemetry.clone()),
        );
        let shutdown = CancellationToken::new();
        let cluster = cluster_store.map(|cluster_store| {
            cluster::Cluster::spawn(
                cluster_store,
                store.clone(),
                hub.clone(),
                runs.clone(),
                writer.clone(),
                shutdown.clone(),
            )
        });
        let snapshots = Arc::new(Snapshots::default());
        let starter = Starter {
            store: store.clone(),
            runs: runs.clone(),
            cluster: cluster.as_ref().map(|cluster| cluster.store.clone()),
            snapshots: snapshots.clone(),
        };
        let producers = Producers::new(
            store.clone(),
            writer.clone(),
            runs.clone(),
            starter.cluster.clone(),
            crate::agent::RunLimits {
                events_max: config.limits.run_events_max,
                bytes_max: config.limits.run_bytes_max,
                tool_result_chars_max: config.limits.tool_result_chars_max,
            },
        );
        // The produced runs recovery left to their producers are held here until their
        // producers go on or their leases end.
        producers.hold_open_runs(&recovered.left_to_producers).await;
        tokio::spawn(crate::agent::approval_timeout::expire_approvals(
            starter.clone(),
            (config.approval_timeout_ms > 0)
                .then(|| Duration::from_millis(config.approval_timeout_ms)),
            shutdown.clone(),
        ));
        let durable = Arc::new(crate::surfaces::durable::service::Service::new(
            store.clone(),
            writer.clone(),
            starter.cluster.is_some(),
        ));
        Ok(AppState(Arc::new(Opened {
            store,
            hub,
            runs,
            ws_connections: Arc::new(Semaphore::new(config.limits.ws_connections_max)),
            sse_streams: Arc::new(Semaphore::new(config.limits.sse_streams_max)),
            shutdown,
            letta_ping_interval: Duration::from_millis(config.letta_ping_interval_ms),
            api_token: config.api_token.as_deref().map(Arc::from),
            token_keys: config.token_keys.clone().map(Arc::new),
            allowed_origins: Arc::new(config.allowed_origins.clone()),
            allowed_hosts: Arc::new(config.allowed_hosts.clone()),
            subjects: crate::http::subjects::SubjectSlots::new(
                config.limits.requests_per_subject_max,
            ),
            limits: Arc::new(config.limits.clone()),
            cluster,
            snapshots,
            starter,
            writer,
            metrics,
            database_file: store::sqlite_path(&config.database_url),
            telemetry,
            trace_url_template: config.trace_url_template.as_deref().map(Arc::from),
            producers,
            durable,
        })))
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

/// The parts of [`AppState`] the handlers take (axum's `FromRef`). `Type { a, b }`: a struct
/// whose fields are clones of the state's fields of the same names, `name = |state| …` for
/// those computed; `Type = field`: one field's clone.
macro_rules! parts {
    ($($ty:path { $($field:ident),* $(; $($made:ident = $make:expr),*)? })*) => {$(
        impl FromRef<AppState> for $ty {
            fn from_ref(state: &AppState) -> Self {
                Self {
                    $($field: state.$field.clone(),)*
                    $($($made: { let make: fn(&AppState) -> _ = $make; make(state) },)*)?
                }
            }
        }
    )*};
}

macro_rules! part {
    ($($ty:ty = $field:ident;)*) => {$(
        impl FromRef<AppState> for $ty {
            fn from_ref(state: &AppState) -> Self {
                state.$field.clone()
            }
        }
    )*};
}

part! {
    Arc<dyn Store> = store;
    Arc<Producers> = producers;
    Starter = starter;
    Arc<Runs> = runs;
    Arc<crate::limits::Limits> = limits;
    Option<Arc<Cluster>> = cluster;
    Arc<Telemetry> = telemetry;
    Arc<Metrics> = metrics;
}

parts! {
    crate::http::rest::Readiness { store, writer, cluster }
    crate::surfaces::Feeds { store, hub, shutdown, limits, sse_streams, metrics }
    crate::http::auth::Access {
        api_token, token_keys, allowed_origins, allowed_hosts, store, subjects
    }
    crate::surfaces::chat::ChatState {
        store, hub, runs, starter, cluster, snapshots, shutdown, sse_streams;
        sse_streams_max = |state| state.limits.sse_streams_max
    }
    crate::surfaces::durable::DurableState {
        store, hub, sse_streams, shutdown;
        service = |state| state.durable.clone(),
        sse_streams_max = |state| state.limits.sse_streams_max
    }
    crate::surfaces::letta::LettaState {
        store, hub, runs, starter, shutdown, sse_streams;
        ping_interval = |state| state.letta_ping_interval,
        sse_streams_max = |state| state.limits.sse_streams_max
    }
    crate::http::rest::Deletion { store, runs, hub, snapshots }
}

impl FromRef<AppState> for crate::surfaces::native::ws::WsConnections {
    fn from_ref(state: &AppState) -> Self {
        crate::surfaces::native::ws::WsConnections(state.ws_connections.clone())
    }
}
