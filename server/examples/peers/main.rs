//! The wire-speed bench: agentstream's Durable Streams surface beside the protocol's fastest
//! peer (Electric's Rust server) and its Node reference server, on the same machine, under the
//! same load, in one run, the servers' order alternating between rounds (this machine drifts
//! ±20 % between identical rounds). Each figure is the median of the rounds.
//!
//! Per server and round: appends/s with one message per POST and with 64 (wrk, 64 connections
//! over 64 JSON streams, ~45-byte messages) with their ack p50/p99 and every acknowledged
//! message read back exactly once; catch-up reads of a 10 000-message stream, then the same
//! reads from the server restarted on its data (the first from storage: none of its memory
//! survives a restart), and that first read's time; append →
//! long-poll and append → SSE latency; and the cost: server CPU and bytes written per message,
//! bytes on disk per message.
//!
//! `./scripts/bench.sh --peers` installs the peers and runs it. Options: `--rounds N` (3),
//! `--seconds N` per wrk run (10), `--samples N` per latency (200), `--only NAME` (agentstream,
//! baseline, rust, node; repeatable). `AGENTSTREAM_PEER_BASELINE_SERVER` names another
//! agentstream server binary (the code before a change) to run beside them as the same-run
//! baseline.

mod load;
mod servers;
mod stream_client;

use std::path::PathBuf;

use load::{Appends, BATCH_MESSAGES, CATCH_UP_MESSAGES, CONNECTIONS};
use servers::{Kind, Target};

struct Args {
    rounds: usize,
    seconds: u64,
    samples: usize,
    kinds: Vec<Kind>,
}

fn usage(problem: &str) -> ! {
    eprintln!("peers: {problem}\nusage: peers [--rounds N] [--seconds N] [--samples N] [--only agentstream|baseline|rust|node]…");
    std::process::exit(2)
}

impl Args {
    fn parse() -> Args {
        let mut args = Args { rounds: 3, seconds: 10, samples: 200, kinds: Vec::new() };
        let mut words = std::env::args().skip(1);
        while let Some(word) = words.next() {
            let value = words.next().unwrap_or_else(|| usage(&format!("{word} needs a value")));
            let number = || -> u64 {
                value.parse().unwrap_or_else(|_| usage(&format!("{value:?} is not a number")))
            };
            match word.as_str() {
                "--rounds" => args.rounds = number().max(1) as usize,
                "--seconds" => args.seconds = number().max(1),
                "--samples" => args.samples = number().max(10) as usize,
                "--only" => args.kinds.push(match value.as_str() {
                    "agentstream" => Kind::Agentstream,
                    "baseline" => Kind::Baseline,
                    "rust" => Kind::RustPeer,
                    "node" => Kind::NodeReference,
                    other => usage(&format!("unknown server {other:?}")),
                }),
                other => usage(&format!("unknown option {other:?}")),
            }
        }
        if args.kinds.is_empty() {
            args.kinds = vec![Kind::Agentstream, Kind::RustPeer, Kind::NodeReference];
            // With a baseline binary given, it runs beside them.
            if std::env::var_os("AGENTSTREAM_PEER_BASELINE_SERVER").is_some() {
                args.kinds.insert(1, Kind::Baseline);
            }
        }
        args
    }
}

/// One server's figures in one round.
#[derive(Clone, Copy, Default)]
struct Round {
    single: Appends,
    batched: Appends,
    catch_up: f64,
    /// The same after a restart (messages/s; NaN when the stream did not come back whole).
    catch_up_restarted: f64,
    /// The first of those reads (ms): from storage, whatever the server keeps in memory.
    first_read_restarted_ms: f64,
    long_poll: (f64, f64),
    sse: (f64, f64),
    disk_per_message: f64,
}

