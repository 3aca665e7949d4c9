//! The Claude Code CLI as a provider: spawns
//! `claude -p --output-format stream-json --verbose --include-partial-messages` and maps its
//! JSON lines. The CLI runs its own agent loop and tools; their calls and results arrive as
//! events of one step. Dropping the stream (a cancelled run) kills the process.
//!
//! [`ClaudeCliParser`] is pure: a line in, provider events out. `stream_event` lines carry raw
//! Anthropic streaming events and go through the Anthropic parser; `system` lines, and
//! `assistant` lines whose content already streamed, yield nothing.

use std::process::Stdio;

use futures::stream::{self, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::anthropic::AnthropicParser;
use super::http::SseParser;
use super::{ConversationMessage, Events, Provider, ProviderError, ProviderEvent, ProviderRequest};

pub const CLAUDE_CLI_COMMAND_DEFAULT: &str = "claude";
/// A line longer than this is refused as corrupt rather than read without bound.
pub const CLAUDE_CLI_LINE_BYTES_MAX: usize = 4 * 1024 * 1024;
/// The end of stderr kept for the error report of a failed process.
const STDERR_TAIL_BYTES_MAX: usize = 4 * 1024;
/// Parsed events waiting for the run.
const CLI_EVENTS_QUEUE_MAX: usize = 256;

#[derive(Clone, Debug)]
pub struct ClaudeCliConfig {
    /// The executable (a name on PATH or a path).
    pub command: String,
    pub model: Option<String>,
    /// Variables of the server's environment the CLI gets besides `PATH` and `HOME`
    /// (`AGENTSTREAM_CLAUDE_CLI_ENV`, e.g. `ANTHROPIC_API_KEY`): nothing else of it.
    pub pass_env: Vec<String>,
}

pub struct ClaudeCliProvider {
    config: ClaudeCliConfig,
}

impl ClaudeCliProvider {
    /// The CLI's command line for `request`: print mode, streamed JSON with partial messages.
    fn command(&self, request: &ProviderRequest) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.config.command);
        // The prompt goes on stdin, not on the command line: an argument is limited to 128 KiB
        // (a long conversation failed with E2BIG), and a message starting with `--` would be
        // read as an option. Values travel as `--flag=value` for the same reason.
        // Its tools run under the CLI's own permission checks, never bypassed (a user's
        // settings may say `bypassPermissions`): in print mode nobody can grant a permission,
        // so a tool that needs one (Bash, edits, fetches) is refused rather than run without
        // the agent's approvals.
        crate::child_env::clean(&mut command, &self.config.pass_env);
        command
            .args([
                "-p",
                "--input-format",
                "text",
                "--output-format",
                "stream-json",
                "--verbose",
                "--include-partial-messages",
                "--permission-mode=default",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A cancelled run drops the stream, the task, the child: the process dies with it.
            .kill_on_drop(true);
        if let Some(model) = request.model.as_ref().or(self.config.model.as_ref()) {
            command.arg(format!("--model={model}"));
        }
        command
    }

    pub fn new(config: ClaudeCliConfig) -> ClaudeCliProvider {
        ClaudeCliProvider { config }
    }
}

#[derive(Debug, Default)]
pub struct ClaudeCliParser {
    anthropic: AnthropicParser,
    saw_stream_events: bool,
    pub saw_result: bool,
}

impl ClaudeCliParser {
    pub fn parse_line(&mut self, line: &str) -> Result<Vec<ProviderEvent>, ProviderError> {
        if line.trim().is_empty() {
            return Ok(vec![]);
        }
        let value: Value = serde_json::from_str(line)
            .map_err(|error| ProviderError::invalid(format!("an unreadable CLI line: {error}")))?;
        match value["type"].as_str().unwrap_or("") {
            "stream_event" => {
                self.saw_stream_events = true;
                let event = &value["event"];
                let mut events = self.anthropic.parse("", &event.to_string())?;
                // One CLI run spans several model messages; only the `result` line ends it.
                events.retain(|event| !matches!(event, ProviderEvent::Stop { .. }));
                Ok(events)
            }
            // Without partial messages, whole messages are all there is.
            "assistant" if !self.saw_stream_events => Ok(whole_message(&value["message"])),
            "user" => Ok(value["message"]["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|block| block["type"] == "tool_result")
                .map(|block| ProviderEvent::ToolResult {
                    id: block["tool_use_id"].as_str().unwrap_or_default().to_owned(),
                    content: block["content"].clone(),
                    is_error: block["is_error"].as_bool().unwrap_or(false),
                })
                .collect()),
            "result" => {
                self.saw_result = true;
                result(&value)
            }
            // system init, api_retry and whatever a newer CLI adds.
            _ => Ok(vec![]),
        }
    }
}

/// A whole `assistant` message as events: text, thinking, and tool calls whose input comes
/// whole (one piece).
fn whole_message(message: &Value) -> Vec<ProviderEvent> {
    let mut events = Vec::new();
    for block in message["content"].as_array().into_iter().flatten() {
        let text = |key: &str| block[key].as_str().unwrap_or_default().to_owned();
        match block["type"].as_str() {
            Some("text") => events.push(ProviderEvent::TextDelta(text("text"))),
            Some("thinking") => events.push(ProviderEvent::ThinkingDelta(text("thinking"))),
            Some("tool_use") => {
                let id = text("id");
                events.push(ProviderEvent::ToolCallStart { id: id.clone(), name: text("name") });
                events.push(ProviderEvent::ToolCallInputDelta {
                    id: id.clone(),
                    json: block["input"].to_string(),
                });
                events.push(ProviderEvent::ToolCallEnd { id });
            }
            _ => {}
        }
    }
    events
}

/// The `result` line that ends a CLI run: its usage and stop, or its error.
fn result(value: &Value) -> Result<Vec<ProviderEvent>, ProviderError> {
    let subtype = value["subtype"].as_str().unwrap_or("success");
    if value["is_error"].as_bool() == Some(true) && subtype != "error_max_turns" {
        return Err(ProviderError {
            kind: subtype.to_owned(),
            message: value["result"].as_str().unwrap_or("the CLI reported an error").to_owned(),
            retryable: false,
            retry_after_ms: None,
        });
    }
    let usage = &value["usage"];
    let input_tokens = usage["input_tokens"].as_u64().unwrap_or(0)
        + usage["cache_read_input_tokens"].as_u64().unwrap_or(0)
        + usage["cache_creation_input_tokens"].as_u64().unwrap_or(0);
    let reason = if subtype == "error_max_turns" { "max_iterations" } else { "end_turn" };
    Ok(vec![
        ProviderEvent::Usage {
            input_tokens,
            output_tokens: usage["output_tokens"].as_u64().unwrap_or(0),
        },
        ProviderEvent::Stop { reason: reason.to_owned() },
    ])
}

/// The prompt handed to the CLI: the new message, preceded by the conversation so far.
fn prompt(request: &ProviderRequest) -> String {
    let mut transcript = String::new();
    let last_user = request
        .messages
        .iter()
        .rposition(|message| matches!(message, ConversationMessage::User { .. }));
    for (index, message) in request.messages.iter().enumerate() {
        if Some(index) == last_user {
            continue;
        }
        match message {
            ConversationMessage::User { text } => transcript.push_str(&format!("User: {text}\n\n")),
            ConversationMessage::Assistant { text, .. } if !text.is_empty() => {
                transcript.push_str(&format!("Assistant: {text}\n\n"))
            }
            _ => {}
        }
    }
    let question = request.last_user_text().unwrap_or_default();
    let asked = if transcript.is_empty() {
        question.to_owned()
    } else {
        format!("The conversation so far:\n\n{transcript}Now answer this:\n\n{question}")
    };
    // The agent's system prompt travels on stdin too: on the command line every process of
    // the machine could read it.
    match request.system.as_deref().map(str::trim) {
        Some(system) if !system.is_empty() => {
            format!("Your instructions (follow them throughout):\n\n{system}\n\n---\n\n{asked}")
        }
        _ => asked,
    }
}

fn failure(kind: &str, message: String) -> ProviderError {
    ProviderError { kind: kind.to_owned(), message, retryable: false, retry_after_ms: None }
}

impl Provider for ClaudeCliProvider {
    fn name(&self) -> &'static str {
        "claude-cli"
    }

    fn stream(&self, request: ProviderRequest) -> Events {
        let command = self.command(&request);
        let program = self.config.command.clone();
        let (sender, receiver) = mpsc::channel(CLI_EVENTS_QUEUE_MAX);
        tokio::spawn(drive(command, program, prompt(&request), sender));
        stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|item| (item, receiver))
        })
        .boxed()
    }
}

