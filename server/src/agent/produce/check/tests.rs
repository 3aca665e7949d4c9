//! The batch check, case by case: a producer's batch (as JSON) against a run opened by earlier
//! batches, and what comes out — the kinds written, or the refusal naming the event.

use serde_json::{json, Value};

use super::parse::{parse_batch, BatchError};
use super::*;

const PRODUCER: Producer<'static> = Producer { id: "worker", epoch: 2 };

fn items(batch: Value) -> Vec<ProducedEvent> {
    parse_value(&batch).expect("the case's batch parses")
}

/// [`parse_batch`] of the batch's JSON text.
fn parse_value(batch: &Value) -> Result<Vec<ProducedEvent>, BatchError> {
    parse_batch(serde_json::to_string(batch).unwrap().as_bytes())
}

/// Runs `batches` in order; returns the kinds each wrote, or the first refusal.
fn run(
    batches: &[Value],
    limits: RunLimits,
) -> Result<(Vec<Vec<String>>, Option<ProducedRun>), String> {
    let mut open: Option<ProducedRun> = None;
    let mut written = Vec::new();
    for batch in batches {
        let checked = check_batch(open.as_ref(), items(batch.clone()), PRODUCER, limits)
            .map_err(|refusal| refusal.to_string())?;
        written.push(
            checked
                .drafts
                .iter()
                .map(|draft| {
                    let status = draft
                        .delta
                        .as_ref()
                        .and_then(|delta| delta.get("status"))
                        .and_then(Value::as_str);
                    match status {
                        Some(status) => format!("{}:{status}", draft.kind.as_str()),
                        None => draft.kind.as_str().to_owned(),
                    }
                })
                .collect(),
        );
        open = checked.run;
    }
    Ok((written, open))
}

fn start() -> Value {
    json!([{ "kind": "run_started", "metadata": { "model": "gpt-x" } }])
}

const MESSAGE: &str = "0190d0c0-0000-7000-8000-000000000001";
const OTHER: &str = "0190d0c0-0000-7000-8000-000000000002";

#[test]
fn accepted_batches_and_what_they_write() {
    type Case = (&'static str, Vec<Value>, Vec<Vec<&'static str>>);
    let cases: Vec<Case> = vec![
        (
            "a whole run in one batch",
            vec![json!([
                { "kind": "run_started" },
                { "kind": "user", "message_id": OTHER, "content": { "text": "hi" } },
                { "kind": "text", "message_id": MESSAGE, "delta": "Hel", "delta_action": "append" },
                { "kind": "text", "message_id": MESSAGE, "delta": "lo", "delta_action": "append" },
                { "kind": "usage", "content": { "input_tokens": 3, "output_tokens": 2 } },
                { "kind": "run_completed" },
            ])],
            vec![vec!["run_started", "user", "text", "text", "usage", "run_completed"]],
        ),
        (
            "a tool call: opened, input streamed and merged, answered (its status merged first)",
            vec![
                start(),
                json!([
                    { "kind": "tool_call", "message_id": MESSAGE, "content": { "tool_call_id": "c1", "name": "search" } },
                    { "kind": "tool_call", "message_id": MESSAGE, "delta": "{\"q\":", "delta_path": "input_json", "delta_action": "append" },
                    { "kind": "tool_call", "content": { "tool_call_id": "c1" }, "delta": { "input": { "q": 1 }, "status": "ready" }, "delta_action": "merge" },
                ]),
                json!([{ "kind": "tool_result", "content": { "tool_call_id": "c1", "result": "found" } }]),
            ],
            vec![
                vec!["run_started"],
                vec!["tool_call", "tool_call", "tool_call:ready"],
                vec!["tool_call:done", "tool_result"],
            ],
        ),
        (
            "an error result marks the card as an error",
            vec![
                start(),
                json!([
                    { "kind": "tool_call", "content": { "tool_call_id": "c1", "name": "search" } },
                    { "kind": "tool_result", "content": { "tool_call_id": "c1", "result": "boom", "is_error": true } },
                ]),
            ],
            vec![vec!["run_started"], vec!["tool_call", "tool_call:error", "tool_result"]],
        ),
        (
            "an end with a call still open answers it first",
            vec![
                start(),
                json!([
                    { "kind": "tool_call", "content": { "tool_call_id": "c1", "name": "search" } },
                    { "kind": "run_failed", "content": { "error": { "message": "gave up" } } },
                ]),
            ],
            vec![
                vec!["run_started"],
                vec!["tool_call", "tool_call:error", "tool_result", "run_failed"],
            ],
        ),
        (
            "after an end, the next batch opens a new run",
            vec![json!([{ "kind": "run_started" }, { "kind": "run_completed" }]), start()],
            vec![vec!["run_started", "run_completed"], vec!["run_started"]],
        ),
    ];
    for (name, batches, expected) in cases {
        let (written, _) =
            run(&batches, RunLimits::default()).unwrap_or_else(|error| panic!("{name}: {error}"));
        assert_eq!(written, expected, "{name}");
    }
}

