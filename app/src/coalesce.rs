//! Coalescing token deltas: consecutive string appends to one message, merged into one event.
//!
//! A streamed reply is mostly `text`/`thinking` events that each append a few characters to one
//! message, and each carries ~400 bytes of ids and times around those characters. A subscriber
//! that cannot keep up (a phone on a poor link, a tab that was asleep) does not need every one of
//! them separately: it needs the merged text and its cursor. When it asks for it, the server
//! merges what is waiting for it into one event per run of appends and delivers that.
//!
//! The merged event keeps the seqs honest: it is the *last* event of the run (its `id`, `seq`,
//! `raw`, `metadata`, `created_at`) with the run's concatenated text as `delta` and
//! `coalesced_from` = the run's first seq. A client that folds it ([`crate::timeline`]) ends where
//! folding each event would have ended, and resumes from `seq` as always. Only events that are
//! safe to merge are merged: same kind, run, thread, block and message, the same `delta_path`,
//! `append` with a string delta, and consecutive seqs. Appending strings is associative, so the
//! merged append changes the message exactly as the appends one by one would.

use std::ops::Range;

use serde_json::Value;

use crate::event::{AgentEvent, DeltaAction};

/// True when `event` is a string append to a message, which is what may be merged.
fn is_string_append(event: &AgentEvent) -> bool {
    event.message_id.is_some()
        && event.delta_action == Some(DeltaAction::Append)
        && matches!(event.delta, Some(Value::String(_)))
}

/// True when `next` may be merged onto `previous` (which is the end of a run being merged).
pub fn mergeable(previous: &AgentEvent, next: &AgentEvent) -> bool {
    is_string_append(previous)
        && is_string_append(next)
        && next.first_seq() == previous.seq + 1
        && next.agent_id == previous.agent_id
        && next.place() == previous.place()
}

/// The runs of `events` (in seq order) that merge: index ranges covering `events` in order, each
/// of one event or of several mergeable consecutive ones.
pub fn runs(events: &[AgentEvent]) -> Vec<Range<usize>> {
    runs_by(events, mergeable)
}

/// [`runs`] over any view of events that can tell whether one merges onto the one before (the
/// server reads only the merge key out of events that are JSON already).
pub fn runs_by<T>(items: &[T], mergeable: impl Fn(&T, &T) -> bool) -> Vec<Range<usize>> {
    let mut runs = Vec::new();
    let mut start = 0;
    for index in 1..=items.len() {
        if index == items.len() || !mergeable(&items[index - 1], &items[index]) {
            runs.push(start..index);
            start = index;
        }
    }
    runs
}

/// One event standing for all of `run` (a run as [`runs`] finds them): the last event, with the
/// concatenated text and `coalesced_from` = the first event's first seq.
pub fn merge(run: &[AgentEvent]) -> AgentEvent {
    let (first, last) = match run {
        [] => panic!("merge needs at least one event"),
        [only] => return only.clone(),
        [first, .., last] => (first, last),
    };
    let mut text = String::with_capacity(
        run.iter()
            .map(|event| event.delta.as_ref().and_then(Value::as_str).map_or(0, str::len))
            .sum(),
    );
    for event in run {
        if let Some(Value::String(piece)) = &event.delta {
            text.push_str(piece);
        }
    }
    merged(last.clone(), first.first_seq(), text)
}

/// The event standing for seqs `first_seq..=last.seq`: `last` with the run's joined text.
pub fn merged(last: AgentEvent, first_seq: u64, text: String) -> AgentEvent {
    AgentEvent { coalesced_from: Some(first_seq), delta: Some(Value::String(text)), ..last }
}

