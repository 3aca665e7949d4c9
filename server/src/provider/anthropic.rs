//! Anthropic Messages API streaming (`POST /v1/messages`, `stream: true`).
//!
//! [`AnthropicParser`] is pure: SSE events in, provider events out; `message_start`, `ping`,
//! text/thinking block starts and unknown event types yield nothing. Tool input arrives as
//! `input_json_delta` pieces, passed on as they come; the block's stop ends the call.
//! Usage in `message_delta` is cumulative; input tokens come from `message_start`.

use std::collections::HashMap;

use futures::stream::BoxStream;
use serde_json::{json, Value};

use super::http::{self, SseParser};
use super::{ConversationMessage, Provider, ProviderError, ProviderEvent, ProviderRequest};

pub const ANTHROPIC_BASE_URL_DEFAULT: &str = "https://api.anthropic.com";
pub const ANTHROPIC_MODEL_DEFAULT: &str = "claude-sonnet-4-5";
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// Output tokens asked for per LLM call.
pub const ANTHROPIC_MAX_TOKENS: u32 = 4096;

#[derive(Clone, Debug)]
pub struct AnthropicConfig {
    pub api_key: String,
    pub base_url: String,
    pub model: String,
}

pub struct AnthropicProvider {
    config: AnthropicConfig,
    client: reqwest::Client,
}

impl AnthropicProvider {
    pub fn new(config: AnthropicConfig) -> AnthropicProvider {
        AnthropicProvider {
            config,
            client: http::client(),
        }
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
            ConversationMessage::Assistant { text, tool_calls } => {
                let mut content = Vec::new();
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
            ConversationMessage::ToolResult {
                tool_call_id,
                content,
                is_error,
            } => {
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
                        last["content"]
                            .as_array_mut()
                            .expect("checked above")
                            .push(block.clone());
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
    if let Some(system) = &request.system {
        body["system"] = json!(system);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.input_schema,
                })
            })
            .collect();
    }
    body
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
        retryable: matches!(
            kind.as_str(),
            "overloaded_error" | "rate_limit_error" | "api_error"
        ),
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
                self.input_tokens = value["message"]["usage"]["input_tokens"]
                    .as_u64()
                    .unwrap_or(0);
                vec![]
            }
            "content_block_start" => {
                let index = field(&value, "index")?.as_u64().unwrap_or(0);
                let block = field(&value, "content_block")?;
                if block["type"] == "tool_use" {
                    let id = block["id"].as_str().unwrap_or_default().to_owned();
                    let name = block["name"].as_str().unwrap_or_default().to_owned();
                    self.tool_blocks.insert(index, id.clone());
                    vec![ProviderEvent::ToolCallStart { id, name }]
                } else {
                    vec![]
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
                    reason: self
                        .stop_reason
                        .clone()
                        .unwrap_or_else(|| "end_turn".to_owned()),
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
            Err(ProviderError::connection(
                "the stream ended before message_stop",
            ))
        }
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn stream(
        &self,
        request: ProviderRequest,
    ) -> BoxStream<'static, Result<ProviderEvent, ProviderError>> {
        let body = request_body(&request, &self.config.model);
        let url = format!("{}/v1/messages", self.config.base_url.trim_end_matches('/'));
        let http_request = self
            .client
            .post(url)
            .header("x-api-key", &self.config.api_key)
            .header("anthropic-version", ANTHROPIC_VERSION)
            .header("accept", "text/event-stream")
            .json(&body);
        http::sse_stream(http_request, AnthropicParser::default())
    }
}
