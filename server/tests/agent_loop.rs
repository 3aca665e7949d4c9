//! The agent loop with the scripted provider: tools, concurrency, bounds, errors, cancellation.

use crate::common;

use std::collections::{HashMap, HashSet};

use crate::common::RequestExt;
use app::timeline::{RunStatus, Timeline};
use app::{AgentEvent, EventKind};
use common::fold;
use common::{assert_contiguous, TestServer};
use serde_json::{json, Value};
use uuid::Uuid;

fn tool_results(events: &[AgentEvent]) -> Vec<&AgentEvent> {
    events.iter().filter(|event| event.kind == EventKind::ToolResult).collect()
}

/// Every tool call (by tool_call_id) has exactly one result.
fn assert_one_result_per_call(events: &[AgentEvent]) -> HashMap<String, Value> {
    let calls: HashSet<String> = events
        .iter()
        .filter(|event| event.kind == EventKind::ToolCall)
        .filter_map(|event| event.content.get("tool_call_id").and_then(Value::as_str))
        .map(str::to_owned)
        .collect();
    let mut results = HashMap::new();
    for result in tool_results(events) {
        let call_id = result.content["tool_call_id"].as_str().unwrap().to_owned();
        assert!(calls.contains(&call_id), "a result for an unknown call {call_id}");
        assert!(
            results.insert(call_id.clone(), result.content.clone()).is_none(),
            "two results for {call_id}"
        );
    }
    assert_eq!(results.len(), calls.len(), "calls without a result");
    results
}

/// The text of the timeline's last text message.
fn last_text(timeline: &Timeline) -> String {
    let messages = timeline.messages();
    let last = messages.iter().rfind(|message| message.kind == EventKind::Text);
    last.expect("a text message").text().to_owned()
}

#[tokio::test]
async fn tools_run_on_their_own_threads_and_the_model_reads_their_results() {
    let server = TestServer::start().await;
    let (_, run_id, events) = server.finished_run("/tools clock; calculator 2*(3+4)").await;
    assert_contiguous(&events, 1);
    let results = assert_one_result_per_call(&events);
    assert_eq!(results.len(), 2);
    let calculator = results.values().find(|result| result["name"] == "calculator").unwrap();
    assert_eq!(calculator["result"], json!(14));
    assert_eq!(calculator["is_error"], false);

    let timeline = fold(&events);
    let run = timeline.run(run_id).unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(run.stop_reason.as_deref(), Some("end_turn"));
    // The main thread plus one thread per tool call.
    assert_eq!(run.thread_ids.len(), 3);
    let calls: Vec<_> =
        timeline.messages().iter().filter(|message| message.kind == EventKind::ToolCall).collect();
    assert_eq!(calls.len(), 2);
    assert_ne!(calls[0].block_id, calls[1].block_id);
    assert_ne!(calls[0].thread_id, calls[1].thread_id);
    // The input streamed in pieces and was replaced by the parsed object.
    assert_eq!(calls[1].content["input"], json!({"expression": "2*(3+4)"}));
    assert_eq!(calls[1].content["input_json"], json!("{\"expression\":\"2*(3+4)\"}"));
    assert_eq!(calls[1].content["status"], "done");
    // The second LLM call reports the results.
    let final_text = last_text(&timeline);
    assert!(final_text.contains("14"), "{final_text}");
    // Usage adds up over both LLM calls.
    let usage = run.usage.clone().unwrap();
    assert!(usage["output_tokens"].as_u64().unwrap() > 12 + 16, "{usage}");
}

#[tokio::test]
async fn the_tools_of_one_step_run_concurrently() {
    let server = TestServer::start().await;
    let (_, _, events) = server.finished_run("/tools slow 2; slow 2; slow 2").await;
    assert_one_result_per_call(&events);
    let first_result = events.iter().position(|event| event.kind == EventKind::ToolResult).unwrap();
    // Before any tool finished, each of the three had already reported progress.
    let reporting: HashSet<Uuid> = events[..first_result]
        .iter()
        .filter(|event| event.kind == EventKind::ToolCall)
        .filter(|event| event.delta.as_ref().is_some_and(|delta| delta.get("progress").is_some()))
        .filter_map(|event| event.message_id)
        .collect();
    assert_eq!(reporting.len(), 3, "the tools ran one after another");
}

