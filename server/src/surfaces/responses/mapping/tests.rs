use app::EventKind;
use serde_json::json;

use super::*;
use crate::surfaces::responses::verify;
use crate::surfaces::test_log::{approval_turn, text_run, tool_run, Log};

fn map(events: &[AgentEvent]) -> (Vec<Value>, ResponseMapper) {
    let mut mapper = ResponseMapper::new();
    let out = events.iter().flat_map(|event| mapper.push(event)).collect();
    (out, mapper)
}

/// Each event as `type` (less `response.`), with its output index when it has one.
fn outline(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|event| {
            let kind = event["type"].as_str().unwrap().trim_start_matches("response.");
            match event["output_index"].as_u64() {
                Some(index) => format!("{kind}[{index}]"),
                None => kind.to_owned(),
            }
        })
        .collect()
}

/// A run that calls a tool of the caller's (a client tool) and ends waiting for its output.
fn client_call_run() -> Log {
    let mut log = Log::default();
    log.start().user(9, "u1", "what time is it?");
    log.call(2, 2, "call_1", "confirm");
    log.0.last_mut().unwrap().content["client"] = json!(true);
    log.input_piece(2, 2, "{\"q\":")
        .input_piece(2, 2, "1}")
        .merge(2, 2, json!({ "input": { "q": 1 }, "status": "ready" }))
        .merge(2, 2, json!({ "status": "awaiting_client" }));
    let request = log.add(EventKind::ApprovalRequested, Some(2), Some(0x61));
    request.content =
        json!({ "tool_call_id": "call_1", "name": "confirm", "input": { "q": 1 }, "client": true });
    log.end(
        EventKind::RunCompleted,
        json!({ "stop_reason": "requires_client_tool", "usage": { "input_tokens": 5, "output_tokens": 2 } }),
    );
    log
}

#[test]
fn each_log_maps_to_the_events_the_sdks_accumulate() {
    let cases: [(&str, Log, &[&str], &str); 3] = [
        (
            "thinking then text",
            text_run(),
            &[
                "created",
                "in_progress",
                "output_item.added[0]",
                "reasoning_summary_part.added[0]",
                "reasoning_summary_text.delta[0]",
                "reasoning_summary_text.done[0]",
                "reasoning_summary_part.done[0]",
                "output_item.done[0]",
                "output_item.added[1]",
                "content_part.added[1]",
                "output_text.delta[1]",
                "output_text.delta[1]",
                "output_text.done[1]",
                "content_part.done[1]",
                "output_item.done[1]",
                "completed",
            ],
            "completed",
        ),
        (
            "the agent's own tools",
            tool_run(),
            &[
                "created",
                "in_progress",
                "output_item.added[0]",
                "content_part.added[0]",
                "output_text.delta[0]",
                "output_text.done[0]",
                "content_part.done[0]",
                "output_item.done[0]",
                "output_item.added[1]",
                "output_item.done[1]",
                "output_item.added[2]",
                "output_item.done[2]",
                "output_item.added[3]",
                "content_part.added[3]",
                "output_text.delta[3]",
                "output_text.done[3]",
                "content_part.done[3]",
                "output_item.done[3]",
                "completed",
            ],
            "completed",
        ),
        (
            "a call of the caller's tool",
            client_call_run(),
            &[
                "created",
                "in_progress",
                "output_item.added[0]",
                "function_call_arguments.delta[0]",
                "function_call_arguments.delta[0]",
                "function_call_arguments.done[0]",
                "output_item.done[0]",
                "completed",
            ],
            "completed",
        ),
    ];
    for (name, log, expected, status) in cases {
        let (events, mapper) = map(&log.0);
        assert_eq!(outline(&events), expected, "{name}");
        verify::check(&events, true).unwrap_or_else(|why| panic!("{name}: {why}"));
        let last = events.last().unwrap();
        assert_eq!(last["response"]["status"], status, "{name}");
        assert_eq!(mapper.response().unwrap(), last["response"], "{name}");
    }
}

