//! Running a step's tool calls and writing their results: exactly one result per call, whether
//! the tool answered, refused, failed, or never ran.

use app::EventKind;
use opentelemetry::KeyValue;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::run::Run;
use super::step::{PendingCall, RunIds};
use crate::delivery::writer::AppendError;
use crate::provider::ConversationMessage;
use crate::store::EventDraft;

/// Progress and completion reports of the tools of one step waiting to be written.
const TOOL_UPDATES_QUEUE_MAX: usize = 256;
/// Progress reports one tool may have waiting to be forwarded.
const TOOL_PROGRESS_QUEUE_MAX: usize = 8;

/// What running a step's calls did: one result per call that ran or was refused, and the calls
/// held back for a person's approval or a client's result (no result yet).
pub(super) struct ToolsRan {
    pub(super) results: Vec<ConversationMessage>,
    pub(super) held: Vec<PendingCall>,
}

enum ToolUpdate {
    Progress(Value),
    Done(Result<Value, String>),
}

/// The events of one result (the call's card marked done or error, then the result) and the
/// message that carries it to the model. A result over `chars_max` characters is cut, in the
/// log as for the model: the log keeps what the model was given.
pub(super) fn result_drafts(
    ids: RunIds,
    call: &PendingCall,
    result: Result<Value, String>,
    chars_max: usize,
) -> ([EventDraft; 2], ConversationMessage) {
    let (mut value, is_error) = match result {
        Ok(value) => (value, false),
        Err(message) => (json!(message), true),
    };
    let mut content = match &value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    if content.chars().count() > chars_max {
        content = content.chars().take(chars_max).collect::<String>()
            + " … [cut: the result was longer than the limit]";
        value = json!(content);
    }
    let status = ids.call_merge(call, json!({ "status": if is_error { "error" } else { "done" } }));
    let mut result = ids.call_draft(call, EventKind::ToolResult);
    result.message_id = Some(Uuid::new_v4());
    result.content = json!({
        "tool_call_id": call.call_id,
        "name": call.name,
        "result": value,
        "is_error": is_error,
    });
    let message =
        ConversationMessage::ToolResult { tool_call_id: call.call_id.clone(), content, is_error };
    ([status, result], message)
}

impl Run {
    pub(super) fn result_drafts(
        &self,
        call: &PendingCall,
        result: Result<Value, String>,
    ) -> ([EventDraft; 2], ConversationMessage) {
        result_drafts(self.ids, call, result, self.limits.tool_result_chars_max)
    }

    /// Writes one result for a call and marks the call's card done.
    async fn emit_result(
        &mut self,
        call: &PendingCall,
        result: Result<Value, String>,
    ) -> Result<ConversationMessage, AppendError> {
        let (drafts, message) = self.result_drafts(call, result);
        for draft in drafts {
            self.emit(draft).await?;
        }
        Ok(message)
    }

    /// Gives calls that never ran their one (error) result.
    pub(super) async fn answer_unrun(
        &mut self,
        calls: &[PendingCall],
        why: &str,
    ) -> Result<(), AppendError> {
        for call in calls.iter().filter(|call| !call.answered_by_provider) {
            self.emit_result(call, Err(why.to_owned())).await?;
        }
        Ok(())
    }

    /// Why `call` gets an error result without running, if it does.
    fn refusal(&self, call: &PendingCall) -> Option<String> {
        if let Some(why) = &call.refused {
            Some(why.clone())
        } else if let Some(problem) = call.input_problem() {
            Some(problem)
        } else if !self.tools.iter().any(|tool| tool.spec().name == call.name) {
            Some(format!("there is no tool named {:?}", call.name))
        } else {
            None
        }
    }

    /// The names of the run's tools that run in the client.
    pub(super) fn client_tool_names(&self) -> Vec<String> {
        self.tools
            .iter()
            .filter(|tool| tool.runs_in_client())
            .map(|tool| tool.spec().name)
            .collect()
    }

    /// Whether `name` is a tool that runs in the client: its calls wait for the client's result.
    pub(super) fn runs_in_client(&self, name: &str) -> bool {
        self.tools.iter().any(|tool| tool.runs_in_client() && tool.spec().name == name)
    }

    /// Whether `call` waits for a person before it runs.
    fn needs_approval(&self, call: &PendingCall) -> bool {
        let configured = || {
            self.tools.iter().any(|tool| tool.requires_approval() && tool.spec().name == call.name)
        };
        !call.approved && (self.requires_approval.contains(&call.name) || configured())
    }

