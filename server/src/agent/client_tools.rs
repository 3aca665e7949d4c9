//! Tools that run in the client: an AI SDK tool without `execute`, an AG-UI frontend tool
//! (CopilotKit's `useCopilotAction`), a Letta client tool, the live view's demo tools.
//!
//! A request gives them (name, description, JSON Schema of the input); the model sees them
//! beside the agent's own tools; a call to one is never run here. It waits in the log like an
//! approval request (`approval_requested` with `client: true`, see `approval.rs`), the run ends
//! `requires_client_tool`, and the client's result — posted once, from any tab, after any reload
//! or restart — starts the continuation. The tools a run was given are kept in its
//! `run_started` (`metadata.client_tools`), so a continuation started without them (a timeout,
//! a surface whose answer carries no tools) offers the model the same ones.
//!
//! The parsing here is pure: every refusal names the tool and what was wrong.

use serde_json::{json, Value};

use super::approval::ApprovalDecision;
use super::start_error::StartError;
use crate::provider::ToolSpec;
use crate::tools::{Tool, ToolCall, ToolFuture};

/// Client tools one request may give.
pub const CLIENT_TOOLS_PER_RUN_MAX: usize = 64;
/// A client tool's name: 1 to this many characters of `A-Z a-z 0-9 _ -` (what every provider
/// takes as a tool name).
pub const CLIENT_TOOL_NAME_CHARS_MAX: usize = 64;
/// A client tool's description longer than this (in characters) is refused.
pub const CLIENT_TOOL_DESCRIPTION_CHARS_MAX: usize = 4096;
/// All of a request's client tools as JSON (names, descriptions, schemas) over this many bytes
/// are refused: they are kept in the run's `run_started` and sent to the model at every step.
pub const CLIENT_TOOLS_BYTES_MAX: usize = 64 * 1024;
/// The metadata field of `run_started` that keeps a run's client tools.
pub const METADATA_FIELD: &str = "client_tools";

/// A tool the client runs: its spec, and nothing to call.
pub struct ClientTool(pub ToolSpec);

impl Tool for ClientTool {
    fn spec(&self) -> ToolSpec {
        self.0.clone()
    }

    fn runs_in_client(&self) -> bool {
        true
    }

    fn call(&self, _: ToolCall) -> ToolFuture {
        // Never reached: the run holds these calls for the client.
        Box::pin(async { Err("this tool runs in the client".to_owned()) })
    }
}

/// Reads a request's client tools: a list of `{name, description?, parameters?}` (AG-UI's
/// `Tool`, Letta's `ClientToolSchema`; `inputSchema` / `input_schema` are taken for
/// `parameters`). A missing schema is an object with no properties. `null` is no tools.
pub fn parse(value: &Value) -> Result<Vec<ToolSpec>, String> {
    let tools = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Array(tools) => tools,
        _ => return Err("client tools must be a list of {name, description, parameters}".into()),
    };
    if tools.len() > CLIENT_TOOLS_PER_RUN_MAX {
        return Err(format!(
            "{} client tools given; at most {CLIENT_TOOLS_PER_RUN_MAX} are taken",
            tools.len()
        ));
    }
    if value.to_string().len() > CLIENT_TOOLS_BYTES_MAX {
        return Err(format!("the client tools are over {CLIENT_TOOLS_BYTES_MAX} bytes of JSON"));
    }
    let mut specs: Vec<ToolSpec> = Vec::with_capacity(tools.len());
    for (index, tool) in tools.iter().enumerate() {
        let spec = parse_one(tool).map_err(|why| format!("client tool {index}: {why}"))?;
        if specs.iter().any(|other| other.name == spec.name) {
            return Err(format!("client tool {:?} is given twice", spec.name));
        }
        specs.push(spec);
    }
    Ok(specs)
}

