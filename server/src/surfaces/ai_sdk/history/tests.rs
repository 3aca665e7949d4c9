//! The history must be the messages a client holds after streaming the same runs: checked
//! against a model of the client's stream processing (ai 5/6 `processUIMessageStream`, for the
//! chunks this server sends) over the chunk mapping, on logs of every kind of run.

use super::*;
use crate::surfaces::ai_sdk::mapping::{Chunk, ChunkMapper};
use crate::surfaces::test_log::{text_run, tool_run, Log, AGENT};
use app::AgentEvent;

/// What a client holds after reading one run's stream: the assistant message (`going_on`: the
/// one it held, when the stream continues it).
fn client_message(chunks: &[Chunk], going_on: Option<Value>) -> Value {
    let mut message = going_on.unwrap_or_else(|| json!({ "role": "assistant", "parts": [] }));
    let mut metadata = message["metadata"].as_object().cloned().unwrap_or_default();
    let mut merge = |value: &Option<Value>| {
        if let Some(Value::Object(fields)) = value {
            metadata.extend(fields.clone());
        }
    };
    let parts = |message: &mut Value| message["parts"].as_array_mut().unwrap().clone();
    let mut list: Vec<Value> = parts(&mut message);
    let find = |list: &mut Vec<Value>, key: &str, id: &str| {
        list.iter()
            .rposition(|part| part[key].as_str() == Some(id) || part["_id"].as_str() == Some(id))
            .unwrap()
    };
    for chunk in chunks {
        match chunk {
            Chunk::Start { message_id, message_metadata } => {
                message["id"] = json!(message_id);
                merge(message_metadata);
            }
            Chunk::Finish { message_metadata, .. } => merge(&Some(message_metadata.clone())),
            Chunk::StartStep => list.push(json!({ "type": "step-start" })),
            Chunk::TextStart { id } => {
                list.push(json!({ "type": "text", "text": "", "state": "streaming", "_id": id }));
            }
            // ai 6 keeps a reasoning part's id.
            Chunk::ReasoningStart { id } => list.push(json!({
                "type": "reasoning", "id": id, "text": "", "state": "streaming", "_id": id,
            })),
            Chunk::TextDelta { id, delta } | Chunk::ReasoningDelta { id, delta } => {
                let at = find(&mut list, "_id", id);
                let text = list[at]["text"].as_str().unwrap().to_owned() + delta;
                list[at]["text"] = json!(text);
            }
            Chunk::TextEnd { id } | Chunk::ReasoningEnd { id } => {
                let at = find(&mut list, "_id", id);
                list[at]["state"] = json!("done");
            }
            Chunk::ToolInputStart { tool_call_id, tool_name, dynamic: true } => list.push(json!({
                "type": "dynamic-tool", "toolName": tool_name, "toolCallId": tool_call_id,
                "state": "input-streaming",
            })),
            // A static tool (the client's): its name is in the part's type.
            Chunk::ToolInputStart { tool_call_id, tool_name, dynamic: false } => list.push(json!({
                "type": format!("tool-{tool_name}"), "toolCallId": tool_call_id,
                "state": "input-streaming",
            })),
            Chunk::ToolInputDelta { .. } => {}
            Chunk::ToolInputAvailable { tool_call_id, input, .. } => {
                let at = find(&mut list, "toolCallId", tool_call_id);
                list[at]["state"] = json!("input-available");
                list[at]["input"] = input.clone();
            }
            Chunk::ToolOutputAvailable { tool_call_id, output, .. } => {
                let at = find(&mut list, "toolCallId", tool_call_id);
                list[at]["state"] = json!("output-available");
                list[at]["output"] = output.clone();
            }
            Chunk::ToolOutputError { tool_call_id, error_text, .. } => {
                let at = find(&mut list, "toolCallId", tool_call_id);
                list[at]["state"] = json!("output-error");
                list[at]["errorText"] = json!(error_text);
            }
            Chunk::ToolApprovalRequest { approval_id, tool_call_id } => {
                let at = find(&mut list, "toolCallId", tool_call_id);
                list[at]["state"] = json!("approval-requested");
                list[at]["approval"] = json!({ "id": approval_id });
            }
            Chunk::ToolOutputDenied { tool_call_id } => {
                let at = find(&mut list, "toolCallId", tool_call_id);
                list[at]["state"] = json!("output-denied");
            }
            // The client throws at an error chunk and reads no further.
            Chunk::Error { .. } => break,
            Chunk::FinishStep => {}
        }
    }
    for part in &mut list {
        part.as_object_mut().unwrap().remove("_id");
    }
    message["parts"] = json!(list);
    message["metadata"] = Value::Object(metadata);
    message
}

