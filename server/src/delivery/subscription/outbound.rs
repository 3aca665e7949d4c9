//! What a subscription hands its connection: events (as stored JSON, or as values once merged)
//! or a control message, and the native frame each becomes.

use std::sync::Arc;

use app::protocol::ServerMessage;
use uuid::Uuid;

use crate::store::{EventJson, JsonPage};

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
    /// A catch-up page read from the store as one text, its room at the front kept for the
    /// frame's head ([`EVENTS_FRAME_HEAD_BYTES`]): the frame is the page's own buffer.
    Page {
        agent_id: Uuid,
        page: JsonPage,
    },
    /// Events as values, for consumers in this process (the Letta mapping): see [`Form`].
    Values {
        agent_id: Uuid,
        events: Vec<app::AgentEvent>,
    },
}

impl Outbound {
    /// The JSON events of an `Events` message (none for anything else).
    pub fn events(&self) -> &[EventJson] {
        match self {
            Outbound::Events { events, from, .. } => &events[*from..],
            Outbound::Message(_) | Outbound::Page { .. } | Outbound::Values { .. } => &[],
        }
    }

    /// Each event this carries as JSON, with its seq (none for a message or for values).
    pub fn event_texts(&self) -> Vec<(u64, &str)> {
        match self {
            Outbound::Page { page, .. } => page.events().collect(),
            _ => self.events().iter().map(|event| (event.seq, &*event.json)).collect(),
        }
    }

    /// How many events this carries, and the seq of the last.
    pub(super) fn count_and_last_seq(&self) -> (usize, Option<u64>) {
        match self {
            Outbound::Values { events, .. } => (events.len(), events.last().map(|event| event.seq)),
            Outbound::Page { page, .. } => (page.len(), page.last_seq()),
            _ => (self.events().len(), self.events().last().map(|event| event.seq)),
        }
    }

    /// [`Outbound::frame`], taking a page's own buffer for its frame instead of copying it.
    pub fn into_frame(self) -> String {
        match self {
            Outbound::Page { agent_id, page } => {
                page.into_framed(&events_frame_head(agent_id, 0), EVENTS_FRAME_TAIL)
            }
            other => other.frame(),
        }
    }

    /// The WebSocket frame: the `ServerMessage` this is, as JSON text.
    pub fn frame(&self) -> String {
        match self {
            Outbound::Message(message) => {
                serde_json::to_string(message).expect("server messages serialize")
            }
            Outbound::Events { agent_id, .. } => events_frame(*agent_id, self.events()),
            Outbound::Page { agent_id, page } => {
                let rest = page.joined().len() + EVENTS_FRAME_TAIL.len();
                let mut frame = events_frame_head(*agent_id, rest);
                frame.push_str(page.joined());
                frame.push_str(EVENTS_FRAME_TAIL);
                frame
            }
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

/// An events frame's text up to its agent's id, and from it to the events array.
const EVENTS_FRAME_HEAD_START: &str = r#"{"type":"events","agent_id":""#;
const EVENTS_FRAME_HEAD_END: &str = r#"","events":"#;
/// The bytes of an events frame before its first event: `{"type":"events","agent_id":"…",
/// "events":[`. A catch-up page is read with this much room at its front.
pub const EVENTS_FRAME_HEAD_BYTES: usize =
    EVENTS_FRAME_HEAD_START.len() + UUID_TEXT_BYTES + EVENTS_FRAME_HEAD_END.len() + 1;
const UUID_TEXT_BYTES: usize = 36;
/// What follows the last event of an events frame.
const EVENTS_FRAME_TAIL: &str = "]}";

/// An events frame's text up to its first event ([`EVENTS_FRAME_HEAD_BYTES`] long), in a string
/// with room for `then` more bytes (the rest of the frame, when it is written into it).
fn events_frame_head(agent_id: Uuid, then: usize) -> String {
    let mut head = String::with_capacity(EVENTS_FRAME_HEAD_BYTES + then);
    head.push_str(EVENTS_FRAME_HEAD_START);
    head.push_str(agent_id.hyphenated().encode_lower(&mut Uuid::encode_buffer()));
    head.push_str(EVENTS_FRAME_HEAD_END);
    head.push('[');
    head
}

/// The text of `ServerMessage::Events { agent_id, events }`, as serde writes it, from events
/// that are JSON already.
pub fn events_frame(agent_id: Uuid, events: &[EventJson]) -> String {
    // The frame is the head, then the array in place of the head's `[`, then `}`.
    let mut frame = events_frame_head(agent_id, EventJson::array_len(events));
    // The head's `[` opens the array `write_array` writes whole.
    frame.pop();
    EventJson::write_array(events, &mut frame);
    frame.push('}');
    frame
}

impl From<ServerMessage> for Outbound {
    fn from(message: ServerMessage) -> Outbound {
        Outbound::Message(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::EventDraft;
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
        let message = ServerMessage::Events { agent_id, events: events.clone() };
        assert_eq!(events_frame(agent_id, &json), serde_json::to_string(&message).unwrap());
        let empty = ServerMessage::Events { agent_id, events: Vec::new() };
        assert_eq!(events_frame(agent_id, &[]), serde_json::to_string(&empty).unwrap());
        // A page: framed in its own room, or copied when the room does not fit the head.
        for room in [EVENTS_FRAME_HEAD_BYTES, 0, EVENTS_FRAME_HEAD_BYTES + 1] {
            let page = |json: &[EventJson]| Outbound::Page {
                agent_id,
                page: JsonPage::from_events(room, json),
            };
            let text = serde_json::to_string(&message).unwrap();
            assert_eq!(page(&json).frame(), text, "room {room}");
            assert_eq!(page(&json).into_frame(), text, "room {room}");
            assert_eq!(page(&[]).into_frame(), serde_json::to_string(&empty).unwrap());
            assert_eq!(page(&json).count_and_last_seq(), (3, Some(3)));
        }
        let values = Outbound::Values { agent_id, events };
        assert_eq!(values.frame(), serde_json::to_string(&message).unwrap());
    }
}
