//! What delivery does to the fold: gaps reported and filled, held events bounded, a serialized
//! timeline folding on, merged events that overlap, and a fold that forgets before a run start.

use super::*;

#[test]
fn gaps_are_reported_as_ranges_until_filled() {
    let events: Vec<AgentEvent> =
        (1..=10).map(|seq| at(seq, Text).message(1).append(&seq.to_string()).0).collect();
    let mut timeline = Timeline::new();
    timeline.apply(events[0].clone());
    timeline.apply(events[4].clone());
    timeline.apply(events[8].clone());
    timeline.apply(events[8].clone());
    assert_eq!(timeline.held_count(), 2);
    assert_eq!(timeline.missing_ranges(), vec![(1, 5), (5, 9)]);
    assert_eq!(timeline.missing(), Some((1, 5)));
    assert_eq!(timeline.last_seq(), 1);
    timeline.apply_all(events[1..4].iter().cloned());
    assert_eq!(timeline.last_seq(), 5);
    assert_eq!(timeline.missing_ranges(), vec![(5, 9)]);
    timeline.apply_all(events.iter().cloned());
    assert_eq!(timeline.missing(), None);
    assert_eq!(timeline.message(message(1)).unwrap().text(), "12345678910");
}

#[test]
fn held_events_are_bounded() {
    let mut timeline = Timeline::new();
    for seq in 2..(TIMELINE_HELD_EVENTS_MAX as u64 + 100) {
        timeline.apply(at(seq, Text).message(1).append("x").0);
    }
    assert_eq!(timeline.held_count(), TIMELINE_HELD_EVENTS_MAX);
}

#[test]
fn a_serialized_timeline_carries_on_folding() {
    let mut timeline = Timeline::new();
    timeline.apply_all([at(1, Text).message(1).append("Hel").0]);
    let json = serde_json::to_string(&timeline).unwrap();
    let mut restored: Timeline = serde_json::from_str(&json).unwrap();
    restored.apply(at(2, Text).message(1).append("lo").0);
    timeline.apply(at(2, Text).message(1).append("lo").0);
    assert_eq!(restored, timeline);
    assert_eq!(restored.message(message(1)).unwrap().text(), "Hello");
}

#[test]
fn a_partly_applied_merged_event_is_dropped_and_the_gap_reported() {
    let appends: Vec<AgentEvent> =
        (1..=6).map(|seq| at(seq, Text).block(1).message(1).append(&format!("{seq}")).0).collect();
    let merged = crate::coalesce::merge(&appends[2..6]); // seqs 3..=6
    let mut timeline = Timeline::new();
    timeline.apply_all(appends[..4].iter().cloned()); // seqs 1..=4 one by one
    assert!(!timeline.apply(merged.clone()), "3..=6 overlaps what is applied");
    assert_eq!(timeline.last_seq(), 4);
    assert_eq!(timeline.messages()[0].text(), "1234");
    // Held behind a gap, a merged event reports the gap before its first seq.
    let mut behind = Timeline::new();
    behind.apply(appends[0].clone());
    behind.apply(merged.clone());
    assert_eq!(behind.missing_ranges(), vec![(1, 3)]);
    behind.apply(appends[1].clone());
    assert_eq!(behind.last_seq(), 6);
    assert_eq!(behind.messages()[0].text(), "123456");
    assert_eq!(behind.messages()[0].first_seq, 1);
}

/// Forgetting what began before a run's start leaves the timeline a fold from that start gives,
/// and it folds on from there like one.
#[test]
fn forgetting_before_a_run_start_equals_folding_from_it() {
    let runs: Vec<AgentEvent> = (0..3u64)
        .flat_map(|index| {
            let first = index * 4 + 1;
            let n = index as u128 + 1;
            [
                at(first, EventKind::RunStarted).run(n).0,
                at(first + 1, EventKind::Text).run(n).block(n).message(n).text("a").0,
                at(first + 2, EventKind::Text).run(n).block(n).message(n).text("b").0,
                at(first + 3, EventKind::RunCompleted).run(n).0,
            ]
        })
        .collect();
    for cut in [1, 5, 9] {
        let mut forgot = Timeline::new();
        forgot.apply_all(runs[..10].iter().cloned());
        forgot.forget_before(cut);
        let mut from_cut = Timeline::starting_after(cut - 1);
        from_cut.apply_all(runs[..10].iter().cloned());
        assert_eq!(forgot, from_cut, "cut at {cut}");
        forgot.apply_all(runs[10..].iter().cloned());
        from_cut.apply_all(runs[10..].iter().cloned());
        assert_eq!(forgot, from_cut, "cut at {cut}, then the rest");
        assert_eq!(forgot.omitted_through(), cut - 1);
    }
}
