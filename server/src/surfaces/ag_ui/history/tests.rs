//! The snapshot must be the messages a client holds after applying the same runs' events:
//! checked against a model of `@ag-ui/client`'s `defaultApplyEvents` (for the events this
//! server sends) over the event mapping, on logs of every kind of run.

use super::*;
use crate::surfaces::ag_ui::mapping::{AgUiEvent, EventMapper};
use crate::surfaces::test_log::{text_run, tool_run, Log};
use app::AgentEvent;
use uuid::Uuid;

/// Applies one event to the messages a client holds, as `defaultApplyEvents` does.
fn apply(messages: &mut Vec<Value>, event: &AgUiEvent) {
    let find = |messages: &Vec<Value>, id: &str| messages.iter().position(|m| m["id"] == id);
    match event {
        AgUiEvent::TextMessageStart { message_id, role }
            if find(messages, message_id).is_none() =>
        {
            messages.push(json!({ "id": message_id, "role": role, "content": "" }));
        }
        AgUiEvent::TextMessageContent { message_id, delta }
        | AgUiEvent::ReasoningMessageContent { message_id, delta } => {
            let at = find(messages, message_id).unwrap();
            let text = messages[at]["content"].as_str().unwrap().to_owned() + delta;
            messages[at]["content"] = json!(text);
        }
        AgUiEvent::ReasoningMessageStart { message_id, .. }
            if find(messages, message_id).is_none() =>
        {
            messages.push(json!({ "id": message_id, "role": "reasoning", "content": "" }));
        }
        AgUiEvent::ToolCallStart { tool_call_id, tool_call_name, parent_message_id } => {
            let call = json!({ "id": tool_call_id, "type": "function",
                               "function": { "name": tool_call_name, "arguments": "" } });
            let parent = parent_message_id.as_ref().and_then(|parent| {
                find(messages, parent).filter(|at| messages[*at]["role"] == "assistant")
            });
            let at = parent.unwrap_or_else(|| {
                let id = parent_message_id.clone().unwrap_or_else(|| tool_call_id.clone());
                messages.push(json!({ "id": id, "role": "assistant", "toolCalls": [] }));
                messages.len() - 1
            });
            let held = messages[at].as_object_mut().unwrap();
            held.entry("toolCalls").or_insert_with(|| json!([])).as_array_mut().unwrap().push(call);
        }
        AgUiEvent::ToolCallArgs { tool_call_id, delta } => {
            for message in messages.iter_mut() {
                for call in
                    message.get_mut("toolCalls").and_then(Value::as_array_mut).into_iter().flatten()
                {
                    if call["id"] == tool_call_id.as_str() {
                        let text =
                            call["function"]["arguments"].as_str().unwrap().to_owned() + delta;
                        call["function"]["arguments"] = json!(text);
                    }
                }
            }
        }
        AgUiEvent::ToolCallResult { message_id, tool_call_id, content, role } => {
            let result = json!({ "id": message_id, "toolCallId": tool_call_id, "role": role, "content": content });
            let holder = messages.iter().position(|m| {
                m["role"] == "assistant"
                    && m["toolCalls"]
                        .as_array()
                        .is_some_and(|calls| calls.iter().any(|c| c["id"] == tool_call_id.as_str()))
            });
            match holder {
                None => messages.push(result),
                Some(holder) => {
                    let mut at = holder + 1;
                    while at < messages.len() && messages[at]["role"] == "tool" {
                        at += 1;
                    }
                    messages.insert(at, result);
                }
            }
        }
        _ => {}
    }
}

/// Appends `run`'s events to `log` as run `number` answering user message `otid`, with ids of
/// its own; returns nothing, the log holds it.
fn with_user(log: &mut Log, run: Log, number: u128, otid: &str, text: &str) {
    let mut events = run.0.into_iter();
    events.next();
    log.start_run(number).user(0x900 + number, otid, text);
    let own = |id: Option<Uuid>| id.map(|id| Uuid::from_u128(id.as_u128() + (number << 16)));
    for event in events {
        let copy = log.add(event.kind, None, None);
        let (seq, run_id, id) = (copy.seq, copy.run_id, copy.id);
        let mut content = event.content.clone();
        if let Some(call) = content.get("tool_call_id").and_then(Value::as_str) {
            content["tool_call_id"] = json!(format!("{call}-{number}"));
        }
        *copy = AgentEvent {
            seq,
            run_id,
            id,
            block_id: own(event.block_id),
            message_id: own(event.message_id),
            content,
            ..event
        };
    }
}

