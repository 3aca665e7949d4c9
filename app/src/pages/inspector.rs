//! `/agents/{id}/runs/{run_id}`: the run inspector. One lane per block of the run — the message
//! that started it, each model call, each tool call — as a bar on the run's own clock, with the
//! waits between them visible, each model call's time to first token and output rate, each
//! tool's outcome, and the run's end and usage. Drawn from [`crate::inspect`] over the same fold
//! the live view uses, server-rendered first and then following the log live. Hovering a lane
//! shows its messages' stored JSON, built only while hovered.

use leptos::prelude::*;
use uuid::Uuid;

use super::run_header::{duration_text, outcome_text};
use crate::history::AgentHistory;
use crate::hook::{use_agent_messages_from, AgentMessages};
use crate::inspect::{inspect, Lane, LaneKind};
use crate::json::ServerProps;
use crate::timeline::Timeline;

/// The inspector of run `run_id` of the agent `history` holds.
// The inspector bundle's island (the server draws it as one everywhere); in the main bundle a
// plain component no page there uses.
#[cfg_attr(not(all(feature = "hydrate", not(feature = "inspector-bundle"))), island)]
#[cfg_attr(all(feature = "hydrate", not(feature = "inspector-bundle")), component)]
pub(super) fn Inspector(history: ServerProps<AgentHistory>, run_id: Uuid) -> impl IntoView {
    let ServerProps(history) = history;
    let agent_id = history.agent.id;
    let lines = super::branches::line_note(&history);
    let AgentMessages { timeline, connection, .. } =
        use_agent_messages_from(agent_id, history.timeline);
    let inspection = Memo::new(move |_| timeline.with(|timeline| inspect(timeline, run_id)));
    let hovered = RwSignal::new(None::<Uuid>);
    let summary = move || {
        inspection.with(|inspection| {
            let inspection = inspection.as_ref()?;
            let usage = inspection.run.usage.as_ref().map(|usage| {
                let count = |key: &str| usage.get(key).and_then(serde_json::Value::as_u64);
                format!(
                    " · {} in · {} out tokens",
                    count("input_tokens").unwrap_or(0),
                    count("output_tokens").unwrap_or(0)
                )
            });
            Some(format!(
                "{} · {} · {} lanes{}",
                outcome_text(&inspection.run),
                duration_text(inspection.total_ms),
                inspection.lanes.len(),
                usage.unwrap_or_default()
            ))
        })
    };
    let lanes = move || {
        inspection.with(|inspection| {
            inspection.as_ref().map(|inspection| inspection.lanes.clone()).unwrap_or_default()
        })
    };
    let total_ms =
        move || inspection.with(|inspection| inspection.as_ref().map_or(0, |i| i.total_ms));
    let status = move || {
        inspection.with(|inspection| {
            inspection.as_ref().map_or("unknown", |inspection| inspection.run.status.as_str())
        })
    };
    let trace_url_template = history.trace_url_template.clone();
    let trace = move || {
        let trace_id = inspection.with(|inspection| {
            inspection.as_ref().and_then(|inspection| inspection.run.trace_id.clone())
        })?;
        let link =
            trace_url_template.as_ref().map(|template| template.replace("{trace_id}", &trace_id));
        let shown = trace_id.clone();
        Some(view! {
            <p class="muted trace" data-trace-id=trace_id>
                "trace "
                {match link {
                    Some(href) => view! { <a href=href rel="noreferrer">{shown}</a> }.into_any(),
                    None => view! { <code>{shown}</code> }.into_any(),
                }}
            </p>
        })
    };
    view! {
        <section class="inspector" data-run-id=run_id.to_string() data-status=status>
            <h1>{history.agent.name}" · run"</h1>
            {lines}
            <p class="muted">
                <a href=format!("/agents/{agent_id}")>"live view"</a>
                " · "
                <a href=format!("/agents/{agent_id}/history")>"history"</a>
                " · "
                <span class="connection" data-state=move || connection.get().label()>
                    {move || connection.get().label()}
                </span>
            </p>
            {move || match summary() {
                Some(summary) => view! { <p class="inspector-summary">{summary}</p> }.into_any(),
                None => view! { <p class="error">"This run is not in the agent's log."</p> }.into_any(),
            }}
            {trace}
            <SurfaceLinks agent_id run_id/>
            <div class="lanes">
                <For each=lanes key=|lane| (lane.block_id, lane.end_ms, lane.status.clone()) let:lane>
                    <LaneRow lane total_ms hovered/>
                </For>
            </div>
            {move || hovered.get().map(|block_id| raw_of(timeline, block_id))}
        </section>
    }
}

/// Where the same run is read on each surface: one log, several mappings.
#[component]
fn SurfaceLinks(agent_id: Uuid, run_id: Uuid) -> impl IntoView {
    let response = format!("/v1/responses/resp_{}", run_id.simple());
    view! {
        <p class="muted surfaces">
            "this run as: "
            <a href=format!("/v1/runs/{run_id}") data-surface="native">"run"</a>
            " · "
            <a href=format!("/v1/agents/{agent_id}/events?since=0") data-surface="events">"events"</a>
            " · "
            <a href=response.clone() data-surface="responses">"Responses"</a>
            " ("
            <a href=format!("{response}?stream=true") data-surface="responses-stream">"stream"</a>
            ") · Letta "
            <code data-surface="letta">{format!("POST /v1/runs/{run_id}/stream")}</code>
        </p>
    }
}

