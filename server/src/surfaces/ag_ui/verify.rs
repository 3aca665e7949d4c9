//! The ordering rules of an AG-UI stream, checked: what `@ag-ui/client` 1.0's `verifyEvents`
//! enforces, and no `null` anywhere (absent fields are omitted). Pure; used by the mapping's
//! tests and its fuzz target.

use std::collections::HashSet;

use serde_json::Value;

use super::mapping::AgUiEvent;

/// Checks `events`, the stream so far (`ended`: the whole stream): `RUN_STARTED` first;
/// CONTENT, ARGS and END only inside an open START of the same id; no START twice while open;
/// `RUN_FINISHED` only with nothing open; nothing after `RUN_FINISHED` or `RUN_ERROR`.
pub fn verify(events: &[AgUiEvent], ended: bool) -> Result<(), String> {
    let (mut text, mut reasoning, mut spans, mut calls, mut steps) =
        (HashSet::new(), HashSet::new(), HashSet::new(), HashSet::new(), HashSet::new());
    let mut finished = false;
    for (index, event) in events.iter().enumerate() {
        let json = serde_json::to_value(event).map_err(|error| error.to_string())?;
        let fail = |why: &str| Err(format!("event {index} ({}): {why}", json["type"]));
        if finished {
            return fail("after the run's end");
        }
        if (index == 0) != matches!(event, AgUiEvent::RunStarted { .. }) {
            return fail("RUN_STARTED must come first, and only first");
        }
        if has_null(&json) {
            return fail("holds a null");
        }
        let ok = match event {
            AgUiEvent::TextMessageStart { message_id, .. } => text.insert(message_id.as_str()),
            AgUiEvent::TextMessageContent { message_id, .. } => text.contains(message_id.as_str()),
            AgUiEvent::TextMessageEnd { message_id } => text.remove(message_id.as_str()),
            AgUiEvent::ReasoningStart { message_id } => spans.insert(message_id.as_str()),
            AgUiEvent::ReasoningEnd { message_id } => spans.remove(message_id.as_str()),
            AgUiEvent::ReasoningMessageStart { message_id, .. } => {
                reasoning.insert(message_id.as_str())
            }
            AgUiEvent::ReasoningMessageContent { message_id, .. } => {
                reasoning.contains(message_id.as_str())
            }
            AgUiEvent::ReasoningMessageEnd { message_id } => reasoning.remove(message_id.as_str()),
            AgUiEvent::ToolCallStart { tool_call_id, .. } => calls.insert(tool_call_id.as_str()),
            AgUiEvent::ToolCallArgs { tool_call_id, .. } => calls.contains(tool_call_id.as_str()),
            AgUiEvent::ToolCallEnd { tool_call_id } => calls.remove(tool_call_id.as_str()),
            AgUiEvent::StepStarted { step_name } => steps.insert(step_name.as_str()),
            AgUiEvent::StepFinished { step_name } => steps.remove(step_name.as_str()),
            AgUiEvent::RunFinished { .. } => {
                finished = true;
                [&text, &reasoning, &spans, &calls, &steps].iter().all(|open| open.is_empty())
            }
            AgUiEvent::RunError { .. } => {
                finished = true;
                true
            }
            AgUiEvent::RunStarted { .. }
            | AgUiEvent::ToolCallResult { .. }
            | AgUiEvent::MessagesSnapshot { .. } => true,
        };
        if !ok {
            return fail("out of order");
        }
    }
    crate::surfaces::finished_as_ended(finished, ended)
}

fn has_null(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.iter().any(has_null),
        Value::Object(fields) => fields.values().any(has_null),
        _ => false,
    }
}
