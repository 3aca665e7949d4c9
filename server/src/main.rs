//! The `server` binary: reads configuration, binds, serves. See `agentstream_server` for the rest.

use agentstream_server::config::{Config, HELP};
use leptos::prelude::get_configuration;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() {
    if std::env::args().skip(1).any(|arg| arg == "--help" || arg == "-h") {
        print!("{HELP}");
        return;
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    if let Err(message) = run().await {
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
