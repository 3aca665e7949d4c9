//! What `POST /v1/responses` carries, read and checked. Pure; every refusal says what was wrong.
//!
//! The input is read as a transcript. Chained (`previous_response_id`), every item is new.
//! Resent whole (the Agents SDK's default), the items up to the last one of ours (an id this
//! server gave: `msg_`, `rs_`, `fc_` + an event's id) are the log's already, and only what comes
//! after them is new: trailing `function_call_output`s answer the calls that wait, or the user's
//! messages are the next turn.

use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use super::wire::{event_of_item, run_of, Echo};
use crate::agent::client_tools::{self, ToolOutput};
use crate::http::error::ApiError;
use crate::provider::ToolSpec;

/// Input items one request may carry (a resent transcript grows with the conversation).
pub const INPUT_ITEMS_MAX: usize = 10_000;
/// `model` longer than this (in characters) is refused.
pub const MODEL_CHARS_MAX: usize = 256;
/// `instructions` (with the input's system and developer messages) over this many bytes are
/// refused: they are the run's system prompt, kept in its `run_started`.
pub const INSTRUCTIONS_BYTES_MAX: usize = 256 * 1024;
/// Ids of ours looked up to find the conversation an input continues: its newest ones (a
/// transcript's items are all of one agent; a hostile list of made-up ids costs one bounded
/// look-up).
pub const ECHOED_IDS_LOOKED_UP_MAX: usize = 32;
/// `metadata`: at most this many keys (as OpenAI's), each value a string.
pub const METADATA_KEYS_MAX: usize = 16;
/// A `metadata` value longer than this (in characters) is refused.
pub const METADATA_VALUE_CHARS_MAX: usize = 512;

/// The body as sent: every field a client may send, read leniently and checked by
/// [`CreateBody::read`]; anything else is ignored (newer clients add fields freely).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct CreateBody {
    model: Value,
    input: Value,
    instructions: Value,
    tools: Value,
    tool_choice: Value,
    previous_response_id: Value,
    conversation: Value,
    store: Value,
    background: Value,
    stream: Value,
    metadata: Value,
    max_output_tokens: Value,
    parallel_tool_calls: Value,
    temperature: Value,
    top_p: Value,
    reasoning: Value,
    text: Value,
    truncation: Value,
}

/// What `model` names.
#[derive(Clone, Debug, PartialEq)]
pub enum Model {
    /// An agent's id: its conversation.
    Agent(Uuid),
    /// A model handle (`scripted`, `openai/gpt-4o`): a fresh agent on that model.
    Handle(String),
}

/// One input item, as far as a run needs it.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Message {
        role: String,
        text: String,
        ours: Option<Uuid>,
    },
    FunctionCall {
        ours: Option<Uuid>,
    },
    FunctionCallOutput(ToolOutput),
    /// A reasoning item or an item reference: only its id counts.
    Other {
        ours: Option<Uuid>,
    },
}

impl Item {
    /// The event of ours this item echoes, if it is one of ours.
    pub fn ours(&self) -> Option<Uuid> {
        match self {
            Item::Message { ours, .. } | Item::FunctionCall { ours } | Item::Other { ours } => {
                *ours
            }
            Item::FunctionCallOutput(_) => None,
        }
    }
}

/// A request, read.
#[derive(Clone, Debug, PartialEq)]
pub struct CreateRequest {
    pub model: Model,
    pub echo: Echo,
    /// The run `previous_response_id` names.
    pub previous: Option<Uuid>,
    pub stream: bool,
    pub background: bool,
    pub client_tools: Vec<ToolSpec>,
    pub items: Vec<Item>,
}

/// What a request asks of the agent.
#[derive(Clone, Debug, PartialEq)]
pub enum Asked {
    /// A new turn: the user's message, and instructions the input's system or developer
    /// messages add.
    Message { text: String, system: Vec<String> },
    /// Outputs of the caller's tools, for calls that wait.
    Outputs(Vec<ToolOutput>),
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::bad_request("invalid_request", message)
}

