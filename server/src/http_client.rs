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

/// A client with reqwest's defaults, for tests and tools (the server's own clients handle the
/// builder's error).
pub fn client() -> reqwest::Client {
    builder()
        .build()
        .expect("an HTTP client with default settings builds")
}
