//! One MCP server, through the official SDK (`rmcp`): connected on first use and shared by every
//! run, its tool list cached until the server says it changed, reconnected after a failure with
//! a bounded backoff. A call carries a progress token (the server's progress notifications go to
//! the caller), is cancelled with `notifications/cancelled` when the run is, and has a timeout.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue};
use futures::StreamExt;
use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, ProgressNotificationParam, ServerResult,
};
use rmcp::service::{
    MaybeSendFuture, NotificationContext, PeerRequestOptions, RoleClient, RunningService,
    ServiceError,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{json, Value};
use tokio::sync::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::config::ServerConfig;
use crate::metrics::{McpSession, Metrics};
use crate::tools::ProgressSender;

/// The first wait before reconnecting to a server that failed; it doubles up to the max.
pub const MCP_RECONNECT_DELAY_MS: u64 = 250;
/// The longest wait before reconnecting to a server that keeps failing.
pub const MCP_RECONNECT_DELAY_MAX_MS: u64 = 30_000;
/// How long connecting (spawning, the MCP handshake) and listing tools may take.
pub const MCP_CONNECT_TIMEOUT_MS: u64 = 15_000;

/// What the SDK calls back: progress goes to the call that asked for it; a changed tool list is
/// read again before the next run uses it.
#[derive(Clone, Default)]
struct Handler {
    progress: ProgressDispatcher,
    tools_changed: Arc<AtomicBool>,
}

impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.handle_notification(params).await
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + MaybeSendFuture + '_ {
        self.tools_changed.store(true, Ordering::Release);
        std::future::ready(())
    }
}

/// A tool as the server lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct ListedTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

#[derive(Default)]
struct State {
    service: Option<Arc<RunningService<RoleClient, Handler>>>,
    handler: Handler,
    tools: Option<Vec<ListedTool>>,
    /// Failures in a row, and when the next attempt may be made.
    failures: u32,
    retry_at: Option<Instant>,
    /// A session was open before: the next one is a reconnect.
    connected_before: bool,
}

/// One configured MCP server.
pub struct Connection {
    name: String,
    config: ServerConfig,
    call_timeout: Duration,
    state: Mutex<State>,
    metrics: Arc<Metrics>,
}

impl Connection {
    pub fn new(
        name: String,
        config: ServerConfig,
        call_timeout: Duration,
        metrics: Arc<Metrics>,
    ) -> Connection {
        Connection { name, config, call_timeout, state: Mutex::new(State::default()), metrics }
    }