#[test]
fn refused_batches_name_the_event() {
    let cases: Vec<(&str, Vec<Value>, &str)> = vec![
        (
            "no run open",
            vec![
                json!([{ "kind": "text", "message_id": MESSAGE, "delta": "x", "delta_action": "append" }]),
            ],
            "event 0: no run is open",
        ),
        ("run_started twice", vec![start(), start()], "event 0: run "),
        (
            "run_started not first",
            vec![json!([{ "kind": "run_started" }, { "kind": "run_started" }])],
            "event 1: run_started must be a batch's first event",
        ),
        (
            "server-assigned id",
            vec![json!([{ "kind": "run_started", "id": MESSAGE }])],
            "event 0: unknown field `id`",
        ),
        ("seq", vec![json!([{ "kind": "run_started", "seq": 4 }])], "unknown field `seq`"),
        (
            "run id chosen",
            vec![json!([{ "kind": "run_started", "run_id": MESSAGE }])],
            "run_id is the server's",
        ),
        ("wrong type", vec![json!([{ "kind": 3 }])], "event 0: invalid type"),
        (
            "unknown kind",
            vec![start(), json!([{ "kind": "telepathy" }])],
            "event 0: unknown kind \"telepathy\"",
        ),
        (
            "approvals",
            vec![start(), json!([{ "kind": "approval_requested", "content": {} }])],
            "approvals are asked and answered through the server",
        ),
        (
            "text without message",
            vec![start(), json!([{ "kind": "text", "delta": "x", "delta_action": "append" }])],
            "text needs message_id",
        ),
        (
            "append of a number",
            vec![
                start(),
                json!([{ "kind": "text", "message_id": MESSAGE, "delta": 4, "delta_action": "append" }]),
            ],
            "an append delta must be a string",
        ),
        (
            "delta without action",
            vec![start(), json!([{ "kind": "text", "message_id": MESSAGE, "delta": "x" }])],
            "a delta needs delta_action",
        ),
        (
            "bad action",
            vec![
                start(),
                json!([{ "kind": "text", "message_id": MESSAGE, "delta": "x", "delta_action": "prepend" }]),
            ],
            "unknown variant `prepend`",
        ),
        (
            "empty path segment",
            vec![
                start(),
                json!([{ "kind": "text", "message_id": MESSAGE, "delta": "x", "delta_action": "append", "delta_path": "a..b" }]),
            ],
            "empty segment",
        ),
        (
            "a message changes kind",
            vec![
                start(),
                json!([
                    { "kind": "text", "message_id": MESSAGE, "delta": "x", "delta_action": "append" },
                    { "kind": "thinking", "message_id": MESSAGE, "delta": "y", "delta_action": "append" },
                ]),
            ],
            "event 1: message 0190d0c0-0000-7000-8000-000000000001 is a text message, not thinking",
        ),
        (
            "call without id",
            vec![start(), json!([{ "kind": "tool_call", "content": { "name": "x" } }])],
            "needs content.tool_call_id",
        ),
        (
            "empty call id",
            vec![
                start(),
                json!([{ "kind": "tool_call", "content": { "tool_call_id": "", "name": "x" } }]),
            ],
            "needs content.tool_call_id",
        ),
        (
            "huge call id",
            vec![
                start(),
                json!([{ "kind": "tool_call", "content": { "tool_call_id": "x".repeat(300), "name": "x" } }]),
            ],
            "longer than 256",
        ),
        (
            "repeated call id",
            vec![
                start(),
                json!([
                    { "kind": "tool_call", "content": { "tool_call_id": "c", "name": "x" } },
                    { "kind": "tool_call", "content": { "tool_call_id": "c", "name": "x" } },
                ]),
            ],
            "event 1: tool call \"c\" was opened already",
        ),
        (
            "result of no call",
            vec![
                start(),
                json!([{ "kind": "tool_result", "content": { "tool_call_id": "nope", "result": 1 } }]),
            ],
            "names no tool call",
        ),
        (
            "two results",
            vec![
                start(),
                json!([
                    { "kind": "tool_call", "content": { "tool_call_id": "c", "name": "x" } },
                    { "kind": "tool_result", "content": { "tool_call_id": "c", "result": 1 } },
                    { "kind": "tool_result", "content": { "tool_call_id": "c", "result": 2 } },
                ]),
            ],
            "event 2: tool call c has its result already",
        ),
        (
            "result without result",
            vec![
                start(),
                json!([
                    { "kind": "tool_call", "content": { "tool_call_id": "c", "name": "x" } },
                    { "kind": "tool_result", "content": { "tool_call_id": "c" } },
                ]),
            ],
            "needs content.result",
        ),
        (
            "usage not a number",
            vec![start(), json!([{ "kind": "usage", "content": { "input_tokens": "many" } }])],
            "must be a whole number",
        ),
        (
            "after the end",
            vec![
                json!([{ "kind": "run_started" }, { "kind": "run_completed" }, { "kind": "usage" }]),
            ],
            "event 2: the run ended earlier in this batch",
        ),
        (
            "lease out of range",
            vec![json!([{ "kind": "run_started", "metadata": { "lease_ms": 5 } }])],
            "metadata.lease_ms must be",
        ),
        ("not an array", vec![json!("text")], "JSON array"),
        ("empty batch", vec![json!([])], "no events"),
        (
            "content not an object",
            vec![start(), json!([{ "kind": "error", "content": "bad" }])],
            "content must be a JSON object",
        ),
    ];
    for (name, batches, says) in cases {
        let refused = match batches.last().map(parse_value) {
            Some(Err(BatchError::Refused(refusal))) => refusal.to_string(),
            Some(Err(BatchError::NotJson(error))) => panic!("{name}: not JSON? {error}"),
            _ => run(&batches, RunLimits::default()).map(|_| ()).expect_err(name),
        };
        assert!(refused.contains(says), "{name}: {refused:?} should say {says:?}");
    }
}

