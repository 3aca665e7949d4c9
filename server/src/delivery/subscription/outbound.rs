//! What a subscription hands its connection: events (as stored JSON, or as values once merged)
//! or a control message, and the native frame each becomes.

use std::sync::Arc;

use app::protocol::ServerMessage;
use uuid::Uuid;

use crate::store::EventJson;

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
    pub(super) fn count_and_last_seq(&self) -> (usize, Option<u64>) {
        match self {
            Outbound::Values { events, .. } => (events.len(), events.last().map(|event| event.seq)),
            _ => (self.events().len(), self.events().last().map(|event| event.seq)),
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

/// The text of `ServerMessage::Events { agent_id, events }`, as serde writes it, from events
/// that are JSON already.
pub fn events_frame(agent_id: Uuid, events: &[EventJson]) -> String {
    const HEAD: &str = r#"{"type":"events","agent_id":""#;
    const MIDDLE: &str = r#"","events":"#;
    let mut frame =
        String::with_capacity(HEAD.len() + 36 + MIDDLE.len() + EventJson::array_len(events) + 1);
    frame.push_str(HEAD);
    frame.push_str(agent_id.hyphenated().encode_lower(&mut Uuid::encode_buffer()));
    frame.push_str(MIDDLE);
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
        let values = Outbound::Values { agent_id, events };
        assert_eq!(values.frame(), serde_json::to_string(&message).unwrap());
    }
}
