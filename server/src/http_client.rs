//! The one way this process makes an HTTP client (providers, MCP servers, the OTLP exporter, and
//! the tests and benchmarks that call the server): reqwest with rustls on ring, the process's
//! TLS provider, installed here before any client is built. One reqwest, one rustls, one crypto
//! provider, no system TLS and no C toolchain for one.

/// A client builder, the process's TLS provider installed (a second install is refused and
/// changes nothing).
pub fn builder() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
}

/// `error` with every cause under it (reqwest's own text is often just "error sending request"
/// or "builder error": the cause — refused, TLS, certificates — is in its sources).
pub fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A client with reqwest's defaults, for tests and tools (the server's own clients handle the
/// builder's error).
pub fn client() -> reqwest::Client {
    builder().build().expect("an HTTP client with default settings builds")
}
