//! Branches on the pages: the "‹ 2 / 3 ›" switcher on a turn where the shown line could have
//! gone another way, and (live view only) Edit on a user message and Regenerate on an answer,
//! each of which runs its turn again on a new branch forked just before it — the turn as it was
//! stays on its own line. A switch makes the line the conversation's current one (a reload
//! shows it) and swaps the view's history for the line's, without reloading the page.

use std::collections::BTreeMap;

use leptos::prelude::*;
use uuid::Uuid;

use crate::branches::{fork_points, turn_of, ForkPoint};
use crate::history::AgentHistory;
use crate::timeline::Timeline;

/// What the timeline's turns know of the conversation's lines.
#[derive(Clone, Copy)]
pub(super) struct Branching {
    points: StoredValue<BTreeMap<u64, ForkPoint>>,
    /// The conversation (its own log).
    conversation: Uuid,
    /// The line on screen.
    shown: Uuid,
    /// In the live view: where a switch puts the line it loads, and where refusals go.
    live: Option<(RwSignal<AgentHistory>, RwSignal<Option<String>>)>,
}

impl Branching {
    /// For the line `history` shows; `live` in the live view.
    pub(super) fn new(
        history: &AgentHistory,
        live: Option<(RwSignal<AgentHistory>, RwSignal<Option<String>>)>,
    ) -> Branching {
        let shown = history.agent.id;
        let points =
            history.branches.as_ref().map(|list| fork_points(list, shown)).unwrap_or_default();
        let conversation = history.agent.branch.map_or(shown, |origin| origin.root);
        Branching { points: StoredValue::new(points), conversation, shown, live }
    }
}

/// Switches the live view to `line` (the conversation's current line from now on).
fn switch_to(branching: Branching, line: Uuid) {
    let Some((shown, error)) = branching.live else {
        return;
    };
    #[cfg(feature = "hydrate")]
    leptos::task::spawn_local(async move {
        let loaded = async {
            crate::api_client::switch_branch(branching.conversation, line).await?;
            crate::api_client::load_history(line, false).await
        };
        match loaded.await {
            Ok(history) => shown.set(history),
            Err(message) => error.set(Some(message)),
        }
    });
    #[cfg(not(feature = "hydrate"))]
    let _ = (shown, error, line);
}

/// Runs a turn again as `text` on a new branch forked after `after_seq` of the shown line, and
/// switches to it; a turn that cannot start leaves no branch behind.
fn replace_turn(branching: Branching, after_seq: u64, text: String) {
    let Some((shown, error)) = branching.live else {
        return;
    };
    #[cfg(feature = "hydrate")]
    leptos::task::spawn_local(async move {
        use crate::api_client as api;
        let made = async {
            let branch = api::fork(branching.shown, after_seq).await?;
            let tools = Some(super::client_tool::demo_tools());
            if let Err(message) = api::start_run(branch.id, text, tools).await {
                let _ = api::delete_branch(branching.conversation, branch.id).await;
                return Err(message);
            }
            api::switch_branch(branching.conversation, branch.id).await?;
            api::load_history(branch.id, false).await
        };
        match made.await {
            Ok(history) => {
                error.set(None);
                shown.set(history);
            }
            Err(message) => error.set(Some(message)),
        }
    });
    #[cfg(not(feature = "hydrate"))]
    let _ = (shown, error, after_seq, text, branching.shown, branching.conversation);
}

/// A user message's turn: its switcher, when lines part just before it, and Edit (live view).
pub(super) fn user_turn_tools(timeline: ReadSignal<Timeline>, message_id: Uuid) -> Option<AnyView> {
    let branching = use_context::<Branching>()?;
    let (after_seq, text) = timeline.with_untracked(|timeline| turn_of(timeline, message_id))?;
    let point = branching.points.with_value(|points| points.get(&after_seq).cloned());
    let editing = RwSignal::new(false);
    let draft = RwSignal::new(text);
    let edit = branching.live.is_some().then(|| {
        view! {
            <button type="button" class="edit-message" on:click=move |_| editing.set(true)>
                "Edit"
            </button>
            <Show when=move || editing.get()>
                <form
                    class="edit-form"
                    on:submit=move |event: leptos::ev::SubmitEvent| {
                        event.prevent_default();
                        editing.set(false);
                        replace_turn(branching, after_seq, draft.get_untracked());
                    }
                >
                    <textarea
                        prop:value=move || draft.get()
                        on:input=move |event| draft.set(event_target_value(&event))
                    ></textarea>
                    <button type="submit">"Send as a new branch"</button>
                    <button type="button" on:click=move |_| editing.set(false)>"Cancel"</button>
                </form>
            </Show>
        }
    });
    Some(
        view! {
            {point.map(|point| view! { <Switcher branching point/> })}
            {edit}
        }
        .into_any(),
    )
}

