use serde_json::{json, Value};

use super::*;
use crate::surfaces::responses::wire::{item_id, response_id};

fn read(body: Value) -> Result<CreateRequest, String> {
    let body: CreateBody = serde_json::from_value(body).map_err(|error| error.to_string())?;
    body.read().map_err(|error| error.message)
}

fn asked(body: Value) -> Result<Asked, String> {
    read(body)?.asked().map_err(|error| error.message)
}

fn message(text: &str) -> Asked {
    Asked::Message { text: text.to_owned(), system: Vec::new() }
}

#[test]
fn what_each_input_asks() {
    let ours = item_id("fc_", Uuid::from_u128(5));
    let said = item_id("msg_", Uuid::from_u128(6));
    let output = |call: &str, text: &str| {
        Asked::Outputs(vec![ToolOutput { tool_call_id: call.to_owned(), output: Ok(json!(text)) }])
    };
    let cases: Vec<(&str, Value, Result<Asked, &str>)> = vec![
        ("a string", json!("hi"), Ok(message("hi"))),
        (
            "a message without a type (the Agents SDK)",
            json!([{ "role": "user", "content": "hi" }]),
            Ok(message("hi")),
        ),
        (
            "text parts",
            json!([{ "type": "message", "role": "user", "content": [
                { "type": "input_text", "text": "a" }, { "type": "input_text", "text": "b" }] }]),
            Ok(message("a\nb")),
        ),
        (
            "a client's own history: its last user message is the turn",
            json!([{ "role": "user", "content": "first" },
                   { "role": "assistant", "content": "answer" },
                   { "role": "user", "content": "second" }]),
            Ok(message("second")),
        ),
        (
            "a developer message adds instructions",
            json!([{ "role": "developer", "content": "be brief" }, { "role": "user", "content": "hi" }]),
            Ok(Asked::Message {
                text: "hi".into(),
                system: vec!["be brief".into()],
            }),
        ),
        (
            "a resent transcript: only what follows our last item is new",
            json!([{ "role": "user", "content": "what time is it?" },
                   { "type": "function_call", "id": ours, "call_id": "call_1", "name": "clock", "arguments": "{}", "status": "completed" },
                   { "type": "function_call_output", "call_id": "call_1", "output": "noon", "status": "completed" }]),
            Ok(output("call_1", "noon")),
        ),
        (
            "two calls answered in turn, resent: every output goes (those answered are passed over)",
            json!([{ "role": "user", "content": "both" },
                   { "type": "function_call", "id": item_id("fc_", Uuid::from_u128(7)), "call_id": "c1", "name": "a", "arguments": "{}" },
                   { "type": "function_call_output", "call_id": "c1", "output": "one" },
                   { "type": "function_call", "id": ours, "call_id": "c2", "name": "b", "arguments": "{}" },
                   { "type": "function_call_output", "call_id": "c2", "output": "two" }]),
            Ok(Asked::Outputs(vec![
                ToolOutput { tool_call_id: "c1".into(), output: Ok(json!("one")) },
                ToolOutput { tool_call_id: "c2".into(), output: Ok(json!("two")) },
            ])),
        ),
        (
            "a resent transcript with the next turn",
            json!([{ "role": "user", "content": "old" },
                   { "type": "message", "id": said, "role": "assistant", "content": [{ "type": "output_text", "text": "reply", "annotations": [] }] },
                   { "role": "user", "content": "new" }]),
            Ok(message("new")),
        ),
        (
            "an output given as parts",
            json!([{ "type": "function_call_output", "call_id": "c", "output": [{ "type": "input_text", "text": "x" }] }]),
            Ok(output("c", "x")),
        ),
        (
            "a message after the outputs",
            json!([{ "type": "function_call_output", "call_id": "c", "output": "x" }, { "role": "user", "content": "and?" }]),
            Err("a user message follows"),
        ),
        (
            "nothing new after our last item",
            json!([{ "role": "user", "content": "old" }, { "type": "message", "id": said, "role": "assistant", "content": "reply" }]),
            Err("no new user message"),
        ),
        ("an empty list", json!([]), Err("no new user message")),
        ("a blank message", json!("  "), Err("no new user message")),
        (
            "a number",
            json!(3),
            Err("input must be a string or a list"),
        ),
        (
            "an image",
            json!([{ "role": "user", "content": [{ "type": "input_image", "image_url": "https://x" }] }]),
            Err("input[0]: input_image parts are not supported"),
        ),
        (
            "an unknown role",
            json!([{ "role": "robot", "content": "hi" }]),
            Err("input[0]: role \"robot\""),
        ),
        (
            "an unknown item",
            json!([{ "type": "web_search_call", "id": "ws_1" }]),
            Err("input[0]: items of type \"web_search_call\""),
        ),
        (
            "an output without its call",
            json!([{ "type": "function_call_output", "output": "x" }]),
            Err("needs the call_id"),
        ),
    ];
    for (name, input, expected) in cases {
        let got = asked(json!({ "model": "scripted", "input": input }));
        match (&got, &expected) {
            (Ok(got), Ok(expected)) => assert_eq!(got, expected, "{name}"),
            (Err(got), Err(expected)) => assert!(got.contains(expected), "{name}: {got}"),
            _ => panic!("{name}: got {got:?}, expected {expected:?}"),
        }
    }
}

