//! One subscriber following one agent's log: catch-up from the store, then live from the hub,
//! with no gap and no duplicate at the seam, and recovery from the store after a lag.
//!
//! The rule on every live batch (as in centrifuge's recovery): events at or below the last
//! delivered seq are already seen and skipped; a first seq beyond `last + 1` is a gap, filled from
//! the store before the batch is delivered. Because the hub receiver exists before the store is
//! first read, every event committed after that moment is either in the read or in the receiver.

use std::sync::Arc;

use app::protocol::ServerMessage;
use tokio::sync::{broadcast, mpsc};
use uuid::Uuid;

use crate::delivery::hub::Hub;
use crate::store::{EventJson, Store, StoreError};

/// What a subscription hands its connection to send.
#[derive(Debug)]
pub enum Outbound {
    Message(ServerMessage),
    /// `events[from..]`, consecutive events of one agent, already JSON: the frame is
    /// `ServerMessage::Events` written around them (see [`events_frame`]). Live events are
    /// shared with the room's other subscribers; catch-up pages come from the store as JSON.
    Events {
        agent_id: Uuid,
        events: Arc<[EventJson]>,
        from: usize,
        /// The subscriber asked for runs of appends to be merged when they wait together
        /// (see [`coalesce_waiting`]).
        coalesce: bool,
    },
    /// Events as values, for consumers in this process (the Letta mapping): see [`Form`].
    Values {
        agent_id: Uuid,
        events: Vec<app::AgentEvent>,
    },
}

impl Outbound {
    /// The JSON events this carries (none for a message, or for events as values).
    pub fn events(&self) -> &[EventJson] {
        match self {
            Outbound::Events { events, from, .. } => &events[*from..],
            Outbound::Message(_) | Outbound::Values { .. } => &[],
        }
    }

    /// How many events this carries, and the seq of the last.
    fn count_and_last_seq(&self) -> (usize, Option<u64>) {
        match self {
            Outbound::Values { events, .. } => (events.len(), events.last().map(|event| event.seq)),
            _ => (
                self.events().len(),
                self.events().last().map(|event| event.seq),
            ),
        }
    }

    /// The WebSocket frame: the `ServerMessage` this is, as JSON text.
    pub fn frame(&self) -> String {
        match self {
            Outbound::Message(message) => {
                serde_json::to_string(message).expect("server messages serialize")
            }
            Outbound::Events { agent_id, .. } => events_frame(*agent_id, self.events()),
            Outbound::Values { agent_id, events } => {
                serde_json::to_string(&ServerMessage::Events {
                    agent_id: *agent_id,
                    events: events.clone(),
                })
                .expect("server messages serialize")
            }
        }
    }
}

/// How a subscription hands over events: as JSON for sockets (nothing parsed or printed on the
/// way; `coalesce` when the client asked for merged appends), or as values for code in this
/// process that reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    Json { coalesce: bool },
    Values,
}

/// Messages a socket's writer takes from its queue at once when they are waiting: a slow socket's
/// backlog, written (and, where asked, coalesced) together. The queue itself holds
/// `subscriber_outbound_frames_max` (64 by default); this bounds one drain whatever that is set to.
pub const OUTBOUND_DRAIN_MESSAGES_MAX: usize = 256;
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
        let Outbound::Events {
            agent_id,
            coalesce: true,
            ..
        } = &message
        else {
            flush(&mut group, &mut group_events, &mut ready);
            ready.push(message);
            continue;
        };
        let count = message.events().len();
        let joins = match group.first() {
            Some(Outbound::Events {
                agent_id: group_agent,
                ..
            }) => group_agent == agent_id && group_events + count <= COALESCED_FRAME_EVENTS_MAX,
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
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(MergeDelta::Other)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// The text of `ServerMessage::Events { agent_id, events }`, as serde writes it, from events
/// that are JSON already.
pub fn events_frame(agent_id: Uuid, events: &[EventJson]) -> String {
    const HEAD: &str = r#"{"type":"events","agent_id":""#;
    const MIDDLE: &str = r#"","events":"#;
    let mut frame =
        String::with_capacity(HEAD.len() + 36 + MIDDLE.len() + EventJson::array_len(events) + 1);
    frame.push_str(HEAD);
    frame.push_str(
        agent_id
            .hyphenated()
            .encode_lower(&mut Uuid::encode_buffer()),
    );
    frame.push_str(MIDDLE);
    EventJson::write_array(events, &mut frame);
    frame.push('}');
    frame
}

/// Events read from the store per page (and per frame) while catching up, at most. Bounds the
/// memory one catch-up holds and the size of one frame.
pub const CATCHUP_PAGE_EVENTS: u32 = 500;
/// The first page of a catch-up is this small, so the first events of a long gap reach the
/// client at once; each page after it is twice as large, up to [`CATCHUP_PAGE_EVENTS`].
pub const CATCHUP_FIRST_PAGE_EVENTS: u32 = 32;

/// Why a subscription ended other than by the subscriber leaving.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error("agent {0} does not exist")]
    UnknownAgent(Uuid),
    #[error("since={since} is beyond the newest event of agent {agent_id} (seq {head_seq})")]
    SinceBeyondHead {
        agent_id: Uuid,
        since: u64,
        head_seq: u64,
    },
    #[error("agent {0} was deleted")]
    AgentDeleted(Uuid),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The connection is gone; nothing to report to anyone.
    #[error("the subscriber went away")]
    SubscriberGone,
}

