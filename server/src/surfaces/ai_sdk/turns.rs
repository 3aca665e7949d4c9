//! Which turn of a conversation a chat request names, for its branches: a submit whose message
//! id is an earlier user message's is an edit, and a regenerate answers a turn again — each on a
//! branch forked just before that turn's first run, so the turn as it was stays on its own line.
//! Pure: the folded log in, the fork point out.

use app::timeline::Timeline;
use app::EventKind;

use crate::surfaces::chat::client_message_id;

/// One user turn: where a branch that replaces it forks, and its user message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnAt {
    /// The seq before the turn's first run: the fork point.
    pub after_seq: u64,
    pub text: String,
    /// The client's id of its user message.
    pub otid: String,
    /// The conversation's newest turn.
    pub last: bool,
}

/// The user turns of the conversation, oldest first.
fn turns(timeline: &Timeline) -> Vec<TurnAt> {
    let users: Vec<_> =
        timeline.messages().iter().filter(|message| message.kind == EventKind::User).collect();
    let count = users.len();
    users
        .into_iter()
        .enumerate()
        .filter_map(|(index, message)| {
            let run = timeline.runs().iter().find(|run| Some(run.run_id) == message.run_id)?;
            Some(TurnAt {
                after_seq: run.first_seq.saturating_sub(1),
                text: message.text().to_owned(),
                otid: client_message_id(message),
                last: index + 1 == count,
            })
        })
        .collect()
}

/// The newest turn whose user message the client calls `otid`; else the newest turn.
pub fn turn_to_answer_again(timeline: &Timeline, otid: &str) -> Option<TurnAt> {
    let turns = turns(timeline);
    let named = turns.iter().rev().find(|turn| turn.otid == otid);
    named.or(turns.last()).cloned()
}

/// What a submit of user message `otid` saying `text` is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Submit {
    /// A new message, or a retry of the newest one as it was sent: the log's own line.
    Append,
    /// An earlier message sent again, or the newest one changed: a branch forked here.
    Edit { after_seq: u64 },
}

pub fn submit(timeline: &Timeline, otid: &str, text: &str) -> Submit {
    let turns = turns(timeline);
    match turns.iter().rev().find(|turn| turn.otid == otid) {
        None => Submit::Append,
        Some(turn) if turn.last && turn.text == text => Submit::Append,
        Some(turn) => Submit::Edit { after_seq: turn.after_seq },
    }
}

#[cfg(test)]
mod tests {
    use app::testing::event;
    use app::AgentEvent;
    use serde_json::json;
    use uuid::Uuid;

    use super::*;

    /// A finished run of seqs `first..first + 3`: start, the user message `otid: text`, end.
    fn run(first: u64, otid: &str, text: &str) -> Vec<AgentEvent> {
        let run_id = Uuid::new_v4();
        let mut events = vec![
            event(first, EventKind::RunStarted, json!({})),
            event(first + 1, EventKind::User, json!({ "text": text, "otid": otid })),
            event(first + 2, EventKind::RunCompleted, json!({ "stop_reason": "end_turn" })),
        ];
        for event in &mut events {
            event.run_id = Some(run_id);
            event.message_id = Some(Uuid::new_v4());
        }
        events
    }

    fn timeline() -> Timeline {
        let mut timeline = Timeline::new();
        timeline.apply_all([run(1, "u1", "one"), run(4, "u2", "two")].concat());
        timeline
    }

    #[test]
    fn a_submit_appends_edits_or_retries() {
        let timeline = timeline();
        let cases = [
            ("u3", "three", Submit::Append),
            ("u2", "two", Submit::Append),
            ("u2", "two, changed", Submit::Edit { after_seq: 3 }),
            ("u1", "one", Submit::Edit { after_seq: 0 }),
            ("u1", "one, changed", Submit::Edit { after_seq: 0 }),
        ];
        for (otid, text, want) in cases {
            assert_eq!(submit(&timeline, otid, text), want, "{otid} {text}");
        }
        assert_eq!(submit(&Timeline::new(), "u1", "one"), Submit::Append);
    }

    #[test]
    fn a_regenerate_answers_the_named_turn_or_the_newest() {
        let timeline = timeline();
        let first = turn_to_answer_again(&timeline, "u1").unwrap();
        assert_eq!((first.after_seq, first.text.as_str(), first.last), (0, "one", false));
        let newest = turn_to_answer_again(&timeline, "unknown").unwrap();
        assert_eq!((newest.after_seq, newest.otid.as_str(), newest.last), (3, "u2", true));
        assert_eq!(turn_to_answer_again(&Timeline::new(), "u1"), None);
    }
}
