//! Coalescing what waits for a slow subscriber: adjacent event messages of one agent whose
//! subscription asked for it become one, each run of appends to one message one merged event.
//! Pure; the JSON is read with a small visitor that looks only at what merging needs.

use std::sync::Arc;

use super::outbound::Outbound;
use crate::store::EventJson;

/// Events (as stored, before merging) that go into one coalesced frame at most: bounds the
/// frame and the work of parsing for it.
pub const COALESCED_FRAME_EVENTS_MAX: usize = 2_000;

/// What waits for one subscriber, ready to write, in the same order. Adjacent event messages of
/// one agent whose subscription asked to coalesce become one message (up to
/// [`COALESCED_FRAME_EVENTS_MAX`] events) in which each run of appends to one message is one
/// merged event ([`app::coalesce`]). A subscriber that keeps up has one message waiting at a time
/// and gets every event as it is; one that fell behind gets the backlog merged, with every seq
/// accounted for. Everything else passes unchanged.
pub fn coalesce_waiting(waiting: Vec<Outbound>) -> Vec<Outbound> {
    let mut ready: Vec<Outbound> = Vec::with_capacity(waiting.len());
    // Adjacent coalescing messages of one agent, not merged yet, and how many events they hold.
    let mut group: Vec<Outbound> = Vec::new();
    let mut group_events = 0;
    let flush = |group: &mut Vec<Outbound>, group_events: &mut usize, ready: &mut Vec<Outbound>| {
        *group_events = 0;
        merge_group(std::mem::take(group), ready);
    };
    for message in waiting {
        let Outbound::Events { agent_id, coalesce: true, .. } = &message else {
            flush(&mut group, &mut group_events, &mut ready);
            ready.push(message);
            continue;
        };
        let count = message.events().len();
        let joins = match group.first() {
            Some(Outbound::Events { agent_id: group_agent, .. }) => {
                group_agent == agent_id && group_events + count <= COALESCED_FRAME_EVENTS_MAX
            }
            _ => true,
        };
        if !joins {
            flush(&mut group, &mut group_events, &mut ready);
        }
        group_events += count;
        group.push(message);
    }
    flush(&mut group, &mut group_events, &mut ready);
    ready
}

/// Adds a group of adjacent coalescing event messages of one agent to `ready`: as one message
/// when some of their events merge, else as they are (shared, nothing copied).
fn merge_group(group: Vec<Outbound>, ready: &mut Vec<Outbound>) {
    let Some(&Outbound::Events { agent_id, .. }) = group.first() else {
        return;
    };
    let events: Vec<&EventJson> = group.iter().flat_map(|message| message.events()).collect();
    let merged = match coalesce_json(&events) {
        Ok(merged) => merged,
        Err(error) => {
            // Our own JSON always parses; should it not, send the events as they are.
            tracing::error!(%agent_id, %error, "cannot read events back to coalesce them");
            None
        }
    };
    match merged {
        Some(merged) => ready.push(Outbound::Events {
            agent_id,
            events: Arc::from(merged),
            from: 0,
            coalesce: true,
        }),
        None => ready.extend(group),
    }
}

