//! Human approval of tool calls, as log events.
//!
//! An agent names the tools a person must approve (`metadata.requires_approval: ["tool", …]`).
//! When the model calls one, the run writes `approval_requested` on the call's card and **ends**
//! with stop reason `requires_approval`: nothing waits in memory, so a crash loses nothing. An
//! answer starts the continuation run, whose first event after `run_started` is the
//! `approval_response`; the approved call runs (a denied one gets an error result with the
//! reason) and the loop goes on — or, while other calls of the same step still wait, the run
//! ends with `requires_approval` again, so the model is only called once every call of its step
//! has its result.
//!
//! Exactly one answer per request: the answer claims the key `approval:<call id>` in the store
//! (atomic, across servers and restarts) before anything is written; a second answer is refused.
//!
//! Tools that run in the client (`client_tools.rs`) wait the same way: the call's request says
//! `client: true`, the run ends `requires_client_tool` (or `requires_approval` when a person's
//! answer is awaited too), and the answer is the client's result, which the continuation writes
//! as the call's `tool_result` before the model is called again.

use app::approvals::{self, ApprovalState};
use app::timeline::Timeline;
use app::EventKind;
use serde_json::{json, Value};
use uuid::Uuid;

use super::start_error::StartError;
use super::step::{PendingCall, RunIds};
use crate::store::EventDraft;

/// The stop reason of a run that ended to wait for a person's approval.
pub const REQUIRES_APPROVAL: &str = "requires_approval";

/// The stop reason of a run that ended to wait for the results of tools that run in the client
/// (and for nothing a person must approve).
pub const REQUIRES_CLIENT_TOOL: &str = "requires_client_tool";

/// Tool names one agent may list in `metadata.requires_approval`.
pub const APPROVAL_TOOLS_MAX: usize = 256;
/// A client tool's result longer than this (its JSON, in bytes) is refused (what the log keeps
/// of it is cut further, to `tool_result_chars_max`).
pub const CLIENT_OUTPUT_BYTES_MAX: usize = 256 * 1024;
/// A denial's reason longer than this (in characters) is refused.
pub const APPROVAL_REASON_CHARS_MAX: usize = 4096;
/// Tool call ids longer than this are refused (the answer's key must fit the key store).
pub const APPROVAL_CALL_ID_CHARS_MAX: usize = 160;
/// What the key of an answer starts with; the call id follows.
pub const APPROVAL_KEY_PREFIX: &str = "approval:";

const _: () = assert!(
    APPROVAL_KEY_PREFIX.len() + APPROVAL_CALL_ID_CHARS_MAX
        <= crate::limits::IDEMPOTENCY_KEY_CHARS_MAX
);

/// A person's answer to an approval request, as a surface received it.
#[derive(Clone, Debug, PartialEq)]
pub struct ApprovalDecision {
    pub tool_call_id: String,
    pub approve: bool,
    pub reason: Option<String>,
    /// A client tool's result (`Err`: the client's error text): only for a call of a tool that
    /// runs in the client, which takes nothing else but a refusal (`approve: false`).
    pub output: Option<Result<Value, String>>,
}

impl ApprovalDecision {
    /// Refuses what can be refused without the log.
    pub fn check(&self) -> Result<(), StartError> {
        let id = self.tool_call_id.trim();
        if id.is_empty() || id.chars().count() > APPROVAL_CALL_ID_CHARS_MAX {
            return Err(StartError::BadApproval(format!(
                "call_id must be 1 to {APPROVAL_CALL_ID_CHARS_MAX} characters"
            )));
        }
        if self
            .reason
            .as_ref()
            .is_some_and(|reason| reason.chars().count() > APPROVAL_REASON_CHARS_MAX)
        {
            return Err(StartError::BadApproval(format!(
                "reason is longer than {APPROVAL_REASON_CHARS_MAX} characters"
            )));
        }
        let output_bytes = match &self.output {
            Some(Ok(value)) => value.to_string().len(),
            Some(Err(text)) => text.len(),
            None => 0,
        };
        if output_bytes > CLIENT_OUTPUT_BYTES_MAX {
            return Err(StartError::BadApproval(format!(
                "the result of tool call {id} is over {CLIENT_OUTPUT_BYTES_MAX} bytes"
            )));
        }
        Ok(())
    }

    /// A client tool's result for call `tool_call_id`.
    pub fn returned(tool_call_id: String, output: Result<Value, String>) -> ApprovalDecision {
        ApprovalDecision { tool_call_id, approve: true, reason: None, output: Some(output) }
    }

    /// The key that makes this answer the only one.
    pub fn key(&self) -> String {
        format!("{APPROVAL_KEY_PREFIX}{}", self.tool_call_id.trim())
    }
}

/// An answer checked against the log: the call it answers and where its card is.
#[derive(Debug)]
pub struct ApprovalAnswer {
    pub call: PendingCall,
    pub approve: bool,
    pub reason: Option<String>,
    /// For a client tool's call: the result the continuation writes (the client's, or an error
    /// when it declined the call). `None` for a person's answer.
    pub returned: Option<Result<Value, String>>,
    /// The `approval_requested` message answered (Letta names the request by it).
    pub request_message_id: Uuid,
}

