//! One LLM call's output, assembled: provider events in, event drafts and tool-call bookkeeping
//! out. Pure — no I/O, no waiting — so every case is a row of data in the tests below;
//! [`super::call`] is the I/O loop around it (the provider's stream, cancellation, the writer).
//!
//! This is the one place a tool call's input accumulates: providers pass its JSON text on in
//! pieces and say when it is complete; the text is parsed here.

use app::EventKind;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::limits::TOOL_CALLS_PER_STEP_MAX;
use crate::provider::{ProviderError, ProviderEvent, ThinkingBlock};
use crate::store::EventDraft;

mod parts;
pub use parts::{
    CallIds, PendingCall, RunIds, Usage, PROVIDER_CALL_ID_CHARS_MAX, TOOL_CALL_INPUT_BYTES_MAX,
};

/// Times a failed LLM call is tried again when the provider says trying again may work (rate
/// limit, overload, a dropped connection) and nothing of the call reached the log yet.
pub const PROVIDER_RETRIES_MAX: u32 = 3;
/// The first retry waits this long unless the provider said `retry-after`; then it doubles.
pub const PROVIDER_RETRY_DELAY_INITIAL_MS: u64 = 500;
/// No retry waits longer than this, whatever `retry-after` says.
pub const PROVIDER_RETRY_DELAY_MAX_MS: u64 = 30_000;

/// What a provider event asks the run to do.
#[derive(Debug)]
pub enum Output {
    /// Write this event.
    Write(EventDraft),
    /// Write this event, which opens a tool call's card. A run past its event limit drops it;
    /// it must then call [`Step::forget_call`], so a call never in the log gets no result.
    OpenCall { call_id: String, draft: EventDraft },
    /// The provider ran call `index` itself: write this result for it.
    ProviderResult { index: usize, result: Result<Value, String> },
}

/// What one LLM call produced, once its stream ended.
#[derive(Debug)]
pub struct Assembled {
    pub text: String,
    /// The call's signed (or redacted) thinking, to go back with its calls.
    pub thinking: Vec<ThinkingBlock>,
    pub calls: Vec<PendingCall>,
    pub usage: Usage,
    /// The provider's stop reason, if it gave one.
    pub stop_reason: Option<String>,
}

/// One LLM call being assembled. Thinking and text go to one block, each tool call to a block
/// and thread of its own.
pub struct Step {
    ids: RunIds,
    block_id: Uuid,
    thinking_id: Uuid,
    text_id: Uuid,
    text: String,
    /// The thinking block's text and signature, and the redacted blocks (`None` marks where
    /// the signed block came), in the order they came.
    thinking: String,
    signature: String,
    thinking_order: Vec<Option<String>>,
    calls: Vec<PendingCall>,
    /// The run's usage before this call: usage events carry the run's running total.
    usage_before: Usage,
    usage: Usage,
    stop_reason: Option<String>,
    /// Something of this call is in the log: a retry would duplicate it.
    output_started: bool,
    retries: u32,
    call_ids: CallIds,
    /// Names of the tools the client runs: their calls say so on their card (`client: true`),
    /// so every view can draw them as the client's from the first event on.
    client_tools: Vec<String>,
}

impl Step {
    pub fn new(ids: RunIds, usage_before: Usage) -> Step {
        Step {
            ids,
            block_id: Uuid::new_v4(),
            thinking_id: Uuid::new_v4(),
            text_id: Uuid::new_v4(),
            text: String::new(),
            thinking: String::new(),
            signature: String::new(),
            thinking_order: Vec::new(),
            calls: Vec::new(),
            usage_before,
            usage: Usage::default(),
            stop_reason: None,
            output_started: false,
            retries: 0,
            call_ids: CallIds::Random,
            client_tools: Vec::new(),
        }
    }

    /// The same step, knowing which tools run in the client.
    pub fn with_client_tools(mut self, names: Vec<String>) -> Step {
        self.client_tools = names;
        self
    }

    /// The same step with its call ids from `call_ids`.
    #[cfg(test)]
    pub fn with_call_ids(mut self, call_ids: CallIds) -> Step {
        self.call_ids = call_ids;
        self
    }

