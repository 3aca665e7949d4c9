//! Data-driven cases of the chunk mapping, and the protocol's ordering rules checked on every
//! prefix of every case (a stream cut anywhere, as a client going away sees it).

use super::*;

use crate::surfaces::test_log::{id, text_run, tool_run, Log, AGENT, RUN};

fn map(events: &[AgentEvent]) -> Vec<Chunk> {
    let mut mapper = ChunkMapper::new();
    events.iter().flat_map(|event| mapper.push(event)).map(|(_, chunk)| chunk).collect()
}

/// The chunks' types, with the part they name where they name one (`text-delta:M1`).
fn outline(chunks: &[Chunk]) -> Vec<String> {
    chunks
        .iter()
        .map(|chunk| {
            let json = serde_json::to_value(chunk).unwrap();
            let kind = json["type"].as_str().unwrap().to_owned();
            let part = json["id"]
                .as_str()
                .map(|id| format!("M{}", Uuid::parse_str(id).unwrap().as_u128() - 0x100))
                .or_else(|| json["toolCallId"].as_str().map(str::to_owned));
            match part {
                Some(part) => format!("{kind}:{part}"),
                None => kind,
            }
        })
        .collect()
}

#[test]
fn runs_map_to_the_chunks_the_protocol_orders() {
    let failed = {
        let mut log = Log::default();
        log.start()
            .piece(EventKind::Text, 1, 1, "Partial")
            .end(EventKind::Error, json!({ "type": "api_error", "message": "overloaded" }))
            .end(EventKind::RunFailed, json!({ "error": { "type": "api_error", "message": "the provider is overloaded" } }));
        log
    };
    let cancelled = {
        let mut log = Log::default();
        log.start()
            .piece(EventKind::Text, 1, 1, "Half a sen")
            .end(EventKind::RunCancelled, json!({}));
        log
    };
    let cases: [(&str, Log, &str); 4] = [
        (
            "text",
            text_run(),
            "start start-step reasoning-start:M1 reasoning-delta:M1 reasoning-end:M1 \
             text-start:M2 text-delta:M2 text-delta:M2 text-end:M2 finish-step finish",
        ),
        (
            "tools",
            tool_run(),
            "start start-step text-start:M1 text-delta:M1 text-end:M1 tool-input-start:c1 \
             tool-input-delta:c1 tool-input-delta:c1 tool-input-available:c1 tool-input-start:c2 \
             tool-input-available:c2 tool-output-available:c1 tool-output-error:c2 finish-step \
             start-step text-start:M4 text-delta:M4 text-end:M4 finish-step finish",
        ),
        (
            "failed",
            failed,
            "start start-step text-start:M1 text-delta:M1 text-end:M1 finish-step error finish",
        ),
        (
            "cancelled",
            cancelled,
            "start start-step text-start:M1 text-delta:M1 text-end:M1 finish-step finish",
        ),
    ];
    for (name, log, expected) in cases {
        let chunks = map(&log.0);
        assert_eq!(outline(&chunks).join(" "), words(expected), "{name}");
        for cut in 0..=log.0.len() {
            assert_well_formed_prefix(&log.0[..cut], cut == log.0.len());
        }
    }
}

fn assert_well_formed_prefix(events: &[AgentEvent], whole: bool) {
    let chunks = map(events);
    if events.is_empty() {
        assert!(chunks.is_empty());
        return;
    }
    if let Err(broken) = crate::surfaces::ai_sdk::verify::verify(&chunks, whole) {
        panic!("{broken}: {:?}", outline(&chunks));
    }
}

