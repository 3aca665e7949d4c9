use super::*;
use app::AgentEvent;

fn event(seq: u64, kind: EventKind, message: u128, content: Value) -> AgentEvent {
    AgentEvent {
        thread_id: Some(Uuid::from_u128(3)),
        block_id: Some(Uuid::from_u128(4)),
        message_id: Some(Uuid::from_u128(message)),
        ..app::testing::event(seq, kind, content)
    }
}

fn decision(call: &str, approve: bool) -> ApprovalDecision {
    ApprovalDecision { tool_call_id: call.into(), approve, reason: Some("  ".into()), output: None }
}

fn log() -> Timeline {
    let mut timeline = Timeline::new();
    timeline.apply_all([
        event(
            1,
            EventKind::ToolCall,
            10,
            json!({"tool_call_id": "a", "name": "get-sum", "input": {"a": 1}}),
        ),
        event(
            2,
            EventKind::ApprovalRequested,
            11,
            json!({"tool_call_id": "a", "name": "get-sum", "input": {"a": 1}}),
        ),
        event(
            3,
            EventKind::ApprovalRequested,
            12,
            json!({"tool_call_id": "b", "name": "echo", "input": {}}),
        ),
        event(
            4,
            EventKind::ApprovalResponse,
            13,
            json!({"tool_call_id": "b", "approve": false, "reason": "no"}),
        ),
    ]);
    timeline
}

#[test]
fn an_answer_is_taken_only_for_a_pending_request() {
    let timeline = log();
    let turn = answer_from_timeline(&timeline, &[decision(" a ", true)], false).unwrap();
    assert!(turn.still_pending.is_empty());
    assert_eq!(turn.continues, Some(Uuid::from_u128(2)), "the run that asked");
    let answer = &turn.answers[0];
    assert_eq!(answer.call.call_id, "a");
    assert_eq!(answer.call.input, Some(json!({"a": 1})));
    assert!(answer.call.approved);
    assert_eq!(answer.call.message_id, Uuid::from_u128(10), "the call's card");
    assert_eq!(answer.reason, None, "a blank reason is none");
    let refusals = [
        (decision("b", true), "tool call b was already answered: denied (no)"),
        (decision("zzz", true), "no approval was asked for tool call zzz"),
    ];
    for (decision, expected) in refusals {
        let error = answer_from_timeline(&timeline, &[decision], false).unwrap_err();
        assert_eq!(error.to_string(), expected);
    }
}

#[test]
fn a_client_tools_call_takes_its_result_and_nothing_else() {
    let mut timeline = log();
    timeline.apply_all([event(
        5,
        EventKind::ApprovalRequested,
        14,
        json!({"tool_call_id": "c", "name": "confirm", "input": {}, "client": true}),
    )]);
    let answer = |decision: ApprovalDecision| {
        answer_from_timeline(&timeline, &[decision], false).map(|turn| {
            let answer = turn.answers.into_iter().next().unwrap();
            (answer.approve, answer.returned)
        })
    };
    let returned = ApprovalDecision::returned("c".into(), Ok(json!({"ok": true})));
    assert_eq!(answer(returned).unwrap(), (true, Some(Ok(json!({"ok": true})))));
    let declined = ApprovalDecision { reason: Some("not now".into()), ..decision("c", false) };
    // A person's "deny" does not answer a client's call (an approve-only caller cannot close
    // it); the server's timeout does.
    let by_server =
        answer_from_timeline(&timeline, std::slice::from_ref(&declined), true).map(|turn| {
            let answer = turn.answers.into_iter().next().unwrap();
            (answer.approve, answer.returned)
        });
    assert_eq!(
        by_server.unwrap(),
        (false, Some(Err("the client did not run this call: not now".into())))
    );
    let failed = ApprovalDecision::returned("c".into(), Err("no camera".into()));
    assert_eq!(answer(failed).unwrap(), (true, Some(Err("no camera".into()))));
    let refusals = [
        (
            declined,
            "tool call c runs in the client: answer it with its result or its error (an approval's answer does not)",
        ),
        (
            decision("c", true),
            "tool call c runs in the client: answer it with its result",
        ),
        (
            ApprovalDecision::returned("a".into(), Ok(json!(1))),
            "tool call a waits for approval, not for a result: approve or deny it",
        ),
    ];
    for (decision, expected) in refusals {
        assert_eq!(answer(decision).unwrap_err().to_string(), expected);
    }
    let turn = answer_from_timeline(
        &timeline,
        &[ApprovalDecision::returned("c".into(), Ok(json!(1)))],
        false,
    )
    .unwrap();
    assert_eq!(turn.asked_by, Some(Uuid::from_u128(2)));
    assert_eq!(
        turn.still_pending,
        [json!({"tool_call_id": "a", "name": "get-sum", "input": {"a": 1}})]
    );
}

