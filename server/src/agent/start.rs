//! Starting a run: the use case every surface calls (the native REST API, Letta's, the page
//! form). It checks the message, honours an idempotency key, takes the agent's one run slot
//! (in the database too, with several servers), rebuilds the conversation from the log and
//! hands the run to the registry.

pub use super::start_error::StartError;
use std::sync::Arc;

use app::EventKind;
use uuid::Uuid;

use super::approval::{answer_from_timeline, ApprovalDecision};
use super::conversation::{conversation_awaiting, conversation_from_timeline};
use super::history::{fold_log, Snapshots};
use super::registry::{RunOptions, Runs, StartRunError, Turn};
use crate::limits::APPROVALS_PER_ANSWER_MAX;
use crate::limits::{
    CLIENT_IDEMPOTENCY_KEY_CHARS_MAX, IDEMPOTENCY_KEY_CHARS_MAX, RUN_CONTENT_BYTES_MAX,
};
use crate::store::{ClusterStore, Store, StoreError};

/// The native API's keys are stored under this prefix, apart from every other surface's and
/// from the approvals' own (`approval:<call id>`): a client's key can never pre-claim another's.
pub const NATIVE_KEY_PREFIX: &str = "native:";
const _: () = assert!(
    NATIVE_KEY_PREFIX.len() + CLIENT_IDEMPOTENCY_KEY_CHARS_MAX <= IDEMPOTENCY_KEY_CHARS_MAX
);

/// What a request asks a run to answer.
enum Asked {
    Message(String),
    Approval(Vec<ApprovalDecision>),
}

/// A run that a request started, or found when it was a retry.
#[derive(Clone, Copy, Debug)]
pub struct StartedRun {
    pub run_id: Uuid,
    /// The seq of the log's head just before this request started the run: every event of the
    /// run has a greater seq. `None` when the request was a retry and found an earlier run.
    pub after_seq: Option<u64>,
}

/// What starting a run needs, and nothing else. Cheap to clone.
#[derive(Clone)]
pub struct Starter {
    pub store: Arc<dyn Store>,
    pub runs: Arc<Runs>,
    /// With PostgreSQL: where the agent's one run slot is taken across servers.
    pub cluster: Option<Arc<dyn ClusterStore>>,
    /// Folded timelines of recently read logs (the next turn's conversation starts there).
    pub snapshots: Arc<Snapshots>,
}

impl Starter {
    /// Starts a run of `agent_id` for the user message `content`. With an idempotency `key`, a
    /// retry of the same request starts nothing and gets the first request's run back.
    pub async fn start_run(
        &self,
        agent_id: Uuid,
        content: String,
        key: Option<&str>,
        options: RunOptions,
    ) -> Result<StartedRun, StartError> {
        if content.trim().is_empty() {
            return Err(StartError::EmptyContent);
        }
        if content.len() > RUN_CONTENT_BYTES_MAX {
            return Err(StartError::ContentTooLarge);
        }
        let agent = self.agent_for(agent_id, &options).await?;
        // v7 (time-ordered) like event ids: the run index grows at its end.
        let run_id = options.run_id.unwrap_or_else(Uuid::now_v7);
        let key = key.map(str::trim).filter(|key| !key.is_empty());
        if let Some(key) = key {
            if key.chars().count() > IDEMPOTENCY_KEY_CHARS_MAX {
                return Err(StartError::KeyTooLong);
            }
            let holder = self.store.claim_run_key(agent_id, key, run_id).await?;
            if holder != run_id {
                // A retry: the first request's run, started or finished, is the answer, if it
                // was asked the same thing.
                if self.message_of(agent_id, holder).await?.is_some_and(|first| first != content) {
                    return Err(StartError::KeyReused { run_id: holder });
                }
                return Ok(StartedRun { run_id: holder, after_seq: None });
            }
        }
        match self.start_claimed(&agent, run_id, Asked::Message(content), options).await {
            Ok(after_seq) => Ok(StartedRun { run_id, after_seq: Some(after_seq) }),
            Err(error) => {
                if let Some(key) = key {
                    // The run never started: a retry with this key may try again.
                    self.store.release_run_key(agent_id, key).await?;
                }
                Err(error)
            }
        }
    }

    /// Starts the run that carries out a person's answer to an approval request.
    pub async fn answer_approval(
        &self,
        agent_id: Uuid,
        decision: ApprovalDecision,
        options: RunOptions,
    ) -> Result<StartedRun, StartError> {
        self.answer_approvals(agent_id, vec![decision], options).await
    }

