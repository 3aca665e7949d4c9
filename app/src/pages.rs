//! The pages: `/` (agents) and `/agents/{id}` (live view).

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::{
    components::{Route, Router, Routes},
    hooks::use_params_map,
    ParamSegment, SsrMode, StaticSegment,
};
use uuid::Uuid;

use crate::event::EventKind;
use crate::history::{history_resource, AgentHistory};
use crate::hook::{use_agent_messages_from, AgentMessages};
use crate::protocol::Agent;
use crate::timeline::{RunStatus, Timeline};

/// The HTML document around the app, rendered by the server.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    view! {
        <Stylesheet id="leptos" href="/pkg/agentstream.css"/>
        <Title text="agentstream"/>
        <Router>
            <header class="top">
                <a href="/" class="brand">"agentstream"</a>
            </header>
            <main>
                <Routes fallback=|| view! { <p class="error">"Page not found."</p> }>
                    <Route path=StaticSegment("") view=AgentsPage/>
                    <Route
                        path=(StaticSegment("agents"), ParamSegment("id"))
                        view=AgentPage
                        ssr=SsrMode::Async
                    />
                    <Route
                        path=(StaticSegment("agents"), ParamSegment("id"), StaticSegment("history"))
                        view=HistoryPage
                        ssr=SsrMode::Async
                    />
                </Routes>
            </main>
        </Router>
    }
}

/// `/`: the agents, and a form to create one.
#[component]
fn AgentsPage() -> impl IntoView {
    let agents = RwSignal::new(None::<Result<Vec<Agent>, String>>);
    let name = RwSignal::new(String::new());
    let create_error = RwSignal::new(None::<String>);

    Effect::new(move |_| {
        #[cfg(feature = "hydrate")]
        leptos::task::spawn_local(async move {
            agents.set(Some(crate::api_client::list_agents().await));
        });
    });

    let navigate = leptos_router::hooks::use_navigate();
    let on_submit = move |event: leptos::ev::SubmitEvent| {
        event.prevent_default();
        let wanted_name = name.get_untracked().trim().to_owned();
        let _ = (&navigate, &wanted_name);
        #[cfg(feature = "hydrate")]
        {
            let navigate = navigate.clone();
            leptos::task::spawn_local(async move {
                let request = crate::protocol::CreateAgentRequest {
                    name: (!wanted_name.is_empty()).then_some(wanted_name),
                    ..Default::default()
                };
                match crate::api_client::create_agent(&request).await {
                    Ok(agent) => navigate(&format!("/agents/{}", agent.id), Default::default()),
                    Err(message) => create_error.set(Some(message)),
                }
            });
        }
    };

    view! {
        <h1>"Agents"</h1>
        <form class="create-agent" method="post" action="/agents" on:submit=on_submit>
            <input
                type="text"
                name="name"
                placeholder="New agent name"
                prop:value=move || name.get()
                on:input=move |event| name.set(event_target_value(&event))
            />
            <button type="submit">"Create agent"</button>
        </form>
        {move || create_error.get().map(|message| view! { <p class="error">{message}</p> })}
        {move || match agents.get() {
            None => view! { <p class="muted">"Loading agents…"</p> }.into_any(),
            Some(Err(message)) => view! { <p class="error">{message}</p> }.into_any(),
            Some(Ok(list)) if list.is_empty() => {
                view! { <p class="muted">"No agents yet."</p> }.into_any()
            }
            Some(Ok(list)) => {
                view! {
                    <ul class="agents">
                        {list
                            .into_iter()
                            .map(|agent| {
                                view! {
                                    <li>
                                        <a href=format!("/agents/{}", agent.id)>{agent.name}</a>
                                        <span class="muted">
                                            {format!(" · {} events", agent.head_seq)}
                                        </span>
                                    </li>
                                }
                            })
                            .collect_view()}
                    </ul>
                }
                    .into_any()
            }
        }}
    }
}

/// The agent id of the current route, if it is a UUID.
fn route_agent_id() -> impl Fn() -> Option<Uuid> + Copy {
    let params = use_params_map();
    move || {
        params
            .with(|params| params.get("id"))
            .and_then(|id| Uuid::parse_str(&id).ok())
    }
}

