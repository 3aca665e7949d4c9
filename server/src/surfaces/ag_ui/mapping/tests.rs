//! Data-driven cases of the AG-UI mapping, with `verifyEvents`' rules (and ours) checked on
//! every prefix of every case: a stream cut anywhere is still well-formed so far.

use super::*;
use crate::surfaces::test_log::{text_run, tool_run, Log};

fn map(events: &[AgentEvent]) -> Vec<AgUiEvent> {
    let mut mapper = EventMapper::new("thread-1".into(), "run-1".into());
    events.iter().flat_map(|event| mapper.push(event)).map(|(_, event)| event).collect()
}

fn json_of(event: &AgUiEvent) -> Value {
    serde_json::to_value(event).unwrap()
}

/// Each event's type, with the message, call or step it names (`TEXT_MESSAGE_CONTENT:M1`).
fn outline(events: &[AgUiEvent]) -> Vec<String> {
    events
        .iter()
        .map(|event| {
            let json = json_of(event);
            let kind = json["type"].as_str().unwrap().to_owned();
            let named = json["messageId"]
                .as_str()
                .and_then(|id| Uuid::parse_str(id).ok())
                .map(|id| format!("M{}", id.as_u128() - 0x100))
                .or_else(|| json["toolCallId"].as_str().map(str::to_owned))
                .or_else(|| json["stepName"].as_str().map(str::to_owned));
            match (kind.as_str(), named) {
                ("TOOL_CALL_RESULT", _) => {
                    format!("{kind}:{}", json["toolCallId"].as_str().unwrap())
                }
                (_, Some(named)) => format!("{kind}:{named}"),
                (_, None) => kind,
            }
        })
        .collect()
}

fn failed() -> Log {
    let mut log = Log::default();
    log.start()
        .piece(EventKind::Text, 1, 1, "Partial")
        .end(EventKind::Error, json!({ "type": "api_error", "message": "overloaded" }))
        .end(
            EventKind::RunFailed,
            json!({ "error": { "type": "api_error", "message": "the provider is overloaded" } }),
        );
    log
}

/// Cancelled while a call's input was streaming and a text was open.
fn cancelled() -> Log {
    let mut log = Log::default();
    log.start()
        .piece(EventKind::Text, 1, 1, "Half a sen")
        .call(2, 2, "c1", "clock")
        .input_piece(2, 2, "{\"zo")
        .end(EventKind::RunCancelled, json!({}));
    log
}

#[test]
fn runs_map_to_the_events_agui_orders() {
    let cases: [(&str, Log, &str); 4] = [
        (
            "text",
            text_run(),
            "RUN_STARTED STEP_STARTED:step-1 REASONING_START:M1 REASONING_MESSAGE_START:M1 \
             REASONING_MESSAGE_CONTENT:M1 REASONING_MESSAGE_END:M1 REASONING_END:M1 \
             TEXT_MESSAGE_START:M2 TEXT_MESSAGE_CONTENT:M2 TEXT_MESSAGE_CONTENT:M2 \
             TEXT_MESSAGE_END:M2 STEP_FINISHED:step-1 RUN_FINISHED",
        ),
        (
            "tools",
            tool_run(),
            "RUN_STARTED STEP_STARTED:step-1 TEXT_MESSAGE_START:M1 TEXT_MESSAGE_CONTENT:M1 \
             TEXT_MESSAGE_END:M1 TOOL_CALL_START:c1 TOOL_CALL_ARGS:c1 TOOL_CALL_ARGS:c1 \
             TOOL_CALL_END:c1 TOOL_CALL_START:c2 TOOL_CALL_ARGS:c2 TOOL_CALL_END:c2 \
             TOOL_CALL_RESULT:c1 TOOL_CALL_RESULT:c2 STEP_FINISHED:step-1 STEP_STARTED:step-2 \
             TEXT_MESSAGE_START:M4 TEXT_MESSAGE_CONTENT:M4 TEXT_MESSAGE_END:M4 \
             STEP_FINISHED:step-2 RUN_FINISHED",
        ),
        (
            "failed",
            failed(),
            "RUN_STARTED STEP_STARTED:step-1 TEXT_MESSAGE_START:M1 TEXT_MESSAGE_CONTENT:M1 \
             TEXT_MESSAGE_END:M1 STEP_FINISHED:step-1 RUN_ERROR",
        ),
        (
            "cancelled",
            cancelled(),
            "RUN_STARTED STEP_STARTED:step-1 TEXT_MESSAGE_START:M1 TEXT_MESSAGE_CONTENT:M1 \
             TEXT_MESSAGE_END:M1 TOOL_CALL_START:c1 TOOL_CALL_ARGS:c1 TOOL_CALL_END:c1 \
             STEP_FINISHED:step-1 RUN_FINISHED",
        ),
    ];
    for (name, log, expected) in cases {
        assert_eq!(outline(&map(&log.0)).join(" "), words(expected), "{name}");
        for cut in 1..=log.0.len() {
            let events = map(&log.0[..cut]);
            if let Err(broken) = crate::surfaces::ag_ui::verify::verify(&events, cut == log.0.len())
            {
                panic!("{name}, cut at {cut}: {broken}: {:?}", outline(&events));
            }
        }
    }
}

