//! The conversation so far, rebuilt from the folded log for the next LLM call.

use std::collections::{HashMap, HashSet};

use app::timeline::{Timeline, TimelineMessage as Message};
use app::EventKind;
use serde_json::Value;

use super::tools::TOOL_RESULT_CHARS_MAX;
use crate::provider::{ConversationMessage, ThinkingBlock, ToolCall};

/// Tool results carried into the next turn at most; older ones are dropped first. Keeps a long
/// tool-heavy conversation from growing the prompt without bound.
pub const HISTORY_TOOL_RESULTS_MAX: usize = 100;
/// Bytes of earlier conversation carried into the next turn at most; the oldest messages go
/// first. Room for [`HISTORY_TOOL_RESULTS_MAX`] results of [`TOOL_RESULT_CHARS_MAX`] and the
/// talk around them. The model's own context is the tighter limit in practice; this one keeps a
/// conversation from growing each request (and this server's memory) without bound.
pub const HISTORY_PROMPT_CHARS_MAX: usize = 2 * 1024 * 1024;

/// The conversation so far, rebuilt from the folded log for the next LLM call.
///
/// Tool calls are paired with their results by `tool_call_id`: a call without a result, a result
/// without a call, a second result for a call, or a call whose stored content is unusable is
/// dropped and reported in the returned warnings instead of failing the run. Results are cut to
/// [`TOOL_RESULT_CHARS_MAX`] characters and at most [`HISTORY_TOOL_RESULTS_MAX`] are kept.
pub fn conversation_from_timeline(timeline: &Timeline) -> (Vec<ConversationMessage>, Vec<String>) {
    conversation_awaiting(timeline, &[])
}

/// [`conversation_from_timeline`] for the run that answers the tool calls `awaited` (calls a
/// person just answered): those calls are kept although their results are not in the log yet —
/// the run appends them once it has them, after everything else.
pub fn conversation_awaiting(
    timeline: &Timeline,
    awaited: &[&str],
) -> (Vec<ConversationMessage>, Vec<String>) {
    let mut warnings = Vec::new();
    let mut pairing = Pairing::of(timeline, &mut warnings);
    pairing.awaited = awaited.iter().map(|id| (*id).to_owned()).collect();
    let mut conversation: Vec<ConversationMessage> = Vec::new();
    let mut results_kept = 0usize;
    for message in timeline.messages() {
        match message.kind {
            EventKind::User => conversation.push(ConversationMessage::User {
                text: message.text().to_owned(),
            }),
            EventKind::Thinking => {
                // Signed (or redacted) thinking goes back unchanged, opening its step's turn;
                // unsigned thinking is the model's own notes, not sent again.
                let Some(block) = thinking_block(message) else {
                    continue;
                };
                match conversation.last_mut() {
                    Some(ConversationMessage::Assistant {
                        text,
                        tool_calls,
                        thinking,
                    }) if text.is_empty() && tool_calls.is_empty() => thinking.push(block),
                    _ => conversation.push(ConversationMessage::Assistant {
                        text: String::new(),
                        tool_calls: Vec::new(),
                        thinking: vec![block],
                    }),
                }
            }
            EventKind::Text => match conversation.last_mut() {
                Some(ConversationMessage::Assistant {
                    text, tool_calls, ..
                }) if tool_calls.is_empty() => text.push_str(message.text()),
                _ => conversation.push(ConversationMessage::Assistant {
                    text: message.text().to_owned(),
                    tool_calls: Vec::new(),
                    thinking: Vec::new(),
                }),
            },
            EventKind::ToolCall => {
                let Some(call) = pairing.answered_call(message, &mut warnings) else {
                    continue;
                };
                match conversation.last_mut() {
                    Some(ConversationMessage::Assistant { tool_calls, .. }) => {
                        tool_calls.push(call)
                    }
                    _ => conversation.push(ConversationMessage::Assistant {
                        text: String::new(),
                        tool_calls: vec![call],
                        thinking: Vec::new(),
                    }),
                }
            }
            EventKind::ToolResult => {
                if let Some(result) = pairing.take_result(message) {
                    results_kept += 1;
                    conversation.push(result);
                }
            }
            _ => {}
        }
    }
    keep_newest_results(&mut conversation, results_kept);
    let dropped = keep_within_chars(&mut conversation, HISTORY_PROMPT_CHARS_MAX);
    if dropped > 0 {
        warnings.push(format!(
            "{dropped} of the oldest messages were left out: the conversation is over \
             {HISTORY_PROMPT_CHARS_MAX} characters"
        ));
    }
    (conversation, warnings)
}

/// Which calls have (exactly one usable) result: the first pass over the log.
struct Pairing {
    /// Each call's result: its text (cut) and whether it is an error.
    result_of: HashMap<String, (String, bool)>,
    call_ids: HashSet<String>,
    /// Calls kept without a result: their results come after the conversation.
    awaited: HashSet<String>,
}

