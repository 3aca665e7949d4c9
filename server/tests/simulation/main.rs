//! Simulation: the real store, writer, hub, subscriptions, agent loop and scripted provider,
//! driven by a seeded workload with faults injected at the seams and process crashes, then
//! checked against the log's invariants. Many seeds per run; a failure prints its seed and the
//! command that replays it.
//!
//! Faults injected (each seed picks its own rates):
//! - store appends that fail before they commit, appends that commit and then report a failure
//!   (the answer to COMMIT lost on the way), and appends that are slow;
//! - store reads (catch-up pages, heads, look-ups by id) that fail;
//! - provider runs that fail mid-stream (`/fail`), stall (`/stall`), run slow tools, or are
//!   cancelled at a random moment;
//! - subscribers with tiny outbound queues and a tiny hub buffer (so they lag and catch up from
//!   the store), that read slowly, disconnect and resume from their last seq, and that feed
//!   their timeline duplicated and reordered frames; some ask for coalescing, and take their
//!   queue's backlog together through `coalesce_waiting` as a socket's writer does;
//! - process crashes at a random moment: every task and all memory of the server is dropped and
//!   the database file is reopened (start-up recovery then runs), while clients keep their
//!   state and resume.
//!
//! Invariants checked after every seed:
//! - the log is gapless per agent (seq 1..=head);
//! - nothing was delivered that is not committed (every delivered `(seq, id)` is in the log);
//! - no committed event is lost (every subscriber ends with every seq of its agent, a merged
//!   event counting for each seq it stands for);
//! - every subscriber's timeline equals the fold of the log;
//! - a branch (forked between its parent's runs, mid-life, crashes and faults included) is a
//!   gapless log of its own whose events up to its fork seq are its parent's, event for event;
//! - every run has exactly one terminal event, runs cut off by a crash end `interrupted`, and
//!   every tool call has exactly one result.
//!
//! Replay: `SIM_SEED=<seed> cargo test -p server --test simulation -- --nocapture` runs one seed
//! (the same workload, fault rates and fault coin flips) 50 times (`SIM_REPEAT`). The schedule of
//! SQLite's own worker threads is not under the simulation's control, so a replay repeats the
//! workload and the faults, not every interleaving; a timing-dependent failure shows up within a
//! few repeats rather than on the first.

#[path = "../common/mod.rs"]
mod common;
mod plan;
use plan::{config, plan};
mod actors;
use actors::{life, wait_for_a_commit_in_progress};
mod checks;
mod faults;
use checks::{check_client, check_log, check_prefix, fail};
use faults::Faults;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentstream_server::agent::RunOptions;
use agentstream_server::config::Config;
use agentstream_server::delivery::subscription;
use agentstream_server::delivery::subscription::{Form, Outbound};
use agentstream_server::store::sqlite::SqliteStore;
use agentstream_server::store::{Agents, EventLog, NewAgent, Store};
use agentstream_server::AppState;
use app::protocol::ServerMessage;
use app::timeline::Timeline;
use app::{AgentEvent, EventKind};
use common::hooked_store::HookedStore;
use common::rng::Rng;
use serde_json::Value;
use tokio::sync::mpsc;
use uuid::Uuid;

/// Seeds per `cargo test` run unless `SIM_SEEDS` says otherwise.
const SIM_SEEDS_DEFAULT: u64 = 1000;
/// The first seed unless `SIM_SEED_BASE` says otherwise (fixed, so CI runs the same seeds).
const SIM_SEED_BASE_DEFAULT: u64 = 0x5eed_0000;
/// Times `SIM_SEED=<seed>` runs its seed unless `SIM_REPEAT` says otherwise.
const SIM_REPLAY_REPEATS_DEFAULT: usize = 50;
/// Seeds run at once per core unless `SIM_THREADS` says how many in all.
const SIM_SEEDS_PER_CORE: usize = 3;
/// Seeds run at once at most (unless `SIM_THREADS` says otherwise).
const SIM_THREADS_MAX: usize = 8;
/// A seed that runs longer than this is a failure (a hang is a bug too).
const SEED_WALL_TIME_MAX: Duration = Duration::from_secs(60);

