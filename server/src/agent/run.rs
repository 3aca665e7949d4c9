//! One run: the agent loop (LLM call → tools → LLM call …) and the run's writing side, which
//! pipelines its events into the writer and enforces the run's event limit.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use app::EventKind;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::approval::ApprovalTurn;
use super::registry::{RunLimits, RunOptions};
use super::step::{RunIds, Usage};
use crate::delivery::writer::{self, AppendError, AppendReceipt, Writer};
use crate::limits::EVENT_BYTES_MAX;
use crate::provider::{ConversationMessage, Provider, ProviderError, ProviderRequest, ToolCall};
use crate::store::EventDraft;
use crate::telemetry::Traced;
use crate::tools::Tool;
use opentelemetry::KeyValue;

mod approvals;
mod drafts;
pub(crate) use drafts::draft_bytes;
use drafts::{closes_a_run, closing_drafts, opening_drafts, Outcome};

/// Appends a run may have queued but not yet acknowledged. Lets token writes pipeline into the
/// writer's group commit instead of paying one commit round trip per token.
pub const RUN_APPENDS_IN_FLIGHT_MAX: usize = 64;

/// How one LLM call ended.
pub(super) enum StepEnd {
    Finished { stop_reason: String },
    Cancelled,
    Failed(ProviderError),
}

/// One run's writing side and its agent loop.
pub(super) struct Run {
    pub(super) agent_id: Uuid,
    pub(super) ids: RunIds,
    writer: Writer,
    in_flight: VecDeque<AppendReceipt>,
    pub(super) provider: Arc<dyn Provider>,
    pub(super) tools: Arc<Vec<Arc<dyn Tool>>>,
    pub(super) cancel: CancellationToken,
    /// Usage of the LLM calls finished so far.
    pub(super) usage: Usage,
    pub(super) limits: RunLimits,
    /// Events this run has written so far.
    events_written: u64,
    /// Bytes this run has written so far (its events as JSON, [`draft_bytes`]).
    bytes_written: u64,
    /// The stop reason of the limit the run reached (`max_events`, `max_bytes`): only closing
    /// events are written from then on.
    over_limit: Option<&'static str>,
    /// Set just before the run's end is written, for `Runs::active_run_after_ending`.
    ending: Arc<AtomicBool>,
    /// Set by a shutdown's drain with the cancel: the run ends `interrupted`.
    interrupted: Arc<AtomicBool>,
    /// The run's tools when they must be listed first (MCP servers): awaited after the run's
    /// opening is written, so a slow server never holds back `run_started`.
    tools_later: Option<ToolListing>,
    /// Tools whose calls wait for a person's approval (`metadata.requires_approval`).
    pub(super) requires_approval: Vec<String>,
    /// The answer to an approval request this run carries out before its first LLM call.
    answer: Option<ApprovalTurn>,
    /// The run's `invoke_agent` span (nothing when tracing is off).
    pub(super) trace: Traced,
    /// The seqs of the run's first and newest committed events, for its span.
    seqs: Option<(u64, u64)>,
}

/// A run's tools, still to be listed.
pub(super) type ToolListing = futures::future::BoxFuture<'static, Arc<Vec<Arc<dyn Tool>>>>;

impl Run {
    /// Lists the run's tools with `listing` once the run has opened (instead of the ones
    /// given to `new`, which the run uses if it is cancelled first).
    pub(super) fn with_tools_later(mut self, listing: ToolListing) -> Run {
        self.tools_later = Some(listing);
        self
    }

    /// Calls of these tools wait for a person's approval.
    pub(super) fn with_approvals(mut self, tools: Vec<String>) -> Run {
        self.requires_approval = tools;
        self
    }

    /// Makes this run the continuation that carries out `answer` (instead of answering a user
    /// message).
    pub(super) fn answering(mut self, answer: ApprovalTurn) -> Run {
        self.answer = Some(answer);
        self
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        agent_id: Uuid,
        run_id: Uuid,
        writer: Writer,
        provider: Arc<dyn Provider>,
        tools: Arc<Vec<Arc<dyn Tool>>>,
        cancel: CancellationToken,
        limits: RunLimits,
        ending: Arc<AtomicBool>,
        interrupted: Arc<AtomicBool>,
    ) -> Run {
        Run {
            agent_id,
            ids: RunIds { run_id, thread_id: Uuid::new_v4() },
            writer,
            in_flight: VecDeque::new(),
            provider,
            tools,
            cancel,
            usage: Usage::default(),
            limits,
            events_written: 0,
            bytes_written: 0,
            over_limit: None,
            ending,
            interrupted,
            tools_later: None,
            requires_approval: Vec::new(),
            answer: None,
            trace: Traced::default(),
            seqs: None,
        }
    }

