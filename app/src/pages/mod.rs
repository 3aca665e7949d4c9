//! The pages: `/` (agents), `/agents/{id}` (live view, [`live`]) and `/agents/{id}/history`
//! (server-rendered); both agent pages draw the timeline with [`timeline`].

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::{
    components::{Route, Router, Routes},
    hooks::use_params_map,
    ParamSegment, SsrMode, StaticSegment,
};
use uuid::Uuid;

use crate::history::AgentHistory;
use crate::json::ServerProps;
use resources::history_resource;

mod approval;
mod branches;
pub mod client_tool;
mod inspector;
mod live;
mod markdown;
mod resources;
mod run_header;
mod shared;
mod timeline;

use live::{LiveLines, RunBar};
use timeline::TimelineView;

/// The HTML document around the app, rendered by the server.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    #[cfg(feature = "ssr")]
    send_script_policy();
    // Islands: the script hydrates each `<leptos-island>` of the page, nothing else, from the
    // page's bundle.
    let scripts = match page_bundle_root(&options.site_pkg_dir) {
        Some(root) => view! { <HydrationScripts options islands=true root/> }.into_any(),
        None => view! { <HydrationScripts options islands=true/> }.into_any(),
    };
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                // Named, so a browser does not ask for a /favicon.ico that is not there.
                <link rel="icon" type="image/svg+xml" href="/favicon.svg"/>
                {scripts}
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// Where this page's bundle is, if not the main one: the run inspector loads a bundle of its
/// own (`<pkg>/inspector/<pkg>/`: xtask builds it from the lib package's `inspector` feature,
/// holding that page's island alone), so no other page carries the inspector's code.
fn page_bundle_root(pkg_dir: &str) -> Option<String> {
    #[cfg(feature = "ssr")]
    {
        let parts = use_context::<http::request::Parts>()?;
        bundle_root(parts.uri.path(), pkg_dir)
    }
    #[cfg(not(feature = "ssr"))]
    {
        let _ = pkg_dir;
        None
    }
}

/// `/{pkg}/inspector` for a run inspector's path (`/agents/{id}/runs/{run_id}`), else `None`:
/// the root the hydration script puts before `/{pkg}/{name}.js`.
pub fn bundle_root(path: &str, pkg_dir: &str) -> Option<String> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    matches!(segments.as_slice(), ["agents", _, "runs", _]).then(|| format!("/{pkg_dir}/inspector"))
}

/// The page's Content-Security-Policy, the defence behind the Markdown renderer's own rules:
/// scripts only from this site and the inline hydration scripts carrying this response's nonce,
/// wasm allowed to compile, styles and connections to this site only, no plugins, no `<base>`,
/// no framing. A message that got markup past the renderer still could not run a script.
#[cfg(feature = "ssr")]
fn send_script_policy() {
    let (Some(nonce), Some(response)) =
        (leptos::nonce::use_nonce(), use_context::<leptos_axum::ResponseOptions>())
    else {
        return;
    };
    let policy = format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; \
         style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; \
         base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    );
    if let Ok(value) = http::HeaderValue::from_str(&policy) {
        response.insert_header(http::header::CONTENT_SECURITY_POLICY, value);
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
                    <Route path=StaticSegment("") view=AgentsPage ssr=SsrMode::Async/>
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
                    <Route
                        path=(
                            StaticSegment("agents"),
                            ParamSegment("id"),
                            StaticSegment("runs"),
                            ParamSegment("run_id"),
                        )
                        view=InspectorPage
                        ssr=SsrMode::Async
                    />
                </Routes>
            </main>
        </Router>
    }
}

