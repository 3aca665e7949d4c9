//! The run registry: which agent runs what, starting runs and cancelling them. One run per
//! agent at a time, [`ACTIVE_RUNS_MAX`] across all agents; the registry entry is the lock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use app::protocol::Agent;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::failure::end_after_store_failure;
use super::run::Run;
use super::tools::TOOL_RESULT_CHARS_MAX;
use crate::delivery::writer::Writer;
use crate::provider::{ConversationMessage, Provider, ProviderRequest};
use crate::tools::Tool;

/// Runs in flight across all agents. Each holds a provider stream and a task; past this, new runs
/// are refused with 503 rather than degrade every run already going.
pub const ACTIVE_RUNS_MAX: usize = 256;
/// LLM calls one run makes at most (LLM → tools → LLM …) unless configured otherwise; a model
/// that keeps asking for tools ends with stop reason `max_iterations`.
pub const RUN_ITERATIONS_MAX_DEFAULT: u32 = 10;
/// Events one run may write unless configured otherwise: far beyond any real reply (a 20 000-token
/// answer is about 20 000 events), low enough that a runaway model cannot fill the disk.
pub const RUN_EVENTS_MAX_DEFAULT: u64 = 100_000;

/// The per-run bounds of `config::Limits`.
#[derive(Clone, Copy, Debug)]
pub struct RunLimits {
    /// Past this, the run stops its model and tools and ends with stop reason `max_events`; the
    /// events that close it (results for open tool calls, the end) are still written.
    pub events_max: u64,
    pub tool_result_chars_max: usize,
}

