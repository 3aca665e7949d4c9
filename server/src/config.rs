//! Server configuration, read from the environment (and `--help` for the list).

mod help;
use crate::limits::HUB_ROOM_BATCHES_MAX_DEFAULT;
use crate::limits::{Limits, RUN_ITERATIONS_MAX_DEFAULT};
use crate::provider::anthropic::{
    AnthropicConfig, ANTHROPIC_BASE_URL_DEFAULT, ANTHROPIC_MODEL_DEFAULT,
};
use crate::provider::claude_cli::{ClaudeCliConfig, CLAUDE_CLI_COMMAND_DEFAULT};
use crate::provider::openai::{OpenAiConfig, OPENAI_BASE_URL_DEFAULT, OPENAI_MODEL_DEFAULT};
use crate::provider::scripted::ScriptedConfig;
pub use help::HELP;

/// At shutdown, runs in flight may go on this long before they are interrupted.
pub const SHUTDOWN_DRAIN_MS_DEFAULT: u64 = 10_000;
/// Where the database lives when `DATABASE_URL` is not set.
pub const DATABASE_URL_DEFAULT: &str = "sqlite://data/agentstream.db";

/// Letta streams ping this often by default: short enough for proxies that cut idle connections
/// at 30–60 s, and a disconnected client is noticed within it even while a tool runs silently.
pub const LETTA_PING_INTERVAL_MS_DEFAULT: u64 = 15_000;

impl Limits {
    /// Each limit from its `AGENTSTREAM_…` variable, or the default. Zero is refused: every limit
    /// must let something through.
    fn from_env() -> Result<Limits, String> {
        let defaults = Limits::default();
        fn positive<T: std::str::FromStr + PartialEq + From<u8>>(
            name: &str,
            default: T,
        ) -> Result<T, String> {
            let value = parse_env(name, default)?;
            if value == T::from(0) {
                return Err(format!("{name} must be at least 1"));
            }
            Ok(value)
        }
        // Each limit's variable is `AGENTSTREAM_` and the field's name in capitals (the list:
        // `--help`).
        macro_rules! from_env {
            ($($field:ident),* $(,)?) => {
                Limits {
                    $($field: positive(
                        &format!("AGENTSTREAM_{}", stringify!($field).to_ascii_uppercase()),
                        defaults.$field,
                    )?,)*
                }
            };
        }
        Ok(from_env!(
            request_body_bytes_max,
            ws_message_bytes_max,
            ws_subscriptions_per_connection_max,
            ws_connections_max,
            subscriber_outbound_frames_max,
            events_page_limit_max,
            run_events_max,
            run_bytes_max,
            tool_result_chars_max,
            ws_ping_interval_ms,
            ws_idle_timeout_ms,
            sse_streams_max,
            body_read_ms_max,
            requests_per_subject_max,
        ))
    }
}

/// Which provider the server's agents use.
#[derive(Clone, Debug)]
pub enum ProviderChoice {
    Scripted,
    Anthropic(AnthropicConfig),
    OpenAi(OpenAiConfig),
    ClaudeCli(ClaudeCliConfig),
}