/// `/`: the agents, and a form to create one. Plain HTML, no island: the form posts to the
/// server, which answers with the new agent's page (or a page saying why it could not).
#[component]
fn AgentsPage() -> impl IntoView {
    // Read on the server before the page is sent.
    let agents = resources::agents_resource();
    view! {
        <h1>"Agents"</h1>
        <form class="create-agent" method="post" action="/agents">
            <input type="text" name="name" placeholder="New agent name"/>
            <button type="submit">"Create agent"</button>
        </form>
        <Suspense fallback=|| view! { <p class="muted">"Loading agents…"</p> }>
        {move || Suspend::new(async move { match agents.await {
            Err(message) => view! { <p class="error">{message}</p> }.into_any(),
            Ok(list) if list.is_empty() => {
                view! { <p class="muted">"No agents yet."</p> }.into_any()
            }
            Ok(list) => {
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
        }})}
        </Suspense>
    }
}

/// The agent id of the current route, if it is a UUID.
fn route_agent_id() -> impl Fn() -> Option<Uuid> + Copy {
    let params = use_params_map();
    move || params.with(|params| params.get("id")).and_then(|id| Uuid::parse_str(&id).ok())
}

/// Renders `ready` with the agent's history once it is loaded (on the server, before any HTML is
/// sent), or the reason it could not be.
fn with_history<V: IntoView + 'static>(
    agent_id: Uuid,
    follow_current: bool,
    ready: impl Fn(AgentHistory) -> V + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let history = history_resource(agent_id, follow_current);
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

/// The page for a path whose id is not a UUID: a 404 when rendered on the server.
fn not_an_agent_id() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::NOT_FOUND);
    }
    view! { <p class="error">"That is not an agent id."</p> }
}

/// `/agents/{id}`: the live view of one agent.
#[component]
fn AgentPage() -> impl IntoView {
    let agent_id = route_agent_id();
    move || match agent_id() {
        Some(agent_id) => with_history(
            agent_id,
            true,
            |history| view! { <LiveLines history=ServerProps(history)/> },
        )
        .into_any(),
        None => not_an_agent_id().into_any(),
    }
}

/// `/agents/{id}/runs/{run_id}`: the run inspector.
#[component]
fn InspectorPage() -> impl IntoView {
    let agent_id = route_agent_id();
    let params = use_params_map();
    let run_id =
        move || params.with(|params| params.get("run_id")).and_then(|id| Uuid::parse_str(&id).ok());
    move || match (agent_id(), run_id()) {
        // A run is in the log the link names (a conversation's own run is on its main line).
        (Some(agent_id), Some(run_id)) => with_history(agent_id, false, move |history| {
            view! { <inspector::Inspector history=ServerProps(history) run_id/> }
        })
        .into_any(),
        _ => not_an_agent_id().into_any(),
    }
}

/// `/agents/{id}/history`: the whole conversation, folded and rendered on the server; readable
/// without JavaScript.
#[component]
fn HistoryPage() -> impl IntoView {
    let agent_id = route_agent_id();
    // `?line=main`: a conversation's own log rather than its current branch.
    let query = leptos_router::hooks::use_query_map();
    let main_line = move || query.with(|query| query.get("line").as_deref() == Some("main"));
    move || match agent_id() {
        Some(agent_id) => with_history(agent_id, !main_line(), |history| {
            let agent_id = history.agent.id;
            let name = history.agent.name.clone();
            view! {
                <h1>{name}" · history"</h1>
                <p class="muted">
                    <a href=format!("/agents/{agent_id}")>"Open the live view"</a>
                </p>
                <HistoryLines history=ServerProps(history)/>
            }
        })
        .into_any(),
        None => not_an_agent_id().into_any(),
    }
}

/// The history's lines and timeline: an island, so its copy buttons and branch switchers work
/// once the page is hydrated (it does not follow the log: that is the live view).
#[cfg_attr(not(feature = "inspector-bundle"), island)]
#[cfg_attr(feature = "inspector-bundle", component)]
fn HistoryLines(history: ServerProps<AgentHistory>) -> impl IntoView {
    let ServerProps(history) = history;
    provide_context(shared::AgentOfPage(history.agent.id));
    provide_context(branches::Branching::new(&history, None));
    let lines = branches::line_note(&history);
    let timeline = RwSignal::new(history.timeline).read_only();
    view! {
        {lines}
        <div class="status-bar">
            <RunBar timeline/>
        </div>
        <div class="timeline-scroll history">
            <TimelineView timeline/>
        </div>
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_run_inspector_loads_its_own_bundle() {
        let run = "/agents/7c1d/runs/9f2e";
        let cases = [
            (run, Some("/pkg/inspector")),
            ("/agents/7c1d/runs/9f2e/", Some("/pkg/inspector")),
            ("/agents/7c1d", None),
            ("/agents/7c1d/history", None),
            ("/agents/7c1d/runs", None),
            ("/agents/7c1d/runs/9f2e/more", None),
            ("/", None),
        ];
        for (path, root) in cases {
            assert_eq!(super::bundle_root(path, "pkg").as_deref(), root, "{path}");
        }
    }
}
