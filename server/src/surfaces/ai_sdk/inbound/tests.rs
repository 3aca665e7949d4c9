//! The inbound mapping: an AI SDK stream as the log keeps it, its refusals, and the round trips
//! with the outbound mapping — chunks → log → chunks gives the chunks back, and log → chunks →
//! log the log back (ids aside: the log makes its own) — over generated streams and runs.

use app::{AgentEvent, EventKind};
use proptest::prelude::*;
use serde_json::{json, Value};
use uuid::Uuid;

use super::*;
use crate::agent::produce::check::{check_batch, Producer};
use crate::agent::RunLimits;
use crate::surfaces::ai_sdk::mapping::ChunkMapper;

const AGENT: Uuid = Uuid::from_u128(0xa);

/// Produced events through the producer API's check, committed at seqs 1, 2, 3 ….
fn to_log(produced: Vec<ProducedEvent>) -> Vec<AgentEvent> {
    let producer = Producer { id: "t", epoch: 0 };
    let checked = check_batch(None, produced, producer, RunLimits::default())
        .unwrap_or_else(|refusal| panic!("the check refused: {refusal}"));
    checked
        .drafts
        .into_iter()
        .enumerate()
        .map(|(index, draft)| draft.into_event(AGENT, index as u64 + 1))
        .collect()
}

fn inbound(chunks: &[Value], user: Option<&str>) -> Vec<ProducedEvent> {
    let mut mapper = Inbound::new();
    let mut out = Vec::new();
    for (index, chunk) in chunks.iter().enumerate() {
        out.extend(
            mapper
                .push(chunk, user)
                .unwrap_or_else(|error| panic!("chunk {index} {chunk}: {error}")),
        );
    }
    out
}

fn outbound(events: &[AgentEvent]) -> Vec<Value> {
    let mut mapper = ChunkMapper::new();
    events
        .iter()
        .flat_map(|event| mapper.push(event))
        .map(|(_, chunk)| serde_json::to_value(chunk).unwrap())
        .collect()
}

/// Chunks with their ids renamed in order of first appearance (`p0`, `p1` …; `c0` … for tool
/// calls) and the start's own ids left out: what a client sees, whoever made the ids.
fn normalized_chunks(chunks: &[Value]) -> Vec<Value> {
    let mut parts: Vec<String> = Vec::new();
    let mut calls: Vec<String> = Vec::new();
    let rename = |names: &mut Vec<String>, prefix: &str, id: &str| {
        let index = names.iter().position(|name| name == id).unwrap_or_else(|| {
            names.push(id.to_owned());
            names.len() - 1
        });
        format!("{prefix}{index}")
    };
    chunks
        .iter()
        .map(|chunk| {
            let mut chunk = chunk.clone();
            if chunk["type"] == "start" {
                return json!({ "type": "start" });
            }
            if let Some(id) = chunk.get("id").and_then(Value::as_str).map(str::to_owned) {
                chunk["id"] = json!(rename(&mut parts, "p", &id));
            }
            if let Some(id) = chunk.get("toolCallId").and_then(Value::as_str).map(str::to_owned) {
                chunk["toolCallId"] = json!(rename(&mut calls, "c", &id));
            }
            chunk
        })
        .collect()
}

/// A log as clients fold it, ids aside: per event its kind, delta and content (tool call ids
/// renamed in order), and which block and message it shares with earlier events.
fn normalized_log(events: &[AgentEvent]) -> Vec<Value> {
    let mut blocks: Vec<Uuid> = Vec::new();
    let mut messages: Vec<Uuid> = Vec::new();
    let mut calls: Vec<String> = Vec::new();
    let index = |names: &mut Vec<Uuid>, id: Option<Uuid>| {
        id.map(|id| {
            names.iter().position(|name| *name == id).unwrap_or_else(|| {
                names.push(id);
                names.len() - 1
            })
        })
    };
    events
        .iter()
        .map(|event| {
            let mut content = event.content.clone();
            if let Some(call) = content.get("tool_call_id").and_then(Value::as_str) {
                let call = call.to_owned();
                let at = calls.iter().position(|name| *name == call).unwrap_or_else(|| {
                    calls.push(call);
                    calls.len() - 1
                });
                content["tool_call_id"] = json!(format!("c{at}"));
            }
            if event.kind == EventKind::RunStarted {
                content = Value::Null;
            }
            json!({
                "kind": event.kind.as_str(),
                "block": index(&mut blocks, event.block_id),
                "message": index(&mut messages, event.message_id),
                "delta": event.delta,
                "path": event.delta_path,
                "action": event.delta_action.map(|action| action.as_str()),
                "content": content,
            })
        })
        .collect()
}