#[test]
fn the_wire_has_the_protocol_fields_and_omits_what_is_absent() {
    let events: Vec<Value> = map(&tool_run().0).iter().map(json_of).collect();
    assert_eq!(
        events[0],
        json!({ "type": "RUN_STARTED", "threadId": "thread-1", "runId": "run-1" })
    );
    assert_eq!(events[1], json!({ "type": "STEP_STARTED", "stepName": "step-1" }));
    let m1 = id(1).to_string();
    assert_eq!(
        events[2],
        json!({ "type": "TEXT_MESSAGE_START", "messageId": m1, "role": "assistant" })
    );
    assert_eq!(
        events[5],
        json!({ "type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "clock", "parentMessageId": m1 })
    );
    // The second call of the step names the same parent: one assistant message holds both.
    assert_eq!(events[9]["parentMessageId"], json!(m1));
    // Streamed pieces are the arguments; a call without pieces gets its whole input at once.
    assert_eq!(events[6]["delta"], "{\"zone\":");
    assert_eq!(
        events[10],
        json!({ "type": "TOOL_CALL_ARGS", "toolCallId": "c2", "delta": "{\"expression\":\"1/0\"}" })
    );
    assert_eq!(events[12]["content"], "noon");
    assert_eq!(events[13]["content"], "division by zero");
    assert_eq!(events[12]["role"], "tool");
    assert_eq!(
        events.last().unwrap(),
        &json!({ "type": "RUN_FINISHED", "threadId": "thread-1", "runId": "run-1" })
    );

    let error = json_of(map(&failed().0).last().unwrap());
    assert_eq!(
        error,
        json!({ "type": "RUN_ERROR", "message": "the provider is overloaded", "code": "api_error" })
    );
    let cancelled = json_of(map(&cancelled().0).last().unwrap());
    assert_eq!(cancelled["outcome"], json!({ "type": "cancelled" }));
}

/// A step without text: its first call opens the assistant message, the others name it.
#[test]
fn calls_of_a_step_without_text_share_the_first_calls_message() {
    let mut log = Log::default();
    log.start()
        .call(1, 1, "a", "clock")
        .call(2, 2, "b", "clock")
        .merge(1, 1, json!({ "input": {}, "status": "ready" }))
        .merge(2, 2, json!({ "input": {}, "status": "ready" }))
        .result(1, "a", json!("noon"), false)
        .result(2, "b", json!("noon"), false)
        .end(
            EventKind::RunCompleted,
            json!({ "usage": { "input_tokens": 3, "output_tokens": 4 } }),
        );
    let events: Vec<Value> = map(&log.0).iter().map(json_of).collect();
    let starts: Vec<&Value> =
        events.iter().filter(|event| event["type"] == "TOOL_CALL_START").collect();
    assert!(starts[0].get("parentMessageId").is_none());
    assert_eq!(starts[1]["parentMessageId"], "a");
    assert_eq!(
        events.last().unwrap()["usage"],
        json!([{ "inputTokens": 3, "outputTokens": 4, "totalTokens": 7 }])
    );
}

#[test]
fn replayed_deltas_merge_only_within_one_message() {
    let mut first = AgUiEvent::TextMessageContent { message_id: "m".into(), delta: "a".into() };
    assert!(
        first.merge(&AgUiEvent::TextMessageContent { message_id: "m".into(), delta: "b".into() })
    );
    assert!(
        !first.merge(&AgUiEvent::TextMessageContent { message_id: "n".into(), delta: "c".into() })
    );
    assert!(!first.merge(&AgUiEvent::TextMessageEnd { message_id: "m".into() }));
    assert_eq!(first, AgUiEvent::TextMessageContent { message_id: "m".into(), delta: "ab".into() });
}

use crate::surfaces::test_log::id;

/// Found by the fuzz target: a second call start on a message that already holds a call (the
/// server never writes one; a log could hold one) replaced the first call, which then never
/// ended, and `RUN_FINISHED` came while it was open. A message holds one call: the second start
/// is not a call.
#[test]
fn a_second_call_on_one_message_is_not_a_call() {
    let mut log = Log::default();
    log.start()
        .call(1, 1, "c1", "clock")
        .call(1, 1, "c2", "clock")
        .merge(1, 1, json!({ "input": {}, "status": "ready" }))
        .end(EventKind::RunCompleted, json!({ "stop_reason": "end_turn" }));
    let events = map(&log.0);
    assert_eq!(
        outline(&events),
        [
            "RUN_STARTED",
            "STEP_STARTED:step-1",
            "TOOL_CALL_START:c1",
            "TOOL_CALL_ARGS:c1",
            "TOOL_CALL_END:c1",
            "STEP_FINISHED:step-1",
            "RUN_FINISHED",
        ]
    );
    super::super::verify::verify(&events, true).unwrap();
}

/// An outline written as words: one string, any white space between the items.
fn words(outline: &str) -> String {
    outline.split_whitespace().collect::<Vec<_>>().join(" ")
}
