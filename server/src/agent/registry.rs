//! The run registry: which agent runs what, starting runs and cancelling them. One run per
//! agent at a time, [`ACTIVE_RUNS_MAX`] across all agents; the registry entry is the lock.

use slot::ActiveRun;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use app::protocol::Agent;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use serde_json::{json, Value};

use super::failure::end_from_log;
use super::run::Run;
pub use limits::{RunLimits, StartRunError, ACTIVE_RUNS_MAX};
pub use options::{RunOptions, Turn};
use providers::model_for;
pub use providers::Providers;
pub use slot::ProducedSlot;
use slot::Slot;

mod limits;
mod options;
mod providers;
mod slot;
use crate::delivery::writer::Writer;
use crate::provider::{ConversationMessage, ProviderRequest};
use crate::tools::Tool;

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

impl Runs {
    /// The names of the tools every agent has (a client tool may not take one).
    pub fn builtin_names(&self) -> Vec<String> {
        self.tools.iter().map(|tool| tool.spec().name).collect()
    }
}

/// Starts and tracks runs. One run per agent at a time.
pub struct Runs {
    writer: Writer,
    /// Read when a run must be ended from what the log holds of it.
    store: Arc<dyn crate::store::Store>,
    providers: Providers,
    /// The built-in tools every agent has.
    tools: Arc<Vec<Arc<dyn Tool>>>,
    /// The MCP servers an agent may name for more (`metadata.mcp_servers`).
    mcp: Arc<crate::mcp::McpHub>,
    iterations_max: u32,
    limits: RunLimits,
    active: Arc<Mutex<HashMap<Uuid, ActiveRun>>>,
    /// Where runs' spans go (nothing when tracing is off).
    telemetry: Arc<crate::telemetry::Telemetry>,
}

impl Runs {
    pub fn new(
        writer: Writer,
        store: Arc<dyn crate::store::Store>,
        providers: Providers,
        tools: Vec<Arc<dyn Tool>>,
        iterations_max: u32,
        limits: RunLimits,
    ) -> Runs {
        Runs {
            writer,
            store,
            providers,
            tools: Arc::new(tools),
            mcp: Arc::new(crate::mcp::McpHub::default()),
            iterations_max: iterations_max.max(1),
            limits,
            active: Arc::new(Mutex::new(HashMap::new())),
            telemetry: Arc::new(crate::telemetry::Telemetry::off()),
        }
    }

    /// Traces runs with `telemetry`.
    pub fn with_telemetry(mut self, telemetry: Arc<crate::telemetry::Telemetry>) -> Runs {
        self.telemetry = telemetry;
        self
    }

    /// The MCP servers agents may name for tools.
    pub fn with_mcp(mut self, mcp: Arc<crate::mcp::McpHub>) -> Runs {
        self.mcp = mcp;
        self
    }

    /// The MCP servers agents may name for tools.
    pub fn mcp(&self) -> &Arc<crate::mcp::McpHub> {
        &self.mcp
    }

    /// The tools agent `metadata` gets: the built-ins and its MCP servers' tools.
    pub async fn tools_for(&self, metadata: &Value) -> Vec<crate::mcp::VisibleTool> {
        self.mcp.tools_for(&self.tools, metadata).await
    }

