//! Approvals as the log states them: which tool calls wait for a person, and what was answered.
//!
//! A call of a tool that runs in the client (an AI SDK tool without `execute`, an AG-UI
//! frontend tool, a Letta client tool) waits the same way: its `approval_requested` says
//! `client: true`, and it is answered by the client's result (a `tool_result` the run it starts
//! writes) rather than by a yes or no. One fold, one key per call, one answer.
//!
//! A run that reaches a tool needing approval writes `approval_requested` (the call's id, tool
//! and input) and ends with stop reason `requires_approval`; an answer is written as
//! `approval_response` by the run it starts. Nothing about an approval lives anywhere but the
//! log, so this fold — shared by the server (which refuses a second answer), the live view (which
//! shows the buttons) and the history pages — gives every reader the same state, after any
//! restart.

use serde_json::Value;
use uuid::Uuid;

use crate::timeline::{Timeline, TimelineMessage};
use crate::EventKind;

/// Where one approval request stands.
#[derive(Clone, Debug, PartialEq)]
pub enum ApprovalState {
    /// Nobody has answered yet.
    Pending,
    Approved,
    Denied {
        reason: Option<String>,
    },
    /// The call has a result without an answer (its run was cancelled, or a crash's recovery
    /// answered it): nothing is left to approve.
    Closed,
    /// A client tool's call has its result (the client's, or an error result when the client
    /// declined it or did not answer in time).
    Returned {
        is_error: bool,
    },
}

/// One approval request of the log and where it stands.
#[derive(Clone, Debug, PartialEq)]
pub struct Approval<'a> {
    pub tool_call_id: &'a str,
    pub tool_name: &'a str,
    pub input: &'a Value,
    /// The tool runs in the client: the answer is its result, not a yes or no.
    pub client: bool,
    /// The `approval_requested` message (Letta's `approval_request_id` is made of its id).
    pub request: &'a TimelineMessage,
    pub state: ApprovalState,
}

/// The tool call an approval message is about.
pub fn call_id_of(message: &TimelineMessage) -> Option<&str> {
    message.content.get("tool_call_id").and_then(Value::as_str)
}

/// Whether an `approval_requested` message is a client tool's call waiting for its result.
pub fn is_client_request(message: &TimelineMessage) -> bool {
    message.content.get("client").and_then(Value::as_bool) == Some(true)
}

/// Every approval request of `timeline`, in log order, with where each stands.
pub fn approvals(timeline: &Timeline) -> Vec<Approval<'_>> {
    let mut found: Vec<Approval<'_>> = Vec::new();
    for message in timeline.messages() {
        let Some(call_id) = call_id_of(message) else {
            continue;
        };
        match message.kind {
            EventKind::ApprovalRequested => {
                if found.iter().any(|approval| approval.tool_call_id == call_id) {
                    continue;
                }
                found.push(Approval {
                    tool_call_id: call_id,
                    tool_name: message.content.get("name").and_then(Value::as_str).unwrap_or(""),
                    input: message.content.get("input").unwrap_or(&Value::Null),
                    client: is_client_request(message),
                    request: message,
                    state: ApprovalState::Pending,
                });
            }
            EventKind::ApprovalResponse | EventKind::ToolResult => {
                let Some(approval) =
                    found.iter_mut().find(|approval| approval.tool_call_id == call_id)
                else {
                    continue;
                };
                if approval.state != ApprovalState::Pending {
                    continue;
                }
                let is_error = || message.content.get("is_error").and_then(Value::as_bool);
                approval.state = if message.kind == EventKind::ToolResult && approval.client {
                    ApprovalState::Returned { is_error: is_error() == Some(true) }
                } else if message.kind == EventKind::ToolResult {
                    ApprovalState::Closed
                } else if message.content.get("approve").and_then(Value::as_bool) == Some(true) {
                    ApprovalState::Approved
                } else {
                    ApprovalState::Denied {
                        reason: message
                            .content
                            .get("reason")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                    }
                };
            }
            _ => {}
        }
    }
    found
}

/// The approval requests nobody has answered, in log order.
pub fn pending(timeline: &Timeline) -> Vec<Approval<'_>> {
    approvals(timeline)
        .into_iter()
        .filter(|approval| approval.state == ApprovalState::Pending)
        .collect()
}

/// Where the approval of tool call `tool_call_id` stands, if it was ever asked for.
pub fn state_of(timeline: &Timeline, tool_call_id: &str) -> Option<ApprovalState> {
    approvals(timeline)
        .into_iter()
        .find(|approval| approval.tool_call_id == tool_call_id)
        .map(|approval| approval.state)
}

