//! Runs: one user turn and everything the agent does for it.
//!
//! A run is a task that asks the provider for a reply and writes what comes back to the log
//! through the writer: `run_started`, the user's message, the thinking and text deltas, usage, and
//! exactly one of `run_completed` / `run_failed` / `run_cancelled`. The outcome is in the log, so a
//! client that reconnects learns it from history alone.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use app::protocol::Agent;
use app::{DeltaAction, EventKind};
use futures::StreamExt;
use serde_json::json;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::provider::{
    ConversationMessage, Provider, ProviderError, ProviderEvent, ProviderRequest, ToolCall,
};
use crate::store::{EventDraft, StoreError};
use crate::tools::Tool;
use crate::writer::{self, AppendError, AppendReceipt, Writer};

/// Runs in flight across all agents. Each holds a provider stream and a task; past this, new runs
/// are refused with 503 rather than degrade every run already going.
pub const ACTIVE_RUNS_MAX: usize = 256;
/// Appends a run may have queued but not yet acknowledged. Lets token writes pipeline into the
/// writer's group commit instead of paying one commit round trip per token.
pub const RUN_APPENDS_IN_FLIGHT_MAX: usize = 64;
/// LLM calls one run makes at most (LLM → tools → LLM …) unless configured otherwise; a model
/// that keeps asking for tools ends with stop reason `max_iterations`.
pub const RUN_ITERATIONS_MAX_DEFAULT: u32 = 10;
/// Tool calls one LLM step may make; further calls get an error result without running.
pub const TOOL_CALLS_PER_STEP_MAX: usize = 16;
/// Progress and completion reports of the tools of one step waiting to be written.
const TOOL_UPDATES_QUEUE_MAX: usize = 256;
/// Times a failed LLM call is tried again when the provider says trying again may work (rate
/// limit, overload, a dropped connection) and nothing of the call reached the log yet.
pub const PROVIDER_RETRIES_MAX: u32 = 3;
/// The first retry waits this long unless the provider said `retry-after`; then it doubles.
pub const PROVIDER_RETRY_DELAY_INITIAL_MS: u64 = 500;
/// No retry waits longer than this, whatever `retry-after` says.
pub const PROVIDER_RETRY_DELAY_MAX_MS: u64 = 30_000;
/// A tool result longer than this is cut (and says so) before it goes back to the model (by
/// default; see `config::Limits`).
pub const TOOL_RESULT_CHARS_MAX: usize = 16 * 1024;
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
        let cancel = CancellationToken::new();
        let (finished_sender, finished) = watch::channel(false);
        let ending = Arc::new(AtomicBool::new(false));
        {
            let mut active = self.active();
            if let Some(running) = active.get(&agent.id) {
                return Err(StartRunError::RunInProgress {
                    agent_id: agent.id,
                    run_id: running.run_id,
                });
            }
            if active.len() >= ACTIVE_RUNS_MAX {
                return Err(StartRunError::TooManyRuns);
            }
            active.insert(
                agent.id,
                ActiveRun {
                    run_id,
                    cancel: cancel.clone(),
                    finished,
                    ending: ending.clone(),
                },
            );
        }
        let request = ProviderRequest {
            system: agent.system.clone(),
            // A Letta-style handle (`anthropic/claude-…`) names the provider too; the provider
            // is sent the model name alone.
            model: agent.model.as_deref().map(|model| {
                model
                    .strip_prefix(provider.name())
                    .and_then(|rest| rest.strip_prefix('/'))
                    .unwrap_or(model)
                    .to_owned()
            }),
            messages: prior
                .into_iter()
                .chain([ConversationMessage::User { text: user_message }])
                .collect(),
            tools: self.tools.iter().map(|tool| tool.spec()).collect(),
        };
        let thread_id = Uuid::new_v4();
        let writer = self.writer.clone();
        let store = self.store.clone();
        let run = Run {
            agent_id: agent.id,
            run_id,
            thread_id,
            writer: self.writer.clone(),
            in_flight: VecDeque::new(),
            provider,
            tools: self.tools.clone(),
            cancel,
            usage: Usage::default(),
            limits: self.limits,
            events_written: 0,
            over_limit: false,
            ending: ending.clone(),
        };
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
            {
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

/// Times a run that stopped because the log refused an event tries to write its `run_failed`.
/// If all fail (the database is gone), start-up recovery ends the run as `interrupted`.
pub const RUN_END_WRITE_ATTEMPTS_MAX: u32 = 8;
/// The first of those attempts waits this long after the failure; each further one twice as long.
const RUN_END_WRITE_DELAY_INITIAL_MS: u64 = 10;
/// How long a request to start a run waits, at most, for the agent's previous run to let go of
/// the agent once that run is writing its end. Subscribers see the end as soon as it commits,
/// before the run's task has answered and left; a client that sends the next message right then
/// waits this long rather than get `run_in_progress`. Past it, the answer is 409 as for any run.
pub const RUN_ENDING_WAIT_MS_MAX: u64 = 2_000;

/// Ends a run whose events the log refused, from what of it the log holds: an error result for
/// each tool call still unanswered, an `error` and a `run_failed` (`store_error`), so clients are
/// not left waiting on a run that will never say more. A run whose `run_started` never committed
/// is not in the log at all and gets nothing.
async fn end_after_store_failure(
    store: &dyn crate::store::Store,
    writer: &Writer,
    agent_id: Uuid,
    run_id: Uuid,
    error: &AppendError,
) {
    let detail = json!({ "type": "store_error", "message": error.to_string(), "retryable": true });
    for attempt in 0..RUN_END_WRITE_ATTEMPTS_MAX {
        tokio::time::sleep(std::time::Duration::from_millis(
            RUN_END_WRITE_DELAY_INITIAL_MS << attempt,
        ))
        .await;
        let outcome = async {
            let outline = store.run_outline(run_id).await?;
            let Some(started) = outline
                .iter()
                .find(|event| event.kind == EventKind::RunStarted)
            else {
                return Ok(());
            };
            let events = crate::recovery::run_events(store, started).await?;
            if events.iter().any(|event| event.kind.is_run_end()) {
                return Ok(());
            }
            let drafts = crate::recovery::closing_drafts(started, &events, detail.clone());
            writer.append_closing(agent_id, drafts).await.map(|_| ())
        }
        .await;
        match outcome {
            Ok(()) => return,
            Err(AppendError::WriterStopped) => break,
            Err(AppendError::Store(StoreError::RunNotOwned(_))) => {
                // Another server ended this run (its lease ran out): the log already has its end.
                tracing::warn!(%agent_id, %run_id, "the run was ended by another server");
                return;
            }
            Err(error) => {
                tracing::warn!(%agent_id, %run_id, %error, attempt, "run_failed not written")
            }
        }
    }
    tracing::error!(%agent_id, %run_id, "the run's end could not be written; recovery will end it at the next start");
}

/// Token counts summed over the LLM calls of a run.
#[derive(Clone, Copy, Debug, Default)]
struct Usage {
    input_tokens: u64,
    output_tokens: u64,
}

impl Usage {
    fn json(self) -> serde_json::Value {
        json!({ "input_tokens": self.input_tokens, "output_tokens": self.output_tokens })
    }
}

/// One run's writing side and its agent loop.
struct Run {
    agent_id: Uuid,
    run_id: Uuid,
    /// The run's main thread; every tool call gets a thread of its own.
    thread_id: Uuid,
    writer: Writer,
    in_flight: VecDeque<AppendReceipt>,
    provider: Arc<dyn Provider>,
    tools: Arc<Vec<Box<dyn Tool>>>,
    cancel: CancellationToken,
    /// Usage of the LLM calls finished so far.
    usage: Usage,
    limits: RunLimits,
    /// Events this run has written so far.
    events_written: u64,
    /// True once `limits.events_max` was reached: only closing events are written from then on.
    over_limit: bool,
    /// Set just before the run's end is written, for [`Runs::active_run_after_ending`].
    ending: Arc<AtomicBool>,
}

/// How one LLM call ended.
enum StepEnd {
    Finished { stop_reason: String },
    Cancelled,
    Failed(ProviderError),
}

/// A tool call as it streams in, with where its events go.
struct PendingCall {
    call_id: String,
    name: String,
    input_json: String,
    input: Option<serde_json::Value>,
    thread_id: Uuid,
    block_id: Uuid,
    message_id: Uuid,
    /// Calls past the per-step bound are answered with an error instead of running.
    refused: Option<String>,
    /// The provider ran this call itself (the Claude CLI does) and reported its result.
    answered_by_provider: bool,
}

enum ToolUpdate {
    Progress(serde_json::Value),
    Done(Result<serde_json::Value, String>),
}

enum Outcome {
    Completed(String),
    Cancelled,
    Failed(ProviderError),
}

impl Run {
    fn draft(&self, kind: EventKind) -> EventDraft {
        let mut draft = EventDraft::new(kind);
        draft.run_id = Some(self.run_id);
        draft.thread_id = Some(self.thread_id);
        draft
    }

    fn call_draft(&self, call: &PendingCall, kind: EventKind) -> EventDraft {
        let mut draft = self.draft(kind);
        draft.thread_id = Some(call.thread_id);
        draft.block_id = Some(call.block_id);
        draft.message_id = Some(call.message_id);
        draft
    }

    /// Queues one event; waits only when [`RUN_APPENDS_IN_FLIGHT_MAX`] are unacknowledged.
    async fn emit(&mut self, draft: EventDraft) -> Result<(), AppendError> {
        if self.events_written >= self.limits.events_max && !self.over_limit {
            tracing::warn!(run_id = %self.run_id, events_max = self.limits.events_max, "run reached its event limit; stopping it");
            self.over_limit = true;
            self.cancel.cancel();
        }
        // Past the limit, only what closes the run: results (and their cards' status) for open
        // tool calls, the error and the end. Output still on its way is dropped.
        let closing = matches!(draft.kind, EventKind::ToolResult | EventKind::Error)
            || draft.kind.is_run_end()
            || (draft.kind == EventKind::ToolCall
                && draft.delta_path.as_deref() == Some("")
                && draft
                    .delta
                    .as_ref()
                    .is_some_and(|delta| delta.get("status").is_some()));
        if self.over_limit && !closing {
            return Ok(());
        }
        self.events_written += 1;
        if self.in_flight.len() >= RUN_APPENDS_IN_FLIGHT_MAX {
            let oldest = self.in_flight.pop_front().expect("the queue is full");
            writer::wait(oldest).await?;
        }
        let receipt = self.writer.submit(self.agent_id, vec![draft]).await?;
        self.in_flight.push_back(receipt);
        Ok(())
    }

    /// Waits until everything emitted so far is committed.
    async fn flush(&mut self) -> Result<(), AppendError> {
        while let Some(receipt) = self.in_flight.pop_front() {
            writer::wait(receipt).await?;
        }
        Ok(())
    }

    /// Runs the agent loop. When the log refuses an event, waits for every append still in
    /// flight before returning the error, so whoever ends the run sees all of it that committed.
    async fn execute(
        mut self,
        request: ProviderRequest,
        iterations_max: u32,
        options: RunOptions,
    ) -> Result<(), AppendError> {
        let result = self.execute_loop(request, iterations_max, options).await;
        if result.is_err() {
            while let Some(receipt) = self.in_flight.pop_front() {
                let _ = writer::wait(receipt).await;
            }
        }
        result
    }

    async fn execute_loop(
        &mut self,
        mut request: ProviderRequest,
        iterations_max: u32,
        options: RunOptions,
    ) -> Result<(), AppendError> {
        let metadata = json!({
            "provider": self.provider.name(),
            "model": request.model,
            "background": options.background,
            "stream_tokens": options.stream_tokens,
        });
        let mut started = self.draft(EventKind::RunStarted);
        started.metadata = metadata;
        self.emit(started).await?;

        if let Some(ConversationMessage::User { text }) = request.messages.last() {
            let mut user = self.draft(EventKind::User);
            user.block_id = Some(Uuid::new_v4());
            user.message_id = Some(Uuid::new_v4());
            user.content = json!({ "text": text });
            if let Some(otid) = &options.otid {
                user.content["otid"] = json!(otid);
            }
            self.emit(user).await?;
        }

        let mut outcome = Outcome::Completed("max_iterations".to_owned());
        for _ in 0..iterations_max {
            let (end, text, calls) = self.llm_step(request.clone()).await?;
            match end {
                StepEnd::Cancelled => {
                    self.answer_unrun(&calls, "cancelled before the tool ran")
                        .await?;
                    outcome = Outcome::Cancelled;
                    break;
                }
                StepEnd::Failed(error) => {
                    self.answer_unrun(&calls, "the model failed before the tool ran")
                        .await?;
                    outcome = Outcome::Failed(error);
                    break;
                }
                StepEnd::Finished { stop_reason }
                    if calls.iter().all(|call| call.answered_by_provider) =>
                {
                    outcome = Outcome::Completed(stop_reason);
                    break;
                }
                StepEnd::Finished { .. } => {
                    request.messages.push(ConversationMessage::Assistant {
                        text,
                        tool_calls: calls
                            .iter()
                            .map(|call| ToolCall {
                                id: call.call_id.clone(),
                                name: call.name.clone(),
                                input: call.input.clone().unwrap_or(json!({})),
                            })
                            .collect(),
                    });
                    let results = self.run_tools(calls).await?;
                    request.messages.extend(results);
                    if self.cancel.is_cancelled() {
                        outcome = Outcome::Cancelled;
                        break;
                    }
                }
            }
        }

        let end = match outcome {
            Outcome::Completed(stop_reason) => {
                let mut end = self.draft(EventKind::RunCompleted);
                end.content = json!({ "stop_reason": stop_reason, "usage": self.usage.json() });
                end
            }
            Outcome::Cancelled if self.over_limit => {
                let mut end = self.draft(EventKind::RunCompleted);
                end.content = json!({ "stop_reason": "max_events", "usage": self.usage.json() });
                end
            }
            Outcome::Cancelled => {
                let mut end = self.draft(EventKind::RunCancelled);
                end.content = json!({ "stop_reason": "cancelled", "usage": self.usage.json() });
                end
            }
            Outcome::Failed(error) => {
                let mut reported = self.draft(EventKind::Error);
                reported.message_id = Some(Uuid::new_v4());
                reported.content = json!({
                    "type": error.kind,
                    "message": error.message,
                    "retryable": error.retryable,
                });
                self.emit(reported).await?;
                let mut end = self.draft(EventKind::RunFailed);
                end.content = json!({
                    "stop_reason": "error",
                    "error": { "type": error.kind, "message": error.message, "retryable": error.retryable },
                    "usage": self.usage.json(),
                });
                end
            }
        };
        // Everything before the end is committed first: if any of it failed, the end is not in
        // the log yet and the caller writes a `run_failed` instead — never two ends.
        self.flush().await?;
        self.ending.store(true, Ordering::Release);
        self.writer
            .append(self.agent_id, vec![end])
            .await
            .map(|_| ())
    }

    /// One LLM call: streams thinking and text into one block, each tool call into a block and
    /// thread of its own. Returns how it ended, the text it produced, and the tool calls.
    async fn llm_step(
        &mut self,
        request: ProviderRequest,
    ) -> Result<(StepEnd, String, Vec<PendingCall>), AppendError> {
        let block_id = Uuid::new_v4();
        let thinking_id = Uuid::new_v4();
        let text_id = Uuid::new_v4();
        let mut text = String::new();
        let mut calls: Vec<PendingCall> = Vec::new();
        let mut step_usage = Usage::default();
        let mut stop_reason = None;
        let mut stream = self.provider.stream(request.clone());
        let mut retries = 0u32;
        // Nothing of this step is in the log yet: a retry cannot duplicate anything.
        let mut step_output_started = false;
        let end = loop {
            let next = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => break StepEnd::Cancelled,
                next = stream.next() => next,
            };
            let event = match next {
                None => {
                    break StepEnd::Finished {
                        stop_reason: stop_reason.take().unwrap_or_else(|| "end_turn".to_owned()),
                    }
                }
                Some(Err(error))
                    if error.retryable
                        && !step_output_started
                        && retries < PROVIDER_RETRIES_MAX =>
                {
                    retries += 1;
                    let delay_ms = error
                        .retry_after_ms
                        .unwrap_or(PROVIDER_RETRY_DELAY_INITIAL_MS << (retries - 1))
                        .min(PROVIDER_RETRY_DELAY_MAX_MS);
                    let mut notice = self.draft(EventKind::Loading);
                    notice.block_id = Some(block_id);
                    notice.message_id = Some(Uuid::new_v4());
                    notice.content = json!({
                        "label": format!(
                            "{}: retrying in {:.1} s (attempt {} of {})",
                            error.kind,
                            delay_ms as f64 / 1000.0,
                            retries + 1,
                            PROVIDER_RETRIES_MAX + 1
                        ),
                        "error": { "type": error.kind, "message": error.message },
                        "retry_in_ms": delay_ms,
                    });
                    self.emit(notice).await?;
                    tokio::select! {
                        _ = self.cancel.cancelled() => break StepEnd::Cancelled,
                        _ = tokio::time::sleep(std::time::Duration::from_millis(delay_ms)) => {}
                    }
                    stream = self.provider.stream(request.clone());
                    continue;
                }
                Some(Err(error)) => break StepEnd::Failed(error),
                Some(Ok(event)) => {
                    step_output_started |= !matches!(event, ProviderEvent::Usage { .. });
                    event
                }
            };
            match event {
                ProviderEvent::ThinkingDelta(piece) | ProviderEvent::TextDelta(piece)
                    if piece.is_empty() => {}
                ProviderEvent::ThinkingDelta(piece) => {
                    self.emit_text_delta(EventKind::Thinking, block_id, thinking_id, piece)
                        .await?;
                }
                ProviderEvent::ThinkingSignature(signature) => {
                    let mut draft = self.draft(EventKind::Thinking);
                    draft.block_id = Some(block_id);
                    draft.message_id = Some(thinking_id);
                    draft.delta = Some(serde_json::Value::String(signature));
                    draft.delta_path = Some("signature".to_owned());
                    draft.delta_action = Some(DeltaAction::Append);
                    self.emit(draft).await?;
                }
                ProviderEvent::TextDelta(piece) => {
                    text.push_str(&piece);
                    self.emit_text_delta(EventKind::Text, block_id, text_id, piece)
                        .await?;
                }
                ProviderEvent::ToolCallStart { id, name } => {
                    if calls.iter().any(|call| call.call_id == id) {
                        tracing::warn!(run_id = %self.run_id, call_id = %id, "duplicate tool call refused");
                        continue;
                    }
                    let refused = (calls.len() >= TOOL_CALLS_PER_STEP_MAX).then(|| {
                        format!("more than {TOOL_CALLS_PER_STEP_MAX} tool calls in one step")
                    });
                    let call = PendingCall {
                        call_id: id,
                        name,
                        input_json: String::new(),
                        input: None,
                        thread_id: Uuid::new_v4(),
                        block_id: Uuid::new_v4(),
                        message_id: Uuid::new_v4(),
                        refused,
                        answered_by_provider: false,
                    };
                    let mut draft = self.call_draft(&call, EventKind::ToolCall);
                    draft.content = json!({
                        "name": call.name,
                        "tool_call_id": call.call_id,
                        "input": {},
                        "status": "streaming",
                    });
                    let written_before = self.events_written;
                    self.emit(draft).await?;
                    if self.events_written == written_before {
                        // Dropped at the event limit: the call never existed in the log, so it
                        // must not get a result either.
                        continue;
                    }
                    calls.push(call);
                }
                ProviderEvent::ToolCallInputDelta { id, json: piece } => {
                    let Some(index) = calls.iter().position(|call| call.call_id == id) else {
                        continue;
                    };
                    calls[index].input_json.push_str(&piece);
                    let mut draft = self.call_draft(&calls[index], EventKind::ToolCall);
                    draft.delta = Some(serde_json::Value::String(piece));
                    draft.delta_path = Some("input_json".to_owned());
                    draft.delta_action = Some(DeltaAction::Append);
                    self.emit(draft).await?;
                }
                ProviderEvent::ToolCallEnd { id, input } => {
                    let Some(index) = calls.iter().position(|call| call.call_id == id) else {
                        continue;
                    };
                    calls[index].input = Some(input.clone());
                    let mut draft = self.call_draft(&calls[index], EventKind::ToolCall);
                    draft.delta = Some(json!({ "input": input, "status": "ready" }));
                    draft.delta_path = Some(String::new());
                    draft.delta_action = Some(DeltaAction::Merge);
                    self.emit(draft).await?;
                }
                ProviderEvent::Usage {
                    input_tokens,
                    output_tokens,
                } => {
                    // Providers report usage cumulatively within a call.
                    step_usage = Usage {
                        input_tokens,
                        output_tokens,
                    };
                    let total = Usage {
                        input_tokens: self.usage.input_tokens + input_tokens,
                        output_tokens: self.usage.output_tokens + output_tokens,
                    };
                    let mut draft = self.draft(EventKind::Usage);
                    draft.block_id = Some(block_id);
                    draft.content = total.json();
                    self.emit(draft).await?;
                }
                ProviderEvent::ToolResult {
                    id,
                    content,
                    is_error,
                } => {
                    let Some(index) = calls.iter().position(|call| call.call_id == id) else {
                        tracing::warn!(call_id = %id, "a provider tool result for an unknown call");
                        continue;
                    };
                    if calls[index].answered_by_provider {
                        tracing::warn!(call_id = %id, "second provider result refused");
                        continue;
                    }
                    calls[index].answered_by_provider = true;
                    let result = if is_error {
                        Err(match content {
                            serde_json::Value::String(text) => text,
                            other => other.to_string(),
                        })
                    } else {
                        Ok(content)
                    };
                    let call = calls.remove(index);
                    self.emit_result(&call, result).await?;
                    calls.insert(index, call);
                }
                ProviderEvent::Stop { reason } => stop_reason = Some(reason),
            }
        };
        self.usage.input_tokens += step_usage.input_tokens;
        self.usage.output_tokens += step_usage.output_tokens;
        // A call whose input never completed: its JSON pieces are all there is.
        for call in &mut calls {
            if call.input.is_none() {
                call.input = serde_json::from_str(&call.input_json).ok();
            }
        }
        Ok((end, text, calls))
    }

    async fn emit_text_delta(
        &mut self,
        kind: EventKind,
        block_id: Uuid,
        message_id: Uuid,
        piece: String,
    ) -> Result<(), AppendError> {
        let mut draft = self.draft(kind);
        draft.block_id = Some(block_id);
        draft.message_id = Some(message_id);
        draft.delta = Some(serde_json::Value::String(piece));
        draft.delta_path = Some("text".to_owned());
        draft.delta_action = Some(DeltaAction::Append);
        self.emit(draft).await
    }

    /// Writes one result for a call and marks the call's card done.
    async fn emit_result(
        &mut self,
        call: &PendingCall,
        result: Result<serde_json::Value, String>,
    ) -> Result<ConversationMessage, AppendError> {
        let (value, is_error) = match result {
            Ok(value) => (value, false),
            Err(message) => (json!(message), true),
        };
        let mut content = match &value {
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let chars_max = self.limits.tool_result_chars_max;
        let mut value = value;
        if content.chars().count() > chars_max {
            content = content.chars().take(chars_max).collect::<String>()
                + " … [cut: the result was longer than the limit]";
            // The log keeps what the model was given, not the whole result.
            value = json!(content);
        }
        let mut status = self.call_draft(call, EventKind::ToolCall);
        status.delta = Some(json!({ "status": if is_error { "error" } else { "done" } }));
        status.delta_path = Some(String::new());
        status.delta_action = Some(DeltaAction::Merge);
        self.emit(status).await?;
        let mut result = self.call_draft(call, EventKind::ToolResult);
        result.message_id = Some(Uuid::new_v4());
        result.content = json!({
            "tool_call_id": call.call_id,
            "name": call.name,
            "result": value,
            "is_error": is_error,
        });
        self.emit(result).await?;
        Ok(ConversationMessage::ToolResult {
            tool_call_id: call.call_id.clone(),
            content,
            is_error,
        })
    }

    /// Gives calls that never ran their one (error) result.
    async fn answer_unrun(&mut self, calls: &[PendingCall], why: &str) -> Result<(), AppendError> {
        for call in calls.iter().filter(|call| !call.answered_by_provider) {
            self.emit_result(call, Err(why.to_owned())).await?;
        }
        Ok(())
    }

    /// Runs the calls of one step concurrently, each on its own task; writes their progress and
    /// exactly one result per call; returns the results for the next LLM call.
    ///
    /// Write-ahead for tools: no tool starts before everything emitted so far (the calls'
    /// input and `ready`) is committed. A crash while a tool works then leaves its call in the
    /// log for recovery to answer, and the call is visible for as long as its tool runs.
    async fn run_tools(
        &mut self,
        calls: Vec<PendingCall>,
    ) -> Result<Vec<ConversationMessage>, AppendError> {
        self.flush().await?;
        let (updates, mut incoming) = mpsc::channel::<(usize, ToolUpdate)>(TOOL_UPDATES_QUEUE_MAX);
        let mut tasks = Vec::with_capacity(calls.len());
        for (index, call) in calls.iter().enumerate() {
            let updates = updates.clone();
            let immediate = if let Some(why) = &call.refused {
                Some(Err(why.clone()))
            } else if call.input.is_none() {
                Some(Err(format!(
                    "the input is not valid JSON: {:?}",
                    call.input_json
                )))
            } else if !self.tools.iter().any(|tool| tool.spec().name == call.name) {
                Some(Err(format!("there is no tool named {:?}", call.name)))
            } else {
                None
            };
            if let Some(result) = immediate {
                let _ = updates.send((index, ToolUpdate::Done(result))).await;
                continue;
            }
            let tools = self.tools.clone();
            let name = call.name.clone();
            let input = call.input.clone().unwrap_or(json!({}));
            let cancel = self.cancel.child_token();
            tasks.push(tokio::spawn(async move {
                let Some(tool) = tools.iter().find(|tool| tool.spec().name == name) else {
                    return;
                };
                let (progress, mut reports) = mpsc::channel(8);
                let work = tool.call(input, progress, cancel);
                tokio::pin!(work);
                let result = loop {
                    tokio::select! {
                        result = &mut work => break result,
                        Some(report) = reports.recv() => {
                            let _ = updates.send((index, ToolUpdate::Progress(report))).await;
                        }
                    }
                };
                let _ = updates.send((index, ToolUpdate::Done(result))).await;
            }));
        }
        drop(updates);

        let mut answered: Vec<Option<ConversationMessage>> = calls.iter().map(|_| None).collect();
        while let Some((index, update)) = incoming.recv().await {
            match update {
                ToolUpdate::Progress(report) => {
                    let mut draft = self.call_draft(&calls[index], EventKind::ToolCall);
                    draft.delta = Some(report);
                    draft.delta_path = Some(String::new());
                    draft.delta_action = Some(DeltaAction::Merge);
                    self.emit(draft).await?;
                }
                ToolUpdate::Done(result) => {
                    if answered[index].is_some() {
                        tracing::warn!(call_id = %calls[index].call_id, "second result refused");
                        continue;
                    }
                    answered[index] = Some(self.emit_result(&calls[index], result).await?);
                }
            }
        }
        for task in tasks {
            if let Err(error) = task.await {
                tracing::error!(%error, "a tool task failed");
            }
        }
        // A task that died without answering still owes its call a result.
        let mut results = Vec::with_capacity(calls.len());
        for (index, answer) in answered.into_iter().enumerate() {
            match answer {
                Some(message) => results.push(message),
                None => results.push(
                    self.emit_result(&calls[index], Err("the tool ended without a result".into()))
                        .await?,
                ),
            }
        }
        Ok(results)
    }
}
