//! AG-UI over SSE: one run's events as LF-only `data: <event>\n\n` frames (no `[DONE]`: the
//! client JSON-parses every data line), each event's `metadata` carrying where it stands in the
//! log (`seq`, `agent_id`, our `run_id`), and the frame's `id:` the same place as a
//! [`FrameId`]. Keep-alive comments between frames (the client skips frames without data).
//! Nothing here cancels a run: a client that goes away only stops reading.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::mapping::{AgUiEvent, EventMapper};
use crate::delivery::subscription::FollowError;
use crate::surfaces::chat::ChatState;
use crate::surfaces::native::sse::SSE_KEEPALIVE_INTERVAL_MS;
use crate::surfaces::run_feed::RunCursor;
use crate::surfaces::run_feed::{frames, FrameId};

/// Events queued between a run's feed and its HTTP response (a slower reader makes the feed
/// wait; its log subscription then catches up from the store, and the run never waits).
pub const AG_UI_FEED_EVENTS_MAX: usize = 64;

/// An AG-UI event and its frame's id.
pub(super) type Framed = (FrameId, AgUiEvent);

/// How a run is streamed.
pub(super) struct Plan {
    pub thread_id: String,
    /// The run id the client knows (its own `runId`, or ours).
    pub client_run_id: String,
    /// What the client has already; the default for everything.
    pub cursor: FrameId,
    /// A connect: the conversation so far, sent right after `RUN_STARTED`.
    pub snapshot: Option<Vec<Value>>,
    /// A connect: events up to this seq are what happened before the client came, sent
    /// compacted (one content event per message so far).
    pub replay_through: Option<u64>,
}

/// Follows run `run_id` from `after_seq` (just before its start) and maps it to AG-UI events
/// as `plan` says. `RUN_STARTED` is always sent first, also when the cursor is past it.
pub(super) fn feed(
    state: &ChatState,
    agent_id: Uuid,
    run_id: Uuid,
    after_seq: u64,
    plan: Plan,
) -> mpsc::Receiver<Result<Framed, FollowError>> {
    let mut mapper = EventMapper::new(plan.thread_id, plan.client_run_id);
    let Plan { cursor, mut snapshot, replay_through, .. } = plan;
    let mut replayed: Vec<Framed> = Vec::new();
    let at = RunCursor::new(agent_id, run_id, after_seq);
    let log = (state.store.clone(), state.hub.clone());
    crate::surfaces::run_feed::feed(("ag_ui", AG_UI_FEED_EVENTS_MAX), log, at, move |event| {
        let mut tagged = mapper.push(event);
        let starts = matches!(tagged.first(), Some((_, AgUiEvent::RunStarted { .. })));
        if starts {
            if let Some(messages) = snapshot.take() {
                tagged.push((event.seq, AgUiEvent::MessagesSnapshot { messages }));
            }
        }
        let first = tagged.first().cloned();
        let mut framed = frames(tagged, cursor);
        if starts && framed.is_empty() {
            let (seq, started) = first.expect("a start");
            framed.push((FrameId { seq, index: None }, started));
        }
        match replay_through {
            // Merged as they come: the catch-up holds about one event per message, however
            // long the run was.
            Some(through) if event.seq < through && !event.kind.is_run_end() => {
                framed.into_iter().for_each(|item| compact_into(&mut replayed, item));
                Vec::new()
            }
            _ => {
                let mut out = std::mem::take(&mut replayed);
                out.extend(framed);
                out
            }
        }
    })
}

/// Merges each run of deltas to one message or call into one delta (a replay shows a
/// message's text so far at once); the merged delta keeps the last one's place.
fn compact_into(out: &mut Vec<Framed>, (id, event): Framed) {
    if let Some((last_id, last)) = out.last_mut() {
        if last.merge(&event) {
            *last_id = id;
            return;
        }
    }
    out.push((id, event));
}

/// One frame: the event with its `metadata`, and its id.
fn frame(id: FrameId, event: &AgUiEvent, agent_id: Option<Uuid>, run_id: Option<Uuid>) -> Event {
    let mut value = serde_json::to_value(event).expect("events serialize");
    let mut metadata = json!({ "seq": id.seq });
    if let Some(agent_id) = agent_id {
        metadata["agent_id"] = json!(agent_id);
    }
    if let Some(run_id) = run_id {
        metadata["run_id"] = json!(run_id);
    }
    value["metadata"] = metadata;
    Event::default().id(id.to_string()).data(value.to_string())
}

