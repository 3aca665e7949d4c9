//! The MCP servers this server process may use, read from the file `AGENTSTREAM_MCP_CONFIG`
//! names, in the shape MCP clients share: `{"mcpServers": {name: {command, args?, env?} |
//! {url, headers?}}}`, plus `requires_approval` per server (`true`: every tool of it; a list:
//! those tools) — its calls then wait for a person, whichever agent makes them. Pure; every
//! refusal names the server and what was wrong.

use std::collections::BTreeMap;

use serde_json::Value;

/// Servers in one config file at most.
pub const MCP_SERVERS_MAX: usize = 32;
/// Characters of a server's name, at most (`[A-Za-z0-9_-]`).
pub const MCP_SERVER_NAME_CHARS_MAX: usize = 64;

/// How to reach one MCP server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerConfig {
    /// A child process speaking MCP over stdin/stdout.
    Stdio { command: String, args: Vec<String>, env: BTreeMap<String, String> },
    /// A streamable HTTP endpoint (`https://`, or `http://` on a trusted network).
    Http { url: String, headers: BTreeMap<String, String> },
}

/// Which tools of a server wait for a person's approval.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Approval {
    #[default]
    None,
    All,
    Tools(Vec<String>),
}

impl Approval {
    pub fn covers(&self, tool: &str) -> bool {
        match self {
            Approval::None => false,
            Approval::All => true,
            Approval::Tools(tools) => tools.iter().any(|name| name == tool),
        }
    }
}

/// The configured servers, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct McpConfig {
    pub servers: BTreeMap<String, ServerConfig>,
    /// `requires_approval` of the servers that have it.
    pub approvals: BTreeMap<String, Approval>,
}

impl McpConfig {
    /// Reads a config file's text.
    pub fn parse(text: &str) -> Result<McpConfig, String> {
        let root: Value =
            serde_json::from_str(text).map_err(|error| format!("not JSON: {error}"))?;
        let servers = root
            .get("mcpServers")
            .and_then(Value::as_object)
            .ok_or("it needs \"mcpServers\": an object of servers by name")?;
        if servers.len() > MCP_SERVERS_MAX {
            return Err(format!("{} servers: at most {MCP_SERVERS_MAX} are served", servers.len()));
        }
        let mut config = McpConfig::default();
        for (name, server) in servers {
            let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
            if name.is_empty()
                || name.chars().count() > MCP_SERVER_NAME_CHARS_MAX
                || !name.chars().all(allowed)
            {
                return Err(format!(
                    "server {name:?}: a name is 1–{MCP_SERVER_NAME_CHARS_MAX} characters of A–Z, a–z, 0–9, _ and -"
                ));
            }
            let approval = read_approval(server.get("requires_approval"))
                .map_err(|why| format!("server {name:?}: {why}"))?;
            let server = read_server(server).map_err(|why| format!("server {name:?}: {why}"))?;
            config.servers.insert(name.clone(), server);
            if approval != Approval::None {
                config.approvals.insert(name.clone(), approval);
            }
        }
        Ok(config)
    }
}

fn read_approval(value: Option<&Value>) -> Result<Approval, String> {
    match value {
        None | Some(Value::Bool(false)) => Ok(Approval::None),
        Some(Value::Bool(true)) => Ok(Approval::All),
        Some(Value::Array(names)) if names.iter().all(Value::is_string) => {
            Ok(Approval::Tools(names.iter().filter_map(Value::as_str).map(str::to_owned).collect()))
        }
        Some(_) => Err("requires_approval must be true, false or a list of tool names".into()),
    }
}

