//! OpenAI Chat Completions streaming, for any OpenAI-compatible server
//! (`POST {base}/chat/completions`, `stream: true`, `stream_options.include_usage`).
//!
//! [`OpenAiParser`] is pure. Tool-call pieces merge by `index`: id and name come first, the
//! arguments arrive as JSON text in pieces, passed on as they come; the choice's finish ends
//! every open call. The stream
//! ends with `data: [DONE]`; with `include_usage` a last chunk has empty `choices` and `usage`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::http::{self, SseParser};
use super::{
    ConversationMessage, Events, Provider, ProviderError, ProviderEvent, ProviderRequest, ToolSpec,
};

pub const OPENAI_BASE_URL_DEFAULT: &str = "https://api.openai.com/v1";
pub const OPENAI_MODEL_DEFAULT: &str = "gpt-4o-mini";

#[derive(Clone, Debug)]
pub struct OpenAiConfig {
    pub api_key: Option<String>,
    pub base_url: String,
    pub model: String,
}

pub struct OpenAiProvider {
    config: OpenAiConfig,
    /// Or why there is none: each call fails saying so.
    client: Result<reqwest::Client, String>,
}

impl OpenAiProvider {
    pub fn new(config: OpenAiConfig) -> OpenAiProvider {
        OpenAiProvider { config, client: http::client() }
    }
}

pub fn request_body(request: &ProviderRequest, default_model: &str) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = &request.system {
        messages.push(json!({ "role": "system", "content": system }));
    }
    for message in &request.messages {
        messages.push(match message {
            ConversationMessage::User { text } => json!({ "role": "user", "content": text }),
            ConversationMessage::Assistant {
                text, tool_calls, ..
            } => {
                let mut message = json!({ "role": "assistant", "content": text });
                if !tool_calls.is_empty() {
                    message["tool_calls"] = tool_calls
                        .iter()
                        .map(|call| {
                            json!({
                                "id": call.id,
                                "type": "function",
                                "function": { "name": call.name, "arguments": call.input.to_string() },
                            })
                        })
                        .collect();
                }
                message
            }
            ConversationMessage::ToolResult {
                tool_call_id,
                content,
                ..
            } => json!({ "role": "tool", "tool_call_id": tool_call_id, "content": content }),
        });
    }
    let mut body = json!({
        "model": request.model.as_deref().unwrap_or(default_model),
        "stream": true,
        "stream_options": { "include_usage": true },
        "messages": messages,
    });
    if !request.tools.is_empty() {
        body["tools"] = request.tools.iter().map(tool_json).collect();
    }
    body
}

/// A tool as Chat Completions declares it: a function.
fn tool_json(tool: &ToolSpec) -> Value {
    let function = json!({
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.input_schema,
    });
    json!({ "type": "function", "function": function })
}

#[derive(Debug, Default)]
pub struct OpenAiParser {
    /// Open tool calls by index: their ids.
    calls: BTreeMap<u64, String>,
    finish_reason: Option<String>,
    done: bool,
}

impl OpenAiParser {
    /// Closes every open tool call (their arguments are complete now).
    fn close_calls(&mut self) -> Vec<ProviderEvent> {
        std::mem::take(&mut self.calls)
            .into_values()
            .map(|id| ProviderEvent::ToolCallEnd { id })
            .collect()
    }
}

/// OpenAI's finish reasons in the vocabulary of the log.
fn stop_reason(finish_reason: &str) -> String {
    match finish_reason {
        "stop" => "end_turn",
        "length" => "max_tokens",
        "tool_calls" | "function_call" => "tool_use",
        other => other,
    }
    .to_owned()
}

impl SseParser for OpenAiParser {
    fn parse(&mut self, _event: &str, data: &str) -> Result<Vec<ProviderEvent>, ProviderError> {
        if data.trim() == "[DONE]" {
            self.done = true;
            let mut events = self.close_calls();
            events.push(ProviderEvent::Stop {
                reason: stop_reason(self.finish_reason.as_deref().unwrap_or("stop")),
            });
            return Ok(events);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|error| ProviderError::invalid(format!("unreadable chunk: {error}")))?;
        if let Some(error) = chunk.get("error") {
            let kind = error["type"].as_str().or(error["code"].as_str()).unwrap_or("api_error");
            return Err(ProviderError {
                retryable: matches!(kind, "rate_limit_error" | "server_error" | "overloaded_error"),
                kind: kind.to_owned(),
                message: error["message"].as_str().unwrap_or("").to_owned(),
                retry_after_ms: None,
            });
        }
        let mut events = Vec::new();
        if let Some(choice) = chunk["choices"].as_array().and_then(|choices| choices.first()) {
            let delta = &choice["delta"];
            // Reasoning text of servers that stream it separately (e.g. DeepSeek, vLLM).
            if let Some(reasoning) =
                delta["reasoning_content"].as_str().filter(|text| !text.is_empty())
            {
                events.push(ProviderEvent::ThinkingDelta(reasoning.to_owned()));
            }
            if let Some(content) = delta["content"].as_str().filter(|text| !text.is_empty()) {
                events.push(ProviderEvent::TextDelta(content.to_owned()));
            }
            for piece in delta["tool_calls"].as_array().into_iter().flatten() {
                let index = piece["index"].as_u64().unwrap_or(0);
                if let std::collections::btree_map::Entry::Vacant(slot) = self.calls.entry(index) {
                    let id = piece["id"].as_str().unwrap_or_default().to_owned();
                    let name = piece["function"]["name"].as_str().unwrap_or_default().to_owned();
                    events.push(ProviderEvent::ToolCallStart { id: id.clone(), name });
                    slot.insert(id);
                }
                if let Some(arguments) =
                    piece["function"]["arguments"].as_str().filter(|text| !text.is_empty())
                {
                    let id = self.calls.get(&index).expect("inserted above");
                    events.push(ProviderEvent::ToolCallInputDelta {
                        id: id.clone(),
                        json: arguments.to_owned(),
                    });
                }
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                self.finish_reason = Some(reason.to_owned());
                events.extend(self.close_calls());
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|usage| !usage.is_null()) {
            events.push(ProviderEvent::Usage {
                input_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
                output_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
            });
        }
        Ok(events)
    }

    fn finish(&mut self) -> Result<Vec<ProviderEvent>, ProviderError> {
        if self.done {
            Ok(vec![])
        } else {
            Err(ProviderError::connection("the stream ended before [DONE]"))
        }
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn stream(&self, request: ProviderRequest) -> Events {
        let body = request_body(&request, &self.config.model);
        let url = format!("{}/chat/completions", self.config.base_url.trim_end_matches('/'));
        let client = match &self.client {
            Ok(client) => client,
            Err(why) => return http::unsendable(why),
        };
        let mut http_request = client.post(url).header("accept", "text/event-stream").json(&body);
        if let Some(key) = &self.config.api_key {
            http_request = http_request.bearer_auth(key);
        }
        http::sse_stream(http_request, OpenAiParser::default())
    }
}
