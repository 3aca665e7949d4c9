//! The scripted provider: deterministic, offline, and realistic enough to demo and test with.
//!
//! For a given seed and user message it always produces the same thinking, the same words and
//! the same usage. `token_delay_ms` paces tokens like a real model (0 = as fast as it can go,
//! for tests and benchmarks); `reply_tokens` sets the reply length.

use std::time::Duration;

use futures::stream::{self, StreamExt};

use serde_json::{json, Value};

use super::{ConversationMessage, Events, Provider, ProviderError, ProviderEvent, ProviderRequest};
use words::{echo_tokens, sentence_tokens, Random};

#[derive(Clone, Debug)]
pub struct ScriptedConfig {
    pub seed: u64,
    pub token_delay_ms: u64,
    pub reply_tokens: u32,
}

impl Default for ScriptedConfig {
    fn default() -> ScriptedConfig {
        ScriptedConfig { seed: 7, token_delay_ms: 30, reply_tokens: 60 }
    }
}

/// Reply lengths above this are clamped: a typo in an environment variable must not make one run
/// write millions of rows.
pub const SCRIPTED_REPLY_TOKENS_MAX: u32 = 100_000;
/// Thinking is a short preamble, this many words.
const SCRIPTED_THINKING_TOKENS: u32 = 12;

pub struct ScriptedProvider {
    config: ScriptedConfig,
}

impl ScriptedProvider {
    pub fn new(config: ScriptedConfig) -> ScriptedProvider {
        ScriptedProvider { config }
    }
}

/// FNV-1a, to fold the user's message into the seed.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ byte as u64).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

/// A user message starting with this makes the reply exactly the rest of the message, streamed
/// word by word: a deterministic way to put any text (markup included) into a reply.
pub const ECHO_COMMAND: &str = "/echo ";
/// `/recall` answers with what the user said in the conversation it was given, oldest first,
/// one message a line (`You said:` then `- text` lines): what a model on this branch of the
/// conversation sees.
pub const RECALL_COMMAND: &str = "/recall";
/// `/markdown` answers in Markdown (headings, lists, tables, fenced code…), about as long as a
/// plain reply (`reply_tokens`).
pub const MARKDOWN_COMMAND: &str = "/markdown";
/// `/tools clock; calculator 2*(3+4); slow 3` asks for those tool calls, concurrently, in one
/// step; once their results are in, the reply reports them. Any tool may be named; an argument
/// that is a JSON object is its input (`/tools get-sum {"a": 2, "b": 3}`).
pub const TOOLS_COMMAND: &str = "/tools ";
/// `/loop` asks for the clock tool at every step, so the run reaches its iteration limit.
pub const LOOP_COMMAND: &str = "/loop";
/// `/fail overloaded_error` streams a few words and then fails with that error type.
pub const FAIL_COMMAND: &str = "/fail ";
/// `/stall 5` streams a few words, goes silent for 5 seconds (a stalled provider), then
/// finishes its reply.
pub const STALL_COMMAND: &str = "/stall ";
/// A stall lasts at most this long.
pub const SCRIPTED_STALL_SECONDS_MAX: f64 = 60.0;
/// Tokens streamed before a stall begins.
const STALL_AFTER_TOKENS: usize = 3;

/// Parses one tool invocation of a `/tools` command into a call's name and input.
fn scripted_tool_call(invocation: &str) -> (String, Value) {
    let invocation = invocation.trim();
    let (name, argument) = invocation
        .split_once(char::is_whitespace)
        .map(|(name, argument)| (name, argument.trim()))
        .unwrap_or((invocation, ""));
    // An argument that is a JSON object is the tool's input, whatever the tool (MCP tools too).
    let object = argument
        .starts_with('{')
        .then(|| serde_json::from_str::<Value>(argument).ok())
        .flatten()
        .filter(Value::is_object);
    if let Some(input) = object {
        return (name.to_owned(), input);
    }
    let input = match name {
        "calculator" => json!({ "expression": argument }),
        "slow" => json!({ "seconds": argument.parse::<f64>().unwrap_or(2.0) }),
        "clock" => json!({}),
        _ => serde_json::from_str(argument).unwrap_or_else(|_| json!({ "argument": argument })),
    };
    (name.to_owned(), input)
}

