//! The `server` binary: reads flags and environment, binds, serves. See `agentstream_server` for
//! the rest.

use agentstream_server::config::{Config, HELP};
use leptos::prelude::get_configuration;
use tracing_subscriber::EnvFilter;

/// mimalloc instead of the system's allocator: an append allocates and frees dozens of small
/// buffers (headers, JSON, rows) across threads, and glibc's malloc was a tenth to a fifth of
/// the server's CPU under append load (`perf record` of `./scripts/bench.sh --peers`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Flags whose variable is not an `AGENTSTREAM_…` one. Every `AGENTSTREAM_NAME` variable in
/// [`HELP`] has a flag too: `--name`, lower case, `-` for `_` ([`flag_variable`]). Secrets have
/// none — provider keys (`ANTHROPIC_API_KEY`, …), `DATABASE_URL` (it may hold a password):
/// a command line is visible to every process of the machine.
const FLAGS: &[(&str, &str)] =
    &[("--addr", "LEPTOS_SITE_ADDR"), ("--site-root", "LEPTOS_SITE_ROOT")];

/// Variables that hold a secret: environment only, like the provider keys.
const SECRET_VARIABLES: &[&str] = &["AGENTSTREAM_TOKEN_SECRET", "AGENTSTREAM_API_TOKEN"];

/// The `AGENTSTREAM_…` variables the server reads, as [`HELP`] lists them (those that may be
/// flags: not the secrets).
fn agentstream_variables() -> impl Iterator<Item = &'static str> {
    HELP.split(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
        .filter(|word| word.starts_with("AGENTSTREAM_") && word.len() > "AGENTSTREAM_".len())
        .filter(|word| !SECRET_VARIABLES.contains(word))
}

/// The flag of an `AGENTSTREAM_…` variable: `AGENTSTREAM_RUN_LEASE_MS` → `--run-lease-ms`.
fn flag_of(variable: &str) -> String {
    let name = variable.trim_start_matches("AGENTSTREAM_");
    format!("--{}", name.to_ascii_lowercase().replace('_', "-"))
}

/// The variable a flag sets, if the flag is one of ours.
fn flag_variable(flag: &str) -> Option<String> {
    if let Some((_, variable)) = FLAGS.iter().find(|(name, _)| *name == flag) {
        return Some((*variable).to_owned());
    }
    agentstream_variables().find(|variable| flag_of(variable) == flag).map(str::to_owned)
}

/// Applies `--flag value` / `--flag=value` to the environment. Runs before any thread exists.
fn apply_flags(arguments: &[String]) -> Result<(), String> {
    let mut index = 0;
    while index < arguments.len() {
        let argument = &arguments[index];
        let (flag, inline_value) = match argument.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_owned())),
            None => (argument.as_str(), None),
        };
        let Some(variable) = flag_variable(flag) else {
            return Err(format!("unknown argument {argument:?}; see --help"));
        };
        let value = match inline_value {
            Some(value) => value,
            None => {
                index += 1;
                arguments.get(index).cloned().ok_or_else(|| format!("{flag} needs a value"))?
            }
        };
        std::env::set_var(variable, value);
        index += 1;
    }
    Ok(())
}

fn main() {
    agentstream_server::process::no_huge_pages();
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    if arguments.iter().any(|arg| arg == "--help" || arg == "-h") {
        print!("{HELP}");
        println!("\nFlags (each sets the variable beside it; --flag value or --flag=value):");
        for (flag, variable) in FLAGS {
            println!("  {flag:<44} {variable}");
        }
        let mut seen = std::collections::BTreeSet::new();
        for variable in agentstream_variables().filter(|variable| seen.insert(*variable)) {
            println!("  {:<44} {variable}", flag_of(variable));
        }
        return;
    }
    if let Err(message) = apply_flags(&arguments) {
        eprintln!("agentstream: {message}");
        std::process::exit(2);
    }
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // `AGENTSTREAM_LOG_FORMAT=json`: one JSON object a line, with the request's span (its
    // `request_id`) on every line written while it is handled. Read here, before the rest of the
    // configuration, so the configuration's own errors are logged in the chosen form.
    let json = std::env::var("AGENTSTREAM_LOG_FORMAT").is_ok_and(|format| format.trim() == "json");
    if json {
        tracing_subscriber::fmt()
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .with_env_filter(filter)
            .init();
    } else {
        tracing_subscriber::fmt().with_env_filter(filter).init();
    }
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
        let database_url = std::env::var("DATABASE_URL").ok();
        let workers = agentstream_server::process::runtime_workers(cores, database_url.as_deref());
        runtime.worker_threads(workers);
    }
    let runtime = runtime.enable_all().build().expect("the tokio runtime starts");
    let outcome = runtime.block_on(run());
    // Connections dropped unfinished at shutdown (clients that read nothing) are tasks still
    // in the runtime: they are dropped here, and nothing blocking may hold the exit either.
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN_WAIT_MAX);
    if let Err(message) = outcome {
        eprintln!("agentstream: {message}");
        std::process::exit(1);
    }
}

/// After serving ends, how long the runtime waits for blocking work before the process exits.
const RUNTIME_SHUTDOWN_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(1);

async fn run() -> Result<(), String> {
    let config = Config::from_env()?;
    let leptos_options = get_configuration(None)
        .map_err(|error| format!("cannot read the site configuration: {error}"))?
        .leptos_options;
    let address = leptos_options.site_addr;
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|error| format!("cannot listen on {address}: {error}"))?;
    tracing::info!(
        "listening on http://{address} (database {}, site {})",
        agentstream_server::store::redact_url(&config.database_url),
        leptos_options.site_root
    );
    agentstream_server::serve(listener, config, leptos_options, shutdown_signal())
        .await
        .map_err(|error| error.to_string())
}

async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {},
        _ = terminate => {},
    }
    tracing::info!("shutting down");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variable_has_a_flag() {
        let cases = [
            ("--addr", Some("LEPTOS_SITE_ADDR")),
            // Secrets: environment only, never in a process list.
            ("--database-url", None),
            ("--api-token", None),
            ("--provider", Some("AGENTSTREAM_PROVIDER")),
            ("--max-iterations", Some("AGENTSTREAM_MAX_ITERATIONS")),
            ("--run-lease-ms", Some("AGENTSTREAM_RUN_LEASE_MS")),
            ("--tool-result-chars-max", Some("AGENTSTREAM_TOOL_RESULT_CHARS_MAX")),
            (
                "--ws-subscriptions-per-connection-max",
                Some("AGENTSTREAM_WS_SUBSCRIPTIONS_PER_CONNECTION_MAX"),
            ),
            ("--anthropic-api-key", None),
            // A secret: environment only, never in a process list.
            ("--token-secret", None),
            ("--token-ttl-seconds-max", Some("AGENTSTREAM_TOKEN_TTL_SECONDS_MAX")),
            ("--nope", None),
            ("--", None),
        ];
        for (flag, variable) in cases {
            assert_eq!(flag_variable(flag).as_deref(), variable, "{flag}");
        }
        let variables: Vec<_> = agentstream_variables().collect();
        assert!(variables.len() >= 20, "{variables:?}");
        for variable in variables {
            assert_eq!(flag_variable(&flag_of(variable)).as_deref(), Some(variable));
        }
    }
}