    /// What `event` becomes: at most one thing to write.
    pub fn apply(&mut self, event: ProviderEvent) -> Option<Output> {
        self.output_started |= !matches!(event, ProviderEvent::Usage { .. });
        match event {
            ProviderEvent::ThinkingDelta(piece) | ProviderEvent::TextDelta(piece)
                if piece.is_empty() =>
            {
                None
            }
            ProviderEvent::ThinkingDelta(piece) => {
                self.mark_signed_block();
                self.thinking.push_str(&piece);
                Some(self.text_delta(EventKind::Thinking, self.thinking_id, "text", piece))
            }
            ProviderEvent::ThinkingSignature(signature) => {
                self.mark_signed_block();
                self.signature.push_str(&signature);
                Some(self.text_delta(EventKind::Thinking, self.thinking_id, "signature", signature))
            }
            ProviderEvent::RedactedThinking(data) => {
                // A message of its own per block: each goes back as it came.
                self.thinking_order.push(Some(data.clone()));
                let mut draft = self.ids.draft(EventKind::Thinking);
                draft.block_id = Some(self.block_id);
                draft.message_id = Some(Uuid::new_v4());
                draft.content = json!({ "redacted": data });
                Some(Output::Write(draft))
            }
            ProviderEvent::TextDelta(piece) => {
                self.text.push_str(&piece);
                Some(self.text_delta(EventKind::Text, self.text_id, "text", piece))
            }
            ProviderEvent::ToolCallStart { id, name } => self.open_call(id, name),
            ProviderEvent::ToolCallInputDelta { id, json: piece } => self.input_piece(&id, piece),
            ProviderEvent::ToolCallEnd { id } => self.end_call(&id),
            ProviderEvent::Usage { input_tokens, output_tokens } => {
                // Providers report usage cumulatively within a call.
                self.usage = Usage { input_tokens, output_tokens };
                let mut draft = self.ids.draft(EventKind::Usage);
                draft.block_id = Some(self.block_id);
                draft.content = self.usage_before.plus(self.usage).json();
                Some(Output::Write(draft))
            }
            ProviderEvent::ToolResult { id, content, is_error } => {
                self.provider_result(&id, content, is_error)
            }
            ProviderEvent::Stop { reason } => {
                self.stop_reason = Some(reason);
                None
            }
        }
    }

    /// Forgets the call an [`Output::OpenCall`] opened, when the run did not write it.
    pub fn forget_call(&mut self, call_id: &str) {
        self.calls.retain(|call| call.call_id != call_id);
    }

    /// The calls so far.
    pub fn calls(&self) -> &[PendingCall] {
        &self.calls
    }

    /// After the provider failed with `error`: how long to wait before trying again and the
    /// notice that says so, or `None` when the failure is final — it is not retryable, the
    /// retries are used up, or part of this call is already in the log.
    pub fn retry(&mut self, error: &ProviderError) -> Option<(u64, EventDraft)> {
        if !error.retryable || self.output_started || self.retries >= PROVIDER_RETRIES_MAX {
            return None;
        }
        self.retries += 1;
        let delay_ms = error
            .retry_after_ms
            .unwrap_or(PROVIDER_RETRY_DELAY_INITIAL_MS << (self.retries - 1))
            .min(PROVIDER_RETRY_DELAY_MAX_MS);
        let mut notice = self.ids.draft(EventKind::Loading);
        notice.block_id = Some(self.block_id);
        notice.message_id = Some(Uuid::new_v4());
        notice.content = json!({
            "label": format!(
                "{}: retrying in {:.1} s (attempt {} of {})",
                error.kind,
                delay_ms as f64 / 1000.0,
                self.retries + 1,
                PROVIDER_RETRIES_MAX + 1
            ),
            "error": { "type": error.kind, "message": error.message },
            "retry_in_ms": delay_ms,
        });
        Some((delay_ms, notice))
    }

    /// Whether the provider said the call is done (its `Stop`).
    pub fn stopped(&self) -> bool {
        self.stop_reason.is_some()
    }

    /// The call's output once its stream has ended (however it ended).
    pub fn finish(self) -> Assembled {
        let (text, signature) = (self.thinking, self.signature);
        let thinking = self
            .thinking_order
            .into_iter()
            .filter_map(|block| match block {
                Some(data) => Some(ThinkingBlock::Redacted { data }),
                None if signature.is_empty() => None,
                None => Some(ThinkingBlock::Signed {
                    thinking: text.clone(),
                    signature: signature.clone(),
                }),
            })
            .collect();
        Assembled {
            text: self.text,
            thinking,
            calls: self.calls,
            usage: self.usage,
            stop_reason: self.stop_reason,
        }
    }

    /// Notes where the signed thinking block came among the redacted ones (once).
    fn mark_signed_block(&mut self) {
        if !self.thinking_order.contains(&None) {
            self.thinking_order.push(None);
        }
    }

