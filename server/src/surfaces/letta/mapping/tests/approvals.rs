//! Approvals and client tools in Letta's terms.

use super::*;

#[test]
fn an_approval_request_stops_with_requires_approval_and_its_answer_names_it() {
    let mut log = Log::new();
    let (card, request, response) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    log.content(EventKind::RunStarted, None, None, Value::Null);
    log.content(
        EventKind::ApprovalRequested,
        Some(request),
        Some(card),
        json!({ "tool_call_id": "c1", "name": "calculator", "input": { "expression": "6*7" } }),
    );
    log.content(EventKind::RunCompleted, None, None, json!({ "stop_reason": "requires_approval" }));
    log.content(EventKind::RunStarted, None, None, Value::Null);
    log.content(
        EventKind::ApprovalResponse,
        Some(response),
        Some(card),
        json!({ "tool_call_id": "c1", "approve": false, "reason": "no", "request_message_id": request }),
    );
    for cut in [Cut::Steps, Cut::Tokens] {
        let items = map_all(cut, &log.events);
        let json: Vec<Value> = items.iter().map(LettaItem::to_json).collect();
        assert_eq!(json[0]["message_type"], "approval_request_message");
        assert_eq!(
            json[0]["tool_call"],
            json!({ "name": "calculator", "arguments": r#"{"expression":"6*7"}"#, "tool_call_id": "c1" })
        );
        assert_eq!(json[0]["tool_calls"][0], json[0]["tool_call"]);
        assert_eq!(json[1]["stop_reason"], "requires_approval");
        let answer =
            json.iter().find(|item| item["message_type"] == "approval_response_message").unwrap();
        assert_eq!(answer["approval_request_id"], json[0]["id"]);
        assert_eq!(
            answer["approvals"],
            json!([{ "type": "approval", "tool_call_id": "c1", "approve": false, "reason": "no" }])
        );
    }
}

/// A call of a tool the client runs is sent as Letta's server sends it: its
/// `approval_request_message` alone (no `tool_call_message` before it), in both cuts; a call of
/// our own tools keeps its `tool_call_message`.
#[test]
fn a_client_tools_call_is_its_approval_request_alone() {
    for (client, expected) in [
        (true, vec!["approval_request_message", "stop_reason"]),
        (false, vec!["tool_call_message", "approval_request_message", "stop_reason"]),
    ] {
        let mut log = Log::new();
        let (card, call, request) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        log.content(EventKind::RunStarted, None, None, Value::Null);
        let mut opened =
            json!({ "tool_call_id": "c1", "name": "confirm", "input": {}, "status": "streaming" });
        if client {
            opened["client"] = json!(true);
        }
        log.content(EventKind::ToolCall, Some(call), Some(card), opened);
        log.delta(
            EventKind::ToolCall,
            call,
            card,
            "input_json",
            json!("{\"q\":1}"),
            DeltaAction::Append,
        );
        log.delta(
            EventKind::ToolCall,
            call,
            card,
            "",
            json!({ "input": { "q": 1 }, "status": "ready" }),
            DeltaAction::Merge,
        );
        log.content(
            EventKind::ApprovalRequested,
            Some(request),
            Some(card),
            json!({ "tool_call_id": "c1", "name": "confirm", "input": { "q": 1 }, "client": client }),
        );
        log.content(
            EventKind::RunCompleted,
            None,
            None,
            json!({ "stop_reason": "requires_approval" }),
        );
        for cut in [Cut::Steps, Cut::Tokens] {
            let mut kinds = types(&map_all(cut, &log.events));
            kinds.dedup();
            let kinds: Vec<String> =
                kinds.into_iter().filter(|kind| kind != "usage_statistics").collect();
            assert_eq!(kinds, expected, "client {client}, {cut:?}");
        }
    }
}