    /// Traces the run under `trace` (its `invoke_agent` span), which it ends when it ends.
    pub(super) fn traced(mut self, trace: Traced) -> Run {
        self.trace = trace;
        self
    }

    /// Notes the seqs of committed events (the span says which part of the log the run wrote).
    fn committed(&mut self, events: &[app::AgentEvent]) {
        if let (Some(first), Some(last)) = (events.first(), events.last()) {
            let (low, _) = self.seqs.unwrap_or((first.seq, last.seq));
            self.seqs = Some((low.min(first.seq), last.seq));
        }
    }

    /// What the server counts.
    pub(super) fn metrics(&self) -> &Arc<crate::metrics::Metrics> {
        self.writer.metrics()
    }

    /// Queues one event; waits only when [`RUN_APPENDS_IN_FLIGHT_MAX`] are unacknowledged.
    /// False when the event was dropped: the run is past its event limit and it is not one that
    /// closes the run.
    pub(super) async fn emit(&mut self, draft: EventDraft) -> Result<bool, AppendError> {
        let closing = closes_a_run(&draft);
        let bytes = draft_bytes(&draft);
        if self.over_limit.is_none() && !closing {
            let reached = if self.events_written >= self.limits.events_max {
                Some("max_events")
            } else if bytes > EVENT_BYTES_MAX
                || self.bytes_written + bytes as u64 > self.limits.bytes_max
            {
                Some("max_bytes")
            } else {
                None
            };
            if let Some(reason) = reached {
                tracing::warn!(
                    run_id = %self.ids.run_id, events = self.events_written,
                    bytes = self.bytes_written, event_bytes = bytes, limit = reason,
                    "run reached its limit; stopping it"
                );
                self.over_limit = Some(reason);
                self.cancel.cancel();
            }
        }
        if self.over_limit.is_some() && !closing {
            return Ok(false);
        }
        self.events_written += 1;
        self.bytes_written += bytes as u64;
        if self.in_flight.len() >= RUN_APPENDS_IN_FLIGHT_MAX {
            let oldest = self.in_flight.pop_front().expect("the queue is full");
            let events = writer::wait(oldest).await?;
            self.committed(&events);
        }
        let receipt = self.writer.submit(self.agent_id, vec![draft]).await?;
        self.in_flight.push_back(receipt);
        Ok(true)
    }

    /// Waits until everything emitted so far is committed.
    pub(super) async fn flush(&mut self) -> Result<(), AppendError> {
        while let Some(receipt) = self.in_flight.pop_front() {
            let events = writer::wait(receipt).await?;
            self.committed(&events);
        }
        Ok(())
    }

