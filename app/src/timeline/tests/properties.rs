//! Property tests of the fold: any delivery order, with duplicates, gaps filled late and
//! coalesced pieces, converges to the timeline of the log delivered in order.

use super::*;
use proptest::prelude::*;

// ---- property: any delivery converges to the in-order timeline ----

/// A generated log: seqs 1..=n over a few runs, threads, blocks and messages, with every kind of
/// delta and whole contents.
fn arbitrary_log() -> impl Strategy<Value = Vec<AgentEvent>> {
    let step = (0u8..8, 0u128..3, 0u128..4, 0u128..6, "[a-z ]{0,4}");
    prop::collection::vec(step, 1..80).prop_map(|steps| {
        steps
            .into_iter()
            .enumerate()
            .map(|(index, (choice, run_n, block_n, message_n, text))| {
                let seq = index as u64 + 1;
                let base = |kind| {
                    at(seq, kind)
                        .run(run_n)
                        .thread(block_n % 2)
                        .block(run_n * 10 + block_n)
                        .message(run_n * 10 + message_n)
                };
                let ev = match choice {
                    0 => at(seq, RunStarted).run(run_n),
                    1 => {
                        at(seq, RunCompleted).run(run_n).content(json!({"stop_reason": "end_turn"}))
                    }
                    2 => at(seq, Usage).run(run_n).content(json!({"output_tokens": seq})),
                    3 => base(Text).append(&text),
                    4 => base(Thinking).append(&text).raw(json!({ "seq": seq })),
                    5 => base(ToolCall).delta(
                        "input",
                        DeltaAction::Merge,
                        json!({ text.clone(): seq }),
                    ),
                    6 => base(ToolCall).delta("status", DeltaAction::Replace, json!(text)),
                    _ => at(seq, User).text(&text),
                };
                ev.0
            })
            .collect()
    })
}

/// Delivers `log` as a flaky connection would: in `order`, some events twice, some never; then
/// fills what is missing with `since` queries of at most `page` events, as the hook does.
fn deliver(
    log: &[AgentEvent],
    order: &[usize],
    duplicated: &[bool],
    dropped: &[bool],
    page: usize,
) -> Timeline {
    let mut timeline = Timeline::new();
    for &index in order {
        if dropped[index] {
            continue;
        }
        timeline.apply(log[index].clone());
        if duplicated[index] {
            timeline.apply(log[index].clone());
        }
    }
    // Gap fill: read `since = last_seq` until the log's head is reached.
    while timeline.last_seq() < log.len() as u64 {
        let since = timeline.last_seq() as usize;
        let end = (since + page).min(log.len());
        timeline.apply_all(log[since..end].iter().cloned());
    }
    timeline
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_delivery_converges_to_in_order_delivery(
        (log, order, duplicated, dropped, page) in arbitrary_log().prop_flat_map(|log| {
            let n = log.len();
            (
                Just(log),
                Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
                prop::collection::vec(any::<bool>(), n),
                prop::collection::vec(prop::bool::weighted(0.2), n),
                1usize..20,
            )
        })
    ) {
        let mut in_order = Timeline::new();
        in_order.apply_all(log.iter().cloned());
        prop_assert_eq!(in_order.last_seq(), log.len() as u64);
        let delivered = deliver(&log, &order, &duplicated, &dropped, page);
        prop_assert_eq!(delivered.held_count(), 0);
        prop_assert_eq!(&delivered, &in_order);
    }
}

// ---- property: coalesced delivery converges to the same timeline ----