/// Streams a tool call the way providers do: start, the input's JSON in pieces, end.
fn tool_call_events(events: &mut Vec<Step>, id: String, name: String, input: Value) {
    events.push(Ok(ProviderEvent::ToolCallStart { id: id.clone(), name }));
    let json_text = input.to_string();
    let characters: Vec<char> = json_text.chars().collect();
    for piece in characters.chunks(8) {
        events.push(Ok(ProviderEvent::ToolCallInputDelta {
            id: id.clone(),
            json: piece.iter().collect(),
        }));
    }
    events.push(Ok(ProviderEvent::ToolCallEnd { id }));
}

type Step = Result<ProviderEvent, ProviderError>;

/// The whole script for one request, before pacing.
pub fn script(config: &ScriptedConfig, request: &ProviderRequest) -> Vec<Step> {
    let user_text = request.last_user_text().unwrap_or("");
    let step = request
        .messages
        .iter()
        .filter(|message| matches!(message, ConversationMessage::Assistant { .. }))
        .count();
    // The conversation's length makes each turn's tool-call ids its own, even when a user sends
    // the same command again (ids must not repeat within a conversation).
    let mut random = Random(
        config.seed ^ fnv1a(user_text) ^ step as u64 ^ (request.messages.len() as u64) << 32,
    );
    let reply_tokens = config.reply_tokens.min(SCRIPTED_REPLY_TOKENS_MAX);
    let mut events: Vec<Step> = Vec::with_capacity(reply_tokens as usize + 16);
    events.extend(
        sentence_tokens(&mut random, SCRIPTED_THINKING_TOKENS)
            .into_iter()
            .map(|token| Ok(ProviderEvent::ThinkingDelta(token))),
    );
    let after_tools =
        matches!(request.messages.last(), Some(ConversationMessage::ToolResult { .. }));
    let wants_tools = |text: &str| text.starts_with(TOOLS_COMMAND) || text == LOOP_COMMAND;
    let mut output_tokens = SCRIPTED_THINKING_TOKENS as u64;
    let stop_reason;
    if user_text == LOOP_COMMAND || (wants_tools(user_text) && !after_tools) {
        output_tokens += tool_calls(&mut events, &mut random, user_text, step);
        stop_reason = "tool_use";
    } else if after_tools {
        output_tokens += texts(&mut events, echo_tokens(&tools_summary(request)));
        stop_reason = "end_turn";
    } else if let Some(kind) = user_text.strip_prefix(FAIL_COMMAND) {
        texts(&mut events, sentence_tokens(&mut random, 5));
        let kind = kind.trim().to_owned();
        let retryable = matches!(kind.as_str(), "overloaded_error" | "rate_limit_error");
        events.push(Err(ProviderError {
            message: format!("the scripted provider failed with {kind} as asked"),
            kind,
            retryable,
            retry_after_ms: None,
        }));
        return events;
    } else {
        let reply = match user_text.strip_prefix(ECHO_COMMAND) {
            Some(echoed) => echo_tokens(echoed),
            None if user_text == RECALL_COMMAND => echo_tokens(&recall(request)),
            None if user_text == MARKDOWN_COMMAND => {
                markdown::markdown_tokens(&mut random, reply_tokens)
            }
            None => sentence_tokens(&mut random, reply_tokens),
        };
        output_tokens += texts(&mut events, reply);
        stop_reason = "end_turn";
    }
    events.push(Ok(ProviderEvent::Usage { input_tokens: input_words(request), output_tokens }));
    events.push(Ok(ProviderEvent::Stop { reason: stop_reason.to_owned() }));
    events
}

