//! Runs: one user turn and everything the agent does for it.
//!
//! A run is a task that asks the provider for a reply and writes what comes back to the log
//! through the writer: `run_started`, the user's message, the thinking and text deltas, usage, and
//! exactly one of `run_completed` / `run_failed` / `run_cancelled`. The outcome is in the log, so a
//! client that reconnects learns it from history alone.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use app::protocol::Agent;
use app::{DeltaAction, EventKind};
use futures::StreamExt;
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::provider::{Provider, ProviderEvent, ProviderRequest};
use crate::store::EventDraft;
use crate::writer::{self, AppendError, AppendReceipt, Writer};

/// Runs in flight across all agents. Each holds a provider stream and a task; past this, new runs
/// are refused with 503 rather than degrade every run already going.
pub const ACTIVE_RUNS_MAX: usize = 256;
/// Appends a run may have queued but not yet acknowledged. Lets token writes pipeline into the
/// writer's group commit instead of paying one commit round trip per token.
pub const RUN_APPENDS_IN_FLIGHT_MAX: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum StartRunError {
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

/// Starts and tracks runs. One run per agent at a time.
pub struct Runs {
    writer: Writer,
    provider: Arc<dyn Provider>,
    active: Arc<Mutex<HashMap<Uuid, ActiveRun>>>,
}

impl Runs {
    pub fn new(writer: Writer, provider: Arc<dyn Provider>) -> Runs {
        Runs {
            writer,
            provider,
            active: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn active(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, ActiveRun>> {
        self.active.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts a run of `agent` for `user_message`; its output goes to the log.
    pub fn start(&self, agent: &Agent, user_message: String) -> Result<Uuid, StartRunError> {
        let run_id = Uuid::new_v4();
        let cancel = CancellationToken::new();
        let (finished_sender, finished) = watch::channel(false);
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
                },
            );
        }
        let request = ProviderRequest {
            system: agent.system.clone(),
            model: agent.model.clone(),
            user_message,
        };
        let run = Run {
            agent_id: agent.id,
            run_id,
            thread_id: Uuid::new_v4(),
            writer: self.writer.clone(),
            in_flight: VecDeque::new(),
        };
        let provider = self.provider.clone();
        let active = self.active.clone();
        let agent_id = agent.id;
        tokio::spawn(async move {
            if let Err(error) = run.execute(provider.as_ref(), request, cancel).await {
                tracing::warn!(%agent_id, %run_id, %error, "run could not write its outcome");
            }
            {
                let mut active = active.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                if active.get(&agent_id).is_some_and(|run| run.run_id == run_id) {
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

    /// The run in progress for `agent_id`, if any.
    pub fn active_run(&self, agent_id: Uuid) -> Option<Uuid> {
        self.active().get(&agent_id).map(|run| run.run_id)
    }
}

/// One run's writing side.
struct Run {
    agent_id: Uuid,
    run_id: Uuid,
    thread_id: Uuid,
    writer: Writer,
    in_flight: VecDeque<AppendReceipt>,
}

impl Run {
    fn draft(&self, kind: EventKind) -> EventDraft {
        let mut draft = EventDraft::new(kind);
        draft.run_id = Some(self.run_id);
        draft.thread_id = Some(self.thread_id);
        draft
    }

    /// Queues one event; waits only when [`RUN_APPENDS_IN_FLIGHT_MAX`] are unacknowledged.
    async fn emit(&mut self, draft: EventDraft) -> Result<(), AppendError> {
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

    async fn execute(
        mut self,
        provider: &dyn Provider,
        request: ProviderRequest,
        cancel: CancellationToken,
    ) -> Result<(), AppendError> {
        let metadata = json!({ "provider": provider.name(), "model": request.model });
        let mut started = self.draft(EventKind::RunStarted);
        started.metadata = metadata.clone();
        self.emit(started).await?;

        let mut user = self.draft(EventKind::User);
        user.block_id = Some(Uuid::new_v4());
        user.message_id = Some(Uuid::new_v4());
        user.content = json!({ "text": request.user_message });
        self.emit(user).await?;

        let block_id = Uuid::new_v4();
        let thinking_id = Uuid::new_v4();
        let text_id = Uuid::new_v4();
        let mut usage = serde_json::Value::Null;
        let mut stop_reason = None;
        let mut stream = provider.stream(request);
        let outcome = loop {
            let next = tokio::select! {
                biased;
                _ = cancel.cancelled() => break Outcome::Cancelled,
                next = stream.next() => next,
            };
            let event = match next {
                None => break Outcome::Completed,
                Some(Err(error)) => break Outcome::Failed(error),
                Some(Ok(event)) => event,
            };
            let (kind, message_id, piece) = match event {
                ProviderEvent::ThinkingDelta(piece) => (EventKind::Thinking, thinking_id, piece),
                ProviderEvent::TextDelta(piece) => (EventKind::Text, text_id, piece),
                ProviderEvent::Usage {
                    input_tokens,
                    output_tokens,
                } => {
                    usage = json!({ "input_tokens": input_tokens, "output_tokens": output_tokens });
                    let mut draft = self.draft(EventKind::Usage);
                    draft.block_id = Some(block_id);
                    draft.content = usage.clone();
                    self.emit(draft).await?;
                    continue;
                }
                ProviderEvent::Stop { reason } => {
                    stop_reason = Some(reason);
                    continue;
                }
            };
            let mut draft = self.draft(kind);
            draft.block_id = Some(block_id);
            draft.message_id = Some(message_id);
            draft.delta = Some(serde_json::Value::String(piece));
            draft.delta_path = Some("text".to_owned());
            draft.delta_action = Some(DeltaAction::Append);
            self.emit(draft).await?;
        };
        let end = match outcome {
            Outcome::Completed => {
                let mut end = self.draft(EventKind::RunCompleted);
                end.content = json!({
                    "stop_reason": stop_reason.unwrap_or_else(|| "end_turn".to_owned()),
                    "usage": usage,
                });
                end
            }
            Outcome::Cancelled => {
                let mut end = self.draft(EventKind::RunCancelled);
                end.content = json!({ "stop_reason": "cancelled" });
                end
            }
            Outcome::Failed(error) => {
                let mut end = self.draft(EventKind::RunFailed);
                end.content = json!({
                    "stop_reason": "llm_api_error",
                    "error": { "type": error.kind, "message": error.message },
                });
                end
            }
        };
        self.emit(end).await?;
        self.flush().await
    }
}

enum Outcome {
    Completed,
    Cancelled,
    Failed(crate::provider::ProviderError),
}
