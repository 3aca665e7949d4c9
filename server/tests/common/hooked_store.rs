//! The real SQLite store with hooks at its boundary: the seam where tests inject faults
//! (failed or slow appends, lost commit answers, failed reads) and observe commits. Groups the
//! writer sends ahead go through the hooks too, for hooks that ask for it ([`Hooks::pipelined`]).

use agentstream_server::store::pipeline::{AppendPipeline, Link, Piped, PipedReceipt};
use agentstream_server::store::sqlite::SqliteStore;
use agentstream_server::store::{
    Agents, AppendBatch, BranchDeletion, Branches, DueApprovals, EventJson, EventLog, JsonPage,
    NewAgent, OpenApproval, ProducerPosition, RunKeys, StreamRow, Streams,
};
use agentstream_server::store::{StoreError, StoreResult};
use app::protocol::Agent;
use app::AgentEvent;
use async_trait::async_trait;
use std::time::Duration;
use tokio::sync::oneshot;
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
pub trait Hooks: Clone + Send + Sync + 'static {
    /// Before a log read (head, catch-up page, look-up by id); an error fails the read.
    fn before_read(&self, _read: Read) -> StoreResult<()> {
        Ok(())
    }
    /// Before an append reaches the database; an error fails it before anything commits.
    async fn before_append(&self, _batches: &[AppendBatch]) -> StoreResult<()> {
        Ok(())
    }
    /// After an append committed; an error is what the caller hears instead of the commit's
    /// answer (as when a connection breaks after COMMIT).
    fn after_commit(&self, _batches: &[AppendBatch]) -> StoreResult<()> {
        Ok(())
    }
    /// Whether the writer may send groups ahead through the inner store's pipeline
    /// (`store::pipeline`), with the hooks applied to them as to an append:
    /// [`Hooks::before_send`] when a group is sent, [`Hooks::after_commit`] to a committed answer.
    fn pipelined(&self) -> bool {
        false
    }
    /// Before a group is sent ahead: an error fails it unsent (the group behind it is then not
    /// tried); a delay holds back its answer (a send itself never waits).
    fn before_send(&self, _batches: &[AppendBatch]) -> StoreResult<Duration> {
        Ok(Duration::ZERO)
    }
}

pub struct HookedStore<H> {
    pub inner: SqliteStore,
    pub hooks: H,
}

/// An `impl` of one of the store's traits for [`HookedStore`] whose listed methods go to the
/// inner store (one line each: the list is the whole of what this wrapper says about them),
/// those marked `after Read::…` once [`Hooks::before_read`] lets them through; methods written
/// out follow the list.
macro_rules! forward {
    ($store_trait:ident {
        $(fn $name:ident($($arg:ident: $arg_type:ty),*) -> $out:ty $(, after $read:expr)?;)*
    } $($written:tt)*) => {
        #[async_trait]
        impl<H: Hooks> $store_trait for HookedStore<H> {
            $(async fn $name(&self, $($arg: $arg_type),*) -> StoreResult<$out> {
                $(self.hooks.before_read($read)?;)?
                self.inner.$name($($arg),*).await
            })*
            $($written)*
        }
    };
}

forward!(Agents {
    fn create_agent(agent: NewAgent) -> Agent;
    fn list_agents(owner: Option<&str>, limit: u32) -> Vec<Agent>;
    fn get_agent(agent_id: Uuid) -> Option<Agent>;
    fn delete_agent(agent_id: Uuid) -> bool;
    fn chat_agent(chat_id: &str) -> Option<Uuid>;
    fn claim_chat(chat_id: &str, agent_id: Uuid) -> bool;
});

forward!(Branches {
    fn fork_origin(log: Uuid) -> Option<(Uuid, u64)>;
    fn insert_branch(source: &Agent, root: Uuid, fork_seq: u64) -> Option<Agent>;
    fn list_branches(root: Uuid) -> Vec<Agent>;
    fn set_current_branch(root: Uuid, branch: Option<Uuid>) -> bool;
    fn delete_branch(branch: Uuid) -> BranchDeletion;
});

forward!(RunKeys {
    fn claim_run_key(agent_id: Uuid, key: &str, run_id: Uuid) -> Uuid;
    fn release_run_key(agent_id: Uuid, key: &str) -> ();
    fn release_unstarted_run_keys() -> u64;
});

forward!(Streams {
    fn stream(path: &str) -> Option<StreamRow>;
    fn insert_stream(row: &StreamRow) -> bool;
    fn update_stream(row: &StreamRow) -> ();
    fn touch_stream(path: &str, log_id: Uuid, at_ms: i64) -> ();
    fn soft_delete_stream(path: &str, log_id: Uuid) -> ();
    fn delete_stream(path: &str) -> bool;
    fn forks_of(path: &str) -> u64;
});

forward!(EventLog {
    fn head_seq(agent_id: Uuid) -> Option<u64>, after Read::Head;
    fn read_events(agent_id: Uuid, since: u64, limit: u32) -> Vec<AgentEvent>, after Read::Log;
    fn read_events_json(agent_id: Uuid, since: u64, limit: u32) -> Vec<EventJson>, after Read::Log;
    fn read_events_page(agent_id: Uuid, since: u64, limit: u32, room: usize) -> JsonPage, after Read::Log;
    fn events_by_id(ids: &[Uuid]) -> Vec<AgentEvent>, after Read::ById;
    fn run_outline(run_id: Uuid) -> Vec<AgentEvent>;
    fn unfinished_runs() -> Vec<AgentEvent>;
    fn producer_position(agent_id: Uuid, producer_id: &str) -> Option<ProducerPosition>;
    fn waiting_call(agent_id: Uuid) -> Option<String>;
    fn due_approvals(due: DueApprovals) -> Vec<(OpenApproval, u64)>;
    fn open_approvals(limit: u32) -> Vec<OpenApproval>;
}
    async fn append(&self, batches: &[AppendBatch]) -> StoreResult<Vec<Vec<AgentEvent>>> {
        self.hooks.before_append(batches).await?;
        let committed = self.inner.append(batches).await?;
        self.hooks.after_commit(batches)?;
        Ok(committed)
    }
    fn pipeline(&self) -> Option<&dyn AppendPipeline> {
        self.hooks.pipelined().then_some(self as &dyn AppendPipeline)
    }
);

impl<H: Hooks> AppendPipeline for HookedStore<H> {
    fn send(&self, batches: Vec<AppendBatch>, link: Link) -> PipedReceipt {
        let (answer, receipt) = oneshot::channel();
        let stopped = || StoreError::Unavailable("the append thread has stopped".into());
        let (delay, pipeline) = match (self.hooks.before_send(&batches), self.inner.pipeline()) {
            (Ok(delay), Some(pipeline)) => (delay, pipeline),
            (Err(error), _) => {
                let _ = answer.send(Piped::Failed(error, batches));
                return receipt;
            }
            (Ok(_), None) => {
                let _ = answer.send(Piped::Failed(stopped(), batches));
                return receipt;
            }
        };
        let sent = pipeline.send(batches.clone(), link);
        let hooks = self.hooks.clone();
        tokio::spawn(async move {
            let piped = match sent.await {
                Ok(Piped::Committed(committed)) => match hooks.after_commit(&batches) {
                    Ok(()) => Piped::Committed(committed),
                    Err(error) => Piped::Failed(error, batches),
                },
                Ok(other) => other,
                Err(_) => Piped::Failed(stopped(), batches),
            };
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let _ = answer.send(piped);
        });
        receipt
    }
}
