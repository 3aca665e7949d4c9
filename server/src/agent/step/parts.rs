//! The parts a step is assembled from: where a run's events go, token counts, the call ids the
//! server mints and a tool call as it streams in.

use app::{DeltaAction, EventKind};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::store::EventDraft;

/// Where a run's events go: its id and its main thread (every tool call gets a thread of its
/// own).
#[derive(Clone, Copy, Debug)]
pub struct RunIds {
    pub run_id: Uuid,
    pub thread_id: Uuid,
}

impl RunIds {
    /// A draft of `kind` on the run's main thread.
    pub fn draft(&self, kind: EventKind) -> EventDraft {
        let mut draft = EventDraft::new(kind);
        draft.run_id = Some(self.run_id);
        draft.thread_id = Some(self.thread_id);
        draft
    }

    /// A draft of `kind` on a tool call's thread, block and message.
    pub fn call_draft(&self, call: &PendingCall, kind: EventKind) -> EventDraft {
        let mut draft = self.draft(kind);
        draft.thread_id = Some(call.thread_id);
        draft.block_id = Some(call.block_id);
        draft.message_id = Some(call.message_id);
        draft
    }

    /// A merge into a tool call's card (`{"status": …}`, progress).
    pub fn call_merge(&self, call: &PendingCall, delta: Value) -> EventDraft {
        let mut draft = self.call_draft(call, EventKind::ToolCall);
        draft.delta = Some(delta);
        draft.delta_path = Some(String::new());
        draft.delta_action = Some(DeltaAction::Merge);
        draft
    }
}

/// Token counts (of one LLM call, or summed over a run's calls).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    pub fn json(self) -> Value {
        json!({ "input_tokens": self.input_tokens, "output_tokens": self.output_tokens })
    }

    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens + other.input_tokens,
            output_tokens: self.output_tokens + other.output_tokens,
        }
    }
}

/// A tool call's input longer than this (in bytes of JSON text) is cut: its later pieces are
/// not written and the call is answered with an error instead of running.
pub const TOOL_CALL_INPUT_BYTES_MAX: usize = 256 * 1024;

/// A provider's own id for a call longer than this (in characters) is not kept.
pub const PROVIDER_CALL_ID_CHARS_MAX: usize = 256;

/// Where a step's call ids come from: the server makes every id (the provider's is kept beside
/// it), so no model output — an empty, blank, huge or repeated id — can make a call that cannot
/// be told apart, answered or approved.
#[derive(Debug)]
pub enum CallIds {
    /// `call_` and 32 random hex digits (37 characters: within every provider's own limit,
    /// OpenAI's 40 included, and of the characters Anthropic allows).
    Random,
    /// `call_1`, `call_2`, …: for tests that spell out what a step writes.
    #[cfg(test)]
    Counting(u32),
}

impl CallIds {
    pub(super) fn mint(&mut self) -> String {
        match self {
            CallIds::Random => format!("call_{}", Uuid::new_v4().simple()),
            #[cfg(test)]
            CallIds::Counting(count) => {
                *count += 1;
                format!("call_{count}")
            }
        }
    }
}

/// A tool call as it streams in, with where its events go.
#[derive(Debug)]
pub struct PendingCall {
    /// The server's id of the call: the log's `tool_call_id`, what answers and approvals name,
    /// and what the conversation sent back to a provider pairs calls and results by.
    pub call_id: String,
    /// The provider's id, as its stream named the call (empty for calls of an earlier run):
    /// how this step finds the call its later pieces are about.
    pub provider_call_id: String,
    pub name: String,
    /// The input's JSON text so far.
    pub input_json: String,
    /// The parsed input, once the provider said it is complete and it parsed.
    pub input: Option<Value>,
    pub thread_id: Uuid,
    pub block_id: Uuid,
    pub message_id: Uuid,
    /// Calls past the per-step bound are answered with an error instead of running.
    pub refused: Option<String>,
    /// The provider ran this call itself (the Claude CLI does) and reported its result.
    pub answered_by_provider: bool,
    /// A person approved this call: it runs even if its tool requires approval.
    pub approved: bool,
    /// The provider said the input is complete.
    pub(super) ended: bool,
    /// The input passed [`TOOL_CALL_INPUT_BYTES_MAX`]: the rest of it is dropped.
    pub(super) input_cut: bool,
}

impl PendingCall {
    /// A call of an earlier run, taken up again where its card is (thread, block and message
    /// of its `tool_call` event): the call a person answered.
    pub fn resumed(
        call_id: String,
        name: String,
        input: Value,
        card: (Uuid, Uuid, Uuid),
        approved: bool,
    ) -> PendingCall {
        let (thread_id, block_id, message_id) = card;
        PendingCall {
            call_id,
            provider_call_id: String::new(),
            name,
            input_json: input.to_string(),
            input: Some(input),
            thread_id,
            block_id,
            message_id,
            refused: None,
            answered_by_provider: false,
            approved,
            ended: true,
            input_cut: false,
        }
    }

    /// Why this call cannot run, before any tool is looked up.
    pub fn input_problem(&self) -> Option<String> {
        if !self.ended {
            Some("the model's input for this call never completed".to_owned())
        } else if self.input.is_none() {
            Some(format!("the input is not valid JSON: {:?}", self.input_json))
        } else {
            None
        }
    }
}
