//! Runs written by hand for the mapping tests: events numbered as they are added, ids from
//! small numbers.

use app::{AgentEvent, DeltaAction, EventKind};
use serde_json::{json, Value};
use uuid::Uuid;

pub const AGENT: u128 = 1;
pub const RUN: u128 = 2;

pub fn id(n: u128) -> Uuid {
    Uuid::from_u128(0x100 + n)
}

/// Events of one agent's log; new events belong to the current run (`RUN` at first).
pub struct Log(pub Vec<AgentEvent>, u128);

impl Default for Log {
    fn default() -> Log {
        Log(Vec::new(), RUN)
    }
}

impl Log {
    pub fn add(
        &mut self,
        kind: EventKind,
        block: Option<u128>,
        message: Option<u128>,
    ) -> &mut AgentEvent {
        let seq = self.0.len() as u64 + 1;
        let mut draft = crate::store::EventDraft::new(kind);
        draft.run_id = Some(Uuid::from_u128(self.1));
        draft.block_id = block.map(id);
        draft.message_id = message.map(id);
        self.0.push(draft.into_event(Uuid::from_u128(AGENT), seq));
        self.0.last_mut().unwrap()
    }
    pub fn start(&mut self) -> &mut Self {
        self.add(EventKind::RunStarted, None, None);
        self
    }
    /// Starts run `run` (its id is `Uuid::from_u128(run)`).
    pub fn start_run(&mut self, run: u128) -> &mut Self {
        self.1 = run;
        self.start()
    }
    /// The user's message, with the client's id for it.
    pub fn user(&mut self, message: u128, otid: &str, text: &str) -> &mut Self {
        let event = self.add(EventKind::User, Some(message), Some(message));
        event.content = json!({ "text": text, "otid": otid });
        self
    }
    pub fn piece(&mut self, kind: EventKind, block: u128, message: u128, text: &str) -> &mut Self {
        let event = self.add(kind, Some(block), Some(message));
        event.delta = Some(json!(text));
        event.delta_path = Some("text".into());
        event.delta_action = Some(DeltaAction::Append);
        self
    }
    pub fn call(&mut self, block: u128, message: u128, call: &str, name: &str) -> &mut Self {
        let event = self.add(EventKind::ToolCall, Some(block), Some(message));
        event.content =
            json!({ "name": name, "tool_call_id": call, "input": {}, "status": "streaming" });
        self
    }
    pub fn input_piece(&mut self, block: u128, message: u128, piece: &str) -> &mut Self {
        let event = self.add(EventKind::ToolCall, Some(block), Some(message));
        event.delta = Some(json!(piece));
        event.delta_path = Some("input_json".into());
        event.delta_action = Some(DeltaAction::Append);
        self
    }
    pub fn merge(&mut self, block: u128, message: u128, delta: Value) -> &mut Self {
        let event = self.add(EventKind::ToolCall, Some(block), Some(message));
        event.delta = Some(delta);
        event.delta_path = Some(String::new());
        event.delta_action = Some(DeltaAction::Merge);
        self
    }
    pub fn result(&mut self, block: u128, call: &str, result: Value, is_error: bool) -> &mut Self {
        let message = 0x50 + self.0.len() as u128;
        let event = self.add(EventKind::ToolResult, Some(block), Some(message));
        event.content = json!({ "tool_call_id": call, "name": "clock", "result": result, "is_error": is_error });
        self
    }
    /// Starts run `run`, which carries out answers to approval requests of the turn that run
    /// `continues` began.
    pub fn start_continuation(&mut self, run: u128, continues: u128) -> &mut Self {
        self.1 = run;
        let started = self.add(EventKind::RunStarted, None, None);
        started.metadata = json!({ "continues": Uuid::from_u128(continues) });
        self
    }
    /// A call on card `block` waits for approval.
    pub fn approval_request(&mut self, block: u128, call: &str) -> &mut Self {
        let message = 0x60 + self.0.len() as u128;
        let event = self.add(EventKind::ApprovalRequested, Some(block), Some(message));
        event.content = json!({ "tool_call_id": call, "name": "calculator", "input": {} });
        self
    }
    /// A person's answer to the request of `call` (on card `block`).
    pub fn approval_response(
        &mut self,
        block: u128,
        call: &str,
        approve: bool,
        reason: Option<&str>,
    ) -> &mut Self {
        let message = 0x70 + self.0.len() as u128;
        let event = self.add(EventKind::ApprovalResponse, Some(block), Some(message));
        event.content = json!({ "tool_call_id": call, "name": "calculator", "approve": approve });
        if let Some(reason) = reason {
            event.content["reason"] = json!(reason);
        }
        self
    }
    pub fn end(&mut self, kind: EventKind, content: Value) -> &mut Self {
        self.add(kind, None, None).content = content;
        self
    }
}