/// What the seeds did, summed, so a run shows that its faults really happened.
static RUN_ENDS: [std::sync::atomic::AtomicU64; 5] =
    [const { std::sync::atomic::AtomicU64::new(0) }; 5];
const RUN_END_NAMES: [&str; 5] =
    ["completed", "cancelled", "failed (provider)", "failed (store)", "interrupted by a crash"];
/// Branches forked mid-life.
static FORKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static CRASHES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static RECONNECTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// Seqs that reached a coalescing subscriber inside a merged event rather than on their own.
static MERGED_SEQS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

type FaultyStore = HookedStore<Arc<Faults>>;

/// What one run of the workload does.
#[derive(Clone, Debug)]
struct RunSpec {
    content: String,
    /// Cancel it this long after it started, if set.
    cancel_after_ms: Option<u64>,
}

/// The whole workload of a seed, decided up front from the seed alone.
#[derive(Debug)]
struct Plan {
    /// Conversations made before the first life (slots `0..agents`).
    agents: usize,
    /// Branches (slots `agents..`): the slot each forks, between that slot's runs.
    branches: Vec<usize>,
    /// Each slot's runs, roots' then branches'.
    runs: Vec<Vec<RunSpec>>,
    /// (agent index, outbound queue size, batches read before disconnecting (0 = never), read
    /// pause in µs, duplicate ‰, reorder ‰)
    subscribers: Vec<SubscriberSpec>,
    hub_room_batches_max: usize,
    reply_tokens: u32,
    token_delay_ms: u64,
    /// Crash the process this long into each life (a life without one runs to the end).
    crashes_ms: Vec<u64>,
    append_fail_per_mille: u64,
    append_delay_max_us: u64,
    read_fail_per_mille: u64,
    lost_ack_per_mille: u64,
}

#[derive(Clone, Debug)]
struct SubscriberSpec {
    agent: usize,
    queue: usize,
    batches_per_connection: u64,
    pause_us: u64,
    duplicate_per_mille: u64,
    reorder_per_mille: u64,
    /// Subscribes with `coalesce` and reads its queue as a socket's writer does.
    coalesce: bool,
}

/// A client: what it was delivered and what it folded, kept across server crashes.
struct Client {
    spec: SubscriberSpec,
    agent_id: Uuid,
    rng: Rng,
    last_seq: u64,
    delivered: Vec<(u64, Uuid)>,
    /// Seqs delivered inside merged events (all but each one's last, which is in `delivered`).
    merged: Vec<u64>,
    timeline: Timeline,
    /// Frames held back to be applied late (reordering).
    held: Vec<AgentEvent>,
}

impl Client {
    fn receive(&mut self, events: Vec<AgentEvent>) {
        for event in events {
            self.delivered.push((event.seq, event.id));
            self.merged.extend(event.first_seq()..event.seq);
            MERGED_SEQS.fetch_add(event.seq - event.first_seq(), Ordering::Relaxed);
            self.last_seq = self.last_seq.max(event.seq);
            if self.rng.chance(self.spec.duplicate_per_mille) {
                self.timeline.apply(event.clone());
            }
            if self.rng.chance(self.spec.reorder_per_mille) {
                self.held.push(event);
            } else {
                self.timeline.apply(event);
                if !self.held.is_empty() && self.rng.chance(500) {
                    self.release_held();
                }
            }
        }
    }

    fn release_held(&mut self) {
        while let Some(event) = self.held.pop() {
            self.timeline.apply(event);
        }
    }
}

/// Carried across lives: which runs were started, and the clients.
struct World {
    /// Each slot's log; a branch not forked yet is nil.
    agent_ids: Vec<Uuid>,
    /// A forked branch's parent slot and fork seq.
    forks: Vec<Option<(usize, u64)>>,
    next_run: Vec<usize>,
    clients: Vec<Arc<Mutex<Client>>>,
}

