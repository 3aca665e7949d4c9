#[test]
fn the_oldest_messages_go_first_when_the_conversation_is_too_long() {
    let user = |text: &str| ConversationMessage::User { text: text.into() };
    let call = |id: &str| ConversationMessage::Assistant {
        text: String::new(),
        thinking: Vec::new(),
        tool_calls: vec![ToolCall {
            id: id.into(),
            name: "t".into(),
            input: serde_json::json!({}),
        }],
    };
    let result = |id: &str, content: &str| ConversationMessage::ToolResult {
        tool_call_id: id.into(),
        content: content.into(),
        is_error: false,
    };
    // (conversation, max, how many are left, how many were dropped)
    let cases = vec![
        (vec![user("aaaa"), user("bbbb")], 100, 2, 0),
        (vec![user("aaaa"), user("bbbb")], 4, 1, 1),
        (vec![user("aaaa"), user("bbbb")], 3, 0, 2),
        // A result whose call was dropped goes too: the model never sees an orphan.
        (vec![call("c"), result("c", "xxxxxxxx"), user("q")], 10, 1, 2),
        (vec![user("a"), call("c"), result("c", "r"), user("q")], 100, 4, 0),
    ];
    for (mut conversation, max, left, dropped) in cases {
        let before = conversation.clone();
        assert_eq!(keep_within_chars(&mut conversation, max), dropped, "{before:?}");
        assert_eq!(conversation.len(), left, "{before:?}");
        assert_eq!(conversation[..], before[before.len() - left..], "the newest stay");
    }
}
use super::*;
use crate::limits::TOOL_RESULT_CHARS_MAX;
use app::AgentEvent;
use serde_json::json;
use uuid::Uuid;

fn event(seq: u64, kind: EventKind, message: u128, content: Value) -> AgentEvent {
    AgentEvent {
        message_id: Some(Uuid::from_u128(message)),
        ..app::testing::event(seq, kind, content)
    }
}

#[test]
fn signed_and_redacted_thinking_open_their_steps_turn_and_unsigned_is_left_out() {
    let mut timeline = Timeline::new();
    timeline.apply_all([
        event(1, EventKind::User, 1, json!({"text": "hi"})),
        event(2, EventKind::Thinking, 2, json!({"text": "Hmm.", "signature": "sig"})),
        event(3, EventKind::Thinking, 3, json!({"redacted": "opaque"})),
        event(4, EventKind::Text, 4, json!({"text": "Checking."})),
        event(
            5,
            EventKind::ToolCall,
            5,
            json!({"tool_call_id": "a", "name": "clock", "input": {}}),
        ),
        event(6, EventKind::ToolResult, 6, json!({"tool_call_id": "a", "result": "noon"})),
        event(7, EventKind::Thinking, 7, json!({"text": "notes without a signature"})),
        event(8, EventKind::Text, 8, json!({"text": "Noon."})),
    ]);
    let (conversation, _) = conversation_from_timeline(&timeline);
    let thinking: Vec<&Vec<ThinkingBlock>> = conversation
        .iter()
        .filter_map(|message| match message {
            ConversationMessage::Assistant { thinking, .. } => Some(thinking),
            _ => None,
        })
        .collect();
    assert_eq!(
        thinking,
        [
            &vec![
                ThinkingBlock::Signed { thinking: "Hmm.".into(), signature: "sig".into() },
                ThinkingBlock::Redacted { data: "opaque".into() },
            ],
            &vec![],
        ]
    );
    let ConversationMessage::Assistant { text, tool_calls, .. } = &conversation[1] else {
        panic!("{conversation:?}");
    };
    assert_eq!((text.as_str(), tool_calls.len()), ("Checking.", 1));
}

