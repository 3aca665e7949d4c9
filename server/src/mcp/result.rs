//! What an MCP tool call's result becomes as the agent's tool result. Pure.

use serde_json::{json, Value};

/// A call's result as the tool result: its structured content when it has some, otherwise its
/// content blocks as text — text as it is, images and audio as a short description, resources
/// by their text or address — joined by newlines (one text block stays a plain string).
pub fn result_value(result: &impl serde::Serialize) -> Value {
    let result = serde_json::to_value(result).unwrap_or_default();
    if let Some(structured) = result.get("structuredContent").filter(|value| !value.is_null()) {
        return structured.clone();
    }
    let blocks = result["content"].as_array().cloned().unwrap_or_default();
    let texts: Vec<String> = blocks.iter().map(block_text).collect();
    match texts.as_slice() {
        [] => json!(""),
        [one] => json!(one),
        _ => json!(texts.join("\n")),
    }
}

fn block_text(block: &Value) -> String {
    let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
    let size = |key: &str| block.get(key).and_then(Value::as_str).map_or(0, str::len) * 3 / 4;
    match text("type") {
        "text" => text("text").to_owned(),
        "image" => format!("[image, {}, about {} bytes]", text("mimeType"), size("data")),
        "audio" => format!("[audio, {}, about {} bytes]", text("mimeType"), size("data")),
        "resource" => {
            let resource = &block["resource"];
            match resource.get("text").and_then(Value::as_str) {
                Some(body) => body.to_owned(),
                None => format!("[resource {}]", resource["uri"].as_str().unwrap_or("?")),
            }
        }
        "resource_link" => format!("[resource link {}]", text("uri")),
        other => format!("[{other} content]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_become_text_or_their_structured_content() {
        let cases = [
            (
                json!({ "content": [{ "type": "text", "text": "The sum of 2 and 3 is 5." }] }),
                json!("The sum of 2 and 3 is 5."),
            ),
            (
                json!({ "content": [{ "type": "text", "text": "a" }, { "type": "image", "data": "AAAA", "mimeType": "image/png" }] }),
                json!("a\n[image, image/png, about 3 bytes]"),
            ),
            (
                json!({ "content": [{ "type": "text", "text": "x" }], "structuredContent": { "temperature": 22 } }),
                json!({ "temperature": 22 }),
            ),
            (
                json!({ "content": [{ "type": "resource", "resource": { "uri": "test://1", "text": "body" } },
                                    { "type": "resource", "resource": { "uri": "test://2", "blob": "AA" } }] }),
                json!("body\n[resource test://2]"),
            ),
            (json!({ "content": [] }), json!("")),
        ];
        for (result, expected) in cases {
            assert_eq!(result_value(&result), expected, "{result}");
        }
    }
}
