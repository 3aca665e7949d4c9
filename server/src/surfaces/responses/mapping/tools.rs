//! The tool calls of a run as the Responses API's items: the caller's tools as
//! `function_call`s whose arguments stream, the agent's own as `agentstream:tool_call` items
//! once their result is in, a call waiting for a person as an `agentstream:approval_request`,
//! and the caller's outputs as the response's input.

use app::AgentEvent;
use serde_json::{json, Value};
use uuid::Uuid;

use super::super::wire::item_id;
use super::{Call, ResponseMapper};
use crate::surfaces::steps::text_of;

impl ResponseMapper {
    pub(super) fn tool_call(&mut self, event: &AgentEvent, out: &mut Vec<Value>) {
        let Some(message) = event.message_id else {
            return;
        };
        match (event.delta_path.as_deref(), &event.delta) {
            (None, _) => {
                let call_id = text_of(&event.content, "tool_call_id");
                if call_id.is_empty() || self.call_messages.contains_key(&call_id) {
                    return;
                }
                let client = event.content.get("client").and_then(Value::as_bool) == Some(true);
                let name = text_of(&event.content, "name");
                let mut call = Call {
                    start_event: event.id,
                    call_id: call_id.clone(),
                    name,
                    arguments: String::new(),
                    client,
                    index: None,
                    input: None,
                    done: false,
                };
                if client {
                    self.close_text(out, "completed");
                    call.index = Some(self.add_item(
                        out,
                        json!({
                            "id": item_id("fc_", event.id), "type": "function_call",
                            "call_id": call_id, "name": call.name, "arguments": "",
                            "status": "in_progress",
                        }),
                    ));
                }
                self.call_messages.insert(call_id, message);
                self.calls.insert(message, call);
                // A call given whole (not streamed) is ready at once.
                if text_of(&event.content, "status") == "ready" {
                    let input = event.content.get("input").cloned();
                    self.finish_call(message, input, "completed", out);
                }
            }
            (Some("input_json"), Some(Value::String(piece))) => {
                let Some(call) = self.calls.get_mut(&message).filter(|call| !call.done) else {
                    return;
                };
                call.arguments.push_str(piece);
                let Some(index) = call.index.filter(|_| !piece.is_empty()) else {
                    return;
                };
                // The item's arguments are written when the call is done (or a poll asks).
                let id = self.id_at(index);
                let delta = json!({ "item_id": id, "output_index": index, "delta": piece });
                self.emit(out, "response.function_call_arguments.delta", delta);
            }
            (Some(""), Some(delta)) => {
                if let Some(input) = delta.get("input") {
                    self.finish_call(message, Some(input.clone()), "completed", out);
                }
            }
            _ => {}
        }
    }

    /// A call's input is complete: a `function_call` item is done, with the input's JSON as
    /// its arguments (valid JSON, whatever pieces the model streamed).
    pub(super) fn finish_call(
        &mut self,
        message: Uuid,
        input: Option<Value>,
        status: &str,
        out: &mut Vec<Value>,
    ) {
        let Some(call) = self.calls.get_mut(&message).filter(|call| !call.done) else {
            return;
        };
        call.done = true;
        let input = input.unwrap_or_else(|| json!({}));
        let arguments = input.to_string();
        call.input = Some(input);
        let Some(index) = call.index else {
            return;
        };
        let id = self.id_at(index);
        self.output[index]["arguments"] = json!(arguments);
        self.emit(
            out,
            "response.function_call_arguments.done",
            json!({ "item_id": id, "output_index": index, "arguments": arguments }),
        );
        self.finish_item(out, index, status);
    }

    pub(super) fn approval_request(&mut self, event: &AgentEvent, out: &mut Vec<Value>) {
        let call_id = text_of(&event.content, "tool_call_id");
        let Some(&message) = self.call_messages.get(&call_id) else {
            return;
        };
        self.finish_call(message, event.content.get("input").cloned(), "completed", out);
        if event.content.get("client").and_then(Value::as_bool) == Some(true) {
            return;
        }
        // One of the agent's tools waits for a person: an item clients pass over.
        self.close_text(out, "completed");
        let Some(call) = self.calls.get(&message) else {
            return;
        };
        let item = json!({
            "id": item_id("apr_", event.id), "type": "agentstream:approval_request",
            "status": "in_progress", "call_id": call.call_id, "name": call.name,
            "arguments": call.input.as_ref().map(Value::to_string).unwrap_or_default(),
        });
        let index = self.add_item(out, item);
        self.finish_item(out, index, "completed");
    }

    pub(super) fn tool_result(&mut self, event: &AgentEvent, out: &mut Vec<Value>) {
        let call_id = text_of(&event.content, "tool_call_id");
        if !self.results.insert(call_id.clone()) {
            return; // a second result of one call: the first is what the call returned
        }
        let Some(call) =
            self.call_messages.get(&call_id).and_then(|message| self.calls.get(message))
        else {
            if let Some(name) = self.approved.get(&call_id).cloned() {
                // An earlier response's call a person answered, carried out (or refused) now.
                self.server_result(event, item_id("tc_", event.id), call_id, name, None, out);
                return;
            }
            // The output of an earlier response's call that this one carries on from: what the
            // caller gave.
            self.input.push(json!({
                "id": item_id("fco_", event.id), "type": "function_call_output",
                "call_id": call_id, "status": "completed",
                "output": output_text(event.content.get("result").unwrap_or(&Value::Null)),
            }));
            return;
        };
        if call.client {
            return;
        }
        let (id, name) = (item_id("tc_", call.start_event), call.name.clone());
        let input = call.input.clone();
        self.server_result(event, id, call_id, name, input, out);
    }

    /// A result of one of the agent's own tools, as an item of ours.
    fn server_result(
        &mut self,
        event: &AgentEvent,
        id: String,
        call_id: String,
        name: String,
        input: Option<Value>,
        out: &mut Vec<Value>,
    ) {
        let failed = event.content.get("is_error").and_then(Value::as_bool) == Some(true);
        let item = json!({
            "id": id, "type": "agentstream:tool_call", "status": "in_progress",
            "call_id": call_id, "name": name,
            "arguments": input.as_ref().map(Value::to_string).unwrap_or_default(),
        });
        self.close_text(out, "completed");
        let index = self.add_item(out, item);
        self.output[index]["output"] = event.content.get("result").cloned().unwrap_or(Value::Null);
        self.finish_item(out, index, if failed { "failed" } else { "completed" });
    }
}

/// A tool's result as a `function_call_output`'s output: its text, or its JSON.
fn output_text(result: &Value) -> String {
    match result {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}