/// Hundreds of calls in one step (a request, or a model, asking for them) cannot wedge the run:
/// the calls past the per-step limit get an error result each, and the run ends.
#[tokio::test]
async fn a_step_with_hundreds_of_calls_ends_with_one_result_each() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let command = format!("/tools {}", vec!["clock"; 300].join("; "));
    let run_id = server.start_run(agent_id, &command).await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    let results = assert_one_result_per_call(&events);
    assert_eq!(results.len(), 300);
    let refused = results
        .values()
        .filter(|result| {
            result["is_error"] == true
                && result["result"]
                    .as_str()
                    .is_some_and(|text| text.contains("tool calls in one step"))
        })
        .count();
    assert_eq!(refused, 300 - 16, "the calls past the limit are refused");
    assert_eq!(events.last().unwrap().kind, EventKind::RunCompleted);
}

#[tokio::test]
async fn a_model_that_keeps_calling_tools_stops_at_the_iteration_bound() {
    let server = TestServer::start_with(|config| config.run_iterations_max = 3).await;
    let (_, _, events) = server.finished_run("/loop").await;
    let results = assert_one_result_per_call(&events);
    assert_eq!(results.len(), 3);
    let end = events.last().unwrap();
    assert_eq!(end.kind, EventKind::RunCompleted);
    assert_eq!(end.content["stop_reason"], "max_iterations");
}

#[tokio::test]
async fn tool_failures_are_results_and_the_run_goes_on() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let run_id = server
        .start_run(agent_id, r#"/tools calculator 1/0; no_such_tool {}; calculator (1"#)
        .await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    let results = assert_one_result_per_call(&events);
    assert_eq!(results.len(), 3);
    for result in results.values() {
        assert_eq!(result["is_error"], true, "{result}");
    }
    assert!(results
        .values()
        .any(|result| result["result"].as_str().unwrap().contains("no tool named")));
    let end = events.last().unwrap();
    assert_eq!(end.kind, EventKind::RunCompleted);
    let timeline = fold(&events);
    let text = last_text(&timeline);
    assert!(text.contains("(error)"), "{text}");
}

#[tokio::test]
async fn cancelling_during_a_slow_tool_stops_it_and_answers_the_call() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let run_id = server.start_run(agent_id, "/tools slow 25").await;
    // Wait until the tool has reported progress once: it is running.
    common::wait_until("the slow tool to report progress", || async {
        let events = server.all_events(agent_id).await;
        events
            .iter()
            .any(|event| event.delta.as_ref().is_some_and(|delta| delta.get("progress").is_some()))
            .then_some(())
    })
    .await;
    let response = server
        .post(&format!("/v1/agents/{agent_id}/messages/cancel"), &json!({ "run_ids": [run_id] }))
        .await;
    assert_eq!(response.status(), 200);
    // The cancel answer waits for the run's end, so the log is final now.
    let events = server.all_events(agent_id).await;
    let results = assert_one_result_per_call(&events);
    let result = results.values().next().unwrap();
    assert_eq!(result["is_error"], true);
    assert_eq!(result["result"], "cancelled");
    assert_eq!(events.last().unwrap().kind, EventKind::RunCancelled);
}

#[tokio::test]
async fn a_provider_failure_mid_stream_ends_the_run_with_an_error_event() {
    let server = TestServer::start().await;
    let (_, run_id, events) = server.finished_run("/fail overloaded_error").await;
    assert!(events.iter().any(|event| event.kind == EventKind::Text));
    let error = common::first_of(&events, EventKind::Error);
    assert_eq!(error.content["type"], "overloaded_error");
    assert_eq!(error.content["retryable"], true);
    let end = events.last().unwrap();
    assert_eq!(end.kind, EventKind::RunFailed);
    assert_eq!(end.content["stop_reason"], "error");
    assert_eq!(end.content["error"]["type"], "overloaded_error");
    assert_eq!(fold(&events).run(run_id).unwrap().status, RunStatus::Failed);
}

