//! Anthropic Messages API streaming (`POST /v1/messages`, `stream: true`).
//!
//! [`AnthropicParser`] is pure: SSE events in, provider events out; `message_start`, `ping`,
//! text/thinking block starts and unknown event types yield nothing (a `redacted_thinking`
//! block's start carries its data). Extended thinking is asked for with the agent's
//! `metadata.thinking_budget_tokens`; the signed thinking of each step goes back unchanged
//! before its text and calls. Tool input arrives as
//! `input_json_delta` pieces, passed on as they come; the block's stop ends the call.
//! Usage in `message_delta` is cumulative; input tokens come from `message_start`.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::http::{self, SseParser};
use super::{
    ConversationMessage, Events, Provider, ProviderError, ProviderEvent, ProviderRequest,
    ThinkingBlock, ToolSpec,
};

pub const ANTHROPIC_BASE_URL_DEFAULT: &str = "https://api.anthropic.com";
pub const ANTHROPIC_MODEL_DEFAULT: &str = "claude-sonnet-4-5";
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// Output tokens asked for per LLM call (beyond the thinking budget, when thinking is on).
pub const ANTHROPIC_MAX_TOKENS: u32 = 4096;
/// The metadata field that turns on extended thinking for an agent, with its budget in tokens.
pub const THINKING_BUDGET_FIELD: &str = "thinking_budget_tokens";
/// The budgets Anthropic takes (at least 1 024), and the most an agent may ask for.
pub const THINKING_BUDGET_TOKENS_MIN: u32 = 1_024;
pub const THINKING_BUDGET_TOKENS_MAX: u32 = 64_000;

/// An agent's thinking budget (`metadata.thinking_budget_tokens`), when it asks for one.
pub fn thinking_budget_of(metadata: &Value) -> Option<u32> {
    metadata
        .get(THINKING_BUDGET_FIELD)
        .and_then(Value::as_u64)
        .and_then(|budget| u32::try_from(budget).ok())
        .filter(|budget| (THINKING_BUDGET_TOKENS_MIN..=THINKING_BUDGET_TOKENS_MAX).contains(budget))
}

/// The thinking budget a Letta `llm_config` asks for: `enable_reasoner: true` with
/// `max_reasoning_tokens` (at least [`THINKING_BUDGET_TOKENS_MIN`]).
pub fn letta_thinking_budget(llm_config: &Value) -> Option<u64> {
    if llm_config.get("enable_reasoner").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let asked = llm_config.get("max_reasoning_tokens").and_then(Value::as_u64).unwrap_or(0);
    Some(asked.max(u64::from(THINKING_BUDGET_TOKENS_MIN)))
}

/// Why an agent's `metadata.thinking_budget_tokens` cannot be taken.
pub fn check_thinking_budget(metadata: &Value) -> Result<(), String> {
    match metadata.get(THINKING_BUDGET_FIELD) {
        None | Some(Value::Null) => Ok(()),
        Some(_) if thinking_budget_of(metadata).is_some() => Ok(()),
        Some(_) => Err(format!(
            "metadata.{THINKING_BUDGET_FIELD} must be a whole number of tokens from \
             {THINKING_BUDGET_TOKENS_MIN} to {THINKING_BUDGET_TOKENS_MAX}"
        )),
    }
}

#[derive(Clone, Debug)]
pub struct AnthropicConfig {
    pub api_key: String,
    pub base_url: String,
    pub model: String,
}

pub struct AnthropicProvider {
    config: AnthropicConfig,
    /// Or why there is none: each call fails saying so.
    client: Result<reqwest::Client, String>,
}

impl AnthropicProvider {
    pub fn new(config: AnthropicConfig) -> AnthropicProvider {
        AnthropicProvider { config, client: http::client() }
    }
}

