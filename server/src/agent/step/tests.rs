//! Cases for the step assembler: provider events in, what the run writes out (one line per
//! output), then each call's bookkeeping at the end.

use super::*;
use crate::limits::TOOL_CALLS_PER_STEP_MAX;
use crate::provider::ProviderEvent as P;

fn ids() -> RunIds {
    RunIds { run_id: Uuid::from_u128(1), thread_id: Uuid::from_u128(2) }
}

/// One output as a line: `kind path action delta` for deltas, `kind content` otherwise.
fn line(output: &Output, step: &Step) -> String {
    let describe = |draft: &EventDraft| {
        let on_call = step
            .calls()
            .iter()
            .find(|call| Some(call.thread_id) == draft.thread_id)
            .map(|call| format!(" #{}", call.call_id))
            .unwrap_or_default();
        match &draft.delta {
            Some(delta) => format!(
                "{}{on_call} {}:{} {}",
                draft.kind.as_str(),
                draft.delta_path.as_deref().unwrap_or("?"),
                draft.delta_action.map_or("?", |action| action.as_str()),
                delta
            ),
            None => format!("{}{on_call} {}", draft.kind.as_str(), draft.content),
        }
    };
    match output {
        Output::Write(draft) => describe(draft),
        Output::OpenCall { call_id, draft } => {
            format!("open {} (#{call_id})", describe(draft))
        }
        Output::ProviderResult { index, result } => format!("provider result {index} {result:?}"),
    }
}

/// A call at the end: `id name input-or-problem [provider]`.
fn call_line(call: &PendingCall) -> String {
    let input = match call.input_problem() {
        Some(problem) => format!("({problem})"),
        None => call.input.as_ref().expect("no problem: an input").to_string(),
    };
    let by_provider = if call.answered_by_provider { " [provider]" } else { "" };
    format!("{}({}) {} {input}{by_provider}", call.call_id, call.provider_call_id, call.name)
}

fn start(id: &str, name: &str) -> P {
    P::ToolCallStart { id: id.into(), name: name.into() }
}

fn input(id: &str, json: &str) -> P {
    P::ToolCallInputDelta { id: id.into(), json: json.into() }
}

fn end(id: &str) -> P {
    P::ToolCallEnd { id: id.into() }
}

/// A provider id past `PROVIDER_CALL_ID_CHARS_MAX`: not kept in the log.
macro_rules! huge_id {
    () => {
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
    };
}
const HUGE_ID: &str = huge_id!();

struct Case {
    name: &'static str,
    events: Vec<P>,
    outputs: &'static [&'static str],
    calls: &'static [&'static str],
    text: &'static str,
}