type EventSender = mpsc::Sender<Result<ProviderEvent, ProviderError>>;

/// Runs the CLI and sends what it prints, parsed, then a failure if it ended without a result.
/// Returns early when the run went away (the receiver closed): dropping the child kills it.
async fn drive(
    mut command: tokio::process::Command,
    program: String,
    prompt: String,
    sender: EventSender,
) {
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            let _ = sender
                .send(Err(failure("cli_not_started", format!("cannot start {program:?}: {error}"))))
                .await;
            return;
        }
    };
    // Written beside the reading: a prompt larger than the pipe must not wait on our reader.
    // A CLI that exits without reading it all breaks the pipe; its exit status says why.
    let mut stdin = child.stdin.take().expect("stdin is piped");
    tokio::spawn(async move {
        let _ = stdin.write_all(prompt.as_bytes()).await;
        let _ = stdin.shutdown().await;
    });
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr_tail = tokio::spawn(stderr_tail(child.stderr.take().expect("stderr is piped")));
    let mut parser = ClaudeCliParser::default();
    if !forward_lines(stdout, &mut parser, &sender).await {
        return;
    }
    let status = child.wait().await;
    let stderr = stderr_tail.await.unwrap_or_default();
    let succeeded = status.as_ref().is_ok_and(|status| status.success());
    if !succeeded || !parser.saw_result {
        let status =
            status.map(|status| status.to_string()).unwrap_or_else(|error| error.to_string());
        let _ = sender
            .send(Err(failure(
                "cli_error",
                format!("{program} ended ({status}) without a result: {}", stderr.trim()),
            )))
            .await;
    }
}