/// What a client that sent each user message and applied each run's events holds.
fn client_conversation(log: &Log) -> Vec<Value> {
    let mut held = Vec::new();
    let mut runs: Vec<Uuid> = Vec::new();
    for event in &log.0 {
        if let Some(run) = event.run_id.filter(|run| !runs.contains(run)) {
            runs.push(run);
        }
    }
    for run in runs {
        let events: Vec<&AgentEvent> = log.0.iter().filter(|e| e.run_id == Some(run)).collect();
        if let Some(user) = events.iter().find(|event| event.kind == EventKind::User) {
            held.push(json!({ "id": user.content["otid"], "role": "user", "content": user.content["text"] }));
        }
        let mut mapper = EventMapper::new("t".into(), "r".into());
        for event in events {
            for (_, mapped) in mapper.push(event) {
                apply(&mut held, &mapped);
            }
        }
    }
    held
}

fn fold(log: &Log) -> Timeline {
    let mut timeline = Timeline::new();
    timeline.apply_all(log.0.iter().cloned());
    timeline
}

fn conversation() -> Log {
    let mut log = Log::default();
    with_user(&mut log, text_run(), 10, "u1", "hello");
    with_user(&mut log, tool_run(), 11, "u2", "what time is it?");
    let mut textless = Log::default();
    textless
        .start()
        .call(1, 1, "a", "clock")
        .call(2, 2, "b", "calculator")
        .merge(1, 1, json!({ "input": {}, "status": "ready" }))
        .merge(2, 2, json!({ "input": { "expression": "1+1" }, "status": "ready" }))
        .result(2, "b", json!(2), false)
        .result(1, "a", json!("noon"), false)
        .call(3, 3, "c", "clock")
        .merge(3, 3, json!({ "input": {}, "status": "ready" }))
        .result(3, "c", json!("later"), false)
        .piece(EventKind::Text, 4, 4, "Done.")
        .end(EventKind::RunCompleted, json!({}));
    with_user(&mut log, textless, 12, "u3", "tools only");
    let mut cancelled = Log::default();
    cancelled
        .start()
        .piece(EventKind::Text, 1, 1, "Half")
        .call(2, 2, "c1", "clock")
        .input_piece(2, 2, "{\"zo")
        .end(EventKind::RunCancelled, json!({}));
    with_user(&mut log, cancelled, 13, "u4", "stop");
    log
}

#[test]
fn the_snapshot_is_what_a_client_holds_after_applying_the_same_runs() {
    let log = conversation();
    let held = client_conversation(&log);
    assert_eq!(snapshot(&fold(&log)), held);
    let roles: Vec<&str> = held.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "reasoning",
            "assistant", // text run
            "user",
            "assistant",
            "tool",
            "tool",
            "assistant", // tool run
            "user",
            "assistant",
            "tool",
            "tool",
            "assistant",
            "tool",
            "assistant", // tools only
            "user",
            "assistant", // cancelled
        ]
    );
    // Both calls of the first step on the text message, with their arguments.
    let calls = held[4]["toolCalls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["function"], json!({ "name": "clock", "arguments": "{\"zone\":\"UTC\"}" }));
    // A step without text: one assistant message named after its first call holds both.
    assert_eq!(held[9]["id"], "a-12");
    assert_eq!(held[9]["toolCalls"].as_array().unwrap().len(), 2);
    assert!(held[9].get("content").is_none());
    // The cancelled call keeps the pieces it had.
    assert_eq!(held[16]["toolCalls"][0]["function"]["arguments"], "{\"zo");
}

#[test]
fn a_run_in_flight_gives_its_user_message_only() {
    let mut log = conversation();
    let mut going = Log::default();
    going.start().piece(EventKind::Text, 1, 1, "Half an ans");
    with_user(&mut log, going, 14, "u5", "one more");
    let messages = snapshot(&fold(&log));
    assert_eq!(
        messages.last().unwrap(),
        &json!({ "id": "u5", "role": "user", "content": "one more" })
    );
    assert_eq!(messages.len(), client_conversation(&conversation()).len() + 1);
}