#[test]
fn provider_events_become_drafts_and_calls() {
    let cases = vec![
        Case {
            name: "thinking, its signature and text share a block; empty pieces vanish",
            events: vec![
                P::ThinkingDelta("hm".into()),
                P::ThinkingSignature("sig".into()),
                P::TextDelta(String::new()),
                P::TextDelta("Hel".into()),
                P::TextDelta("lo".into()),
                P::Stop { reason: "end_turn".into() },
            ],
            outputs: &[
                r#"thinking text:append "hm""#,
                r#"thinking signature:append "sig""#,
                r#"text text:append "Hel""#,
                r#"text text:append "lo""#,
            ],
            calls: &[],
            text: "Hello",
        },
        Case {
            name: "a call's input accumulates from pieces and is parsed at its end",
            events: vec![
                start("c1", "calculator"),
                input("c1", r#"{"expr"#),
                input("c1", r#"ession": "6*7"}"#),
                end("c1"),
            ],
            outputs: &[
                r#"open tool_call #call_1 {"input":{},"name":"calculator","provider_call_id":"c1","status":"streaming","tool_call_id":"call_1"} (#call_1)"#,
                r#"tool_call #call_1 input_json:append "{\"expr""#,
                r#"tool_call #call_1 input_json:append "ession\": \"6*7\"}""#,
                r#"tool_call #call_1 :merge {"input":{"expression":"6*7"},"status":"ready"}"#,
            ],
            calls: &[r#"call_1(c1) calculator {"expression":"6*7"}"#],
            text: "",
        },
        Case {
            name: "no input at all is {}; input that does not parse is a problem, not a ready",
            events: vec![
                start("a", "clock"),
                end("a"),
                start("b", "calculator"),
                input("b", "{\"x\": "),
                end("b"),
            ],
            outputs: &[
                r#"open tool_call #call_1 {"input":{},"name":"clock","provider_call_id":"a","status":"streaming","tool_call_id":"call_1"} (#call_1)"#,
                r#"tool_call #call_1 :merge {"input":{},"status":"ready"}"#,
                r#"open tool_call #call_2 {"input":{},"name":"calculator","provider_call_id":"b","status":"streaming","tool_call_id":"call_2"} (#call_2)"#,
                r#"tool_call #call_2 input_json:append "{\"x\": ""#,
            ],
            calls: &[
                "call_1(a) clock {}",
                r#"call_2(b) calculator (the input is not valid JSON: "{\"x\": ")"#,
            ],
            text: "",
        },
        Case {
            name:
                "a call whose end never came cannot run; pieces for unknown or ended calls vanish",
            events: vec![
                start("a", "slow"),
                input("a", "{}"),
                end("a"),
                input("a", "more"),
                end("a"),
                input("zz", "{}"),
                end("zz"),
                start("b", "slow"),
                input("b", "{}"),
            ],
            outputs: &[
                r#"open tool_call #call_1 {"input":{},"name":"slow","provider_call_id":"a","status":"streaming","tool_call_id":"call_1"} (#call_1)"#,
                r#"tool_call #call_1 input_json:append "{}""#,
                r#"tool_call #call_1 :merge {"input":{},"status":"ready"}"#,
                r#"open tool_call #call_2 {"input":{},"name":"slow","provider_call_id":"b","status":"streaming","tool_call_id":"call_2"} (#call_2)"#,
                r#"tool_call #call_2 input_json:append "{}""#,
            ],
            calls: &[
                "call_1(a) slow {}",
                "call_2(b) slow (the model's input for this call never completed)",
            ],
            text: "",
        },
        Case {
            name: "a reused provider id opens a call of its own; its pieces go to the newest",
            events: vec![start("a", "clock"), start("a", "calculator"), input("a", "{}"), end("a")],
            outputs: &[
                r#"open tool_call #call_1 {"input":{},"name":"clock","provider_call_id":"a","status":"streaming","tool_call_id":"call_1"} (#call_1)"#,
                r#"open tool_call #call_2 {"input":{},"name":"calculator","provider_call_id":"a","status":"streaming","tool_call_id":"call_2"} (#call_2)"#,
                r#"tool_call #call_2 input_json:append "{}""#,
                r#"tool_call #call_2 :merge {"input":{},"status":"ready"}"#,
            ],
            calls: &[
                "call_1(a) clock (the model's input for this call never completed)",
                "call_2(a) calculator {}",
            ],
            text: "",
        },
        Case {
            name: "empty, blank and huge provider ids are no one's problem: the server names calls",
            events: vec![
                start("", "clock"),
                end(""),
                start(" ", "clock"),
                end(" "),
                start(HUGE_ID, "clock"),
                end(HUGE_ID),
            ],
            outputs: &[
                r#"open tool_call #call_1 {"input":{},"name":"clock","status":"streaming","tool_call_id":"call_1"} (#call_1)"#,
                r#"tool_call #call_1 :merge {"input":{},"status":"ready"}"#,
                r#"open tool_call #call_2 {"input":{},"name":"clock","provider_call_id":" ","status":"streaming","tool_call_id":"call_2"} (#call_2)"#,
                r#"tool_call #call_2 :merge {"input":{},"status":"ready"}"#,
                r#"open tool_call #call_3 {"input":{},"name":"clock","status":"streaming","tool_call_id":"call_3"} (#call_3)"#,
                r#"tool_call #call_3 :merge {"input":{},"status":"ready"}"#,
            ],
            calls: &[
                "call_1() clock {}",
                "call_2( ) clock {}",
                concat!("call_3(", huge_id!(), ") clock {}"),
            ],
            text: "",
        },
        Case {
            name: "usage is cumulative within a call and reported as the run's total",
            events: vec![
                P::Usage { input_tokens: 10, output_tokens: 1 },
                P::Usage { input_tokens: 10, output_tokens: 5 },
            ],
            outputs: &[
                r#"usage {"input_tokens":110,"output_tokens":21}"#,
                r#"usage {"input_tokens":110,"output_tokens":25}"#,
            ],
            calls: &[],
            text: "",
        },
        Case {
            name: "a result the provider ran itself is passed on once; unknown ids vanish",
            events: vec![
                start("t", "Bash"),
                input("t", r#"{"command":"date"}"#),
                end("t"),
                P::ToolResult { id: "t".into(), content: json!("12:00"), is_error: false },
                P::ToolResult { id: "t".into(), content: json!("again"), is_error: false },
                P::ToolResult { id: "nope".into(), content: json!("x"), is_error: true },
            ],
            outputs: &[
                r#"open tool_call #call_1 {"input":{},"name":"Bash","provider_call_id":"t","status":"streaming","tool_call_id":"call_1"} (#call_1)"#,
                r#"tool_call #call_1 input_json:append "{\"command\":\"date\"}""#,
                r#"tool_call #call_1 :merge {"input":{"command":"date"},"status":"ready"}"#,
                r#"provider result 0 Ok(String("12:00"))"#,
            ],
            calls: &[r#"call_1(t) Bash {"command":"date"} [provider]"#],
            text: "",
        },
        Case {
            name: "an error result from the provider keeps its text",
            events: vec![
                start("t", "Bash"),
                end("t"),
                P::ToolResult { id: "t".into(), content: json!({"code": 1}), is_error: true },
            ],
            outputs: &[
                r#"open tool_call #call_1 {"input":{},"name":"Bash","provider_call_id":"t","status":"streaming","tool_call_id":"call_1"} (#call_1)"#,
                r#"tool_call #call_1 :merge {"input":{},"status":"ready"}"#,
                r#"provider result 0 Err("{\"code\":1}")"#,
            ],
            calls: &[r#"call_1(t) Bash {} [provider]"#],
            text: "",
        },
    ];
    for case in cases {
        let mut step = Step::new(ids(), Usage { input_tokens: 100, output_tokens: 20 })
            .with_call_ids(CallIds::Counting(0));
        let mut outputs = Vec::new();
        for event in case.events {
            if let Some(output) = step.apply(event) {
                outputs.push(line(&output, &step));
            }
        }
        assert_eq!(outputs, case.outputs, "{}", case.name);
        let assembled = step.finish();
        let calls: Vec<String> = assembled.calls.iter().map(call_line).collect();
        assert_eq!(calls, case.calls, "{}", case.name);
        assert_eq!(assembled.text, case.text, "{}", case.name);
    }
}

#[test]
fn calls_past_the_step_limit_are_recorded_as_refused() {
    let mut step = Step::new(ids(), Usage::default()).with_call_ids(CallIds::Counting(0));
    for index in 0..TOOL_CALLS_PER_STEP_MAX + 2 {
        let id = format!("c{index}");
        assert!(matches!(step.apply(start(&id, "clock")), Some(Output::OpenCall { .. })));
        step.apply(end(&id));
    }
    let refused: Vec<&str> = step
        .calls()
        .iter()
        .filter(|call| call.refused.is_some())
        .map(|call| call.provider_call_id.as_str())
        .collect();
    assert_eq!(refused, ["c16", "c17"]);
}

#[test]
fn a_forgotten_call_is_gone() {
    let mut step = Step::new(ids(), Usage::default()).with_call_ids(CallIds::Counting(0));
    step.apply(start("a", "clock"));
    step.forget_call("call_1");
    assert!(step.apply(input("a", "{}")).is_none());
    assert!(step.finish().calls.is_empty());
}

fn error(retryable: bool, retry_after_ms: Option<u64>) -> ProviderError {
    ProviderError {
        kind: "overloaded_error".into(),
        message: "busy".into(),
        retryable,
        retry_after_ms,
    }
}

#[test]
fn retries_back_off_until_output_starts_or_they_run_out() {
    let mut step = Step::new(ids(), Usage::default());
    let delays: Vec<Option<u64>> =
        (0..5).map(|_| step.retry(&error(true, None)).map(|(delay, _)| delay)).collect();
    assert_eq!(delays, [Some(500), Some(1000), Some(2000), None, None]);

    let mut step = Step::new(ids(), Usage::default());
    let (delay, notice) = step.retry(&error(true, Some(120_000))).unwrap();
    assert_eq!(delay, PROVIDER_RETRY_DELAY_MAX_MS, "retry-after is capped");
    assert_eq!(notice.kind, EventKind::Loading);
    assert_eq!(notice.content["label"], "overloaded_error: retrying in 30.0 s (attempt 2 of 4)");

    let mut step = Step::new(ids(), Usage::default());
    assert!(step.retry(&error(false, None)).is_none(), "not retryable");

    let mut step = Step::new(ids(), Usage::default());
    step.apply(P::Usage { input_tokens: 1, output_tokens: 1 });
    assert!(step.retry(&error(true, None)).is_some(), "usage is not output");
    step.apply(P::TextDelta("x".into()));
    assert!(step.retry(&error(true, None)).is_none(), "text in the log: a retry would repeat it");
}

#[test]
fn the_huge_id_is_past_the_limit() {
    assert!(HUGE_ID.len() > PROVIDER_CALL_ID_CHARS_MAX);
}

#[test]
fn server_ids_are_unique_and_fit_every_provider() {
    let mut step = Step::new(ids(), Usage::default());
    for _ in 0..3 {
        step.apply(start("same", "clock"));
        step.apply(end("same"));
    }
    let ids: std::collections::HashSet<&str> =
        step.calls().iter().map(|call| call.call_id.as_str()).collect();
    assert_eq!(ids.len(), 3);
    for id in ids {
        assert!(id.len() <= 40, "{id}");
        assert!(id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{id}");
    }
}

#[test]
fn an_input_past_its_limit_is_cut_and_the_call_refused() {
    let mut step = Step::new(ids(), Usage::default()).with_call_ids(CallIds::Counting(0));
    step.apply(start("a", "echo"));
    let piece = "x".repeat(TOOL_CALL_INPUT_BYTES_MAX / 2);
    assert!(step.apply(input("a", &piece)).is_some());
    assert!(step.apply(input("a", &piece)).is_some(), "exactly the limit");
    assert!(step.apply(input("a", "y")).is_none(), "one byte past it");
    assert!(step.apply(input("a", "z")).is_none());
    assert!(step.apply(end("a")).is_none(), "no ready merge");
    let call = &step.calls()[0];
    assert_eq!(call.input_json.len(), TOOL_CALL_INPUT_BYTES_MAX);
    assert_eq!(
        call.refused.as_deref(),
        Some("the model's input for this call is longer than 262144 bytes")
    );
}

#[test]
fn a_client_tools_call_says_so_on_its_card_from_its_first_event() {
    let mut step = Step::new(ids(), Usage::default())
        .with_call_ids(CallIds::Counting(0))
        .with_client_tools(vec!["confirm".into()]);
    let marked = |output: Option<Output>| match output {
        Some(Output::OpenCall { draft, .. }) => draft.content.get("client").cloned(),
        _ => panic!("a call opens"),
    };
    assert_eq!(marked(step.apply(start("a", "confirm"))), Some(json!(true)));
    assert_eq!(marked(step.apply(start("b", "clock"))), None);
}