#[test]
fn a_stream_with_reasoning_text_and_a_tool_becomes_a_run() {
    let chunks = vec![
        json!({ "type": "start", "messageId": "msg-1" }),
        json!({ "type": "start-step" }),
        json!({ "type": "reasoning-start", "id": "r1" }),
        json!({ "type": "reasoning-delta", "id": "r1", "delta": "thinking" }),
        json!({ "type": "reasoning-end", "id": "r1" }),
        json!({ "type": "tool-input-start", "toolCallId": "call-1", "toolName": "weather" }),
        json!({ "type": "tool-input-delta", "toolCallId": "call-1", "inputTextDelta": "{\"city\":" }),
        json!({ "type": "tool-input-delta", "toolCallId": "call-1", "inputTextDelta": "\"Oslo\"}" }),
        json!({ "type": "tool-input-available", "toolCallId": "call-1", "toolName": "weather", "input": { "city": "Oslo" } }),
        json!({ "type": "tool-output-available", "toolCallId": "call-1", "output": { "c": 3 } }),
        json!({ "type": "finish-step" }),
        json!({ "type": "start-step" }),
        json!({ "type": "text-start", "id": "t1" }),
        json!({ "type": "text-delta", "id": "t1", "delta": "3 degrees" }),
        json!({ "type": "text-end", "id": "t1" }),
        json!({ "type": "data-weather", "data": { "ignored": true } }),
        json!({ "type": "finish-step" }),
        json!({ "type": "finish", "finishReason": "stop", "messageMetadata": { "usage": { "input_tokens": 9, "output_tokens": 4 } } }),
    ];
    let events = to_log(inbound(&chunks, Some("weather in Oslo?")));
    let kinds: Vec<&str> = events.iter().map(|event| event.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "user",
            "thinking",
            "tool_call",
            "tool_call",
            "tool_call",
            "tool_call",
            "tool_call",
            "tool_result",
            "text",
            "usage",
            "run_completed"
        ]
    );
    assert_eq!(events[0].metadata["ai_sdk_message_id"], "msg-1");
    assert_eq!(events[1].content["text"], "weather in Oslo?");
    let end = events.last().unwrap();
    assert_eq!(end.content["stop_reason"], "stop");
    assert_eq!(end.content["usage"]["input_tokens"], 9);
    // The folded run reads as ours would: the call answered, the reply there.
    let mut timeline = app::timeline::Timeline::new();
    timeline.apply_all(events.iter().cloned());
    assert_eq!(timeline.runs()[0].status.as_str(), "completed");
}

#[test]
fn streams_that_break_the_protocol_are_refused_by_chunk() {
    let cases: Vec<(Vec<Value>, &str)> = vec![
        (
            vec![json!({ "type": "text-delta", "id": "x", "delta": "a" })],
            "part \"x\", which did not start",
        ),
        (
            vec![json!({ "type": "tool-output-available", "toolCallId": "c", "output": 1 })],
            "call \"c\", which did not start",
        ),
        (vec![json!("text")], "must be a JSON object"),
        (vec![json!({ "no": "type" })], "needs a type"),
        (vec![json!({ "type": "start" }), json!({ "type": "start" })], "a second start"),
        (
            vec![json!({ "type": "finish" }), json!({ "type": "text-start", "id": "a" })],
            "after the stream's finish",
        ),
        (
            vec![json!({ "type": "tool-input-start", "toolCallId": "", "toolName": "x" })],
            "toolCallId must be 1 to 256",
        ),
        (
            vec![
                json!({ "type": "text-start", "id": "a" }),
                json!({ "type": "text-delta", "id": "a", "delta": 5 }),
            ],
            "needs delta, a string",
        ),
    ];
    for (chunks, says) in cases {
        let mut mapper = Inbound::new();
        let error = chunks
            .iter()
            .map(|chunk| mapper.push(chunk, None))
            .find_map(Result::err)
            .unwrap_or_else(|| panic!("{chunks:?} was taken"));
        assert!(error.contains(says), "{error:?} should say {says:?}");
    }
    // A newer SDK's chunk is skipped and counted, not refused.
    let mut mapper = Inbound::new();
    mapper.push(&json!({ "type": "start" }), None).unwrap();
    assert!(mapper.push(&json!({ "type": "tool-approval-response-v9" }), None).unwrap().is_empty());
    assert_eq!(mapper.skipped, 1);
}

/// One model step as the AI SDK streams it.
#[derive(Clone, Debug)]
struct Step {
    reasoning: Vec<String>,
    text: Vec<String>,
    /// Tool calls: (input pieces, output or error).
    calls: Vec<(Vec<String>, Result<u32, String>)>,
}

fn piece() -> impl Strategy<Value = String> {
    "[a-z ]{1,6}"
}

fn step(last: bool) -> impl Strategy<Value = Step> {
    let calls = if last { 0..1usize } else { 1..3usize };
    (
        prop::collection::vec(piece(), 0..3),
        prop::collection::vec(piece(), 0..4),
        prop::collection::vec(
            (
                prop::collection::vec(piece(), 0..3),
                prop_oneof![any::<u32>().prop_map(Ok), piece().prop_map(Err)],
            ),
            calls,
        ),
    )
        .prop_map(|(reasoning, text, calls)| Step { reasoning, text, calls })
}

