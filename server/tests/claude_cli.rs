//! The claude-cli provider against a stand-in executable that prints real stream-json lines.

use crate::common;

use std::path::PathBuf;
use std::time::Duration;

use agentstream_server::config::ProviderChoice;
use agentstream_server::provider::claude_cli::{ClaudeCliConfig, ClaudeCliProvider};
use agentstream_server::provider::{ConversationMessage, Provider, ProviderEvent, ProviderRequest};
use app::EventKind;
use futures::StreamExt;
use serde_json::json;

fn fake_claude() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fake-claude")
        .display()
        .to_string()
}

fn provider() -> ClaudeCliProvider {
    ClaudeCliProvider::new(ClaudeCliConfig {
        command: fake_claude(),
        model: None,
        pass_env: Vec::new(),
    })
}

fn request(text: &str) -> ProviderRequest {
    ProviderRequest {
        system: None,
        model: None,
        messages: vec![ConversationMessage::User { text: text.into() }],
        tools: Vec::new(),
        thinking_budget_tokens: None,
    }
}

#[tokio::test]
async fn the_cli_stream_maps_to_text_tool_calls_results_usage_and_stop() {
    let events: Vec<ProviderEvent> =
        provider().stream(request("what time is it?")).map(|event| event.unwrap()).collect().await;
    let texts: String = events
        .iter()
        .filter_map(|event| match event {
            ProviderEvent::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        texts, "I'll check the time.It is noon.",
        "streamed once, not again from `assistant`"
    );
    assert!(events
        .contains(&ProviderEvent::ToolCallStart { id: "toolu_9".into(), name: "Bash".into() }));
    let input: String = events
        .iter()
        .filter_map(|event| match event {
            ProviderEvent::ToolCallInputDelta { id, json } if id == "toolu_9" => {
                Some(json.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&input).unwrap(),
        json!({"command": "date"}),
        "the input's pieces, once"
    );
    assert!(events.contains(&ProviderEvent::ToolCallEnd { id: "toolu_9".into() }));
    assert!(events.contains(&ProviderEvent::ToolResult {
        id: "toolu_9".into(),
        content: json!("12:00"),
        is_error: false
    }));
    let stops: Vec<_> =
        events.iter().filter(|event| matches!(event, ProviderEvent::Stop { .. })).collect();
    assert_eq!(
        stops,
        vec![&ProviderEvent::Stop { reason: "end_turn".into() }],
        "only the result line stops"
    );
    let last_usage =
        events.iter().rev().find(|event| matches!(event, ProviderEvent::Usage { .. })).unwrap();
    assert_eq!(last_usage, &ProviderEvent::Usage { input_tokens: 52, output_tokens: 26 });
}

#[tokio::test]
async fn a_failing_cli_reports_its_exit_status_and_stderr() {
    let events: Vec<_> = provider().stream(request("please fail")).collect().await;
    let error = events.last().unwrap().as_ref().unwrap_err();
    assert_eq!(error.kind, "cli_error");
    assert!(error.message.contains("exit status: 3"), "{}", error.message);
    assert!(error.message.contains("Invalid API key"), "{}", error.message);

    let missing = ClaudeCliProvider::new(ClaudeCliConfig {
        command: "/nonexistent/claude".into(),
        model: None,
        pass_env: Vec::new(),
    });
    let events: Vec<_> = missing.stream(request("hi")).collect().await;
    assert_eq!(events[0].as_ref().unwrap_err().kind, "cli_not_started");
}

#[tokio::test]
async fn dropping_the_stream_kills_the_process() {
    let directory = tempfile::tempdir().unwrap();
    let pid_file = directory.path().join("claude.pid");
    let mut stream =
        provider().stream(request(&format!("please hang pidfile={}", pid_file.display())));
    // Drive the stream until the process has started and written its pid.
    let pid = loop {
        tokio::select! {
            _ = stream.next() => {}
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
        if let Ok(text) = std::fs::read_to_string(&pid_file) {
            if let Ok(pid) = text.trim().parse::<i32>() {
                break pid;
            }
        }
    };
    let alive = |pid: i32| {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z ")
    };
    assert!(alive(pid));
    drop(stream);
    common::wait_until("the CLI process to end with its run", || async {
        (!alive(pid)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_claude_cli_run_records_the_tools_the_cli_ran() {
    let server = common::TestServer::start_with(|config| {
        config.provider = ProviderChoice::ClaudeCli(ClaudeCliConfig {
            command: fake_claude(),
            model: None,
            pass_env: Vec::new(),
        });
    })
    .await;
    let (_, _, events) = server.finished_run("what time is it?").await;
    let end = events.last().unwrap();
    assert_eq!(end.kind, EventKind::RunCompleted);
    assert_eq!(end.content["stop_reason"], "end_turn");
    let timeline = common::fold(&events);
    let call = &common::messages_of(&events, EventKind::ToolCall)[0];
    assert_eq!(call.content["provider_call_id"], "toolu_9", "the CLI's id, kept");
    let result = timeline.tool_result(call.content["tool_call_id"].as_str().unwrap()).unwrap();
    assert_eq!(result.content["result"], "12:00");
    assert_eq!(result.content["is_error"], false);
    let results = events.iter().filter(|event| event.kind == EventKind::ToolResult).count();
    assert_eq!(results, 1, "the server must not run the CLI's tools again");
}

#[test]
fn a_whole_message_tool_call_passes_its_input_as_one_piece() {
    use agentstream_server::provider::claude_cli::ClaudeCliParser;
    let mut parser = ClaudeCliParser::default();
    let line = r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"date"}}]}}"#;
    assert_eq!(
        parser.parse_line(line).unwrap(),
        vec![
            ProviderEvent::ToolCallStart { id: "t1".into(), name: "Bash".into() },
            ProviderEvent::ToolCallInputDelta {
                id: "t1".into(),
                json: r#"{"command":"date"}"#.into()
            },
            ProviderEvent::ToolCallEnd { id: "t1".into() },
        ]
    );
}

/// The text deltas of a stream, joined; panics on an error.
async fn reply_of(request: ProviderRequest) -> String {
    reply_from(&provider(), request).await
}

/// The same from `provider`.
async fn reply_from(provider: &ClaudeCliProvider, request: ProviderRequest) -> String {
    let events: Vec<ProviderEvent> =
        provider.stream(request).map(|event| event.expect("the CLI answered")).collect().await;
    events
        .iter()
        .filter_map(|event| match event {
            ProviderEvent::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// A conversation past the 128 KiB a single command-line argument may hold reaches the CLI
/// whole (it went as an argument, and the CLI could not even be started: E2BIG).
#[tokio::test]
async fn a_long_conversation_reaches_the_cli_whole() {
    let earlier = "word ".repeat(50_000);
    let mut request = request("please count");
    request.messages.insert(0, ConversationMessage::User { text: earlier.clone() });
    let reply = reply_of(request).await;
    let bytes: usize = reply
        .strip_prefix("prompt bytes: ")
        .and_then(|rest| rest.split(';').next())
        .and_then(|number| number.trim().parse().ok())
        .unwrap_or_else(|| panic!("no byte count in {reply:?}"));
    assert!(bytes > earlier.len(), "{bytes} bytes arrived of more than {}", earlier.len());
}

/// A message that looks like an option is the prompt's text, not an option of the CLI.
#[tokio::test]
async fn a_message_starting_with_dashes_is_text_not_an_option() {
    let reply = reply_of(request("--help please count")).await;
    assert!(reply.ends_with("first word: --help"), "{reply}");
}

/// The CLI starts with `PATH`, `HOME` and what the operator named, none of the server's other
/// variables (its secrets among them); the system prompt reaches it on stdin, not argv.
#[tokio::test]
async fn the_cli_gets_no_secret_and_its_system_prompt_on_stdin() {
    let variables = |reply: &str| -> Vec<String> {
        reply
            .strip_prefix("env: ")
            .and_then(|rest| rest.split(';').next())
            .unwrap_or_else(|| panic!("no env in {reply:?}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    let mut asked = request("please env");
    asked.system = Some("Be terse.".into());
    let reply = reply_of(asked).await;
    let names = variables(&reply);
    // Cargo gives this test process CARGO_* variables: a child that inherited the server's
    // environment would list them.
    assert!(std::env::var("CARGO_PKG_NAME").is_ok());
    for name in &names {
        assert!(
            ["PATH", "HOME", "PWD", "SHLVL", "_", "OLDPWD"].contains(&name.as_str()),
            "the CLI got {name}: {names:?}"
        );
    }
    assert!(names.contains(&"PATH".to_owned()), "{names:?}");
    assert!(reply.ends_with("first line: Your instructions (follow them throughout):"), "{reply}");

    let named = ClaudeCliProvider::new(ClaudeCliConfig {
        command: fake_claude(),
        model: None,
        pass_env: vec!["CARGO_PKG_NAME".into()],
    });
    let reply = reply_from(&named, request("please env")).await;
    assert!(variables(&reply).contains(&"CARGO_PKG_NAME".to_owned()), "{reply}");
}