fn parse_one(tool: &Value) -> Result<ToolSpec, String> {
    let tool = tool.as_object().ok_or("must be an object")?;
    let name = tool.get("name").and_then(Value::as_str).ok_or("needs a name (a string)")?;
    let valid = |character: char| character.is_ascii_alphanumeric() || "_-".contains(character);
    if name.is_empty()
        || name.chars().count() > CLIENT_TOOL_NAME_CHARS_MAX
        || !name.chars().all(valid)
    {
        return Err(format!(
            "name {name:?} must be 1 to {CLIENT_TOOL_NAME_CHARS_MAX} characters of A-Z a-z 0-9 _ -"
        ));
    }
    let description = match tool.get("description") {
        None | Some(Value::Null) => "",
        Some(Value::String(text)) => text.as_str(),
        Some(_) => return Err(format!("{name}: description must be a string")),
    };
    if description.chars().count() > CLIENT_TOOL_DESCRIPTION_CHARS_MAX {
        return Err(format!(
            "{name}: description is over {CLIENT_TOOL_DESCRIPTION_CHARS_MAX} characters"
        ));
    }
    let schema = ["parameters", "inputSchema", "input_schema"]
        .iter()
        .find_map(|field| tool.get(*field).filter(|value| !value.is_null()));
    let input_schema = match schema {
        None => json!({ "type": "object", "properties": {} }),
        Some(schema @ Value::Object(fields))
            if fields.get("type").is_none_or(|kind| kind == "object") =>
        {
            let mut schema = schema.clone();
            schema["type"] = json!("object");
            schema
        }
        Some(_) => {
            return Err(format!(
            "{name}: parameters must be a JSON Schema of an object ({{\"type\": \"object\", …}})"
        ))
        }
    };
    Ok(ToolSpec { name: name.to_owned(), description: description.to_owned(), input_schema })
}

/// Refuses client tools named like one of the agent's own (`server_names`): a call could not
/// say which one it meant.
pub fn check_names<'a>(
    specs: &[ToolSpec],
    server_names: impl IntoIterator<Item = &'a str>,
) -> Result<(), String> {
    let server: Vec<&str> = server_names.into_iter().collect();
    match specs.iter().find(|spec| server.contains(&spec.name.as_str())) {
        Some(spec) => {
            Err(format!("client tool {:?} has the name of one of the agent's own tools", spec.name))
        }
        None => Ok(()),
    }
}

/// A tool call's outcome as a client holds it: its output, or its error text.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutput {
    pub tool_call_id: String,
    pub output: Result<Value, String>,
}

/// The outputs of `outputs` that answer client tools' calls still waiting in the log, as
/// answers. A client's message list holds every output of its turn; those answered before are
/// passed over — unless nothing else is left: then the answer came twice (409), or answers
/// nothing that waits for a client (the caller says so).
pub fn answers(
    timeline: &app::timeline::Timeline,
    outputs: &[ToolOutput],
) -> Result<Vec<ApprovalDecision>, StartError> {
    let requests: Vec<_> =
        app::approvals::approvals(timeline).into_iter().filter(|request| request.client).collect();
    let mut answers = Vec::new();
    let mut answered_before = None;
    for output in outputs {
        let Some(request) =
            requests.iter().find(|request| request.tool_call_id == output.tool_call_id)
        else {
            continue;
        };
        if request.state == app::approvals::ApprovalState::Pending {
            answers.push(ApprovalDecision::returned(
                output.tool_call_id.clone(),
                output.output.clone(),
            ));
        } else {
            answered_before = Some(output.tool_call_id.clone());
        }
    }
    match (answers.is_empty(), answered_before) {
        (true, Some(tool_call_id)) => Err(StartError::AlreadyAnswered {
            tool_call_id,
            answer: "the client's result is in the log".to_owned(),
        }),
        _ => Ok(answers),
    }
}

/// The client tools as `run_started` keeps them.
pub fn to_metadata(specs: &[ToolSpec]) -> Value {
    specs
        .iter()
        .map(|spec| {
            json!({
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.input_schema,
            })
        })
        .collect()
}

