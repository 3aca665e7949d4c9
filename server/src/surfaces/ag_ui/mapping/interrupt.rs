//! A run that waits for a person, as AG-UI says it: `RUN_FINISHED` with an interrupt outcome,
//! one interrupt per tool call the run's end lists as `awaiting`.

use serde_json::{json, Value};

/// The answer the client sends back for a tool approval (`resume[].payload`).
fn approval_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "approved": { "type": "boolean" },
            "reason": { "type": "string" }
        },
        "required": ["approved"]
    })
}

/// A run that ended `requires_approval`: an interrupt per call it waits for (its `awaiting`),
/// answered by a `resume` entry with that id — the call's id.
pub(super) fn interrupt_outcome(end: &Value) -> Option<Value> {
    if end.get("stop_reason").and_then(Value::as_str) != Some("requires_approval") {
        return None;
    }
    let interrupts: Vec<Value> = end
        .get("awaiting")
        .and_then(Value::as_array)?
        .iter()
        // A client tool's call is answered by a tool message, not a resume.
        .filter(|call| call.get("client").and_then(Value::as_bool) != Some(true))
        .filter_map(|call| {
            let id = call.get("tool_call_id").and_then(Value::as_str)?;
            let name = call.get("name").and_then(Value::as_str).unwrap_or("a tool");
            Some(json!({
                "id": id,
                "reason": "tool_approval",
                "message": format!("{name} needs approval"),
                "toolCallId": id,
                "responseSchema": approval_schema(),
            }))
        })
        .collect();
    (!interrupts.is_empty()).then(|| json!({ "type": "interrupt", "interrupts": interrupts }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_waiting_for_approval_finishes_with_one_interrupt_per_call() {
        let end = json!({
            "stop_reason": "requires_approval",
            "awaiting": [{ "tool_call_id": "c1", "name": "calculator", "input": {} }],
        });
        let outcome = interrupt_outcome(&end).unwrap();
        assert_eq!(outcome["type"], "interrupt");
        assert_eq!(
            outcome["interrupts"][0],
            json!({
                "id": "c1",
                "reason": "tool_approval",
                "message": "calculator needs approval",
                "toolCallId": "c1",
                "responseSchema": approval_schema(),
            })
        );
        for other in [
            json!({ "stop_reason": "end_turn" }),
            json!({ "stop_reason": "requires_approval", "awaiting": [] }),
            json!({ "stop_reason": "requires_approval" }),
            // Client tools' calls are answered with tool messages: no interrupt.
            json!({ "stop_reason": "requires_client_tool",
                    "awaiting": [{ "tool_call_id": "c2", "name": "confirm", "input": {}, "client": true }] }),
            json!({ "stop_reason": "requires_approval",
                    "awaiting": [{ "tool_call_id": "c2", "name": "confirm", "input": {}, "client": true }] }),
        ] {
            assert_eq!(interrupt_outcome(&other), None, "{other}");
        }
    }
}