#[test]
fn run_limits_refuse_the_batch_as_over_limit() {
    let limits = RunLimits { events_max: 3, ..RunLimits::default() };
    let mut open = check_batch(None, items(start()), PRODUCER, limits).unwrap().run;
    let text = |text: &str| json!([{ "kind": "text", "message_id": MESSAGE, "delta": text, "delta_action": "append" }]);
    for _ in 0..2 {
        open = check_batch(open.as_ref(), items(text("x")), PRODUCER, limits).unwrap().run;
    }
    let refusal = check_batch(open.as_ref(), items(text("x")), PRODUCER, limits).unwrap_err();
    assert!(refusal.over_limit, "{refusal:?}");
    assert!(refusal.message.contains("limit of 3 events"), "{refusal:?}");
}

#[test]
fn run_started_records_the_producer_and_the_lease() {
    let checked = check_batch(
        None,
        items(json!([{ "kind": "run_started", "metadata": { "model": "m", "lease_ms": 2000 } }])),
        PRODUCER,
        RunLimits::default(),
    )
    .unwrap();
    let started = &checked.drafts[0];
    assert_eq!(
        started.metadata,
        json!({ "model": "m", "lease_ms": 2000, "producer": { "id": "worker", "epoch": 2 }, "provider": "producer" })
    );
    let run = checked.run.unwrap();
    assert_eq!(run.lease_ms, 2000);
    assert_eq!(started.run_id, Some(run.run_id));
    assert!(checked.opened);
}

#[test]
fn a_run_stopped_without_its_producer_is_closed_like_ours() {
    let cases = [
        (Stop::Cancelled, vec!["tool_call", "tool_result", "run_cancelled"]),
        (Stop::LeaseExpired, vec!["tool_call", "tool_result", "error", "run_failed"]),
        (Stop::Shutdown, vec!["tool_call", "tool_result", "error", "run_failed"]),
    ];
    for (stop, expected) in cases {
        let opened = check_batch(None, items(start()), PRODUCER, RunLimits::default()).unwrap();
        let call = check_batch(
            opened.run.as_ref(),
            items(json!([
                { "kind": "usage", "content": { "input_tokens": 1, "output_tokens": 2 } },
                { "kind": "tool_call", "content": { "tool_call_id": "c", "name": "x" } },
            ])),
            PRODUCER,
            RunLimits::default(),
        )
        .unwrap();
        let mut run = call.run.unwrap();
        let drafts = run.stopped(stop);
        let kinds: Vec<&str> = drafts.iter().map(|draft| draft.kind.as_str()).collect();
        assert_eq!(kinds, expected, "{stop:?}");
        let end = drafts.last().unwrap();
        assert_eq!(end.content["usage"], json!({ "input_tokens": 1, "output_tokens": 2 }));
        if stop != Stop::Cancelled {
            assert_eq!(end.content["error"]["type"], "interrupted", "{stop:?}");
        }
        assert!(drafts.iter().all(|draft| draft.run_id == Some(run.run_id)));
    }
}