impl Pairing {
    fn of(timeline: &Timeline, warnings: &mut Vec<String>) -> Pairing {
        let mut pairing = Pairing {
            result_of: HashMap::new(),
            call_ids: HashSet::new(),
            awaited: HashSet::new(),
        };
        for message in timeline.messages() {
            match message.kind {
                EventKind::ToolCall => {
                    if let Some(id) = call_id(message) {
                        pairing.call_ids.insert(id.to_owned());
                    }
                }
                EventKind::ToolResult => {
                    let Some(id) = call_id(message) else {
                        warnings.push(format!(
                            "a tool result without a call id (seq {})",
                            message.first_seq
                        ));
                        continue;
                    };
                    if pairing.result_of.contains_key(id) {
                        warnings.push(format!("a second result for tool call {id} was dropped"));
                        continue;
                    }
                    let is_error =
                        message.content.get("is_error").and_then(Value::as_bool) == Some(true);
                    let text = result_text(message.content.get("result"));
                    pairing.result_of.insert(id.to_owned(), (text, is_error));
                }
                _ => {}
            }
        }
        for id in pairing.result_of.keys() {
            if !pairing.call_ids.contains(id) {
                warnings.push(format!("the result of unknown tool call {id} was dropped"));
            }
        }
        pairing
    }

    /// The call `message` holds, if it is usable and has a result.
    fn answered_call(&self, message: &Message, warnings: &mut Vec<String>) -> Option<ToolCall> {
        let name = message.content.get("name").and_then(Value::as_str);
        let (Some(id), Some(name)) = (call_id(message), name) else {
            warnings.push(format!(
                "an unusable tool call was dropped (seq {})",
                message.first_seq
            ));
            return None;
        };
        if !self.result_of.contains_key(id) && !self.awaited.contains(id) {
            warnings.push(format!("tool call {id} has no result and was dropped"));
            return None;
        }
        let input = message
            .content
            .get("input")
            .cloned()
            .unwrap_or(Value::Object(Default::default()));
        Some(ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            input,
        })
    }

    /// The result `message` holds, the first time its call's result is asked for.
    fn take_result(&mut self, message: &Message) -> Option<ConversationMessage> {
        let id = call_id(message)?;
        if !self.call_ids.contains(id) {
            return None;
        }
        let (content, is_error) = self.result_of.remove(id)?;
        Some(ConversationMessage::ToolResult {
            tool_call_id: id.to_owned(),
            content,
            is_error,
        })
    }
}

/// A thinking message as the provider must get it back: its text with its signature, or its
/// redacted data; `None` for thinking without either (nothing a provider checks).
fn thinking_block(message: &Message) -> Option<ThinkingBlock> {
    let field = |name: &str| {
        message
            .content
            .get(name)
            .and_then(Value::as_str)
            .filter(|value| !value.is_empty())
    };
    if let Some(data) = field("redacted") {
        return Some(ThinkingBlock::Redacted {
            data: data.to_owned(),
        });
    }
    Some(ThinkingBlock::Signed {
        thinking: message.text().to_owned(),
        signature: field("signature")?.to_owned(),
    })
}

fn call_id(message: &Message) -> Option<&str> {
    message.content.get("tool_call_id").and_then(Value::as_str)
}