fn optional_bool(value: &Value, field: &str) -> Result<Option<bool>, ApiError> {
    match value {
        Value::Null => Ok(None),
        Value::Bool(flag) => Ok(Some(*flag)),
        _ => Err(invalid(format!("{field} must be true or false"))),
    }
}

fn optional_number(value: &Value, field: &str) -> Result<Option<f64>, ApiError> {
    match value {
        Value::Null => Ok(None),
        Value::Number(number) => Ok(number.as_f64()),
        _ => Err(invalid(format!("{field} must be a number"))),
    }
}

impl CreateBody {
    pub fn read(&self) -> Result<CreateRequest, ApiError> {
        let model = match &self.model {
            Value::String(model) if !model.trim().is_empty() => model.trim(),
            _ => return Err(invalid("model must name an agent (its id) or a model handle")),
        };
        if model.chars().count() > MODEL_CHARS_MAX {
            return Err(invalid(format!("model is over {MODEL_CHARS_MAX} characters")));
        }
        if !self.conversation.is_null() {
            return Err(invalid(
                "conversation is not supported: chain responses with previous_response_id, or \
                 name the agent as the model",
            ));
        }
        let previous = match &self.previous_response_id {
            Value::Null => None,
            Value::String(id) => Some(run_of(id).ok_or_else(|| {
                ApiError::new(
                    axum::http::StatusCode::NOT_FOUND,
                    "previous_response_not_found",
                    format!("previous response {id:?} was not found"),
                )
            })?),
            _ => return Err(invalid("previous_response_id must be a string")),
        };
        let instructions = match &self.instructions {
            Value::Null => None,
            Value::String(text) if text.len() <= INSTRUCTIONS_BYTES_MAX => Some(text.clone()),
            Value::String(_) => {
                return Err(invalid(format!(
                    "instructions are over {INSTRUCTIONS_BYTES_MAX} bytes"
                )))
            }
            _ => return Err(invalid("instructions must be a string")),
        };
        let (tools, client_tools) = read_tools(&self.tools)?;
        let max_output_tokens =
            match &self.max_output_tokens {
                Value::Null => None,
                value => Some(value.as_u64().ok_or_else(|| {
                    invalid("max_output_tokens must be a whole number of tokens")
                })?),
            };
        check_metadata(&self.metadata)?;
        let background = optional_bool(&self.background, "background")?.unwrap_or(false);
        let echo = Echo {
            model: model.to_owned(),
            instructions,
            tools,
            tool_choice: self.tool_choice.clone(),
            metadata: self.metadata.clone(),
            background,
            store: optional_bool(&self.store, "store")?.unwrap_or(true),
            previous_response_id: self.previous_response_id.as_str().map(str::to_owned),
            max_output_tokens,
            parallel_tool_calls: optional_bool(&self.parallel_tool_calls, "parallel_tool_calls")?
                .unwrap_or(true),
            temperature: optional_number(&self.temperature, "temperature")?,
            top_p: optional_number(&self.top_p, "top_p")?,
            reasoning: self.reasoning.clone(),
            text: self.text.clone(),
            truncation: self.truncation.clone(),
        };
        Ok(CreateRequest {
            model: match Uuid::try_parse(model) {
                Ok(agent_id) => Model::Agent(agent_id),
                Err(_) => Model::Handle(model.to_owned()),
            },
            echo,
            previous,
            stream: optional_bool(&self.stream, "stream")?.unwrap_or(false),
            background,
            client_tools,
            items: read_input(&self.input)?,
        })
    }
}