#[test]
fn chained_every_item_is_new() {
    let previous = response_id(Uuid::from_u128(9));
    let said = item_id("msg_", Uuid::from_u128(6));
    let request = read(json!({
        "model": "scripted",
        "previous_response_id": previous,
        "input": [{ "type": "message", "id": said, "role": "user", "content": "again" }],
    }))
    .unwrap();
    assert_eq!(request.previous, Some(Uuid::from_u128(9)));
    assert_eq!(request.asked().unwrap(), message("again"));
    assert_eq!(request.ours(), vec![Uuid::from_u128(6)]);
}

#[test]
fn the_fields_clients_send_are_read_and_echoed() {
    let agent = Uuid::now_v7();
    let request = read(json!({
        "model": agent.to_string(),
        "input": "hi",
        "instructions": "be brief",
        "tools": [{ "type": "function", "name": "confirm", "description": "ask", "strict": true,
                    "parameters": { "type": "object", "properties": {}, "additionalProperties": false, "$schema": "x" } }],
        "tool_choice": "auto", "store": false, "background": true, "stream": true,
        "metadata": { "k": "v" }, "max_output_tokens": 100, "include": [],
        "reasoning": { "effort": "low" }, "parallel_tool_calls": false, "temperature": 0.5,
        "prompt_cache_key": "ignored", "context_management": [{ "type": "compaction" }],
    }))
    .unwrap();
    assert_eq!(request.model, Model::Agent(agent));
    assert!(request.stream && request.background);
    assert_eq!(request.client_tools.len(), 1);
    assert_eq!(request.client_tools[0].name, "confirm");
    assert_eq!(request.echo.instructions.as_deref(), Some("be brief"));
    assert!(!request.echo.store);
    assert_eq!(request.echo.max_output_tokens, Some(100));
    assert_eq!(request.echo.tools.len(), 1);
    assert_eq!(
        read(json!({ "model": "openai/gpt-4o", "input": "x" })).unwrap().model,
        Model::Handle("openai/gpt-4o".into())
    );
}

#[test]
fn bad_fields_are_refused_by_name() {
    let cases = [
        (json!({ "input": "x" }), "model must name"),
        (json!({ "model": "", "input": "x" }), "model must name"),
        (json!({ "model": "m".repeat(MODEL_CHARS_MAX + 1), "input": "x" }), "model is over"),
        (json!({ "model": "s" }), "input is missing"),
        (json!({ "model": "s", "input": "x", "stream": "yes" }), "stream must be"),
        (json!({ "model": "s", "input": "x", "instructions": 3 }), "instructions must be"),
        (json!({ "model": "s", "input": "x", "tools": {} }), "tools must be a list"),
        (
            json!({ "model": "s", "input": "x", "tools": [{ "type": "web_search" }] }),
            "tools[0]: tools of type \"web_search\"",
        ),
        (
            json!({ "model": "s", "input": "x", "tools": [{ "type": "function", "name": "a b" }] }),
            "client tool 0",
        ),
        (json!({ "model": "s", "input": "x", "metadata": { "k": 1 } }), "metadata.k"),
        (json!({ "model": "s", "input": "x", "max_output_tokens": -1 }), "max_output_tokens"),
        (
            json!({ "model": "s", "input": "x", "previous_response_id": "resp_abc" }),
            "previous response \"resp_abc\" was not found",
        ),
        (json!({ "model": "s", "input": "x", "conversation": "conv_1" }), "conversation is not"),
    ];
    for (body, expected) in cases {
        let error = read(body.clone()).expect_err(&body.to_string());
        assert!(error.contains(expected), "{body}: {error}");
    }
    let many = vec![json!("x"); INPUT_ITEMS_MAX + 1];
    assert!(read(json!({ "model": "s", "input": many })).unwrap_err().contains("at most"));
}

#[test]
fn only_the_newest_echoed_ids_are_looked_up() {
    let items: Vec<Value> = (0..1_000u128)
        .map(|n| json!({ "type": "reasoning", "id": item_id("rs_", Uuid::from_u128(n)), "summary": [] }))
        .chain([json!({ "role": "user", "content": "hi" })])
        .collect();
    let request = read(json!({ "model": "scripted", "input": items })).unwrap();
    let ours = request.ours();
    assert_eq!(ours.len(), ECHOED_IDS_LOOKED_UP_MAX);
    assert_eq!(*ours.last().unwrap(), Uuid::from_u128(999));
    assert_eq!(request.asked().unwrap(), message("hi"));
}
