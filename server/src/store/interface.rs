//! The store's interface: narrow traits — [`Agents`], [`EventLog`], [`RunKeys`] and, for
//! processes sharing a database, [`ClusterStore`] with its [`Notices`] — and what they speak of.

use crate::store::StoreResult;
use app::protocol::Agent;
use app::AgentEvent;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::limits::{PG_POOL_CONNECTIONS_MAX_DEFAULT, RUN_LEASE_MS_DEFAULT};
use crate::store::contents::ContentPage;
use crate::store::page::JsonPage;
use crate::store::records::{
    content_column, AppendBatch, EventJson, NewAgent, ProducerPosition, StoredSnapshot,
};
use crate::store::StoreError;

/// Agents: the rows each log hangs from.
#[async_trait]
pub trait Agents: Send + Sync + 'static {
    async fn create_agent(&self, agent: NewAgent) -> StoreResult<Agent>;
    /// Agents, newest first, at most `limit`; only `owner`'s when it is given.
    async fn list_agents(&self, owner: Option<&str>, limit: u32) -> StoreResult<Vec<Agent>>;
    async fn get_agent(&self, agent_id: Uuid) -> StoreResult<Option<Agent>>;
    /// Deletes the agent and its log. False when there was no such agent.
    async fn delete_agent(&self, agent_id: Uuid) -> StoreResult<bool>;
    /// The agent a chat id (the AI SDK surface's) was given, if any.
    async fn chat_agent(&self, chat_id: &str) -> StoreResult<Option<Uuid>>;
    /// Gives `chat_id` to `agent_id` unless it has an agent already; true when it was given.
    async fn claim_chat(&self, chat_id: &str, agent_id: Uuid) -> StoreResult<bool>;
}

/// The agent `chat_id` was given on first use, or one made from `template` and given to it now.
/// Two first uses at once end with one agent: the loser of the claim deletes the agent it made.
pub async fn agent_for_chat(
    store: &dyn Agents,
    chat_id: &str,
    template: NewAgent,
) -> StoreResult<Agent> {
    if let Some(agent_id) = store.chat_agent(chat_id).await? {
        if let Some(agent) = store.get_agent(agent_id).await? {
            return Ok(agent);
        }
    }
    let made = store.create_agent(template).await?;
    if store.claim_chat(chat_id, made.id).await? {
        return Ok(made);
    }
    store.delete_agent(made.id).await?;
    let vanished = || StoreError::Failed(format!("chat {chat_id:?} lost its agent while claimed"));
    let agent_id = store.chat_agent(chat_id).await?.ok_or_else(vanished)?;
    store.get_agent(agent_id).await?.ok_or_else(vanished)
}

/// Producers an agent keeps the positions of. A batch that starts a producer's epoch (seq 0)
/// forgets the agent's least recently written producers past this many.
pub const PRODUCERS_PER_AGENT_MAX: u32 = 256;

