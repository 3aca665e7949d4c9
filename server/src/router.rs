//! The router: every route of the API, the surfaces and the pages, and the layers around them
//! (the edge: request ids, metrics, security headers, cross-site refusals, the token check,
//! body deadlines). At the top with the state it is handed: it names every floor's handlers.

use std::sync::Arc;
use std::time::Duration;

use app::history::HistorySourceHandle;
use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post, put};
use axum::Router;
use leptos::prelude::{provide_context, LeptosOptions};
use leptos_axum::{generate_route_list, LeptosRoutes};

use crate::http::{caller, cors, edge, forms, pages, produce, rest, tokens};
use crate::state::AppState;
use crate::stats;
use crate::surfaces::{self, native};

/// A REST request that takes longer than this is answered 408; WebSockets are exempt.
pub const REQUEST_TIMEOUT_MS: u64 = 30_000;

/// The API routes (`/v1/…`, the page forms, `/healthz`).
pub fn api_router(state: AppState) -> Router {
    // Unknown `/v1/…` paths get a JSON 404 from the nested router's fallback (a `/v1/{*rest}`
    // route would shadow `/v1/agents/{id}/events/stream` in the path matcher).
    let timeout = || {
        tower_http::timeout::TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            Duration::from_millis(REQUEST_TIMEOUT_MS),
        )
    };
    // Letta's SDKs call `/v1/agents/` (trailing slash) for create and list.
    let v1 = Router::new()
        .route("/agents", post(rest::create_agent).get(rest::list_agents))
        .route("/agents/", post(rest::create_agent).get(rest::list_agents))
        .route("/agents/{id}", get(rest::get_agent).delete(rest::delete_agent))
        .route("/agents/{id}/branches", get(rest::list_branches).post(rest::fork_branch))
        .route("/agents/{id}/branches/{branch}", delete(rest::delete_branch))
        .route("/agents/{id}/current-branch", put(rest::switch_branch))
        .route("/agents/{id}/events", get(rest::list_events))
        .route("/agents/{id}/events/stream", get(native::sse::stream_events))
        .route("/agents/{id}/runs", post(rest::create_run))
        .route("/agents/{id}/messages/cancel", post(rest::cancel_run))
        .route("/agents/{id}/approvals", post(rest::answer_approval))
        .route("/agents/{id}/tool-results", post(rest::answer_tool_result))
        .route("/runs/{run_id}", get(rest::get_run))
        .route("/stats", get(stats::stats))
        .route("/tokens", post(tokens::mint))
        .route("/tools", get(rest::list_tools))
        .route("/ai-sdk/chat/{id}/stop", post(surfaces::ai_sdk::stop))
        .route("/ai-sdk/chat/{id}/messages", get(surfaces::ai_sdk::messages))
        .route("/ag-ui/cancel", post(surfaces::ag_ui::cancel))
        .route("/responses/{id}/cancel", post(surfaces::responses::cancel))
        .route("/responses/{id}/input_items", get(surfaces::responses::input_items))
        // `Router::layer` wraps the routes added so far: the ones below answer when a run ends
        // (or stream until it does), so the request timeout does not apply to them.
        .layer(timeout())
        // Sending answers when its run ends; listing is a read like any other and gets the
        // request timeout.
        .route(
            "/agents/{id}/messages",
            post(surfaces::letta::send_message)
                .merge(get(surfaces::letta::list_messages).layer(timeout())),
        )
        .route("/agents/{id}/messages/stream", post(surfaces::letta::stream_messages))
        .route("/runs/{run_id}/stream", post(surfaces::letta::resume_run))
        // A streamed batch body may stay open as long as its producer streams; the body is
        // read and bounded by the handler (`produce::PRODUCE_BODY_BYTES_MAX`, per line and
        // silence `body_lines`).
        .route("/agents/{id}/produce", post(produce::produce).layer(DefaultBodyLimit::disable()))
        .route(
            "/ai-sdk/chat/{id}/produce",
            post(surfaces::ai_sdk::produce::produce).layer(DefaultBodyLimit::disable()),
        )
        .route("/agents/{id}/producers/{producer_id}", get(produce::position).layer(timeout()))
        .route(
            "/ai-sdk/chat",
            post(surfaces::ai_sdk::chat).layer(DefaultBodyLimit::max(
                surfaces::ai_sdk::AI_SDK_CHAT_BODY_BYTES_MAX
                    .max(state.limits.request_body_bytes_max),
            )),
        )
        .route("/ai-sdk/chat/{id}/stream", get(surfaces::ai_sdk::resume))
        .route(
            "/ag-ui",
            post(surfaces::ag_ui::run).layer(DefaultBodyLimit::max(
                surfaces::ag_ui::AG_UI_BODY_BYTES_MAX.max(state.limits.request_body_bytes_max),
            )),
        )
        .route("/ag-ui/connect", post(surfaces::ag_ui::connect))
        .route(
            "/responses",
            post(surfaces::responses::create).layer(DefaultBodyLimit::max(
                surfaces::responses::RESPONSES_BODY_BYTES_MAX
                    .max(state.limits.request_body_bytes_max),
            )),
        )
        // Streams when asked (`?stream=true`); a delete is refused at once.
        .route(
            "/responses/{id}",
            get(surfaces::responses::retrieve).delete(surfaces::responses::delete),
        )
        // Long-polls and SSE wait; an append's body is bounded by the route.
        .route(
            "/streams/{*path}",
            axum::routing::any(surfaces::durable::stream)
                .layer(DefaultBodyLimit::max(surfaces::durable::STREAM_BODY_BYTES_MAX)),
        )
        .fallback(rest::unknown_route)
        .method_not_allowed_fallback(rest::method_not_allowed);
    let forms = Router::new()
        .route("/agents", post(forms::create_agent))
        .route("/agents/{id}/runs", post(forms::send))
        .route("/healthz", get(rest::healthz))
        .route("/readyz", get(rest::readyz))
        .route("/metrics", get(stats::metrics))
        .layer(timeout());
    let rest = Router::new()
        .nest("/v1", v1)
        .merge(forms)
        .layer(DefaultBodyLimit::max(state.limits.request_body_bytes_max));
    Router::new().route("/v1/ws", get(native::ws::upgrade)).merge(rest).with_state(state)
}