/// Opens the server's state on the database file, as a restart does (recovery included),
/// trying again while injected faults make start-up fail.
async fn open(plan: &Plan, database_url: &str, faults: &Arc<Faults>) -> AppState {
    for _ in 0..50 {
        let inner = SqliteStore::open(database_url).await.expect("the database opens");
        let store: Arc<dyn Store> = Arc::new(FaultyStore { inner, hooks: faults.clone() });
        match AppState::open_with_store(&config(plan, database_url), store).await {
            Ok(state) => return state,
            Err(error) => {
                eprintln!("start-up failed ({error}); starting again");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }
    panic!("the server never started");
}

enum LifeEnd {
    Crashed,
    Finished,
}

/// Runs one seed; panics with the seed's replay command when an invariant fails.
fn simulate(seed: u64, directory: &std::path::Path) {
    let plan = Arc::new(plan(seed));
    static RUN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let file = directory.join(format!("sim-{seed}-{}.db", RUN.fetch_add(1, Ordering::Relaxed)));
    let database_url = format!("sqlite://{}", file.display());
    let faults = Arc::new(Faults {
        append_fail_per_mille: plan.append_fail_per_mille,
        append_delay_max_us: plan.append_delay_max_us,
        read_fail_per_mille: plan.read_fail_per_mille,
        lost_ack_per_mille: plan.lost_ack_per_mille,
        rng: Mutex::new(Rng(seed ^ 0xfa17)),
        enabled: AtomicBool::new(true),
    });
    let runtime = || tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();

    // The agents exist before the first life.
    let agent_ids: Vec<Uuid> = runtime().block_on(async {
        let store = SqliteStore::open(&database_url).await.unwrap();
        let mut ids = Vec::new();
        for index in 0..plan.agents {
            let agent = store
                .create_agent(NewAgent { name: format!("sim-{index}"), ..NewAgent::default() })
                .await
                .unwrap();
            ids.push(agent.id);
        }
        ids
    });
    let mut client_rng = Rng(seed ^ 0xc11e);
    let clients = plan
        .subscribers
        .iter()
        .map(|spec| {
            Arc::new(Mutex::new(Client {
                spec: spec.clone(),
                agent_id: agent_ids.get(spec.agent).copied().unwrap_or_default(),
                rng: Rng(client_rng.next()),
                last_seq: 0,
                delivered: Vec::new(),
                merged: Vec::new(),
                timeline: Timeline::new(),
                held: Vec::new(),
            }))
        })
        .collect();
    let slots = plan.runs.len();
    let mut slot_ids = agent_ids.clone();
    slot_ids.resize(slots, Uuid::nil());
    let world = Arc::new(Mutex::new(World {
        agent_ids: slot_ids,
        forks: vec![None; slots],
        next_run: vec![0; slots],
        clients,
    }));

    let mut lives = plan.crashes_ms.iter().copied().map(Some).collect::<Vec<_>>();
    lives.push(None);
    let crashed = lives.len() > 1;
    for crash_ms in lives {
        faults.enabled.store(true, Ordering::Relaxed);
        // A life is a process: its runtime holds every task and all of the server's memory;
        // dropping it mid-flight is the crash.
        let rt = runtime();
        let end = rt.block_on(life(
            plan.clone(),
            world.clone(),
            database_url.clone(),
            faults.clone(),
            crash_ms,
        ));
        drop(rt);
        if let LifeEnd::Finished = end {
            break;
        }
        CRASHES.fetch_add(1, Ordering::Relaxed);
        wait_for_a_commit_in_progress(&database_url);
    }

    // Check the invariants against the database file, faults off; then the file goes.
    let _remove = RemoveOnDrop(file);
    let world = world.lock().unwrap();
    runtime().block_on(async {
        let store = SqliteStore::open(&database_url).await.unwrap();
        let mut logs: Vec<Vec<AgentEvent>> = Vec::new();
        for (slot, &agent_id) in world.agent_ids.iter().enumerate() {
            let log = common::whole_log(&store, agent_id).await;
            let head = store.head_seq(agent_id).await.unwrap().unwrap();
            check_log(seed, agent_id, &log, head, crashed);
            // A branch's first events are its parent's, event for event.
            if let Some((parent, fork_seq)) = world.forks[slot] {
                check_prefix(seed, &logs[parent], (agent_id, &log), fork_seq);
            }
            for client in world.clients.iter() {
                let mut client = client.lock().unwrap();
                if client.agent_id != agent_id {
                    continue;
                }
                client.release_held();
                check_client(seed, &client, &log);
            }
            logs.push(log);
        }
    });
}

/// Removes the seed's database files (and SQLite's side files) when the seed is done.
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut path = self.0.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }
}