    /// Starts the run that carries out a person's answers to one or more approval requests.
    /// Exactly one answer per request: each answer's key is claimed first (atomically, in the
    /// store), and a request that is not pending in the log is refused. All or nothing: a
    /// refused answer leaves every request as it was.
    pub async fn answer_approvals(
        &self,
        agent_id: Uuid,
        decisions: Vec<ApprovalDecision>,
        options: RunOptions,
    ) -> Result<StartedRun, StartError> {
        if decisions.is_empty() || decisions.len() > APPROVALS_PER_ANSWER_MAX {
            return Err(StartError::BadApproval(format!(
                "answer 1 to {APPROVALS_PER_ANSWER_MAX} approval requests at once"
            )));
        }
        for decision in &decisions {
            decision.check()?;
        }
        let agent = self.agent_for(agent_id, &options).await?;
        let run_id = options.run_id.unwrap_or_else(Uuid::now_v7);
        let mut claimed: Vec<String> = Vec::with_capacity(decisions.len());
        let mut refusal = None;
        for decision in &decisions {
            let key = decision.key();
            let holder = self.store.claim_run_key(agent_id, &key, run_id).await?;
            if holder == run_id {
                claimed.push(key);
            } else {
                refusal = Some(StartError::AlreadyAnswered {
                    tool_call_id: decision.tool_call_id.trim().to_owned(),
                    answer: format!("run {holder} carries out the first answer"),
                });
                break;
            }
        }
        let started = match refusal {
            Some(refusal) => Err(refusal),
            None => self.start_claimed(&agent, run_id, Asked::Approval(decisions), options).await,
        };
        match started {
            Ok(after_seq) => Ok(StartedRun { run_id, after_seq: Some(after_seq) }),
            Err(error) => {
                // Nothing was written: the requests are as they were, and may be answered again.
                for key in claimed {
                    self.store.release_run_key(agent_id, &key).await?;
                }
                Err(error)
            }
        }
    }

    /// The agent a run starts on, once the run's client tools are known to be usable.
    async fn agent_for(
        &self,
        agent_id: Uuid,
        options: &RunOptions,
    ) -> Result<app::protocol::Agent, StartError> {
        self.check_client_tools(options)?;
        self.store.get_agent(agent_id).await?.ok_or(StartError::UnknownAgent(agent_id))
    }

    fn check_client_tools(&self, options: &RunOptions) -> Result<(), StartError> {
        let builtins = self.runs.builtin_names();
        super::client_tools::check_names(&options.client_tools, builtins.iter().map(String::as_str))
            .map_err(StartError::BadClientTools)
    }

    /// The client tools run `run_id` was given (its `run_started` keeps them).
    async fn client_tools_of(
        &self,
        run_id: Uuid,
    ) -> Result<Vec<crate::provider::ToolSpec>, StoreError> {
        let started = self.store.run_start(run_id).await?;
        Ok(started
            .map(|started| super::client_tools::from_metadata(&started.metadata))
            .unwrap_or_default())
    }

    /// The user message run `run_id` answers, once its start is in the log (`None` before).
    async fn message_of(&self, agent_id: Uuid, run_id: Uuid) -> Result<Option<String>, StoreError> {
        let Some(started) = self.store.run_start(run_id).await? else {
            return Ok(None);
        };
        // The user message comes right after `run_started`.
        let opening = self.store.read_events(agent_id, started.seq, 1).await?;
        Ok(opening
            .iter()
            .find(|event| event.kind == EventKind::User && event.run_id == Some(run_id))
            .and_then(|event| event.content.get("text"))
            .and_then(|text| text.as_str())
            .map(str::to_owned))
    }

    /// Starts the run; returns the head seq just before it (one run per agent: nothing else
    /// writes to this log until the run ends).
    async fn start_claimed(
        &self,
        agent: &app::protocol::Agent,
        run_id: Uuid,
        asked: Asked,
        mut options: RunOptions,
    ) -> Result<u64, StartError> {
        let agent_id = agent.id;
        if let Some(running) = self.runs.active_run_after_ending(agent_id).await {
            return Err(StartRunError::RunInProgress { agent_id, run_id: running }.into());
        }
        // With several servers on one database, the agent's one run slot is taken in the
        // database (this server owns the run; the slot goes with the run's terminal event).
        if let Some(cluster) = &self.cluster {
            if let Some(running) = cluster.claim_agent_run(agent_id, run_id).await? {
                return Err(StartRunError::RunInProgress { agent_id, run_id: running }.into());
            }
        }
        let started = async {
            // The model sees the conversation so far, rebuilt from the log by the shared reducer.
            let timeline = fold_log(self.store.as_ref(), &self.snapshots, agent_id).await?;
            let ((prior, warnings), turn) = match asked {
                Asked::Message(content) => {
                    if let Some(waiting) = app::approvals::pending(&timeline).first() {
                        let tool_call_id = waiting.tool_call_id.to_owned();
                        return Err(if waiting.client {
                            StartError::ClientToolPending { tool_call_id }
                        } else {
                            StartError::ApprovalPending { tool_call_id }
                        });
                    }
                    (conversation_from_timeline(&timeline), Turn::User(content))
                }
                Asked::Approval(decisions) => {
                    let turn =
                        answer_from_timeline(&timeline, &decisions, options.answered_by_server)?;
                    if options.client_tools.is_empty() {
                        if let Some(asked_by) = turn.asked_by {
                            options.client_tools = self.client_tools_of(asked_by).await?;
                        }
                    }
                    let awaited: Vec<&str> =
                        turn.answers.iter().map(|answer| answer.call.call_id.as_str()).collect();
                    let prior = conversation_awaiting(&timeline, &awaited);
                    (prior, Turn::Approval(turn))
                }
            };
            for warning in warnings {
                tracing::warn!(%agent_id, "history for the next turn: {warning}");
            }
            // The fold read the whole log: its last seq is the head the run's events come after.
            let head_seq = timeline.last_seq();
            self.runs.start(agent, run_id, prior, turn, options)?;
            Ok::<u64, StartError>(head_seq)
        }
        .await;
        if let (Err(_), Some(cluster)) = (&started, &self.cluster) {
            // The run never started: free the slot now rather than when its lease runs out.
            if let Err(error) = cluster.release_agent_run(agent_id, run_id).await {
                tracing::warn!(%agent_id, %run_id, %error, "could not free the run slot");
            }
        }
        started
    }
}
