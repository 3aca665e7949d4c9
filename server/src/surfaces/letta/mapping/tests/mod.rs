use super::*;
use app::DeltaAction;
use chrono::Utc;
use serde_json::json;

/// Builds a run's events the way the agent loop writes them, with consecutive seqs.
struct Log {
    agent_id: Uuid,
    run_id: Uuid,
    events: Vec<AgentEvent>,
}

impl Log {
    fn new() -> Log {
        Log { agent_id: Uuid::new_v4(), run_id: Uuid::new_v4(), events: Vec::new() }
    }

    fn push(
        &mut self,
        kind: EventKind,
        message_id: Option<Uuid>,
        block_id: Option<Uuid>,
    ) -> &mut AgentEvent {
        let seq = self.events.len() as u64 + 1;
        self.events.push(AgentEvent {
            run_id: Some(self.run_id),
            block_id,
            message_id,
            created_at: Utc::now(),
            ..AgentEvent::bare(Uuid::new_v4(), self.agent_id, seq, kind, Value::Null)
        });
        self.events.last_mut().unwrap()
    }

    fn delta(
        &mut self,
        kind: EventKind,
        message_id: Uuid,
        block_id: Uuid,
        path: &str,
        delta: Value,
        action: DeltaAction,
    ) {
        let event = self.push(kind, Some(message_id), Some(block_id));
        event.delta_path = Some(path.to_owned());
        event.delta = Some(delta);
        event.delta_action = Some(action);
    }

    fn content(
        &mut self,
        kind: EventKind,
        message_id: Option<Uuid>,
        block_id: Option<Uuid>,
        content: Value,
    ) {
        self.push(kind, message_id, block_id).content = content;
    }
}

struct Ids {
    user: Uuid,
    thinking: Uuid,
    text: Uuid,
    call: Uuid,
    result: Uuid,
}

/// One full run: the user's message, thinking with a signature, text, a tool call whose input
/// streams in pieces, its result, usage, the end.
fn tool_run(end: EventKind, end_content: Value) -> (Log, Ids) {
    let mut log = Log::new();
    let ids = Ids {
        user: Uuid::new_v4(),
        thinking: Uuid::new_v4(),
        text: Uuid::new_v4(),
        call: Uuid::new_v4(),
        result: Uuid::new_v4(),
    };
    let (llm, call_block) = (Uuid::new_v4(), Uuid::new_v4());
    log.content(EventKind::RunStarted, None, None, Value::Null);
    log.content(
        EventKind::User,
        Some(ids.user),
        Some(Uuid::new_v4()),
        json!({ "text": "add 2 and 3", "otid": "client-otid-1" }),
    );
    for piece in ["Let me ", "add."] {
        log.delta(
            EventKind::Thinking,
            ids.thinking,
            llm,
            "text",
            json!(piece),
            DeltaAction::Append,
        );
    }
    log.delta(
        EventKind::Thinking,
        ids.thinking,
        llm,
        "signature",
        json!("sig=="),
        DeltaAction::Append,
    );
    for piece in ["I'll ", "use the ", "calculator."] {
        log.delta(EventKind::Text, ids.text, llm, "text", json!(piece), DeltaAction::Append);
    }
    log.content(
        EventKind::ToolCall,
        Some(ids.call),
        Some(call_block),
        json!({ "name": "calculator", "tool_call_id": "toolu_1", "input": {}, "status": "streaming" }),
    );
    for piece in ["{\"expression\":", " \"2+3\"}"] {
        log.delta(
            EventKind::ToolCall,
            ids.call,
            call_block,
            "input_json",
            json!(piece),
            DeltaAction::Append,
        );
    }
    log.delta(
        EventKind::ToolCall,
        ids.call,
        call_block,
        "",
        json!({ "input": { "expression": "2+3" }, "status": "ready" }),
        DeltaAction::Merge,
    );
    log.content(
        EventKind::Usage,
        None,
        Some(llm),
        json!({ "input_tokens": 12, "output_tokens": 7 }),
    );
    log.delta(
        EventKind::ToolCall,
        ids.call,
        call_block,
        "",
        json!({ "status": "done" }),
        DeltaAction::Merge,
    );
    log.content(
        EventKind::ToolResult,
        Some(ids.result),
        Some(call_block),
        json!({ "tool_call_id": "toolu_1", "name": "calculator", "result": "5", "is_error": false }),
    );
    log.content(end, None, None, end_content);
    (log, ids)
}

fn messages(items: &[LettaItem]) -> Vec<&LettaMessage> {
    items
        .iter()
        .filter_map(|item| match item {
            LettaItem::Message(message) => Some(message),
            _ => None,
        })
        .collect()
}

fn types(items: &[LettaItem]) -> Vec<String> {
    items.iter().map(|item| item.to_json()["message_type"].as_str().unwrap().to_owned()).collect()
}