/// What a client that sent each user message and streamed each run to its end holds: the user
/// messages it sent, and one assistant message per run (a regenerate drops the answer before).
fn client_conversation(log: &Log) -> Vec<Value> {
    let mut held: Vec<Value> = Vec::new();
    let mut runs: Vec<Uuid> = Vec::new();
    for event in &log.0 {
        if let Some(run) = event.run_id.filter(|run| !runs.contains(run)) {
            runs.push(run);
        }
    }
    for run in runs {
        let events: Vec<&AgentEvent> =
            log.0.iter().filter(|event| event.run_id == Some(run)).collect();
        if let Some(user) = events.iter().find(|event| event.kind == EventKind::User) {
            let id = user.content["otid"].as_str().unwrap();
            let regenerate = held.len() >= 2 && held[held.len() - 2]["id"] == id;
            if regenerate {
                held.pop(); // the answer asked again
            } else {
                held.push(json!({
                    "id": id, "role": "user",
                    "parts": [{ "type": "text", "text": user.content["text"] }],
                }));
            }
        }
        // A continuation goes on with the assistant message the client holds, its answers
        // given first (`addToolApprovalResponse`).
        let continues = events[0].metadata.get("continues").cloned();
        let going_on = continues
            .filter(|root| held.last().is_some_and(|last| &last["id"] == root))
            .map(|_| {
                let mut message = held.pop().unwrap();
                for answer in
                    events.iter().filter(|event| event.kind == EventKind::ApprovalResponse)
                {
                    let call = &answer.content["tool_call_id"];
                    for part in message["parts"].as_array_mut().unwrap() {
                        if &part["toolCallId"] == call {
                            part["state"] = json!("approval-responded");
                            part["approval"]["approved"] = answer.content["approve"].clone();
                            if let Some(reason) = answer.content.get("reason") {
                                part["approval"]["reason"] = reason.clone();
                            }
                        }
                    }
                }
                message
            });
        let mut mapper = ChunkMapper::new();
        let chunks: Vec<Chunk> =
            events.iter().flat_map(|event| mapper.push(event)).map(|(_, chunk)| chunk).collect();
        if mapper.ended() {
            held.push(client_message(&chunks, going_on));
        }
    }
    held
}

fn history(log: &Log) -> Vec<Value> {
    let mut timeline = Timeline::new();
    timeline.apply_all(log.0.iter().cloned());
    ui_messages(Uuid::from_u128(AGENT), &timeline)
}

/// Appends `run`'s events to `log` as run `number` answering user message `otid`.
fn with_user(log: &mut Log, run: Log, number: u128, otid: &str, text: &str) {
    let mut events = run.0.into_iter();
    let started = events.next().unwrap();
    assert_eq!(started.kind, EventKind::RunStarted);
    log.start_run(number).user(0x900 + number, otid, text);
    // Each run's blocks and messages are its own.
    let own = |id: Option<Uuid>| id.map(|id| Uuid::from_u128(id.as_u128() + (number << 16)));
    for event in events {
        let copy = log.add(event.kind, None, None);
        let (seq, run_id, id) = (copy.seq, copy.run_id, copy.id);
        *copy = AgentEvent {
            seq,
            run_id,
            id,
            block_id: own(event.block_id),
            message_id: own(event.message_id),
            ..event
        };
    }
}

fn conversation() -> Log {
    let mut log = Log::default();
    with_user(&mut log, text_run(), 10, "u1", "hello");
    with_user(&mut log, tool_run(), 11, "u2", "what time is it?");
    let mut failed = Log::default();
    failed.start().piece(EventKind::Text, 1, 1, "Part").end(
        EventKind::RunFailed,
        json!({ "error": { "type": "api_error", "message": "overloaded" } }),
    );
    with_user(&mut log, failed, 12, "u3", "and now?");
    let mut cancelled = Log::default();
    // Its end reports usage so far; the reducer does not count it, and neither may the stream.
    cancelled.start().end(
        EventKind::RunCancelled,
        json!({ "usage": { "input_tokens": 0, "output_tokens": 0 } }),
    );
    with_user(&mut log, cancelled, 13, "u4", "stop that");
    // A call with no text after a result: the model's second call, a step of its own.
    let mut twice = Log::default();
    twice
        .start()
        .call(1, 1, "c1", "clock")
        .merge(1, 1, json!({ "input": {}, "status": "ready" }))
        .result(1, "c1", json!("noon"), false)
        .call(2, 2, "c2", "clock")
        .merge(2, 2, json!({ "input": {}, "status": "ready" }))
        .result(2, "c2", json!("one"), false)
        .end(EventKind::RunCompleted, json!({ "stop_reason": "max_iterations" }));
    with_user(&mut log, twice, 15, "u6", "twice");
    log
}

