//! The Python producer example (`examples/producer-python/`) against a real server: it streams a
//! model's reply into an agent, is killed twice mid-stream, restarts each time with a new epoch
//! from where the log stands — and the log holds the reply exactly once, in one run.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use app::EventKind;
use common::TestServer;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/producer-python");
/// What the example's mock model answers (`mock_model.py`: `REPLY_WORDS` numbered words).
const REPLY_WORDS: usize = 400;
const PATIENCE: Duration = Duration::from_secs(60);

fn python(script: &str) -> Command {
    let mut command = Command::new("python3");
    command.arg(format!("{EXAMPLE}/{script}")).stdout(Stdio::piped()).kill_on_drop(true);
    command
}

async fn next_line(lines: &mut Lines<BufReader<ChildStdout>>) -> String {
    // The model's first line: its port.
    tokio::time::timeout(PATIENCE, lines.next_line())
        .await
        .expect("the process said nothing for a minute")
        .expect("its output can be read")
        .expect("the process ended before saying it")
}

/// Starts the producer and reads its output until a line starts with `until`.
async fn producer_until(
    server: &TestServer,
    agent_id: uuid::Uuid,
    model_url: &str,
    state: &std::path::Path,
    extra: &[&str],
    until: Option<&str>,
) -> (Child, Vec<String>) {
    let mut child = python("producer.py")
        .args(["--server", &server.base, "--agent", &agent_id.to_string()])
        .args(["--producer", "py-worker", "--model-url", model_url])
        .args(["--prompt", "count for me", "--state-dir"])
        .arg(state)
        .args(extra)
        .spawn()
        .expect("python3 runs");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut said = Vec::new();
    loop {
        let line = tokio::time::timeout(PATIENCE, lines.next_line())
            .await
            .expect("the producer said nothing for a minute")
            .expect("its output can be read");
        let Some(line) = line else {
            return (child, said);
        };
        said.push(line.clone());
        if until.is_some_and(|until| line.starts_with(until)) {
            return (child, said);
        }
    }
}

#[tokio::test]
async fn the_python_producer_killed_mid_stream_resumes_with_nothing_lost_or_doubled() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let mut model =
        python("mock_model.py").args(["--delay-ms", "5"]).spawn().expect("python3 runs");
    let mut model_lines = BufReader::new(model.stdout.take().unwrap()).lines();
    let port = next_line(&mut model_lines).await;
    let port = port.strip_prefix("listening on ").expect("the model says its port");
    let model_url = format!("http://127.0.0.1:{port}/v1");
    let state = tempfile::tempdir().unwrap();
    // One life of the producer (its state file kept between lives), until it says `until`.
    let life = |extra: &'static [&'static str], until: Option<&'static str>| {
        producer_until(&server, agent_id, &model_url, state.path(), extra, until)
    };

    // First life: dies right after the server committed its fourth batch, before it wrote the
    // answer down (the lost acknowledgement).
    let (mut child, said) = life(&["--crash-after-send", "3"], None).await;
    let status = child.wait().await.unwrap();
    assert_eq!(status.code(), Some(9), "{said:?}");
    assert_eq!(
        said.last().map(String::as_str).unwrap_or("").split(' ').take(3).collect::<Vec<_>>(),
        ["acked", "seq", "2"]
    );
    // Second life: killed (SIGKILL) right after its third acknowledged batch.
    let (mut child, said) = life(&[], Some("acked seq 2")).await;
    child.kill().await.unwrap();
    assert!(said.first().is_some_and(|line| line.starts_with("recovered: epoch 1")), "{said:?}");
    assert!(said.iter().all(|line| !line.starts_with("done")), "{said:?}");
    let (mut child, said) = life(&[], Some("done")).await;
    assert!(said.first().is_some_and(|line| line.starts_with("recovered: epoch 2")), "{said:?}");
    let status = tokio::time::timeout(PATIENCE, child.wait()).await.unwrap().unwrap();
    assert!(status.success());

    let events = server.all_events(agent_id).await;
    common::assert_contiguous(&events, 1);
    let count = |kind: EventKind| events.iter().filter(|event| event.kind == kind).count();
    assert_eq!(count(EventKind::RunStarted), 1, "one run across three processes");
    assert_eq!(count(EventKind::RunCompleted), 1);
    assert_eq!(count(EventKind::User), 1);
    let run_id = events[0].run_id.unwrap();
    let expected: String = (0..REPLY_WORDS).map(|index| format!("w{index} ")).collect();
    assert_eq!(common::reply_text(&events, run_id), expected, "every word once, in order");
    let position = server.get_json(&format!("/v1/agents/{agent_id}/producers/py-worker")).await;
    assert_eq!(position["epoch"], 2, "{position}");
    assert_eq!(position["run_open"], false);
}