/// The function tools, as given (for the echo) and as client tools.
fn read_tools(tools: &Value) -> Result<(Vec<Value>, Vec<ToolSpec>), ApiError> {
    let listed = match tools {
        Value::Null => return Ok((Vec::new(), Vec::new())),
        Value::Array(tools) => tools,
        _ => return Err(invalid("tools must be a list")),
    };
    for (index, tool) in listed.iter().enumerate() {
        match tool.get("type").and_then(Value::as_str) {
            Some("function") => {}
            Some(other) => {
                return Err(invalid(format!(
                    "tools[{index}]: tools of type {other:?} are not supported; give function \
                     tools (the agent's own tools run on the server)"
                )))
            }
            None => return Err(invalid(format!("tools[{index}] needs a type"))),
        }
    }
    let specs = client_tools::parse(tools).map_err(invalid)?;
    Ok((listed.clone(), specs))
}

fn check_metadata(metadata: &Value) -> Result<(), ApiError> {
    let fields = match metadata {
        Value::Null => return Ok(()),
        Value::Object(fields) => fields,
        _ => return Err(invalid("metadata must be an object of strings")),
    };
    if fields.len() > METADATA_KEYS_MAX {
        return Err(invalid(format!("metadata has over {METADATA_KEYS_MAX} keys")));
    }
    for (key, value) in fields {
        let fits =
            value.as_str().is_some_and(|text| text.chars().count() <= METADATA_VALUE_CHARS_MAX);
        if !fits || key.chars().count() > 64 {
            return Err(invalid(format!(
                "metadata.{key}: keys are at most 64 characters and values strings of at most \
                 {METADATA_VALUE_CHARS_MAX}"
            )));
        }
    }
    Ok(())
}

fn read_input(input: &Value) -> Result<Vec<Item>, ApiError> {
    let items = match input {
        Value::String(text) => {
            return Ok(vec![Item::Message {
                role: "user".to_owned(),
                text: text.clone(),
                ours: None,
            }])
        }
        Value::Array(items) => items,
        Value::Null => return Err(invalid("input is missing: give a string or a list of items")),
        _ => return Err(invalid("input must be a string or a list of items")),
    };
    if items.len() > INPUT_ITEMS_MAX {
        return Err(invalid(format!(
            "input has {} items; at most {INPUT_ITEMS_MAX} are taken",
            items.len()
        )));
    }
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            read_item(item).map_err(|why| invalid(format!("input[{index}]: {why}")))
        })
        .collect()
}

fn read_item(item: &Value) -> Result<Item, String> {
    let ours = item.get("id").and_then(Value::as_str).and_then(event_of_item);
    let kind = item.get("type").and_then(Value::as_str);
    match kind {
        None | Some("message") => {
            let role = item.get("role").and_then(Value::as_str).ok_or("a message needs a role")?;
            if !["user", "assistant", "system", "developer"].contains(&role) {
                return Err(format!("role {role:?} is not user, assistant, system or developer"));
            }
            Ok(Item::Message {
                role: role.to_owned(),
                text: content_text(item.get("content").unwrap_or(&Value::Null))?,
                ours,
            })
        }
        Some("function_call") => {
            item.get("call_id")
                .and_then(Value::as_str)
                .ok_or("a function_call needs its call_id")?;
            Ok(Item::FunctionCall { ours })
        }
        Some("function_call_output") => {
            let call_id = item
                .get("call_id")
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
                .ok_or("a function_call_output needs the call_id it answers")?;
            let output = match item.get("output") {
                Some(Value::String(text)) => json!(text),
                Some(parts @ Value::Array(_)) => json!(content_text(parts)?),
                _ => return Err("a function_call_output needs its output (a string)".to_owned()),
            };
            Ok(Item::FunctionCallOutput(ToolOutput {
                tool_call_id: call_id.to_owned(),
                output: Ok(output),
            }))
        }
        Some("reasoning" | "item_reference") => Ok(Item::Other { ours }),
        Some(other) => Err(format!("items of type {other:?} are not supported")),
    }
}