/// The router of `AGENTSTREAM_METRICS_ADDR`'s listener: `GET /metrics` and nothing else, no
/// token (the address is meant for a private network a scraper sits on).
pub fn metrics_router(state: AppState) -> Router {
    Router::new().route("/metrics", get(stats::metrics)).with_state(state)
}

/// Headers of the bundle's files (`/pkg/…`, sent precompressed when the browser accepts brotli
/// or gzip — `cargo xtask build --release` writes the `.br` and `.gz` copies): `Vary:
/// Accept-Encoding`, so a cache keeps the encodings apart, and `Cache-Control: no-cache`, so a
/// reload asks again and gets a 304 from `Last-Modified` (the names carry no hash: a longer
/// lifetime would keep an old bundle after an upgrade).
async fn bundle_headers(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let bundle = request.uri().path().starts_with("/pkg/");
    let mut response = next.run(request).await;
    if bundle && response.status().is_success() {
        let headers = response.headers_mut();
        headers.insert(
            axum::http::header::VARY,
            axum::http::HeaderValue::from_static("accept-encoding"),
        );
        headers.insert(
            axum::http::header::CACHE_CONTROL,
            axum::http::HeaderValue::from_static("no-cache"),
        );
    }
    response
}

mod fast;

/// The application's service: the router, with the Durable Streams path past it (`fast.rs`),
/// inside the CORS layer when origins are listed.
pub type App = tower::util::Either<tower_http::cors::Cors<fast::Fast>, fast::Fast>;

/// The whole application: API routes plus the server-rendered pages and static files.
pub fn app(state: AppState, leptos_options: LeptosOptions) -> App {
    let routes = generate_route_list(app::App);
    let (store, snapshots) = (state.store.clone(), state.snapshots.clone());
    let trace_url_template = state.trace_url_template.clone();
    // Per request: the pages read as the request's caller (leptos_axum provides the request's
    // parts before this runs; the access middleware put the caller in their extensions).
    let history = move || {
        let caller = leptos::prelude::use_context::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<caller::Caller>().cloned());
        provide_context(HistorySourceHandle(Arc::new(pages::StoreHistory {
            store: store.clone(),
            snapshots: snapshots.clone(),
            caller,
            trace_url_template: trace_url_template.clone(),
        })))
    };
    let pages = Router::new()
        .leptos_routes_with_context(&leptos_options, routes, history, {
            let leptos_options = leptos_options.clone();
            move || app::shell(leptos_options.clone())
        })
        // The bundle, precompressed, with conditional requests (a reload gets a 304); the
        // fallback serves the other files of the site's root.
        .nest_service(
            &format!("/{}", leptos_options.site_pkg_dir),
            tower_http::services::ServeDir::new(
                std::path::Path::new(&*leptos_options.site_root)
                    .join(&*leptos_options.site_pkg_dir),
            )
            .precompressed_br()
            .precompressed_gzip(),
        )
        .fallback(leptos_axum::file_and_error_handler(app::shell))
        .layer(axum::middleware::from_fn(bundle_headers))
        .with_state(leptos_options);
    // Outside the token check: a preflight carries no credentials. Only with origins listed (it
    // makes every response `Vary: Origin`).
    let origins = state.allowed_origins.clone();
    // The edge: one middleware around every route (`http::edge` says why one).
    let edge = edge::Edge {
        telemetry: state.telemetry.clone(),
        metrics: state.metrics.clone(),
        access: axum::extract::FromRef::from_ref(&state),
        body_read_ms_max: state.limits.body_read_ms_max,
    };
    let durable = axum::extract::FromRef::from_ref(&state);
    let layer = axum::middleware::from_fn_with_state(edge.clone(), edge::edge);
    let service = fast::Fast::new(api_router(state).merge(pages).layer(layer), edge, durable);
    if origins.is_empty() {
        tower::util::Either::Right(service)
    } else {
        tower::util::Either::Left(tower::Layer::layer(&cors::layer(&origins), service))
    }
}
