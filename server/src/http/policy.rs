//! Who may call which route: a pure table from a request's method and path to what it needs
//! ([`Need`]). The access middleware (`auth.rs`) looks the need up for every request and checks
//! it against the caller before any handler runs, so a handler added without an entry here is
//! reachable by the operator only — closed by default.
//!
//! Routes whose conversation is in the body (the AI SDK's and AG-UI's `POST`s) or in frames
//! (the WebSocket) check it where they read it, with [`crate::http::caller::Caller`].

use axum::http::Method;

use crate::http::token::Scope;

/// What a request needs of its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need<'a> {
    /// Nothing: health checks and the bundle's static files.
    Public,
    /// Any valid credential; what it may see is decided inside (`GET /v1/agents` lists the
    /// token's agents, a WebSocket checks each subscription).
    Anyone,
    /// The operator token.
    Operator,
    /// An agent named in the path, and a scope — or `None` when the handler picks the scope
    /// from the body (a Letta message may be an approval's answer).
    Agent(&'a str, Option<Scope>),
    /// The agent of a run named in the path.
    Run(&'a str, Scope),
    /// The agent of an AI SDK chat id named in the path.
    Chat(&'a str, Scope),
    /// A scope; the handler checks the conversation the body names.
    Scoped(Scope),
    /// The handler checks scope and conversation (both depend on the body).
    Handler,
}

/// The need of `method path?query`.
pub fn need<'a>(method: &Method, path: &'a str, query: Option<&'a str>) -> Need<'a> {
    use Need::*;
    use Scope::{Approve, Produce, Read, Write};
    if path == "/healthz"
        || path == "/readyz"
        || path.starts_with("/pkg/")
        || path == "/favicon.ico"
    {
        return Public;
    }
    let get = *method == Method::GET || *method == Method::HEAD;
    let post = *method == Method::POST;
    let delete = *method == Method::DELETE;
    let put = *method == Method::PUT;
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        ["v1", "ws"] if get => Anyone,
        ["v1", "agents"] | ["v1", "agents", ""] if get => Anyone,
        ["v1", "agents", id] if get => Agent(id, Some(Read)),
        ["v1", "agents", id] if delete => Operator,
        ["v1", "agents", id, "events"] if get => Agent(id, Some(Read)),
        // Branches: seeing them is reading; forking, switching and deleting one is writing to
        // the conversation (its main line and its other branches stay as they are).
        ["v1", "agents", id, "branches"] if get => Agent(id, Some(Read)),
        ["v1", "agents", id, "branches"] if post => Agent(id, Some(Write)),
        ["v1", "agents", id, "branches", _] if delete => Agent(id, Some(Write)),
        ["v1", "agents", id, "current-branch"] if put => Agent(id, Some(Write)),
        ["v1", "agents", id, "events", "stream"] if get => Agent(id, Some(Read)),
        ["v1", "agents", id, "runs"] if post => Agent(id, Some(Write)),
        ["v1", "agents", id, "messages", "cancel"] if post => Agent(id, Some(Write)),
        ["v1", "agents", id, "approvals"] if post => Agent(id, Some(Approve)),
        // A client answering its own tools' calls writes, as a message does.
        ["v1", "agents", id, "tool-results"] if post => Agent(id, Some(Write)),
        ["v1", "agents", id, "produce"] if post => Agent(id, Some(Produce)),
        // An agent's log as a durable stream: read like its events. Other streams are the
        // operator's (the default below).
        ["v1", "streams", "agents", id] if get => Agent(id, Some(Read)),
        ["v1", "agents", id, "producers", _] if get => Agent(id, Some(Produce)),
        ["v1", "agents", id, "messages"] if get => Agent(id, Some(Read)),
        ["v1", "agents", id, "messages"] if post => Agent(id, None),
        ["v1", "agents", id, "messages", "stream"] if post => Agent(id, None),
        ["v1", "runs", run_id] if get => Run(run_id, Read),
        ["v1", "runs", run_id, "stream"] if post => Run(run_id, Read),
        ["v1", "tools"] if get => match query_value(query, "agent_id") {
            Some(agent_id) => Agent(agent_id, Some(Read)),
            None => Operator,
        },
        ["v1", "ai-sdk", "chat"] if post => Handler,
        ["v1", "ai-sdk", "chat", id, "stream"] if get => Chat(id, Read),
        ["v1", "ai-sdk", "chat", id, "messages"] if get => Chat(id, Read),
        ["v1", "ai-sdk", "chat", id, "stop"] if post => Chat(id, Write),
        ["v1", "ai-sdk", "chat", id, "produce"] if post => Chat(id, Produce),
        ["v1", "ag-ui"] if post => Handler,
        ["v1", "ag-ui", "connect"] if post => Scoped(Read),
        ["v1", "ag-ui", "cancel"] if post => Scoped(Write),
        // The Responses API: the agent is in the body (the model, an earlier response, echoed
        // items) or behind a response id; its handlers check scope and reach.
        ["v1", "responses"] if post => Handler,
        ["v1", "responses", _] if get || delete => Handler,
        ["v1", "responses", _, "cancel"] if post => Handler,
        ["v1", "responses", _, "input_items"] if get => Handler,
        // Creating agents, minting tokens, `/v1/stats`, and whatever is not listed above.
        ["v1", ..] => Operator,
        // The pages.
        ["agents", id] | ["agents", id, "history"] | ["agents", id, "runs", _] if get => {
            Agent(id, Some(Read))
        }
        ["agents", id, "runs"] if post => Agent(id, Some(Write)),
        // Prometheus' scrape: the operator's (or on its own listener, `AGENTSTREAM_METRICS_ADDR`).
        ["metrics"] => Operator,
        // The agents page (it lists the caller's agents) and whatever else the site answers.
        _ if get => Anyone,
        _ => Operator,
    }
}

/// A query parameter's raw value (agent ids need no decoding).
fn query_value<'a>(query: Option<&'a str>, name: &str) -> Option<&'a str> {
    query?.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == name && !value.is_empty()).then_some(value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use Need::*;
    use Scope::{Approve, Produce, Read, Write};

    #[test]
    fn every_route_has_its_need() {
        let id = "7c1b7a52-6c1d-4f5e-9a0b-1d2e3f405162";
        let cases: Vec<(Method, String, Need)> = vec![
            (Method::GET, "/healthz".into(), Public),
            (Method::GET, "/readyz".into(), Public),
            (Method::GET, "/pkg/agentstream.wasm".into(), Public),
            (Method::GET, "/v1/ws".into(), Anyone),
            (Method::GET, "/v1/agents".into(), Anyone),
            (Method::GET, "/v1/agents/".into(), Anyone),
            (Method::POST, "/v1/agents".into(), Operator),
            (Method::POST, "/v1/agents/".into(), Operator),
            (Method::GET, format!("/v1/agents/{id}"), Agent(id, Some(Read))),
            (Method::DELETE, format!("/v1/agents/{id}"), Operator),
            (Method::GET, format!("/v1/agents/{id}/branches"), Agent(id, Some(Read))),
            (Method::POST, format!("/v1/agents/{id}/branches"), Agent(id, Some(Write))),
            (Method::DELETE, format!("/v1/agents/{id}/branches/{id}"), Agent(id, Some(Write))),
            (Method::PUT, format!("/v1/agents/{id}/current-branch"), Agent(id, Some(Write))),
            (Method::GET, format!("/v1/agents/{id}/events"), Agent(id, Some(Read))),
            (Method::GET, format!("/v1/agents/{id}/events/stream"), Agent(id, Some(Read))),
            (Method::POST, format!("/v1/agents/{id}/runs"), Agent(id, Some(Write))),
            (Method::POST, format!("/v1/agents/{id}/produce"), Agent(id, Some(Produce))),
            (Method::GET, format!("/v1/streams/agents/{id}"), Agent(id, Some(Read))),
            (Method::POST, format!("/v1/streams/agents/{id}"), Operator),
            (Method::PUT, "/v1/streams/a/b".to_owned(), Operator),
            (Method::GET, "/v1/streams/a/b".to_owned(), Operator),
            (Method::GET, format!("/v1/agents/{id}/producers/worker-1"), Agent(id, Some(Produce))),
            (Method::POST, format!("/v1/agents/{id}/messages/cancel"), Agent(id, Some(Write))),
            (Method::POST, format!("/v1/agents/{id}/approvals"), Agent(id, Some(Approve))),
            (Method::POST, format!("/v1/agents/{id}/tool-results"), Agent(id, Some(Write))),
            (Method::GET, format!("/v1/agents/{id}/messages"), Agent(id, Some(Read))),
            (Method::POST, format!("/v1/agents/{id}/messages"), Agent(id, None)),
            (Method::POST, format!("/v1/agents/{id}/messages/stream"), Agent(id, None)),
            (Method::GET, format!("/v1/runs/{id}"), Run(id, Read)),
            (Method::POST, format!("/v1/runs/{id}/stream"), Run(id, Read)),
            (Method::GET, "/v1/stats".into(), Operator),
            (Method::GET, "/metrics".into(), Operator),
            (Method::POST, "/v1/tokens".into(), Operator),
            (Method::GET, "/v1/tools".into(), Operator),
            (Method::POST, "/v1/ai-sdk/chat".into(), Handler),
            (Method::POST, "/v1/responses".into(), Handler),
            (Method::GET, "/v1/responses/resp_1".into(), Handler),
            (Method::DELETE, "/v1/responses/resp_1".into(), Handler),
            (Method::POST, "/v1/responses/resp_1/cancel".into(), Handler),
            (Method::GET, "/v1/responses/resp_1/input_items".into(), Handler),
            (Method::PUT, "/v1/responses/resp_1".into(), Operator),
            (Method::GET, "/v1/ai-sdk/chat/my-chat/stream".into(), Chat("my-chat", Read)),
            (Method::GET, "/v1/ai-sdk/chat/my-chat/messages".into(), Chat("my-chat", Read)),
            (Method::POST, "/v1/ai-sdk/chat/my-chat/stop".into(), Chat("my-chat", Write)),
            (Method::POST, "/v1/ag-ui".into(), Handler),
            (Method::POST, "/v1/ag-ui/connect".into(), Scoped(Read)),
            (Method::POST, "/v1/ag-ui/cancel".into(), Scoped(Write)),
            (Method::GET, "/v1/no-such-route".into(), Operator),
            (Method::PUT, format!("/v1/agents/{id}"), Operator),
            (Method::GET, "/".into(), Anyone),
            (Method::GET, format!("/agents/{id}"), Agent(id, Some(Read))),
            (Method::GET, format!("/agents/{id}/history"), Agent(id, Some(Read))),
            (Method::GET, format!("/agents/{id}/runs/{id}"), Agent(id, Some(Read))),
            (Method::POST, "/agents".into(), Operator),
            (Method::POST, format!("/agents/{id}/runs"), Agent(id, Some(Write))),
        ];
        for (method, path, expected) in &cases {
            assert_eq!(need(method, path, None), *expected, "{method} {path}");
        }
        assert_eq!(
            need(&Method::GET, "/v1/tools", Some(&format!("agent_id={id}"))),
            Agent(id, Some(Read))
        );
    }
}