/// The text a message carries, whatever its type: content, reasoning + signature, or arguments.
fn text(message: &LettaMessage) -> String {
    match &message.body {
        Body::UserMessage { content } | Body::AssistantMessage { content } => content.clone(),
        Body::ReasoningMessage { reasoning, signature, .. } => {
            format!("{reasoning}|{}", signature.clone().unwrap_or_default())
        }
        Body::ToolCallMessage { tool_call } => tool_call.arguments.clone(),
        Body::ToolReturnMessage { tool_return, .. } => tool_return.clone(),
        Body::ErrorMessage { message, .. } => message.clone(),
        Body::ApprovalRequestMessage { tool_call, .. } => tool_call.arguments.clone(),
        Body::ApprovalResponseMessage { reason, .. } => reason.clone().unwrap_or_default(),
    }
}

fn completed() -> Value {
    json!({ "stop_reason": "end_turn", "usage": { "input_tokens": 12, "output_tokens": 7 } })
}

#[test]
fn steps_cut_is_one_whole_message_per_message_then_stop_reason_and_usage() {
    let (log, ids) = tool_run(EventKind::RunCompleted, completed());
    let items = map_all(Cut::Steps, &log.events);
    assert_eq!(
        types(&items),
        [
            "user_message",
            "reasoning_message",
            "assistant_message",
            "tool_call_message",
            "tool_return_message",
            "stop_reason",
            "usage_statistics"
        ]
    );
    let messages = messages(&items);
    assert_eq!(messages[0].id, message_id(ids.user));
    assert_eq!(messages[0].otid.as_deref(), Some("client-otid-1"), "the client's otid is echoed");
    assert_eq!(text(messages[1]), "Let me add.|sig==");
    assert_eq!(messages[2].id, message_id(ids.text));
    assert_eq!(text(messages[2]), "I'll use the calculator.");
    let Body::ToolCallMessage { tool_call } = &messages[3].body else { panic!() };
    assert_eq!(tool_call.name.as_deref(), Some("calculator"));
    assert_eq!(tool_call.tool_call_id, "toolu_1");
    assert_eq!(
        serde_json::from_str::<Value>(&tool_call.arguments).unwrap(),
        json!({ "expression": "2+3" })
    );
    assert_eq!(messages[4].id, message_id(ids.result));
    let json = items[4].to_json();
    assert_eq!(json["tool_return"], "5");
    assert_eq!(json["status"], "success");
    assert_eq!(json["tool_call_id"], "toolu_1");
    assert_eq!(
        items[5].to_json(),
        json!({ "message_type": "stop_reason", "stop_reason": "end_turn" })
    );
    let usage = items[6].to_json();
    assert_eq!(usage["prompt_tokens"], 12);
    assert_eq!(usage["completion_tokens"], 7);
    assert_eq!(usage["total_tokens"], 19);
    assert_eq!(usage["step_count"], 1);
    // A message's seq_id is the event that completed it.
    assert_eq!(messages[2].seq_id, 8, "the last text delta");
    assert_eq!(messages[3].seq_id, 12, "the input-complete event");
}

#[test]
fn tokens_cut_sends_every_delta_as_a_fragment_of_its_message() {
    let (log, ids) = tool_run(EventKind::RunCompleted, completed());
    let items = map_all(Cut::Tokens, &log.events);
    let messages = messages(&items);
    let text_fragments: Vec<_> = messages.iter().filter(|m| m.id == message_id(ids.text)).collect();
    assert_eq!(text_fragments.len(), 3, "one fragment per token delta");
    assert_eq!(text(text_fragments[0]), "I'll ");
    let call: Vec<_> = messages.iter().filter(|m| m.id == message_id(ids.call)).collect();
    assert_eq!(
        call.len(),
        3,
        "the call's start and its two input pieces; the complete input is not repeated"
    );
    let Body::ToolCallMessage { tool_call } = &call[0].body else { panic!() };
    assert_eq!(tool_call.name.as_deref(), Some("calculator"));
    let Body::ToolCallMessage { tool_call } = &call[1].body else { panic!() };
    assert_eq!(
        (tool_call.name.as_deref(), tool_call.arguments.as_str()),
        (None, "{\"expression\":")
    );
    assert_eq!(tool_call.tool_call_id, "toolu_1", "every piece names its call");
    assert_eq!(types(&items).last().map(String::as_str), Some("usage_statistics"));
}

#[test]
fn fragments_joined_by_id_are_the_steps_cut_messages() {
    for end in [EventKind::RunCompleted, EventKind::RunCancelled] {
        let (log, _) = tool_run(end, completed());
        let tokens = map_all(Cut::Tokens, &log.events);
        let steps = map_all(Cut::Steps, &log.events);
        let mut joined: Vec<(String, String, String)> = Vec::new();
        for message in messages(&tokens) {
            let kind = message.body_type().to_owned();
            match joined.iter_mut().find(|(id, _, _)| *id == message.id) {
                Some((_, _, text_so_far)) => {
                    let piece = text(message);
                    if let Body::ReasoningMessage { .. } = message.body {
                        // reasoning|signature pieces join per part.
                        let (r0, s0) = text_so_far.split_once('|').unwrap();
                        let (r1, s1) = piece.split_once('|').unwrap();
                        *text_so_far = format!("{r0}{r1}|{s0}{s1}");
                    } else {
                        text_so_far.push_str(&piece);
                    }
                }
                None => joined.push((message.id.clone(), kind, text(message))),
            }
        }
        let whole: Vec<(String, String, String)> = messages(&steps)
            .into_iter()
            .map(|message| (message.id.clone(), message.body_type().to_owned(), text(message)))
            .collect();
        assert_eq!(joined, whole);
    }
}