/// Consecutive events with every run of appends merged ([`app::coalesce`]), from their JSON;
/// `None` when nothing merges. Only what merging needs is read out of each event (ids stay text,
/// they are only compared), and only the last event of each run of two or more is read whole;
/// events that merge with nothing keep the JSON they came with.
pub fn coalesce_json(events: &[&EventJson]) -> Result<Option<Vec<EventJson>>, serde_json::Error> {
    if events.len() < 2 {
        return Ok(None);
    }
    let keys = events
        .iter()
        .map(|event| serde_json::from_str::<MergeKey<'_>>(&event.json))
        .collect::<Result<Vec<_>, _>>()?;
    let runs = app::coalesce::runs_by(&keys, MergeKey::merges_onto);
    if runs.len() == events.len() {
        return Ok(None);
    }
    runs.into_iter()
        .map(|run| {
            if run.len() == 1 {
                return Ok(events[run.start].clone());
            }
            let last = serde_json::from_str::<app::AgentEvent>(&events[run.end - 1].json)?;
            let mut text = String::new();
            for key in &keys[run.clone()] {
                if let Some(MergeDelta::Text(piece)) = &key.delta {
                    text.push_str(piece);
                }
            }
            let first_seq = keys[run.start].first_seq();
            Ok(EventJson::of(&app::coalesce::merged(last, first_seq, text)))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// What [`app::coalesce::mergeable`] looks at, borrowed from an event's JSON.
#[derive(serde::Deserialize)]
struct MergeKey<'a> {
    seq: u64,
    #[serde(default)]
    coalesced_from: Option<u64>,
    #[serde(borrow)]
    agent_id: &'a str,
    #[serde(default, borrow)]
    run_id: Option<&'a str>,
    #[serde(default, borrow)]
    thread_id: Option<&'a str>,
    #[serde(default, borrow)]
    block_id: Option<&'a str>,
    #[serde(default, borrow)]
    message_id: Option<&'a str>,
    #[serde(borrow)]
    kind: &'a str,
    #[serde(default, borrow)]
    delta: Option<MergeDelta<'a>>,
    #[serde(default, borrow)]
    delta_path: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    delta_action: Option<&'a str>,
}

impl MergeKey<'_> {
    fn first_seq(&self) -> u64 {
        self.coalesced_from.unwrap_or(self.seq)
    }

    fn is_string_append(&self) -> bool {
        self.message_id.is_some()
            && self.delta_action == Some(app::DeltaAction::Append.as_str())
            && matches!(self.delta, Some(MergeDelta::Text(_)))
    }

    /// [`app::coalesce::mergeable`], on the key: the rules are the same (a test checks the two
    /// agree).
    fn merges_onto(previous: &MergeKey<'_>, next: &MergeKey<'_>) -> bool {
        previous.is_string_append()
            && next.is_string_append()
            && next.first_seq() == previous.seq + 1
            && next.agent_id == previous.agent_id
            && next.kind == previous.kind
            && next.message_id == previous.message_id
            && next.block_id == previous.block_id
            && next.run_id == previous.run_id
            && next.thread_id == previous.thread_id
            && next.delta_path == previous.delta_path
    }
}

/// A delta as merging sees it: text (borrowed unless it had escapes), or anything else.
enum MergeDelta<'a> {
    Text(std::borrow::Cow<'a, str>),
    Other,
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for MergeDelta<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = MergeDelta<'de>;

            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a delta")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(MergeDelta::Text(std::borrow::Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(MergeDelta::Text(std::borrow::Cow::Owned(text.to_owned())))
            }
            fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
                Ok(MergeDelta::Text(std::borrow::Cow::Owned(text)))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(MergeDelta::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(MergeDelta::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(MergeDelta::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(MergeDelta::Other)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(MergeDelta::Other)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(MergeDelta::Other)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                while map.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
                Ok(MergeDelta::Other)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::CATCHUP_PAGE_EVENTS;
    use crate::store::EventDraft;
    use app::protocol::ServerMessage;
    use app::EventKind;
    use uuid::Uuid;

    fn appends(
        agent_id: Uuid,
        message_id: Uuid,
        seqs: std::ops::RangeInclusive<u64>,
    ) -> Arc<[EventJson]> {
        seqs.map(|seq| {
            let mut draft = EventDraft::new(EventKind::Text);
            draft.message_id = Some(message_id);
            draft.delta = Some(serde_json::Value::String(format!("{seq} ")));
            draft.delta_path = Some("text".into());
            draft.delta_action = Some(app::DeltaAction::Append);
            EventJson::of(&draft.into_event(agent_id, seq))
        })
        .collect()
    }

    fn shape(messages: &[Outbound]) -> Vec<Vec<(u64, u64)>> {
        messages
            .iter()
            .map(|message| {
                message
                    .events()
                    .iter()
                    .map(|event| {
                        let event: app::AgentEvent = serde_json::from_str(&event.json).unwrap();
                        (event.first_seq(), event.seq)
                    })
                    .collect()
            })
            .collect()
    }

    /// The server merges events from their JSON by reading only a key out of each; the result
    /// must be what `app::coalesce` makes of the events themselves, whatever the events are.
    #[test]
    fn coalescing_json_agrees_with_coalescing_events() {
        let agent_id = Uuid::now_v7();
        let (messages, blocks) =
            ([Uuid::now_v7(), Uuid::now_v7()], [Uuid::now_v7(), Uuid::now_v7()]);
        let pieces = ["tok", " \"quoted\"\n", "ünï", "", "a\\b", "\u{1F600}"];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |below: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % below
        };
        let mut events: Vec<app::AgentEvent> = Vec::new();
        let mut seq = 0;
        // What the next event targets; it changes now and then, so runs form and break.
        let (mut kind, mut message, mut block, mut path) =
            (EventKind::Text, Some(messages[0]), blocks[0], "text");
        for _ in 0..600 {
            seq += if next(20) == 0 { 2 } else { 1 }; // now and then a hole
                                                      // Each changes on its own, so a run also breaks on one difference alone.
            if next(12) == 0 {
                kind = if kind == EventKind::Text { EventKind::Thinking } else { EventKind::Text };
            }
            if next(12) == 0 {
                message = if next(6) == 0 { None } else { Some(messages[next(2) as usize]) };
            }
            if next(12) == 0 {
                block = blocks[next(2) as usize];
            }
            if next(12) == 0 {
                path = if path == "text" { "title.\"x\"" } else { "text" };
            }
            let mut draft = EventDraft::new(kind);
            draft.message_id = message;
            draft.block_id = Some(block);
            draft.delta_path = Some(path.into());
            draft.delta_action = Some(match next(20) {
                0 => app::DeltaAction::Replace,
                1 => app::DeltaAction::Merge,
                _ => app::DeltaAction::Append,
            });
            draft.delta = Some(match next(24) {
                0 => serde_json::json!({"a": [1, {"b": null}]}),
                1 => serde_json::json!(7),
                2 => serde_json::json!([true, "x"]),
                _ => serde_json::Value::String(pieces[next(pieces.len() as u64) as usize].into()),
            });
            let mut event = draft.into_event(agent_id, seq);
            if next(15) == 0 {
                // An event merged already, standing for seqs before it too.
                let span = next(3) + 1;
                event.coalesced_from = Some(seq);
                seq += span;
                event.seq = seq;
            }
            events.push(event);
        }
        let json: Vec<EventJson> = events.iter().map(EventJson::of).collect();
        let json_refs: Vec<&EventJson> = json.iter().collect();
        let from_json: Vec<app::AgentEvent> = coalesce_json(&json_refs)
            .unwrap()
            .expect("the sample merges")
            .iter()
            .map(|event| serde_json::from_str(&event.json).unwrap())
            .collect();
        let from_events = app::coalesce::coalesce(&events);
        assert!(
            from_events.len() * 3 < events.len() * 2,
            "the sample hardly merges: {}",
            from_events.len()
        );
        assert_eq!(from_json, from_events);
    }

    /// What waits together is merged only for subscriptions that asked, only within one agent,
    /// in order, and never past the frame bound; other messages pass as they are, where they were.
    #[test]
    fn waiting_messages_merge_only_where_asked_and_keep_their_order() {
        let (a, b, message) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let events = |agent_id, seqs, coalesce| Outbound::Events {
            agent_id,
            events: appends(agent_id, message, seqs),
            from: 0,
            coalesce,
        };
        let pong = || Outbound::Message(ServerMessage::Pong { nonce: None });
        let ready = coalesce_waiting(vec![
            events(a, 1..=3, true),
            events(a, 4..=5, true),
            events(b, 1..=2, true),
            events(a, 6..=7, true),
            pong(),
            events(a, 8..=9, true),
            events(b, 3..=4, false),
        ]);
        assert_eq!(
            shape(&ready),
            vec![
                vec![(1, 5)],
                vec![(1, 2)],
                vec![(6, 7)],
                vec![],
                vec![(8, 9)],
                vec![(3, 3), (4, 4)],
            ]
        );
        let merged: app::AgentEvent = serde_json::from_str(&ready[0].events()[0].json).unwrap();
        assert_eq!(merged.delta, Some(serde_json::json!("1 2 3 4 5 ")));
        assert!(matches!(ready[3], Outbound::Message(ServerMessage::Pong { .. })));

        // A backlog larger than one frame may hold is cut into frames of at most that many.
        let page = CATCHUP_PAGE_EVENTS as u64;
        let pages = (0..10).map(|n| events(a, n * page + 1..=(n + 1) * page, true)).collect();
        let ready = coalesce_waiting(pages);
        let per_frame = COALESCED_FRAME_EVENTS_MAX as u64 / page;
        assert_eq!(ready.len() as u64, 10_u64.div_ceil(per_frame));
        assert_eq!(shape(&ready)[0], vec![(1, per_frame * page)]);
        assert_eq!(shape(&ready).last().unwrap().last().unwrap().1, 10 * page);
    }
}