/// `/recall`'s answer: the user's messages of the conversation, the command itself left out.
fn recall(request: &ProviderRequest) -> String {
    let mut said = String::from("You said:");
    for message in &request.messages {
        if let ConversationMessage::User { text } = message {
            if text != RECALL_COMMAND {
                said.push_str("\n- ");
                said.push_str(text);
            }
        }
    }
    said
}

/// Text deltas, one per token; returns how many.
fn texts(events: &mut Vec<Step>, tokens: Vec<String>) -> u64 {
    let count = tokens.len() as u64;
    events.extend(tokens.into_iter().map(|token| Ok(ProviderEvent::TextDelta(token))));
    count
}

/// `/tools a; b …` (or `/loop`'s clock): a line of text, then the calls. Returns the tokens.
fn tool_calls(events: &mut Vec<Step>, random: &mut Random, user_text: &str, step: usize) -> u64 {
    let invocations: Vec<&str> = match user_text.strip_prefix(TOOLS_COMMAND) {
        Some(spec) => spec.split(';').filter(|part| !part.trim().is_empty()).collect(),
        None => vec!["clock"],
    };
    events.push(Ok(ProviderEvent::TextDelta("Let me use my tools.".to_owned())));
    let mut output_tokens = 0;
    for (index, invocation) in invocations.into_iter().enumerate() {
        let (name, input) = scripted_tool_call(invocation);
        let id = format!("call_{step}_{index}_{:08x}", random.next() as u32);
        tool_call_events(events, id, name, input);
        output_tokens += 8;
    }
    output_tokens
}

/// After tools: what every tool result in the conversation said.
fn tools_summary(request: &ProviderRequest) -> String {
    let mut summary = String::from("The tools answered:");
    for message in &request.messages {
        if let ConversationMessage::ToolResult { content, is_error, .. } = message {
            let marker = if *is_error { " (error)" } else { "" };
            summary.push_str(&format!(" {content}{marker};"));
        }
    }
    summary.push_str(" that is all.");
    summary
}

/// The prompt's size in words, as the scripted provider's input tokens.
fn input_words(request: &ProviderRequest) -> u64 {
    let words: usize = request
        .messages
        .iter()
        .map(|message| match message {
            ConversationMessage::User { text } => text.split_whitespace().count(),
            ConversationMessage::Assistant { text, .. } => text.split_whitespace().count(),
            ConversationMessage::ToolResult { content, .. } => content.split_whitespace().count(),
        })
        .sum();
    let system = request.system.as_deref().map_or(0, |system| system.split_whitespace().count());
    (words + system) as u64
}

impl Provider for ScriptedProvider {
    fn name(&self) -> &'static str {
        "scripted"
    }

    fn stream(&self, request: ProviderRequest) -> Events {
        let delay = Duration::from_millis(self.config.token_delay_ms);
        let stall = request
            .last_user_text()
            .and_then(|text| text.strip_prefix(STALL_COMMAND))
            .and_then(|seconds| seconds.trim().parse::<f64>().ok())
            .map(|seconds| Duration::from_secs_f64(seconds.clamp(0.0, SCRIPTED_STALL_SECONDS_MAX)));
        let events = script(&self.config, &request);
        let mut tokens_seen = 0usize;
        stream::iter(events)
            .map(move |step| {
                let is_text = matches!(step, Ok(ProviderEvent::TextDelta(_)));
                tokens_seen += usize::from(is_text);
                let pause = stall.filter(|_| is_text && tokens_seen == STALL_AFTER_TOKENS + 1);
                (step, pause)
            })
            .then(move |(step, pause)| async move {
                if let Some(pause) = pause {
                    tokio::time::sleep(pause).await;
                }
                let is_token = matches!(
                    step,
                    Ok(ProviderEvent::TextDelta(_)
                        | ProviderEvent::ThinkingDelta(_)
                        | ProviderEvent::ToolCallInputDelta { .. })
                );
                if is_token && !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                step
            })
            .boxed()
    }
}

#[cfg(test)]
mod tests;

mod markdown;
mod words;
