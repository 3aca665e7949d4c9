//! Why a run did not start: what every surface refuses a start with, in its own words.

use uuid::Uuid;

use crate::agent::registry::StartRunError;
use crate::limits::{CLIENT_IDEMPOTENCY_KEY_CHARS_MAX, RUN_CONTENT_BYTES_MAX};
use crate::store::StoreError;

/// Why a run did not start. Each surface says it in its own words (`http::error` for HTTP).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("content must not be empty")]
    EmptyContent,
    #[error("content is over {RUN_CONTENT_BYTES_MAX} bytes")]
    ContentTooLarge,
    #[error("the idempotency key is longer than {CLIENT_IDEMPOTENCY_KEY_CHARS_MAX} characters")]
    KeyTooLong,
    #[error("agent {0} does not exist")]
    UnknownAgent(Uuid),
    /// The key started run `run_id` for another message: a retry must repeat the request.
    #[error("this idempotency key was used for another message (run {run_id})")]
    KeyReused { run_id: Uuid },
    /// A user message while a tool call waits for a person: answer it first.
    #[error(
        "tool call {tool_call_id} waits for approval: approve or deny it before sending a message"
    )]
    ApprovalPending { tool_call_id: String },
    #[error("{0}")]
    BadApproval(String),
    #[error("{0}")]
    BadClientTools(String),
    /// A user message while a client tool's call waits for its result.
    #[error(
        "tool call {tool_call_id} waits for the client's result: send it before a new message"
    )]
    ClientToolPending { tool_call_id: String },
    #[error("no approval was asked for tool call {0}")]
    UnknownApproval(String),
    /// Exactly one answer per request.
    #[error("tool call {tool_call_id} was already answered: {answer}")]
    AlreadyAnswered { tool_call_id: String, answer: String },
    #[error(transparent)]
    Run(#[from] StartRunError),
    #[error(transparent)]
    Store(#[from] StoreError),
}