    /// Lets go of the current session (the next use connects again).
    fn drop_session(&self, state: &mut State) {
        if state.service.take().is_some() {
            self.metrics.mcp_session(&self.name, McpSession::Closed);
        }
        state.tools = None;
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The running service, connecting first if there is none (or the last one stopped).
    async fn service(&self) -> Result<(Arc<RunningService<RoleClient, Handler>>, Handler), String> {
        let mut state = self.state.lock().await;
        if let Some(service) = &state.service {
            if !service.is_closed() {
                return Ok((service.clone(), state.handler.clone()));
            }
            self.drop_session(&mut state);
        }
        if let Some(retry_at) = state.retry_at {
            if Instant::now() < retry_at {
                return Err(format!(
                    "MCP server {} is down; the next attempt to reach it is in {} ms",
                    self.name,
                    (retry_at - Instant::now()).as_millis()
                ));
            }
        }
        let handler = Handler::default();
        let connected = tokio::time::timeout(
            Duration::from_millis(MCP_CONNECT_TIMEOUT_MS),
            self.connect(handler.clone()),
        )
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {MCP_CONNECT_TIMEOUT_MS} ms")));
        match connected {
            Ok(service) => {
                let service = Arc::new(service);
                let reconnect = std::mem::replace(&mut state.connected_before, true);
                self.metrics.mcp_session(&self.name, McpSession::Opened { reconnect });
                state.service = Some(service.clone());
                state.handler = handler.clone();
                state.tools = None;
                state.failures = 0;
                state.retry_at = None;
                Ok((service, handler))
            }
            Err(error) => {
                state.failures = state.failures.saturating_add(1);
                let delay = MCP_RECONNECT_DELAY_MS
                    .saturating_mul(1 << state.failures.min(16).saturating_sub(1))
                    .min(MCP_RECONNECT_DELAY_MAX_MS);
                state.retry_at = Some(Instant::now() + Duration::from_millis(delay));
                tracing::warn!(server = %self.name, %error, "MCP server unreachable");
                Err(format!("MCP server {} is unreachable: {error}", self.name))
            }
        }
    }

    async fn connect(
        &self,
        handler: Handler,
    ) -> Result<RunningService<RoleClient, Handler>, String> {
        match &self.config {
            ServerConfig::Stdio { command, args, env } => {
                let mut process = tokio::process::Command::new(command);
                // PATH, HOME and the config's `env`: none of the server's secrets.
                crate::child_env::clean(&mut process, &[]);
                process.args(args).envs(env).kill_on_drop(true);
                let (transport, _) = TokioChildProcess::builder(process)
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .map_err(|error| format!("cannot start {command:?}: {error}"))?;
                handler
                    .serve(transport)
                    .await
                    .map_err(|error| format!("the MCP handshake failed: {error}"))
            }
            ServerConfig::Http { url, headers } => {
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                for (name, value) in headers {
                    let bearer = value.strip_prefix("Bearer ");
                    match bearer.filter(|_| name.eq_ignore_ascii_case("authorization")) {
                        Some(token) => config.auth_header = Some(token.to_owned()),
                        None => {
                            let name = HeaderName::from_bytes(name.as_bytes())
                                .map_err(|error| format!("header {name:?}: {error}"))?;
                            let value = HeaderValue::from_str(value)
                                .map_err(|error| format!("header {name}: {error}"))?;
                            config.custom_headers.insert(name, value);
                        }
                    }
                }
                // No redirects (rmcp's default follows same-origin 307/308 only) and no idle
                // pool (a reused connection stalls on delayed ACKs); TLS verified against the
                // system's certificates.
                let client = crate::http_client::builder()
                    .pool_max_idle_per_host(0)
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|error| {
                        let why = crate::http_client::describe(&error);
                        format!("cannot set up a client for {url}: {why}")
                    })?;
                handler
                    .serve(StreamableHttpClientTransport::with_client(client, config))
                    .await
                    .map_err(|error| format!("the MCP handshake with {url} failed: {error}"))
            }
        }
    }

    /// Drops `service` if it is still the current one: the next use connects again.
    async fn forget(&self, service: &Arc<RunningService<RoleClient, Handler>>) {
        let mut state = self.state.lock().await;
        if state.service.as_ref().is_some_and(|current| Arc::ptr_eq(current, service)) {
            self.drop_session(&mut state);
        }
    }

    /// The server's tools (cached; read again after the server said they changed). A server
    /// found gone is connected again, once.
    pub async fn tools(&self) -> Result<Vec<ListedTool>, String> {
        match self.tools_once().await {
            Err(Gone(service)) => {
                self.forget(&service).await;
                self.tools_once().await.map_err(String::from)
            }
            other => other.map_err(String::from),
        }
    }

    async fn tools_once(&self) -> Result<Vec<ListedTool>, Failure> {
        let (service, handler) = self.service().await.map_err(Failure::Other)?;
        let changed = handler.tools_changed.swap(false, Ordering::AcqRel);
        if !changed {
            if let Some(tools) = &self.state.lock().await.tools {
                return Ok(tools.clone());
            }
        }
        let listed = tokio::time::timeout(
            Duration::from_millis(MCP_CONNECT_TIMEOUT_MS),
            service.peer().list_all_tools(),
        )
        .await
        .map_err(|_| {
            Failure::Other(format!("MCP server {} did not list its tools in time", self.name))
        })?;
        let listed = match listed {
            Ok(listed) => listed,
            Err(ServiceError::TransportClosed) => return Err(Gone(service)),
            Err(error) => {
                return Err(Failure::Other(format!(
                    "MCP server {} could not list its tools: {error}",
                    self.name
                )))
            }
        };
        let tools: Vec<ListedTool> = listed
            .into_iter()
            .map(|tool| ListedTool {
                name: tool.name.to_string(),
                description: tool.description.map(|text| text.to_string()).unwrap_or_default(),
                input_schema: Value::Object((*tool.input_schema).clone()),
            })
            .collect();
        self.state.lock().await.tools = Some(tools.clone());
        Ok(tools)
    }

