//! The page forms, for browsers without (or not yet running) the WebAssembly app: a plain HTML
//! form POST does the same as the API call and redirects to the page to look at next. A refusal
//! is a small HTML page saying what was wrong (with the API's status), not the API's JSON.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::Form;
use serde::Deserialize;

use app::protocol::{CreateAgentRequest, CreateRunRequest};
use axum::Json;

use super::error::ApiError;
use super::params::parse_agent_id;
use super::rest;
use std::sync::Arc;

use crate::agent::start::Starter;
use crate::agent::Runs;
use crate::store::Store;

#[derive(Debug, Deserialize)]
pub struct CreateAgentForm {
    #[serde(default)]
    name: String,
}

/// A form's refusal, as a page: the status and the sentence of the API's error, and a way back.
pub struct FormError {
    error: ApiError,
    back: String,
}

impl FormError {
    fn new(error: impl Into<ApiError>, back: impl Into<String>) -> FormError {
        FormError { error: error.into(), back: back.into() }
    }
}

impl IntoResponse for FormError {
    fn into_response(self) -> Response {
        let page = error_page(self.error.status, &self.error.message, &self.back);
        (self.error.status, Html(page)).into_response()
    }
}

/// The page a refused form answers with. Pure.
fn error_page(status: StatusCode, message: &str, back: &str) -> String {
    let escape = |text: &str| {
        text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
    };
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Not done — agentstream</title><link rel=\"stylesheet\" href=\"/pkg/agentstream.css\"></head>\
         <body><main><h1>That did not go through</h1><p class=\"error\">{}</p>\
         <p class=\"muted\">{} {}</p><p><a href=\"{}\">Go back</a></p></main></body></html>",
        escape(message),
        status.as_u16(),
        escape(status.canonical_reason().unwrap_or("")),
        escape(back),
    )
}

/// `POST /agents` from the agents page. (A form posted by a page of another site never gets
/// here: `cross_site` refuses it.)
pub async fn create_agent(
    State(store): State<Arc<dyn Store>>,
    State(runs): State<Arc<Runs>>,
    Form(form): Form<CreateAgentForm>,
) -> Result<Redirect, FormError> {
    let back = |error: ApiError| FormError::new(error, "/");
    let request = CreateAgentRequest { name: Some(form.name), ..Default::default() };
    let (_, Json(agent)) =
        rest::create_agent_inner(store.as_ref(), &runs, request).await.map_err(back)?;
    Ok(Redirect::to(&format!("/agents/{}", agent.id)))
}

#[derive(Debug, Deserialize)]
pub struct SendForm {
    #[serde(default)]
    content: String,
}

/// `POST /agents/{id}/runs` from the live view's composer.
pub async fn send(
    State(starter): State<Starter>,
    Path(agent_id): Path<String>,
    Form(form): Form<SendForm>,
) -> Result<Redirect, FormError> {
    let live = format!("/agents/{agent_id}");
    let back = |error: ApiError| FormError::new(error, live.clone());
    let agent_id = parse_agent_id(&agent_id).map_err(|error| FormError::new(error, "/"))?;
    let request =
        CreateRunRequest { client_tools: None, content: form.content, idempotency_key: None };
    let _accepted = rest::create_run_inner(&starter, agent_id, request).await.map_err(back)?;
    Ok(Redirect::to(&format!("/agents/{agent_id}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_a_page_that_says_why_with_nothing_unescaped() {
        let page = error_page(
            StatusCode::CONFLICT,
            "tool call <c1> waits for approval & more",
            "/agents/x\"y",
        );
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("tool call &lt;c1&gt; waits for approval &amp; more"));
        assert!(page.contains("409 Conflict"));
        assert!(page.contains("href=\"/agents/x&quot;y\""));
        assert!(!page.contains("<c1>"));
    }
}