#[test]
fn simulated_faults_and_crashes_never_break_the_log_invariants() {
    let seeds: Vec<u64> = match std::env::var("SIM_SEED") {
        // A replay runs its seed again and again: the workload and fault rates are the seed's,
        // the interleaving of SQLite's threads is not, so a rare failure needs a few tries.
        Ok(seed) => {
            let seed: u64 = seed.parse().expect("SIM_SEED is a number");
            let repeats = std::env::var("SIM_REPEAT")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(SIM_REPLAY_REPEATS_DEFAULT);
            vec![seed; repeats]
        }
        Err(_) => {
            let count = std::env::var("SIM_SEEDS")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(SIM_SEEDS_DEFAULT);
            let base = std::env::var("SIM_SEED_BASE")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(SIM_SEED_BASE_DEFAULT);
            (base..base + count).collect()
        }
    };
    // tmpfs when there is one: a crash here is a process crash, which fsync does not change.
    let root = if std::path::Path::new("/dev/shm").is_dir() { Some("/dev/shm") } else { None };
    let directory = match root {
        Some(root) => tempfile::tempdir_in(root).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let started = std::time::Instant::now();
    // A seed waits about half its time (its lives' crash timers, the store's fsyncs), so three
    // seeds per core keep the cores busy: 1 000 seeds took 128 s with one per core on 2 cores.
    let threads =
        std::env::var("SIM_THREADS").ok().and_then(|n| n.parse().ok()).unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map_or(2, |n| n.get() * SIM_SEEDS_PER_CORE)
                .min(SIM_THREADS_MAX)
        });
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seeds = Arc::new(seeds);
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (next, seeds) = (next.clone(), seeds.clone());
            let directory = directory.path().to_owned();
            std::thread::spawn(move || loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(&seed) = seeds.get(index) else {
                    return;
                };
                let began = std::time::Instant::now();
                // Any panic of a seed (a stuck subscriber, a runner) is reported with its seed.
                if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    simulate(seed, &directory)
                })) {
                    let what = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|text| text.to_string()))
                        .unwrap_or_else(|| "a panic".into());
                    if what.starts_with("seed ") {
                        std::panic::resume_unwind(panic);
                    }
                    fail(seed, what);
                }
                if began.elapsed() > SEED_WALL_TIME_MAX {
                    fail(seed, format!("took {:?}", began.elapsed()));
                }
            })
        })
        .collect();
    for worker in workers {
        if let Err(panic) = worker.join() {
            std::panic::resume_unwind(panic);
        }
    }
    println!("simulation: {} seeds in {:.1} s", seeds.len(), started.elapsed().as_secs_f64());
    let ends: Vec<String> = RUN_END_NAMES
        .iter()
        .zip(&RUN_ENDS)
        .map(|(name, count)| format!("{name} {}", count.load(Ordering::Relaxed)))
        .collect();
    let groups_sent = faults::GROUPS_SENT.load(Ordering::Relaxed);
    println!(
        "runs: {}; branches {}; crashes {}; subscriber reconnects {}; seqs delivered merged {}; \
         groups sent through the pipeline {groups_sent}",
        ends.join(", "),
        FORKS.load(Ordering::Relaxed),
        CRASHES.load(Ordering::Relaxed),
        RECONNECTS.load(Ordering::Relaxed),
        MERGED_SEQS.load(Ordering::Relaxed)
    );
    assert!(groups_sent > 0, "the writers sent no group through the pipeline");
}
