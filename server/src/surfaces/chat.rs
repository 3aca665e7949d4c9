//! Conversations named by the client: the AI SDK's chat id and AG-UI's thread id each name one
//! agent's log — an existing agent's id, or a name given an agent of its own on first use (the
//! `chat_agents` table, so it is found again after a restart, not guessed). Also what a
//! chat-shaped surface's handlers use of the server, and which run of a chat is in flight. A
//! chat follows its conversation's current branch (`chat_log`).

use std::sync::Arc;

use serde_json::json;
use uuid::Uuid;

use crate::agent::branch::followed_log;
use crate::agent::cancel::{cancel_and_wait, CANCEL_WAIT_MS_MAX};
use crate::agent::history::Snapshots;
use crate::agent::start::Starter;
use crate::agent::Runs;
use crate::cluster::Cluster;
use crate::delivery::hub::Hub;
use crate::http::caller::Caller;
use crate::http::error::ApiError;
use crate::store::{agent_for_chat, NewAgent, Store};

pub use crate::http::params::{chat_id, unknown_chat, ChatId, CHAT_ID_CHARS_MAX};

/// What the chat-shaped surfaces' handlers use of the server.
#[derive(Clone)]
pub struct ChatState {
    pub store: Arc<dyn Store>,
    pub hub: Arc<Hub>,
    pub runs: Arc<Runs>,
    pub starter: Starter,
    pub cluster: Option<Arc<Cluster>>,
    pub snapshots: Arc<Snapshots>,
    /// Cancelled when the server shuts down: open streams end (their runs go on).
    pub shutdown: tokio_util::sync::CancellationToken,
    /// Slots for open streams (shared with the other SSE surfaces), and how many there are.
    pub sse_streams: Arc<tokio::sync::Semaphore>,
    pub sse_streams_max: usize,
}

/// The agent a chat id names, as `caller` may reach it: an agent id must exist; a name is
/// found, or given an agent now when `create` (a first message; a scoped token's user owns
/// it), or `None`. A scoped token reaches a name it lists (or whose agent it lists) and nothing
/// else: any other answers 404, as a chat that does not exist.
pub async fn chat_agent(
    state: &ChatState,
    caller: &Caller,
    chat: &ChatId,
    create: bool,
) -> Result<Option<Uuid>, ApiError> {
    let store = state.store.as_ref();
    match chat {
        ChatId::Agent(agent_id) => {
            caller.reach_id(store, *agent_id).await.map(|agent| Some(agent.id))
        }
        ChatId::Named(name) => {
            let hidden = || unknown_chat(name);
            if let Some(agent_id) = store.chat_agent(name).await? {
                // The operator reaches every chat: no need to read the agent's row.
                if let Caller::User(..) = caller {
                    caller.reach_id(store, agent_id).await.map_err(|_| hidden())?;
                }
                return Ok(Some(agent_id));
            }
            if !caller.lists(name) {
                return Err(hidden());
            }
            if !create {
                return Ok(None);
            }
            let template = NewAgent {
                name: format!("chat {name}"),
                metadata: json!({ "chat_id": name }),
                owner: caller.user().map(str::to_owned),
                ..NewAgent::default()
            };
            let agent = agent_for_chat(store, name, template).await?;
            // Two users' first messages at once: the claim's winner owns it.
            caller.reach(store, &agent).await.map_err(|_| hidden())?;
            Ok(Some(agent.id))
        }
    }
}

/// The log a chat's requests act on: [`chat_agent`]'s conversation at its current branch.
pub async fn chat_log(
    state: &ChatState,
    caller: &Caller,
    chat: &ChatId,
    create: bool,
) -> Result<Option<Uuid>, ApiError> {
    let Some(conversation) = chat_agent(state, caller, chat, create).await? else {
        return Ok(None);
    };
    Ok(Some(followed_log(state.store.as_ref(), conversation).await?))
}

/// The id the client gave a user message (kept as its `otid`), or ours when it gave none.
pub fn client_message_id(message: &app::timeline::TimelineMessage) -> String {
    message
        .content
        .get("otid")
        .and_then(serde_json::Value::as_str)
        .map_or_else(|| message.message_id.to_string(), str::to_owned)
}

/// Cancels the run of `agent_id` in flight, if any, and answers `{agent_id, cancelled_run_ids}`
/// once its end is in the log (at most `CANCEL_WAIT_MS_MAX`).
pub async fn cancel_in_flight(
    state: &ChatState,
    agent_id: Uuid,
) -> Result<serde_json::Value, ApiError> {
    let cluster = state.cluster.as_ref().map(|cluster| cluster.store.as_ref());
    let wait = std::time::Duration::from_millis(CANCEL_WAIT_MS_MAX);
    let cancelled =
        cancel_and_wait(&state.runs, cluster, state.store.as_ref(), agent_id, None, wait).await?;
    let cancelled: Vec<Uuid> = cancelled.into_iter().collect();
    Ok(json!({ "agent_id": agent_id, "cancelled_run_ids": cancelled }))
}

/// The run of `agent_id` in flight, on this server or (with PostgreSQL) another.
pub async fn run_in_flight(state: &ChatState, agent_id: Uuid) -> Result<Option<Uuid>, ApiError> {
    if let Some(run_id) = state.runs.active_run(agent_id) {
        return Ok(Some(run_id));
    }
    match &state.cluster {
        Some(cluster) => Ok(cluster.store.active_run(agent_id).await?),
        None => Ok(None),
    }
}
