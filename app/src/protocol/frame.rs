//! A `GET /v1/ws` frame as a reader of the log takes it: the kind first, then only that kind's
//! fields. Pure.
//!
//! [`ServerMessage`](super::ServerMessage) is tagged inside the object (`{"type": "events", …}`),
//! and serde reads such an enum by buffering the whole object into a generic tree first (the tag
//! may come last), then reading the variant from the tree: every event of a catch-up is built
//! twice, and every event type is compiled twice into the browser's bundle. Here the tag is read
//! first — at once when it leads the object, as the server writes it, else by skimming the
//! object — and the frame is read again straight into the one shape it names.

use serde::Deserialize;

use crate::event::AgentEvent;

/// What a reader of the log acts on; the other kinds it may ignore.
#[derive(Clone, Debug, PartialEq)]
pub enum LogFrame {
    /// The subscription is in place; the log's head then was `head_seq`.
    Subscribed { head_seq: u64 },
    /// Consecutive events of one agent, in seq order.
    Events(Vec<AgentEvent>),
    /// The server refused something; `message` says what.
    Error { code: String, message: String },
    /// Any other kind (`lagged`, `pong`, `cancel_requested`, …), by its tag.
    Other(String),
}

#[derive(Deserialize)]
struct Tag {
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct Subscribed {
    head_seq: u64,
}

#[derive(Deserialize)]
struct Events {
    events: Vec<AgentEvent>,
}

#[derive(Deserialize)]
struct Error {
    code: String,
    message: String,
}

/// The frame's kind: read straight off `{"type":"…"` (the server's order), else from the whole
/// object.
fn kind(text: &str) -> Result<String, serde_json::Error> {
    let leading = text
        .strip_prefix(r#"{"type":""#)
        .and_then(|rest| rest.split_once('"'))
        .map(|(kind, _)| kind)
        .filter(|kind| !kind.contains('\\'));
    match leading {
        Some(kind) => Ok(kind.to_owned()),
        None => crate::json::read::<Tag>(text).map(|tag| tag.kind),
    }
}

impl LogFrame {
    /// Reads one text frame; an error says what was wrong with it (not JSON, no `type`, or a
    /// kind without the fields it needs).
    pub fn parse(text: &str) -> Result<LogFrame, serde_json::Error> {
        let kind = kind(text)?;
        Ok(match kind.as_str() {
            "subscribed" => {
                let frame: Subscribed = crate::json::read(text)?;
                LogFrame::Subscribed { head_seq: frame.head_seq }
            }
            "events" => LogFrame::Events(crate::json::read::<Events>(text)?.events),
            "error" => {
                let frame: Error = crate::json::read(text)?;
                LogFrame::Error { code: frame.code, message: frame.message }
            }
            _ => {
                // The same rule as for the kinds read: the frame is one JSON object.
                crate::json::read::<serde::de::IgnoredAny>(text)?;
                LogFrame::Other(kind)
            }
        })
    }
}

#[cfg(test)]
mod tests;