/// The id Letta clients know an approval request by: `approval_request_id`, the id of the
/// `approval_request_message`.
pub fn letta_request_id(request_message_id: Uuid) -> String {
    format!("message-{request_message_id}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AgentEvent;
    use serde_json::json;

    use crate::testing::event;

    fn requested(seq: u64, call: &str) -> AgentEvent {
        event(
            seq,
            EventKind::ApprovalRequested,
            json!({"tool_call_id": call, "name": "get-sum", "input": {"a": 2}}),
        )
    }

    fn response(seq: u64, call: &str, approve: bool) -> AgentEvent {
        event(
            seq,
            EventKind::ApprovalResponse,
            json!({"tool_call_id": call, "approve": approve, "reason": "no"}),
        )
    }

    fn result(seq: u64, call: &str) -> AgentEvent {
        event(seq, EventKind::ToolResult, json!({"tool_call_id": call, "result": 5}))
    }

    fn client_requested(seq: u64, call: &str) -> AgentEvent {
        event(
            seq,
            EventKind::ApprovalRequested,
            json!({"tool_call_id": call, "name": "confirm", "input": {}, "client": true}),
        )
    }

    fn failed_result(seq: u64, call: &str) -> AgentEvent {
        event(
            seq,
            EventKind::ToolResult,
            json!({"tool_call_id": call, "result": "declined", "is_error": true}),
        )
    }

    #[test]
    fn each_request_stands_where_its_first_answer_put_it() {
        // (log, the state of call "a", how many are pending)
        let cases: Vec<(Vec<AgentEvent>, Option<ApprovalState>, usize)> = vec![
            (vec![], None, 0),
            (vec![result(1, "a")], None, 0),
            (vec![requested(1, "a")], Some(ApprovalState::Pending), 1),
            (vec![requested(1, "a"), requested(2, "b")], Some(ApprovalState::Pending), 2),
            (
                vec![requested(1, "a"), response(2, "a", true), result(3, "a")],
                Some(ApprovalState::Approved),
                0,
            ),
            (
                vec![requested(1, "a"), response(2, "a", false)],
                Some(ApprovalState::Denied { reason: Some("no".into()) }),
                0,
            ),
            // A second answer in the log (the server refuses one; a log could hold it) changes
            // nothing.
            (
                vec![requested(1, "a"), response(2, "a", false), response(3, "a", true)],
                Some(ApprovalState::Denied { reason: Some("no".into()) }),
                0,
            ),
            (vec![requested(1, "a"), result(2, "a")], Some(ApprovalState::Closed), 0),
            (
                vec![requested(1, "a"), requested(2, "b"), response(3, "b", true)],
                Some(ApprovalState::Pending),
                1,
            ),
            // A client tool's call waits for its result, which answers it.
            (vec![client_requested(1, "a")], Some(ApprovalState::Pending), 1),
            (
                vec![client_requested(1, "a"), result(2, "a")],
                Some(ApprovalState::Returned { is_error: false }),
                0,
            ),
            (
                vec![client_requested(1, "a"), failed_result(2, "a")],
                Some(ApprovalState::Returned { is_error: true }),
                0,
            ),
            (
                vec![client_requested(1, "a"), result(2, "a"), failed_result(3, "a")],
                Some(ApprovalState::Returned { is_error: false }),
                0,
            ),
            // An answer before its request (not something the server writes) answers nothing.
            (vec![response(1, "a", true), requested(2, "a")], Some(ApprovalState::Pending), 1),
        ];
        for (events, state, pending_count) in cases {
            let mut timeline = Timeline::new();
            timeline.apply_all(events.clone());
            let kinds: Vec<_> = events.iter().map(|event| event.kind).collect();
            assert_eq!(state_of(&timeline, "a"), state, "{kinds:?}");
            assert_eq!(pending(&timeline).len(), pending_count, "{kinds:?}");
        }
    }

    #[test]
    fn a_request_carries_its_call() {
        let mut timeline = Timeline::new();
        timeline.apply_all([requested(1, "a")]);
        let found = pending(&timeline);
        assert_eq!(found[0].tool_name, "get-sum");
        assert_eq!(found[0].input, &json!({"a": 2}));
        assert_eq!(
            letta_request_id(found[0].request.message_id),
            format!("message-{}", Uuid::from_u128(1))
        );
    }
}
