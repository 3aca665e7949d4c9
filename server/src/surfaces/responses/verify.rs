//! The rules the SDKs' accumulators hold a stream to (openai-node 7's `ResponseStream` throws
//! on each broken one), checked on what the mapping sends: the tests' oracle, and the fuzz
//! target's.

use std::collections::HashMap;

use serde_json::Value;

/// The event types a client knows; any other makes openai-node 7 throw.
const KNOWN_TYPES: [&str; 18] = [
    "response.created",
    "response.queued",
    "response.in_progress",
    "response.completed",
    "response.failed",
    "response.incomplete",
    "response.output_item.added",
    "response.output_item.done",
    "response.content_part.added",
    "response.content_part.done",
    "response.output_text.delta",
    "response.output_text.done",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
];

/// Checks a whole stream (`ended`: it reached its run's end); the first broken rule, named.
pub fn check(events: &[Value], ended: bool) -> Result<(), String> {
    let kind = |event: &Value| event["type"].as_str().unwrap_or_default().to_owned();
    let mut items: Vec<(String, String, bool)> = Vec::new(); // (id, type, done)
    let mut parts: HashMap<usize, bool> = HashMap::new();
    let mut terminal = None;
    for (position, event) in events.iter().enumerate() {
        let kind = kind(event);
        let at = |rule: &str| format!("event {position} ({kind}): {rule}");
        if !KNOWN_TYPES.contains(&kind.as_str()) {
            return Err(at("a type no client knows"));
        }
        if event["sequence_number"].as_u64() != Some(position as u64) {
            return Err(at("sequence_number is not its position from 0"));
        }
        if terminal.is_some() {
            return Err(at("an event after the terminal one"));
        }
        match (position, kind.as_str()) {
            (0, "response.created") => continue,
            (0, _) => return Err(at("the first event is not response.created")),
            _ => {}
        }
        if let Some(response) = event.get("response") {
            if response["id"] != events[0]["response"]["id"] {
                return Err(at("the response's id changed"));
            }
            if matches!(
                kind.as_str(),
                "response.completed" | "response.failed" | "response.incomplete"
            ) {
                terminal = Some(response.clone());
            }
            continue;
        }
        let index = event["output_index"].as_u64().map(|index| index as usize);
        let Some(index) = index else {
            return Err(at("no output_index"));
        };
        if kind == "response.output_item.added" {
            if index != items.len() {
                return Err(at("an item added out of order"));
            }
            let item = &event["item"];
            let id = item["id"].as_str().filter(|id| !id.is_empty());
            let (Some(id), Some(item_type)) = (id, item["type"].as_str()) else {
                return Err(at("an item without its id or type"));
            };
            if items.iter().any(|(other, _, _)| other == id) {
                return Err(at("an item id given twice"));
            }
            if item["type"] == "function_call" && item["call_id"].as_str().is_none() {
                return Err(at("a function call without its call_id"));
            }
            items.push((id.to_owned(), item_type.to_owned(), false));
            continue;
        }
        let Some((id, item_type, done)) = items.get_mut(index) else {
            return Err(at("an event for an item not added"));
        };
        if *done {
            return Err(at("an event for an item already done"));
        }
        if kind == "response.output_item.done" {
            if event["item"]["id"].as_str() != Some(id.as_str()) {
                return Err(at("the item's id changed"));
            }
            *done = true;
            continue;
        }
        if event["item_id"].as_str() != Some(id.as_str()) {
            return Err(at("item_id is not the item's at output_index"));
        }
        let wanted = match kind.as_str() {
            kind if kind.contains("function_call") => "function_call",
            kind if kind.contains("reasoning") => "reasoning",
            _ => "message",
        };
        if item_type != wanted {
            return Err(at("an event for an item of another type"));
        }
        let opens = kind.ends_with("part.added");
        let part_open = parts.get(&index).copied().unwrap_or(false);
        if kind.contains("delta") || kind.ends_with("text.done") || kind.ends_with("part.done") {
            if !part_open && wanted != "function_call" {
                return Err(at("text before its part was added"));
            }
            if kind.ends_with("part.done") {
                parts.insert(index, false);
            }
        } else if opens {
            parts.insert(index, true);
        }
    }
    if !ended {
        return Ok(());
    }
    let Some(response) = terminal else {
        return Err("the stream ended without a terminal event".to_owned());
    };
    if let Some((id, _, _)) = items.iter().find(|(_, _, done)| !done) {
        return Err(format!("item {id} was never done"));
    }
    let output: Vec<&str> = response["output"]
        .as_array()
        .map(|output| output.iter().filter_map(|item| item["id"].as_str()).collect())
        .unwrap_or_default();
    let streamed: Vec<&str> = items.iter().map(|(id, _, _)| id.as_str()).collect();
    if output != streamed {
        return Err(format!(
            "the final response's output {output:?} is not the items streamed {streamed:?}"
        ));
    }
    Ok(())
}