    /// Runs the calls of one step concurrently, each on its own task; writes their progress and
    /// exactly one result per call; returns the results for the next LLM call. Calls whose tool
    /// requires approval are held back, unanswered (a call that cannot run at all is refused
    /// rather than held: there is nothing to approve).
    ///
    /// Write-ahead for tools: no tool starts before everything emitted so far (the calls'
    /// input and `ready`) is committed. A crash while a tool works then leaves its call in the
    /// log for recovery to answer, and the call is visible for as long as its tool runs.
    pub(super) async fn run_tools(
        &mut self,
        calls: Vec<PendingCall>,
    ) -> Result<ToolsRan, AppendError> {
        self.flush().await?;
        let (updates, mut incoming) = mpsc::channel::<(usize, ToolUpdate)>(TOOL_UPDATES_QUEUE_MAX);
        let mut tasks = Vec::with_capacity(calls.len());
        // Refusals are written here, not queued: queued before anything read the queue, a step
        // with more refused calls than the queue holds waited on itself forever.
        let mut refusals = Vec::new();
        let mut held = vec![false; calls.len()];
        for (index, call) in calls.iter().enumerate() {
            if let Some(why) = self.refusal(call) {
                refusals.push((index, why));
                continue;
            }
            if self.needs_approval(call) || self.runs_in_client(&call.name) {
                held[index] = true;
                continue;
            }
            let updates = updates.clone();
            let tools = self.tools.clone();
            let name = call.name.clone();
            let input = call.input.clone().unwrap_or(json!({}));
            let cancel = self.cancel.child_token();
            let metrics = self.metrics().clone();
            let span = self.trace.child(
                format!("execute_tool {name}"),
                vec![
                    KeyValue::new("gen_ai.operation.name", "execute_tool"),
                    KeyValue::new("gen_ai.tool.name", name.clone()),
                    KeyValue::new("gen_ai.tool.call.id", call.call_id.clone()),
                ],
            );
            tasks.push(tokio::spawn(async move {
                let Some(tool) = tools.iter().find(|tool| tool.spec().name == name) else {
                    span.end();
                    return;
                };
                let (progress, mut reports) = mpsc::channel(TOOL_PROGRESS_QUEUE_MAX);
                let started = std::time::Instant::now();
                let work = tool.call(crate::tools::ToolCall { input, progress, cancel });
                tokio::pin!(work);
                let result = loop {
                    tokio::select! {
                        result = &mut work => break result,
                        Some(report) = reports.recv() => {
                            let _ = updates.send((index, ToolUpdate::Progress(report))).await;
                        }
                    }
                };
                // Only the run's own tools get here: the name is one of the configured set.
                metrics.tool_call(&name, result.is_ok(), started.elapsed());
                if result.is_err() {
                    span.fail("tool_error");
                }
                span.end();
                let _ = updates.send((index, ToolUpdate::Done(result))).await;
            }));
        }
        drop(updates);

        let mut answered: Vec<Option<ConversationMessage>> = calls.iter().map(|_| None).collect();
        for (index, why) in refusals {
            answered[index] = Some(self.emit_result(&calls[index], Err(why)).await?);
        }
        while let Some((index, update)) = incoming.recv().await {
            match update {
                ToolUpdate::Progress(report) => {
                    self.emit(self.ids.call_merge(&calls[index], report)).await?;
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
                None if held[index] => {}
                None => results.push(
                    self.emit_result(&calls[index], Err("the tool ended without a result".into()))
                        .await?,
                ),
            }
        }
        let held =
            calls.into_iter().zip(held).filter_map(|(call, held)| held.then_some(call)).collect();
        Ok(ToolsRan { results, held })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::step::{Step, Usage};
    use crate::provider::ProviderEvent;

    fn call() -> (RunIds, PendingCall) {
        let ids = RunIds { run_id: Uuid::from_u128(1), thread_id: Uuid::from_u128(2) };
        let mut step = Step::new(ids, Usage::default());
        step.apply(ProviderEvent::ToolCallStart { id: "c".into(), name: "calculator".into() });
        step.apply(ProviderEvent::ToolCallEnd { id: "c".into() });
        (ids, step.finish().calls.remove(0))
    }

    #[test]
    fn a_result_marks_the_card_then_carries_the_value() {
        // (result, the card's status, the logged result, what the model is told, is_error)
        let cases = [
            (Ok(json!(42)), "done", json!(42), "42", false),
            (Ok(json!("noon")), "done", json!("noon"), "noon", false),
            (Err("boom".to_owned()), "error", json!("boom"), "boom", true),
            (
                Ok(json!("abcdefghij")),
                "done",
                json!("abcd … [cut: the result was longer than the limit]"),
                "abcd … [cut: the result was longer than the limit]",
                false,
            ),
        ];
        let (ids, call) = call();
        for (result, status, logged, told, error) in cases {
            let ([card, result], message) = result_drafts(ids, &call, result, 4);
            assert_eq!(card.delta, Some(json!({ "status": status })));
            assert_eq!(card.thread_id, Some(call.thread_id));
            assert_eq!(result.content["result"], logged);
            assert_eq!(result.content["is_error"], json!(error));
            assert_eq!(
                message,
                ConversationMessage::ToolResult {
                    tool_call_id: call.call_id.clone(),
                    content: told.into(),
                    is_error: error,
                }
            );
        }
    }
}