/// The request body for a conversation: tool results go back as `tool_result` blocks of a user
/// message, consecutive ones in one message.
pub fn request_body(request: &ProviderRequest, default_model: &str) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    for message in &request.messages {
        match message {
            ConversationMessage::User { text } => {
                messages.push(json!({ "role": "user", "content": text }))
            }
            ConversationMessage::Assistant { text, tool_calls, thinking } => {
                // Signed thinking first, unchanged: with thinking on, Anthropic refuses a tool
                // loop's follow-up whose last assistant turn does not start with it. (Without
                // thinking on, none is sent back.)
                let thinking_on = request.thinking_budget_tokens.is_some();
                let mut content: Vec<Value> = thinking
                    .iter()
                    .filter(|_| thinking_on)
                    .map(|block| match block {
                        ThinkingBlock::Signed {
                            thinking,
                            signature,
                        } => json!({ "type": "thinking", "thinking": thinking, "signature": signature }),
                        ThinkingBlock::Redacted { data } => {
                            json!({ "type": "redacted_thinking", "data": data })
                        }
                    })
                    .collect();
                if !text.is_empty() {
                    content.push(json!({ "type": "text", "text": text }));
                }
                for call in tool_calls {
                    content.push(json!({
                        "type": "tool_use", "id": call.id, "name": call.name, "input": call.input,
                    }));
                }
                messages.push(json!({ "role": "assistant", "content": content }));
            }
            ConversationMessage::ToolResult { tool_call_id, content, is_error } => {
                let block = json!({
                    "type": "tool_result",
                    "tool_use_id": tool_call_id,
                    "content": content,
                    "is_error": is_error,
                });
                let appended = match messages.last_mut() {
                    Some(last)
                        if last["role"] == "user"
                            && last["content"].as_array().is_some_and(|blocks| {
                                blocks.iter().all(|block| block["type"] == "tool_result")
                            }) =>
                    {
                        last["content"].as_array_mut().expect("checked above").push(block.clone());
                        true
                    }
                    _ => false,
                };
                if !appended {
                    messages.push(json!({ "role": "user", "content": [block] }));
                }
            }
        }
    }
    let mut body = json!({
        "model": request.model.as_deref().unwrap_or(default_model),
        "max_tokens": ANTHROPIC_MAX_TOKENS,
        "stream": true,
        "messages": messages,
    });
    if let Some(budget) = request.thinking_budget_tokens {
        // The budget counts within max_tokens, which must exceed it.
        body["thinking"] = json!({ "type": "enabled", "budget_tokens": budget });
        body["max_tokens"] = json!(budget + ANTHROPIC_MAX_TOKENS);
    }
    if let Some(system) = &request.system {
        body["system"] = json!(system);
    }
    if !request.tools.is_empty() {
        body["tools"] = request.tools.iter().map(tool_json).collect();
    }
    body
}

/// A tool as Anthropic's Messages API declares it.
fn tool_json(tool: &ToolSpec) -> Value {
    json!({
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema,
    })
}

/// The streaming parser: one per response.
#[derive(Debug, Default)]
pub struct AnthropicParser {
    /// Tool-use blocks by content-block index: their call ids.
    tool_blocks: HashMap<u64, String>,
    input_tokens: u64,
    stop_reason: Option<String>,
    stopped: bool,
}

fn field<'a>(value: &'a Value, key: &str) -> Result<&'a Value, ProviderError> {
    value
        .get(key)
        .ok_or_else(|| ProviderError::invalid(format!("an Anthropic event without {key:?}")))
}

impl AnthropicParser {
    /// A piece of a content block: text, thinking, its signature, or a tool call's input.
    fn block_delta(&mut self, value: &Value) -> Result<Vec<ProviderEvent>, ProviderError> {
        let index = field(value, "index")?.as_u64().unwrap_or(0);
        let delta = field(value, "delta")?;
        let text = |key: &str| delta[key].as_str().unwrap_or_default().to_owned();
        Ok(match delta["type"].as_str().unwrap_or("") {
            "text_delta" => vec![ProviderEvent::TextDelta(text("text"))],
            "thinking_delta" => vec![ProviderEvent::ThinkingDelta(text("thinking"))],
            "signature_delta" => vec![ProviderEvent::ThinkingSignature(text("signature"))],
            "input_json_delta" => match self.tool_blocks.get(&index) {
                Some(id) => vec![ProviderEvent::ToolCallInputDelta {
                    id: id.clone(),
                    json: text("partial_json"),
                }],
                None => vec![],
            },
            _ => vec![],
        })
    }
}

