//! The real SQLite store with hooks at its boundary: the seam where tests inject faults
//! (failed or slow appends, lost commit answers, failed reads) and observe commits.

use agentstream_server::store::sqlite::SqliteStore;
use agentstream_server::store::{
    Agents, AppendBatch, BranchDeletion, Branches, EventJson, EventLog, NewAgent, OpenApproval,
    RunKeys, StoreError, StreamRow, Streams,
};
use app::protocol::Agent;
use app::AgentEvent;
use async_trait::async_trait;
use uuid::Uuid;

/// Which log read a [`Hooks::before_read`] is asked about.
#[derive(Clone, Copy, Debug)]
pub enum Read {
    Head,
    Log,
    ById,
}

/// What a test does at the store's boundary. Each hook's default lets the call through.
#[async_trait]
pub trait Hooks: Send + Sync + 'static {
    /// Before a log read (head, catch-up page, look-up by id); an error fails the read.
    fn before_read(&self, _read: Read) -> Result<(), StoreError> {
        Ok(())
    }
    /// Before an append reaches the database; an error fails it before anything commits.
    async fn before_append(&self, _batches: &[AppendBatch]) -> Result<(), StoreError> {
        Ok(())
    }
    /// After an append committed; an error is what the caller hears instead of the commit's
    /// answer (as when a connection breaks after COMMIT).
    fn after_commit(&self, _batches: &[AppendBatch]) -> Result<(), StoreError> {
        Ok(())
    }
}

pub struct HookedStore<H> {
    pub inner: SqliteStore,
    pub hooks: H,
}

#[async_trait]
impl<H: Hooks> Agents for HookedStore<H> {
    async fn create_agent(&self, agent: NewAgent) -> Result<Agent, StoreError> {
        self.inner.create_agent(agent).await
    }
    async fn list_agents(&self, owner: Option<&str>, limit: u32) -> Result<Vec<Agent>, StoreError> {
        self.inner.list_agents(owner, limit).await
    }
    async fn get_agent(&self, agent_id: Uuid) -> Result<Option<Agent>, StoreError> {
        self.inner.get_agent(agent_id).await
    }
    async fn delete_agent(&self, agent_id: Uuid) -> Result<bool, StoreError> {
        self.inner.delete_agent(agent_id).await
    }
    async fn chat_agent(&self, chat_id: &str) -> Result<Option<Uuid>, StoreError> {
        self.inner.chat_agent(chat_id).await
    }
    async fn claim_chat(&self, chat_id: &str, agent_id: Uuid) -> Result<bool, StoreError> {
        self.inner.claim_chat(chat_id, agent_id).await
    }
}

#[async_trait]
impl<H: Hooks> Branches for HookedStore<H> {
    async fn fork_origin(&self, log: Uuid) -> Result<Option<(Uuid, u64)>, StoreError> {
        self.inner.fork_origin(log).await
    }
    async fn insert_branch(
        &self,
        source: &Agent,
        root: Uuid,
        fork_seq: u64,
    ) -> Result<Option<Agent>, StoreError> {
        self.inner.insert_branch(source, root, fork_seq).await
    }
    async fn list_branches(&self, root: Uuid) -> Result<Vec<Agent>, StoreError> {
        self.inner.list_branches(root).await
    }
    async fn set_current_branch(
        &self,
        root: Uuid,
        branch: Option<Uuid>,
    ) -> Result<bool, StoreError> {
        self.inner.set_current_branch(root, branch).await
    }
    async fn delete_branch(&self, branch: Uuid) -> Result<BranchDeletion, StoreError> {
        self.inner.delete_branch(branch).await
    }
}

