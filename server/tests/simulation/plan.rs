//! A seed's plan: its agents, faults and crashes, and the server's configuration for it.

use super::*;

pub(super) fn plan(seed: u64) -> Plan {
    let mut rng = Rng(seed);
    let agents = rng.range(1, 3) as usize;
    let contents = |rng: &mut Rng| -> String {
        match rng.below(7) {
            0 => "/tools calculator 6*7; clock".into(),
            1 => "/tools slow 0.05; calculator 1+2".into(),
            2 => "/fail overloaded_error".into(),
            3 => "/stall 0.05".into(),
            4 => format!(
                "/echo {}",
                (0..rng.range(1, 30)).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ")
            ),
            _ => "tell me something".into(),
        }
    };
    // Branches of the roots, forked between the parent's runs once it has run one (slots after
    // the roots').
    let branches: Vec<usize> = (0..[0, 0, 1, 2][rng.below(4) as usize])
        .map(|_| rng.below(agents as u64) as usize)
        .collect();
    let slots = agents + branches.len();
    let runs = (0..slots)
        .map(|_| {
            (0..rng.range(1, 3))
                .map(|_| RunSpec {
                    content: contents(&mut rng),
                    cancel_after_ms: rng.chance(250).then(|| rng.below(40)),
                })
                .collect()
        })
        .collect();
    let subscribers = (0..rng.range(1, 4))
        .map(|_| SubscriberSpec {
            agent: rng.below(slots as u64) as usize,
            queue: rng.range(1, 8) as usize,
            batches_per_connection: if rng.chance(500) { 0 } else { rng.range(1, 30) },
            pause_us: if rng.chance(300) { rng.range(100, 2000) } else { 0 },
            duplicate_per_mille: rng.below(200),
            reorder_per_mille: rng.below(200),
            coalesce: rng.chance(500),
        })
        .collect();
    let crashes = match rng.below(10) {
        0..=5 => 0,
        6..=8 => 1,
        _ => 2,
    };
    Plan {
        agents,
        branches,
        runs,
        subscribers,
        hub_room_batches_max: rng.range(1, 8) as usize,
        reply_tokens: rng.range(3, 40) as u32,
        token_delay_ms: rng.below(2),
        crashes_ms: (0..crashes).map(|_| rng.range(5, 120)).collect(),
        append_fail_per_mille: [0, 0, 5, 20, 60, 300, 600][rng.below(7) as usize],
        append_delay_max_us: [0, 200, 2000][rng.below(3) as usize],
        read_fail_per_mille: [0, 0, 10, 40][rng.below(4) as usize],
        lost_ack_per_mille: [0, 0, 10, 100][rng.below(4) as usize],
    }
}

pub(super) fn config(plan: &Plan, database_url: &str) -> Config {
    let mut config = Config {
        database_url: database_url.to_owned(),
        hub_room_batches_max: plan.hub_room_batches_max,
        // Few retries, so that refused appends (and the runs they end) happen often.
        writer_commit_retries_max: 4,
        ..Config::default()
    };
    config.scripted.reply_tokens = plan.reply_tokens;
    config.scripted.token_delay_ms = plan.token_delay_ms;
    config
}
