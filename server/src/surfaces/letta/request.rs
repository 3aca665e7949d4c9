//! Letta's send request, read: the message text (string or content parts), its `otid`, and the
//! options Letta's SDKs send. Pure; every refusal names what was wrong.

use axum::http::StatusCode;
use serde::Deserialize;

use super::mapping::Cut;
use crate::http::error::ApiError;

/// The body of `POST /v1/agents/{id}/messages` and `…/messages/stream`. Fields Letta has that
/// are not listed (`assistant_message_tool_name`, `enable_thinking`, `client_tools`, …) are
/// accepted and ignored.
#[derive(Debug, Deserialize)]
pub struct LettaRequest {
    #[serde(default)]
    messages: Option<Vec<MessageCreate>>,
    /// Shorthand for one user message.
    #[serde(default)]
    input: Option<Content>,
    #[serde(default)]
    pub(super) streaming: Option<bool>,
    #[serde(default)]
    pub(super) stream_tokens: Option<bool>,
    #[serde(default)]
    pub(super) background: Option<bool>,
    #[serde(default)]
    pub(super) include_pings: Option<bool>,
    #[serde(default)]
    pub(super) max_steps: Option<u32>,
    #[serde(default)]
    pub(super) include_return_message_types: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
struct MessageCreate {
    role: String,
    content: Content,
    #[serde(default)]
    otid: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Deserialize)]
struct ContentPart {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

impl Content {
    fn text(&self) -> Result<String, ApiError> {
        match self {
            Content::Text(text) => Ok(text.clone()),
            Content::Parts(parts) => parts
                .iter()
                .map(|part| match (part.kind.as_str(), &part.text) {
                    ("text", Some(text)) => Ok(text.as_str()),
                    (kind, _) => Err(unprocessable(format!(
                        "content of type {kind:?} is not supported; send text"
                    ))),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(|texts| texts.join("\n")),
        }
    }
}

pub(super) fn unprocessable(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", message)
}

impl LettaRequest {
    /// The user's text and the client's otid for it.
    pub(super) fn user_message(&self) -> Result<(String, Option<String>), ApiError> {
        if let Some(messages) = self
            .messages
            .as_ref()
            .filter(|messages| !messages.is_empty())
        {
            let mut texts = Vec::with_capacity(messages.len());
            for message in messages {
                if message.role != "user" {
                    return Err(unprocessable(format!(
                        "role {:?}: only user messages can be sent",
                        message.role
                    )));
                }
                texts.push(message.content.text()?);
            }
            let otid = messages.iter().find_map(|message| message.otid.clone());
            return Ok((texts.join("\n\n"), otid));
        }
        match &self.input {
            Some(input) => Ok((input.text()?, None)),
            None => Err(unprocessable("messages (or input) is required")),
        }
    }

    pub(super) fn cut(&self) -> Cut {
        if self.stream_tokens.unwrap_or(false) {
            Cut::Tokens
        } else {
            Cut::Steps
        }
    }
}

/// Reads a Letta send body as the handlers do: the user's text and the client's otid, or the
/// error the client would get. (The fuzz targets drive this with arbitrary bytes.)
pub fn parse_request(body: &[u8]) -> Result<(String, Option<String>), ApiError> {
    let request: LettaRequest = serde_json::from_slice(body)
        .map_err(|error| crate::http::params::body_error(&error, "request"))?;
    request.user_message()
}