impl FollowError {
    /// The stable code a client sees.
    pub fn code(&self) -> &'static str {
        match self {
            FollowError::UnknownAgent(_) => "unknown_agent",
            FollowError::SinceBeyondHead { .. } => "since_beyond_head",
            FollowError::AgentDeleted(_) => "agent_deleted",
            FollowError::Store(_) => "internal",
            FollowError::SubscriberGone => "gone",
        }
    }
}

/// Delivers every event of `agent_id` with `seq > since` to `out`, exactly once and in order,
/// until the subscriber goes away or the agent is deleted. `out` is the subscriber's bounded
/// outbound queue: when it is full this task waits, and the hub makes it lag instead of waiting
/// on it.
pub async fn follow(
    store: &dyn Store,
    hub: &Hub,
    agent_id: Uuid,
    since: u64,
    form: Form,
    out: &mpsc::Sender<Outbound>,
) -> Result<(), FollowError> {
    let mut live = hub.subscribe(agent_id);
    let result = follow_with(store, agent_id, since, form, out, &mut live).await;
    drop(live);
    hub.release(agent_id);
    result
}

async fn follow_with(
    store: &dyn Store,
    agent_id: Uuid,
    since: u64,
    form: Form,
    out: &mpsc::Sender<Outbound>,
    live: &mut broadcast::Receiver<crate::delivery::hub::EventBatch>,
) -> Result<(), FollowError> {
    let head_seq = store
        .head_seq(agent_id)
        .await?
        .ok_or(FollowError::UnknownAgent(agent_id))?;
    if since > head_seq {
        return Err(FollowError::SinceBeyondHead {
            agent_id,
            since,
            head_seq,
        });
    }
    send(
        out,
        ServerMessage::Subscribed {
            agent_id,
            since,
            head_seq,
        },
    )
    .await?;
    let mut last_delivered = catch_up(store, agent_id, since, None, form, out).await?;
    loop {
        match live.recv().await {
            Ok(batch) => {
                let Some(first) = batch.first() else { continue };
                if first.seq > last_delivered + 1 {
                    last_delivered = catch_up(
                        store,
                        agent_id,
                        last_delivered,
                        Some(first.seq - 1),
                        form,
                        out,
                    )
                    .await?;
                }
                // Seqs go up within a batch: what is fresh is a suffix of it.
                let from = batch.partition_point(|event| event.seq <= last_delivered);
                if let Some(newest) = batch.last().filter(|_| from < batch.len()) {
                    debug_assert_eq!(batch[from].seq, last_delivered + 1);
                    last_delivered = newest.seq;
                    let outbound = match form {
                        Form::Json { coalesce } => Outbound::Events {
                            agent_id,
                            events: batch.json(),
                            from,
                            coalesce,
                        },
                        Form::Values => Outbound::Values {
                            agent_id,
                            events: batch[from..].to_vec(),
                        },
                    };
                    send(out, outbound).await?;
                }
            }
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                send(
                    out,
                    ServerMessage::Lagged {
                        agent_id,
                        last_delivered_seq: last_delivered,
                        missed_live_batches: missed,
                    },
                )
                .await?;
                last_delivered = catch_up(store, agent_id, last_delivered, None, form, out).await?;
            }
            Err(broadcast::error::RecvError::Closed) => {
                return Err(FollowError::AgentDeleted(agent_id));
            }
        }
    }
}

/// Pages a catch-up reads at once. Seqs have no holes, so the cursor of the page after a full
/// page is known before that page arrives: the next read runs beside the one being delivered
/// (on another core, over another read connection) instead of after it.
pub const CATCHUP_READS_AT_ONCE: usize = 2;