    fn active(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, ActiveRun>> {
        self.active.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes the agent's run slot for `run_id`: refused while another run of the agent is going
    /// or [`ACTIVE_RUNS_MAX`] are.
    fn reserve(
        &self,
        agent_id: Uuid,
        run_id: Uuid,
        produced: bool,
    ) -> Result<Reserved, StartRunError> {
        let mut active = self.active();
        if let Some(running) = active.get(&agent_id) {
            return Err(StartRunError::RunInProgress { agent_id, run_id: running.run_id });
        }
        if active.len() >= ACTIVE_RUNS_MAX {
            return Err(StartRunError::TooManyRuns);
        }
        let cancel = CancellationToken::new();
        let (finished_sender, finished) = watch::channel(false);
        let ending = Arc::new(AtomicBool::new(false));
        let interrupted = Arc::new(AtomicBool::new(false));
        active.insert(
            agent_id,
            ActiveRun {
                run_id,
                cancel: cancel.clone(),
                finished,
                ending: ending.clone(),
                interrupted: interrupted.clone(),
                produced,
            },
        );
        Ok(Reserved { cancel, ending, interrupted, finished: finished_sender })
    }

    /// Shutdown: waits until `wait` has passed for our runs in flight to end by themselves (an
    /// external producer's run is not waited for: it is let go of, and stays its producer's), then
    /// interrupts the rest (they end `run_failed`, type `interrupted`, writing their open tool
    /// calls' results) and waits for those ends, [`RUN_INTERRUPT_WAIT_MS_MAX`] at most.
    pub async fn drain(&self, wait: std::time::Duration) -> Drained {
        let mut drained = Drained::default();
        let deadline = tokio::time::Instant::now() + wait;
        let ours: Vec<_> = self
            .active()
            .values()
            .filter(|run| !run.produced)
            .map(|run| run.finished.clone())
            .collect();
        for mut finished in ours {
            let _ = tokio::time::timeout_at(deadline, finished.wait_for(|done| *done)).await;
        }
        let left: Vec<(Uuid, watch::Receiver<bool>)> = {
            let active = self.active();
            active
                .values()
                .map(|run| {
                    run.interrupted.store(true, Ordering::Release);
                    run.cancel.cancel();
                    (run.run_id, run.finished.clone())
                })
                .collect()
        };
        let deadline = tokio::time::Instant::now()
            + std::time::Duration::from_millis(RUN_INTERRUPT_WAIT_MS_MAX);
        for (run_id, mut finished) in left {
            let ended = tokio::time::timeout_at(deadline, finished.wait_for(|done| *done))
                .await
                .is_ok_and(|result| result.is_ok());
            if ended {
                drained.interrupted.push(run_id);
            } else {
                drained.unended.push(run_id);
            }
        }
        drained
    }

    /// Starts run `run_id` of `agent` for `turn`, after the conversation `prior` (rebuilt from
    /// the log); its output goes to the log.
    pub fn start(
        &self,
        agent: &Agent,
        run_id: Uuid,
        prior: Vec<ConversationMessage>,
        turn: Turn,
        options: RunOptions,
    ) -> Result<Uuid, StartRunError> {
        let provider = self.providers.for_agent(agent)?;
        let Reserved { cancel, ending, interrupted, finished: finished_sender } =
            self.reserve(agent.id, run_id, false)?;
        let request = ProviderRequest {
            system: options.instructions.clone().or_else(|| agent.system.clone()),
            model: model_for(agent, provider.name()),
            thinking_budget_tokens: crate::provider::anthropic::thinking_budget_of(&agent.metadata),
            messages: match &turn {
                Turn::User(text) => prior
                    .into_iter()
                    .chain([ConversationMessage::User { text: text.clone() }])
                    .collect(),
                Turn::Approval(_) => prior,
            },
            tools: self
                .tools
                .iter()
                .map(|tool| tool.spec())
                .chain(options.client_tools.iter().cloned())
                .collect(),
        };
        // The run's span: a child of the request that started it (its server span, itself the
        // child of the caller's `traceparent`), when there is one.
        let trace = crate::telemetry::spans::invoke_agent(
            self.telemetry.tracer(),
            agent,
            provider.name(),
            request.model.clone(),
            run_id,
        );
        let writer = self.writer.clone();
        let store = self.store.clone();
        let (builtins, mcp, metadata) =
            (self.tools.clone(), self.mcp.clone(), agent.metadata.clone());
        let client_tools: Vec<Arc<dyn Tool>> = options
            .client_tools
            .iter()
            .map(|spec| Arc::new(super::client_tools::ClientTool(spec.clone())) as Arc<dyn Tool>)
            .collect();
        let with_client = |mut tools: Vec<Arc<dyn Tool>>, client: &[Arc<dyn Tool>]| {
            // A client tool named like one of the agent's (an MCP server's, listed later) is
            // left out: the agent's own wins.
            for tool in client {
                let name = tool.spec().name;
                if tools.iter().any(|own| own.spec().name == name) {
                    tracing::warn!(tool = %name, "a client tool has an MCP tool's name; left out");
                    continue;
                }
                tools.push(tool.clone());
            }
            Arc::new(tools)
        };
        let requires_approval = super::approval::tools_requiring_approval(&metadata);
        let make_run = {
            let (writer, limits, ending) = (self.writer.clone(), self.limits, ending.clone());
            let agent_id = agent.id;
            move |tools: Arc<Vec<Arc<dyn Tool>>>| {
                Run::new(
                    agent_id,
                    run_id,
                    writer,
                    provider,
                    tools,
                    cancel,
                    limits,
                    ending,
                    interrupted,
                )
            }
        };
        let iterations_max = options
            .iterations_max
            .map_or(self.iterations_max, |asked| asked.clamp(1, self.iterations_max));
        let slot = Slot {
            active: self.active.clone(),
            agent_id: agent.id,
            run_id,
            finished: finished_sender,
        };
        // Log lines of the run name it (and its trace, when it is traced).
        let log_span = crate::telemetry::spans::run_log_span(agent.id, run_id, &trace);
        tokio::spawn(tracing::Instrument::instrument(
            async move {
                // Held to the task's end, however it ends: the agent is free again and waiters hear
                // it, even when the run panicked.
                let slot = slot;
                let (agent_id, run_id) = (slot.agent_id, slot.run_id);
                // The agent's tools: the built-ins, and its MCP servers' — listed by the run once
                // it has opened (so a server that changed its tools is seen by the next run, and a
                // slow one never holds back `run_started`).
                let mut run = make_run(with_client(builtins.to_vec(), &client_tools))
                    .with_approvals(requires_approval)
                    .traced(trace);
                if let Turn::Approval(answer) = turn {
                    run = run.answering(answer);
                }
                if !crate::mcp::agent_servers(&metadata).is_empty() {
                    let client_tools = client_tools.clone();
                    run = run.with_tools_later(Box::pin(async move {
                        let visible = mcp.tools_for(&builtins, &metadata).await;
                        let tools = visible.into_iter().map(|visible| visible.tool).collect();
                        with_client(tools, &client_tools)
                    }));
                }
                let outcome = AssertUnwindSafe(run.execute(request, iterations_max, options))
                    .catch_unwind()
                    .await;
                let detail = match outcome {
                    Ok(Ok(())) => return,
                    Ok(Err(error)) => {
                        tracing::warn!(%agent_id, %run_id, %error, "run stopped: the log refused an event");
                        json!({ "type": "store_error", "message": error.to_string(), "retryable": true })
                    }
                    Err(panic) => {
                        let message = panic_message(panic.as_ref());
                        tracing::error!(%agent_id, %run_id, panic = %message, "run stopped: it panicked");
                        json!({
                            "type": "internal_error",
                            "message": format!("the run stopped on an internal error: {message}"),
                            "retryable": false,
                        })
                    }
                };
                ending.store(true, Ordering::Release);
                end_from_log(store.as_ref(), &writer, agent_id, run_id, detail).await;
            },
            log_span,
        ));
        Ok(run_id)
    }

    /// Takes the agent's run slot for a run an external producer writes (`agent::produce`): the
    /// same one-run rule, limit, cancel and shutdown as for our own runs. The slot is held until
    /// the returned [`ProducedSlot`] is dropped.
    pub fn reserve_produced(
        &self,
        agent_id: Uuid,
        run_id: Uuid,
    ) -> Result<ProducedSlot, StartRunError> {
        let reserved = self.reserve(agent_id, run_id, true)?;
        Ok(ProducedSlot {
            cancel: reserved.cancel,
            interrupted: reserved.interrupted,
            ending: reserved.ending,
            _slot: Slot {
                active: self.active.clone(),
                agent_id,
                run_id,
                finished: reserved.finished,
            },
        })
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
        Some(Cancelling { run_id: run.run_id, finished: run.finished.clone() })
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

/// How long a shutdown waits, at most, for the runs it interrupted to write their ends.
pub const RUN_INTERRUPT_WAIT_MS_MAX: u64 = 5_000;

/// What a shutdown's drain did with the runs in flight.
#[derive(Debug, Default)]
pub struct Drained {
    /// Interrupted, and their ends written.
    pub interrupted: Vec<Uuid>,
    /// Interrupted, and still not ended when the wait ran out (recovery ends them at the next
    /// start).
    pub unended: Vec<Uuid>,
}

/// What a reserved run slot hands its run.
struct Reserved {
    cancel: CancellationToken,
    ending: Arc<AtomicBool>,
    interrupted: Arc<AtomicBool>,
    finished: watch::Sender<bool>,
}

/// What a panic said, as text.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}