/// Each agent's append-only log: gapless seqs, read by range, by run outline or by id.
#[async_trait]
pub trait EventLog: Send + Sync + 'static {
    /// The newest committed seq of the agent's log; `None` for an unknown agent.
    async fn head_seq(&self, agent_id: Uuid) -> StoreResult<Option<u64>>;
    /// Events with `seq > since`, in seq order, at most `limit`.
    async fn read_events(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
    ) -> StoreResult<Vec<AgentEvent>>;
    /// The same events as [`EventLog::read_events`], as the JSON clients receive. A store that
    /// keeps the JSON pieces as text (SQLite) writes it straight from the row, with no tree in
    /// between.
    async fn read_events_json(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
    ) -> StoreResult<Vec<EventJson>> {
        let events = self.read_events(agent_id, since, limit).await?;
        Ok(events.iter().map(EventJson::of).collect())
    }
    /// The same events' JSON as one page ([`JsonPage`]), with `room` bytes at its front for the
    /// head of the frame it will be sent in. A store that reads rows itself (SQLite) writes the
    /// page straight from them; any other makes it from [`EventLog::read_events_json`].
    async fn read_events_page(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
        room: usize,
    ) -> StoreResult<JsonPage> {
        let events = self.read_events_json(agent_id, since, limit).await?;
        Ok(JsonPage::from_events(room, &events))
    }
    /// The `content` of the same events, as JSON text in one page, for reads that serve it as it
    /// is (the Durable Streams surface). SQLite copies it straight from the rows.
    async fn read_contents(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
    ) -> StoreResult<ContentPage> {
        let events = self.read_events(agent_id, since, limit).await?;
        let mut page = ContentPage::with_capacity(events.len(), 0);
        for event in &events {
            let stream_message = event.kind == app::EventKind::StreamMessage;
            page.push(event.seq, stream_message, &content_column(event));
        }
        Ok(page)
    }
    /// The lifecycle and usage events of one run (`run_started`, `usage`, the run's end), in seq
    /// order; empty for an unknown run. Reads the run index, not the agent's whole log.
    async fn run_outline(&self, run_id: Uuid) -> StoreResult<Vec<AgentEvent>>;
    /// The run's `run_started` event (from its outline); `None` for a run not started (yet).
    async fn run_start(&self, run_id: Uuid) -> StoreResult<Option<AgentEvent>> {
        let outline = self.run_outline(run_id).await?;
        Ok(outline.into_iter().find(|event| event.kind == app::EventKind::RunStarted))
    }
    /// The `run_started` events of runs with no terminal event and no live process executing
    /// them: cut off by a crash. (With one process, every run without an end at start-up; with
    /// PostgreSQL, the runs whose lease ran out.)
    async fn unfinished_runs(&self) -> StoreResult<Vec<AgentEvent>>;
    /// Approval requests with no answer and no result yet, oldest first, `limit` at most (the
    /// open-approvals table, kept by each append).
    async fn open_approvals(&self, limit: u32) -> StoreResult<Vec<OpenApproval>>;
    /// One approval request (or client tool's call) of the agent that waits for its answer, if
    /// any: while one waits, no new run starts on the agent (ours or a producer's).
    async fn waiting_call(&self, agent_id: Uuid) -> StoreResult<Option<String>>;
    /// Open approval requests that are `due` (see [`DueApprovals`]), earliest deadline first,
    /// each with its timeout in milliseconds. Selected by deadline in the query, so requests
    /// that never time out cannot fill the page.
    async fn due_approvals(&self, due: DueApprovals) -> StoreResult<Vec<(OpenApproval, u64)>>;
    /// The events with these ids, in any order (those not in the log are left out).
    async fn events_by_id(&self, ids: &[Uuid]) -> StoreResult<Vec<AgentEvent>>;
    /// Commits every batch in one transaction, assigning each agent's next seqs in batch order.
    /// All or nothing: an unknown agent fails the whole call and writes nothing.
    async fn append(&self, batches: &[AppendBatch]) -> StoreResult<Vec<Vec<AgentEvent>>>;
    /// Where the writer may send a group while the one before it still commits, for a store that
    /// commits groups one after another in the order they were sent (SQLite); `None` (the
    /// default) where groups could overtake one another, as on a pool of connections.
    fn pipeline(&self) -> Option<&dyn super::pipeline::AppendPipeline> {
        None
    }
    /// An external producer's position on an agent: the last batch it committed (see
    /// [`ProducerStamp`]), or `None` for a producer that never committed one.
    async fn producer_position(
        &self,
        agent_id: Uuid,
        producer_id: &str,
    ) -> StoreResult<Option<ProducerPosition>>;
    /// The database's size on disk, when the store can tell it without touching the disk
    /// itself (PostgreSQL; SQLite's file is measured where it lies).
    async fn database_bytes(&self) -> StoreResult<Option<u64>> {
        Ok(None)
    }
    /// Events committed but not yet moved into the log's own index, when the store keeps such
    /// a backlog (SQLite's `recent`: appends are refused when it is full, which it becomes only
    /// while moving keeps failing). Read from memory.
    fn backlog_rows(&self) -> Option<u64> {
        None
    }
    /// The agent's saved snapshot, if any. (A store that keeps none answers `None`.)
    async fn load_snapshot(&self, _agent_id: Uuid) -> StoreResult<Option<StoredSnapshot>> {
        Ok(None)
    }
    /// Saves the agent's snapshot unless one of a later seq is saved already (one of the same
    /// seq is replaced: it may be one the log disagreed with).
    async fn save_snapshot(&self, _agent_id: Uuid, _snapshot: &StoredSnapshot) -> StoreResult<()> {
        Ok(())
    }
}

/// Which open approval requests [`EventLog::due_approvals`] looks for: those whose timeout has
/// passed at `now`, `limit` at most after skipping `offset`. A request's timeout is its agent's
/// `metadata.approval_timeout_ms` (0: never), else `server_timeout_ms` (`None`: never), at most
/// `timeout_ms_max`.
#[derive(Clone, Copy, Debug)]
pub struct DueApprovals {
    pub now: DateTime<Utc>,
    pub server_timeout_ms: Option<u64>,
    pub timeout_ms_max: u64,
    pub limit: u32,
    pub offset: u32,
}

