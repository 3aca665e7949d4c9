//! The invariants a simulated world is checked against: the log (gapless, one end per run, nothing after an end) and each client's view of it.

use super::*;

pub(super) fn fail(seed: u64, what: String) -> ! {
    panic!(
        "seed {seed}: {what}\nreplay: SIM_SEED={seed} cargo test -p server --test simulation -- --nocapture\nplan: {:?}",
        plan(seed)
    );
}

pub(super) fn check_log(seed: u64, agent_id: Uuid, log: &[AgentEvent], head: u64, crashed: bool) {
    for (index, event) in log.iter().enumerate() {
        if event.seq != index as u64 + 1 {
            fail(
                seed,
                format!(
                    "agent {agent_id}: seq {} at position {index}: the log has a gap",
                    event.seq
                ),
            );
        }
    }
    if log.len() as u64 != head {
        fail(seed, format!("agent {agent_id}: head_seq {head} but {} events", log.len()));
    }
    let mut runs: HashMap<Uuid, (usize, Vec<&AgentEvent>)> = HashMap::new();
    for event in log {
        let Some(run_id) = event.run_id else { continue };
        let entry = runs.entry(run_id).or_default();
        if event.kind == EventKind::RunStarted {
            entry.0 += 1;
        }
        if event.kind.is_run_end() {
            entry.1.push(event);
        }
    }
    for (run_id, (started, ends)) in &runs {
        // The run's events, for a failure's message.
        let events = || {
            let events: Vec<String> = log
                .iter()
                .filter(|event| event.run_id == Some(*run_id))
                .map(|event| format!("{} {}", event.seq, event.kind.as_str()))
                .collect();
            events.join(", ")
        };
        if *started != 1 {
            fail(seed, format!("run {run_id} started {started} times; its events: {}", events()));
        }
        if ends.len() != 1 {
            let count = ends.len();
            fail(
                seed,
                format!("run {run_id} has {count} terminal events; its events: {}", events()),
            );
        }
        let error_type = ends[0].content.pointer("/error/type").and_then(Value::as_str);
        let interrupted = error_type == Some("interrupted");
        let outcome = match (ends[0].kind, error_type) {
            (EventKind::RunCompleted, _) => 0,
            (EventKind::RunCancelled, _) => 1,
            (_, Some("interrupted")) => 4,
            (_, Some("store_error")) => 3,
            _ => 2,
        };
        RUN_ENDS[outcome].fetch_add(1, Ordering::Relaxed);
        if interrupted && !crashed {
            fail(seed, format!("run {run_id} marked interrupted without a crash"));
        }
    }
    // Every tool call has exactly one result.
    let mut timeline = Timeline::new();
    timeline.apply_all(log.iter().cloned());
    for message in timeline.messages().iter().filter(|m| m.kind == EventKind::ToolCall) {
        let Some(call_id) = message.content.get("tool_call_id").and_then(Value::as_str) else {
            continue;
        };
        let results = log
            .iter()
            .filter(|e| {
                e.kind == EventKind::ToolResult
                    && e.run_id == message.run_id
                    && e.content.get("tool_call_id").and_then(Value::as_str) == Some(call_id)
            })
            .count();
        if results != 1 {
            fail(seed, format!("tool call {call_id} has {results} results"));
        }
    }
}

pub(super) fn check_client(seed: u64, client: &Client, log: &[AgentEvent]) {
    for &(seq, id) in &client.delivered {
        match log.get(seq as usize - 1) {
            Some(event) if event.id == id => {}
            Some(event) => fail(seed, format!("delivered seq {seq} as {id}, but the log has {} there: delivered before commit?", event.id)),
            None => fail(seed, format!("delivered seq {seq}, which was never committed")),
        }
    }
    let mut seen: Vec<u64> =
        client.delivered.iter().map(|(seq, _)| *seq).chain(client.merged.iter().copied()).collect();
    seen.sort_unstable();
    seen.dedup();
    if seen.len() != log.len() {
        let missing: Vec<u64> = (1..=log.len() as u64)
            .filter(|seq| seen.binary_search(seq).is_err())
            .take(10)
            .collect();
        fail(
            seed,
            format!(
                "a subscriber of {} never got seqs {missing:?} (of {})",
                client.agent_id,
                log.len()
            ),
        );
    }
    let mut folded = Timeline::new();
    folded.apply_all(log.iter().cloned());
    if client.timeline != folded {
        fail(
            seed,
            format!(
                "a subscriber's timeline differs from the fold of the log (last seq {} vs {})",
                client.timeline.last_seq(),
                folded.last_seq()
            ),
        );
    }
}

pub(super) fn check_prefix(
    seed: u64,
    parent: &[AgentEvent],
    (branch_id, branch): (Uuid, &[AgentEvent]),
    fork_seq: u64,
) {
    let shared = fork_seq as usize;
    if parent.len() < shared || branch.len() < shared || parent[..shared] != branch[..shared] {
        fail(seed, format!("a branch forked at {fork_seq} does not share its parent's events"));
    }
    if let Some(other) = branch[shared..].iter().find(|event| event.agent_id != branch_id) {
        fail(seed, format!("the branch's own seq {} is another log's event", other.seq));
    }
}
