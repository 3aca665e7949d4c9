//! The simulated world's actors: runs writing, subscribers following and dropping, a server's life between crashes, and when to crash it (mid-commit).

use super::*;
use agentstream_server::agent::branch;

/// Starts the agent's remaining runs one after the other and waits for each to end.
pub(super) async fn runner(
    state: AppState,
    plan: Arc<Plan>,
    world: Arc<Mutex<World>>,
    agent: usize,
) {
    if agent >= plan.agents && !forked(&state, &plan, &world, agent).await {
        return;
    }
    loop {
        let (agent_id, spec) = {
            let mut world = world.lock().unwrap();
            let index = world.next_run[agent];
            let Some(spec) = plan.runs[agent].get(index).cloned() else {
                return;
            };
            // Counted before it starts: a crash after this point leaves it interrupted, not
            // started again.
            world.next_run[agent] += 1;
            (world.agent_ids[agent], spec)
        };
        let started = match state
            .starter
            .start_run(agent_id, spec.content.clone(), None, RunOptions::default())
            .await
        {
            Ok(started) => started,
            // An injected store fault before the run began: nothing was started.
            Err(_) => continue,
        };
        let run_id = started.run_id;
        if let Some(after) = spec.cancel_after_ms {
            let runs = state.runs.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(after)).await;
                runs.cancel(agent_id, Some(&[run_id]));
            });
        }
        while state.runs.active_run(agent_id) == Some(run_id) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// Forks branch slot `slot` from its parent once the parent has run one run (or has no more to
/// run) and is idle, after the parent's head; tried again while faults or a run just started
/// refuse it. False when the life ended first.
pub(super) async fn forked(
    state: &AppState,
    plan: &Plan,
    world: &Mutex<World>,
    slot: usize,
) -> bool {
    let parent = plan.branches[slot - plan.agents];
    loop {
        let (parent_id, ready) = {
            let world = world.lock().unwrap();
            if !world.agent_ids[slot].is_nil() {
                return true;
            }
            let ran = world.next_run[parent] >= 1.min(plan.runs[parent].len());
            (world.agent_ids[parent], ran)
        };
        if ready && !parent_id.is_nil() && state.runs.active_run(parent_id).is_none() {
            let head = state.store.head_seq(parent_id).await.ok().flatten();
            if let Some(head) = head {
                let store = state.store.as_ref();
                if let Ok(branch) = branch::fork_at(store, parent_id, head).await {
                    let mut world = world.lock().unwrap();
                    world.agent_ids[slot] = branch.id;
                    world.forks[slot] = Some((parent, head));
                    FORKS.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Follows the client's agent, reconnecting (from its last seq) whenever its connection ends.
pub(super) async fn subscriber(
    state: AppState,
    world: Arc<Mutex<World>>,
    client: Arc<Mutex<Client>>,
) {
    loop {
        let (agent_id, since, spec) = {
            let mut client = client.lock().unwrap();
            if client.agent_id.is_nil() {
                // A branch's subscriber waits for the branch.
                client.agent_id = world.lock().unwrap().agent_ids[client.spec.agent];
            }
            (client.agent_id, client.last_seq, client.spec.clone())
        };
        if agent_id.is_nil() {
            tokio::time::sleep(Duration::from_millis(1)).await;
            continue;
        }
        let (out, mut incoming) = mpsc::channel::<Outbound>(spec.queue);
        let follower = {
            let state = state.clone();
            tokio::spawn(async move {
                let form = Form::Json { coalesce: spec.coalesce };
                let _ = subscription::follow(
                    state.store.as_ref(),
                    &state.hub,
                    agent_id,
                    since,
                    form,
                    &out,
                )
                .await;
            })
        };
        let mut batches = 0u64;
        while let Some(first) = incoming.recv().await {
            // What waits is taken together, as a socket's writer takes it.
            let mut waiting = vec![first];
            while waiting.len() < subscription::OUTBOUND_DRAIN_MESSAGES_MAX {
                match incoming.try_recv() {
                    Ok(message) => waiting.push(message),
                    Err(_) => break,
                }
            }
            for message in subscription::coalesce_waiting(waiting) {
                // The frame a socket would carry (a catch-up page, live events, a control
                // message), read back as a client does.
                let frame = message.into_frame();
                let message: ServerMessage = serde_json::from_str(&frame).expect("frames are JSON");
                if let ServerMessage::Events { events, .. } = message {
                    client.lock().unwrap().receive(events);
                    batches += 1;
                }
            }
            if spec.pause_us > 0 {
                tokio::time::sleep(Duration::from_micros(spec.pause_us)).await;
            }
            if spec.batches_per_connection != 0 && batches >= spec.batches_per_connection {
                break;
            }
        }
        follower.abort();
        RECONNECTS.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

pub(super) async fn life(
    plan: Arc<Plan>,
    world: Arc<Mutex<World>>,
    database_url: String,
    faults: Arc<Faults>,
    crash_ms: Option<u64>,
) -> LifeEnd {
    let state = open(&plan, &database_url, &faults).await;
    let clients = world.lock().unwrap().clients.clone();
    for client in clients {
        tokio::spawn(subscriber(state.clone(), world.clone(), client));
    }
    let runners: Vec<_> = (0..plan.runs.len())
        .map(|agent| tokio::spawn(runner(state.clone(), plan.clone(), world.clone(), agent)))
        .collect();
    if let Some(crash_ms) = crash_ms {
        tokio::time::sleep(Duration::from_millis(crash_ms)).await;
        return LifeEnd::Crashed;
    }
    for runner in runners {
        runner.await.expect("a runner panicked");
    }
    // Everything is written; wait until every client has caught up with its agent's head.
    faults.enabled.store(false, Ordering::Relaxed);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let mut behind = Vec::new();
        // Cloned out first: a guard in the loop's head would live through the loop's awaits.
        let clients = world.lock().unwrap().clients.clone();
        for client in clients {
            let (agent_id, last_seq) = {
                let client = client.lock().unwrap();
                (client.agent_id, client.last_seq)
            };
            if agent_id.is_nil() {
                behind.push((agent_id, last_seq, 0));
                continue;
            }
            let head = state.store.head_seq(agent_id).await.unwrap().unwrap();
            if last_seq < head {
                behind.push((agent_id, last_seq, head));
            }
        }
        if behind.is_empty() {
            return LifeEnd::Finished;
        }
        assert!(tokio::time::Instant::now() < deadline, "subscribers never caught up: {behind:?}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A crash here drops the life's runtime, but the store's SQLite connections run on threads of
/// their own, and a COMMIT such a thread was executing still lands (a group it had not yet
/// committed is dropped: nobody waits for it any more). A real crash takes those threads with
/// it. The next life starts once such a commit is done — `BEGIN IMMEDIATE` gets the write lock
/// only then — so its recovery sees the log as the crash left it. Without this, a run whose
/// last events landed after recovery had looked was left with no end (seen: 3 seeds in 14
/// runs of the suite, before the append thread dropped abandoned groups).
pub(super) fn wait_for_a_commit_in_progress(database_url: &str) {
    use sqlx::Connection;
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let mut connection =
            sqlx::SqliteConnection::connect(database_url).await.expect("the database opens");
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut connection)
            .await
            .expect("the write lock is taken");
        sqlx::query("COMMIT").execute(&mut connection).await.expect("the write lock is given back");
        connection.close().await.expect("the connection closes");
    });
}