/// An answer's Regenerate (live view): its turn asked again on a new branch.
pub(super) fn answer_tools(timeline: ReadSignal<Timeline>, message_id: Uuid) -> Option<AnyView> {
    let branching = use_context::<Branching>().filter(|branching| branching.live.is_some())?;
    let regenerate = move |_| {
        let turn = timeline.with_untracked(|timeline| turn_of(timeline, message_id));
        if let Some((after_seq, text)) = turn {
            replace_turn(branching, after_seq, text);
        }
    };
    Some(
        view! {
            <button type="button" class="regenerate" title="Answer this turn again, on a new branch" on:click=regenerate>
                "Regenerate"
            </button>
        }
        .into_any(),
    )
}

/// "‹ 2 / 3 ›": the lines going on from a fork point. Buttons in the live view, links to each
/// line's history elsewhere.
#[component]
fn Switcher(branching: Branching, point: ForkPoint) -> impl IntoView {
    let count = point.lines.len();
    let at = point.shown;
    let position = format!("{} / {count}", at + 1);
    let step = |to: Option<usize>, label: &'static str, class: &'static str| {
        let line = to.and_then(|to| point.lines.get(to).copied());
        match (line, branching.live.is_some()) {
            (Some(line), true) => view! {
                <button type="button" class=class on:click=move |_| switch_to(branching, line)>
                    {label}
                </button>
            }
            .into_any(),
            (Some(line), false) => view! {
                <a class=class href=history_of(branching.conversation, line)>{label}</a>
            }
            .into_any(),
            (None, _) => view! { <span class=format!("{class} muted")>{label}</span> }.into_any(),
        }
    };
    view! {
        <span class="branch-switcher" title="Other versions of this turn (each a branch)">
            {step(at.checked_sub(1), "‹", "branch-prev")}
            <span class="branch-position">{position}</span>
            {step(Some(at + 1).filter(|next| *next < count), "›", "branch-next")}
        </span>
    }
}

/// The line a page draws and its siblings: "main line" or "branch …", with links to the others'
/// history.
pub(super) fn line_note(history: &AgentHistory) -> Option<AnyView> {
    let list = history.branches.clone()?;
    let shown = history.agent.id;
    let name = |agent: &crate::protocol::Agent| match agent.branch {
        None => "main line".to_owned(),
        Some(origin) => format!("branch {} (after seq {})", short(agent.id), origin.fork_seq),
    };
    let lines: Vec<_> = std::iter::once(&list.agent)
        .chain(&list.branches)
        .map(|agent| {
            let label = name(agent);
            if agent.id == shown {
                view! { <li class="shown-line"><strong>{label}</strong>" (shown)"</li> }.into_any()
            } else {
                let href = history_of(list.agent.id, agent.id);
                view! { <li><a href=href>{label}</a></li> }.into_any()
            }
        })
        .collect();
    Some(
        view! {
            <details class="lines" data-shown=shown.to_string()>
                <summary class="muted">{format!("{} lines in this conversation", lines.len())}</summary>
                <ul>{lines}</ul>
            </details>
        }
        .into_any(),
    )
}

/// The history page of one line: a conversation's own id names its current branch, so its main
/// line is asked for by name.
fn history_of(conversation: Uuid, line: Uuid) -> String {
    match line == conversation {
        true => format!("/agents/{line}/history?line=main"),
        false => format!("/agents/{line}/history"),
    }
}

fn short(id: Uuid) -> String {
    id.simple().to_string()[..8].to_owned()
}