#[test]
fn seq_ids_only_go_up_so_starting_after_resumes_exactly() {
    let (log, _) = tool_run(EventKind::RunCompleted, completed());
    for cut in [Cut::Tokens, Cut::Steps] {
        let items = map_all(cut, &log.events);
        let seq_ids: Vec<u64> = messages(&items).iter().map(|m| m.seq_id).collect();
        assert!(seq_ids.windows(2).all(|pair| pair[0] < pair[1]), "{cut:?}: {seq_ids:?}");
        // Resuming after any cursor gives exactly the rest.
        for cursor in 0..=log.events.len() as u64 {
            let resumed: Vec<_> =
                items.iter().filter(|item| item.seq_id() > cursor).cloned().collect();
            let position =
                items.iter().position(|item| item.seq_id() > cursor).unwrap_or(items.len());
            assert_eq!(resumed, items[position..].to_vec());
        }
    }
}

#[test]
fn stop_reasons_in_letta_terms() {
    let cases = [
        (EventKind::RunCompleted, json!({ "stop_reason": "end_turn" }), "end_turn"),
        (EventKind::RunCompleted, json!({ "stop_reason": "max_iterations" }), "max_steps"),
        (EventKind::RunCompleted, json!({ "stop_reason": "max_tokens" }), "max_tokens_exceeded"),
        (EventKind::RunCancelled, json!({ "stop_reason": "cancelled" }), "cancelled"),
        (
            EventKind::RunFailed,
            json!({ "stop_reason": "error", "error": { "type": "overloaded_error" } }),
            "llm_api_error",
        ),
        (
            EventKind::RunFailed,
            json!({ "stop_reason": "error", "error": { "type": "interrupted" } }),
            "error",
        ),
    ];
    for (kind, content, expected) in cases {
        let (log, _) = tool_run(kind, content.clone());
        let items = map_all(Cut::Steps, &log.events);
        let stop = items.iter().find_map(|item| match item {
            LettaItem::StopReason { stop_reason, .. } => Some(*stop_reason),
            _ => None,
        });
        assert_eq!(stop, Some(expected), "{kind:?} {content}");
    }
}

#[test]
fn an_input_that_arrives_whole_is_sent_as_one_arguments_fragment() {
    let mut log = Log::new();
    let (call, block) = (Uuid::new_v4(), Uuid::new_v4());
    log.content(
        EventKind::ToolCall,
        Some(call),
        Some(block),
        json!({ "name": "clock", "tool_call_id": "c1", "input": {}, "status": "streaming" }),
    );
    log.delta(
        EventKind::ToolCall,
        call,
        block,
        "",
        json!({ "input": { "zone": "UTC" }, "status": "ready" }),
        DeltaAction::Merge,
    );
    let items = map_all(Cut::Tokens, &log.events);
    let arguments: Vec<String> = messages(&items)
        .iter()
        .map(|message| match &message.body {
            Body::ToolCallMessage { tool_call } => tool_call.arguments.clone(),
            _ => panic!(),
        })
        .collect();
    assert_eq!(arguments, ["", "{\"zone\":\"UTC\"}"]);
}

#[test]
fn a_provider_error_is_an_error_message_before_the_stop_reason() {
    let mut log = Log::new();
    log.content(EventKind::RunStarted, None, None, Value::Null);
    log.content(
        EventKind::Error,
        Some(Uuid::new_v4()),
        None,
        json!({ "type": "overloaded_error", "message": "busy", "retryable": true }),
    );
    log.content(EventKind::RunFailed, None, None, json!({ "stop_reason": "error", "error": { "type": "overloaded_error", "message": "busy" } }));
    let items = map_all(Cut::Tokens, &log.events);
    assert_eq!(types(&items), ["error_message", "stop_reason", "usage_statistics"]);
    let error = items[0].to_json();
    assert_eq!(error["error_type"], "overloaded_error");
    assert_eq!(error["message"], "busy");
    assert_eq!(error["run_id"], log.run_id.to_string());
}

#[test]
fn every_message_carries_the_common_letta_fields() {
    let (log, _) = tool_run(EventKind::RunCompleted, completed());
    for item in map_all(Cut::Tokens, &log.events) {
        let LettaItem::Message(_) = item else {
            continue;
        };
        let json = item.to_json();
        for field in ["id", "date", "message_type", "otid", "run_id", "seq_id"] {
            assert!(!json[field].is_null(), "{field} missing in {json}");
        }
        assert!(json["id"].as_str().unwrap().starts_with("message-"));
    }
}

mod approvals;
