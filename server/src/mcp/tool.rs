//! An MCP server's tool as one of the agent's tools (what a call's result becomes: `result.rs`).

use std::sync::Arc;

use super::connection::{Connection, ListedTool};
use crate::provider::ToolSpec;
use crate::tools::{Tool, ToolCall, ToolFuture};

/// A tool of an MCP server; its calls go to that server.
pub struct McpTool {
    pub(super) listed: ListedTool,
    pub(super) connection: Arc<Connection>,
    /// The config file says its calls wait for a person.
    pub(super) requires_approval: bool,
}

impl Tool for McpTool {
    fn requires_approval(&self) -> bool {
        self.requires_approval
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.listed.name.clone(),
            description: self.listed.description.clone(),
            input_schema: self.listed.input_schema.clone(),
        }
    }

    fn call(&self, call: ToolCall) -> ToolFuture {
        let connection = self.connection.clone();
        let name = self.listed.name.clone();
        Box::pin(async move {
            // The error becomes a tool result every client reads: addresses cut to their host
            // (an MCP server's URL may carry a key). The server's own result text is its own.
            connection
                .call(&name, call.input, call.progress, call.cancel)
                .await
                .map_err(|error| crate::redact::urls(&error))
        })
    }
}
