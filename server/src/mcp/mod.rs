//! MCP servers as the agent's tools, through the official Rust SDK (`rmcp`). The servers are
//! configured once per server process (`AGENTSTREAM_MCP_CONFIG`, [`config`]); an agent picks
//! whose tools it gets with `metadata.mcp_servers: ["name", …]` and keeps the built-ins. A
//! server is connected on first use and shared ([`connection`]); a server that is down leaves
//! its tools out of the run's list and makes calls to it tool errors — never a failed run.
//!
//! May use: the tool trait and the provider's tool spec. Used by the agent (a run's tools) and
//! the HTTP layer (`GET /v1/tools`).

pub mod config;
pub mod connection;
pub mod result;
pub mod tool;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

pub use config::{McpConfig, ServerConfig};
use connection::Connection;
use tool::McpTool;

use crate::tools::Tool;

/// Servers one agent may name at most.
pub const AGENT_MCP_SERVERS_MAX: usize = 16;

/// The configured MCP servers of this process.
#[derive(Default)]
pub struct McpHub {
    connections: BTreeMap<String, Arc<Connection>>,
    /// Which tools of each server wait for a person's approval (the config's
    /// `requires_approval`).
    approvals: BTreeMap<String, config::Approval>,
}

/// A tool an agent can see, and where it comes from (`None`: built in).
pub struct VisibleTool {
    pub tool: Arc<dyn Tool>,
    pub server: Option<String>,
}

impl McpHub {
    pub fn new(config: &McpConfig, call_timeout: Duration) -> McpHub {
        McpHub::observed(config, call_timeout, Arc::new(crate::metrics::Metrics::new()))
    }

    /// [`McpHub::new`], counting sessions and reconnects into the server's `metrics`.
    pub fn observed(
        config: &McpConfig,
        call_timeout: Duration,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> McpHub {
        let connections = config
            .servers
            .iter()
            .map(|(name, server)| {
                let connection =
                    Connection::new(name.clone(), server.clone(), call_timeout, metrics.clone());
                (name.clone(), Arc::new(connection))
            })
            .collect();
        McpHub { connections, approvals: config.approvals.clone() }
    }

    /// The names of the configured servers.
    pub fn server_names(&self) -> Vec<String> {
        self.connections.keys().cloned().collect()
    }

    pub fn is_configured(&self, name: &str) -> bool {
        self.connections.contains_key(name)
    }

    /// The tools of agent with `metadata`: the built-ins, then the tools of the MCP servers it
    /// names, in its order. A name already taken (by a built-in or an earlier server) keeps
    /// its first owner; a server that cannot be reached is left out (its calls would fail).
    pub async fn tools_for(
        &self,
        builtins: &[Arc<dyn Tool>],
        metadata: &Value,
    ) -> Vec<VisibleTool> {
        let mut seen: HashSet<String> = HashSet::new();
        let mut visible: Vec<VisibleTool> = Vec::new();
        for tool in builtins {
            seen.insert(tool.spec().name);
            visible.push(VisibleTool { tool: tool.clone(), server: None });
        }
        for name in agent_servers(metadata) {
            let Some(connection) = self.connections.get(&name) else {
                continue;
            };
            match connection.tools().await {
                Ok(listed) => {
                    for listed in listed {
                        if !seen.insert(listed.name.clone()) {
                            tracing::warn!(server = %name, tool = %listed.name, "tool name taken: left out");
                            continue;
                        }
                        let requires_approval = self
                            .approvals
                            .get(&name)
                            .is_some_and(|approval| approval.covers(&listed.name));
                        visible.push(VisibleTool {
                            tool: Arc::new(McpTool {
                                listed,
                                connection: connection.clone(),
                                requires_approval,
                            }),
                            server: Some(name.clone()),
                        });
                    }
                }
                Err(error) => tracing::warn!(server = %name, %error, "MCP tools left out"),
            }
        }
        visible
    }
}

/// The MCP servers an agent's metadata names (`mcp_servers`), at most
/// [`AGENT_MCP_SERVERS_MAX`], without repeats.
pub fn agent_servers(metadata: &Value) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for name in metadata
        .get("mcp_servers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !names.iter().any(|known| known == name) && names.len() < AGENT_MCP_SERVERS_MAX {
            names.push(name.to_owned());
        }
    }
    names
}

/// Why an agent's `mcp_servers` cannot be served: not a list of names, or a name this server
/// has no configuration for.
pub fn check_agent_servers(hub: &McpHub, metadata: &Value) -> Result<(), String> {
    let Some(servers) = metadata.get("mcp_servers") else {
        return Ok(());
    };
    let names = servers
        .as_array()
        .filter(|names| names.iter().all(Value::is_string))
        .ok_or("metadata.mcp_servers must be a list of MCP server names")?;
    if names.len() > AGENT_MCP_SERVERS_MAX {
        return Err(format!(
            "metadata.mcp_servers names more than {AGENT_MCP_SERVERS_MAX} servers"
        ));
    }
    for name in names.iter().filter_map(Value::as_str) {
        if !hub.is_configured(name) {
            let known = hub.server_names();
            return Err(format!(
                "metadata.mcp_servers: no MCP server {name:?} is configured (configured: {})",
                if known.is_empty() {
                    "none; see AGENTSTREAM_MCP_CONFIG".to_owned()
                } else {
                    known.join(", ")
                }
            ));
        }
    }
    Ok(())
}
