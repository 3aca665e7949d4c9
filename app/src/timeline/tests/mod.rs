//! Data-driven cases for the timeline (the scenarios of the streaming design, the event types of
//! the streaming specification); the property tests of convergence are in `properties.rs`.

use super::*;
use serde_json::json;

mod delivery;
mod properties;
mod timing;

// Short readable ids: T1 = thread 1, B2 = block 2, M3 = message 3, R1 = run 1.
fn thread(n: u128) -> Uuid {
    Uuid::from_u128(0x1000 + n)
}
fn block(n: u128) -> Uuid {
    Uuid::from_u128(0x2000 + n)
}
fn message(n: u128) -> Uuid {
    Uuid::from_u128(0x3000 + n)
}
fn run(n: u128) -> Uuid {
    Uuid::from_u128(0x4000 + n)
}

fn name(id: Uuid) -> String {
    let n = id.as_u128();
    match n {
        0x1000..=0x1fff => format!("T{}", n - 0x1000),
        0x2000..=0x2fff => format!("B{}", n - 0x2000),
        0x3000..=0x3fff => format!("M{}", n - 0x3000),
        0x4000..=0x4fff => format!("R{}", n - 0x4000),
        _ => format!("E{}", n.wrapping_sub(0x9000)),
    }
}

/// An event builder: `at(seq, kind)` then the fields a case needs.
#[derive(Clone)]
struct Ev(AgentEvent);

fn at(seq: u64, kind: EventKind) -> Ev {
    Ev(AgentEvent::bare(
        Uuid::from_u128(0x9000 + seq as u128),
        Uuid::from_u128(1),
        seq,
        kind,
        Value::Null,
    ))
}

/// The builder's id setters: `.run(1)` sets `run_id` to R1, and so on.
macro_rules! id_setters {
    ($($name:ident => $field:ident),*) => {
        impl Ev {$(
            fn $name(mut self, n: u128) -> Ev {
                self.0.$field = Some($name(n));
                self
            }
        )*}
    };
}

id_setters!(run => run_id, thread => thread_id, block => block_id, message => message_id);

impl Ev {
    fn content(mut self, content: Value) -> Ev {
        self.0.content = content;
        self
    }
    fn text(self, text: &str) -> Ev {
        self.content(json!({ "text": text }))
    }
    fn delta(mut self, path: &str, action: DeltaAction, delta: Value) -> Ev {
        self.0.delta = Some(delta);
        self.0.delta_path = Some(path.to_owned());
        self.0.delta_action = Some(action);
        self
    }
    fn append(self, text: &str) -> Ev {
        self.delta("text", DeltaAction::Append, json!(text))
    }
    fn raw(mut self, raw: Value) -> Ev {
        self.0.raw = Some(raw);
        self
    }
}

/// A plain-text picture of a timeline: runs, then blocks with their messages.
fn render(timeline: &Timeline) -> String {
    let mut lines = Vec::new();
    for run in timeline.runs() {
        let mut line = format!("run {} {}", name(run.run_id), run.status.as_str());
        if let Some(reason) = &run.stop_reason {
            line.push_str(&format!(" stop={reason}"));
        }
        if let Some(usage) = &run.usage {
            line.push_str(&format!(" usage={usage}"));
        }
        if let Some(error) = &run.error {
            line.push_str(&format!(" error={error}"));
        }
        if !run.thread_ids.is_empty() {
            let threads: Vec<_> = run.thread_ids.iter().map(|id| name(*id)).collect();
            line.push_str(&format!(" threads={}", threads.join(",")));
        }
        lines.push(line);
    }
    for block in timeline.blocks() {
        lines.push(format!(
            "{}{}",
            name(block.block_id),
            block.thread_id.map(|id| format!(" ({})", name(id))).unwrap_or_default()
        ));
        for message_id in &block.message_ids {
            let message = timeline.message(*message_id).unwrap();
            let body = match message.content.get("text").and_then(Value::as_str) {
                Some(text) if message.content.as_object().is_some_and(|o| o.len() == 1) => {
                    format!("{text:?}")
                }
                _ => message.content.to_string(),
            };
            lines.push(format!(
                "  {} {} {}",
                name(message.message_id),
                message.kind.as_str(),
                body
            ));
        }
    }
    lines.join("\n")
}