/// The client tools a `run_started`'s metadata keeps (none when absent or unreadable: they
/// were checked when the run was asked for).
pub fn from_metadata(metadata: &Value) -> Vec<ToolSpec> {
    metadata.get(METADATA_FIELD).map(|tools| parse(tools).unwrap_or_default()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_tools_are_read_or_refused_with_the_reason() {
        // (given, the names taken or the refusal's start)
        let long_name = "n".repeat(CLIENT_TOOL_NAME_CHARS_MAX + 1);
        let cases: Vec<(Value, Result<Vec<&str>, &str>)> = vec![
            (Value::Null, Ok(vec![])),
            (json!([]), Ok(vec![])),
            (
                json!([{"name": "confirm", "description": "Ask", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}},
                       {"name": "read_page", "inputSchema": {"properties": {}}},
                       {"name": "ping"}]),
                Ok(vec!["confirm", "read_page", "ping"]),
            ),
            (json!({"name": "x"}), Err("client tools must be a list")),
            (json!([{"description": "no name"}]), Err("client tool 0: needs a name")),
            (json!([{"name": ""}]), Err("client tool 0: name \"\" must be")),
            (json!([{"name": "has space"}]), Err("client tool 0: name \"has space\"")),
            (json!([{"name": long_name}]), Err("client tool 0: name")),
            (
                json!([{"name": "a", "description": 5}]),
                Err("client tool 0: a: description must be"),
            ),
            (
                json!([{"name": "a", "parameters": {"type": "string"}}]),
                Err("client tool 0: a: parameters must be"),
            ),
            (json!([{"name": "a", "parameters": []}]), Err("client tool 0: a: parameters must be")),
            (json!([{"name": "a"}, {"name": "a"}]), Err("client tool \"a\" is given twice")),
            (
                Value::Array(
                    (0..=CLIENT_TOOLS_PER_RUN_MAX)
                        .map(|i| json!({"name": format!("t{i}")}))
                        .collect(),
                ),
                Err("65 client tools given"),
            ),
            (
                json!([{"name": "big", "description": "d".repeat(CLIENT_TOOL_DESCRIPTION_CHARS_MAX + 1)}]),
                Err("client tool 0: big: description is over"),
            ),
            (
                json!([{"name": "huge", "parameters": {"type": "object", "description": "x".repeat(CLIENT_TOOLS_BYTES_MAX)}}]),
                Err("the client tools are over"),
            ),
        ];
        for (given, expected) in cases {
            let parsed = parse(&given);
            match expected {
                Ok(names) => {
                    let specs = parsed.unwrap_or_else(|why| panic!("{given}: {why}"));
                    let got: Vec<&str> = specs.iter().map(|spec| spec.name.as_str()).collect();
                    assert_eq!(got, names);
                    for spec in &specs {
                        assert_eq!(spec.input_schema["type"], "object", "{given}");
                    }
                }
                Err(start) => {
                    let why = parsed.expect_err(&given.to_string());
                    assert!(why.starts_with(start), "{why:?} should start with {start:?}");
                }
            }
        }
    }

    #[test]
    fn run_started_keeps_what_the_request_gave() {
        let specs = parse(&json!([
            {"name": "confirm", "description": "Ask the user", "parameters": {"type": "object", "properties": {"question": {"type": "string"}}}},
            {"name": "ping"},
        ]))
        .unwrap();
        let metadata = json!({ METADATA_FIELD: to_metadata(&specs) });
        assert_eq!(from_metadata(&metadata), specs);
        assert_eq!(from_metadata(&json!({})), vec![]);
        assert_eq!(check_names(&specs, ["clock", "calculator"]), Ok(()));
        assert_eq!(
            check_names(&specs, ["ping"]),
            Err("client tool \"ping\" has the name of one of the agent's own tools".into())
        );
    }
}