/// Renders `ready` with the agent's history once it is loaded (on the server, before any HTML is
/// sent), or the reason it could not be.
fn with_history<V: IntoView + 'static>(
    agent_id: Uuid,
    ready: impl Fn(AgentHistory) -> V + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let history = history_resource(agent_id);
    view! {
        <Suspense fallback=|| view! { <p class="muted">"Loading history…"</p> }>
            {move || Suspend::new(async move {
                match history.await {
                    Ok(history) => ready(history).into_any(),
                    Err(message) => view! { <p class="error">{message}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// `/agents/{id}`: the live view of one agent.
#[component]
fn AgentPage() -> impl IntoView {
    let agent_id = route_agent_id();
    move || match agent_id() {
        Some(agent_id) => {
            with_history(agent_id, |history| view! { <LiveView history/> }).into_any()
        }
        None => view! { <p class="error">"That is not an agent id."</p> }.into_any(),
    }
}

/// `/agents/{id}/history`: the whole conversation, folded and rendered on the server; readable
/// without JavaScript.
#[component]
fn HistoryPage() -> impl IntoView {
    let agent_id = route_agent_id();
    move || match agent_id() {
        Some(agent_id) => with_history(agent_id, |history| {
            let agent_id = history.agent.id;
            let timeline = RwSignal::new(history.timeline).read_only();
            view! {
                <h1>{history.agent.name}" · history"</h1>
                <p class="muted">
                    <a href=format!("/agents/{agent_id}")>"Open the live view"</a>
                </p>
                <RunBar timeline/>
                <div class="timeline-scroll history">
                    <TimelineView timeline/>
                </div>
            }
        })
        .into_any(),
        None => view! { <p class="error">"That is not an agent id."</p> }.into_any(),
    }
}

/// Within this many pixels of the bottom, the view counts as "at the bottom" and keeps following.
const FOLLOW_THRESHOLD_PX: i32 = 48;

#[component]
fn LiveView(history: AgentHistory) -> impl IntoView {
    let agent_id = history.agent.id;
    let AgentMessages {
        timeline,
        connection,
        error,
    } = use_agent_messages_from(agent_id, history.timeline);
    let draft = RwSignal::new(String::new());
    let send_error = RwSignal::new(None::<String>);
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
            request_animation_frame(move || {
                if following.get_untracked() {
                    scroll_to_bottom();
                }
            });
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

    let send = move || {
        let content = draft.get_untracked();
        if content.trim().is_empty() {
            return;
        }
        draft.set(String::new());
        following.set(true);
        #[cfg(feature = "hydrate")]
        leptos::task::spawn_local(async move {
            match crate::api_client::start_run(agent_id, content).await {
                Ok(_) => send_error.set(None),
                Err(message) => send_error.set(Some(message)),
            }
        });
        #[cfg(not(feature = "hydrate"))]
        let _ = content;
    };

    let running = move || {
        timeline.with(|timeline| {
            timeline
                .runs()
                .last()
                .is_some_and(|run| run.status == RunStatus::Running)
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
        <section class="agent" data-agent-id=agent_id.to_string()>
            <h1>{history.agent.name}</h1>
            <div class="status-bar">
                <span class="connection" data-state=move || connection.get().label()>
                    {move || connection.get().label()}
                </span>
                <RunBar timeline/>
                <a href=format!("/agents/{agent_id}/history")>"history"</a>
            </div>
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
            {move || send_error.get().map(|message| view! { <p class="error">{message}</p> })}
        </section>
    }
}

/// The latest run's status and usage, and the cursor.
#[component]
fn RunBar(timeline: ReadSignal<Timeline>) -> impl IntoView {
    let status = move || {
        timeline.with(|timeline| {
            timeline
                .runs()
                .last()
                .map(|run| run.status.as_str())
                .unwrap_or("idle")
        })
    };
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
        <span class="run-status" data-status=status>"run: "{status}</span>
        <span class="usage">{usage}</span>
        <span class="cursor">{move || format!("seq {}", timeline.with(Timeline::last_seq))}</span>
    }
}

/// The timeline as blocks of messages, in the order they first appeared.
#[component]
fn TimelineView(timeline: ReadSignal<Timeline>) -> impl IntoView {
    let block_ids = move || {
        timeline.with(|timeline| {
            timeline
                .blocks()
                .iter()
                .map(|block| block.block_id)
                .collect::<Vec<_>>()
        })
    };
    view! {
        <div class="timeline">
            <For each=block_ids key=|block_id| *block_id let:block_id>
                <BlockView timeline block_id/>
            </For>
        </div>
    }
}

/// One block. Blocks of concurrent threads carry a thread label, so interleaved output stays
/// attributable.
#[component]
fn BlockView(timeline: ReadSignal<Timeline>, block_id: Uuid) -> impl IntoView {
    let message_ids = move || {
        timeline.with(|timeline| {
            timeline
                .block(block_id)
                .map(|block| block.message_ids.clone())
                .unwrap_or_default()
        })
    };
    let thread_label = move || {
        timeline.with(|timeline| {
            let block = timeline.block(block_id)?;
            let run = timeline.run(block.run_id?)?;
            if run.thread_ids.len() < 2 {
                return None;
            }
            let position = run
                .thread_ids
                .iter()
                .position(|id| Some(*id) == block.thread_id)?;
            Some(format!("thread {}", position + 1))
        })
    };
    view! {
        <section class="block">
            {move || thread_label().map(|label| view! { <div class="thread-label">{label}</div> })}
            <For each=message_ids key=|message_id| *message_id let:message_id>
                <MessageView timeline message_id/>
            </For>
        </section>
    }
}

fn pretty(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// One message. Model output is inserted as text nodes, never as HTML.
#[component]
fn MessageView(timeline: ReadSignal<Timeline>, message_id: Uuid) -> impl IntoView {
    let kind = timeline.with_untracked(|timeline| {
        timeline
            .message(message_id)
            .map(|message| message.kind)
            .unwrap_or(EventKind::Other)
    });
    // Re-render this message only when an event of its own arrived: every frame checks one seq
    // per message instead of copying every message's text.
    let version = Memo::new(move |_| {
        timeline.with(|timeline| timeline.message(message_id).map(|message| message.last_seq))
    });
    let text = move || {
        let _ = version.get();
        timeline.with_untracked(|timeline| {
            timeline
                .message(message_id)
                .map(|message| message.text().to_owned())
                .unwrap_or_default()
        })
    };
    let content = move |key: &'static str| {
        move || {
            let _ = version.get();
            timeline.with_untracked(|timeline| {
                timeline
                    .message(message_id)
                    .and_then(|message| message.content.get(key).cloned())
                    .unwrap_or(serde_json::Value::Null)
            })
        }
    };
    // Raw JSON is built only while the pointer is over the message: nothing per token otherwise.
    let hovered = RwSignal::new(false);
    let raw_json = move || {
        hovered.get().then(|| {
            timeline.with(|timeline| {
                timeline.message(message_id).map(|message| {
                    pretty(&serde_json::json!({
                        "message_id": message.message_id,
                        "kind": message.kind,
                        "seq": [message.first_seq, message.last_seq],
                        "content": message.content,
                        "raw": message.raw,
                    }))
                })
            })
        })
    };
    let raw_view = move || {
        raw_json()
            .flatten()
            .map(|json| view! { <pre class="raw-json">{json}</pre> })
    };

    let body = match kind {
        EventKind::User => view! {
            <div class="role">"you"</div>
            <div class="body">{text}</div>
        }
        .into_any(),
        EventKind::Text => view! {
            <div class="role">"agent"</div>
            <div class="body">{text}</div>
        }
        .into_any(),
        EventKind::Thinking => view! {
            <details open=true>
                <summary class="role">"thinking"</summary>
                <div class="body">{text}</div>
            </details>
        }
        .into_any(),
        EventKind::ToolCall => {
            let name = content("name");
            let input = content("input");
            let tool_call_id = content("tool_call_id");
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
                    (result, run_running)
                })
            };
            view! {
                <div class="role">"tool call · " {move || name().as_str().unwrap_or("tool").to_owned()}</div>
                <pre class="tool-input">{move || pretty(&input())}</pre>
                {move || match outcome() {
                    (Some(result), _) => {
                        let is_error = result.get("is_error").and_then(serde_json::Value::as_bool) == Some(true);
                        let shown = result.get("result").or_else(|| result.get("content")).cloned().unwrap_or(result);
                        let text = match shown {
                            serde_json::Value::String(text) => text,
                            other => pretty(&other),
                        };
                        view! {
                            <div class=if is_error { "tool-outcome error" } else { "tool-outcome" }>
                                {if is_error { "error: " } else { "result: " }}{text}
                            </div>
                        }.into_any()
                    }
                    (None, true) => view! { <div class="tool-outcome running">"running…"</div> }.into_any(),
                    (None, false) => view! { <div class="tool-outcome muted">"no result"</div> }.into_any(),
                }}
            }
            .into_any()
        }
        EventKind::ToolResult => {
            // Shown inside its call's card when the call is in the timeline.
            let orphan = move || {
                let call_id = content("tool_call_id")();
                timeline.with(|timeline| {
                    !timeline.messages().iter().any(|message| {
                        message.kind == EventKind::ToolCall
                            && message.content.get("tool_call_id") == Some(&call_id)
                    })
                })
            };
            let result = content("result");
            view! {
                <Show when=orphan>
                    <div class="role">"tool result"</div>
                    <pre class="body">{move || pretty(&result())}</pre>
                </Show>
            }
            .into_any()
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
            {raw_view}
        </div>
    }
}