/// Thinking, then text, in one call.
pub fn text_run() -> Log {
    let mut log = Log::default();
    log.start()
        .piece(EventKind::Thinking, 1, 1, "hm")
        .piece(EventKind::Text, 1, 2, "Hello")
        .piece(EventKind::Text, 1, 2, " there")
        .end(EventKind::RunCompleted, json!({ "stop_reason": "end_turn" }));
    log
}

/// Text and two concurrent tool calls (one fails) in the first call, text in the second.
pub fn tool_run() -> Log {
    let mut log = Log::default();
    log.start()
        .piece(EventKind::Text, 1, 1, "Let me look.")
        .call(2, 2, "c1", "clock")
        .input_piece(2, 2, "{\"zone\":")
        .input_piece(2, 2, "\"UTC\"}")
        .merge(2, 2, json!({ "input": { "zone": "UTC" }, "status": "ready" }))
        .call(3, 3, "c2", "calculator")
        .merge(3, 3, json!({ "input": { "expression": "1/0" }, "status": "ready" }))
        .merge(2, 2, json!({ "status": "done" }))
        .result(2, "c1", json!("noon"), false)
        .result(3, "c2", json!("division by zero"), true)
        .piece(EventKind::Text, 4, 4, "It is noon.")
        .end(EventKind::RunCompleted, json!({ "stop_reason": "end_turn" }));
    log
}

/// A turn with approvals: run `0x20` calls two tools that need approval and ends
/// `requires_approval`; run `0x21` carries out a person's answers (the first approved, the
/// second denied) and the model answers.
pub fn approval_turn() -> Log {
    let mut log = Log::default();
    log.start_run(0x20)
        .user(0x30, "u-approve", "add them")
        .call(1, 1, "c1", "calculator")
        .merge(1, 1, json!({ "input": {}, "status": "ready" }))
        .call(2, 2, "c2", "calculator")
        .merge(2, 2, json!({ "input": {}, "status": "ready" }))
        .merge(1, 1, json!({ "status": "awaiting_approval" }))
        .approval_request(1, "c1")
        .merge(2, 2, json!({ "status": "awaiting_approval" }))
        .approval_request(2, "c2")
        .end(
            EventKind::RunCompleted,
            json!({ "stop_reason": "requires_approval", "awaiting": [
                { "tool_call_id": "c1", "name": "calculator", "input": {} },
                { "tool_call_id": "c2", "name": "calculator", "input": {} }] }),
        );
    log.start_continuation(0x21, 0x20)
        .approval_response(1, "c1", true, None)
        .approval_response(2, "c2", false, Some("one is enough"))
        .result(2, "c2", json!("a person denied this call: one is enough"), true)
        .merge(1, 1, json!({ "status": "approved" }))
        .result(1, "c1", json!(42), false)
        .piece(EventKind::Text, 3, 3, "It is 42.")
        .end(EventKind::RunCompleted, json!({ "stop_reason": "end_turn" }));
    log
}