#[test]
fn calls_pair_with_results_and_orphans_are_dropped_with_a_warning() {
    let mut timeline = Timeline::new();
    timeline.apply_all([
        event(1, EventKind::User, 1, json!({"text": "hi"})),
        event(2, EventKind::Text, 2, json!({"text": "Let me check."})),
        event(
            3,
            EventKind::ToolCall,
            3,
            json!({"tool_call_id": "a", "name": "clock", "input": {}}),
        ),
        event(4, EventKind::ToolCall, 4, json!({"tool_call_id": "b", "name": "clock"})),
        event(5, EventKind::ToolCall, 5, json!({"garbage": true})),
        event(6, EventKind::ToolResult, 6, json!({"tool_call_id": "a", "result": "noon"})),
        event(7, EventKind::ToolResult, 7, json!({"tool_call_id": "a", "result": "again"})),
        event(8, EventKind::ToolResult, 8, json!({"tool_call_id": "zzz", "result": "?"})),
        event(9, EventKind::Text, 9, json!({"text": "It is noon."})),
    ]);
    let (conversation, warnings) = conversation_from_timeline(&timeline);
    assert_eq!(
        conversation,
        vec![
            ConversationMessage::User { text: "hi".into() },
            ConversationMessage::Assistant {
                text: "Let me check.".into(),
                thinking: Vec::new(),
                tool_calls: vec![ToolCall {
                    id: "a".into(),
                    name: "clock".into(),
                    input: json!({})
                }],
            },
            ConversationMessage::ToolResult {
                tool_call_id: "a".into(),
                content: "noon".into(),
                is_error: false,
            },
            ConversationMessage::Assistant {
                text: "It is noon.".into(),
                tool_calls: vec![],
                thinking: Vec::new(),
            },
        ]
    );
    let warnings = warnings.join("\n");
    assert!(warnings.contains("tool call b has no result"), "{warnings}");
    assert!(warnings.contains("unusable tool call"), "{warnings}");
    assert!(warnings.contains("second result for tool call a"), "{warnings}");
    assert!(warnings.contains("unknown tool call zzz"), "{warnings}");
}

#[test]
fn the_call_a_person_answered_is_kept_for_its_result_to_follow() {
    let mut timeline = Timeline::new();
    timeline.apply_all([
        event(1, EventKind::User, 1, json!({"text": "add"})),
        event(2, EventKind::ToolCall, 2, json!({"tool_call_id": "a", "name": "clock"})),
        event(
            3,
            EventKind::ToolCall,
            3,
            json!({"tool_call_id": "b", "name": "calculator", "input": {"expression": "1"}}),
        ),
        event(4, EventKind::ToolResult, 4, json!({"tool_call_id": "a", "result": "noon"})),
        event(
            5,
            EventKind::ApprovalRequested,
            5,
            json!({"tool_call_id": "b", "name": "calculator"}),
        ),
    ]);
    let (without, warnings) = conversation_from_timeline(&timeline);
    assert_eq!(without.len(), 3, "b has no result: dropped");
    assert!(warnings.join(" ").contains("tool call b has no result"));
    let (with, warnings) = conversation_awaiting(&timeline, &["b"]);
    assert!(warnings.is_empty(), "{warnings:?}");
    let ConversationMessage::Assistant { tool_calls, .. } = &with[1] else {
        panic!("the step's calls: {with:?}");
    };
    let ids: Vec<&str> = tool_calls.iter().map(|call| call.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(
        with.last(),
        Some(&ConversationMessage::ToolResult {
            tool_call_id: "a".into(),
            content: "noon".into(),
            is_error: false,
        }),
        "b's result is the caller's to append"
    );
}

#[test]
fn results_are_bounded_in_count_and_size() {
    let mut timeline = Timeline::new();
    let mut seq = 0;
    let mut next = || {
        seq += 1;
        seq
    };
    let mut events = vec![event(next(), EventKind::User, 1, json!({"text": "go"}))];
    for call in 0..(HISTORY_TOOL_RESULTS_MAX + 5) {
        let id = format!("c{call}");
        events.push(event(
            next(),
            EventKind::ToolCall,
            10_000 + call as u128,
            json!({"tool_call_id": id, "name": "clock"}),
        ));
        events.push(event(
            next(),
            EventKind::ToolResult,
            20_000 + call as u128,
            json!({"tool_call_id": id, "result": "x".repeat(TOOL_RESULT_CHARS_MAX + 10)}),
        ));
    }
    timeline.apply_all(events);
    let (conversation, _) = conversation_from_timeline(&timeline);
    let results: Vec<_> = conversation
        .iter()
        .filter_map(|message| match message {
            ConversationMessage::ToolResult { tool_call_id, content, .. } => {
                Some((tool_call_id, content))
            }
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), HISTORY_TOOL_RESULTS_MAX);
    assert_eq!(results[0].0, "c5", "the oldest results go first");
    assert!(results[0].1.ends_with("[cut]"));
    let calls: usize = conversation
        .iter()
        .map(|message| match message {
            ConversationMessage::Assistant { tool_calls, .. } => tool_calls.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(calls, HISTORY_TOOL_RESULTS_MAX, "calls and results stay paired");
}
