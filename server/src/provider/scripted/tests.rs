use super::*;

fn request(text: &str) -> ProviderRequest {
    ProviderRequest {
        system: None,
        model: None,
        messages: vec![ConversationMessage::User { text: text.to_owned() }],
        tools: Vec::new(),
        thinking_budget_tokens: None,
    }
}

fn reply_text(events: &[Step]) -> String {
    events
        .iter()
        .filter_map(|event| match event {
            Ok(ProviderEvent::TextDelta(text)) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_tool_invocation_names_the_tool_and_a_json_object_argument_is_its_input() {
    let cases = [
        ("get-sum {\"a\":2,\"b\":3}", "get-sum", json!({ "a": 2, "b": 3 })),
        (" calculator {\"expression\":\"1+2\"} ", "calculator", json!({ "expression": "1+2" })),
        ("calculator 2*(3+4)", "calculator", json!({ "expression": "2*(3+4)" })),
        ("slow 3", "slow", json!({ "seconds": 3.0 })),
        ("echo {not json", "echo", json!({ "argument": "{not json" })),
        ("clock", "clock", json!({})),
    ];
    for (invocation, name, input) in cases {
        assert_eq!(scripted_tool_call(invocation), (name.to_owned(), input), "{invocation}");
    }
}

#[test]
fn tools_command_streams_each_call_with_its_input_in_pieces() {
    let config = ScriptedConfig::default();
    let events = script(&config, &request("/tools clock; calculator 2*(3+4)"));
    let mut inputs = std::collections::HashMap::<String, String>::new();
    let mut ended = Vec::new();
    for event in &events {
        match event {
            Ok(ProviderEvent::ToolCallInputDelta { id, json }) => {
                inputs.entry(id.clone()).or_default().push_str(json)
            }
            Ok(ProviderEvent::ToolCallEnd { id }) => ended.push(id.clone()),
            _ => {}
        }
    }
    assert_eq!(ended.len(), 2);
    let input = |id: &String| serde_json::from_str::<Value>(&inputs[id]).unwrap();
    assert_eq!(input(&ended[0]), json!({}));
    assert_eq!(input(&ended[1]), json!({"expression": "2*(3+4)"}));
    assert_eq!(
        events.last().unwrap().as_ref().unwrap(),
        &ProviderEvent::Stop { reason: "tool_use".into() }
    );
}

#[test]
fn fail_command_ends_in_the_named_error() {
    let events = script(&ScriptedConfig::default(), &request("/fail overloaded_error"));
    let error = events.last().unwrap().as_ref().unwrap_err();
    assert_eq!(error.kind, "overloaded_error");
    assert!(error.retryable);
}

#[test]
fn echo_replies_with_exactly_the_rest_of_the_message() {
    let config = ScriptedConfig::default();
    let text = "<script>alert(1)</script>  two  spaces\nand a line";
    let events = script(&config, &request(&format!("{ECHO_COMMAND}{text}")));
    assert_eq!(reply_text(&events), text);
    let tokens =
        events.iter().filter(|event| matches!(event, Ok(ProviderEvent::TextDelta(_)))).count();
    assert_eq!(tokens, 6);
}

#[test]
fn same_seed_same_script_and_requested_length() {
    let config = ScriptedConfig { seed: 42, token_delay_ms: 0, reply_tokens: 25 };
    let first = script(&config, &request("hello"));
    assert_eq!(first, script(&config, &request("hello")));
    assert_ne!(reply_text(&first), reply_text(&script(&config, &request("other"))));
    let tokens =
        first.iter().filter(|event| matches!(event, Ok(ProviderEvent::TextDelta(_)))).count();
    assert_eq!(tokens, 25);
    let text = reply_text(&first);
    assert!(text.ends_with('.'), "{text}");
    assert!(text.chars().next().unwrap().is_uppercase(), "{text}");
    assert_eq!(
        first.last().unwrap().as_ref().unwrap(),
        &ProviderEvent::Stop { reason: "end_turn".into() }
    );
}

#[test]
fn recall_answers_with_what_the_user_said_in_the_conversation_given() {
    let config = ScriptedConfig::default();
    let mut asked = request("first");
    asked.messages.push(ConversationMessage::Assistant {
        text: "ok".into(),
        tool_calls: Vec::new(),
        thinking: Vec::new(),
    });
    asked.messages.push(ConversationMessage::User { text: "second".into() });
    asked.messages.push(ConversationMessage::User { text: RECALL_COMMAND.into() });
    let events = script(&config, &asked);
    assert_eq!(reply_text(&events), "You said:\n- first\n- second");
    assert_eq!(reply_text(&script(&config, &request(RECALL_COMMAND))), "You said:");
}
