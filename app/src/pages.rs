//! The pages: `/` (agents) and `/agents/{id}` (live view).

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::{
    components::{Route, Router, Routes},
    hooks::use_params_map,
    ParamSegment, StaticSegment,
};
use uuid::Uuid;

use crate::event::EventKind;
use crate::hook::use_agent_messages;
use crate::protocol::Agent;

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
                    <Route path=(StaticSegment("agents"), ParamSegment("id")) view=AgentPage/>
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
        <form class="create-agent" on:submit=on_submit>
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

/// `/agents/{id}`: the live view of one agent.
#[component]
fn AgentPage() -> impl IntoView {
    let params = use_params_map();
    move || {
        let agent_id = params
            .with(|params| params.get("id"))
            .and_then(|id| Uuid::parse_str(&id).ok());
        match agent_id {
            Some(agent_id) => view! { <AgentView agent_id/> }.into_any(),
            None => view! { <p class="error">"That is not an agent id."</p> }.into_any(),
        }
    }
}

#[component]
fn AgentView(agent_id: Uuid) -> impl IntoView {
    let messages = use_agent_messages(agent_id);
    let timeline = messages.timeline;
    let draft = RwSignal::new(String::new());
    let send_error = RwSignal::new(None::<String>);

    let send = move || {
        let content = draft.get_untracked();
        if content.trim().is_empty() {
            return;
        }
        draft.set(String::new());
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

    let message_ids = move || {
        timeline.with(|timeline| {
            timeline
                .messages()
                .iter()
                .map(|message| message.message_id)
                .collect::<Vec<_>>()
        })
    };
    let run_status = move || {
        timeline.with(|timeline| {
            timeline
                .runs()
                .last()
                .map(|run| run.status.as_str())
                .unwrap_or("idle")
        })
    };

    view! {
        <section class="agent" data-agent-id=agent_id.to_string()>
            <div class="status-bar">
                <span class="connection" data-state=move || messages.connection.get().label()>
                    {move || messages.connection.get().label()}
                </span>
                <span class="run-status" data-status=run_status>
                    "run: "
                    {run_status}
                </span>
                <span class="cursor">{move || format!("seq {}", timeline.with(|t| t.last_seq()))}</span>
            </div>
            {move || messages.error.get().map(|message| view! { <p class="error">{message}</p> })}
            <ol class="messages">
                <For each=message_ids key=|message_id| *message_id let:message_id>
                    <MessageView timeline message_id/>
                </For>
            </ol>
            <form
                class="composer"
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
            </form>
            {move || send_error.get().map(|message| view! { <p class="error">{message}</p> })}
        </section>
    }
}

/// One message. Model output is inserted as text nodes, never as HTML.
#[component]
fn MessageView(
    timeline: ReadSignal<crate::timeline::Timeline>,
    message_id: Uuid,
) -> impl IntoView {
    let kind = timeline.with_untracked(|timeline| {
        timeline
            .message(message_id)
            .map(|message| message.kind)
            .unwrap_or(EventKind::Other)
    });
    let text = move || {
        timeline.with(|timeline| {
            timeline
                .message(message_id)
                .map(|message| message.text().to_owned())
                .unwrap_or_default()
        })
    };
    let label = match kind {
        EventKind::User => "you",
        EventKind::Thinking => "thinking",
        EventKind::Text => "agent",
        EventKind::RunStarted => "run started",
        EventKind::RunCompleted => "run completed",
        EventKind::RunFailed => "run failed",
        EventKind::RunCancelled => "run cancelled",
        EventKind::Error => "error",
        other => other.as_str(),
    };
    view! {
        <li class=format!("message kind-{}", kind.as_str()) data-kind=kind.as_str()>
            <div class="role">{label}</div>
            <div class="body">{text}</div>
        </li>
    }
}
