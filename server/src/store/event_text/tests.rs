//! The hand-written event text against serde's, on a table of events.

use super::*;
use chrono::TimeZone;
use serde_json::json;

fn event(seq: u64) -> AgentEvent {
    AgentEvent::bare(Uuid::now_v7(), Uuid::now_v7(), seq, EventKind::Text, Value::Null)
}

/// Every optional field alone and together, every kind, escapes, non-ASCII, nested values,
/// numbers, and times with and without fractions: the text is serde's, byte for byte.
#[test]
fn the_text_is_serdes_byte_for_byte() {
    let id = Uuid::now_v7();
    let mut cases: Vec<(&str, AgentEvent)> = vec![("bare", event(1))];
    let mut all = event(u64::MAX);
    all.coalesced_from = Some(3);
    all.run_id = Some(id);
    all.thread_id = Some(Uuid::nil());
    all.block_id = Some(Uuid::max());
    all.message_id = Some(id);
    all.delta = Some(json!("tok \"quoted\" \\ \n\t\u{1} é 🦀"));
    all.delta_path = Some("a.\"b\".c".into());
    all.delta_action = Some(DeltaAction::Merge);
    all.content = json!({"z": [1, -2.5, 1e300, null, true], "a": {"": "x"}, "u": u64::MAX});
    all.raw = Some(json!(["raw", {"k": "v"}]));
    all.metadata = json!({"model": "m", "ms": 12});
    cases.push(("every field", all.clone()));
    let mut coalesced = event(9);
    coalesced.coalesced_from = Some(5);
    coalesced.delta = Some(json!("merged"));
    coalesced.delta_action = Some(DeltaAction::Append);
    cases.push(("coalesced", coalesced));
    let mut path_only = event(2);
    path_only.delta_path = Some(String::new());
    path_only.delta_action = Some(DeltaAction::Replace);
    path_only.delta = Some(json!({"text": "whole"}));
    cases.push(("empty path", path_only));
    for (index, time) in [
        Utc.timestamp_opt(0, 0).unwrap(),
        Utc.timestamp_opt(1_764_000_000, 123_000_000).unwrap(),
        Utc.timestamp_opt(1_764_000_000, 1).unwrap(),
        Utc.timestamp_opt(1_764_000_000, 999_999_999).unwrap(),
        Utc.timestamp_opt(1_764_000_000, 123_456_000).unwrap(),
        Utc.timestamp_opt(-62_135_596_800, 0).unwrap(), // year 1
        Utc.timestamp_opt(253_402_300_799, 10_000_000).unwrap(), // 9999-12-31T23:59:59.010
        Utc.timestamp_opt(253_402_300_800, 0).unwrap(), // year 10000
        Utc.timestamp_opt(1_483_228_799, 1_500_000_000).unwrap(), // a leap second
    ]
    .into_iter()
    .enumerate()
    {
        let mut timed = event(index as u64 + 1);
        timed.created_at = time;
        cases.push(("time", timed));
    }
    for kind in EventKind::KNOWN.into_iter().chain([EventKind::Other]) {
        let mut of_kind = all.clone();
        of_kind.kind = kind;
        of_kind.content = json!("a string content");
        cases.push(("kind", of_kind));
    }
    for (name, event) in cases {
        let expected = serde_json::to_string(&event).unwrap();
        assert_eq!(event_text(&event), expected, "{name}");
        let written = crate::store::EventJson::of(&event);
        assert_eq!(&*written.json, expected, "{name}: EventJson::of");
        assert_eq!(written.seq, event.seq);
    }
}