/// What a continuation run carries out: one or more answers, and what still waits after them.
#[derive(Debug)]
pub struct ApprovalTurn {
    pub answers: Vec<ApprovalAnswer>,
    /// Requests of the log left unanswered (as [`awaiting`] lists them): while any is, the run
    /// ends `requires_approval` again without asking the model.
    pub still_pending: Vec<Value>,
    /// The turn's first run (the one that answered the user's message): the continuation
    /// names it in its `run_started` (`continues`), so a surface that shows a turn as one
    /// message (the AI SDK's) goes on with that message.
    pub continues: Option<Uuid>,
    /// The run that asked (the newest, when several did): its `run_started` keeps the client
    /// tools the continuation offers again when its request gives none.
    pub asked_by: Option<Uuid>,
}

/// The tool names `metadata.requires_approval` lists (none when absent or malformed; agent
/// creation refuses malformed lists).
pub fn tools_requiring_approval(metadata: &Value) -> Vec<String> {
    metadata
        .get("requires_approval")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .take(APPROVAL_TOOLS_MAX)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Why an agent's `requires_approval` cannot be taken.
pub fn check_agent_approvals(metadata: &Value) -> Result<(), String> {
    let Some(names) = metadata.get("requires_approval") else {
        return Ok(());
    };
    let names = names
        .as_array()
        .filter(|names| names.iter().all(Value::is_string))
        .ok_or("metadata.requires_approval must be a list of tool names")?;
    if names.len() > APPROVAL_TOOLS_MAX {
        return Err(format!(
            "metadata.requires_approval names more than {APPROVAL_TOOLS_MAX} tools"
        ));
    }
    Ok(())
}

/// Checks `decisions` against the folded log: each request must exist and still be pending,
/// and no call may be answered twice.
///
/// A person's answer (no output) answers approval requests only; a client tool's call takes its
/// result or its error — a person's "deny" of it is refused, unless `by_server` (a timeout).
pub fn answer_from_timeline(
    timeline: &Timeline,
    decisions: &[ApprovalDecision],
    by_server: bool,
) -> Result<ApprovalTurn, StartError> {
    let all = approvals::approvals(timeline);
    let mut answers: Vec<ApprovalAnswer> = Vec::with_capacity(decisions.len());
    let mut continues = None;
    // (position in the log's order of requests, run): the newest asking run.
    let mut asked_by: Option<(usize, Uuid)> = None;
    for decision in decisions {
        let call_id = decision.tool_call_id.trim();
        if answers.iter().any(|answer| answer.call.call_id == call_id) {
            return Err(StartError::BadApproval(format!(
                "tool call {call_id} is answered twice in one request"
            )));
        }
        let Some((position, approval)) =
            all.iter().enumerate().find(|(_, approval)| approval.tool_call_id == call_id)
        else {
            return Err(StartError::UnknownApproval(call_id.to_owned()));
        };
        if approval.state != ApprovalState::Pending {
            return Err(StartError::AlreadyAnswered {
                tool_call_id: call_id.to_owned(),
                answer: describe(&approval.state),
            });
        }
        let returned = match (approval.client, &decision.output, decision.approve) {
            (true, Some(output), true) => Some(output.clone()),
            (true, Some(Err(error)), _) => Some(Err(error.clone())),
            (true, None, false) if by_server => Some(Err(declined(decision.reason.as_deref()))),
            (true, None, false) => {
                return Err(StartError::BadApproval(format!(
                    "tool call {call_id} runs in the client: answer it with its result or its \
                     error (an approval's answer does not)"
                )))
            }
            (true, Some(Ok(_)), false) => Some(Err(declined(decision.reason.as_deref()))),
            (true, None, true) => {
                return Err(StartError::BadApproval(format!(
                    "tool call {call_id} runs in the client: answer it with its result"
                )))
            }
            (false, Some(_), _) => {
                return Err(StartError::BadApproval(format!(
                    "tool call {call_id} waits for approval, not for a result: approve or deny it"
                )))
            }
            (false, None, _) => None,
        };
        // The turn's first run: the asking run's own `continues`, or the asking run.
        let asking = approval.request.run_id;
        if let Some(run_id) = asking {
            if asked_by.is_none_or(|(newest, _)| position > newest) {
                asked_by = Some((position, run_id));
            }
        }
        let root = asking.and_then(|run_id| timeline.run(run_id)?.continues);
        continues = continues.or(root).or(asking);
        answers.push(ApprovalAnswer {
            call: PendingCall::resumed(
                call_id.to_owned(),
                approval.tool_name.to_owned(),
                approval.input.clone(),
                card_of(timeline, approval),
                decision.approve,
            ),
            approve: decision.approve,
            reason: decision
                .reason
                .as_deref()
                .map(str::trim)
                .filter(|reason| !reason.is_empty())
                .map(str::to_owned),
            request_message_id: approval.request.message_id,
            returned,
        });
    }
    let still_pending = all
        .iter()
        .filter(|other| {
            other.state == ApprovalState::Pending
                && !answers.iter().any(|answer| answer.call.call_id == other.tool_call_id)
        })
        .map(|other| awaiting(other.tool_call_id, other.tool_name, other.input, other.client))
        .collect();
    Ok(ApprovalTurn {
        answers,
        still_pending,
        continues,
        asked_by: asked_by.map(|(_, run_id)| run_id),
    })
}

/// Where the call of `approval` is drawn (thread, block, message of its `tool_call` event): its
/// status and result land on it, in the continuation run.
fn card_of(timeline: &Timeline, approval: &approvals::Approval<'_>) -> (Uuid, Uuid, Uuid) {
    timeline
        .messages()
        .iter()
        .find(|message| {
            message.kind == EventKind::ToolCall
                && approvals::call_id_of(message) == Some(approval.tool_call_id)
        })
        .map(|message| {
            (message.thread_id.unwrap_or(message.block_id), message.block_id, message.message_id)
        })
        .unwrap_or((
            approval.request.thread_id.unwrap_or(approval.request.block_id),
            approval.request.block_id,
            Uuid::new_v4(),
        ))
}

/// How an earlier answer is described to whoever answers again.
fn describe(state: &ApprovalState) -> String {
    match state {
        ApprovalState::Pending => "nothing yet".to_owned(),
        ApprovalState::Approved => "approved".to_owned(),
        ApprovalState::Denied { reason: None } => "denied".to_owned(),
        ApprovalState::Denied { reason: Some(reason) } => format!("denied ({reason})"),
        ApprovalState::Closed => "closed without an answer (its run ended)".to_owned(),
        ApprovalState::Returned { is_error: false } => "the client returned its result".to_owned(),
        ApprovalState::Returned { is_error: true } => "the client returned an error".to_owned(),
    }
}

/// The error result of a client tool's call the client declined (or did not answer in time).
pub fn declined(reason: Option<&str>) -> String {
    match reason {
        Some(reason) => format!("the client did not run this call: {reason}"),
        None => "the client did not run this call".to_owned(),
    }
}

/// One call a run that ends `requires_approval` (or `requires_client_tool`) waits for, as its
/// end lists it (`awaiting`; `client: true` for a client tool's): every surface can say what is
/// pending from the end alone.
pub fn awaiting(tool_call_id: &str, name: &str, input: &Value, client: bool) -> Value {
    let mut call = json!({ "tool_call_id": tool_call_id, "name": name, "input": input });
    if client {
        call["client"] = json!(true);
    }
    call
}

/// The calls `held` as a run's end lists them; `in_client` says which tools run in the client.
pub fn awaiting_calls(held: &[PendingCall], in_client: impl Fn(&str) -> bool) -> Vec<Value> {
    held.iter()
        .map(|call| {
            awaiting(
                &call.call_id,
                &call.name,
                call.input.as_ref().unwrap_or(&json!({})),
                in_client(&call.name),
            )
        })
        .collect()
}

/// The stop reason of a run that ends waiting for `awaiting`: a person's answer when any of
/// them needs one, else the client's results.
pub fn waiting_stop_reason(awaiting: &[Value]) -> &'static str {
    let client = |call: &Value| call.get("client").and_then(Value::as_bool) == Some(true);
    if awaiting.iter().all(client) {
        REQUIRES_CLIENT_TOOL
    } else {
        REQUIRES_APPROVAL
    }
}

