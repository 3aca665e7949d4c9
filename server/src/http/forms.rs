//! The page forms, for browsers without (or not yet running) the WebAssembly app: a plain HTML
//! form POST does the same as the API call and redirects to the page to look at next.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Redirect;
use axum::Form;
use serde::Deserialize;

use app::protocol::{CreateAgentRequest, CreateRunRequest};
use axum::Json;

use super::auth::same_origin_request;
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

/// A form posted by a page of another site is refused: it must not create agents or start runs
/// with a visitor's browser.
fn refuse_cross_site(headers: &HeaderMap) -> Result<(), ApiError> {
    if same_origin_request(headers) {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "cross_site_form",
            "this form was posted from another site",
        ))
    }
}

/// `POST /agents` from the agents page.
pub async fn create_agent(
    State(store): State<Arc<dyn Store>>,
    State(runs): State<Arc<Runs>>,
    headers: HeaderMap,
    Form(form): Form<CreateAgentForm>,
) -> Result<Redirect, ApiError> {
    refuse_cross_site(&headers)?;
    let request = CreateAgentRequest {
        name: Some(form.name),
        ..Default::default()
    };
    let (_, Json(agent)) = rest::create_agent_inner(store.as_ref(), &runs, request).await?;
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
    headers: HeaderMap,
    Form(form): Form<SendForm>,
) -> Result<Redirect, ApiError> {
    refuse_cross_site(&headers)?;
    let agent_id = parse_agent_id(&agent_id)?;
    let request = CreateRunRequest {
        content: form.content,
        idempotency_key: None,
    };
    let _accepted = rest::create_run_inner(&starter, agent_id, request).await?;
    Ok(Redirect::to(&format!("/agents/{agent_id}")))
}