/// A message's text: a string, or its text parts joined.
fn content_text(content: &Value) -> Result<String, String> {
    let parts = match content {
        Value::String(text) => return Ok(text.clone()),
        Value::Array(parts) => parts,
        _ => return Err("content must be a string or a list of parts".to_owned()),
    };
    let mut texts = Vec::with_capacity(parts.len());
    for part in parts {
        match part.get("type").and_then(Value::as_str) {
            Some("input_text" | "output_text" | "text" | "summary_text") => texts.push(
                part.get("text").and_then(Value::as_str).ok_or("a text part needs its text")?,
            ),
            Some("refusal") => {
                texts.push(part.get("refusal").and_then(Value::as_str).unwrap_or(""))
            }
            Some(other) => {
                return Err(format!(
                    "{other} parts are not supported: agentstream's agents read text"
                ))
            }
            None => return Err("a content part needs a type".to_owned()),
        }
    }
    Ok(texts.join("\n"))
}

impl CreateRequest {
    /// The newest events of ours the input echoes, at most [`ECHOED_IDS_LOOKED_UP_MAX`] (their
    /// agent is the conversation it continues).
    pub fn ours(&self) -> Vec<Uuid> {
        let mut ids: Vec<Uuid> = Vec::new();
        for id in self.items.iter().rev().filter_map(Item::ours) {
            if ids.len() == ECHOED_IDS_LOOKED_UP_MAX {
                break;
            }
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        ids.sort_unstable();
        ids
    }

    /// What the request asks: read from the new items — all of them when chained, else those
    /// after the last item of ours.
    pub fn asked(&self) -> Result<Asked, ApiError> {
        let new_from = match self.previous {
            Some(_) => 0,
            None => {
                self.items.iter().rposition(|item| item.ours().is_some()).map_or(0, |last| last + 1)
            }
        };
        let new = &self.items[new_from..];
        // Every output the input holds: calls of one response answered in any order, those
        // answered before passed over (`client_tools::answers`).
        let outputs: Vec<ToolOutput> = self
            .items
            .iter()
            .filter_map(|item| match item {
                Item::FunctionCallOutput(output) => Some(output.clone()),
                _ => None,
            })
            .collect();
        let last_output = new.iter().rposition(|item| matches!(item, Item::FunctionCallOutput(_)));
        let user_after = |from: usize| {
            new[from..]
                .iter()
                .any(|item| matches!(item, Item::Message { role, .. } if role == "user"))
        };
        if let Some(last) = last_output {
            if user_after(last) {
                return Err(invalid(
                    "a user message follows the function_call_output items: send the outputs \
                     alone, and the message with the next request",
                ));
            }
            return Ok(Asked::Outputs(outputs));
        }
        let texts = |wanted: &[&str]| -> Vec<String> {
            new.iter()
                .filter_map(|item| match item {
                    Item::Message { role, text, .. } if wanted.contains(&role.as_str()) => {
                        Some(text.clone())
                    }
                    _ => None,
                })
                .collect()
        };
        // Without ids of ours, a transcript's earlier turns are the client's history: the turn
        // is its last user message.
        let users = texts(&["user"]);
        let text = if new_from == 0 && self.previous.is_none() {
            users.last().cloned()
        } else {
            (!users.is_empty()).then(|| users.join("\n\n"))
        };
        let text = text
            .filter(|text| !text.trim().is_empty())
            .ok_or_else(|| invalid("the input has no new user message to answer"))?;
        let system = texts(&["system", "developer"]);
        let instructions = self.echo.instructions.as_deref().unwrap_or("").len();
        if instructions + system.iter().map(String::len).sum::<usize>() > INSTRUCTIONS_BYTES_MAX {
            return Err(invalid(format!(
                "instructions and system messages are over {INSTRUCTIONS_BYTES_MAX} bytes"
            )));
        }
        Ok(Asked::Message { text, system })
    }
}

#[cfg(test)]
mod tests;