/// A log shaped like streaming: runs of appends to one message (what coalescing merges), between
/// the other kinds of events of [`arbitrary_log`].
fn streaming_log() -> impl Strategy<Value = Vec<AgentEvent>> {
    let step = (0u8..6, 0u128..2, 0u128..3, 0u128..4, 1usize..8, "[a-z ]{0,3}");
    prop::collection::vec(step, 1..40).prop_map(|steps| {
        let mut log: Vec<AgentEvent> = Vec::new();
        for (choice, run_n, block_n, message_n, repeat, text) in steps {
            let base = |seq, kind| {
                at(seq, kind)
                    .run(run_n)
                    .thread(block_n % 2)
                    .block(run_n * 10 + block_n)
                    .message(run_n * 10 + message_n)
            };
            let count = if choice <= 2 { repeat } else { 1 };
            for index in 0..count {
                let seq = log.len() as u64 + 1;
                let piece = format!("{text}{index}");
                let ev = match choice {
                    0 | 1 => base(seq, Text).append(&piece).raw(json!({ "seq": seq })),
                    2 => base(seq, Thinking).append(&piece),
                    3 => base(seq, ToolCall).delta("status", DeltaAction::Replace, json!(text)),
                    4 => at(seq, Usage).run(run_n).content(json!({"output_tokens": seq})),
                    _ => at(seq, User).text(&text),
                };
                log.push(ev.0);
            }
        }
        log
    })
}

/// The log cut where `cuts` says, each piece coalesced as the server coalesces what waits for
/// one frame.
fn coalesced_pieces(log: &[AgentEvent], cuts: &[bool]) -> Vec<AgentEvent> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for end in 1..=log.len() {
        if end == log.len() || cuts[end] {
            pieces.extend(crate::coalesce::coalesce(&log[start..end]));
            start = end;
        }
    }
    pieces
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Two coalesced deliveries of the same log, cut differently (two connections, a reconnect),
    /// mixed in any order, some events dropped, then gap fill with single events: the timeline
    /// equals the in-order fold of every event. Merged events that overlap what is applied are
    /// never applied twice.
    #[test]
    fn coalesced_delivery_converges_to_in_order_delivery(
        (log, cuts_a, cuts_b, order_seed, dropped, page) in streaming_log().prop_flat_map(|log| {
            let n = log.len();
            (
                Just(log),
                prop::collection::vec(prop::bool::weighted(0.3), n),
                prop::collection::vec(prop::bool::weighted(0.3), n),
                prop::collection::vec(any::<u32>(), 2 * n),
                prop::collection::vec(prop::bool::weighted(0.2), 2 * n),
                1usize..20,
            )
        })
    ) {
        let mut in_order = Timeline::new();
        in_order.apply_all(log.iter().cloned());

        let mut delivered: Vec<AgentEvent> = coalesced_pieces(&log, &cuts_a);
        delivered.extend(coalesced_pieces(&log, &cuts_b));
        // Shuffle by the generated keys, drop some.
        let mut keyed: Vec<(u32, bool, AgentEvent)> = delivered
            .into_iter()
            .enumerate()
            .map(|(index, event)| (order_seed[index], dropped[index], event))
            .collect();
        keyed.sort_by_key(|(key, _, _)| *key);
        let mut timeline = Timeline::new();
        for (_, dropped, event) in keyed {
            if !dropped {
                timeline.apply(event);
            }
        }
        while timeline.last_seq() < log.len() as u64 {
            let since = timeline.last_seq() as usize;
            let end = (since + page).min(log.len());
            timeline.apply_all(log[since..end].iter().cloned());
        }
        prop_assert_eq!(timeline.held_count(), 0);
        prop_assert_eq!(&timeline, &in_order);
    }

    /// Coalescing in one frame keeps nothing back: one merged event per run of appends, and the
    /// fold of the merged events alone equals the fold of every event.
    #[test]
    fn a_coalesced_log_folds_like_the_log(log in streaming_log()) {
        let merged = crate::coalesce::coalesce(&log);
        prop_assert!(merged.len() <= log.len());
        prop_assert_eq!(merged.last().map(|event| event.seq), log.last().map(|event| event.seq));
        let mut in_order = Timeline::new();
        in_order.apply_all(log.iter().cloned());
        let mut folded = Timeline::new();
        folded.apply_all(merged);
        prop_assert_eq!(&folded, &in_order);
    }
}