#[derive(Clone, Debug)]
pub struct Config {
    /// `sqlite://path/to.db` or `postgres://…` (several server processes on one database).
    pub database_url: String,
    /// With PostgreSQL: run leases and the connection pool (see `store::ClusterOptions`).
    pub cluster: crate::store::ClusterOptions,
    pub provider: ProviderChoice,
    /// Further providers agents may pick with `metadata.provider` (the default is always one).
    pub agent_providers: Vec<ProviderChoice>,
    pub scripted: ScriptedConfig,
    /// Live batches a room buffers per agent before a slow subscriber lags.
    pub hub_room_batches_max: usize,
    /// LLM calls per run at most.
    pub run_iterations_max: u32,
    /// Times the writer tries a commit again while the database says that may work.
    pub writer_commit_retries_max: u32,
    /// A Letta stream that asked for pings (`include_pings`, the default) gets one this often.
    pub letta_ping_interval_ms: u64,
    /// At shutdown, how long runs in flight may go on before they are interrupted.
    pub shutdown_drain_ms: u64,
    /// When set, every request must carry this token (see `auth`).
    pub api_token: Option<String>,
    /// Serve without an access token on an address other than loopback
    /// (`AGENTSTREAM_INSECURE_NO_TOKEN`): refused unless this says so.
    pub insecure_no_token: bool,
    /// The secrets of scoped tokens (`AGENTSTREAM_TOKEN_SECRET`, the first signs) and the
    /// longest lifetime accepted (`AGENTSTREAM_TOKEN_TTL_SECONDS_MAX`).
    pub token_keys: Option<crate::http::token::TokenKeys>,
    /// Origins besides the server's own whose pages may open a WebSocket.
    pub allowed_origins: Vec<String>,
    /// Host names (or `host:port`) besides loopback that requests may name when no access token
    /// is set (`AGENTSTREAM_ALLOWED_HOSTS`): anything else is refused (DNS rebinding).
    pub allowed_hosts: Vec<String>,
    pub limits: Limits,
    /// The MCP servers agents may name (`AGENTSTREAM_MCP_CONFIG`): none by default.
    pub mcp: crate::mcp::McpConfig,
    /// How long one MCP tool call may take (`AGENTSTREAM_TOOL_CALL_TIMEOUT_MS`).
    pub tool_call_timeout_ms: u64,
    /// How long an approval request waits before it is answered as denied
    /// (`AGENTSTREAM_APPROVAL_TIMEOUT_MS`; 0 = until someone answers). An agent's
    /// `metadata.approval_timeout_ms` overrides it.
    pub approval_timeout_ms: u64,
    /// Where `GET /metrics` is served on a listener of its own, without the access token
    /// (`AGENTSTREAM_METRICS_ADDR`, for a scraper on a private network); `None`: on the main
    /// listener only, behind the operator token when one is set.
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Log lines as JSON objects (`AGENTSTREAM_LOG_FORMAT=json`) instead of text.
    pub log_json: bool,
    /// Where traces go over OTLP/HTTP (the full URL of the traces path), from the standard
    /// `OTEL_EXPORTER_OTLP_…` variables; `None`: tracing off.
    pub otlp_traces_endpoint: Option<String>,
    /// A link to a trace with `{trace_id}` in it (`AGENTSTREAM_TRACE_URL_TEMPLATE`, e.g. a
    /// Jaeger or Tempo address): the run inspector links a run's trace id with it.
    pub trace_url_template: Option<String>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            database_url: DATABASE_URL_DEFAULT.to_owned(),
            cluster: crate::store::ClusterOptions::default(),
            provider: ProviderChoice::Scripted,
            agent_providers: Vec::new(),
            scripted: ScriptedConfig::default(),
            hub_room_batches_max: HUB_ROOM_BATCHES_MAX_DEFAULT,
            run_iterations_max: RUN_ITERATIONS_MAX_DEFAULT,
            writer_commit_retries_max: crate::limits::WRITER_COMMIT_RETRIES_MAX_DEFAULT,
            letta_ping_interval_ms: LETTA_PING_INTERVAL_MS_DEFAULT,
            shutdown_drain_ms: SHUTDOWN_DRAIN_MS_DEFAULT,
            api_token: None,
            insecure_no_token: false,
            token_keys: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            limits: Limits::default(),
            mcp: crate::mcp::McpConfig::default(),
            tool_call_timeout_ms: crate::limits::TOOL_CALL_TIMEOUT_MS_DEFAULT,
            approval_timeout_ms: 0,
            metrics_addr: None,
            log_json: false,
            otlp_traces_endpoint: None,
            trace_url_template: None,
        }
    }
}

fn parse_env<T: std::str::FromStr>(name: &str, default: T) -> Result<T, String> {
    match std::env::var(name) {
        Ok(text) => {
            text.trim().parse().map_err(|_| format!("{name}={text:?} is not a valid value"))
        }
        Err(_) => Ok(default),
    }
}

/// An environment variable that is set and not blank.
fn variable(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.trim().is_empty())
}

fn anthropic_from_env(api_key: String) -> ProviderChoice {
    ProviderChoice::Anthropic(AnthropicConfig {
        api_key,
        base_url: variable("ANTHROPIC_BASE_URL")
            .unwrap_or_else(|| ANTHROPIC_BASE_URL_DEFAULT.into()),
        model: variable("AGENTSTREAM_MODEL").unwrap_or_else(|| ANTHROPIC_MODEL_DEFAULT.into()),
    })
}

fn openai_from_env() -> ProviderChoice {
    ProviderChoice::OpenAi(OpenAiConfig {
        api_key: variable("OPENAI_API_KEY"),
        base_url: variable("OPENAI_BASE_URL").unwrap_or_else(|| OPENAI_BASE_URL_DEFAULT.into()),
        model: variable("AGENTSTREAM_MODEL").unwrap_or_else(|| OPENAI_MODEL_DEFAULT.into()),
    })
}