#[test]
fn the_history_is_what_a_client_holds_after_streaming_the_same_runs() {
    let log = conversation();
    let held = client_conversation(&log);
    assert_eq!(history(&log), held);
    let types: Vec<Vec<&str>> = held
        .iter()
        .map(|message| {
            message["parts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|part| part["type"].as_str().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(
        types,
        [
            vec!["text"],
            vec!["step-start", "reasoning", "text"],
            vec!["text"],
            vec!["step-start", "text", "dynamic-tool", "dynamic-tool", "step-start", "text"],
            vec!["text"],
            vec!["step-start", "text"],
            vec!["text"],
            vec![],
            vec!["text"],
            vec!["step-start", "dynamic-tool", "step-start", "dynamic-tool"],
        ]
    );
    let tools = &held[3]["parts"];
    assert_eq!(
        tools[2],
        json!({ "type": "dynamic-tool", "toolName": "clock", "toolCallId": "c1", "state": "output-available", "input": { "zone": "UTC" }, "output": "noon" })
    );
    assert_eq!(tools[3]["state"], "output-error");
    assert_eq!(tools[3]["errorText"], "division by zero");
    assert_eq!(held[1]["id"], Uuid::from_u128(10).to_string());
    assert_eq!(held[1]["metadata"]["run_id"], json!(Uuid::from_u128(10)));
    assert_eq!(held[1]["metadata"]["seq"], 1, "where the message starts in the log");
}

#[test]
fn a_run_in_flight_gives_its_user_message_only() {
    let mut log = conversation();
    let mut going = Log::default();
    going.start().piece(EventKind::Text, 1, 1, "Half an ans");
    with_user(&mut log, going, 14, "u5", "one more");
    let messages = history(&log);
    let last = messages.last().unwrap();
    assert_eq!(last["id"], "u5");
    assert_eq!(last["role"], "user");
    assert_eq!(messages.len(), 11);
    assert!(messages.iter().all(|message| message["id"] != Uuid::from_u128(14).to_string()));
}

#[test]
fn a_regenerated_answer_replaces_the_one_before() {
    let mut log = conversation();
    with_user(&mut log, text_run(), 20, "u6", "twice");
    let messages = history(&log);
    assert_eq!(messages, client_conversation(&log));
    let ids: Vec<&str> = messages.iter().map(|message| message["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 10);
    assert_eq!(ids[8], "u6");
    assert_eq!(ids[9], Uuid::from_u128(20).to_string());
}

#[test]
fn a_turn_with_approvals_is_one_message_as_the_client_holds_it() {
    let log = crate::surfaces::test_log::approval_turn();
    let held = client_conversation(&log);
    assert_eq!(history(&log), held);
    let answer = &held[1];
    assert_eq!(answer["id"], Uuid::from_u128(0x20).to_string(), "the turn's first run");
    assert_eq!(answer["metadata"]["run_id"], json!(Uuid::from_u128(0x21)));
    let tools: Vec<&Value> = answer["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|part| part["type"] == "dynamic-tool")
        .collect();
    assert_eq!(tools[0]["state"], "output-available");
    assert_eq!(tools[0]["output"], 42);
    assert_eq!(tools[1]["state"], "output-denied");
    assert_eq!(
        tools[1]["approval"],
        json!({ "id": "c2", "approved": false, "reason": "one is enough" })
    );
    // Before the answers: the requests, as the first stream left them.
    let mut asked = Log::default();
    let first = Some(Uuid::from_u128(0x20));
    asked.0 = log.0.iter().take_while(|event| event.run_id == first).cloned().collect();
    let held = client_conversation(&asked);
    assert_eq!(history(&asked), held);
    assert_eq!(held[1]["parts"][1]["state"], "approval-requested");
    assert_eq!(held[1]["parts"][1]["approval"], json!({ "id": "c1" }));
}