#[test]
fn the_wire_has_the_schema_fields_and_nothing_else() {
    let chunks = map(&tool_run().0);
    let json: Vec<Value> =
        chunks.iter().map(|chunk| serde_json::to_value(chunk).unwrap()).collect();
    assert_eq!(
        json[0],
        json!({
            "type": "start",
            "messageId": Uuid::from_u128(RUN).to_string(),
            "messageMetadata": { "agent_id": Uuid::from_u128(AGENT), "run_id": Uuid::from_u128(RUN), "seq": 1 },
        })
    );
    assert_eq!(
        json[3],
        json!({ "type": "text-delta", "id": id(1).to_string(), "delta": "Let me look." })
    );
    assert_eq!(
        json[5],
        json!({ "type": "tool-input-start", "toolCallId": "c1", "toolName": "clock", "dynamic": true })
    );
    assert_eq!(
        json[6],
        json!({ "type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "{\"zone\":" })
    );
    assert_eq!(
        json[8],
        json!({ "type": "tool-input-available", "toolCallId": "c1", "toolName": "clock", "input": { "zone": "UTC" }, "dynamic": true })
    );
    assert_eq!(
        json[11],
        json!({ "type": "tool-output-available", "toolCallId": "c1", "output": "noon", "dynamic": true })
    );
    assert_eq!(
        json[12],
        json!({ "type": "tool-output-error", "toolCallId": "c2", "errorText": "division by zero", "dynamic": true })
    );
    let finish = json.last().unwrap();
    assert_eq!(finish["type"], "finish");
    assert_eq!(finish.get("finishReason"), None, "ai < 5.0.92 refuses it");
    assert_eq!(finish["messageMetadata"], json!({ "usage": null }));
}

/// Events before the run's start (the previous run's end, the user's message) are not this
/// stream's; after the run's end nothing more comes.
#[test]
fn only_the_run_from_its_start_to_its_end_is_mapped() {
    let run = text_run();
    let mut mapper = ChunkMapper::new();
    let mut earlier = run.0[0].clone();
    earlier.kind = EventKind::User;
    assert!(mapper.push(&earlier).is_empty());
    let chunks: Vec<Tagged> = run.0.iter().flat_map(|event| mapper.push(event)).collect();
    assert!(mapper.ended());
    assert_eq!(chunks.first().unwrap().0, 1, "tagged with the seq of the event it came from");
    assert_eq!(chunks.last().unwrap().0, run.0.len() as u64);
    assert!(mapper.push(&run.0[1]).is_empty());
}

/// A turn with approvals, run by run: the request ends the first stream; the continuation goes
/// on with the same message and carries out the answers before its first step.
#[test]
fn approvals_map_to_requests_and_the_answers_outputs() {
    let log = crate::surfaces::test_log::approval_turn();
    let first = Some(Uuid::from_u128(0x20));
    let split = log.0.iter().take_while(|event| event.run_id == first).count();
    let (asking, answering) = log.0.split_at(split);
    assert_eq!(
        outline(&map(asking))[3..],
        [
            "tool-input-available:c1",
            "tool-input-start:c2",
            "tool-input-available:c2",
            "tool-approval-request:c1",
            "tool-approval-request:c2",
            "finish-step",
            "finish",
        ]
    );
    let chunks = map(answering);
    assert_eq!(
        outline(&chunks),
        [
            "start",
            "tool-output-denied:c2",
            "tool-output-available:c1",
            "start-step",
            "text-start:M3",
            "text-delta:M3",
            "text-end:M3",
            "finish-step",
            "finish",
        ]
    );
    let json = serde_json::to_value(&chunks[0]).unwrap();
    assert_eq!(json["messageId"], Uuid::from_u128(0x20).to_string(), "the turn's message");
    let finish = serde_json::to_value(map(asking).last().unwrap()).unwrap();
    assert_eq!(finish.get("finishReason"), None, "ai < 5.0.92 refuses it");
    for run in [asking, answering] {
        for cut in 0..=run.len() {
            assert_well_formed_prefix(&run[..cut], cut == run.len());
        }
    }
}

/// A client tool's call: a static tool part (its name in the part's type) whose complete input
/// is the last word of the run — no approval chunk; the client's own output is not sent back
/// by the continuation (the client holds it).
#[test]
fn client_tools_calls_are_static_parts_that_wait_for_the_client() {
    let mut log = Log::default();
    log.start().call(1, 0x10, "c1", "confirm").merge(
        1,
        0x10,
        json!({ "status": "awaiting_client" }),
    );
    log.0[1].content["client"] = json!(true);
    log.merge(1, 0x10, json!({ "input": { "question": "ok?" }, "status": "ready" }));
    let request = log.approval_request(1, "c1");
    request.0.last_mut().unwrap().content["client"] = json!(true);
    log.end(EventKind::RunCompleted, json!({ "stop_reason": "requires_client_tool" }));
    let chunks = map(&log.0);
    assert_eq!(
        outline(&chunks),
        [
            "start",
            "start-step",
            "tool-input-start:c1",
            "tool-input-available:c1",
            "finish-step",
            "finish",
        ]
    );
    for chunk in &chunks {
        let json = serde_json::to_value(chunk).unwrap();
        if json["type"].as_str().unwrap().starts_with("tool-") {
            assert_eq!(json["dynamic"], false, "{json}");
        }
    }
    let mut answered = Log::default();
    answered
        .start_continuation(0x21, RUN)
        .result(1, "c1", json!("yes"), false)
        .end(EventKind::RunCompleted, json!({ "stop_reason": "end_turn" }));
    assert_eq!(outline(&map(&answered.0)), ["start", "finish"]);
    for cut in 0..=log.0.len() {
        assert_well_formed_prefix(&log.0[..cut], cut == log.0.len());
    }
}

/// An outline written as words: one string, any white space between the items.
fn words(outline: &str) -> String {
    outline.split_whitespace().collect::<Vec<_>>().join(" ")
}