fn read_server(server: &Value) -> Result<ServerConfig, String> {
    let object = server.as_object().ok_or("must be an object")?;
    let text = |key: &str| -> Result<Option<String>, String> {
        match object.get(key) {
            None => Ok(None),
            Some(Value::String(text)) if !text.trim().is_empty() => Ok(Some(text.clone())),
            Some(_) => Err(format!("{key} must be a non-empty string")),
        }
    };
    let strings = |key: &str| -> Result<BTreeMap<String, String>, String> {
        match object.get(key) {
            None => Ok(BTreeMap::new()),
            Some(Value::Object(entries)) => entries
                .iter()
                .map(|(name, value)| match value {
                    Value::String(value) => Ok((name.clone(), value.clone())),
                    _ => Err(format!("{key}.{name} must be a string")),
                })
                .collect(),
            Some(_) => Err(format!("{key} must be an object of strings")),
        }
    };
    match (text("command")?, text("url")?) {
        (Some(command), None) => {
            let args = match object.get("args") {
                None => Vec::new(),
                Some(Value::Array(args)) => args
                    .iter()
                    .map(|arg| arg.as_str().map(str::to_owned).ok_or("args must be strings"))
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err("args must be an array of strings".into()),
            };
            Ok(ServerConfig::Stdio { command, args, env: strings("env")? })
        }
        (None, Some(url)) => {
            // https is verified against the system's certificates (rustls; `SSL_CERT_FILE`
            // names others); http:// sends headers such as `Authorization` in clear, so it is
            // for a local or trusted network.
            if !url.starts_with("http://") && !url.starts_with("https://") {
                return Err(format!("url {url:?} must start with https:// or http://"));
            }
            Ok(ServerConfig::Http { url, headers: strings("headers")? })
        }
        (Some(_), Some(_)) => Err("give either command (stdio) or url (HTTP), not both".into()),
        (None, None) => Err("give command (stdio) or url (HTTP)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn configs_are_read_or_refused_with_the_reason() {
        let config = McpConfig::parse(
            &json!({ "mcpServers": {
                "everything": { "command": "node", "args": ["index.js", "stdio"], "env": { "A": "1" } },
                "remote_1": { "url": "http://127.0.0.1:3001/mcp", "headers": { "Authorization": "Bearer t" } },
            }})
            .to_string(),
        )
        .unwrap();
        assert_eq!(
            config.servers["everything"],
            ServerConfig::Stdio {
                command: "node".into(),
                args: vec!["index.js".into(), "stdio".into()],
                env: [("A".to_owned(), "1".to_owned())].into(),
            }
        );
        assert_eq!(
            config.servers["remote_1"],
            ServerConfig::Http {
                url: "http://127.0.0.1:3001/mcp".into(),
                headers: [("Authorization".to_owned(), "Bearer t".to_owned())].into(),
            }
        );
        let refused = [
            ("{", "not JSON"),
            ("{}", "mcpServers"),
            (r#"{"mcpServers": {"a b": {"command": "x"}}}"#, "a name is"),
            (r#"{"mcpServers": {"a": 5}}"#, "must be an object"),
            (r#"{"mcpServers": {"a": {}}}"#, "give command"),
            (r#"{"mcpServers": {"a": {"command": "x", "url": "http://h"}}}"#, "not both"),
            (r#"{"mcpServers": {"a": {"command": "x", "args": "y"}}}"#, "args must be"),
            (r#"{"mcpServers": {"a": {"command": "x", "args": [1]}}}"#, "args must be strings"),
            (r#"{"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}}"#, "env.K"),
            (r#"{"mcpServers": {"a": {"url": "ftp://h"}}}"#, "https:// or http://"),
            (r#"{"mcpServers": {"a": {"command": " "}}}"#, "non-empty"),
        ];
        for (text, reason) in refused {
            let error = McpConfig::parse(text).expect_err(text);
            assert!(error.contains(reason), "{text}: {error}");
        }
        let many: serde_json::Map<String, Value> = (0..=MCP_SERVERS_MAX)
            .map(|index| (format!("s{index}"), json!({ "command": "x" })))
            .collect();
        let error = McpConfig::parse(&json!({ "mcpServers": many }).to_string()).unwrap_err();
        assert!(error.contains("at most"), "{error}");
    }
}

#[cfg(test)]
mod approval_tests {
    use super::*;

    #[test]
    fn a_server_names_the_tools_that_wait_for_a_person() {
        let text = r#"{"mcpServers": {
            "all": {"command": "x", "requires_approval": true},
            "some": {"command": "x", "requires_approval": ["get-sum"]},
            "none": {"command": "x", "requires_approval": false},
            "plain": {"command": "x"}
        }}"#;
        let config = McpConfig::parse(text).unwrap();
        assert!(config.approvals["all"].covers("anything"));
        assert!(config.approvals["some"].covers("get-sum"));
        assert!(!config.approvals["some"].covers("echo"));
        assert!(!config.approvals.contains_key("none"));
        assert!(!config.approvals.contains_key("plain"));
        for bad in [r#""yes""#, "[1]", "{}"] {
            let text = format!(
                r#"{{"mcpServers": {{"a": {{"command": "x", "requires_approval": {bad}}}}}}}"#
            );
            let error = McpConfig::parse(&text).unwrap_err();
            assert!(error.contains("requires_approval must be"), "{bad}: {error}");
        }
    }
}
