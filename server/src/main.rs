//! The `server` binary: reads flags and environment, binds, serves. See `agentstream_server` for
//! the rest.

use agentstream_server::config::{Config, HELP};
use leptos::prelude::get_configuration;
use tracing_subscriber::EnvFilter;

/// Command-line flags and the environment variable each one sets (flags win).
const FLAGS: &[(&str, &str)] = &[
    ("--addr", "LEPTOS_SITE_ADDR"),
    ("--site-root", "LEPTOS_SITE_ROOT"),
    ("--database-url", "DATABASE_URL"),
    ("--provider", "AGENTSTREAM_PROVIDER"),
    ("--model", "AGENTSTREAM_MODEL"),
    ("--claude-cli", "AGENTSTREAM_CLAUDE_CLI"),
    ("--max-iterations", "AGENTSTREAM_MAX_ITERATIONS"),
    (
        "--scripted-token-delay-ms",
        "AGENTSTREAM_SCRIPTED_TOKEN_DELAY_MS",
    ),
    (
        "--scripted-reply-tokens",
        "AGENTSTREAM_SCRIPTED_REPLY_TOKENS",
    ),
    ("--scripted-seed", "AGENTSTREAM_SCRIPTED_SEED"),
    ("--api-token", "AGENTSTREAM_API_TOKEN"),
    ("--allowed-origins", "AGENTSTREAM_ALLOWED_ORIGINS"),
    (
        "--letta-ping-interval-ms",
        "AGENTSTREAM_LETTA_PING_INTERVAL_MS",
    ),
];

/// Applies `--flag value` / `--flag=value` to the environment. Runs before any thread exists.
fn apply_flags(arguments: &[String]) -> Result<(), String> {
    let mut index = 0;
    while index < arguments.len() {
        let argument = &arguments[index];
        let (flag, inline_value) = match argument.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_owned())),
            None => (argument.as_str(), None),
        };
        let Some((_, variable)) = FLAGS.iter().find(|(name, _)| *name == flag) else {
            return Err(format!("unknown argument {argument:?}; see --help"));
        };
        let value = match inline_value {
            Some(value) => value,
            None => {
                index += 1;
                arguments
                    .get(index)
                    .cloned()
                    .ok_or_else(|| format!("{flag} needs a value"))?
            }
        };
        std::env::set_var(variable, value);
        index += 1;
    }
    Ok(())
}

fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    if arguments.iter().any(|arg| arg == "--help" || arg == "-h") {
        print!("{HELP}");
        println!("\nFlags (each sets the variable beside it):");
        for (flag, variable) in FLAGS {
            println!("  {flag:<28} {variable}");
        }
        return;
    }
    if let Err(message) = apply_flags(&arguments) {
        eprintln!("agentstream: {message}");
        std::process::exit(2);
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("the tokio runtime starts");
    if let Err(message) = runtime.block_on(run()) {
        eprintln!("agentstream: {message}");
        std::process::exit(1);
    }
}

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
        config.database_url,
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
