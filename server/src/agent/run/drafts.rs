//! What opens and closes a run, as drafts (pure, tested with data in `run/tests.rs`): the
//! opening (`run_started`, the user's message or the approval answers), the end for each
//! outcome, what a run past its limit still writes, and an event's size as the limit counts it.

use app::EventKind;
use serde_json::json;
use uuid::Uuid;

use crate::agent::approval::ApprovalTurn;
use crate::agent::registry::RunOptions;
use crate::agent::step::{RunIds, Usage};
use crate::provider::ProviderError;
use crate::provider::{ConversationMessage, ProviderRequest};
use crate::store::EventDraft;

/// Whether a run past its event limit still writes `draft`: results (and their cards' status)
/// for open tool calls, the error and the end. Output still on its way is dropped.
pub(super) fn closes_a_run(draft: &EventDraft) -> bool {
    matches!(draft.kind, EventKind::ToolResult | EventKind::Error)
        || draft.kind.is_run_end()
        || (draft.kind == EventKind::ToolCall
            && draft.delta_path.as_deref() == Some("")
            && draft.delta.as_ref().is_some_and(|delta| delta.get("status").is_some()))
}

/// `run_started` (how the run was asked for) and what the run answers: the user's message, or a
/// person's answer to an approval request.
pub(super) fn opening_drafts(
    ids: RunIds,
    provider: &str,
    request: &ProviderRequest,
    options: &RunOptions,
    answer: Option<&ApprovalTurn>,
) -> Vec<EventDraft> {
    let mut started = ids.draft(EventKind::RunStarted);
    started.metadata = json!({
        "provider": provider,
        "model": request.model,
        "background": options.background,
        "stream_tokens": options.stream_tokens,
    });
    if let Some(client) = &options.client {
        started.metadata["client"] = client.clone();
    }
    if !options.client_tools.is_empty() {
        started.metadata[crate::agent::client_tools::METADATA_FIELD] =
            crate::agent::client_tools::to_metadata(&options.client_tools);
    }
    if let Some(run_id) = answer.and_then(|turn| turn.continues) {
        started.metadata["continues"] = json!(run_id);
    }
    let mut drafts = vec![started];
    if let Some(turn) = answer {
        for answer in turn.answers.iter().filter(|answer| answer.returned.is_none()) {
            drafts.push(crate::agent::approval::response_draft(ids, answer));
        }
        return drafts;
    }
    if let Some(ConversationMessage::User { text }) = request.messages.last() {
        let mut user = ids.draft(EventKind::User);
        user.block_id = Some(Uuid::new_v4());
        user.message_id = Some(Uuid::new_v4());
        user.content = json!({ "text": text });
        if let Some(otid) = &options.otid {
            user.content["otid"] = json!(otid);
        }
        drafts.push(user);
    }
    drafts
}

/// An event's size as the log keeps it: its delta, content and raw provider event as JSON.
pub(crate) fn draft_bytes(draft: &EventDraft) -> usize {
    let mut counted = CountingWriter(0);
    for value in
        [draft.delta.as_ref(), Some(&draft.content), draft.raw.as_ref()].into_iter().flatten()
    {
        // Writing into a counter cannot fail.
        let _ = serde_json::to_writer(&mut counted, value);
    }
    counted.0
}

/// Counts the bytes written to it, keeps none.
struct CountingWriter(usize);

impl std::io::Write for CountingWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What closes a run that ended with `outcome`: the run's end last, after an `error` for a
/// failure.
pub(super) fn closing_drafts(
    ids: RunIds,
    outcome: Outcome,
    over_limit: Option<&'static str>,
    usage: Usage,
) -> Vec<EventDraft> {
    let end = |kind, content| {
        let mut draft = ids.draft(kind);
        draft.content = content;
        draft
    };
    match outcome {
        Outcome::Completed(stop_reason) => vec![end(
            EventKind::RunCompleted,
            json!({ "stop_reason": stop_reason, "usage": usage.json() }),
        )],
        Outcome::AwaitingApproval(awaiting) => vec![end(
            EventKind::RunCompleted,
            json!({
                "stop_reason": crate::agent::approval::waiting_stop_reason(&awaiting),
                "awaiting": awaiting,
                "usage": usage.json(),
            }),
        )],
        Outcome::Cancelled if over_limit.is_some() => vec![end(
            EventKind::RunCompleted,
            json!({ "stop_reason": over_limit, "usage": usage.json() }),
        )],
        Outcome::Cancelled => vec![end(
            EventKind::RunCancelled,
            json!({ "stop_reason": "cancelled", "usage": usage.json() }),
        )],
        Outcome::Failed(error) => {
            let detail = json!({
                "type": error.kind,
                "message": error.message,
                "retryable": error.retryable,
            });
            let mut reported = end(EventKind::Error, detail.clone());
            reported.message_id = Some(Uuid::new_v4());
            vec![
                reported,
                end(
                    EventKind::RunFailed,
                    json!({ "stop_reason": "error", "error": detail, "usage": usage.json() }),
                ),
            ]
        }
    }
}

/// How the whole run ended.
pub(in crate::agent) enum Outcome {
    Completed(String),
    /// Ended to wait for a person's answers to these calls, or a client's results (see
    /// [`super::approval::awaiting`]).
    AwaitingApproval(Vec<serde_json::Value>),
    Cancelled,
    Failed(ProviderError),
}