fn claude_cli_from_env(command: String) -> ProviderChoice {
    ProviderChoice::ClaudeCli(ClaudeCliConfig {
        command,
        model: variable("AGENTSTREAM_MODEL"),
        pass_env: variable("AGENTSTREAM_CLAUDE_CLI_ENV")
            .map(|names| names.split(',').map(|name| name.trim().to_owned()).collect())
            .unwrap_or_default(),
    })
}

/// The default provider (`AGENTSTREAM_PROVIDER`), and every provider whose settings are present,
/// which agents may choose too.
fn providers_from_env() -> Result<(ProviderChoice, Vec<ProviderChoice>), String> {
    let mut agent_providers = vec![ProviderChoice::Scripted];
    if let Some(api_key) = variable("ANTHROPIC_API_KEY") {
        agent_providers.push(anthropic_from_env(api_key));
    }
    if variable("OPENAI_API_KEY").is_some() || variable("OPENAI_BASE_URL").is_some() {
        agent_providers.push(openai_from_env());
    }
    if let Some(command) = variable("AGENTSTREAM_CLAUDE_CLI") {
        agent_providers.push(claude_cli_from_env(command));
    }
    let provider_name = variable("AGENTSTREAM_PROVIDER").unwrap_or_else(|| "scripted".into());
    let provider = match provider_name.as_str() {
        "scripted" => ProviderChoice::Scripted,
        "anthropic" => anthropic_from_env(
            variable("ANTHROPIC_API_KEY")
                .ok_or("AGENTSTREAM_PROVIDER=anthropic needs ANTHROPIC_API_KEY")?,
        ),
        "openai" => openai_from_env(),
        "claude-cli" => claude_cli_from_env(
            variable("AGENTSTREAM_CLAUDE_CLI").unwrap_or_else(|| CLAUDE_CLI_COMMAND_DEFAULT.into()),
        ),
        other => {
            return Err(format!(
                "AGENTSTREAM_PROVIDER={other:?}: choose scripted, anthropic, openai or claude-cli"
            ))
        }
    };
    Ok((provider, agent_providers))
}

