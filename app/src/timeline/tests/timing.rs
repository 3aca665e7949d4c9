//! What the reducer says of time and of calls made together: run and block times from the
//! events' `created_at`, and the groups of one step's tool calls.

use super::*;

#[test]
fn calls_made_together_are_grouped_per_step() {
    let call = |seq: u64, run_id: u128, n: u128| {
        at(seq, EventKind::ToolCall)
            .run(run_id)
            .block(n)
            .message(n)
            .content(json!({ "tool_call_id": format!("c{n}"), "name": "clock" }))
            .0
    };
    let text = |seq: u64, run_id: u128, n: u128| {
        at(seq, EventKind::Text).run(run_id).block(n).message(n).text("hi").0
    };
    let mut timeline = Timeline::new();
    timeline.apply_all([
        text(1, 1, 1),
        call(2, 1, 2),
        call(3, 1, 3),
        call(4, 1, 4),
        text(5, 1, 5),
        call(6, 1, 6),
        // The next run's call follows directly, but is not made together with the last.
        call(7, 2, 7),
        call(8, 2, 8),
    ]);
    let groups = timeline.call_groups();
    let place = |n: u128| groups.get(&block(n)).copied();
    assert_eq!(place(1), None, "text is no call");
    assert_eq!([place(2), place(3), place(4)], [Some((0, 3)), Some((1, 3)), Some((2, 3))]);
    assert_eq!(place(5), None);
    assert_eq!(place(6), None, "a call on its own is no group");
    assert_eq!([place(7), place(8)], [Some((0, 2)), Some((1, 2))]);
}

#[test]
fn runs_and_blocks_keep_when_they_began_and_ended() {
    let time = |second: u32| {
        chrono::DateTime::parse_from_rfc3339(&format!("2026-01-02T03:04:{second:02}Z"))
            .unwrap()
            .with_timezone(&chrono::Utc)
    };
    let timed = |ev: Ev, second: u32| {
        let mut event = ev.0;
        event.created_at = time(second);
        event
    };
    let mut timeline = Timeline::new();
    timeline.apply_all([
        timed(at(1, EventKind::RunStarted).run(1), 1),
        timed(at(2, EventKind::Text).run(1).block(1).message(1).append("a"), 2),
        timed(at(3, EventKind::Text).run(1).block(1).message(1).append("b"), 5),
        timed(at(4, EventKind::RunCompleted).run(1), 9),
    ]);
    let run = timeline.run(run(1)).unwrap();
    assert_eq!((run.started_at, run.ended_at), (Some(time(1)), Some(time(9))));
    let block = timeline.block(block(1)).unwrap();
    assert_eq!((block.first_at, block.last_at), (Some(time(2)), Some(time(5))));
}
