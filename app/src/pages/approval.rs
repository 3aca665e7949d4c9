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
    /// Posts a person's answer (`approvals` or `tool-results`, see
    /// [`crate::api_client::answer`]) once: `sending` holds while it is on its way, and a
    /// refusal shows in `error`.
    pub(super) fn send(
        self,
        sending: RwSignal<bool>,
        what: &'static str,
        request: impl serde::Serialize + 'static,
    ) {
        if sending.get_untracked() {
            return;
        }
        sending.set(true);
        #[cfg(feature = "hydrate")]
        leptos::task::spawn_local(async move {
            let answered = crate::api_client::answer(self.agent_id, what, &request).await;
            if let Err(message) = answered {
                self.error.set(Some(message));
            }
            sending.set(false);
        });
        #[cfg(not(feature = "hydrate"))]
        let _ = (request, what, self.agent_id, self.error);
    }
}

/// An `approval_requested` message: pending (with the buttons, live) or how it was answered.
#[component]
pub(super) fn ApprovalView(
    timeline: ReadSignal<Timeline>,
    message_id: Uuid,
    version: Memo<Option<u64>>,
) -> impl IntoView {
    let call_id = content_of(timeline, message_id, version, "tool_call_id");
    let name = content_of(timeline, message_id, version, "name");
    let state = call_state(timeline, call_id);
    let actions = use_context::<ApprovalActions>();
    // Set while this page's answer is on its way: the buttons do not take a second one.
    let sending = RwSignal::new(false);
    let reason = RwSignal::new(String::new());
    let answer = move |approve: bool| {
        let (Some(actions), Some(call_id)) = (actions, call_id().as_str().map(str::to_owned))
        else {
            return;
        };
        let reason = Some(reason.get_untracked())
            .map(|reason| reason.trim().to_owned())
            .filter(|reason| !approve && !reason.is_empty());
        let request = crate::protocol::ApprovalRequest {
            call_id,
            approve,
            reason,
        };
        actions.send(sending, "approvals", request);
    };
    let label = move || {
        format!(
            "{} needs approval",
            name().as_str().unwrap_or("this tool").to_owned()
        )
    };
    let body = move || {
        match state() {
        Some(ApprovalState::Pending) if actions.is_some() => view! {
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