/// A run: some steps that call tools, a last one that may not, and how it ends.
fn run() -> impl Strategy<Value = (Vec<Step>, Option<(u32, u32)>, bool)> {
    (
        prop::collection::vec(step(false), 0..3),
        step(true),
        prop::option::of((any::<u16>(), any::<u16>()).prop_map(|(a, b)| (a as u32, b as u32))),
        any::<bool>(),
    )
        .prop_map(|(mut steps, last, usage, failed)| {
            steps.push(last);
            (steps, usage, failed)
        })
}

/// The stream `toUIMessageStream` would send for the run (the order our outbound mapping
/// keeps: a step's reasoning, then its text, then its calls; an error just before the finish).
fn stream_of(steps: &[Step], usage: Option<(u32, u32)>, failed: bool) -> Vec<Value> {
    let mut chunks = vec![json!({ "type": "start" })];
    let mut part = 0;
    let mut call = 0;
    for step in steps {
        let has_content =
            !step.reasoning.is_empty() || !step.text.is_empty() || !step.calls.is_empty();
        if !has_content {
            continue;
        }
        chunks.push(json!({ "type": "start-step" }));
        for (kind, pieces) in [("reasoning", &step.reasoning), ("text", &step.text)] {
            if pieces.is_empty() {
                continue;
            }
            let id = format!("part{part}");
            part += 1;
            chunks.push(json!({ "type": format!("{kind}-start"), "id": id }));
            for piece in pieces {
                chunks.push(json!({ "type": format!("{kind}-delta"), "id": id, "delta": piece }));
            }
            chunks.push(json!({ "type": format!("{kind}-end"), "id": id }));
        }
        let ids: Vec<String> = step
            .calls
            .iter()
            .map(|_| {
                call += 1;
                format!("call{call}")
            })
            .collect();
        for ((pieces, _), id) in step.calls.iter().zip(&ids) {
            chunks.push(json!({ "type": "tool-input-start", "toolCallId": id, "toolName": "tool", "dynamic": true }));
            for piece in pieces {
                chunks.push(json!({ "type": "tool-input-delta", "toolCallId": id, "inputTextDelta": piece }));
            }
            chunks.push(json!({ "type": "tool-input-available", "toolCallId": id, "toolName": "tool", "input": { "n": pieces.len() }, "dynamic": true }));
        }
        for ((_, output), id) in step.calls.iter().zip(&ids) {
            chunks.push(match output {
                Ok(value) => json!({ "type": "tool-output-available", "toolCallId": id, "output": value, "dynamic": true }),
                Err(error) => json!({ "type": "tool-output-error", "toolCallId": id, "errorText": error, "dynamic": true }),
            });
        }
        chunks.push(json!({ "type": "finish-step" }));
    }
    if failed {
        chunks.push(json!({ "type": "error", "errorText": "the model failed" }));
    }
    let usage =
        usage.map(|(input, output)| json!({ "input_tokens": input, "output_tokens": output }));
    chunks.push(json!({ "type": "finish", "messageMetadata": { "usage": usage } }));
    chunks
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// chunks → log → chunks: what a `useChat` client resuming from agentstream reads is what
    /// the backend's stream said.
    #[test]
    fn chunks_to_log_to_chunks((steps, usage, failed) in run()) {
        let chunks = stream_of(&steps, usage, failed);
        let log = to_log(inbound(&chunks, None));
        let back = outbound(&log);
        prop_assert_eq!(normalized_chunks(&back), normalized_chunks(&chunks));
    }

    /// log → chunks → log: a run the log holds, streamed out and piped back in, is the same run.
    #[test]
    fn log_to_chunks_to_log((steps, usage, failed) in run()) {
        let log = to_log(inbound(&stream_of(&steps, usage, failed), Some("hi")));
        let again = to_log(inbound(&outbound(&log), Some("hi")));
        prop_assert_eq!(normalized_log(&again), normalized_log(&log));
    }
}

/// Runs as our own loop writes them, streamed out and piped back in: a client reading the piped
/// run sees exactly what it saw of the original, and the folded runs agree.
#[test]
fn our_loops_runs_go_out_and_back_in_unchanged() {
    use crate::surfaces::test_log::{text_run, tool_run};
    for (name, log) in [("text", text_run()), ("tools", tool_run())] {
        let original = log.0;
        let chunks = outbound(&original);
        let piped = to_log(inbound(&chunks, None));
        assert_eq!(normalized_chunks(&outbound(&piped)), normalized_chunks(&chunks), "{name}");
        let fold = |events: &[AgentEvent]| {
            let mut timeline = app::timeline::Timeline::new();
            timeline.apply_all(events.iter().cloned());
            let run = timeline.runs()[0].clone();
            (run.status, run.stop_reason)
        };
        assert_eq!(fold(&piped), fold(&original), "{name}");
        let kinds = |events: &[AgentEvent]| -> Vec<&'static str> {
            events
                .iter()
                .filter(|event| !matches!(event.kind, EventKind::ToolCall))
                .map(|event| event.kind.as_str())
                .collect()
        };
        assert_eq!(kinds(&piped), kinds(&original), "{name}");
    }
}