#[tokio::test]
async fn the_next_turn_sees_the_conversation_rebuilt_from_the_log() {
    let (server, agent_id) = TestServer::start().await.with_agent().await;
    let first = server.start_run(agent_id, "/echo one two three").await;
    server.wait_for_run_end(agent_id, first).await;
    let second = server.start_run(agent_id, "hello").await;
    let events = server.wait_for_run_end(agent_id, second).await;
    let timeline = fold(&events);
    // The scripted provider counts the words of every message it is given as input tokens:
    // the first turn's question (4) and answer (3), then the new question (1).
    let first_usage = timeline.run(first).unwrap().usage.clone().unwrap();
    let second_usage = timeline.run(second).unwrap().usage.clone().unwrap();
    assert_eq!(first_usage["input_tokens"], 4);
    assert_eq!(second_usage["input_tokens"], 8);
}

#[tokio::test]
async fn a_stalled_provider_can_be_waited_for_or_cancelled() {
    let server = TestServer::start_with(|config| config.scripted.reply_tokens = 12).await;
    let agent_id = server.create_agent().await;
    // A short stall: the run waits it out and completes with the whole reply.
    let run_id = server.start_run(agent_id, "/stall 0.5").await;
    let events = server.wait_for_run_end(agent_id, run_id).await;
    assert_eq!(events.last().unwrap().kind, EventKind::RunCompleted);
    let words = events
        .iter()
        .filter(|event| event.run_id == Some(run_id) && event.kind == EventKind::Text)
        .count();
    assert_eq!(words, 12);

    // A long stall: cancelling ends the run without waiting for the provider.
    let run_id = server.start_run(agent_id, "/stall 30").await;
    common::wait_until("the run to start talking", || async {
        let events = server.all_events(agent_id).await;
        let words = events
            .iter()
            .filter(|event| event.run_id == Some(run_id) && event.kind == EventKind::Text)
            .count();
        (words >= 3).then_some(())
    })
    .await;
    let started = std::time::Instant::now();
    let response = server
        .http
        .post(server.url(&format!("/v1/agents/{agent_id}/messages/cancel")))
        .sent()
        .await;
    let answer: app::protocol::CancelResponse = response.json().await.unwrap();
    assert_eq!(answer.cancelled_run_ids, vec![run_id]);
    // The answer came because the run ended, not because the cancel wait ran out.
    assert!(
        started.elapsed()
            < std::time::Duration::from_millis(agentstream_server::http::rest::CANCEL_WAIT_MS_MAX)
    );
    assert_eq!(server.all_events(agent_id).await.last().unwrap().kind, EventKind::RunCancelled);
}

/// A client that sees a run end and sends the next message at once is served, not told the
/// agent is busy: the end reaches subscribers before the run's task lets go of the agent, so the
/// next start waits for that instead of answering 409. Several agents at once on a runtime of
/// two threads, so the run's task is sometimes not the next to run after the commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_message_right_after_a_run_end_starts_a_run() {
    const AGENTS: usize = 6;
    const TURNS: usize = 40;
    let server = std::sync::Arc::new(TestServer::start_paced(3, 0).await);
    let mut conversations = Vec::new();
    for _ in 0..AGENTS {
        let server = server.clone();
        conversations.push(tokio::spawn(async move {
            let agent_id = server.create_agent().await;
            let mut client = server.connect().await;
            client.subscribe(agent_id, 0).await;
            for turn in 0..TURNS {
                let response = server
                    .post(
                        &format!("/v1/agents/{agent_id}/runs"),
                        &json!({ "content": format!("/echo turn {turn}") }),
                    )
                    .await;
                let status = response.status();
                let body = response.text().await.unwrap();
                assert_eq!(status, 202, "turn {turn}, sent as soon as the last run ended: {body}");
                let (events, _) = client.receive_until_run_end().await;
                assert_eq!(events.last().unwrap().kind, EventKind::RunCompleted, "turn {turn}");
            }
            let log = server.all_events(agent_id).await;
            assert_contiguous(&log, 1);
            let ends = log.iter().filter(|event| event.kind == EventKind::RunCompleted).count();
            assert_eq!(ends, TURNS, "one end per turn");
        }));
    }
    for conversation in conversations {
        conversation.await.unwrap();
    }
}