/// Sends events after `after` from the store, page by page, up to `until` (inclusive) or to the
/// end of the log. Returns the last seq delivered.
///
/// Up to [`CATCHUP_READS_AT_ONCE`] pages are read at once and delivered in order. A page read
/// ahead assumed every page before it was full; when one is not (the end of the log), what was
/// read ahead of it is dropped unread, and reading goes on (or ends) from what was delivered.
async fn catch_up(
    store: &dyn Store,
    agent_id: Uuid,
    after: u64,
    until: Option<u64>,
    form: Form,
    out: &mpsc::Sender<Outbound>,
) -> Result<u64, FollowError> {
    let mut last_delivered = after;
    // The next page to ask for: its cursor and size (growing from the first page's).
    let mut cursor = after;
    let mut page_events = CATCHUP_FIRST_PAGE_EVENTS;
    let mut reads = futures::stream::FuturesOrdered::new();
    loop {
        while reads.len() < CATCHUP_READS_AT_ONCE {
            let wanted = match until {
                Some(until) if until <= cursor => break,
                Some(until) => (until - cursor).min(page_events as u64) as u32,
                None => page_events,
            };
            page_events = (page_events * 2).min(CATCHUP_PAGE_EVENTS);
            reads.push_back(async move {
                (
                    wanted,
                    read_retrying(store, agent_id, cursor, wanted, form).await,
                )
            });
            cursor += wanted as u64;
        }
        let Some((wanted, page)) = futures::StreamExt::next(&mut reads).await else {
            return Ok(last_delivered);
        };
        let page = page?;
        let (count, newest) = page.count_and_last_seq();
        let Some(newest) = newest else {
            return match until {
                // The hub showed us a later seq, so the store must have everything before it.
                Some(until) => Err(FollowError::Store(StoreError::Corrupt(format!(
                    "agent {agent_id}: seqs {} to {until} are missing from the store",
                    last_delivered + 1
                )))),
                None => Ok(last_delivered),
            };
        };
        let full_page = count as u32 == wanted;
        last_delivered = newest;
        send(out, page).await?;
        if !full_page {
            if until.is_none() {
                return Ok(last_delivered);
            }
            // Reads ahead started past seqs this page did not have: start again from here.
            reads = futures::stream::FuturesOrdered::new();
            cursor = last_delivered;
        }
    }
}

/// Times a catch-up read is tried again when the database says trying again may work (it is
/// restarting, a connection broke) before the subscription ends with an error.
pub const CATCHUP_READ_RETRIES_MAX: u32 = 10;
/// The first of those waits; each further one doubles, up to [`CATCHUP_RETRY_DELAY_MAX_MS`]
/// (about 5 s in all: a database restart, not an outage).
pub const CATCHUP_RETRY_DELAY_INITIAL_MS: u64 = 20;
pub const CATCHUP_RETRY_DELAY_MAX_MS: u64 = 1_000;

/// A page of the log, read again (bounded) while the error is transient: a subscriber mid-stream
/// rides out a database restart instead of being dropped.
async fn read_retrying(
    store: &dyn Store,
    agent_id: Uuid,
    after: u64,
    limit: u32,
    form: Form,
) -> Result<Outbound, StoreError> {
    let mut attempt = 0;
    loop {
        let read =
            match form {
                Form::Json { coalesce } => store
                    .read_events_json(agent_id, after, limit)
                    .await
                    .map(|events| Outbound::Events {
                        agent_id,
                        events: Arc::from(events),
                        from: 0,
                        coalesce,
                    }),
                Form::Values => store
                    .read_events(agent_id, after, limit)
                    .await
                    .map(|events| Outbound::Values { agent_id, events }),
            };
        match read {
            Err(error) if error.is_transient() && attempt < CATCHUP_READ_RETRIES_MAX => {
                tracing::warn!(%agent_id, %error, attempt, "catch-up read failed; trying again");
                tokio::time::sleep(crate::backoff(
                    CATCHUP_RETRY_DELAY_INITIAL_MS,
                    CATCHUP_RETRY_DELAY_MAX_MS,
                    attempt,
                ))
                .await;
                attempt += 1;
            }
            outcome => return outcome,
        }
    }
}

impl From<ServerMessage> for Outbound {
    fn from(message: ServerMessage) -> Outbound {
        Outbound::Message(message)
    }
}