fn check(events: Vec<Ev>, expected: &str) {
    let mut timeline = Timeline::new();
    timeline.apply_all(events.into_iter().map(|ev| ev.0));
    assert_eq!(timeline.missing(), None, "the case left a gap");
    let actual = render(&timeline);
    let expected = expected
        .lines()
        .map(str::trim_end)
        .skip_while(|line| line.trim().is_empty())
        .map(|line| line.strip_prefix("        ").unwrap_or(line))
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(actual, expected.trim_end(), "\n--- actual ---\n{actual}\n");
}

use EventKind::*;

#[test]
fn scenario_1_a_simple_message_is_its_own_block() {
    check(
        vec![at(1, Text).text("Hello World")],
        r#"
        E1
          E1 text "Hello World"
        "#,
    );
}

#[test]
fn scenario_2_deltas_of_one_message_merge() {
    check(
        vec![
            at(1, Text).message(1).append("Hello"),
            at(2, Text).message(1).append(" World"),
            at(3, Text).message(1).append("!"),
        ],
        r#"
        M1
          M1 text "Hello World!"
        "#,
    );
}

#[test]
fn scenario_3_one_block_holds_thinking_a_tool_call_and_text() {
    check(
        vec![
            at(1, Thinking).block(1).message(1).append("Let me"),
            at(2, Thinking).block(1).message(1).append(" think"),
            at(3, ToolCall)
                .block(1)
                .message(2)
                .content(json!({"name": "search", "tool_call_id": "t1", "input": {"q": "x"}})),
            at(4, Text).block(1).message(3).append("Found"),
            at(5, Text).block(1).message(3).append(" it"),
        ],
        r#"
        B1
          M1 thinking "Let me think"
          M2 tool_call {"input":{"q":"x"},"name":"search","tool_call_id":"t1"}
          M3 text "Found it"
        "#,
    );
}

#[test]
fn scenario_4_sequential_operations_are_separate_blocks_in_order() {
    check(
        vec![
            at(1, Text).block(1).message(1).append("Checking"),
            at(2, Text).block(1).message(1).append("…"),
            at(3, Loading).block(2).message(2).content(json!({"label": "calling tool"})),
            at(4, Text).block(2).message(3).text("tool said yes"),
            at(5, Text).block(3).message(4).append("So"),
            at(6, Text).block(3).message(4).append(" yes."),
        ],
        r#"
        B1
          M1 text "Checking…"
        B2
          M2 loading {"label":"calling tool"}
          M3 text "tool said yes"
        B3
          M4 text "So yes."
        "#,
    );
}

#[test]
fn scenario_5_concurrent_threads_interleave_and_merge_per_message() {
    check(
        vec![
            at(1, RunStarted).run(1),
            at(2, Text).run(1).block(1).thread(1).message(1).append("Weather: Sunny"),
            at(3, Text).run(1).block(2).thread(2).message(2).append("News: ..."),
            at(4, Text).run(1).block(1).thread(1).message(1).append(", 25°C"),
            at(5, Text).run(1).block(3).thread(3).message(3).append("Summary..."),
            at(6, RunCompleted).run(1).content(json!({"stop_reason": "end_turn"})),
        ],
        r#"
        run R1 completed stop=end_turn threads=T1,T2,T3
        B1 (T1)
          M1 text "Weather: Sunny, 25°C"
        B2 (T2)
          M2 text "News: ..."
        B3 (T3)
          M3 text "Summary..."
        "#,
    );
}

