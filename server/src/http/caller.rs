//! Who is calling: the operator, or a user holding a scoped token ([`Grant`]). The access
//! middleware puts a [`Caller`] in every request's extensions; handlers whose conversation is
//! in the body (or in WebSocket frames) take it as an extractor and ask it.
//!
//! A scoped token reaches an agent when its `agents` lists the agent's id or a chat/thread name
//! that was given to the agent (for a branch, its conversation's), **and** the agent is not
//! another user's (`owner` unset or the token's `sub`). An agent the token does not reach
//! answers **404**, exactly as an agent that does not exist: a token cannot probe which ids
//! exist. An operation the token's scope lacks
//! answers **403** `insufficient_scope` (checked first, so it tells nothing about any agent), and
//! an operator's route **403** `operator_only`.

use std::sync::Arc;

use app::protocol::Agent;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::StatusCode;
use uuid::Uuid;

use crate::http::error::ApiError;
use crate::http::token::{Grant, Scope};
use crate::store::Store;

/// The caller of one request.
#[derive(Clone, Debug)]
pub enum Caller {
    /// The operator token, or a server without one (open, as a local tool).
    Operator,
    /// A scoped token, and until when it is accepted (unix seconds: its `exp` and the clock
    /// skew allowed).
    User(Arc<Grant>, i64),
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Caller, ApiError> {
        // Put there by `auth::require_token` for every route it lets through; missing means a
        // router was built without it — refuse rather than guess who is calling.
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| ApiError::internal("a request reached a handler without a caller"))
    }
}

impl Caller {
    /// The user a scoped token speaks for.
    pub fn user(&self) -> Option<&str> {
        match self {
            Caller::Operator => None,
            Caller::User(grant, _) => Some(&grant.sub),
        }
    }

    /// When the token stops being accepted (unix seconds): its streams end then. `None` for
    /// the operator.
    pub fn expires_at(&self) -> Option<i64> {
        match self {
            Caller::Operator => None,
            Caller::User(_, usable_until) => Some(*usable_until),
        }
    }

    /// 403 unless the caller may do `scope`.
    pub fn require(&self, scope: Scope) -> Result<(), ApiError> {
        match self {
            Caller::User(grant, _) if !grant.scopes.contains(scope) => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "insufficient_scope",
                format!(
                    "this token's scope is \"{}\": this needs \"{}\"",
                    grant.scopes,
                    scope.name()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// 403 unless the caller is the operator.
    pub fn require_operator(&self) -> Result<(), ApiError> {
        match self {
            Caller::Operator => Ok(()),
            Caller::User(..) => Err(operator_only()),
        }
    }

    /// True when the token lists this chat or thread name itself.
    pub fn lists(&self, name: &str) -> bool {
        match self {
            Caller::Operator => true,
            Caller::User(grant, _) => grant.agents.iter().any(|listed| listed == name),
        }
    }

    /// `Ok` when the caller may reach `agent` (see the module's rule); the 404 of an unknown
    /// agent otherwise.
    pub async fn reach(&self, store: &dyn Store, agent: &Agent) -> Result<(), ApiError> {
        let Caller::User(grant, _) = self else {
            return Ok(());
        };
        let hidden = || ApiError::unknown_agent(agent.id);
        if agent.owner.as_deref().is_some_and(|owner| owner != grant.sub) {
            return Err(hidden());
        }
        // A branch is reached through its conversation: listed by the conversation's id, or by
        // a name the conversation was given.
        let conversation = agent.branch.map_or(agent.id, |origin| origin.root);
        let listed_by_id = grant.agents.iter().any(|listed| {
            Uuid::parse_str(listed).is_ok_and(|id| id == agent.id || id == conversation)
        });
        if listed_by_id {
            return Ok(());
        }
        // Listed by the chat name it was given: the agent's metadata names it, the chat table
        // confirms it (metadata alone is the operator's to write).
        let chat = agent.metadata.get("chat_id").and_then(|chat| chat.as_str());
        if let Some(chat) = chat.filter(|chat| self.lists(chat)) {
            if store.chat_agent(chat).await? == Some(conversation) {
                return Ok(());
            }
        }
        Err(hidden())
    }

    /// The agent `agent_id`, if the caller may reach it: unknown and unreachable agents are the
    /// same 404.
    pub async fn reach_id(&self, store: &dyn Store, agent_id: Uuid) -> Result<Agent, ApiError> {
        let agent =
            store.get_agent(agent_id).await?.ok_or_else(|| ApiError::unknown_agent(agent_id))?;
        self.reach(store, &agent).await?;
        Ok(agent)
    }

    /// The agents a scoped token reaches (for `GET /v1/agents` and the agents page), newest
    /// first; every agent for the operator (or `owner`'s, when given), at most `limit`.
    pub async fn agents(
        &self,
        store: &dyn Store,
        owner: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Agent>, ApiError> {
        let Caller::User(grant, _) = self else {
            return Ok(store.list_agents(owner, limit).await?);
        };
        let mut reached = Vec::new();
        for listed in &grant.agents {
            let agent_id = match Uuid::parse_str(listed) {
                Ok(agent_id) => Some(agent_id),
                Err(_) => store.chat_agent(listed).await?,
            };
            let Some(agent) = agent_id.map(|id| store.get_agent(id)) else {
                continue;
            };
            let Some(agent) = agent.await? else { continue };
            if reached.iter().any(|seen: &Agent| seen.id == agent.id) {
                continue;
            }
            if self.reach(store, &agent).await.is_ok() {
                reached.push(agent);
            }
        }
        reached.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
        reached.truncate(limit as usize);
        Ok(reached)
    }
}

pub fn operator_only() -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "operator_only",
        "this needs the operator's token (AGENTSTREAM_API_TOKEN), not a scoped one",
    )
}