#[test]
fn items_carry_what_the_log_says() {
    let (events, _) = map(&tool_run().0);
    let output = &events.last().unwrap()["response"]["output"];
    assert_eq!(output[0]["type"], "message");
    assert_eq!(output[0]["content"][0]["text"], "Let me look.");
    assert_eq!(output[1]["type"], "agentstream:tool_call");
    assert_eq!(output[1]["name"], "clock");
    assert_eq!(output[1]["arguments"], r#"{"zone":"UTC"}"#);
    assert_eq!(output[1]["output"], "noon");
    assert_eq!(output[2]["status"], "failed");
    assert_eq!(output[3]["content"][0]["text"], "It is noon.");

    let (events, mapper) = map(&client_call_run().0);
    let call = &events.last().unwrap()["response"]["output"][0];
    assert_eq!(call["type"], "function_call");
    assert_eq!(call["call_id"], "call_1");
    assert_eq!(call["name"], "confirm");
    assert_eq!(call["arguments"], r#"{"q":1}"#);
    assert_eq!(call["status"], "completed");
    assert!(call["id"].as_str().unwrap().starts_with("fc_"));
    let response = mapper.response().unwrap();
    assert_eq!(response["usage"]["total_tokens"], 7);
    assert_eq!(mapper.input_items()[0]["content"][0]["text"], "what time is it?");
}

#[test]
fn a_failed_or_cancelled_run_ends_with_its_terminal_event_and_every_item_done() {
    for (kind, content, terminal, status) in [
        (
            EventKind::RunFailed,
            json!({ "stop_reason": "error", "error": { "type": "interrupted", "message": "the server stopped" } }),
            "response.failed",
            "failed",
        ),
        (
            EventKind::RunCancelled,
            json!({ "stop_reason": "cancelled" }),
            "response.incomplete",
            "cancelled",
        ),
        (
            EventKind::RunCompleted,
            json!({ "stop_reason": "max_iterations" }),
            "response.incomplete",
            "incomplete",
        ),
    ] {
        let mut log = Log::default();
        log.start().call(2, 2, "call_9", "confirm");
        log.0.last_mut().unwrap().content["client"] = json!(true);
        log.input_piece(2, 2, "{\"a\"")
            .piece(EventKind::Text, 1, 1, "half a sen")
            .end(kind, content);
        let (events, mapper) = map(&log.0);
        verify::check(&events, true).unwrap_or_else(|why| panic!("{kind:?}: {why}"));
        let last = events.last().unwrap();
        assert_eq!(last["type"], terminal);
        assert_eq!(last["response"]["status"], status);
        let output = &last["response"]["output"];
        assert_eq!(output[0]["status"], "incomplete", "{kind:?}: a call cut off");
        assert_eq!(output[0]["arguments"], "{}");
        assert_eq!(output[1]["status"], "incomplete", "{kind:?}: a message cut off");
        assert_eq!(output[1]["content"][0]["text"], "half a sen");
        assert!(mapper.ended());
        if status == "failed" {
            assert_eq!(last["response"]["error"]["code"], "interrupted");
            assert_eq!(last["response"]["error"]["message"], "the server stopped");
        } else {
            assert!(last["response"]["error"].is_null());
        }
    }
}

#[test]
fn an_answered_turn_shows_the_approved_calls_and_the_callers_outputs() {
    let log = approval_turn();
    let continuation: Vec<AgentEvent> =
        log.0.iter().filter(|event| event.run_id == Some(Uuid::from_u128(0x21))).cloned().collect();
    let (events, mapper) = map(&continuation);
    verify::check(&events, true).unwrap();
    let output = &events.last().unwrap()["response"]["output"];
    let kinds: Vec<&str> =
        output.as_array().unwrap().iter().map(|item| item["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["agentstream:tool_call", "agentstream:tool_call", "message"]);
    assert!(mapper.input_items().is_empty());
    // A client's outputs, by contrast, are the response's input.
    let mut log = Log::default();
    log.start().result(1, "call_1", json!("yes"), false);
    log.end(EventKind::RunCompleted, json!({ "stop_reason": "end_turn" }));
    let (events, mapper) = map(&log.0);
    verify::check(&events, true).unwrap();
    assert_eq!(mapper.input_items()[0]["type"], "function_call_output");
    assert_eq!(mapper.input_items()[0]["output"], "yes");
}

/// The stream is a function of the log: mapped again, from any event on, it says the same
/// thing at the same numbers — what a resume with `starting_after` relies on.
#[test]
fn a_replay_is_the_stream_again_number_for_number() {
    for log in [text_run(), tool_run(), client_call_run()] {
        let (whole, _) = map(&log.0);
        for cut in 0..whole.len() {
            let (again, _) = map(&log.0);
            let resumed: Vec<&Value> = again
                .iter()
                .filter(|event| event["sequence_number"].as_u64().unwrap() > cut as u64)
                .collect();
            let expected: Vec<&Value> = whole[cut + 1..].iter().collect();
            assert_eq!(resumed, expected);
        }
    }
}

#[test]
fn the_verifier_catches_what_the_sdks_refuse() {
    let (events, _) = map(&text_run().0);
    let broken = |edit: &dyn Fn(&mut Vec<Value>)| {
        let mut events = events.clone();
        edit(&mut events);
        verify::check(&events, true).is_err()
    };
    assert!(broken(&|events| {
        events.remove(2);
    }));
    assert!(broken(&|events| events[3]["sequence_number"] = json!(9)));
    assert!(broken(&|events| events[4]["type"] = json!("response.cancelled")));
    assert!(broken(&|events| {
        events.pop();
    }));
    assert!(broken(&|events| events[10]["item_id"] = json!("msg_x")));
}

#[test]
fn events_before_the_runs_start_and_after_its_end_are_not_the_responses() {
    let mut log = Log::default();
    log.piece(EventKind::Text, 1, 1, "before");
    let run = text_run().0;
    let mut events = log.0.clone();
    events.extend(run.iter().cloned());
    events.push(run[1].clone());
    let (mapped, _) = map(&events);
    assert_eq!(mapped, map(&run).0);
}

/// A damaged or hostile log (an event twice, a call answered twice) still makes a stream the
/// clients take: item ids unique, one item per result. (The fuzz target found a repeated item
/// id.)
#[test]
fn an_event_or_a_result_twice_keeps_the_items_unique() {
    let mut log = tool_run().0;
    let end = log.pop().unwrap();
    let mut again = vec![log[1].clone(), log[9].clone(), log[1].clone()];
    log.append(&mut again);
    log.push(end);
    for (index, event) in log.iter_mut().enumerate() {
        event.seq = index as u64 + 1;
    }
    let (events, _) = map(&log);
    verify::check(&events, true).unwrap();
    let output = &events.last().unwrap()["response"]["output"];
    let results = output
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "agentstream:tool_call")
        .count();
    assert_eq!(results, 2, "{output}");
}

/// A poll while items are being written shows their text and arguments as they stand (the
/// items themselves are written only when done).
#[test]
fn a_poll_mid_run_shows_what_is_written_so_far() {
    let mut log = Log::default();
    log.start().piece(EventKind::Text, 1, 1, "half ");
    log.piece(EventKind::Text, 1, 1, "way");
    let mut mapper = ResponseMapper::new();
    for event in &log.0 {
        mapper.push(event);
    }
    let polled = mapper.response().unwrap();
    assert_eq!(polled["status"], "in_progress");
    assert_eq!(polled["output"][0]["content"][0]["text"], "half way");
    log.call(2, 2, "call_1", "confirm");
    log.0.last_mut().unwrap().content["client"] = json!(true);
    log.input_piece(2, 2, "{\"q\":");
    for event in &log.0[3..] {
        mapper.push(event);
    }
    let polled = mapper.response().unwrap();
    assert_eq!(polled["output"][0]["content"][0]["text"], "half way");
    assert_eq!(polled["output"][0]["status"], "completed");
    assert_eq!(polled["output"][1]["arguments"], "{\"q\":");
}