/// The events that ask for approval of `call` — or, for a tool that runs in the client
/// (`client`), for its result: its card marked, then the request.
pub fn request_drafts(ids: RunIds, call: &PendingCall, client: bool) -> [EventDraft; 2] {
    let waits = if client { "awaiting_client" } else { "awaiting_approval" };
    let status = ids.call_merge(call, json!({ "status": waits }));
    let mut request = ids.call_draft(call, EventKind::ApprovalRequested);
    request.message_id = Some(Uuid::new_v4());
    request.content = json!({
        "tool_call_id": call.call_id,
        "name": call.name,
        "input": call.input.clone().unwrap_or(json!({})),
    });
    if client {
        request.content["client"] = json!(true);
    }
    [status, request]
}

/// The answer, written on the call's card by the run it starts (a person's; a client tool's
/// result is written as the call's `tool_result` instead, by [`Run::carry_out`]).
pub fn response_draft(ids: RunIds, answer: &ApprovalAnswer) -> EventDraft {
    let mut response = ids.call_draft(&answer.call, EventKind::ApprovalResponse);
    response.message_id = Some(Uuid::new_v4());
    response.content = json!({
        "tool_call_id": answer.call.call_id,
        "name": answer.call.name,
        "approve": answer.approve,
        "request_message_id": answer.request_message_id,
    });
    if let Some(reason) = &answer.reason {
        response.content["reason"] = json!(reason);
    }
    response
}

/// The error result a denied call gets: what the model reads.
pub fn denial(reason: Option<&str>) -> String {
    match reason {
        Some(reason) => format!("a person denied this call: {reason}"),
        None => "a person denied this call".to_owned(),
    }
}

#[cfg(test)]
mod tests;
