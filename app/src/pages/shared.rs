//! What a page's parts share: the agent the page shows, and a message's content field read
//! reactively.

use leptos::prelude::*;
use uuid::Uuid;

use crate::timeline::Timeline;

/// The agent whose timeline a page shows: run headers link to its runs' inspector.
#[derive(Clone, Copy)]
pub(super) struct AgentOfPage(pub Uuid);

/// One field of a message's content, read again whenever the message changes.
pub(super) fn content_of(
    timeline: ReadSignal<Timeline>,
    message_id: Uuid,
    version: Memo<Option<u64>>,
    key: &'static str,
) -> impl Fn() -> serde_json::Value + Copy + Send + Sync + 'static {
    move || {
        let _ = version.get();
        timeline.with_untracked(|timeline| {
            timeline
                .message(message_id)
                .and_then(|message| message.content.get(key).cloned())
                .unwrap_or(serde_json::Value::Null)
        })
    }
}

/// The state of the call whose id `call_id` reads, as the timeline tells it (an approval's or a
/// client tool's card).
pub(super) fn call_state(
    timeline: ReadSignal<Timeline>,
    call_id: impl Fn() -> serde_json::Value + Copy + Send + Sync + 'static,
) -> impl Fn() -> Option<crate::approvals::ApprovalState> + Copy + Send + Sync + 'static {
    move || {
        let call_id = call_id();
        let call_id = call_id.as_str()?.to_owned();
        timeline.with(|timeline| crate::approvals::state_of(timeline, &call_id))
    }
}
