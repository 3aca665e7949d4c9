//! Request, response and WebSocket message shapes shared by the server and the browser.
//!
//! Field names of agents follow Letta's agent object where the two overlap (`id`, `name`,
//! `system`, `description`, `metadata`, `tags`, `created_at`), so Letta clients read them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::event::AgentEvent;

pub mod frame;

/// An agent: the owner of one event log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Agent {
    pub id: Uuid,
    pub name: String,
    #[serde(default)]
    pub system: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// Model name handed to the provider (`None` = the provider's default).
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub metadata: Value,
    #[serde(default)]
    pub tags: Vec<String>,
    /// The seq of the newest committed event (0 = empty log).
    pub head_seq: u64,
    #[serde(deserialize_with = "crate::time::deserialize")]
    pub created_at: DateTime<Utc>,
    /// The user it was created for (a scoped token's `sub`, or the operator's `owner`): it
    /// lists under that user, and no other user's token reaches it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Set on a branch: where it was forked from (its events up to `fork_seq` are its
    /// parent's; its own follow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<BranchOrigin>,
    /// On a conversation with branches: the branch its clients follow (`None`: its own log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_branch: Option<Uuid>,
}

/// Where a branch comes from: the conversation (the agent people see), the log it was forked
/// from (the conversation's own, or another branch) and the seq it shares that log up to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BranchOrigin {
    pub root: Uuid,
    pub parent: Uuid,
    pub fork_seq: u64,
}

/// `POST /v1/agents/{id}/branches`: fork the log `{id}` (a conversation or one of its branches)
/// after its seq `after_seq`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForkRequest {
    pub after_seq: u64,
    /// Make the new branch the one the conversation's clients follow.
    #[serde(default)]
    pub current: bool,
}

/// `PUT /v1/agents/{id}/current-branch`: the branch the conversation's clients follow
/// (`null`, or the conversation's own id: its own log).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchBranchRequest {
    pub branch: Option<Uuid>,
}

/// `GET /v1/agents/{id}/branches`: a conversation (`agent`, whose own log is its main line)
/// and its branches, oldest first; `current_branch` is the log its clients follow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BranchList {
    pub agent: Agent,
    pub current_branch: Uuid,
    pub branches: Vec<Agent>,
}

/// `POST /v1/agents`. Every field is optional; unknown Letta fields are accepted and ignored.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CreateAgentRequest {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub system: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub metadata: Option<Value>,
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    /// The user the agent is for (the `sub` of the tokens that will reach it).
    #[serde(default)]
    pub owner: Option<String>,
    /// Letta's model settings: `enable_reasoner` with `max_reasoning_tokens` asks for extended
    /// thinking (the agent's `metadata.thinking_budget_tokens`); the rest is not used.
    #[serde(default)]
    pub llm_config: Option<Value>,
}

/// `POST /v1/agents/{id}/runs`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CreateRunRequest {
    pub content: String,
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// Tools the client runs (`[{name, description, parameters}]`): the model may call them;
    /// a call waits in the log for the client's result (`POST /v1/agents/{id}/tool-results`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_tools: Option<Value>,
}

/// `POST /v1/agents/{id}/tool-results`: the client's result of a call of one of its tools —
/// `output` (any JSON), or `error` (the call failed or was declined). Exactly one answer per
/// call; it starts the run that goes on with it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResultRequest {
    /// The `tool_call_id` of the call (its `approval_requested` says `client: true`).
    pub call_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `POST /v1/agents/{id}/approvals`: a person's answer to an approval request. Exactly one
/// answer per request; it starts the run that carries it out (answered like a run request).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The `tool_call_id` of the `approval_requested` event.
    pub call_id: String,
    pub approve: bool,
    /// Why, for a denial: the model reads it in the call's error result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The 202 answer to a run request: the output goes to the log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunAccepted {
    pub run_id: Uuid,
    pub agent_id: Uuid,
}

/// `GET /v1/agents/{id}/events?since=N&limit=M`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventsPage {
    pub agent_id: Uuid,
    /// Events with `since < seq`, in seq order, at most `limit` of them.
    pub events: Vec<AgentEvent>,
    /// The newest committed seq of the log when the page was read.
    pub head_seq: u64,
    /// The cursor to pass as `since` for the next page.
    pub next_since: u64,
    /// True when events after `next_since` exist.
    pub has_more: bool,
}