impl Default for RunLimits {
    fn default() -> RunLimits {
        RunLimits {
            events_max: RUN_EVENTS_MAX_DEFAULT,
            tool_result_chars_max: TOOL_RESULT_CHARS_MAX,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartRunError {
    #[error("provider {0:?} is not configured on this server (available: {1})")]
    UnknownProvider(String, String),
    #[error("agent {agent_id} is already running run {run_id}")]
    RunInProgress { agent_id: Uuid, run_id: Uuid },
    #[error("{ACTIVE_RUNS_MAX} runs are in progress; try again shortly")]
    TooManyRuns,
}

struct ActiveRun {
    run_id: Uuid,
    cancel: CancellationToken,
    /// Turns true when the run's task has written its last event.
    finished: watch::Receiver<bool>,
    /// True once the run has begun writing its end (see [`RUN_ENDING_WAIT_MS_MAX`]).
    ending: Arc<AtomicBool>,
}

/// A cancellation that was requested: the run, and a way to wait until it has ended.
pub struct Cancelling {
    pub run_id: Uuid,
    finished: watch::Receiver<bool>,
}

impl Cancelling {
    /// Waits until the run has written its last event, at most `wait`. True when it has.
    pub async fn ended_within(mut self, wait: std::time::Duration) -> bool {
        tokio::time::timeout(wait, self.finished.wait_for(|finished| *finished))
            .await
            .is_ok_and(|result| result.is_ok())
    }
}

/// The providers a server offers: the default, and others agents may choose by name in their
/// `metadata.provider`.
#[derive(Clone)]
pub struct Providers {
    pub default: Arc<dyn Provider>,
    pub by_name: HashMap<&'static str, Arc<dyn Provider>>,
}

impl Providers {
    /// The provider an agent uses: its `metadata.provider`, or the server's default.
    pub fn for_agent(&self, agent: &Agent) -> Result<Arc<dyn Provider>, StartRunError> {
        match agent
            .metadata
            .get("provider")
            .and_then(serde_json::Value::as_str)
        {
            None => Ok(self.default.clone()),
            Some(name) => self.by_name.get(name).cloned().ok_or_else(|| {
                let mut names: Vec<_> = self.by_name.keys().copied().collect();
                names.sort_unstable();
                StartRunError::UnknownProvider(name.to_owned(), names.join(", "))
            }),
        }
    }
}

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
}

/// Starts and tracks runs. One run per agent at a time.
pub struct Runs {
    writer: Writer,
    /// Read when a run must be ended from what the log holds of it.
    store: Arc<dyn crate::store::Store>,
    providers: Providers,
    tools: Arc<Vec<Box<dyn Tool>>>,
    iterations_max: u32,
    limits: RunLimits,
    active: Arc<Mutex<HashMap<Uuid, ActiveRun>>>,
}

impl Runs {
    pub fn new(
        writer: Writer,
        store: Arc<dyn crate::store::Store>,
        providers: Providers,
        tools: Vec<Box<dyn Tool>>,
        iterations_max: u32,
        limits: RunLimits,
    ) -> Runs {
        Runs {
            writer,
            store,
            providers,
            tools: Arc::new(tools),
            iterations_max: iterations_max.max(1),
            limits,
            active: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn active(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, ActiveRun>> {
        self.active
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes the agent's run slot for `run_id`: refused while another run of the agent is going
    /// or [`ACTIVE_RUNS_MAX`] are.
    fn reserve(
        &self,
        agent_id: Uuid,
        run_id: Uuid,
    ) -> Result<(CancellationToken, Arc<AtomicBool>, watch::Sender<bool>), StartRunError> {
        let mut active = self.active();
        if let Some(running) = active.get(&agent_id) {
            return Err(StartRunError::RunInProgress {
                agent_id,
                run_id: running.run_id,
            });
        }
        if active.len() >= ACTIVE_RUNS_MAX {
            return Err(StartRunError::TooManyRuns);
        }
        let cancel = CancellationToken::new();
        let (finished_sender, finished) = watch::channel(false);
        let ending = Arc::new(AtomicBool::new(false));
        active.insert(
            agent_id,
            ActiveRun {
                run_id,
                cancel: cancel.clone(),
                finished,
                ending: ending.clone(),
            },
        );
        Ok((cancel, ending, finished_sender))
    }

    /// Starts run `run_id` of `agent` for `user_message`, after the conversation `prior` (rebuilt
    /// from the log); its output goes to the log.
    pub fn start(
        &self,
        agent: &Agent,
        run_id: Uuid,
        prior: Vec<ConversationMessage>,
        user_message: String,
        options: RunOptions,
    ) -> Result<Uuid, StartRunError> {
        let provider = self.providers.for_agent(agent)?;
        let (cancel, ending, finished_sender) = self.reserve(agent.id, run_id)?;
        let request = ProviderRequest {
            system: agent.system.clone(),
            model: model_for(agent, provider.name()),
            messages: prior
                .into_iter()
                .chain([ConversationMessage::User { text: user_message }])
                .collect(),
            tools: self.tools.iter().map(|tool| tool.spec()).collect(),
        };
        let writer = self.writer.clone();
        let store = self.store.clone();
        let run = Run::new(
            agent.id,
            run_id,
            self.writer.clone(),
            provider,
            self.tools.clone(),
            cancel,
            self.limits,
            ending.clone(),
        );
        let iterations_max = options.iterations_max.map_or(self.iterations_max, |asked| {
            asked.clamp(1, self.iterations_max)
        });
        let active = self.active.clone();
        let agent_id = agent.id;
        tokio::spawn(async move {
            if let Err(error) = run.execute(request, iterations_max, options).await {
                ending.store(true, Ordering::Release);
                tracing::warn!(%agent_id, %run_id, %error, "run stopped: the log refused an event");
                end_after_store_failure(store.as_ref(), &writer, agent_id, run_id, &error).await;
            }
            release(&active, agent_id, run_id);
            let _ = finished_sender.send(true);
        });
        Ok(run_id)
    }

    /// Cancels the agent's run, if one is going and (when `run_ids` is given) it is one of them.
    /// The run stops its provider stream, commits what it produced and ends with `run_cancelled`.
    pub fn cancel(&self, agent_id: Uuid, run_ids: Option<&[Uuid]>) -> Option<Cancelling> {
        let active = self.active();
        let run = active.get(&agent_id)?;
        if run_ids.is_some_and(|run_ids| !run_ids.contains(&run.run_id)) {
            return None;
        }
        run.cancel.cancel();
        Some(Cancelling {
            run_id: run.run_id,
            finished: run.finished.clone(),
        })
    }

    /// Whether an agent's provider choice can be served.
    pub fn check_provider(&self, agent: &Agent) -> Result<(), StartRunError> {
        self.providers.for_agent(agent).map(|_| ())
    }

    /// The run in progress for `agent_id`, if any.
    pub fn active_run(&self, agent_id: Uuid) -> Option<Uuid> {
        self.active().get(&agent_id).map(|run| run.run_id)
    }

    /// The run in progress for `agent_id`, if any, once a run that is writing its end has let
    /// go of the agent (waiting [`RUN_ENDING_WAIT_MS_MAX`] at most): what a request to start the
    /// next run asks.
    pub async fn active_run_after_ending(&self, agent_id: Uuid) -> Option<Uuid> {
        let mut finished = {
            let active = self.active();
            let run = active.get(&agent_id)?;
            if !run.ending.load(Ordering::Acquire) {
                return Some(run.run_id);
            }
            run.finished.clone()
        };
        let wait = std::time::Duration::from_millis(RUN_ENDING_WAIT_MS_MAX);
        let _ = tokio::time::timeout(wait, finished.wait_for(|finished| *finished)).await;
        self.active_run(agent_id)
    }

    /// Every run this process is executing.
    pub fn active_run_ids(&self) -> Vec<Uuid> {
        self.active().values().map(|run| run.run_id).collect()
    }
}

/// How long a request to start a run waits, at most, for the agent's previous run to let go of
/// the agent once that run is writing its end. Subscribers see the end as soon as it commits,
/// before the run's task has answered and left; a client that sends the next message right then
/// waits this long rather than get `run_in_progress`. Past it, the answer is 409 as for any run.
pub const RUN_ENDING_WAIT_MS_MAX: u64 = 2_000;

/// Frees the agent's run slot if `run_id` still holds it.
fn release(active: &Mutex<HashMap<Uuid, ActiveRun>>, agent_id: Uuid, run_id: Uuid) {
    let mut active = active
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if active
        .get(&agent_id)
        .is_some_and(|run| run.run_id == run_id)
    {
        active.remove(&agent_id);
    }
}

/// The model name sent to the provider: a Letta-style handle (`anthropic/claude-…`) names the
/// provider too, and the provider is sent the model name alone.
fn model_for(agent: &Agent, provider_name: &str) -> Option<String> {
    agent.model.as_deref().map(|model| {
        model
            .strip_prefix(provider_name)
            .and_then(|rest| rest.strip_prefix('/'))
            .unwrap_or(model)
            .to_owned()
    })
}