/// Events of a stream that is not a run's feed (a connect with nothing in flight).
pub(super) fn fixed(events: Vec<Framed>) -> mpsc::Receiver<Result<Framed, FollowError>> {
    let (sender, receiver) = mpsc::channel(events.len().max(1));
    for event in events {
        let _ = sender.try_send(Ok(event));
    }
    receiver
}

struct Streaming {
    events: mpsc::Receiver<Result<Framed, FollowError>>,
    agent_id: Option<Uuid>,
    run_id: Option<Uuid>,
    thread_id: String,
    finished: bool,
    shutdown: tokio_util::sync::CancellationToken,
    _slot: tokio::sync::OwnedSemaphorePermit,
}

/// The SSE response for `events`. If the log cannot be followed, or the server shuts down, the
/// stream ends with `RUN_ERROR` saying so (the run goes on; `POST /v1/ag-ui/connect` picks the
/// thread up again).
pub(super) fn sse_response(
    state: &ChatState,
    agent_id: Option<Uuid>,
    run_id: Option<Uuid>,
    thread_id: &str,
    events: mpsc::Receiver<Result<Framed, FollowError>>,
    slot: tokio::sync::OwnedSemaphorePermit,
) -> Response {
    let streaming = Streaming {
        events,
        agent_id,
        run_id,
        thread_id: thread_id.to_owned(),
        finished: false,
        shutdown: state.shutdown.clone(),
        _slot: slot,
    };
    let events = stream::unfold(streaming, |mut streaming| async move {
        if streaming.finished {
            return None;
        }
        let broken = |streaming: &mut Streaming, message: String, code: &str| {
            streaming.finished = true;
            let event = AgUiEvent::RunError { message, code: Some(code.to_owned()) };
            let value = serde_json::to_value(&event).expect("events serialize");
            Event::default().data(value.to_string())
        };
        let event = tokio::select! {
            next = streaming.events.recv() => match next {
                Some(Ok((id, event))) => frame(id, &event, streaming.agent_id, streaming.run_id),
                Some(Err(follow)) => {
                    let message = format!(
                        "the stream broke off ({follow}); the run goes on: POST /v1/ag-ui/connect {{\"threadId\": \"{}\"}} picks it up",
                        streaming.thread_id
                    );
                    broken(&mut streaming, message, follow.code())
                }
                None => return None,
            },
            _ = streaming.shutdown.cancelled() => {
                let message = format!(
                    "the server is shutting down; the run goes on: POST /v1/ag-ui/connect {{\"threadId\": \"{}\"}} picks it up",
                    streaming.thread_id
                );
                broken(&mut streaming, message, "server_shutting_down")
            }
        };
        Some((Ok::<Event, Infallible>(event), streaming))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_millis(SSE_KEEPALIVE_INTERVAL_MS)))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::surfaces::test_log::tool_run;

    fn mapped(events: &[app::AgentEvent]) -> Vec<Framed> {
        let mut mapper = EventMapper::new("t".into(), "r".into());
        events.iter().flat_map(|event| frames(mapper.push(event), FrameId::default())).collect()
    }

    /// A replay shows each message's text so far at once, in the same order, and ends where
    /// the uncompacted stream ends: the same cursor, the same text.
    #[test]
    fn a_compacted_replay_says_the_same_in_fewer_events() {
        let whole = mapped(&tool_run().0);
        let mut compacted = Vec::new();
        whole.iter().cloned().for_each(|item| compact_into(&mut compacted, item));
        assert!(compacted.len() < whole.len());
        assert_eq!(compacted.last().unwrap().0, whole.last().unwrap().0);
        let text = |framed: &[Framed]| -> String {
            framed
                .iter()
                .map(|(_, event)| match event {
                    AgUiEvent::TextMessageContent { delta, .. }
                    | AgUiEvent::ToolCallArgs { delta, .. } => delta.clone(),
                    _ => String::new(),
                })
                .collect()
        };
        assert_eq!(text(&compacted), text(&whole));
        let args: Vec<&AgUiEvent> = compacted
            .iter()
            .map(|(_, event)| event)
            .filter(|event| matches!(event, AgUiEvent::ToolCallArgs { tool_call_id, .. } if tool_call_id == "c1"))
            .collect();
        assert_eq!(
            args,
            [&AgUiEvent::ToolCallArgs {
                tool_call_id: "c1".into(),
                delta: "{\"zone\":\"UTC\"}".into()
            }]
        );
    }
}