async fn send(
    out: &mpsc::Sender<Outbound>,
    outbound: impl Into<Outbound>,
) -> Result<(), FollowError> {
    out.send(outbound.into())
        .await
        .map_err(|_| FollowError::SubscriberGone)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::delivery::writer::Writer;
    use crate::store::sqlite::SqliteStore;
    use crate::store::{EventDraft, NewAgent};
    use app::EventKind;

    /// A WebSocket frame written around JSON events is the frame serde makes of the message.
    #[test]
    fn an_events_frame_is_the_message_serialized() {
        let agent_id = Uuid::now_v7();
        let events: Vec<app::AgentEvent> = (1..=3)
            .map(|seq| {
                let mut draft = EventDraft::new(EventKind::Text);
                draft.delta = Some(serde_json::Value::String(format!("token {seq}")));
                draft.into_event(agent_id, seq)
            })
            .collect();
        let json: Vec<EventJson> = events.iter().map(EventJson::of).collect();
        let message = ServerMessage::Events {
            agent_id,
            events: events.clone(),
        };
        assert_eq!(
            events_frame(agent_id, &json),
            serde_json::to_string(&message).unwrap()
        );
        let empty = ServerMessage::Events {
            agent_id,
            events: Vec::new(),
        };
        assert_eq!(
            events_frame(agent_id, &[]),
            serde_json::to_string(&empty).unwrap()
        );
        let values = Outbound::Values { agent_id, events };
        assert_eq!(values.frame(), serde_json::to_string(&message).unwrap());
    }

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
        let (messages, blocks) = (
            [Uuid::now_v7(), Uuid::now_v7()],
            [Uuid::now_v7(), Uuid::now_v7()],
        );
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
                kind = if kind == EventKind::Text {
                    EventKind::Thinking
                } else {
                    EventKind::Text
                };
            }
            if next(12) == 0 {
                message = if next(6) == 0 {
                    None
                } else {
                    Some(messages[next(2) as usize])
                };
            }
            if next(12) == 0 {
                block = blocks[next(2) as usize];
            }
            if next(12) == 0 {
                path = if path == "text" {
                    "title.\"x\""
                } else {
                    "text"
                };
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
        assert!(matches!(
            ready[3],
            Outbound::Message(ServerMessage::Pong { .. })
        ));

        // A backlog larger than one frame may hold is cut into frames of at most that many.
        let page = CATCHUP_PAGE_EVENTS as u64;
        let pages = (0..10)
            .map(|n| events(a, n * page + 1..=(n + 1) * page, true))
            .collect();
        let ready = coalesce_waiting(pages);
        let per_frame = COALESCED_FRAME_EVENTS_MAX as u64 / page;
        assert_eq!(ready.len() as u64, 10_u64.div_ceil(per_frame));
        assert_eq!(shape(&ready)[0], vec![(1, per_frame * page)]);
        assert_eq!(shape(&ready).last().unwrap().last().unwrap().1, 10 * page);
    }

    /// A subscriber that stops reading while the agent writes far more batches than its room
    /// holds: it must be told it lagged, and still receive every event once, in order.
    #[tokio::test]
    async fn a_stalled_subscriber_is_told_and_loses_nothing() {
        let directory = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", directory.path().join("s.db").display());
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&url).await.unwrap());
        let hub = Arc::new(Hub::new(2));
        let writer = Writer::spawn(store.clone(), hub.clone());
        let agent = store.create_agent(NewAgent::default()).await.unwrap();
        writer
            .append(
                agent.id,
                (0..3).map(|_| EventDraft::new(EventKind::Text)).collect(),
            )
            .await
            .unwrap();

        // Capacity 1: the follower blocks on its second message until the test reads.
        let (out, mut inbox) = mpsc::channel(1);
        let follower = {
            let (store, hub) = (store.clone(), hub.clone());
            tokio::spawn(async move {
                follow(
                    store.as_ref(),
                    &hub,
                    agent.id,
                    1,
                    Form::Json { coalesce: false },
                    &out,
                )
                .await
            })
        };
        // Let it subscribe, then stall it while 50 separate commits happen.
        let subscribed = inbox.recv().await.unwrap();
        assert!(matches!(
            subscribed,
            Outbound::Message(ServerMessage::Subscribed {
                since: 1,
                head_seq: 3,
                ..
            })
        ));
        for _ in 0..50 {
            writer
                .append(agent.id, vec![EventDraft::new(EventKind::Text)])
                .await
                .unwrap();
        }

        let mut delivered = Vec::new();
        let mut lagged = false;
        while delivered.last().copied() != Some(53) {
            match tokio::time::timeout(Duration::from_secs(5), inbox.recv()).await {
                Ok(Some(events @ Outbound::Events { .. })) => {
                    delivered.extend(events.events().iter().map(|event| event.seq))
                }
                Ok(Some(Outbound::Message(ServerMessage::Lagged { .. }))) => lagged = true,
                other => panic!("unexpected {other:?} after {delivered:?}"),
            }
        }
        assert!(lagged, "the subscriber was never told it lagged");
        assert_eq!(delivered, (2..=53).collect::<Vec<u64>>());
        follower.abort();
    }
}
