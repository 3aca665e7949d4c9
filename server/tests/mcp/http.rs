//! MCP servers over streamable HTTP, and over verified TLS.

use super::*;

async fn http_everything() -> HttpEverything {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = std::process::Command::new("node")
        .args([everything().display().to_string(), "streamableHttp".into()])
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("node starts");
    let url = format!("http://127.0.0.1:{port}/mcp");
    wait_until("the MCP server to listen", || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok().map(|_| ())
    })
    .await;
    HttpEverything { child, url }
}

#[tokio::test]
async fn a_server_over_streamable_http_serves_the_same_tools() {
    let everything = http_everything().await;
    let server = server_with(json!({ "remote": { "url": everything.url } })).await;
    let agent_id = server.mcp_agent(json!(["remote"])).await;
    let tools = server.get_json(&format!("/v1/tools?agent_id={agent_id}")).await;
    let sum = tools.as_array().unwrap().iter().find(|tool| tool["name"] == "get-sum");
    assert_eq!(sum.expect("listed over HTTP")["mcp_server_name"], "remote");
    let run_id = server
        .start_run(agent_id, r#"/tools get-sum {"a": 4, "b": 5}; trigger-long-running-operation {"duration": 1, "steps": 4}"#)
        .await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    let called = results(&events, run_id);
    assert_eq!(called.len(), 2, "{called:?}");
    assert!(called.iter().all(|(_, _, is_error)| !is_error), "{called:?}");
    assert!(called
        .iter()
        .any(|(name, result, _)| name == "get-sum" && result.to_string().contains('9')));
    let progress = events.iter().filter(|event| is_progress(event));
    assert!(progress.count() >= 2, "progress over HTTP too");
}

/// A self-signed certificate for `localhost` and 127.0.0.1 (openssl's command line), and a TLS
/// front on a free port that passes each connection on to `backend_port`.
async fn tls_front(directory: &std::path::Path, backend_port: u16) -> (u16, PathBuf) {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let (cert, key) = (directory.join("cert.pem"), directory.join("key.pem"));
    let made = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"])
        .args(["-nodes", "-days", "1", "-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        // A server's certificate, not an authority's (verifiers refuse a CA as the end entity).
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .args(["-addext", "extendedKeyUsage=serverAuth"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl runs");
    assert!(made.success());
    let chain = vec![CertificateDer::from_pem_file(&cert).unwrap()];
    let key = PrivateKeyDer::from_pem_file(&key).unwrap();
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(socket).await else {
                    return;
                };
                let Ok(mut backend) =
                    tokio::net::TcpStream::connect(("127.0.0.1", backend_port)).await
                else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut backend).await;
            });
        }
    });
    (port, cert)
}

/// An https MCP server is reached over TLS, its certificate verified: trusted (named by
/// `SSL_CERT_FILE`), its tools run; not trusted, or no certificates at all, its calls are error
/// results and the run goes on (rmcp's own client would have panicked without certificates).
#[tokio::test]
async fn an_https_server_is_reached_over_verified_tls() {
    use common::processes::{free_port, log_of, Process};
    let everything = http_everything().await;
    let backend_port: u16 = everything
        .url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    let directory = tempfile::tempdir().unwrap();
    let (port, cert) = tls_front(directory.path(), backend_port).await;
    let config = directory.path().join("mcp.json");
    std::fs::write(
        &config,
        json!({ "mcpServers": { "secure": { "url": format!("https://localhost:{port}/mcp") } } })
            .to_string(),
    )
    .unwrap();
    let http = agentstream_server::http_client::client();
    // Trusted; another authority's certificates (the system's own, if any: the front's is not
    // among them); none at all (the call fails; nothing panics).
    let cases = [
        (true, cert.clone()),
        (false, PathBuf::from("/etc/ssl/certs/ca-certificates.crt")),
        (false, directory.path().join("none.pem")),
    ];
    for (trusted, certificates) in cases {
        if !trusted && !certificates.exists() && !certificates.ends_with("none.pem") {
            continue;
        }
        let env = [
            ("AGENTSTREAM_MCP_CONFIG", config.display().to_string()),
            ("SSL_CERT_FILE", certificates.display().to_string()),
            ("SSL_CERT_DIR", directory.path().join("no-dir").display().to_string()),
        ];
        let server = Process::start(free_port(), &env).await;
        let agent_id =
            server.create_agent(json!({ "metadata": { "mcp_servers": ["secure"] } })).await;
        server.start_run(agent_id, r#"/tools get-sum {"a": 4, "b": 5}"#).await;
        let log = wait_until("the run's end", || async {
            let log = log_of(&http, &server.base, agent_id).await;
            log.iter().any(|event| event.kind.is_run_end()).then_some(log)
        })
        .await;
        let result = log
            .iter()
            .find(|event| event.kind == EventKind::ToolResult)
            .map(|event| event.content.clone())
            .unwrap_or_default();
        if trusted {
            assert_eq!(result["is_error"], false, "{result}");
            assert!(result["result"].to_string().contains('9'), "{result}");
        } else {
            assert_eq!(result["is_error"], true, "an untrusted certificate: {result}");
            assert!(log.iter().all(|event| event.kind != EventKind::Error), "no panic");
        }
    }
}