/// `events` (consecutive, in seq order) with every run of mergeable appends merged into one.
pub fn coalesce(events: &[AgentEvent]) -> Vec<AgentEvent> {
    runs(events).into_iter().map(|run| merge(&events[run])).collect()
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};
    use serde_json::json;
    use uuid::Uuid;

    use super::*;
    use crate::event::EventKind;

    fn append(seq: u64, message: u128, text: &str) -> AgentEvent {
        AgentEvent {
            run_id: Some(Uuid::from_u128(2)),
            block_id: Some(Uuid::from_u128(3)),
            message_id: Some(Uuid::from_u128(message)),
            delta: Some(json!(text)),
            delta_path: Some("text".into()),
            delta_action: Some(DeltaAction::Append),
            raw: Some(json!({ "n": seq })),
            metadata: json!({}),
            created_at: DateTime::<Utc>::from_timestamp(1_700_000_000 + seq as i64, 0).unwrap(),
            ..AgentEvent::bare(
                Uuid::from_u128(0x1000 + seq as u128),
                Uuid::from_u128(1),
                seq,
                EventKind::Text,
                Value::Null,
            )
        }
    }

    #[test]
    fn appends_to_one_message_merge_into_the_last_event() {
        let events: Vec<_> = [(1, "Hel"), (2, "lo, "), (3, "world")]
            .into_iter()
            .map(|(seq, text)| append(seq, 9, text))
            .collect();
        let merged = coalesce(&events);
        assert_eq!(merged.len(), 1);
        let merged = &merged[0];
        assert_eq!(merged.delta, Some(json!("Hello, world")));
        assert_eq!(merged.coalesced_from, Some(1));
        assert_eq!((merged.seq, merged.first_seq()), (3, 1));
        // The last event's identity, raw event and time.
        assert_eq!(merged.id, events[2].id);
        assert_eq!(merged.raw, events[2].raw);
        assert_eq!(merged.created_at, events[2].created_at);
        // A merged event merges on: its range extends.
        let more = coalesce(&[merged.clone(), append(4, 9, "!")]);
        assert_eq!(more.len(), 1);
        assert_eq!((more[0].coalesced_from, more[0].seq), (Some(1), 4));
        assert_eq!(more[0].delta, Some(json!("Hello, world!")));
    }

    #[test]
    fn only_consecutive_string_appends_to_the_same_message_and_path_merge() {
        let mut other_path = append(3, 9, "x");
        other_path.delta_path = Some("title".into());
        let mut replace = append(5, 9, "y");
        replace.delta_action = Some(DeltaAction::Replace);
        let mut not_a_string = append(7, 9, "");
        not_a_string.delta = Some(json!({"a": 1}));
        let mut thinking = append(9, 9, "t");
        thinking.kind = EventKind::Thinking;
        let mut no_message = append(11, 9, "n");
        no_message.message_id = None;
        let events = vec![
            append(1, 9, "a"),
            append(2, 9, "b"),
            other_path,
            append(4, 9, "c"),
            replace,
            append(6, 9, "d"),
            not_a_string,
            append(8, 9, "e"),
            thinking,
            append(10, 8, "other message"),
            no_message,
            append(12, 9, "f"),
            // A hole (seq 13 is not here): no merge across it.
            append(14, 9, "g"),
            append(15, 9, "h"),
        ];
        let merged = coalesce(&events);
        let shape: Vec<(u64, u64)> =
            merged.iter().map(|event| (event.first_seq(), event.seq)).collect();
        assert_eq!(
            shape,
            vec![
                (1, 2),
                (3, 3),
                (4, 4),
                (5, 5),
                (6, 6),
                (7, 7),
                (8, 8),
                (9, 9),
                (10, 10),
                (11, 11),
                (12, 12),
                (14, 15)
            ]
        );
        assert_eq!(merged[0].delta, Some(json!("ab")));
        assert_eq!(merged.last().unwrap().delta, Some(json!("gh")));
        assert!(merged[1..11].iter().all(|event| event.coalesced_from.is_none()));
    }

    #[test]
    fn a_merged_event_round_trips_through_json() {
        let merged = merge(&[append(4, 9, "a"), append(5, 9, "b")]);
        let text = serde_json::to_string(&merged).unwrap();
        assert!(text.contains(r#""seq":5,"coalesced_from":4"#), "{text}");
        let back: AgentEvent = serde_json::from_str(&text).unwrap();
        assert_eq!(back, merged);
    }
}
