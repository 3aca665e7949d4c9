//! A provider the server cannot reach, on a machine without CA certificates: the server still
//! starts, and the run fails with an error that names the cause, not just "error sending
//! request".

use super::*;
use common::processes::{free_port, log_of, Process};

#[tokio::test]
async fn without_ca_certificates_the_server_starts_and_an_unreachable_provider_names_the_cause() {
    let directory = tempfile::tempdir().unwrap();
    let no_certificates = directory.path().join("none.pem");
    std::fs::write(&no_certificates, "").unwrap();
    let env = [
        ("AGENTSTREAM_PROVIDER", "openai".to_owned()),
        ("OPENAI_BASE_URL", "https://127.0.0.1:9/v1".to_owned()),
        // rustls-native-certs reads only this file when it is set: no roots at all.
        ("SSL_CERT_FILE", no_certificates.display().to_string()),
    ];
    let server = Process::start(free_port(), &env).await;
    let agent_id = server.create_agent(json!({ "name": "no roots" })).await;
    server.start_run(agent_id, "hello").await;
    let http = agentstream_server::http_client::client();
    let log = common::wait_until("the run to end", || async {
        let log = log_of(&http, &server.base, agent_id).await;
        log.last().is_some_and(|event| event.kind == EventKind::RunFailed).then_some(log)
    })
    .await;
    let failed = &log.last().unwrap().content;
    let message = failed["error"]["message"].as_str().unwrap();
    assert!(message.contains("Connection refused"), "the error names the cause: {message}");
}