    /// Runs the agent loop. When the log refuses an event, waits for every append still in
    /// flight before returning the error, so whoever ends the run sees all of it that committed.
    pub(super) async fn execute(
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
            self.trace.fail("store_error");
        }
        if let Some((first, last)) = self.seqs {
            self.trace.set(vec![
                KeyValue::new("agentstream.run.first_seq", first as i64),
                KeyValue::new("agentstream.run.last_seq", last as i64),
            ]);
        }
        self.trace.end();
        result
    }

    async fn execute_loop(
        &mut self,
        mut request: ProviderRequest,
        iterations_max: u32,
        options: RunOptions,
    ) -> Result<(), AppendError> {
        let answer = self.answer.take();
        let opening =
            opening_drafts(self.ids, self.provider.name(), &request, &options, answer.as_ref());
        for mut draft in opening {
            // The run's trace, where the inspector and an operator find it.
            if let (EventKind::RunStarted, Some(trace_id)) = (draft.kind, self.trace.trace_id()) {
                if let Some(metadata) = draft.metadata.as_object_mut() {
                    metadata.insert("trace_id".into(), json!(trace_id));
                } else {
                    draft.metadata = json!({ "trace_id": trace_id });
                }
            }
            self.emit(draft).await?;
        }
        if answer.is_some() {
            self.trace.event("approval_answered", Vec::new());
        }
        if let Some(listing) = self.tools_later.take() {
            tokio::select! {
                tools = listing => {
                    request.tools = tools.iter().map(|tool| tool.spec()).collect();
                    self.tools = tools;
                }
                // Cancelled while the tools were being listed: the first step sees the cancel.
                _ = self.cancel.cancelled() => {}
            }
        }
        let mut outcome = Outcome::Completed("max_iterations".to_owned());
        let mut iterations = iterations_max;
        if let Some(turn) = answer {
            let others_pending = turn.still_pending;
            let results = self.carry_out(turn.answers).await?;
            request.messages.extend(results);
            if self.cancel.is_cancelled() {
                outcome = Outcome::Cancelled;
                iterations = 0;
            } else if !others_pending.is_empty() {
                // The model hears of its step once every call of it has a result.
                outcome = Outcome::AwaitingApproval(others_pending);
                iterations = 0;
            }
        }
        for _ in 0..iterations {
            let (end, step) = self.llm_step(request.clone()).await?;
            match end {
                StepEnd::Cancelled => {
                    self.answer_unrun(&step.calls, "cancelled before the tool ran").await?;
                    outcome = Outcome::Cancelled;
                    break;
                }
                StepEnd::Failed(error) => {
                    self.answer_unrun(&step.calls, "the model failed before the tool ran").await?;
                    outcome = Outcome::Failed(error);
                    break;
                }
                StepEnd::Finished { stop_reason }
                    if step.calls.iter().all(|call| call.answered_by_provider) =>
                {
                    outcome = Outcome::Completed(stop_reason);
                    break;
                }
                StepEnd::Finished { .. } => {
                    request.messages.push(ConversationMessage::Assistant {
                        text: step.text,
                        thinking: step.thinking,
                        tool_calls: step
                            .calls
                            .iter()
                            .map(|call| ToolCall {
                                id: call.call_id.clone(),
                                name: call.name.clone(),
                                input: call.input.clone().unwrap_or(json!({})),
                            })
                            .collect(),
                    });
                    let ran = self.run_tools(step.calls).await?;
                    request.messages.extend(ran.results);
                    if self.cancel.is_cancelled() {
                        self.answer_unrun(&ran.held, "cancelled before the tool ran").await?;
                        outcome = Outcome::Cancelled;
                        break;
                    }
                    if !ran.held.is_empty() {
                        self.request_approvals(&ran.held).await?;
                        let awaiting = super::approval::awaiting_calls(&ran.held, |name| {
                            self.runs_in_client(name)
                        });
                        outcome = Outcome::AwaitingApproval(awaiting);
                        break;
                    }
                }
            }
        }
        if matches!(outcome, Outcome::Cancelled) && self.interrupted.load(Ordering::Acquire) {
            outcome = Outcome::Failed(ProviderError {
                kind: "interrupted".to_owned(),
                message: "the server shut down before the run ended".to_owned(),
                retryable: true,
                retry_after_ms: None,
            });
        }
        self.trace_outcome(&outcome);
        let mut ends = closing_drafts(self.ids, outcome, self.over_limit, self.usage);
        let end = ends.pop().expect("a run's end");
        for draft in ends {
            self.emit(draft).await?;
        }
        // Everything before the end is committed first: if any of it failed, the end is not in
        // the log yet and the caller writes a `run_failed` instead — never two ends.
        self.flush().await?;
        self.ending.store(true, Ordering::Release);
        let events = self.writer.append(self.agent_id, vec![end]).await?;
        self.committed(&events);
        Ok(())
    }

    /// How the run ended, on its span.
    fn trace_outcome(&self, outcome: &Outcome) {
        let (ended, stop_reason) = match outcome {
            Outcome::Completed(reason) => ("completed", reason.as_str()),
            Outcome::AwaitingApproval(calls) => {
                self.trace.event(
                    "awaiting_approval",
                    vec![KeyValue::new("agentstream.approval.calls", calls.len() as i64)],
                );
                ("completed", super::approval::waiting_stop_reason(calls))
            }
            Outcome::Cancelled => ("cancelled", self.over_limit.unwrap_or("cancelled")),
            Outcome::Failed(error) => {
                self.trace.fail(&error.kind);
                ("failed", "error")
            }
        };
        self.trace.set(vec![
            KeyValue::new("agentstream.run.outcome", ended),
            KeyValue::new("agentstream.run.stop_reason", stop_reason.to_owned()),
            KeyValue::new("gen_ai.usage.input_tokens", self.usage.input_tokens as i64),
            KeyValue::new("gen_ai.usage.output_tokens", self.usage.output_tokens as i64),
        ]);
    }
}

#[cfg(test)]
mod tests;