impl Config {
    pub fn from_env() -> Result<Config, String> {
        let defaults = Config::default();
        let (provider, agent_providers) = providers_from_env()?;
        let api_token = variable("AGENTSTREAM_API_TOKEN").map(|token| token.trim().to_owned());
        let token_ttl_seconds_max = parse_env(
            "AGENTSTREAM_TOKEN_TTL_SECONDS_MAX",
            crate::limits::TOKEN_TTL_SECONDS_MAX_DEFAULT,
        )?
        .max(1);
        let token_keys = match variable("AGENTSTREAM_TOKEN_SECRET") {
            None => None,
            // Scoped tokens narrow the operator's access; without an operator token the server
            // is open to everyone and a scoped token would narrow nothing.
            Some(_) if api_token.is_none() => {
                return Err("AGENTSTREAM_TOKEN_SECRET needs AGENTSTREAM_API_TOKEN too: without \
                            an operator token the server is open and scoped tokens mean nothing"
                    .to_owned())
            }
            Some(secrets) => {
                Some(crate::http::token::TokenKeys::new(&secrets, token_ttl_seconds_max)?)
            }
        };
        Ok(Config {
            database_url: std::env::var("DATABASE_URL").unwrap_or(defaults.database_url),
            cluster: crate::store::ClusterOptions {
                run_lease_ms: parse_env("AGENTSTREAM_RUN_LEASE_MS", defaults.cluster.run_lease_ms)?
                    .max(100),
                pool_connections_max: parse_env(
                    "AGENTSTREAM_PG_POOL_CONNECTIONS_MAX",
                    defaults.cluster.pool_connections_max,
                )?
                .max(2),
            },
            provider,
            agent_providers,
            scripted: ScriptedConfig {
                seed: parse_env("AGENTSTREAM_SCRIPTED_SEED", defaults.scripted.seed)?,
                token_delay_ms: parse_env(
                    "AGENTSTREAM_SCRIPTED_TOKEN_DELAY_MS",
                    defaults.scripted.token_delay_ms,
                )?,
                reply_tokens: parse_env(
                    "AGENTSTREAM_SCRIPTED_REPLY_TOKENS",
                    defaults.scripted.reply_tokens,
                )?,
            },
            hub_room_batches_max: parse_env(
                "AGENTSTREAM_HUB_ROOM_BATCHES_MAX",
                defaults.hub_room_batches_max,
            )?,
            run_iterations_max: parse_env(
                "AGENTSTREAM_MAX_ITERATIONS",
                defaults.run_iterations_max,
            )?,
            writer_commit_retries_max: parse_env(
                "AGENTSTREAM_WRITER_COMMIT_RETRIES_MAX",
                defaults.writer_commit_retries_max,
            )?,
            letta_ping_interval_ms: parse_env(
                "AGENTSTREAM_LETTA_PING_INTERVAL_MS",
                defaults.letta_ping_interval_ms,
            )?
            .max(1),
            shutdown_drain_ms: parse_env(
                "AGENTSTREAM_SHUTDOWN_DRAIN_MS",
                defaults.shutdown_drain_ms,
            )?,
            api_token,
            insecure_no_token: match variable("AGENTSTREAM_INSECURE_NO_TOKEN")
                .as_deref()
                .map(str::trim)
            {
                None | Some("false" | "0" | "no") => false,
                Some("true" | "1" | "yes") => true,
                Some(other) => {
                    return Err(format!(
                        "AGENTSTREAM_INSECURE_NO_TOKEN={other:?}: use true or false"
                    ))
                }
            },
            token_keys,
            allowed_origins: variable("AGENTSTREAM_ALLOWED_ORIGINS")
                .map(|origins| {
                    origins
                        .split(',')
                        .map(|origin| origin.trim().trim_end_matches('/').to_owned())
                        .filter(|origin| !origin.is_empty())
                        .collect()
                })
                .unwrap_or_default(),
            allowed_hosts: variable("AGENTSTREAM_ALLOWED_HOSTS")
                .map(|hosts| {
                    hosts
                        .split(',')
                        .map(|host| host.trim().to_ascii_lowercase())
                        .filter(|host| !host.is_empty())
                        .collect()
                })
                .unwrap_or_default(),
            limits: Limits::from_env()?,
            mcp: match variable("AGENTSTREAM_MCP_CONFIG") {
                None => defaults.mcp,
                Some(path) => {
                    let text = std::fs::read_to_string(path.trim()).map_err(|error| {
                        format!("AGENTSTREAM_MCP_CONFIG: cannot read {path:?}: {error}")
                    })?;
                    crate::mcp::McpConfig::parse(&text)
                        .map_err(|error| format!("AGENTSTREAM_MCP_CONFIG {path:?}: {error}"))?
                }
            },
            tool_call_timeout_ms: parse_env(
                "AGENTSTREAM_TOOL_CALL_TIMEOUT_MS",
                defaults.tool_call_timeout_ms,
            )?
            .max(1),
            approval_timeout_ms: parse_env(
                "AGENTSTREAM_APPROVAL_TIMEOUT_MS",
                defaults.approval_timeout_ms,
            )?
            .min(crate::limits::APPROVAL_TIMEOUT_MS_MAX),
            metrics_addr: match variable("AGENTSTREAM_METRICS_ADDR") {
                None => None,
                Some(address) => Some(address.trim().parse().map_err(|_| {
                    format!("AGENTSTREAM_METRICS_ADDR={address:?}: expected host:port, e.g. 127.0.0.1:9464")
                })?),
            },
            otlp_traces_endpoint: crate::telemetry::endpoint_from_env()?,
            trace_url_template: match variable("AGENTSTREAM_TRACE_URL_TEMPLATE") {
                None => None,
                Some(template) if template.contains("{trace_id}") => Some(template.trim().to_owned()),
                Some(template) => {
                    return Err(format!(
                        "AGENTSTREAM_TRACE_URL_TEMPLATE={template:?}: put {{trace_id}} where the trace id goes"
                    ))
                }
            },
            log_json: match variable("AGENTSTREAM_LOG_FORMAT").as_deref().map(str::trim) {
                None | Some("text") => false,
                Some("json") => true,
                Some(other) => {
                    return Err(format!("AGENTSTREAM_LOG_FORMAT={other:?}: use text or json"))
                }
            },
        })
    }

    /// Creates the directory of a SQLite file so the default `./data/` works on a fresh clone.
    pub fn prepare_database_directory(&self) -> std::io::Result<()> {
        let Some(path) = crate::store::sqlite_path(&self.database_url) else {
            return Ok(());
        };
        match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => std::fs::create_dir_all(parent),
            _ => Ok(()),
        }
    }
}
