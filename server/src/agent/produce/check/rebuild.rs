//! A produced run's state rebuilt from its events in the log: what a server that did not write
//! the run's earlier batches (it restarted, or the producer's retry reached another server)
//! checks the next batch against. Pure: the run's events in, the state [`super::check_batch`]
//! would have left, out.

use std::collections::HashMap;

use app::{AgentEvent, EventKind};
use serde_json::Value;

use super::{Call, ProducedRun};
use crate::limits::PRODUCER_LEASE_MS_DEFAULT;
use crate::store::EventDraft;

impl ProducedRun {
    /// The open run `started` began, after `events` (its events in seq order, `run_started`
    /// among them or not). `None` when `started` is no `run_started` with a run id.
    pub fn rebuild(started: &AgentEvent, events: &[AgentEvent]) -> Option<ProducedRun> {
        let run_id = started.run_id?;
        if started.kind != EventKind::RunStarted {
            return None;
        }
        let mut run = ProducedRun {
            run_id,
            thread_id: started.thread_id?,
            lease_ms: started
                .metadata
                .get("lease_ms")
                .and_then(Value::as_u64)
                .unwrap_or(PRODUCER_LEASE_MS_DEFAULT),
            calls: Vec::new(),
            messages: HashMap::new(),
            events: 1,
            bytes: 0,
            usage: Value::Null,
        };
        for event in events
            .iter()
            .filter(|event| event.run_id == Some(run_id) && event.kind != EventKind::RunStarted)
        {
            run.replay(event);
        }
        Some(run)
    }

    /// One event of the run, as its check counted it.
    fn replay(&mut self, event: &AgentEvent) {
        let mut counted = EventDraft::new(event.kind);
        counted.delta = event.delta.clone();
        counted.content = event.content.clone();
        counted.raw = event.raw.clone();
        self.events += 1;
        self.bytes += crate::agent::run::draft_bytes(&counted) as u64;
        let text = |field: &str| {
            event.content.get(field).and_then(Value::as_str).map(str::trim).map(str::to_owned)
        };
        match event.kind {
            EventKind::User | EventKind::Text | EventKind::Thinking => {
                if let Some(message_id) = event.message_id {
                    self.messages.entry(message_id).or_insert(event.kind);
                }
            }
            EventKind::ToolCall if event.delta.is_none() => {
                let (Some(message_id), Some(tool_call_id), Some(name)) =
                    (event.message_id, text("tool_call_id"), text("name"))
                else {
                    return;
                };
                self.messages.insert(message_id, EventKind::ToolCall);
                self.calls.push(Call {
                    tool_call_id,
                    name,
                    thread_id: event.thread_id.unwrap_or(self.thread_id),
                    block_id: event.block_id.unwrap_or(message_id),
                    message_id,
                    answered: false,
                });
            }
            EventKind::ToolResult => {
                let id = text("tool_call_id");
                if let Some(call) =
                    self.calls.iter_mut().find(|call| Some(&call.tool_call_id) == id.as_ref())
                {
                    call.answered = true;
                }
            }
            EventKind::Usage => self.usage = event.content.clone(),
            _ => {}
        }
    }
}
