//! Every agent's log as a read-only JSON durable stream at `/v1/streams/agents/{agent_id}`: its
//! messages are the agent's events as the native API sends them, offset N is "after seq N",
//! so a Durable Streams client follows an agent live and resumes exactly where it was. Writes
//! go through the agent (runs, the producer API), never here: 405.

use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use uuid::Uuid;

use super::protocol::format_offset;
use super::refusal::Refusal;
use super::source::Source;

use super::protocol::read_query;
use super::read::read_source;
use super::response::{refused, text, with, STREAM_NEXT_OFFSET};
use super::state::DurableState;

pub(super) async fn handle(
    state: &DurableState,
    method: &Method,
    agent_id: Uuid,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Response {
    let path = format!("agents/{agent_id}");
    let result = match *method {
        Method::GET => read_stream(state, path, agent_id, query, headers).await,
        Method::HEAD => head(state, agent_id).await,
        _ => {
            let response = text(
                StatusCode::METHOD_NOT_ALLOWED,
                "an agent's stream is read-only: its events are written by its runs",
            );
            Ok(with(response, "allow", "GET, HEAD".into()))
        }
    };
    result.unwrap_or_else(refused)
}

async fn read_stream(
    state: &DurableState,
    path: String,
    agent_id: Uuid,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Result<Response, Refusal> {
    let query = read_query(query).map_err(Refusal::Bad)?;
    if state.store.head_seq(agent_id).await?.is_none() {
        return Err(Refusal::NotFound);
    }
    read_source(state, Source::Agent { path, agent_id }, query, headers).await
}

async fn head(state: &DurableState, agent_id: Uuid) -> Result<Response, Refusal> {
    let tail = state.store.head_seq(agent_id).await?.ok_or(Refusal::NotFound)?;
    let response = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json"), (header::CACHE_CONTROL, "no-store")],
    )
        .into_response();
    Ok(with(response, STREAM_NEXT_OFFSET, format_offset(tail)))
}
