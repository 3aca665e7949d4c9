//! The timeline as the pages draw it: blocks of messages, each message by its kind. Text is
//! Markdown drawn by [`crate::markdown`]'s own tags; everything else is inserted as text nodes.

use super::markdown::{CopyMessage, MarkdownBody};
use super::shared::content_of;
use leptos::prelude::*;
use uuid::Uuid;

use crate::event::EventKind;
use crate::timeline::{RunStatus, Timeline};

/// The timeline as blocks of messages, in the order they first appeared.
#[component]
pub(super) fn TimelineView(timeline: ReadSignal<Timeline>) -> impl IntoView {
    let block_ids = move || {
        timeline.with(|timeline| {
            timeline.blocks().iter().map(|block| block.block_id).collect::<Vec<_>>()
        })
    };
    // A long log's history is folded from a recent run (`Timeline::starting_after`).
    let omitted = move || match timeline.with(Timeline::omitted_through) {
        0 => None,
        through => Some(view! {
            <p class="omitted muted">
                {format!("Events 1–{through} (the earlier runs) are not shown here; the events API pages through all of them.")}
            </p>
        }),
    };
    // Which tool calls the model made together, and where each run begins (its header goes
    // there), worked out once per change for every block.
    let groups = Memo::new(move |_| timeline.with(Timeline::call_groups));
    let run_starts = Memo::new(move |_| timeline.with(run_starts));
    provide_context(super::run_header::clock());
    view! {
        <div class="timeline">
            {omitted}
            <For each=block_ids key=|block_id| *block_id let:block_id>
                {move || run_starts.with(|starts| starts.get(&block_id).copied()).map(|run_id| {
                    view! { <super::run_header::RunHeader timeline run_id/> }
                })}
                <BlockView timeline groups block_id/>
            </For>
        </div>
    }
}

/// The first block of each run, to the run: where the run's header goes.
fn run_starts(timeline: &Timeline) -> std::collections::HashMap<Uuid, Uuid> {
    let mut seen = std::collections::HashSet::new();
    timeline
        .blocks()
        .iter()
        .filter_map(|block| {
            let run_id = block.run_id?;
            seen.insert(run_id).then_some((block.block_id, run_id))
        })
        .collect()
}

/// One block. Tool calls the model made together are drawn as a group ("called 3 tools at
/// once"), so their interleaved output stays attributable.
#[component]
fn BlockView(
    timeline: ReadSignal<Timeline>,
    groups: Memo<std::collections::HashMap<Uuid, (usize, usize)>>,
    block_id: Uuid,
) -> impl IntoView {
    // A tool result is drawn inside its call's card: on its own it would be an empty card.
    let message_ids = move || {
        timeline.with(|timeline| {
            let Some(block) = timeline.block(block_id) else {
                return Vec::new();
            };
            block
                .message_ids
                .iter()
                .copied()
                .filter(|id| !shown_in_its_card(timeline, &block.message_ids, *id))
                .collect::<Vec<_>>()
        })
    };
    let place = move || groups.with(|groups| groups.get(&block_id).copied());
    let class = move || match place() {
        Some((0, _)) => "block in-group group-first",
        Some(_) => "block in-group",
        None => "block",
    };
    let group_label = move || match place() {
        Some((0, size)) => Some(view! {
            <div class="group-label">{format!("called {size} tools at once")}</div>
        }),
        _ => None,
    };
    view! {
        <section class=class>
            {group_label}
            <For each=message_ids key=|message_id| *message_id let:message_id>
                <MessageView timeline message_id/>
            </For>
        </section>
    }
}

/// Whether message `message_id` is a tool result whose call is in the same block (the call's
/// card shows it). Only the block is looked at: a call and its result share the call's block.
fn shown_in_its_card(timeline: &Timeline, block: &[Uuid], message_id: Uuid) -> bool {
    let Some(message) = timeline.message(message_id) else {
        return false;
    };
    if message.kind != EventKind::ToolResult {
        return false;
    }
    let call_id = message.content.get("tool_call_id");
    call_id.is_some()
        && block.iter().filter_map(|id| timeline.message(*id)).any(|other| {
            other.kind == EventKind::ToolCall && other.content.get("tool_call_id") == call_id
        })
}

fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// One message. Text is drawn as Markdown through [`crate::markdown`], which writes every tag
/// itself; everything else (tool inputs, results, errors) is inserted as text nodes.
#[component]
fn MessageView(timeline: ReadSignal<Timeline>, message_id: Uuid) -> impl IntoView {
    let kind = timeline.with_untracked(|timeline| {
        timeline.message(message_id).map(|message| message.kind).unwrap_or(EventKind::Other)
    });
    // Re-render this message only when an event of its own arrived: every frame checks one seq
    // per message instead of copying every message's text.
    let version = Memo::new(move |_| {
        timeline.with(|timeline| timeline.message(message_id).map(|message| message.last_seq))
    });
    let content = move |key: &'static str| content_of(timeline, message_id, version, key);
    let hovered = RwSignal::new(false);

    let body = match kind {
        EventKind::User => view! {
            <div class="role">
                "you" <CopyMessage timeline message_id/>
                {super::branches::user_turn_tools(timeline, message_id)}
            </div>
            <MarkdownBody timeline message_id version/>
        }
        .into_any(),
        EventKind::Text => view! {
            <div class="role">
                "agent" <CopyMessage timeline message_id/>
                {super::branches::answer_tools(timeline, message_id)}
            </div>
            <MarkdownBody timeline message_id version/>
        }
        .into_any(),
        EventKind::Thinking => view! {
            <details open=true class="thinking">
                <summary class="role">"thinking"</summary>
                <MarkdownBody timeline message_id version/>
            </details>
        }
        .into_any(),
        EventKind::ToolCall => view! { <ToolCallCard timeline message_id version/> }.into_any(),
        EventKind::ToolResult => view! { <OrphanResult timeline message_id version/> }.into_any(),
        EventKind::ApprovalRequested => {
            let client = timeline.with_untracked(|timeline| {
                timeline.message(message_id).is_some_and(crate::approvals::is_client_request)
            });
            if client {
                view! { <super::client_tool::ClientToolView timeline message_id version/> }
                    .into_any()
            } else {
                view! { <super::approval::ApprovalView timeline message_id version/> }.into_any()
            }
        }
        EventKind::ApprovalResponse => {
            view! { <super::approval::AnswerView timeline message_id version/> }.into_any()
        }
        EventKind::Loading => {
            let label = content("label");
            view! {
                <div class="role">"waiting"</div>
                <div class="body">{move || label().as_str().unwrap_or("…").to_owned()}</div>
            }
            .into_any()
        }
        EventKind::Error => {
            let message = content("message");
            let error_type = content("type");
            view! {
                <div class="role">"error · " {move || error_type().as_str().unwrap_or("error").to_owned()}</div>
                <div class="body">{move || message().as_str().unwrap_or("").to_owned()}</div>
            }
            .into_any()
        }
        other => {
            let whole = move || {
                let _ = version.get();
                timeline.with_untracked(|timeline| {
                    timeline
                        .message(message_id)
                        .map(|message| pretty(&message.content))
                        .unwrap_or_default()
                })
            };
            view! {
                <div class="role">{other.as_str()}</div>
                <pre class="body">{whole}</pre>
            }
            .into_any()
        }
    };
    view! {
        <div
            class=format!("message kind-{}", kind.as_str())
            data-kind=kind.as_str()
            on:mouseenter=move |_| hovered.set(true)
            on:mouseleave=move |_| hovered.set(false)
        >
            {body}
            {move || raw_json(timeline, message_id, hovered)}
        </div>
    }
}

/// The message's stored JSON, built only while the pointer is over the message: nothing per token
/// otherwise.
fn raw_json(
    timeline: ReadSignal<Timeline>,
    message_id: Uuid,
    hovered: RwSignal<bool>,
) -> Option<impl IntoView> {
    if !hovered.get() {
        return None;
    }
    let json = timeline.with(|timeline| {
        timeline.message(message_id).map(|message| {
            pretty(&serde_json::json!({
                "message_id": message.message_id,
                "kind": message.kind,
                "seq": [message.first_seq, message.last_seq],
                "content": message.content,
                "raw": message.raw,
            }))
        })
    })?;
    Some(view! { <pre class="raw-json">{json}</pre> })
}

