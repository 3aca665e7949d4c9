//! What a run is asked with: the options a surface recorded and the turn it answers.

use uuid::Uuid;

/// How a run was asked for. Recorded in its `run_started` event (and the user message), so every
/// view of the log — and a stream resumed later, on any server — knows it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunOptions {
    /// The run outlives the request that started it (Letta's `background`): a client that
    /// disconnects from its stream does not cancel it.
    pub background: bool,
    /// The client's id for the user message (Letta's `otid`), echoed on the message.
    pub otid: Option<String>,
    /// Letta's `stream_tokens` of the request that started the run: how a resumed Letta stream
    /// is cut (token fragments or one message per step).
    pub stream_tokens: Option<bool>,
    /// LLM calls at most for this run (Letta's `max_steps`); never above the server's limit.
    pub iterations_max: Option<u32>,
    /// What the client said about the run that the log should keep (AG-UI's run id, context
    /// and state), recorded as `client` in `run_started`'s metadata.
    pub client: Option<serde_json::Value>,
    /// The id the run gets, for a surface that must name the run before it starts (AG-UI ties
    /// the client's run id to it first); a new time-ordered id otherwise.
    pub run_id: Option<Uuid>,
    /// Tools the client runs (`client_tools.rs`), offered to the model beside the agent's own,
    /// kept in `run_started`'s `metadata.client_tools`.
    pub client_tools: Vec<crate::provider::ToolSpec>,
    /// The server answers (requests past their timeout): it may decline a client tool's call,
    /// which a person's approval may not.
    pub answered_by_server: bool,
    /// The system prompt of this run in place of the agent's (the Responses API's
    /// `instructions`, which a client sends with every request).
    pub instructions: Option<String>,
}

/// What a run answers.
#[derive(Debug)]
pub enum Turn {
    /// A user's message.
    User(String),
    /// A person's answer to an approval request: the continuation of the run that asked.
    Approval(crate::agent::approval::ApprovalTurn),
}