async fn measure(kind: Kind, round: usize, args: &Args, script: &std::path::Path) -> Round {
    let mut target = Target::start(kind).await;
    let single = load::appends(&target, &format!("r{round}-single"), 1, args.seconds, script).await;
    let batched =
        load::appends(&target, &format!("r{round}-batched"), BATCH_MESSAGES, args.seconds, script)
            .await;
    let disk_per_message =
        target.disk_bytes() as f64 / (single.read_back + batched.read_back).max(1) as f64;
    let catch_up_stream = format!("r{round}-catch-up");
    load::fill_catch_up_stream(&target, &catch_up_stream).await;
    let catch_up =
        load::catch_up_reads(&target, &catch_up_stream, 3).await.map_or(f64::NAN, |(_, rate)| rate);
    let long_poll =
        load::long_poll_latency(&target, &format!("r{round}-long-poll"), args.samples).await;
    let sse = load::sse_latency(&target, &format!("r{round}-sse"), args.samples).await;
    // The same catch-up from a restarted server: from what it stored, none of its memory.
    target.restart().await;
    let (first_read_restarted_ms, catch_up_restarted) =
        load::catch_up_reads(&target, &catch_up_stream, 3).await.unwrap_or((f64::NAN, f64::NAN));
    target.stop().await;
    Round {
        single,
        batched,
        catch_up,
        catch_up_restarted,
        first_read_restarted_ms,
        long_poll,
        sse,
        disk_per_message,
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() {
    let args = Args::parse();
    let script = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/peers/append.lua"));
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    let mut results: Vec<(Kind, Vec<Round>)> =
        args.kinds.iter().map(|kind| (*kind, Vec::new())).collect();
    let mut exact = true;
    for round in 0..args.rounds {
        // Alternate the order: forward in even rounds, backward in odd ones.
        let mut order: Vec<usize> = (0..results.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for index in order {
            let kind = results[index].0;
            eprintln!("peers: round {} of {}: {}", round + 1, args.rounds, kind.label());
            let figures = runtime.block_on(measure(kind, round, &args, &script));
            for (what, appends) in
                [("1 per POST", figures.single), ("64 per POST", figures.batched)]
            {
                let whole = appends.errors == 0
                    && appends.duplicates == 0
                    && appends.read_back >= appends.acknowledged;
                // Ours must be exact; a peer's errors are reported, not judged.
                exact &= whole || kind != Kind::Agentstream;
                eprintln!(
                    "peers:   {what}: {:.0} messages/s, {} errors, {} acknowledged, {} read back, {} duplicates{}",
                    appends.messages_per_second, appends.errors, appends.acknowledged,
                    appends.read_back, appends.duplicates,
                    if whole { "" } else { "  ← NOT EXACT" }
                );
            }
            results[index].1.push(figures);
        }
    }
    print_table(&results, &args);
    if !exact {
        println!(
            "peers: agentstream lost, duplicated or refused acknowledged messages (see above)"
        );
        std::process::exit(1);
    }
}

fn print_table(results: &[(Kind, Vec<Round>)], args: &Args) {
    println!();
    println!(
        "Durable Streams, {} rounds (median), wrk {} s per load, {CONNECTIONS} connections over {CONNECTIONS} JSON streams:",
        args.rounds, args.seconds
    );
    let header: Vec<&str> = results.iter().map(|(kind, _)| kind.label()).collect();
    println!("| | {} |", header.join(" | "));
    println!("|---|{}", "---|".repeat(results.len()));
    let row = |label: &str, cell: &dyn Fn(&[Round]) -> String| {
        let cells: Vec<String> = results.iter().map(|(_, rounds)| cell(rounds)).collect();
        println!("| {label} | {} |", cells.join(" | "));
    };
    let of =
        |rounds: &[Round], pick: &dyn Fn(&Round) -> f64| median(rounds.iter().map(pick).collect());
    row("appends/s, one message per POST", &|r| {
        format!("{:.0}", of(r, &|x| x.single.messages_per_second))
    });
    row("ack p50 / p99, same load (ms)", &|r| {
        format!("{:.1} / {:.1}", of(r, &|x| x.single.p50_ms), of(r, &|x| x.single.p99_ms))
    });
    row(&format!("messages/s, {BATCH_MESSAGES} per POST"), &|r| {
        format!("{:.0}", of(r, &|x| x.batched.messages_per_second))
    });
    row(&format!("catch-up read of a {CATCH_UP_MESSAGES}-message stream, messages/s"), &|r| {
        format!("{:.0}", of(r, &|x| x.catch_up))
    });
    row("the same read after a restart, messages/s", &|r| {
        format!("{:.0}", of(r, &|x| x.catch_up_restarted))
    });
    row("the first of those reads (from storage), ms", &|r| {
        format!("{:.1}", of(r, &|x| x.first_read_restarted_ms))
    });
    row("append → long-poll reader, p50 / p99 (ms)", &|r| {
        format!("{:.1} / {:.1}", of(r, &|x| x.long_poll.0), of(r, &|x| x.long_poll.1))
    });
    row("append → SSE reader, p50 / p99 (ms)", &|r| {
        format!("{:.1} / {:.1}", of(r, &|x| x.sse.0), of(r, &|x| x.sse.1))
    });
    row("errors (non-2xx, socket) / duplicates read back, all rounds", &|r| {
        let errors: u64 = r.iter().map(|x| x.single.errors + x.batched.errors).sum();
        let duplicates: u64 = r.iter().map(|x| x.single.duplicates + x.batched.duplicates).sum();
        format!("{errors} / {duplicates}")
    });
    row("server CPU per message, 1 / 64 per POST (µs)", &|r| {
        format!(
            "{:.1} / {:.2}",
            of(r, &|x| x.single.cpu_us_per_message),
            of(r, &|x| x.batched.cpu_us_per_message)
        )
    });
    row("bytes written per message, 1 / 64 per POST", &|r| {
        format!(
            "{:.0} / {:.0}",
            of(r, &|x| x.single.written_per_message),
            of(r, &|x| x.batched.written_per_message)
        )
    });
    row("bytes on disk per message", &|r| format!("{:.0}", of(r, &|x| x.disk_per_message)));
}