/// A result as the model reads it: text as it is, other JSON printed, cut to
/// [`TOOL_RESULT_CHARS_MAX`] characters.
fn result_text(result: Option<&Value>) -> String {
    let text = match result {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    if text.chars().count() > TOOL_RESULT_CHARS_MAX {
        text.chars().take(TOOL_RESULT_CHARS_MAX).collect::<String>() + " … [cut]"
    } else {
        text
    }
}

fn chars_of(message: &ConversationMessage) -> usize {
    match message {
        ConversationMessage::User { text } => text.len(),
        ConversationMessage::Assistant {
            text,
            tool_calls,
            thinking,
        } => {
            thinking
                .iter()
                .map(|block| match block {
                    ThinkingBlock::Signed {
                        thinking,
                        signature,
                    } => thinking.len() + signature.len(),
                    ThinkingBlock::Redacted { data } => data.len(),
                })
                .sum::<usize>()
                + text.len()
                + tool_calls
                    .iter()
                    .map(|call| call.name.len() + call.input.to_string().len())
                    .sum::<usize>()
        }
        ConversationMessage::ToolResult { content, .. } => content.len(),
    }
}

/// Drops the oldest messages until the rest is at most `chars_max` (bytes of text, a close
/// enough count); a result whose call was dropped goes with it. Returns how many were dropped.
fn keep_within_chars(conversation: &mut Vec<ConversationMessage>, chars_max: usize) -> usize {
    let mut total: usize = conversation.iter().map(chars_of).sum();
    let mut dropped = 0;
    while total > chars_max
        || matches!(
            conversation.first(),
            Some(ConversationMessage::ToolResult { .. })
        )
    {
        if conversation.is_empty() {
            break;
        }
        total -= chars_of(&conversation.remove(0));
        dropped += 1;
    }
    dropped
}

/// Keeps the newest [`HISTORY_TOOL_RESULTS_MAX`] results: the oldest steps' calls and results
/// go together.
fn keep_newest_results(conversation: &mut Vec<ConversationMessage>, mut results_kept: usize) {
    while results_kept > HISTORY_TOOL_RESULTS_MAX {
        let Some(first_result) = conversation
            .iter()
            .position(|message| matches!(message, ConversationMessage::ToolResult { .. }))
        else {
            break;
        };
        let ConversationMessage::ToolResult { tool_call_id, .. } =
            conversation.remove(first_result)
        else {
            unreachable!("found a tool result at this position");
        };
        for message in conversation.iter_mut() {
            if let ConversationMessage::Assistant { tool_calls, .. } = message {
                tool_calls.retain(|call| call.id != tool_call_id);
            }
        }
        results_kept -= 1;
    }
}

#[cfg(test)]
mod tests {

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
            (
                vec![call("c"), result("c", "xxxxxxxx"), user("q")],
                10,
                1,
                2,
            ),
            (
                vec![user("a"), call("c"), result("c", "r"), user("q")],
                100,
                4,
                0,
            ),
        ];
        for (mut conversation, max, left, dropped) in cases {
            let before = conversation.clone();
            assert_eq!(
                keep_within_chars(&mut conversation, max),
                dropped,
                "{before:?}"
            );
            assert_eq!(conversation.len(), left, "{before:?}");
            assert_eq!(
                conversation[..],
                before[before.len() - left..],
                "the newest stay"
            );
        }
    }
    use super::*;
    use app::AgentEvent;
    use serde_json::json;
    use uuid::Uuid;

    fn event(seq: u64, kind: EventKind, message: u128, content: Value) -> AgentEvent {
        AgentEvent {
            id: Uuid::from_u128(1000 + seq as u128),
            agent_id: Uuid::from_u128(1),
            seq,
            coalesced_from: None,
            run_id: Some(Uuid::from_u128(2)),
            thread_id: None,
            block_id: None,
            message_id: Some(Uuid::from_u128(message)),
            kind,
            delta: None,
            delta_path: None,
            delta_action: None,
            content,
            raw: None,
            metadata: Value::Null,
            created_at: Default::default(),
        }
    }

    #[test]
    fn signed_and_redacted_thinking_open_their_steps_turn_and_unsigned_is_left_out() {
        let mut timeline = Timeline::new();
        timeline.apply_all([
            event(1, EventKind::User, 1, json!({"text": "hi"})),
            event(
                2,
                EventKind::Thinking,
                2,
                json!({"text": "Hmm.", "signature": "sig"}),
            ),
            event(3, EventKind::Thinking, 3, json!({"redacted": "opaque"})),
            event(4, EventKind::Text, 4, json!({"text": "Checking."})),
            event(
                5,
                EventKind::ToolCall,
                5,
                json!({"tool_call_id": "a", "name": "clock", "input": {}}),
            ),
            event(
                6,
                EventKind::ToolResult,
                6,
                json!({"tool_call_id": "a", "result": "noon"}),
            ),
            event(
                7,
                EventKind::Thinking,
                7,
                json!({"text": "notes without a signature"}),
            ),
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
                    ThinkingBlock::Signed {
                        thinking: "Hmm.".into(),
                        signature: "sig".into()
                    },
                    ThinkingBlock::Redacted {
                        data: "opaque".into()
                    },
                ],
                &vec![],
            ]
        );
        let ConversationMessage::Assistant {
            text, tool_calls, ..
        } = &conversation[1]
        else {
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
            event(
                4,
                EventKind::ToolCall,
                4,
                json!({"tool_call_id": "b", "name": "clock"}),
            ),
            event(5, EventKind::ToolCall, 5, json!({"garbage": true})),
            event(
                6,
                EventKind::ToolResult,
                6,
                json!({"tool_call_id": "a", "result": "noon"}),
            ),
            event(
                7,
                EventKind::ToolResult,
                7,
                json!({"tool_call_id": "a", "result": "again"}),
            ),
            event(
                8,
                EventKind::ToolResult,
                8,
                json!({"tool_call_id": "zzz", "result": "?"}),
            ),
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
        assert!(
            warnings.contains("second result for tool call a"),
            "{warnings}"
        );
        assert!(warnings.contains("unknown tool call zzz"), "{warnings}");
    }

    #[test]
    fn the_call_a_person_answered_is_kept_for_its_result_to_follow() {
        let mut timeline = Timeline::new();
        timeline.apply_all([
            event(1, EventKind::User, 1, json!({"text": "add"})),
            event(
                2,
                EventKind::ToolCall,
                2,
                json!({"tool_call_id": "a", "name": "clock"}),
            ),
            event(
                3,
                EventKind::ToolCall,
                3,
                json!({"tool_call_id": "b", "name": "calculator", "input": {"expression": "1"}}),
            ),
            event(
                4,
                EventKind::ToolResult,
                4,
                json!({"tool_call_id": "a", "result": "noon"}),
            ),
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
                ConversationMessage::ToolResult {
                    tool_call_id,
                    content,
                    ..
                } => Some((tool_call_id, content)),
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
        assert_eq!(
            calls, HISTORY_TOOL_RESULTS_MAX,
            "calls and results stay paired"
        );
    }
}
