//! A call of a tool the client runs (its request says `client: true`), on the call's card:
//! where it stands, and — in the live view — the page's own answer for the tools it offers
//! with every message it sends: `confirm` (Yes / No) and `prompt_user` (a line of text). A call
//! of another client's tool shows as waiting for that client. The call waits in the log, so a
//! reload, another tab or a restarted server shows it again, and one answer wins.

use leptos::prelude::*;
use serde_json::{json, Value};
use uuid::Uuid;

use super::approval::{call_card, ApprovalActions};
use super::shared::content_of;
use crate::approvals::ApprovalState;
use crate::timeline::Timeline;

/// The tools the live view runs itself, offered to the model with every message it sends.
pub fn demo_tools() -> Value {
    json!([
        {
            "name": "confirm",
            "description": "Ask the user a yes-or-no question. Answers {\"confirmed\": true|false}.",
            "parameters": {
                "type": "object",
                "properties": { "question": { "type": "string" } },
                "required": ["question"]
            }
        },
        {
            "name": "prompt_user",
            "description": "Ask the user for a line of text. Answers {\"answer\": \"…\"}.",
            "parameters": {
                "type": "object",
                "properties": { "question": { "type": "string" } },
                "required": ["question"]
            }
        }
    ])
}

/// What the page can answer for a call of tool `name`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DemoForm {
    /// Yes / No.
    Confirm,
    /// A line of text.
    Prompt,
    /// Not one of the page's tools: another client answers it.
    Elsewhere,
}

impl DemoForm {
    pub fn of(name: &str) -> DemoForm {
        match name {
            "confirm" => DemoForm::Confirm,
            "prompt_user" => DemoForm::Prompt,
            _ => DemoForm::Elsewhere,
        }
    }
}

/// The output the page sends for a `confirm` answer.
pub fn confirmed(yes: bool) -> Value {
    json!({ "confirmed": yes })
}

/// The output the page sends for a `prompt_user` answer.
pub fn prompted(answer: &str) -> Value {
    json!({ "answer": answer.trim() })
}

/// The line a card shows for where a client tool's call stands (`None`: pending, answered by
/// the form or by a client elsewhere).
pub fn state_line(state: Option<&ApprovalState>) -> Option<&'static str> {
    match state {
        Some(ApprovalState::Pending) => None,
        Some(ApprovalState::Returned { is_error: false }) => Some("answered"),
        Some(ApprovalState::Returned { is_error: true }) => {
            Some("declined, or the client reported an error")
        }
        _ => Some("closed without an answer"),
    }
}

/// A client tool's request on its card.
#[component]
pub(super) fn ClientToolView(
    timeline: ReadSignal<Timeline>,
    message_id: Uuid,
    version: Memo<Option<u64>>,
) -> impl IntoView {
    let card = call_card(timeline, message_id, version);
    let (call_id, name, state, sending) = (card.call_id, card.name, card.state, card.sending);
    let input = content_of(timeline, message_id, version, "input");
    let text = RwSignal::new(String::new());
    let send = move |output: Result<Value, String>| {
        ApprovalActions::answer(card.actions, sending, "tool-results", call_id(), |call_id| {
            let (output, error) = match output {
                Ok(output) => (Some(output), None),
                Err(error) => (None, Some(error)),
            };
            crate::protocol::ToolResultRequest { call_id, output, error }
        });
    };
    let question = move || input().get("question").and_then(Value::as_str).unwrap_or("").to_owned();
    let tool = move || name().as_str().unwrap_or("a tool").to_owned();
    let body = move || {
        let state = state();
        if let Some(line) = state_line(state.as_ref()) {
            return view! { <div class="approval-state">{line}</div> }.into_any();
        }
        match (card.actions.is_some(), DemoForm::of(&tool())) {
            (true, DemoForm::Confirm) => view! {
                <div class="client-question">{question}</div>
                <div class="approval-buttons">
                    <button class="approve" disabled=move || sending.get()
                        on:click=move |_| send(Ok(confirmed(true)))>"Yes"</button>
                    <button class="deny" disabled=move || sending.get()
                        on:click=move |_| send(Ok(confirmed(false)))>"No"</button>
                </div>
            }
            .into_any(),
            (true, DemoForm::Prompt) => view! {
                <div class="client-question">{question}</div>
                <div class="approval-buttons">
                    <input
                        class="client-answer"
                        type="text"
                        maxlength="4096"
                        prop:value=move || text.get()
                        on:input=move |event| text.set(event_target_value(&event))
                    />
                    <button class="approve" disabled=move || sending.get()
                        on:click=move |_| send(Ok(prompted(&text.get_untracked())))>"Send"</button>
                    <button class="deny" disabled=move || sending.get()
                        on:click=move |_| send(Err("the user declined to answer".into()))>"Decline"</button>
                </div>
            }
            .into_any(),
            _ => view! { <div class="approval-state">"waiting for the client that runs it"</div> }
                .into_any(),
        }
    };
    let state_name = move || match state() {
        Some(ApprovalState::Pending) => "pending",
        Some(ApprovalState::Returned { .. }) => "returned",
        _ => "closed",
    };
    view! {
        <div class="approval client-tool" data-state=state_name>
            <div class="role">{move || format!("{} runs in the client", tool())}</div>
            {body}
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_answers_its_own_tools_and_says_where_a_call_stands() {
        let names: Vec<String> = demo_tools()
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["confirm", "prompt_user"]);
        let forms = [
            ("confirm", DemoForm::Confirm),
            ("prompt_user", DemoForm::Prompt),
            ("read_page", DemoForm::Elsewhere),
        ];
        for (name, form) in forms {
            assert_eq!(DemoForm::of(name), form, "{name}");
        }
        assert_eq!(confirmed(false), json!({ "confirmed": false }));
        assert_eq!(prompted("  blue \n"), json!({ "answer": "blue" }));
        let lines = [
            (Some(ApprovalState::Pending), None),
            (Some(ApprovalState::Returned { is_error: false }), Some("answered")),
            (
                Some(ApprovalState::Returned { is_error: true }),
                Some("declined, or the client reported an error"),
            ),
            (Some(ApprovalState::Closed), Some("closed without an answer")),
        ];
        for (state, line) in lines {
            assert_eq!(state_line(state.as_ref()), line, "{state:?}");
        }
    }
}
