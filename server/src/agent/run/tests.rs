use super::*;

fn ids() -> RunIds {
    RunIds { run_id: Uuid::from_u128(1), thread_id: Uuid::from_u128(2) }
}

#[test]
fn each_outcome_closes_the_run_once() {
    let usage = Usage { input_tokens: 3, output_tokens: 4 };
    let failure = ProviderError {
        kind: "overloaded_error".into(),
        message: "busy".into(),
        retryable: true,
        retry_after_ms: None,
    };
    let cases = [
        (
            Outcome::Completed("end_turn".into()),
            None,
            vec![
                r#"run_completed {"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":4}}"#,
            ],
        ),
        (
            Outcome::AwaitingApproval(vec![json!({"tool_call_id": "c", "name": "t", "input": {}})]),
            None,
            vec![
                r#"run_completed {"awaiting":[{"input":{},"name":"t","tool_call_id":"c"}],"stop_reason":"requires_approval","usage":{"input_tokens":3,"output_tokens":4}}"#,
            ],
        ),
        (
            Outcome::Cancelled,
            None,
            vec![
                r#"run_cancelled {"stop_reason":"cancelled","usage":{"input_tokens":3,"output_tokens":4}}"#,
            ],
        ),
        (
            Outcome::Cancelled,
            Some("max_events"),
            vec![
                r#"run_completed {"stop_reason":"max_events","usage":{"input_tokens":3,"output_tokens":4}}"#,
            ],
        ),
        (
            Outcome::Cancelled,
            Some("max_bytes"),
            vec![
                r#"run_completed {"stop_reason":"max_bytes","usage":{"input_tokens":3,"output_tokens":4}}"#,
            ],
        ),
        (
            Outcome::Failed(failure),
            None,
            vec![
                r#"error {"message":"busy","retryable":true,"type":"overloaded_error"}"#,
                r#"run_failed {"error":{"message":"busy","retryable":true,"type":"overloaded_error"},"stop_reason":"error","usage":{"input_tokens":3,"output_tokens":4}}"#,
            ],
        ),
    ];
    for (outcome, over_limit, expected) in cases {
        let drafts: Vec<String> = closing_drafts(ids(), outcome, over_limit, usage)
            .iter()
            .map(|draft| format!("{} {}", draft.kind.as_str(), draft.content))
            .collect();
        assert_eq!(drafts, expected);
    }
}

#[test]
fn past_the_limit_only_what_closes_the_run_is_written() {
    let call_status = {
        let mut draft = ids().draft(EventKind::ToolCall);
        draft.delta = Some(json!({ "status": "done" }));
        draft.delta_path = Some(String::new());
        draft
    };
    let call_progress = {
        let mut draft = ids().draft(EventKind::ToolCall);
        draft.delta = Some(json!({ "progress": 0.5 }));
        draft.delta_path = Some(String::new());
        draft
    };
    let cases = [
        (ids().draft(EventKind::Text), false),
        (ids().draft(EventKind::Usage), false),
        (call_progress, false),
        (call_status, true),
        (ids().draft(EventKind::ToolResult), true),
        (ids().draft(EventKind::Error), true),
        (ids().draft(EventKind::RunCancelled), true),
    ];
    for (draft, closes) in cases {
        assert_eq!(closes_a_run(&draft), closes, "{:?}", draft.kind);
    }
}

#[test]
fn a_run_opens_with_how_it_was_asked_for_and_the_message() {
    let request = ProviderRequest {
        system: None,
        model: Some("m".into()),
        messages: vec![ConversationMessage::User { text: "hi".into() }],
        tools: vec![],
        thinking_budget_tokens: None,
    };
    let options = RunOptions { background: true, otid: Some("o1".into()), ..RunOptions::default() };
    let drafts = opening_drafts(ids(), "scripted", &request, &options, None);
    assert_eq!(drafts[0].kind, EventKind::RunStarted);
    assert_eq!(
        drafts[0].metadata,
        json!({"provider": "scripted", "model": "m", "background": true, "stream_tokens": null})
    );
    assert_eq!(drafts[1].kind, EventKind::User);
    assert_eq!(drafts[1].content, json!({"text": "hi", "otid": "o1"}));
    let client = json!({ "run_id": "r1", "state": { "step": 1 } });
    let options = RunOptions { client: Some(client.clone()), ..options };
    let drafts = opening_drafts(ids(), "scripted", &request, &options, None);
    assert_eq!(drafts[0].metadata["client"], client);
}
