use super::*;
use uuid::Uuid;

fn read(body: Value) -> Result<RunRequest, String> {
    let body: RunBody =
        serde_json::from_str(&body.to_string()).map_err(|error| error.to_string())?;
    body.read().map_err(|error| format!("{error:?}"))
}

fn user(id: &str, content: Value) -> Value {
    json!({ "id": id, "role": "user", "content": content })
}

#[test]
fn run_inputs_are_read_or_refused_with_the_reason() {
    let agent = Uuid::from_u128(9);
    let assistant = json!({ "id": "a1", "role": "assistant", "content": "hi" });
    let ok: &[(Value, RunRequest)] = &[
        (
            json!({ "threadId": "t-1", "runId": "r1", "messages": [user("u1", json!("hello"))], "tools": [], "context": [] }),
            RunRequest {
                thread: ChatId::Named("t-1".into()),
                client_run_id: Some("r1".into()),
                message_id: "u1".into(),
                text: "hello".into(),
                recorded: Some(json!({ "context": [] })),
                resume: None,
                tool_results: Vec::new(),
                client_tools: Vec::new(),
            },
        ),
        (
            // Two new user messages after the last answer; earlier ones are not input.
            json!({ "threadId": agent.to_string(), "runId": "r2", "messages": [
                user("u0", json!("old")), assistant.clone(),
                user("u1", json!("first")), user("u2", json!([{ "type": "text", "text": "second" }]))],
                "state": { "step": 2 } }),
            RunRequest {
                thread: ChatId::Agent(agent),
                client_run_id: Some("r2".into()),
                message_id: "u2".into(),
                text: "first\n\nsecond".into(),
                recorded: Some(json!({ "state": { "step": 2 } })),
                resume: None,
                tool_results: Vec::new(),
                client_tools: Vec::new(),
            },
        ),
        (
            // The client's tools ran: the tool messages after the call are the input.
            json!({ "threadId": "t", "runId": "r3", "tools": [{ "name": "confirm", "description": "Ask", "parameters": { "type": "object", "properties": {} } }],
                "messages": [user("u1", json!("a")),
                    { "id": "a2", "role": "assistant", "toolCalls": [{ "id": "c1", "type": "function", "function": { "name": "confirm", "arguments": "{}" } }] },
                    { "id": "t1", "role": "tool", "toolCallId": "c1", "content": "yes" },
                    { "id": "t2", "role": "tool", "toolCallId": "c2", "content": "", "error": "declined" }] }),
            RunRequest {
                thread: ChatId::Named("t".into()),
                client_run_id: Some("r3".into()),
                message_id: String::new(),
                text: String::new(),
                recorded: None,
                resume: None,
                tool_results: vec![
                    ToolOutput { tool_call_id: "c1".into(), output: Ok(json!("yes")) },
                    ToolOutput { tool_call_id: "c2".into(), output: Err("declined".into()) },
                ],
                client_tools: client_tools::parse(&json!([{ "name": "confirm", "description": "Ask", "parameters": { "type": "object", "properties": {} } }])).unwrap(),
            },
        ),
    ];
    for (body, expected) in ok {
        assert_eq!(read(body.clone()).as_ref(), Ok(expected), "{body}");
    }
    let refusals: &[(Value, &str)] = &[
        (json!({ "messages": [user("u1", json!("a"))] }), "threadId is missing"),
        (json!({ "threadId": 7, "messages": [user("u1", json!("a"))] }), "must be a string"),
        (json!({ "threadId": "a b", "messages": [user("u1", json!("a"))] }), "invalid_chat_id"),
        (json!({ "threadId": "t" }), "messages must be an array"),
        (json!({ "threadId": "t", "messages": {} }), "messages must be an array"),
        (json!({ "threadId": "t", "messages": [] }), "no new user message"),
        (
            json!({ "threadId": "t", "messages": [user("u1", json!("a")), assistant] }),
            "no new user message",
        ),
        (json!({ "threadId": "t", "runId": 5, "messages": [user("u1", json!("a"))] }), "runId"),
        (json!({ "threadId": "t", "messages": [user("", json!("a"))] }), "needs an id"),
        (
            json!({ "threadId": "t", "messages": [user(&"m".repeat(MESSAGE_ID_CHARS_MAX + 1), json!("a"))] }),
            "needs an id",
        ),
        (json!({ "threadId": "t", "messages": [user("u1", json!("  "))] }), "no text"),
        (json!({ "threadId": "t", "messages": [user("u1", json!(null))] }), "needs content"),
        (
            json!({ "threadId": "t", "messages": [user("u1", json!([{ "type": "image", "source": {} }]))] }),
            "type image are not supported",
        ),
        (
            json!({ "threadId": "t", "messages": [user("u1", json!("a"))], "state": "x".repeat(RECORDED_INPUT_BYTES_MAX) }),
            "input_too_large",
        ),
        (
            json!({ "threadId": "t", "messages": [user("u1", json!("a"))], "tools": [{ "name": 5 }] }),
            "client tool 0: needs a name",
        ),
        (
            json!({ "threadId": "t", "messages": [user("u1", json!("a")), { "role": "tool", "content": "x" }] }),
            "needs its toolCallId",
        ),
        (
            json!({ "threadId": "t", "messages": [user("u1", json!("a")), { "role": "tool", "toolCallId": "c", "content": 5 }] }),
            "content as a string",
        ),
    ];
    for (body, reason) in refusals {
        let error = read(body.clone()).expect_err(&body.to_string());
        assert!(error.contains(reason), "{body}: {error}");
    }
}