/// The last [`STDERR_TAIL_BYTES_MAX`] bytes the CLI wrote to stderr, for the error message.
async fn stderr_tail(mut stderr: tokio::process::ChildStderr) -> String {
    let mut tail = Vec::new();
    let mut buffer = [0u8; 4096];
    while let Ok(read) = stderr.read(&mut buffer).await {
        if read == 0 {
            break;
        }
        tail.extend_from_slice(&buffer[..read]);
        if tail.len() > STDERR_TAIL_BYTES_MAX {
            tail.drain(..tail.len() - STDERR_TAIL_BYTES_MAX);
        }
    }
    String::from_utf8_lossy(&tail).into_owned()
}

/// Parses stdout line by line (each at most [`CLAUDE_CLI_LINE_BYTES_MAX`]) and sends the events.
/// True when stdout ended; false when the stream is over for another reason (an error was sent,
/// or nobody listens any more).
async fn forward_lines(
    stdout: tokio::process::ChildStdout,
    parser: &mut ClaudeCliParser,
    sender: &EventSender,
) -> bool {
    let mut lines = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut limited = (&mut lines).take(CLAUDE_CLI_LINE_BYTES_MAX as u64 + 1);
        let read = tokio::select! {
            _ = sender.closed() => return false,
            read = limited.read_until(b'\n', &mut line) => read,
        };
        let problem = match read {
            Ok(0) => return true,
            Ok(_) if line.len() > CLAUDE_CLI_LINE_BYTES_MAX => ProviderError::invalid(format!(
                "a CLI line longer than {CLAUDE_CLI_LINE_BYTES_MAX} bytes"
            )),
            Ok(_) => match parser.parse_line(&String::from_utf8_lossy(&line)) {
                Ok(events) => {
                    for event in events {
                        if sender.send(Ok(event)).await.is_err() {
                            return false;
                        }
                    }
                    continue;
                }
                Err(error) => error,
            },
            Err(error) => failure("cli_error", error.to_string()),
        };
        let _ = sender.send(Err(problem)).await;
        return false;
    }
}
