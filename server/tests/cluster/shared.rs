//! Two servers sharing agents, producers and streams: writers that never gap or repeat a seq, batches taken in turn, the same bytes served.

use super::*;
use crate::common::RequestExt;

/// The store alone, as two processes' writers see it: two connection pools (two node ids)
/// appending to the same agents at once, many transactions in flight on each. Every seq is
/// handed out once, with no hole, and each writer's own appends come back in its order.
#[tokio::test]
async fn two_servers_worth_of_writers_on_shared_agents_never_gap_or_repeat_a_seq() {
    use agentstream_server::store::postgres::PgStore;
    use agentstream_server::store::{AppendBatch, ClusterOptions, EventDraft, NewAgent, Store};
    use std::sync::Arc;

    let database = create_postgres_database(&postgres_admin_url()).await;
    let options = ClusterOptions::default();
    let first: Arc<dyn Store> = Arc::new(PgStore::open(&database, &options).await.unwrap());
    let second: Arc<dyn Store> = Arc::new(PgStore::open(&database, &options).await.unwrap());
    let mut agents = Vec::new();
    for _ in 0..3 {
        agents.push(first.create_agent(NewAgent::default()).await.unwrap().id);
    }
    const TASKS_PER_STORE: usize = 8;
    const APPENDS_PER_TASK: usize = 40;
    let mut tasks = Vec::new();
    for (which, store) in [first.clone(), second.clone()].into_iter().enumerate() {
        for task in 0..TASKS_PER_STORE {
            let store = store.clone();
            let agents = agents.clone();
            tasks.push(tokio::spawn(async move {
                let mut mine: Vec<(Uuid, u64)> = Vec::new();
                for index in 0..APPENDS_PER_TASK {
                    // Groups that touch one or two agents, in varying order (lock ordering).
                    let a = agents[(task + index) % agents.len()];
                    let b = agents[(task + index + which + 1) % agents.len()];
                    let mut batches = vec![AppendBatch::new(
                        a,
                        vec![EventDraft::new(EventKind::Text); 1 + index % 3],
                    )];
                    if index % 2 == 0 && a != b {
                        batches
                            .push(AppendBatch::new(b, vec![EventDraft::new(EventKind::Text); 2]));
                    }
                    for batch in &mut batches {
                        for draft in &mut batch.drafts {
                            draft.id = Uuid::new_v4();
                        }
                    }
                    let committed = store.append(&batches).await.unwrap();
                    for events in committed {
                        mine.extend(events.iter().map(|event| (event.agent_id, event.seq)));
                    }
                }
                mine
            }));
        }
    }
    let mut handed_out: Vec<(Uuid, u64)> = Vec::new();
    for task in tasks {
        let mine = task.await.unwrap();
        for &agent in &agents {
            let seqs: Vec<u64> =
                mine.iter().filter(|(a, _)| *a == agent).map(|(_, seq)| *seq).collect();
            assert!(
                seqs.windows(2).all(|pair| pair[0] < pair[1]),
                "a writer's appends commit in its order"
            );
        }
        handed_out.extend(mine);
    }
    for &agent in &agents {
        let mut seqs: Vec<u64> =
            handed_out.iter().filter(|(a, _)| *a == agent).map(|(_, seq)| *seq).collect();
        seqs.sort_unstable();
        let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
        assert_eq!(seqs, expected, "agent {agent}: every seq once, no hole");
        let log = second.read_events(agent, 0, 100_000).await.unwrap();
        assert_eq!(log.len(), seqs.len());
        assert_eq!(first.head_seq(agent).await.unwrap(), Some(seqs.len() as u64));
    }
}

