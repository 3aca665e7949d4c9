//! The conversation so far, rebuilt from the folded log for the next LLM call.

use std::collections::{HashMap, HashSet};

use app::timeline::{Timeline, TimelineMessage as Message};
use app::EventKind;
use serde_json::Value;

use crate::limits::TOOL_RESULT_CHARS_MAX;
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
            EventKind::User => {
                conversation.push(ConversationMessage::User { text: message.text().to_owned() })
            }
            EventKind::Thinking => {
                // Signed (or redacted) thinking goes back unchanged, opening its step's turn;
                // unsigned thinking is the model's own notes, not sent again.
                let Some(block) = thinking_block(message) else {
                    continue;
                };
                match conversation.last_mut() {
                    Some(ConversationMessage::Assistant { text, tool_calls, thinking })
                        if text.is_empty() && tool_calls.is_empty() =>
                    {
                        thinking.push(block)
                    }
                    _ => conversation.push(ConversationMessage::Assistant {
                        text: String::new(),
                        tool_calls: Vec::new(),
                        thinking: vec![block],
                    }),
                }
            }
            EventKind::Text => match conversation.last_mut() {
                Some(ConversationMessage::Assistant { text, tool_calls, .. })
                    if tool_calls.is_empty() =>
                {
                    text.push_str(message.text())
                }
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
            warnings.push(format!("an unusable tool call was dropped (seq {})", message.first_seq));
            return None;
        };
        if !self.result_of.contains_key(id) && !self.awaited.contains(id) {
            warnings.push(format!("tool call {id} has no result and was dropped"));
            return None;
        }
        let input =
            message.content.get("input").cloned().unwrap_or(Value::Object(Default::default()));
        Some(ToolCall { id: id.to_owned(), name: name.to_owned(), input })
    }

    /// The result `message` holds, the first time its call's result is asked for.
    fn take_result(&mut self, message: &Message) -> Option<ConversationMessage> {
        let id = call_id(message)?;
        if !self.call_ids.contains(id) {
            return None;
        }
        let (content, is_error) = self.result_of.remove(id)?;
        Some(ConversationMessage::ToolResult { tool_call_id: id.to_owned(), content, is_error })
    }
}

/// A thinking message as the provider must get it back: its text with its signature, or its
/// redacted data; `None` for thinking without either (nothing a provider checks).
fn thinking_block(message: &Message) -> Option<ThinkingBlock> {
    let field = |name: &str| {
        message.content.get(name).and_then(Value::as_str).filter(|value| !value.is_empty())
    };
    if let Some(data) = field("redacted") {
        return Some(ThinkingBlock::Redacted { data: data.to_owned() });
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
        ConversationMessage::Assistant { text, tool_calls, thinking } => {
            thinking
                .iter()
                .map(|block| match block {
                    ThinkingBlock::Signed { thinking, signature } => {
                        thinking.len() + signature.len()
                    }
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
        || matches!(conversation.first(), Some(ConversationMessage::ToolResult { .. }))
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
mod tests;