/// Anthropic's `error` event (overloaded, rate-limited and its own errors may pass).
fn api_error(error: &Value) -> ProviderError {
    let kind = error["type"].as_str().unwrap_or("api_error").to_owned();
    ProviderError {
        retryable: matches!(kind.as_str(), "overloaded_error" | "rate_limit_error" | "api_error"),
        message: error["message"].as_str().unwrap_or("").to_owned(),
        kind,
        retry_after_ms: None,
    }
}

impl SseParser for AnthropicParser {
    fn parse(&mut self, _event: &str, data: &str) -> Result<Vec<ProviderEvent>, ProviderError> {
        let value: Value = serde_json::from_str(data)
            .map_err(|error| ProviderError::invalid(format!("unreadable event data: {error}")))?;
        let kind = value.get("type").and_then(Value::as_str).unwrap_or("");
        Ok(match kind {
            "message_start" => {
                self.input_tokens = value["message"]["usage"]["input_tokens"].as_u64().unwrap_or(0);
                vec![]
            }
            "content_block_start" => {
                let index = field(&value, "index")?.as_u64().unwrap_or(0);
                let block = field(&value, "content_block")?;
                match block["type"].as_str() {
                    Some("tool_use") => {
                        let id = block["id"].as_str().unwrap_or_default().to_owned();
                        let name = block["name"].as_str().unwrap_or_default().to_owned();
                        self.tool_blocks.insert(index, id.clone());
                        vec![ProviderEvent::ToolCallStart { id, name }]
                    }
                    // Encrypted thinking comes whole with its block's start.
                    Some("redacted_thinking") => match block["data"].as_str() {
                        Some(data) if !data.is_empty() => {
                            vec![ProviderEvent::RedactedThinking(data.to_owned())]
                        }
                        _ => vec![],
                    },
                    _ => vec![],
                }
            }
            "content_block_delta" => self.block_delta(&value)?,
            "content_block_stop" => {
                let index = field(&value, "index")?.as_u64().unwrap_or(0);
                match self.tool_blocks.remove(&index) {
                    Some(id) => vec![ProviderEvent::ToolCallEnd { id }],
                    None => vec![],
                }
            }
            "message_delta" => {
                if let Some(reason) = value["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_owned());
                }
                match value["usage"]["output_tokens"].as_u64() {
                    Some(output_tokens) => vec![ProviderEvent::Usage {
                        input_tokens: value["usage"]["input_tokens"]
                            .as_u64()
                            .unwrap_or(self.input_tokens),
                        output_tokens,
                    }],
                    None => vec![],
                }
            }
            "message_stop" => {
                self.stopped = true;
                vec![ProviderEvent::Stop {
                    reason: self.stop_reason.clone().unwrap_or_else(|| "end_turn".to_owned()),
                }]
            }
            "error" => return Err(api_error(&value["error"])),
            // ping, and event types this version does not know: nothing to do.
            _ => vec![],
        })
    }

    fn finish(&mut self) -> Result<Vec<ProviderEvent>, ProviderError> {
        if self.stopped {
            Ok(vec![])
        } else {
            Err(ProviderError::connection("the stream ended before message_stop"))
        }
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn stream(&self, request: ProviderRequest) -> Events {
        let body = request_body(&request, &self.config.model);
        let url = format!("{}/v1/messages", self.config.base_url.trim_end_matches('/'));
        let client = match &self.client {
            Ok(client) => client,
            Err(why) => return http::unsendable(why),
        };
        let http_request = client
            .post(url)
            .header("x-api-key", &self.config.api_key)
            .header("anthropic-version", ANTHROPIC_VERSION)
            .header("accept", "text/event-stream")
            .json(&body);
        http::sse_stream(http_request, AnthropicParser::default())
    }
}
