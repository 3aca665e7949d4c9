//! The live view of one agent: its timeline following the log as it grows, the run's status,
//! and the message box.

use leptos::prelude::*;
use uuid::Uuid;

use super::timeline::TimelineView;
use crate::history::AgentHistory;
use crate::hook::{use_agent_messages_from, AgentMessages};
use crate::json::ServerProps;
use crate::timeline::{RunStatus, Timeline};

/// Within this many pixels of the bottom, the view counts as "at the bottom" and keeps following.
const FOLLOW_THRESHOLD_PX: i32 = 48;

/// The live view of the line on screen: a switch to another line (or a new branch) swaps it for
/// that line's, whose hook follows that line's log.
// The main bundle's island; in the inspector's bundle a plain component no page there uses.
#[cfg_attr(not(feature = "inspector-bundle"), island)]
#[cfg_attr(feature = "inspector-bundle", component)]
pub(super) fn LiveLines(history: ServerProps<AgentHistory>) -> impl IntoView {
    let ServerProps(history) = history;
    let shown = RwSignal::new(history);
    move || view! { <LiveView history=shown.get() shown/> }
}

#[component]
fn LiveView(history: AgentHistory, shown: RwSignal<AgentHistory>) -> impl IntoView {
    let agent_id = history.agent.id;
    let lines = super::branches::line_note(&history);
    let send_error = RwSignal::new(None::<String>);
    let branching = super::branches::Branching::new(&history, Some((shown, send_error)));
    let AgentMessages { timeline, connection, error } =
        use_agent_messages_from(agent_id, history.timeline);
    provide_context(super::shared::AgentOfPage(agent_id));
    provide_context(branching);
    // Approve / Deny on the tool cards answer here; a refusal shows where a send's would.
    provide_context(super::approval::ApprovalActions { agent_id, error: send_error });
    let following = RwSignal::new(true);
    let scroller = NodeRef::<leptos::html::Div>::new();

    let scroll_to_bottom = move || {
        if let Some(element) = scroller.get_untracked() {
            element.set_scroll_top(element.scroll_height());
        }
    };
    // After every change of the timeline, follow it to the bottom unless the reader scrolled up
    // (checked again in the frame: the reader may have scrolled since).
    Effect::new(move |_| {
        timeline.track();
        if following.get_untracked() {
            let scrolled_in_frame = request_animation_frame(move || {
                if following.get_untracked() {
                    scroll_to_bottom();
                }
            });
            if scrolled_in_frame.is_err() {
                scroll_to_bottom();
            }
        }
    });
    // Scrolling up with the wheel is a clear wish to stop following, even before the view moves.
    let on_wheel = move |event: leptos::ev::WheelEvent| {
        if event.delta_y() < 0.0 {
            following.set(false);
        }
    };
    // Output only ever grows, and following only ever scrolls down: a scroll that moved up was the
    // reader's. Reaching the bottom again resumes following. (Judging by distance alone would
    // stop following whenever output grows between a programmatic scroll and its scroll event.)
    let last_scroll_top = StoredValue::new(0);
    let on_scroll = move |_| {
        if let Some(element) = scroller.get_untracked() {
            let top = element.scroll_top();
            let distance = element.scroll_height() - top - element.client_height();
            if top < last_scroll_top.get_value() {
                following.set(false);
            } else if distance <= FOLLOW_THRESHOLD_PX {
                following.set(true);
            }
            last_scroll_top.set_value(top);
        }
    };
    let jump = move |_| {
        following.set(true);
        scroll_to_bottom();
    };

    view! {
        <section class="agent" data-agent-id=agent_id.to_string()>
            <h1>{history.agent.name}</h1>
            <div class="status-bar">
                <span class="connection" data-state=move || connection.get().label()>
                    {move || connection.get().label()}
                </span>
                <RunBar timeline/>
                <a href=format!("/agents/{agent_id}/history")>"history"</a>
            </div>
            {lines}
            {move || error.get().map(|message| view! { <p class="error">{message}</p> })}
            <div
                class="timeline-scroll"
                node_ref=scroller
                on:scroll=on_scroll
                on:wheel=on_wheel
            >
                <TimelineView timeline/>
            </div>
            <Show when=move || !following.get()>
                <button class="jump" on:click=jump>"Jump to latest ↓"</button>
            </Show>
            <Composer agent_id timeline following send_error/>
            {move || send_error.get().map(|message| view! { <p class="error">{message}</p> })}
        </section>
    }
}

/// The message box, with Send and (while a run is going) Stop. Without JavaScript the form posts
/// to the server.
#[component]
fn Composer(
    agent_id: Uuid,
    timeline: ReadSignal<Timeline>,
    following: RwSignal<bool>,
    send_error: RwSignal<Option<String>>,
) -> impl IntoView {
    let draft = RwSignal::new(String::new());
    let send = move || {
        let content = draft.get_untracked();
        if content.trim().is_empty() {
            return;
        }
        draft.set(String::new());
        following.set(true);
        #[cfg(feature = "hydrate")]
        leptos::task::spawn_local(async move {
            let tools = Some(super::client_tool::demo_tools());
            match crate::api_client::start_run(agent_id, content, tools).await {
                Ok(_) => send_error.set(None),
                Err(message) => send_error.set(Some(message)),
            }
        });
        #[cfg(not(feature = "hydrate"))]
        let _ = (content, send_error);
    };
    let running = move || {
        timeline.with(|timeline| {
            timeline.runs().last().is_some_and(|run| run.status == RunStatus::Running)
        })
    };
    let cancel = move |_| {
        #[cfg(feature = "hydrate")]
        leptos::task::spawn_local(async move {
            if let Err(message) = crate::api_client::cancel_run(agent_id).await {
                send_error.set(Some(message));
            }
        });
    };
    view! {
        <form
            class="composer"
            method="post"
            action=format!("/agents/{agent_id}/runs")
            on:submit=move |event: leptos::ev::SubmitEvent| {
                event.prevent_default();
                send();
            }
        >
            <textarea
                name="content"
                placeholder="Message the agent (Enter to send, Shift+Enter for a new line)"
                prop:value=move || draft.get()
                on:input=move |event| draft.set(event_target_value(&event))
                on:keydown=move |event: leptos::ev::KeyboardEvent| {
                    if event.key() == "Enter" && !event.shift_key() {
                        event.prevent_default();
                        send();
                    }
                }
            ></textarea>
            <button type="submit">"Send"</button>
            <Show when=running>
                <button type="button" class="cancel" on:click=cancel>"Stop"</button>
            </Show>
        </form>
    }
}

/// The latest run's status and usage, and the cursor.
#[component]
pub(super) fn RunBar(timeline: ReadSignal<Timeline>) -> impl IntoView {
    let status =
        move || timeline.with(|timeline| super::run_header::bar_status(timeline.runs().last()));
    let usage = move || {
        timeline.with(|timeline| {
            let usage = timeline.runs().last()?.usage.clone()?;
            let count = |key: &str| usage.get(key).and_then(serde_json::Value::as_u64);
            Some(format!(
                "tokens in {} · out {}",
                count("input_tokens").unwrap_or(0),
                count("output_tokens").unwrap_or(0)
            ))
        })
    };
    view! {
        <span class="run-status" data-status=move || status().0>"run: "{move || status().1}</span>
        <span class="usage">{usage}</span>
        <span class="cursor">{move || format!("seq {}", timeline.with(Timeline::last_seq))}</span>
    }
}