/// `POST /v1/agents/{id}/messages/cancel` (Letta's path). An empty body cancels whatever runs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CancelRequest {
    #[serde(default)]
    pub run_ids: Option<Vec<Uuid>>,
}

/// The answer to a cancel request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CancelResponse {
    pub agent_id: Uuid,
    /// Runs that were asked to stop and have ended (with `run_cancelled`, or otherwise if they
    /// finished first).
    pub cancelled_run_ids: Vec<Uuid>,
}

/// `GET /v1/runs/{run_id}`: a run in Letta's shape, where the fields overlap.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub id: Uuid,
    pub agent_id: Uuid,
    /// `running`, `completed`, `failed` or `cancelled`.
    pub status: String,
    #[serde(deserialize_with = "crate::time::deserialize")]
    pub created_at: DateTime<Utc>,
    #[serde(default, deserialize_with = "crate::time::deserialize_option")]
    pub completed_at: Option<DateTime<Utc>>,
    pub stop_reason: Option<String>,
    pub background: bool,
    /// `{usage}` and, for a failed run, `{error}`.
    pub metadata: Value,
}

/// The body of every error answer: a stable machine-readable code and a sentence for people.
/// `detail` repeats the sentence where Letta (FastAPI) clients look for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
    #[serde(default)]
    pub detail: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
}

/// Messages a client sends on `GET /v1/ws` (JSON text frames, tagged by `type`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientMessage {
    /// Deliver every event of `agent_id` with `seq > since`, catch-up first, then live.
    Subscribe {
        agent_id: Uuid,
        #[serde(default)]
        since: u64,
        /// Let the server merge runs of token appends to one message that wait for this socket
        /// (it fell behind, or is catching up) into one event each ([`crate::coalesce`]): fewer,
        /// larger events, the same timeline. Off by default: every seq arrives as its own event.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        coalesce: bool,
    },
    Unsubscribe {
        agent_id: Uuid,
    },
    /// Cancel the agent's running run (only if it is one of `run_ids`, when given).
    Cancel {
        agent_id: Uuid,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_ids: Option<Vec<Uuid>>,
    },
    Ping {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nonce: Option<Value>,
    },
    /// A person's answer to an approval request of `agent_id`, as `POST …/approvals` takes it.
    Approve {
        agent_id: Uuid,
        call_id: String,
        approve: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The client's result of a call of one of its tools, as `POST …/tool-results` takes it
    /// (`output`, or `error`). Answered with `approval_accepted`, or an `error`.
    ToolResult {
        agent_id: Uuid,
        call_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

/// Messages the server sends on `GET /v1/ws`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMessage {
    /// The subscription is in place; events with `seq > since` follow.
    Subscribed {
        agent_id: Uuid,
        since: u64,
        head_seq: u64,
    },
    /// A batch of consecutive events of one agent, in seq order.
    Events {
        agent_id: Uuid,
        events: Vec<AgentEvent>,
    },
    /// This subscriber fell behind the live buffer. The server catches it up from the store, so
    /// nothing is lost; the notice says where the live buffer left it.
    Lagged {
        agent_id: Uuid,
        last_delivered_seq: u64,
        missed_live_batches: u64,
    },
    Unsubscribed {
        agent_id: Uuid,
    },
    /// The answer to `cancel`: the runs asked to stop (empty when none was running). Each ends
    /// with a `run_cancelled` event in the log.
    CancelRequested {
        agent_id: Uuid,
        run_ids: Vec<Uuid>,
    },
    Pong {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nonce: Option<Value>,
    },
    /// The answer to `approve`: the answer was taken and run `run_id` carries it out (its events
    /// arrive through the log). A refused answer gets an `error` (`already_answered`, …).
    ApprovalAccepted {
        agent_id: Uuid,
        call_id: String,
        run_id: Uuid,
    },
    /// Bad input or a failed subscription. The connection stays open unless it says otherwise.
    Error {
        code: String,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_id: Option<Uuid>,
    },
}