/// A server that did not write a run's earlier batches rebuilds the run from the log: the state
/// equals the one the checks left, and the next batch is taken or refused alike.
#[test]
fn a_run_rebuilt_from_its_events_is_the_run_the_checks_left() {
    let agent = Uuid::from_u128(7);
    let cases: Vec<(&str, Vec<Value>, Value)> = vec![
        (
            "just opened",
            vec![start()],
            json!([{ "kind": "tool_call", "content": { "tool_call_id": "c1", "name": "s" } }]),
        ),
        (
            "a call open, another answered, a message, usage",
            vec![
                json!([
                    { "kind": "run_started", "thread_id": OTHER, "metadata": { "lease_ms": 5000 } },
                    { "kind": "user", "message_id": MESSAGE, "content": { "text": "hi" } },
                ]),
                json!([
                    { "kind": "tool_call", "content": { "tool_call_id": "c1", "name": "search", "input": { "q": 1 } } },
                    { "kind": "tool_call", "content": { "tool_call_id": "c2", "name": "fetch" } },
                    { "kind": "tool_call", "content": { "tool_call_id": "c2" }, "delta": { "status": "ready" }, "delta_action": "merge" },
                    { "kind": "tool_result", "content": { "tool_call_id": "c1", "result": "x" } },
                    { "kind": "usage", "content": { "input_tokens": 3, "output_tokens": 2 } },
                ]),
            ],
            // c1 is answered, c2 is not; the user message keeps its kind.
            json!([
                { "kind": "tool_result", "content": { "tool_call_id": "c2", "result": "y" } },
                { "kind": "text", "message_id": MESSAGE, "delta": "no", "delta_action": "append" },
            ]),
        ),
    ];
    for (name, batches, next) in cases {
        let mut open: Option<ProducedRun> = None;
        let mut log = Vec::new();
        for batch in &batches {
            let checked =
                check_batch(open.as_ref(), items(batch.clone()), PRODUCER, RunLimits::default())
                    .unwrap_or_else(|refusal| panic!("{name}: {refusal}"));
            for draft in checked.drafts {
                let seq = log.len() as u64 + 1;
                log.push(draft.into_event(agent, seq));
            }
            open = checked.run;
        }
        let open = open.unwrap_or_else(|| panic!("{name}: the run is open"));
        let rebuilt = ProducedRun::rebuild(&log[0], &log).expect("a run_started");
        assert_eq!(rebuilt, open, "{name}");
        let original =
            check_batch(Some(&open), items(next.clone()), PRODUCER, RunLimits::default())
                .map(|checked| checked.drafts.len());
        let again = check_batch(Some(&rebuilt), items(next), PRODUCER, RunLimits::default())
            .map(|checked| checked.drafts.len());
        assert_eq!(again, original, "{name}");
    }
}

/// Drafts made at once share one UUIDv7 and one clock read, yet each has an id of its own:
/// within a batch (whatever each event becomes), across batches, and in a stop's drafts.
#[test]
fn every_draft_has_an_id_of_its_own() {
    let limits = RunLimits::default();
    let opened = check_batch(None, items(start()), PRODUCER, limits).unwrap();
    let text = |n: usize| {
        (0..n)
            .map(|_| json!({ "kind": "text", "message_id": MESSAGE, "delta": "tok ", "delta_action": "append" }))
            .collect::<Vec<_>>()
    };
    let mut batches = vec![json!(text(64)), json!(text(1))];
    batches.push(json!([
        { "kind": "tool_call", "content": { "tool_call_id": "a", "name": "x" } },
        { "kind": "tool_call", "content": { "tool_call_id": "b", "name": "y" } },
        { "kind": "tool_result", "content": { "tool_call_id": "a", "result": 1 } },
    ]));
    let mut seen = std::collections::HashSet::new();
    seen.extend(opened.drafts.iter().map(|draft| draft.id));
    let mut open = opened.run;
    for batch in batches {
        let checked = check_batch(open.as_ref(), items(batch), PRODUCER, limits).unwrap();
        let at = checked.drafts[0].created_at;
        for draft in &checked.drafts {
            assert!(seen.insert(draft.id), "id {} given twice", draft.id);
            assert_eq!(draft.created_at, at, "one batch, one time");
        }
        open = checked.run;
    }
    // The stop answers call "b" (a status and a result) and fails the run.
    let stopped = open.unwrap().stopped(Stop::LeaseExpired);
    assert_eq!(stopped.len(), 4);
    for draft in &stopped {
        assert!(seen.insert(draft.id), "id {} given twice", draft.id);
    }
}
