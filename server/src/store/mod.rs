//! The store: the source of truth. Agents and their append-only event logs.
//!
//! [`Store`] is the interface; [`sqlite::SqliteStore`] is the implementation used today. A
//! PostgreSQL store implements the same trait: seq allocation already happens inside the
//! database transaction (`head_seq` is bumped with the insert), so it carries over unchanged.
//!
//! **Architecture invariant:** only this module touches sqlx.

pub mod sqlite;

use app::protocol::Agent;
use app::{AgentEvent, DeltaAction, EventKind};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

/// Errors of the store boundary.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("agent {0} does not exist")]
    UnknownAgent(Uuid),
    #[error("the database failed: {0}")]
    Database(#[from] sqlx::Error),
    #[error("the database failed to migrate: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A row that cannot be decoded or breaks an invariant (e.g. seq out of order).
    #[error("the stored log is inconsistent: {0}")]
    Corrupt(String),
    /// The database could not do it now (busy, I/O trouble); trying again may work.
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
}

impl StoreError {
    /// True when the same call may succeed if tried again: nothing was written, and the cause
    /// is the database's state, not the request.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Unavailable(_) => true,
            StoreError::Database(error) => matches!(
                error,
                sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::WorkerCrashed
            ) || matches!(error, sqlx::Error::Database(database)
                    if database.code().is_some_and(|code| code == "5" || code == "6")),
            _ => false,
        }
    }
}

/// A new agent, before the store gives it an id.
#[derive(Clone, Debug, Default)]
pub struct NewAgent {
    pub name: String,
    pub system: Option<String>,
    pub description: Option<String>,
    pub model: Option<String>,
    pub metadata: Value,
    pub tags: Vec<String>,
}

/// An event before it is committed: everything but `agent_id` and `seq`, which the store assigns.
#[derive(Clone, Debug, PartialEq)]
pub struct EventDraft {
    pub id: Uuid,
    pub run_id: Option<Uuid>,
    pub thread_id: Option<Uuid>,
    pub block_id: Option<Uuid>,
    pub message_id: Option<Uuid>,
    pub kind: EventKind,
    pub delta: Option<Value>,
    pub delta_path: Option<String>,
    pub delta_action: Option<DeltaAction>,
    pub content: Value,
    pub raw: Option<Value>,
    pub metadata: Value,
    pub created_at: DateTime<Utc>,
}

impl EventDraft {
    /// A draft of `kind` with a fresh id, stamped now, everything else empty.
    pub fn new(kind: EventKind) -> EventDraft {
        EventDraft {
            id: Uuid::new_v4(),
            run_id: None,
            thread_id: None,
            block_id: None,
            message_id: None,
            kind,
            delta: None,
            delta_path: None,
            delta_action: None,
            content: Value::Null,
            raw: None,
            metadata: Value::Null,
            created_at: Utc::now(),
        }
    }

    /// The committed event this draft becomes at `seq`.
    pub fn into_event(self, agent_id: Uuid, seq: u64) -> AgentEvent {
        AgentEvent {
            id: self.id,
            agent_id,
            seq,
            run_id: self.run_id,
            thread_id: self.thread_id,
            block_id: self.block_id,
            message_id: self.message_id,
            kind: self.kind,
            delta: self.delta,
            delta_path: self.delta_path,
            delta_action: self.delta_action,
            content: self.content,
            raw: self.raw,
            metadata: self.metadata,
            created_at: self.created_at,
        }
    }
}

/// The events of one agent to commit together, in order.
#[derive(Clone, Debug)]
pub struct AppendBatch {
    pub agent_id: Uuid,
    pub drafts: Vec<EventDraft>,
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    async fn create_agent(&self, agent: NewAgent) -> Result<Agent, StoreError>;
    /// Agents, newest first, at most `limit`.
    async fn list_agents(&self, limit: u32) -> Result<Vec<Agent>, StoreError>;
    async fn get_agent(&self, agent_id: Uuid) -> Result<Option<Agent>, StoreError>;
    /// Deletes the agent and its log. False when there was no such agent.
    async fn delete_agent(&self, agent_id: Uuid) -> Result<bool, StoreError>;
    /// The newest committed seq of the agent's log; `None` for an unknown agent.
    async fn head_seq(&self, agent_id: Uuid) -> Result<Option<u64>, StoreError>;
    /// Events with `seq > since`, in seq order, at most `limit`.
    async fn read_events(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
    ) -> Result<Vec<AgentEvent>, StoreError>;
    /// The lifecycle and usage events of one run (`run_started`, `usage`, the run's end), in seq
    /// order; empty for an unknown run. Reads the run index, not the agent's whole log.
    async fn run_outline(&self, run_id: Uuid) -> Result<Vec<AgentEvent>, StoreError>;
    /// Claims `key` for `run_id` unless the agent already used it: returns the run that holds the
    /// key (`run_id` when this call claimed it).
    async fn claim_run_key(
        &self,
        agent_id: Uuid,
        key: &str,
        run_id: Uuid,
    ) -> Result<Uuid, StoreError>;
    /// Gives a key back (its run never started).
    async fn release_run_key(&self, agent_id: Uuid, key: &str) -> Result<(), StoreError>;
    /// The `run_started` events of runs with no terminal event: in flight, or cut off by a crash.
    async fn unfinished_runs(&self) -> Result<Vec<AgentEvent>, StoreError>;
    /// Gives back the idempotency keys whose run never wrote `run_started` (its request died
    /// between claiming the key and starting the run). Returns how many.
    async fn release_unstarted_run_keys(&self) -> Result<u64, StoreError>;
    /// Commits every batch in one transaction, assigning each agent's next seqs in batch order.
    /// All or nothing: an unknown agent fails the whole call and writes nothing.
    async fn append(&self, batches: &[AppendBatch]) -> Result<Vec<Vec<AgentEvent>>, StoreError>;
}
