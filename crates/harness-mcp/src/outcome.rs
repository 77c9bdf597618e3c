//! A `tools/call` result as the model reads it: text as it is, an image or audio as a notice of
//! what was left out, an embedded resource as its text (or a notice), structured content where
//! nothing else came, and the server's error flag kept.

use serde_json::Value;

/// The text of a `tools/call` result (its JSON, as MCP writes it) and whether it is an error.
pub fn map_result(result: &Value) -> (String, bool) {
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut parts: Vec<String> = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        parts.push(block_text(block));
    }
    if let Some(s) = result
        .get("structuredContent")
        .filter(|v| parts.is_empty() && !v.is_null())
    {
        parts.push(s.to_string());
    }
    if parts.is_empty() {
        parts.push("(the tool answered nothing)".to_owned());
    }
    (parts.join("\n"), is_error)
}

fn block_text(block: &Value) -> String {
    let str_of = |k: &str| block.get(k).and_then(Value::as_str).unwrap_or("");
    let size = |k: &str| {
        // base64: three bytes per four characters.
        block
            .get(k)
            .and_then(Value::as_str)
            .map_or(0, |d| d.len() / 4 * 3)
    };
    match str_of("type") {
        "text" => str_of("text").to_owned(),
        "image" => format!(
            "[an image ({}, about {} bytes) the tool returned: not shown to the model]",
            str_of("mimeType"),
            size("data")
        ),
        "audio" => format!(
            "[audio ({}, about {} bytes) the tool returned: not shown to the model]",
            str_of("mimeType"),
            size("data")
        ),
        "resource" => {
            let r = block.get("resource").cloned().unwrap_or(Value::Null);
            let uri = r.get("uri").and_then(Value::as_str).unwrap_or("");
            match r.get("text").and_then(Value::as_str) {
                Some(text) => format!("[resource {uri}]\n{text}"),
                None => format!("[a binary resource {uri}: not shown to the model]"),
            }
        }
        "resource_link" => format!(
            "[a link to the resource {} ({})]",
            str_of("uri"),
            str_of("name")
        ),
        other => format!("[content of a kind this client does not read: {other}]"),
    }
}