    /// Calls tool `name` with `input`; progress notifications go to `progress`; `cancel` sends
    /// the server `notifications/cancelled`. A server that is down, a timeout, a cancel and a
    /// tool's own error all end as an error sentence (a tool error, never a failed run).
    pub async fn call(
        &self,
        name: &str,
        input: Value,
        progress: ProgressSender,
        cancel: CancellationToken,
    ) -> Result<Value, String> {
        let arguments = match input {
            Value::Object(arguments) => Some(arguments),
            Value::Null => None,
            other => return Err(format!("the input must be a JSON object, not {other}")),
        };
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = arguments;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // A server found gone before the call was sent is connected again, once.
        let mut attempt = 0;
        let (service, handler, mut handle) = loop {
            attempt += 1;
            let (service, handler) = self.service().await?;
            match service
                .peer()
                .send_cancellable_request(request.clone(), PeerRequestOptions::no_options())
                .await
            {
                Ok(handle) => break (service, handler, handle),
                Err(ServiceError::TransportClosed) if attempt == 1 => self.forget(&service).await,
                Err(error) => return Err(format!("MCP server {} went away: {error}", self.name)),
            }
        };
        let mut reports = handler.progress.subscribe(handle.progress_token.clone()).await;
        let deadline = tokio::time::sleep(self.call_timeout);
        tokio::pin!(deadline);
        let answer = loop {
            tokio::select! {
                answer = &mut handle.rx => break answer,
                Some(report) = reports.next() => {
                    let _ = progress.try_send(progress_report(&report));
                }
                _ = cancel.cancelled() => {
                    let _ = handle.cancel(Some("the run was cancelled".into())).await;
                    return Err("cancelled: the run was cancelled".into());
                }
                _ = &mut deadline => {
                    let _ = handle.cancel(Some("timed out".into())).await;
                    return Err(format!(
                        "{name} on MCP server {} gave no answer within {} ms",
                        self.name,
                        self.call_timeout.as_millis()
                    ));
                }
            }
        };
        match answer {
            Ok(Ok(ServerResult::CallToolResult(result))) => {
                let value = super::result::result_value(&result);
                if result.is_error == Some(true) {
                    Err(match value {
                        Value::String(text) => text,
                        other => other.to_string(),
                    })
                } else {
                    Ok(value)
                }
            }
            Ok(Ok(_)) => Err(format!("MCP server {} answered with something else", self.name)),
            Ok(Err(ServiceError::TransportClosed)) | Err(_) => {
                self.forget(&service).await;
                Err(format!("MCP server {} went away during the call", self.name))
            }
            Ok(Err(error)) => Err(format!("{name} on MCP server {} failed: {error}", self.name)),
        }
    }
}

/// Why listing failed: the connection was found closed (connect again), or anything else.
enum Failure {
    Gone(Arc<RunningService<RoleClient, Handler>>),
    Other(String),
}
use Failure::Gone;

impl From<Failure> for String {
    fn from(failure: Failure) -> String {
        match failure {
            Failure::Gone(_) => "the MCP server's connection closed".into(),
            Failure::Other(message) => message,
        }
    }
}

/// A progress notification as the merge into the call's card (`progress`, as the built-ins
/// report it, and the server's message).
fn progress_report(report: &ProgressNotificationParam) -> Value {
    let done = match report.total {
        Some(total) => format!("{}/{}", report.progress, total),
        None => report.progress.to_string(),
    };
    match &report.message {
        Some(message) => json!({ "progress": done, "progress_message": cut_progress(message) }),
        None => json!({ "progress": done }),
    }
}

/// A progress message longer than this (in characters) is cut: the SDK takes lines of up to
/// 16 MiB, and every report is an event of the log.
pub const PROGRESS_MESSAGE_CHARS_MAX: usize = 1_000;

fn cut_progress(message: &str) -> String {
    match message.char_indices().nth(PROGRESS_MESSAGE_CHARS_MAX) {
        Some((end, _)) => format!("{} …", &message[..end]),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_messages_are_cut() {
        let report = |message: Option<String>, total: Option<f64>| {
            serde_json::from_value::<ProgressNotificationParam>(json!({
                "progressToken": "t", "progress": 3, "total": total, "message": message,
            }))
            .unwrap()
        };
        let long = "é".repeat(PROGRESS_MESSAGE_CHARS_MAX + 5);
        let kept = format!("{} …", "é".repeat(PROGRESS_MESSAGE_CHARS_MAX));
        let cases = [
            (report(None, None), json!({"progress": "3"})),
            (
                report(Some("copying".into()), Some(10.0)),
                json!({"progress": "3/10", "progress_message": "copying"}),
            ),
            (report(Some(long), None), json!({"progress": "3", "progress_message": kept})),
        ];
        for (report, expected) in cases {
            assert_eq!(progress_report(&report), expected);
        }
    }
}