/// An approval request nobody has answered (see [`EventLog::open_approvals`]).
#[derive(Clone, Debug, PartialEq)]
pub struct OpenApproval {
    pub agent_id: Uuid,
    pub tool_call_id: String,
    /// The `approval_requested` event's time: its timeout counts from here.
    pub requested_at: DateTime<Utc>,
}

/// Idempotency keys: one run per key and agent, kept until the run has started for good.
#[async_trait]
pub trait RunKeys: Send + Sync + 'static {
    /// Claims `key` for `run_id` unless the agent already used it: returns the run that holds the
    /// key (`run_id` when this call claimed it).
    async fn claim_run_key(&self, agent_id: Uuid, key: &str, run_id: Uuid) -> StoreResult<Uuid>;
    /// Gives a key back (its run never started).
    async fn release_run_key(&self, agent_id: Uuid, key: &str) -> StoreResult<()>;
    /// Gives back the idempotency keys (and, with PostgreSQL, the run slots) whose run never
    /// wrote `run_started`: its request died between claiming and starting. Returns how many.
    async fn release_unstarted_run_keys(&self) -> StoreResult<u64>;
}

/// How processes sharing a database keep track of each other's runs.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// A run's owner must renew its lease within this long, or the run counts as lost with its
    /// process and is ended (interrupted) by another.
    pub run_lease_ms: u64,
    /// Connections of this process to the database.
    pub pool_connections_max: u32,
}

impl Default for ClusterOptions {
    fn default() -> ClusterOptions {
        ClusterOptions {
            run_lease_ms: RUN_LEASE_MS_DEFAULT,
            pool_connections_max: PG_POOL_CONNECTIONS_MAX_DEFAULT,
        }
    }
}

/// The kinds of a run's outline (its start, usage and end), as SQL. The partial index
/// `events_run_outline` holds just these rows; a query by `run_id` must carry
/// `kind IN` this text, character for character, or SQLite will not use the index (it matches a
/// partial index's condition by comparing expressions) and scans the log.
pub const RUN_OUTLINE_KINDS: &str =
    "('run_started', 'usage', 'run_completed', 'run_failed', 'run_cancelled')";

/// What a process learns from the others through the database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// Some process committed `first_seq..=last_seq` of the agent's log.
    Committed { agent_id: Uuid, first_seq: u64, last_seq: u64 },
    /// Someone asked to cancel this run, wherever it executes.
    Cancel { agent_id: Uuid, run_id: Uuid },
}

/// A connection that receives [`Notice`]s. Notices sent while it is not connected are lost:
/// whoever holds it catches up from the log after reconnecting.
#[async_trait]
pub trait Notices: Send {
    /// The next notice. An error means the connection is gone: drop this and listen anew.
    async fn next(&mut self) -> StoreResult<Notice>;
    /// Checks the connection is alive (a quiet connection may be a dead one).
    async fn ping(&mut self) -> StoreResult<()>;
}

/// Coordination between server processes that share one database (see the module docs).
#[async_trait]
pub trait ClusterStore: Send + Sync + 'static {
    /// This process's id: the owner recorded on the runs it executes.
    fn node_id(&self) -> Uuid;
    /// How long a lease lasts without renewal.
    fn run_lease_ms(&self) -> u64;
    /// Takes the agent's one run slot for `run_id`, owned by this process. `Some(run)` when
    /// another run holds it (on any process).
    async fn claim_agent_run(&self, agent_id: Uuid, run_id: Uuid) -> StoreResult<Option<Uuid>>;
    /// Gives the slot back (the run never started).
    async fn release_agent_run(&self, agent_id: Uuid, run_id: Uuid) -> StoreResult<()>;
    /// Makes this process the owner of the agent's run `run_id` (an external producer's run
    /// whose next batch reached this process). `Some(run)` when the run no longer holds the
    /// agent: another run does (or none, `run_id` itself, when it ended).
    async fn adopt_agent_run(&self, agent_id: Uuid, run_id: Uuid) -> StoreResult<Option<Uuid>>;
    /// The run executing for the agent, on whichever process.
    async fn active_run(&self, agent_id: Uuid) -> StoreResult<Option<Uuid>>;
    /// Extends the leases of this process's runs `run_ids`.
    async fn renew_leases(&self, run_ids: &[Uuid]) -> StoreResult<()>;
    /// Asks every process to cancel the run (the one executing it does).
    async fn send_cancel(&self, agent_id: Uuid, run_id: Uuid) -> StoreResult<()>;
    /// A new connection that receives notices.
    async fn listen(&self) -> StoreResult<Box<dyn Notices>>;
}