#[async_trait]
impl<H: Hooks> EventLog for HookedStore<H> {
    async fn head_seq(&self, agent_id: Uuid) -> Result<Option<u64>, StoreError> {
        self.hooks.before_read(Read::Head)?;
        self.inner.head_seq(agent_id).await
    }
    async fn read_events(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
    ) -> Result<Vec<AgentEvent>, StoreError> {
        self.hooks.before_read(Read::Log)?;
        self.inner.read_events(agent_id, since, limit).await
    }
    async fn read_events_json(
        &self,
        agent_id: Uuid,
        since: u64,
        limit: u32,
    ) -> Result<Vec<EventJson>, StoreError> {
        self.hooks.before_read(Read::Log)?;
        self.inner.read_events_json(agent_id, since, limit).await
    }
    async fn run_outline(&self, run_id: Uuid) -> Result<Vec<AgentEvent>, StoreError> {
        self.inner.run_outline(run_id).await
    }
    async fn unfinished_runs(&self) -> Result<Vec<AgentEvent>, StoreError> {
        self.inner.unfinished_runs().await
    }
    async fn producer_position(
        &self,
        agent_id: Uuid,
        producer_id: &str,
    ) -> Result<Option<agentstream_server::store::ProducerPosition>, StoreError> {
        self.inner.producer_position(agent_id, producer_id).await
    }
    async fn waiting_call(&self, agent_id: Uuid) -> Result<Option<String>, StoreError> {
        self.inner.waiting_call(agent_id).await
    }
    async fn due_approvals(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        server_timeout_ms: Option<u64>,
        timeout_ms_max: u64,
        limit: u32,
        offset: u32,
    ) -> Result<Vec<(agentstream_server::store::OpenApproval, u64)>, StoreError> {
        self.inner
            .due_approvals(now, server_timeout_ms, timeout_ms_max, limit, offset)
            .await
    }
    async fn open_approvals(&self, limit: u32) -> Result<Vec<OpenApproval>, StoreError> {
        self.inner.open_approvals(limit).await
    }
    async fn events_by_id(&self, ids: &[Uuid]) -> Result<Vec<AgentEvent>, StoreError> {
        self.hooks.before_read(Read::ById)?;
        self.inner.events_by_id(ids).await
    }
    async fn append(&self, batches: &[AppendBatch]) -> Result<Vec<Vec<AgentEvent>>, StoreError> {
        self.hooks.before_append(batches).await?;
        let committed = self.inner.append(batches).await?;
        self.hooks.after_commit(batches)?;
        Ok(committed)
    }
}

#[async_trait]
impl<H: Hooks> RunKeys for HookedStore<H> {
    async fn claim_run_key(
        &self,
        agent_id: Uuid,
        key: &str,
        run_id: Uuid,
    ) -> Result<Uuid, StoreError> {
        self.inner.claim_run_key(agent_id, key, run_id).await
    }
    async fn release_run_key(&self, agent_id: Uuid, key: &str) -> Result<(), StoreError> {
        self.inner.release_run_key(agent_id, key).await
    }
    async fn release_unstarted_run_keys(&self) -> Result<u64, StoreError> {
        self.inner.release_unstarted_run_keys().await
    }
}

#[async_trait]
impl<H: Hooks> Streams for HookedStore<H> {
    async fn stream(&self, path: &str) -> Result<Option<StreamRow>, StoreError> {
        self.inner.stream(path).await
    }
    async fn insert_stream(&self, row: &StreamRow) -> Result<bool, StoreError> {
        self.inner.insert_stream(row).await
    }
    async fn update_stream(&self, row: &StreamRow) -> Result<(), StoreError> {
        self.inner.update_stream(row).await
    }
    async fn touch_stream(&self, path: &str, log_id: Uuid, at_ms: i64) -> Result<(), StoreError> {
        self.inner.touch_stream(path, log_id, at_ms).await
    }
    async fn soft_delete_stream(&self, path: &str, log_id: Uuid) -> Result<(), StoreError> {
        self.inner.soft_delete_stream(path, log_id).await
    }
    async fn delete_stream(&self, path: &str) -> Result<bool, StoreError> {
        self.inner.delete_stream(path).await
    }
    async fn forks_of(&self, path: &str) -> Result<u64, StoreError> {
        self.inner.forks_of(path).await
    }
}