/// A tool result, shown on its own only when its call is not in the timeline (otherwise it is
/// inside the call's card).
#[component]
fn OrphanResult(
    timeline: ReadSignal<Timeline>,
    message_id: Uuid,
    version: Memo<Option<u64>>,
) -> impl IntoView {
    let call_id = content_of(timeline, message_id, version, "tool_call_id");
    let orphan = move || {
        let call_id = call_id();
        timeline.with(|timeline| {
            !timeline.messages().iter().any(|message| {
                message.kind == EventKind::ToolCall
                    && message.content.get("tool_call_id") == Some(&call_id)
            })
        })
    };
    let result = content_of(timeline, message_id, version, "result");
    view! {
        <Show when=orphan>
            <div class="role">"tool result"</div>
            <pre class="body">{move || pretty(&result())}</pre>
        </Show>
    }
}

/// A tool call's card: its name and input, then its result (or that it is still running, or
/// that its run ended without one).
#[component]
fn ToolCallCard(
    timeline: ReadSignal<Timeline>,
    message_id: Uuid,
    version: Memo<Option<u64>>,
) -> impl IntoView {
    let name = content_of(timeline, message_id, version, "name");
    let input = content_of(timeline, message_id, version, "input");
    // A long tool's progress reports (MCP `notifications/progress`), merged on the card.
    let progress = content_of(timeline, message_id, version, "progress");
    let progress_message = content_of(timeline, message_id, version, "progress_message");
    let progress_text = move || {
        let mut text = match progress() {
            serde_json::Value::String(text) => text,
            serde_json::Value::Null => String::new(),
            other => other.to_string(),
        };
        if let Some(message) = progress_message().as_str().filter(|message| !message.is_empty()) {
            if !text.is_empty() {
                text.push_str(" · ");
            }
            text.push_str(message);
        }
        text
    };
    let tool_call_id = content_of(timeline, message_id, version, "tool_call_id");
    let outcome = move || {
        let call_id = tool_call_id();
        timeline.with(|timeline| {
            let result = call_id
                .as_str()
                .and_then(|call_id| timeline.tool_result(call_id))
                .map(|result| result.content.clone());
            let run_running = timeline
                .message(message_id)
                .and_then(|message| message.run_id)
                .and_then(|run_id| timeline.run(run_id))
                .is_none_or(|run| run.status == RunStatus::Running);
            let status = timeline
                .message(message_id)
                .and_then(|message| message.content.get("status"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned);
            // An approved call runs in the run that carried the answer out.
            let running = run_running || status.as_deref() == Some("approved");
            let waiting = match status.as_deref() {
                Some("awaiting_approval") => Some("waiting for approval"),
                Some("awaiting_client") => Some("waiting for the client"),
                _ => None,
            };
            (result, running, waiting)
        })
    };
    view! {
        <div class="role">"tool call · " {move || name().as_str().unwrap_or("tool").to_owned()}</div>
        <details class="tool-json" open=true>
            <summary>"input"</summary>
            <pre class="tool-input">{move || pretty(&input())}</pre>
        </details>
        {move || match outcome() {
            (Some(result), _, _) => {
                let is_error = result.get("is_error").and_then(serde_json::Value::as_bool) == Some(true);
                let shown = result.get("result").or_else(|| result.get("content")).cloned().unwrap_or(result);
                let label = if is_error { "error: " } else { "result: " };
                let class = if is_error { "tool-outcome error" } else { "tool-outcome" };
                match shown {
                    // Text as it is; JSON formatted and collapsible.
                    serde_json::Value::String(text) => view! {
                        <div class=class>{label}{text}</div>
                    }.into_any(),
                    other @ (serde_json::Value::Object(_) | serde_json::Value::Array(_)) => view! {
                        <div class=class>
                            <details class="tool-json" open=true>
                                <summary>{label}</summary>
                                <pre class="tool-result">{pretty(&other)}</pre>
                            </details>
                        </div>
                    }.into_any(),
                    scalar => view! {
                        <div class=class>{label}{scalar.to_string()}</div>
                    }.into_any(),
                }
            }
            (None, _, Some(waiting)) => view! { <div class="tool-outcome waiting">{waiting}</div> }.into_any(),
            (None, true, _) => view! {
                <div class="tool-outcome running">
                    "running…"
                    {move || {
                        let text = progress_text();
                        (!text.is_empty()).then(|| view! { <span class="tool-progress">{text}</span> })
                    }}
                </div>
            }.into_any(),
            (None, false, _) => view! { <div class="tool-outcome muted">"no result"</div> }.into_any(),
        }}
    }
}
