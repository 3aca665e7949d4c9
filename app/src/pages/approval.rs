//! Approval requests on a tool call's card: where each stands (from the log, through
//! [`crate::approvals`]) and, in the live view, Approve / Deny. The history pages show the same
//! state without buttons.

use leptos::prelude::*;
use uuid::Uuid;

use super::shared::{call_state, content_of};
use crate::approvals::ApprovalState;
use crate::timeline::Timeline;

/// Given by the live view: where an answer goes, and where its refusal is shown. Without it (the
/// history pages) requests show their state only.
#[derive(Clone, Copy)]
pub(super) struct ApprovalActions {
    pub agent_id: Uuid,
    pub error: RwSignal<Option<String>>,
}

impl ApprovalActions {
    /// Posts a person's answer to the call `call_id` names (`approvals` or `tool-results`, see
    /// [`crate::api_client::answer`]) once: `sending` holds while it is on its way, and a
    /// refusal shows in `error`. Nothing happens without actions (the history pages) or before
    /// the call's id is known.
    pub(super) fn answer<R: serde::Serialize + 'static>(
        actions: Option<Self>,
        sending: RwSignal<bool>,
        what: &'static str,
        call_id: serde_json::Value,
        request: impl FnOnce(String) -> R,
    ) {
        let (Some(actions), Some(call_id)) = (actions, call_id.as_str()) else {
            return;
        };
        if sending.get_untracked() {
            return;
        }
        let request = request(call_id.to_owned());
        sending.set(true);
        #[cfg(feature = "hydrate")]
        leptos::task::spawn_local(async move {
            let answered = crate::api_client::answer(actions.agent_id, what, &request).await;
            if let Err(message) = answered {
                actions.error.set(Some(message));
            }
            sending.set(false);
        });
        #[cfg(not(feature = "hydrate"))]
        let _ = (request, what, actions.agent_id, actions.error);
    }
}

/// What the cards of a call waiting for a person share (an approval request, a client tool's
/// call): the call's id and its tool's name from the message, where the call stands, the
/// page's actions (none on the history pages) and whether an answer is on its way (the buttons
/// take no second one meanwhile).
#[derive(Clone, Copy)]
pub(super) struct CallCard<Id, Name, State> {
    pub call_id: Id,
    pub name: Name,
    pub state: State,
    pub actions: Option<ApprovalActions>,
    pub sending: RwSignal<bool>,
}

/// A message's field, read again when the message changes.
pub(super) trait Field: Fn() -> serde_json::Value + Copy + Send + Sync + 'static {}
impl<F: Fn() -> serde_json::Value + Copy + Send + Sync + 'static> Field for F {}

/// The state of a card's call, read again when the timeline changes.
pub(super) trait CallState:
    Fn() -> Option<ApprovalState> + Copy + Send + Sync + 'static
{
}
impl<F: Fn() -> Option<ApprovalState> + Copy + Send + Sync + 'static> CallState for F {}

/// The [`CallCard`] of the call whose request is message `message_id`.
pub(super) fn call_card(
    timeline: ReadSignal<Timeline>,
    message_id: Uuid,
    version: Memo<Option<u64>>,
) -> CallCard<impl Field, impl Field, impl CallState> {
    let call_id = content_of(timeline, message_id, version, "tool_call_id");
    CallCard {
        call_id,
        name: content_of(timeline, message_id, version, "name"),
        state: call_state(timeline, call_id),
        actions: use_context(),
        sending: RwSignal::new(false),
    }
}

/// An `approval_requested` message: pending (with the buttons, live) or how it was answered.
#[component]
pub(super) fn ApprovalView(
    timeline: ReadSignal<Timeline>,
    message_id: Uuid,
    version: Memo<Option<u64>>,
) -> impl IntoView {
    let card = call_card(timeline, message_id, version);
    let (call_id, name, state, sending) = (card.call_id, card.name, card.state, card.sending);
    let reason = RwSignal::new(String::new());
    let answer = move |approve: bool| {
        ApprovalActions::answer(card.actions, sending, "approvals", call_id(), |call_id| {
            let reason = Some(reason.get_untracked())
                .map(|reason| reason.trim().to_owned())
                .filter(|reason| !approve && !reason.is_empty());
            crate::protocol::ApprovalRequest { call_id, approve, reason }
        });
    };
    let label =
        move || format!("{} needs approval", name().as_str().unwrap_or("this tool").to_owned());
    let body = move || {
        match state() {
        Some(ApprovalState::Pending) if card.actions.is_some() => view! {
            <div class="approval-buttons">
                <button class="approve" disabled=move || sending.get() on:click=move |_| answer(true)>
                    "Approve"
                </button>
                <input
                    class="deny-reason"
                    type="text"
                    placeholder="reason (optional)"
                    maxlength="4096"
                    prop:value=move || reason.get()
                    on:input=move |event| reason.set(event_target_value(&event))
                />
                <button class="deny" disabled=move || sending.get() on:click=move |_| answer(false)>
                    "Deny"
                </button>
            </div>
        }
        .into_any(),
        Some(ApprovalState::Pending) => {
            view! { <div class="approval-state">"pending: nobody has answered yet"</div> }.into_any()
        }
        Some(ApprovalState::Approved) => {
            view! { <div class="approval-state">"approved"</div> }.into_any()
        }
        Some(ApprovalState::Denied { reason }) => view! {
            <div class="approval-state">
                {match reason {
                    Some(reason) => format!("denied: {reason}"),
                    None => "denied".to_owned(),
                }}
            </div>
        }
        .into_any(),
        Some(ApprovalState::Returned { is_error }) => view! {
            <div class="approval-state">
                {if is_error { "the client answered with an error" } else { "answered by the client" }}
            </div>
        }
        .into_any(),
        Some(ApprovalState::Closed) | None => {
            view! { <div class="approval-state muted">"closed without an answer"</div> }.into_any()
        }
    }
    };
    let state_name = move || match state() {
        Some(ApprovalState::Pending) => "pending",
        Some(ApprovalState::Approved) => "approved",
        Some(ApprovalState::Denied { .. }) => "denied",
        Some(ApprovalState::Returned { .. }) => "returned",
        _ => "closed",
    };
    view! {
        <div class="approval" data-state=state_name>
            <div class="role">{label}</div>
            {body}
        </div>
    }
}

/// An `approval_response` message: the answer, where the continuation begins.
#[component]
pub(super) fn AnswerView(
    timeline: ReadSignal<Timeline>,
    message_id: Uuid,
    version: Memo<Option<u64>>,
) -> impl IntoView {
    let approve = content_of(timeline, message_id, version, "approve");
    let reason = content_of(timeline, message_id, version, "reason");
    let text = move || match (approve().as_bool(), reason()) {
        (Some(true), _) => "a person approved this call".to_owned(),
        (_, serde_json::Value::String(reason)) => format!("a person denied this call: {reason}"),
        _ => "a person denied this call".to_owned(),
    };
    view! {
        <div class="role">"answer"</div>
        <div class="body">{text}</div>
    }
}