    fn text_delta(&self, kind: EventKind, message_id: Uuid, path: &str, piece: String) -> Output {
        let mut draft = self.ids.draft(kind).appending(path, Value::String(piece));
        draft.block_id = Some(self.block_id);
        draft.message_id = Some(message_id);
        Output::Write(draft)
    }

    fn input_piece(&mut self, id: &str, piece: String) -> Option<Output> {
        let index = self.open(id)?;
        let call = &mut self.calls[index];
        if call.input_cut {
            return None;
        }
        if call.input_json.len() + piece.len() > TOOL_CALL_INPUT_BYTES_MAX {
            call.input_cut = true;
            call.refused = Some(format!(
                "the model's input for this call is longer than {TOOL_CALL_INPUT_BYTES_MAX} bytes"
            ));
            return None;
        }
        call.input_json.push_str(&piece);
        let call = &self.calls[index];
        let draft = self.ids.call_draft(call, EventKind::ToolCall);
        Some(Output::Write(draft.appending("input_json", Value::String(piece))))
    }

    fn end_call(&mut self, id: &str) -> Option<Output> {
        let index = self.open(id)?;
        let call = &mut self.calls[index];
        call.ended = true;
        if call.input_cut {
            return None;
        }
        // A call with no input at all takes none: `{}`. Text that does not parse leaves the
        // input unset, and the run answers the call with an error result.
        let text = call.input_json.trim();
        let input = if text.is_empty() {
            Some(json!({}))
        } else {
            serde_json::from_str::<Value>(text).ok()
        };
        call.input = input.clone();
        let input = input?;
        let call = &self.calls[index];
        Some(Output::Write(self.ids.call_merge(call, json!({ "input": input, "status": "ready" }))))
    }

    fn provider_result(&mut self, id: &str, content: Value, is_error: bool) -> Option<Output> {
        // The oldest call of that id still unanswered: a repeated id is answered in order.
        let Some(index) = self
            .calls
            .iter()
            .position(|call| call.provider_call_id == id && !call.answered_by_provider)
        else {
            tracing::warn!(provider_call_id = %id, "a provider tool result for no open call refused");
            return None;
        };
        let call = &mut self.calls[index];
        call.answered_by_provider = true;
        let result = if is_error {
            Err(match content {
                Value::String(text) => text,
                other => other.to_string(),
            })
        } else {
            Ok(content)
        };
        Some(Output::ProviderResult { index, result })
    }

    fn open_call(&mut self, id: String, name: String) -> Option<Output> {
        if self.open(&id).is_some() {
            // The provider reused an id: the new call gets its own (server) id, and the id's
            // later pieces go to it; the call it shadows never completes and is answered so.
            tracing::warn!(run_id = %self.ids.run_id, provider_call_id = %id, "a provider reused a call id");
        }
        let refused = (self.calls.len() >= TOOL_CALLS_PER_STEP_MAX)
            .then(|| format!("more than {TOOL_CALLS_PER_STEP_MAX} tool calls in one step"));
        let call = PendingCall {
            call_id: self.call_ids.mint(),
            provider_call_id: id,
            name,
            input_json: String::new(),
            input: None,
            thread_id: Uuid::new_v4(),
            block_id: Uuid::new_v4(),
            message_id: Uuid::new_v4(),
            refused,
            answered_by_provider: false,
            approved: false,
            ended: false,
            input_cut: false,
        };
        let mut draft = self.ids.call_draft(&call, EventKind::ToolCall);
        draft.content = json!({
            "name": call.name,
            "tool_call_id": call.call_id,
            "input": {},
            "status": "streaming",
        });
        if call.refused.is_none() && self.client_tools.contains(&call.name) {
            draft.content["client"] = json!(true);
        }
        let provider_id = &call.provider_call_id;
        if !provider_id.is_empty() && provider_id.chars().count() <= PROVIDER_CALL_ID_CHARS_MAX {
            draft.content["provider_call_id"] = json!(provider_id);
        }
        let call_id = call.call_id.clone();
        self.calls.push(call);
        Some(Output::OpenCall { call_id, draft })
    }

    /// The newest call the provider named `provider_call_id` whose input is still streaming.
    fn open(&self, provider_call_id: &str) -> Option<usize> {
        self.calls.iter().rposition(|call| call.provider_call_id == provider_call_id && !call.ended)
    }
}

#[cfg(test)]
mod tests;
