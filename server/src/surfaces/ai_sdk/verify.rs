//! The ordering rules of a UI message stream, checked: what the AI SDK client enforces (ai 5.0.x
//! and 6.0.x up to 6.0.230 reject anything else) and what this server adds. Pure; used by the
//! mapping's tests and its fuzz target.

use std::collections::HashSet;

use super::mapping::Chunk;

/// Checks `chunks`, the stream so far (`ended`: the whole stream): `start` first; parts and
/// tool inputs started once, inside a step; deltas and ends inside their part; tool input
/// deltas before the input is available; outputs only for available inputs; every part closed
/// before its step finishes; every step closed before `finish`; nothing after `finish`.
pub fn verify(chunks: &[Chunk], ended: bool) -> Result<(), String> {
    let mut open_parts: HashSet<&str> = HashSet::new();
    let (mut step_open, mut finished) = (false, false);
    let (mut inputs_started, mut inputs_available) = (HashSet::new(), HashSet::new());
    let mut outputs: HashSet<&str> = HashSet::new();
    // Before its first step, a stream may carry out answers for calls the client holds from
    // the turn's earlier run (a continuation after an approval).
    let mut stepped = false;
    for (index, chunk) in chunks.iter().enumerate() {
        let name = serde_json::to_value(chunk)
            .map_or_else(|_| "?".into(), |json| json["type"].to_string());
        let fail = |why: &str| Err(format!("chunk {index} ({name}): {why}"));
        if finished {
            return fail("after finish");
        }
        if (index == 0) != matches!(chunk, Chunk::Start { .. }) {
            return fail("start must come first, and only first");
        }
        let ok = match chunk {
            Chunk::StartStep => {
                stepped = true;
                !std::mem::replace(&mut step_open, true)
            }
            Chunk::FinishStep => {
                let ok = step_open && open_parts.is_empty();
                step_open = false;
                ok
            }
            Chunk::TextStart { id } | Chunk::ReasoningStart { id } => {
                step_open && open_parts.insert(id.as_str())
            }
            Chunk::TextDelta { id, .. } | Chunk::ReasoningDelta { id, .. } => {
                open_parts.contains(id.as_str())
            }
            Chunk::TextEnd { id } | Chunk::ReasoningEnd { id } => open_parts.remove(id.as_str()),
            Chunk::ToolInputStart { tool_call_id, .. } => {
                step_open && inputs_started.insert(tool_call_id.as_str())
            }
            Chunk::ToolInputDelta { tool_call_id, .. } => {
                inputs_started.contains(tool_call_id.as_str())
                    && !inputs_available.contains(tool_call_id.as_str())
            }
            Chunk::ToolInputAvailable { tool_call_id, .. } => {
                inputs_started.contains(tool_call_id.as_str())
                    && inputs_available.insert(tool_call_id.as_str())
            }
            Chunk::ToolApprovalRequest { tool_call_id, .. } => {
                inputs_available.contains(tool_call_id.as_str())
                    && !outputs.contains(tool_call_id.as_str())
            }
            Chunk::ToolOutputAvailable { tool_call_id, .. }
            | Chunk::ToolOutputError { tool_call_id, .. }
            | Chunk::ToolOutputDenied { tool_call_id } => {
                let held_before = !stepped && !inputs_started.contains(tool_call_id.as_str());
                (inputs_available.contains(tool_call_id.as_str()) || held_before)
                    && outputs.insert(tool_call_id.as_str())
            }
            Chunk::Finish { .. } => {
                finished = true;
                !step_open && open_parts.is_empty()
            }
            Chunk::Start { .. } | Chunk::Error { .. } => true,
        };
        if !ok {
            return fail("out of order");
        }
    }
    crate::surfaces::finished_as_ended(finished, ended)
}