/// A producer behind a load balancer: each batch goes to one server and its retry, at the same
/// time, to the other. Either server takes the producer's next batch (the run's slot and fence
/// live in the database), each batch is written once, and the run is whole.
#[tokio::test]
async fn two_servers_take_a_producers_batches_in_turn_and_write_each_once() {
    const BATCHES: u64 = 24;
    let (a, b, http, agent_id) = pair(5, 0, 2_000).await;
    let bases = [a.base.clone(), b.base.clone()];
    let send = |base: String, seq: u64, batch: Value| {
        produce_request(&http, &base, agent_id, ("balanced", 0, seq), &batch).status_json()
    };
    let message = "0190d0c0-0000-7000-8000-0000000000c1";
    let mut expected_text = String::new();
    for seq in 0..BATCHES {
        let piece = format!("{seq} ");
        let text = json!({ "kind": "text", "message_id": message, "delta": piece, "delta_action": "append" });
        let batch = match seq {
            0 => json!([{ "kind": "run_started" }, text]),
            last if last == BATCHES - 1 => json!([text, { "kind": "run_completed" }]),
            _ if seq % 5 == 0 => json!([
                text,
                { "kind": "tool_call", "content": { "tool_call_id": format!("c{seq}"), "name": "lookup" } },
                { "kind": "tool_result", "content": { "tool_call_id": format!("c{seq}"), "result": "ok" } },
            ]),
            _ => json!([text]),
        };
        expected_text.push_str(&piece);
        let first = bases[(seq % 2) as usize].clone();
        let other = bases[((seq + 1) % 2) as usize].clone();
        let ((one, one_body), (two, two_body)) =
            tokio::join!(send(first, seq, batch.clone()), send(other, seq, batch));
        let mut statuses = [one, two];
        statuses.sort_unstable();
        assert_eq!(
            statuses,
            [200, 204],
            "batch {seq}: one server writes it, the other answers its duplicate: {one_body} {two_body}"
        );
        if seq == BATCHES / 2 {
            for base in &bases {
                let position: Value = http
                    .get(format!("{base}/v1/agents/{agent_id}/producers/balanced"))
                    .answer()
                    .await;
                assert_eq!(position["run_open"], json!(true), "{base}: {position}");
                assert_eq!(position["seq"], json!(seq), "{base}: {position}");
            }
        }
    }
    let log = log_of(&http, &a.base, agent_id).await;
    assert_contiguous(&log, 1);
    let count = |kind: EventKind| log.iter().filter(|event| event.kind == kind).count();
    assert_eq!(count(EventKind::RunStarted), 1);
    assert_eq!(count(EventKind::RunCompleted), 1);
    assert_eq!(count(EventKind::RunFailed), 0);
    assert_eq!(count(EventKind::ToolResult), ((BATCHES - 2) / 5) as usize);
    let text: String = log
        .iter()
        .filter(|event| event.kind == EventKind::Text)
        .filter_map(|event| event.delta.as_ref().and_then(Value::as_str))
        .collect();
    assert_eq!(text, expected_text);
    // The agent is free on both servers.
    for base in &bases {
        let (status, body) = try_run(&http, base, agent_id, "/echo free").await;
        assert_eq!(status, 202, "{base}: {body}");
        let run_id: Uuid = body["run_id"].as_str().unwrap().parse().unwrap();
        common::wait_until("the run to end", || async {
            log_of(&http, base, agent_id)
                .await
                .iter()
                .any(|event| event.run_id == Some(run_id) && event.kind.is_run_end())
                .then_some(())
        })
        .await;
    }
}

/// One durable stream appended to through both servers in turn: each keeps the newest messages
/// it committed resident and serves reads from them, so every read — from any offset, on either
/// server, right after either's append — must be byte for byte what the other reads and hold
/// exactly the messages appended, in order (a resident tail that missed the other server's
/// appends must not answer for them).
#[tokio::test]
async fn two_servers_appending_to_one_stream_serve_the_same_bytes() {
    const APPENDS: usize = 40;
    let database = create_postgres_database(&postgres_admin_url()).await;
    let a = server(&database, 5, 0, 2_000).await;
    let b = server(&database, 5, 0, 2_000).await;
    let http = agentstream_server::http_client::client();
    let bases = [a.base.clone(), b.base.clone()];
    let url = |base: &str| format!("{base}/v1/streams/shared/resident");
    let created = http.put(url(&bases[0])).header("content-type", "application/json").sent().await;
    assert_eq!(created.status(), 201);
    let mut expected: Vec<Value> = Vec::new();
    // A fixed pattern of which server appends: runs on one, then switches.
    let writer_of = |index: usize| (index / 3 + index / 7) % 2;
    for index in 0..APPENDS {
        let batch: Vec<Value> = (0..1 + index % 3)
            .map(|k| json!({ "i": index, "k": k, "text": format!("é \"{index}\" \\ {k} 🚀"), "f": 1.5, "big": 9_007_199_254_740_991u64 }))
            .collect();
        let appended = http
            .post(url(&bases[writer_of(index)]))
            .header("content-type", "application/json")
            .body(Value::Array(batch.clone()).to_string())
            .sent()
            .await;
        assert!(appended.status().is_success(), "{}", appended.status());
        expected.extend(batch);
        // Read everything from a few offsets on both servers.
        for since in [0, expected.len() / 2, expected.len() - 1] {
            let offset =
                if since == 0 { "-1".to_owned() } else { format!("{:016}_{since:016}", 0) };
            let mut bodies = Vec::new();
            for base in &bases {
                let response = http.get(format!("{}?offset={offset}", url(base))).sent().await;
                assert_eq!(response.status(), 200);
                assert!(response.headers().contains_key("stream-up-to-date"));
                bodies.push(response.bytes().await.unwrap());
            }
            assert_eq!(
                String::from_utf8_lossy(&bodies[0]),
                String::from_utf8_lossy(&bodies[1]),
                "A and B read different bytes after append {index} from {offset}"
            );
            let messages: Vec<Value> = serde_json::from_slice(&bodies[0]).unwrap();
            assert_eq!(messages, expected[since..], "after append {index} from {offset}");
        }
    }
}