/// One lane: its label, its bar on the run's clock, its figures.
#[component]
fn LaneRow(
    lane: Lane,
    total_ms: impl Fn() -> i64 + Copy + Send + Sync + 'static,
    hovered: RwSignal<Option<Uuid>>,
) -> impl IntoView {
    let block_id = lane.block_id;
    // Positions on the bar's 0–1000 view box, in integers (no float formatting in the bundle).
    let place = move || {
        let total = total_ms().max(1);
        let x = (lane.start_ms * 1000 / total).clamp(0, 997);
        // A bar is at least visible: an instant (one event) is a tick.
        let width = ((lane.end_ms - lane.start_ms) * 1000 / total).max(3);
        (x, width.min(1000 - x))
    };
    let wait = move || {
        let (wait, start) = (lane.wait_ms?, lane.start_ms);
        let total = total_ms().max(1);
        Some(((start - wait) * 1000 / total, wait * 1000 / total))
    };
    let figures = lane_figures(&lane);
    view! {
        <div
            class=format!("lane kind-{}", lane.kind.as_str())
            data-kind=lane.kind.as_str()
            on:mouseenter=move |_| hovered.set(Some(block_id))
            on:mouseleave=move |_| hovered.set(None)
        >
            <span class="lane-label">{lane.label.clone()}</span>
            <svg class="lane-bar" viewBox="0 0 1000 10" preserveAspectRatio="none" role="img">
                {move || wait().map(|(x, width)| view! {
                    <rect class="wait" x=x y="4" width=width height="2"/>
                })}
                <rect class="bar" x=move || place().0 y="0" width=move || place().1 height="10"/>
            </svg>
            <span class="lane-figures">{figures}</span>
        </div>
    }
}

/// What a lane's figures say: when and how long; a model call's wait for its first token and
/// its output rate; a tool's outcome.
pub fn lane_figures(lane: &Lane) -> String {
    let mut parts = vec![format!(
        "at {} · {}",
        duration_text(lane.start_ms),
        duration_text(lane.end_ms - lane.start_ms)
    )];
    if let Some(wait) = lane.wait_ms {
        parts.push(format!("first token after {}", duration_text(wait)));
    }
    if let Some(rate) = lane.tokens_per_second {
        parts.push(format!("{} tokens/s", rate.round() as u64));
    }
    if let Some(rate) = lane.chars_per_second {
        parts.push(format!("{} chars/s", rate.round() as u64));
    }
    if lane.kind == LaneKind::Tool {
        if let Some(status) = &lane.status {
            parts.push(status.replace('_', " "));
        }
    }
    parts.join(" · ")
}

/// The hovered lane: its messages' text as the timeline draws it (Markdown), then their stored
/// JSON.
fn raw_of(timeline: ReadSignal<Timeline>, block_id: Uuid) -> impl IntoView {
    // One walk over the lane's messages: their drawn text and their stored JSON.
    let (texts, messages) = timeline.with(|timeline| {
        let mut texts = Vec::new();
        let mut messages = Vec::new();
        let ids =
            timeline.block(block_id).map(|block| block.message_ids.as_slice()).unwrap_or_default();
        for message in ids.iter().filter_map(|id| timeline.message(*id)) {
            let text = message.text();
            if !text.trim().is_empty() {
                texts.push(text.to_owned());
            }
            messages.push(serde_json::json!({
                "message_id": message.message_id,
                "kind": message.kind,
                "seq": [message.first_seq, message.last_seq],
                "content": message.content,
                "raw": message.raw,
            }));
        }
        (texts, messages)
    });
    let text = texts.join("\n\n");
    let markdown = (!text.is_empty()).then(|| {
        let html = crate::markdown::Blocks::of(&text).html();
        view! { <div class="markdown lane-text" inner_html=html></div> }
    });
    let json = serde_json::to_string_pretty(&messages).unwrap_or_default();
    view! {
        {markdown}
        <pre class="raw-json lane-raw">{json}</pre>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_says_when_how_long_and_what_it_waited() {
        let lane = Lane {
            block_id: Uuid::nil(),
            kind: LaneKind::Model,
            label: "model call".into(),
            start_ms: 1_200,
            end_ms: 3_400,
            wait_ms: Some(700),
            chars_per_second: Some(41.6),
            tokens_per_second: Some(9.4),
            status: None,
        };
        assert_eq!(
            lane_figures(&lane),
            "at 1.2 s · 2.2 s · first token after 700 ms · 9 tokens/s · 42 chars/s"
        );
        let tool = Lane {
            kind: LaneKind::Tool,
            wait_ms: None,
            chars_per_second: None,
            tokens_per_second: None,
            status: Some("awaiting_approval".into()),
            ..lane
        };
        assert_eq!(lane_figures(&tool), "at 1.2 s · 2.2 s · awaiting approval");
    }
}