#[test]
fn answers_to_several_calls_leave_the_rest_pending() {
    let mut timeline = log();
    timeline.apply_all([event(
        5,
        EventKind::ApprovalRequested,
        14,
        json!({"tool_call_id": "c", "name": "echo", "input": {}}),
    )]);
    let turn = answer_from_timeline(&timeline, &[decision("c", false)], false).unwrap();
    assert_eq!(
        turn.still_pending,
        [json!({"tool_call_id": "a", "name": "get-sum", "input": {"a": 1}})]
    );
    let turn = answer_from_timeline(&timeline, &[decision("c", false), decision("a", true)], false)
        .unwrap();
    assert!(turn.still_pending.is_empty());
    assert_eq!(turn.answers.len(), 2);
    let twice =
        answer_from_timeline(&timeline, &[decision("a", false), decision("a", true)], false);
    assert_eq!(twice.unwrap_err().to_string(), "tool call a is answered twice in one request");
}

#[test]
fn bad_answers_are_refused_before_the_log_is_read() {
    let long_reason = ApprovalDecision {
        reason: Some("x".repeat(APPROVAL_REASON_CHARS_MAX + 1)),
        ..decision("a", false)
    };
    let cases = [
        (decision("a", true), true),
        (decision("", true), false),
        (decision(&"c".repeat(APPROVAL_CALL_ID_CHARS_MAX + 1), true), false),
        (long_reason, false),
        (ApprovalDecision::returned("a".into(), Ok(json!("x".repeat(1024)))), true),
        (
            ApprovalDecision::returned("a".into(), Ok(json!("x".repeat(CLIENT_OUTPUT_BYTES_MAX)))),
            false,
        ),
        (
            ApprovalDecision::returned("a".into(), Err("e".repeat(CLIENT_OUTPUT_BYTES_MAX + 1))),
            false,
        ),
    ];
    for (decision, ok) in cases {
        assert_eq!(decision.check().is_ok(), ok, "{decision:?}");
    }
}

#[test]
fn agents_name_their_tools_as_a_list() {
    let cases = [
        (json!({}), Ok(vec![])),
        (json!({"requires_approval": ["echo"]}), Ok(vec!["echo"])),
        (json!({"requires_approval": "echo"}), Err(())),
        (json!({"requires_approval": [1]}), Err(())),
    ];
    for (metadata, expected) in cases {
        match expected {
            Ok(names) => {
                assert_eq!(check_agent_approvals(&metadata), Ok(()));
                assert_eq!(tools_requiring_approval(&metadata), names);
            }
            Err(()) => assert!(check_agent_approvals(&metadata).is_err()),
        }
    }
}

#[test]
fn a_request_marks_the_card_and_names_the_call() {
    let ids = RunIds { run_id: Uuid::from_u128(1), thread_id: Uuid::from_u128(2) };
    let call = PendingCall::resumed(
        "c".into(),
        "echo".into(),
        json!({"message": "hi"}),
        (Uuid::from_u128(5), Uuid::from_u128(6), Uuid::from_u128(7)),
        false,
    );
    let [status, request] = request_drafts(ids, &call, false);
    assert_eq!(status.delta, Some(json!({"status": "awaiting_approval"})));
    assert_eq!(status.message_id, Some(Uuid::from_u128(7)));
    assert_eq!(request.kind, EventKind::ApprovalRequested);
    assert_eq!(request.block_id, Some(Uuid::from_u128(6)), "on the card");
    assert_ne!(request.message_id, Some(Uuid::from_u128(7)), "its own message");
    assert_eq!(
        request.content,
        json!({"tool_call_id": "c", "name": "echo", "input": {"message": "hi"}})
    );
    assert_eq!(denial(Some("too risky")), "a person denied this call: too risky");
}
