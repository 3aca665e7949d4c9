//! The browser's REST calls (hydrate build only). Errors come back as the sentence to show.

use gloo_net::http::{Request, Response};
use uuid::Uuid;

use crate::protocol::{Agent, CreateRunRequest, ErrorBody, EventsPage, RunAccepted};

/// `path` on this page's origin.
fn url(path: &str) -> String {
    format!("{}{path}", origin())
}

fn origin() -> String {
    web_sys::window().and_then(|window| window.location().origin().ok()).unwrap_or_default()
}

/// `ws://host/v1/ws?subscribe=…`, or `wss://` when the page came over HTTPS: a socket that
/// opens subscribed to `agent_id` after `since`, runs of token appends merged (`coalesce`).
pub fn subscribed_socket_url(agent_id: Uuid, since: u64) -> String {
    let origin = origin();
    let socket_origin = if let Some(rest) = origin.strip_prefix("https://") {
        format!("wss://{rest}")
    } else if let Some(rest) = origin.strip_prefix("http://") {
        format!("ws://{rest}")
    } else {
        origin
    };
    format!("{socket_origin}/v1/ws?subscribe={agent_id}&since={since}&coalesce=true")
}

async fn decode<T: serde::de::DeserializeOwned>(response: Response) -> Result<T, String> {
    let status = response.status();
    let text = response.text().await.map_err(network)?;
    if response.ok() {
        return crate::json::read::<T>(&text)
            .map_err(|error| format!("unreadable answer: {error}"));
    }
    match crate::json::read::<ErrorBody>(&text) {
        Ok(body) => Err(body.error.message),
        Err(_) => Err(format!("the server answered {status}")),
    }
}

/// `body` as JSON with `request` (a POST or PUT), the answer decoded.
async fn send_json<T: serde::de::DeserializeOwned>(
    request: gloo_net::http::RequestBuilder,
    body: &impl serde::Serialize,
) -> Result<T, String> {
    let response = request.json(body).map_err(network)?.send().await.map_err(network)?;
    decode(response).await
}

/// A GET of `url`, the answer decoded.
async fn get_json<T: serde::de::DeserializeOwned>(url: &str) -> Result<T, String> {
    let response = Request::get(url).send().await.map_err(network)?;
    decode(response).await
}

fn network(error: gloo_net::Error) -> String {
    format!("network error: {error}")
}

/// Starts a run for `content`, offering the model `client_tools` (the tools this page runs).
pub async fn start_run(
    agent_id: Uuid,
    content: String,
    client_tools: Option<serde_json::Value>,
) -> Result<RunAccepted, String> {
    let request = CreateRunRequest { client_tools, content, idempotency_key: None };
    send_json(Request::post(&url(&format!("/v1/agents/{agent_id}/runs"))), &request).await
}

/// A page of the log after `since`. Everything here only folds what it reads, so it asks for
/// runs of appends merged (`coalesce=true`): the same timeline from far fewer events to parse.
pub async fn events_page(agent_id: Uuid, since: u64, limit: u32) -> Result<EventsPage, String> {
    let path = format!("/v1/agents/{agent_id}/events?since={since}&limit={limit}&coalesce=true");
    get_json(&url(&path)).await
}

pub async fn get_agent(agent_id: Uuid) -> Result<Agent, String> {
    get_json(&url(&format!("/v1/agents/{agent_id}"))).await
}

/// Events read per page while folding history in the browser.
const HISTORY_PAGE_EVENTS: u32 = 1000;

/// The agent and its whole log folded, over REST (the live view switching to another line of a
/// conversation); a conversation's current branch when `follow_current`.
pub async fn load_history(
    agent_id: Uuid,
    follow_current: bool,
) -> Result<crate::history::AgentHistory, String> {
    let mut agent = get_agent(agent_id).await?;
    if let Some(current) = agent.current_branch.filter(|_| follow_current) {
        agent = get_agent(current).await?;
    }
    let agent_id = agent.id;
    let mut timeline = crate::timeline::Timeline::new();
    loop {
        let page = events_page(agent_id, timeline.last_seq(), HISTORY_PAGE_EVENTS).await?;
        let has_more = page.has_more && !page.events.is_empty();
        timeline.apply_all(page.events);
        if !has_more {
            let branches = branches(agent_id).await?;
            return Ok(crate::history::AgentHistory {
                agent,
                timeline,
                trace_url_template: None,
                branches: Some(branches).filter(|list| !list.branches.is_empty()),
            });
        }
    }
}

/// Asks the server to cancel the agent's running run; answers once it has ended.
pub async fn cancel_run(agent_id: Uuid) -> Result<crate::protocol::CancelResponse, String> {
    let request = crate::protocol::CancelRequest::default();
    send_json(Request::post(&url(&format!("/v1/agents/{agent_id}/messages/cancel"))), &request)
        .await
}

/// A person's answer, posted to `/v1/agents/{agent_id}/{what}`: `approvals` (an approval
/// request's) or `tool-results` (a call of one of this page's tools). The run that carries it
/// out starts; its events arrive through the log like any other.
pub async fn answer(
    agent_id: Uuid,
    what: &str,
    request: &impl serde::Serialize,
) -> Result<RunAccepted, String> {
    send_json(Request::post(&url(&format!("/v1/agents/{agent_id}/{what}"))), request).await
}

/// The conversation of `log` (it or one of its branches) and its branches.
pub async fn branches(log: Uuid) -> Result<crate::protocol::BranchList, String> {
    get_json(&url(&format!("/v1/agents/{log}/branches"))).await
}

/// Forks `log` after its seq `after_seq`: the new branch (not made current).
pub async fn fork(log: Uuid, after_seq: u64) -> Result<Agent, String> {
    let request = crate::protocol::ForkRequest { after_seq, current: false };
    send_json(Request::post(&url(&format!("/v1/agents/{log}/branches"))), &request).await
}

/// Makes `branch` the line the conversation of `log` follows (a reload shows it).
pub async fn switch_branch(log: Uuid, branch: Uuid) -> Result<Agent, String> {
    let request = crate::protocol::SwitchBranchRequest { branch: Some(branch) };
    send_json(Request::put(&url(&format!("/v1/agents/{log}/current-branch"))), &request).await
}

/// Deletes a branch (a turn that could not start on it leaves nothing behind).
pub async fn delete_branch(log: Uuid, branch: Uuid) -> Result<(), String> {
    let url = format!("{}/v1/agents/{log}/branches/{branch}", origin());
    let response = Request::delete(&url).send().await.map_err(network)?;
    if response.ok() {
        return Ok(());
    }
    decode::<serde_json::Value>(response).await.map(|_| ())
}
