//! Where a run's model calls begin and end, as the streaming surfaces show them (the AI SDK's
//! `start-step`/`finish-step`, AG-UI's `STEP_STARTED`/`STEP_FINISHED`) and as their history
//! views rebuild them. One rule, so a stream and its history cannot cut steps differently: in
//! the log an LLM call's text shares one block and each tool call has a block of its own, so a
//! step starts with a call's first text or tool call, and a new text block — or a tool call
//! after the step's results came — is the next call. Pure.

use app::{AgentEvent, EventKind};
use serde_json::Value;
use uuid::Uuid;

/// The text or reasoning part of a message that a streaming surface has open (started, not
/// yet ended): one at a time, another part closes it. Named by its message id.
#[derive(Clone, Debug, PartialEq)]
pub enum Open {
    Text(String),
    Reasoning(String),
}

impl Open {
    /// The part a text or thinking event writes to.
    pub fn of(event: &AgentEvent) -> Open {
        let id = event.message_id.unwrap_or(event.id).to_string();
        match event.kind {
            EventKind::Thinking => Open::Reasoning(id),
            _ => Open::Text(id),
        }
    }
}

/// The text a text or thinking event adds to what its part shows: a streamed piece of its
/// text, or the whole text of a message given at once; `None` for what a surface does not show
/// (a signature, or a change to another field).
pub fn text_piece(event: &AgentEvent) -> Option<String> {
    let path = event.delta_path.as_deref().unwrap_or("text");
    match &event.delta {
        Some(Value::String(piece)) if path == "text" => Some(piece.clone()),
        Some(_) => None,
        None => event.content.get("text").and_then(Value::as_str).map(str::to_owned),
    }
}

/// The step rule's state for one run.
#[derive(Clone, Debug, Default)]
pub struct Steps {
    open: bool,
    /// The block of the open step's text, once it has some.
    text_block: Option<Uuid>,
    /// The open step's tool results have begun (a tool call now is the next model call's).
    results_began: bool,
}

impl Steps {
    /// Whether a text (`is_text`, in `block`) or a tool call starts a new step.
    pub fn starts_new(&self, is_text: bool, block: Option<Uuid>) -> bool {
        let same_call = self.open
            && !self.results_began
            && (!is_text || self.text_block.is_none_or(|open| block == Some(open)));
        !same_call
    }

    /// Opens a new step (after the caller closed the one before, if it shows closes).
    pub fn begin(&mut self) {
        self.open = true;
        self.results_began = false;
        self.text_block = None;
    }

    /// Records the block of the step's first text (the rest of the step's text shares it).
    pub fn notes_text(&mut self, is_text: bool, block: Option<Uuid>) {
        if is_text && self.text_block.is_none() {
            self.text_block = block;
        }
    }

    /// A tool result came: the step's calls are answered.
    pub fn result(&mut self) {
        self.results_began = true;
    }

    /// Closes the open step; true if one was open.
    pub fn close(&mut self) -> bool {
        self.text_block = None;
        std::mem::take(&mut self.open)
    }
}

/// A string field of an event's content, empty when it is missing or not a string: the
/// surfaces show a call's name or id as the log has it and never fail a stream over one.
pub fn text_of(content: &Value, key: &str) -> String {
    content.get(key).and_then(Value::as_str).unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_one_model_call() {
        let (a, b) = (Some(Uuid::from_u128(1)), Some(Uuid::from_u128(2)));
        let mut steps = Steps::default();
        // (is_text, block, a new step?)
        let items = [
            (true, a, true),      // the first text opens the first step
            (true, a, false),     // more of that text
            (false, None, false), // a tool call of the same call
            (false, None, false), // another one
            (true, a, false),     // text of the same block again
            (false, None, true),  // a call after results: the next model call
            (true, b, false),     // that call's text
            (true, a, true),      // a new text block: the next call
        ];
        for (index, (is_text, block, new)) in items.into_iter().enumerate() {
            if index == 5 {
                steps.result();
            }
            assert_eq!(steps.starts_new(is_text, block), new, "item {index}");
            if new {
                steps.close();
                steps.begin();
            }
            steps.notes_text(is_text, block);
        }
        assert!(steps.close());
        assert!(!steps.close());
    }
}