#[test]
fn tool_input_streams_as_json_pieces_then_is_replaced_by_the_parsed_object() {
    check(
        vec![
            at(1, ToolCall)
                .block(1)
                .message(1)
                .content(json!({"name": "weather", "tool_call_id": "t9"})),
            at(2, ToolCall).block(1).message(1).delta(
                "input_json",
                DeltaAction::Append,
                json!("{\"city\": \"Pa"),
            ),
            at(3, ToolCall).block(1).message(1).delta(
                "input_json",
                DeltaAction::Append,
                json!("ris\"}"),
            ),
            at(4, ToolCall).block(1).message(1).delta(
                "input",
                DeltaAction::Replace,
                json!({"city": "Paris"}),
            ),
            at(5, ToolCall).block(1).message(1).delta(
                "",
                DeltaAction::Merge,
                json!({"status": "done"}),
            ),
            at(6, ToolResult)
                .block(2)
                .message(2)
                .content(json!({"tool_call_id": "t9", "result": "sunny"})),
        ],
        r#"
        B1
          M1 tool_call {"input":{"city":"Paris"},"input_json":"{\"city\": \"Paris\"}","name":"weather","status":"done","tool_call_id":"t9"}
        B2
          M2 tool_result {"result":"sunny","tool_call_id":"t9"}
        "#,
    );
}

#[test]
fn run_outcomes_usage_and_errors_come_from_the_log() {
    check(
        vec![
            at(1, RunStarted).run(1),
            at(2, User).run(1).block(1).message(1).text("hi"),
            at(3, Usage).run(1).content(json!({"input_tokens": 3, "output_tokens": 1})),
            at(4, Usage).run(1).content(json!({"input_tokens": 3, "output_tokens": 9})),
            at(5, RunCompleted).run(1).content(json!({"stop_reason": "end_turn", "usage": null})),
            at(6, RunStarted).run(2),
            at(7, Error)
                .run(2)
                .message(2)
                .content(json!({"type": "overloaded_error", "message": "Overloaded"})),
            at(8, RunFailed).run(2).content(
                json!({"stop_reason": "llm_api_error", "error": {"type": "overloaded_error"}}),
            ),
            at(9, RunStarted).run(3),
            at(10, RunCancelled).run(3).content(json!({"stop_reason": "cancelled"})),
        ],
        r#"
        run R1 completed stop=end_turn usage={"input_tokens":3,"output_tokens":9}
        run R2 failed stop=llm_api_error error={"type":"overloaded_error"}
        run R3 cancelled stop=cancelled
        B1
          M1 user "hi"
        M2
          M2 error {"message":"Overloaded","type":"overloaded_error"}
        "#,
    );
}

#[test]
fn the_tool_result_is_found_by_its_call_id() {
    let mut timeline = Timeline::new();
    timeline.apply_all(
        [
            at(1, ToolCall).message(1).content(json!({"name": "a", "tool_call_id": "x"})),
            at(2, ToolResult).message(2).content(json!({"tool_call_id": "x", "result": 1})),
        ]
        .map(|ev| ev.0),
    );
    assert_eq!(timeline.tool_result("x").unwrap().message_id, message(2));
    assert!(timeline.tool_result("y").is_none());
}

#[test]
fn only_the_newest_raw_event_is_kept() {
    let mut timeline = Timeline::new();
    timeline.apply_all(
        (1..=100).map(|seq| at(seq, Text).message(1).append("x").raw(json!({ "n": seq })).0),
    );
    let message = timeline.message(message(1)).unwrap();
    assert_eq!(message.raw, Some(json!({"n": 100})));
    assert_eq!(message.text().len(), 100);
}

#[test]
fn delta_actions_at_paths() {
    let mut content = Value::Null;
    apply_delta(&mut content, "input.city", DeltaAction::Append, json!("Par"));
    apply_delta(&mut content, "input.city", DeltaAction::Append, json!("is"));
    apply_delta(&mut content, "", DeltaAction::Merge, json!({"status": "running"}));
    apply_delta(&mut content, "status", DeltaAction::Replace, json!("done"));
    apply_delta(&mut content, "status.deep", DeltaAction::Append, json!("x"));
    assert_eq!(content, json!({"input": {"city": "Paris"}, "status": {"deep": "x"}}));
}
