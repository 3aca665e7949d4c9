//! SIGTERM to the real binary: it stops accepting, ends its SSE streams and WebSockets with a
//! proper close, gives runs in flight the drain (`AGENTSTREAM_SHUTDOWN_DRAIN_MS`), ends the rest
//! `interrupted`, commits what is queued and exits — an open stream does not hold it up.
//! Also how the binary sets up its process before anything runs.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentstream_server::store::sqlite::SqliteStore;
use app::EventKind;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;
use uuid::Uuid;

use crate::common::RequestExt;
use common::processes::{free_port, Process};

/// The drain the server is given: short, so the long run below is interrupted.
const DRAIN_MS: u64 = 1_000;

#[tokio::test]
async fn sigterm_ends_streams_interrupts_runs_and_exits() {
    let directory = tempfile::tempdir().unwrap();
    let database = directory.path().join("log.db");
    let mut server = Process::start(
        free_port(),
        &[
            ("DATABASE_URL", format!("sqlite://{}", database.display())),
            ("AGENTSTREAM_SCRIPTED_TOKEN_DELAY_MS", "5".into()),
            ("AGENTSTREAM_SCRIPTED_REPLY_TOKENS", "100000".into()),
            ("AGENTSTREAM_SHUTDOWN_DRAIN_MS", DRAIN_MS.to_string()),
        ],
    )
    .await;
    let http = agentstream_server::http_client::client();
    let agent: Value =
        http.post(format!("{}/v1/agents", server.base)).json(&json!({})).answer().await;
    let agent_id: Uuid = agent["id"].as_str().unwrap().parse().unwrap();

    // A native SSE stream and a WebSocket, both following the agent.
    let sse = http.get(format!("{}/v1/agents/{agent_id}/events/stream", server.base)).sent().await;
    assert_eq!(sse.status(), 200);
    let mut sse_body = sse.bytes_stream();
    let ws_url = format!("{}/v1/ws", server.base.replace("http://", "ws://"));
    let (mut socket, _) = tokio_tungstenite::connect_async(&ws_url).await.unwrap();
    let subscribe = json!({"type": "subscribe", "agent_id": agent_id, "since": 0});
    futures::SinkExt::send(&mut socket, Message::Text(subscribe.to_string().into())).await.unwrap();

    let run: Value = http
        .post(format!("{}/v1/agents/{agent_id}/runs", server.base))
        .json(&json!({"content": "talk for a long time"}))
        .answer()
        .await;
    let run_id: Uuid = run["run_id"].as_str().unwrap().parse().unwrap();
    // The stream is live: something of the run arrived.
    tokio::time::timeout(common::WAIT_MAX, sse_body.next())
        .await
        .expect("the SSE stream delivered")
        .unwrap()
        .unwrap();

    let signalled = Instant::now();
    server.sigterm();

    // The SSE response ends (its body finishes rather than hanging).
    let ended = tokio::time::timeout(common::WAIT_MAX, async {
        while let Some(chunk) = sse_body.next().await {
            if chunk.is_err() {
                break;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the SSE stream was still open after SIGTERM");
    // The WebSocket gets a close frame: 1001, going away.
    let close = tokio::time::timeout(common::WAIT_MAX, async {
        while let Some(frame) = socket.next().await {
            match frame {
                Ok(Message::Close(frame)) => return frame,
                Ok(_) => continue,
                Err(error) => panic!("the socket failed instead of closing: {error}"),
            }
        }
        None
    })
    .await
    .expect("the WebSocket was still open after SIGTERM")
    .expect("a close frame");
    assert_eq!(u16::from(close.code), 1001, "{close:?}");

    // The process exits after the drain, not never.
    let exit = tokio::time::timeout(common::WAIT_MAX, server.child.wait())
        .await
        .expect("the server did not exit after SIGTERM")
        .unwrap();
    assert!(exit.success(), "{exit:?}");
    assert!(
        signalled.elapsed() >= Duration::from_millis(DRAIN_MS),
        "the run got its drain before it was interrupted"
    );

    // The log, read directly (no restart, so no recovery): the run ended `interrupted`, and
    // every tool call has its result.
    let store =
        Arc::new(SqliteStore::open(&format!("sqlite://{}", database.display())).await.unwrap());
    let log = common::whole_log(store.as_ref(), agent_id).await;
    let end = log.last().expect("the log has the run");
    assert_eq!(end.run_id, Some(run_id));
    assert_eq!(end.kind, EventKind::RunFailed, "{:?}", end.content);
    assert_eq!(end.content["error"]["type"], "interrupted", "{}", end.content);
}

/// Events in the log the silent client is sent: far more than its socket buffers hold.
const SILENT_CLIENT_LOG_EVENTS_MIN: usize = 20_000;

/// A client that asks for a long log and reads nothing keeps its response unfinished forever;
/// SIGTERM must still end the process within the drain and the close grace
/// (`SHUTDOWN_CONNECTIONS_CLOSE_GRACE_MS`), whatever the client does.
#[tokio::test]
async fn sigterm_exits_when_a_client_never_reads() {
    use tokio::io::AsyncWriteExt;

    let directory = tempfile::tempdir().unwrap();
    let database = directory.path().join("log.db");
    let mut server = Process::start(
        free_port(),
        &[
            ("DATABASE_URL", format!("sqlite://{}", database.display())),
            ("AGENTSTREAM_SCRIPTED_TOKEN_DELAY_MS", "0".into()),
            ("AGENTSTREAM_SCRIPTED_REPLY_TOKENS", SILENT_CLIENT_LOG_EVENTS_MIN.to_string()),
            ("AGENTSTREAM_SHUTDOWN_DRAIN_MS", DRAIN_MS.to_string()),
        ],
    )
    .await;
    let http = agentstream_server::http_client::client();
    let agent_id = server.create_agent(json!({})).await;
    server.start_run(agent_id, "a long answer").await;
    let log = common::wait_until("the long run to end", || async {
        let log = common::processes::log_of(&http, &server.base, agent_id).await;
        log.last().is_some_and(|event| event.kind == EventKind::RunCompleted).then_some(log)
    })
    .await;
    assert!(log.len() >= SILENT_CLIENT_LOG_EVENTS_MIN, "{}", log.len());

    // Asks for the whole log as SSE and never reads a byte.
    let mut silent =
        tokio::net::TcpStream::connect(server.base.trim_start_matches("http://")).await.unwrap();
    let request = format!(
        "GET /v1/agents/{agent_id}/events/stream?since=0 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    );
    silent.write_all(request.as_bytes()).await.unwrap();
    // The server has filled what the sockets hold and waits on the client.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let signalled = Instant::now();
    server.sigterm();
    let exit = tokio::time::timeout(Duration::from_secs(20), server.child.wait())
        .await
        .expect("the server was still running 20 s after SIGTERM: a silent client held it")
        .unwrap();
    assert!(exit.success(), "{exit:?}");
    assert!(signalled.elapsed() < Duration::from_secs(10), "{:?}", signalled.elapsed());
    drop(silent);
}

/// The binary turns transparent huge pages off for itself before anything runs (mimalloc's fresh
/// heap was otherwise zeroed 2 MiB at a time: a first read after a restart took up to 42 ms).
#[cfg(target_os = "linux")]
#[tokio::test]
async fn the_binary_takes_no_transparent_huge_pages() {
    let server = Process::start(free_port(), &[]).await;
    let pid = server.child.id().expect("the server is running");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|line| line.starts_with("THP_enabled:"));
    // Kernels before 5.0 do not report it (nor honour the flag the same way).
    if let Some(line) = line {
        assert_eq!(line.split_whitespace().nth(1), Some("0"), "{line}");
    }
}
