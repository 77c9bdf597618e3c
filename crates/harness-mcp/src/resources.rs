//! A server's resources, offered to the model as one tool per server that has some:
//! `mcp__SERVER__read_resource`, which reads one resource by its `uri` and, without one, lists
//! them (and the server's URI templates). One schema per server, deferred like its tools, a read
//! by risk; what it answers passes through the session's context hygiene like any tool's output.
//!
//! Codex offers three tools across all servers (`list_mcp_resources`,
//! `list_mcp_resource_templates`, `read_mcp_resource`, each taking the server's name) and Claude
//! Code two (`ListMcpResourcesTool`, `ReadMcpResourceTool`); one tool per server named like its
//! tools keeps the permission rules by `mcp__SERVER__*` pattern whole and costs one line under
//! `load_tools`.

use harness_agent::RegisteredTool;
use harness_spec::Risk;
use serde_json::{Value, json};

use crate::tool_name;

/// The name of the resource tool on a server (the last part of `mcp__SERVER__read_resource`).
pub const READ_RESOURCE: &str = "read_resource";

/// The most resources (and templates) a listing names; a note says how many more there are.
pub const LISTED: usize = 200;

/// The resource tool of the server `server`, as offered.
pub fn offered(server: &str, deferred: bool) -> RegisteredTool {
    RegisteredTool {
        name: tool_name(server, READ_RESOURCE),
        description: format!(
            "Reads a resource of the MCP server `{server}` by its URI; without `uri`, lists its resources and URI templates.",
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "uri": {
                    "type": "string",
                    "description": "The resource's URI (a template's with its {braces} filled); leave out to list them."
                }
            }
        }),
        risk: Risk::Read,
        exclusive: false,
        deferred,
    }
}

/// The listing the model reads: the resources (`resources/list` items, as MCP writes them) one a
/// line, `URI name (mime): description`, then the templates the same way.
pub fn listing(server: &str, resources: &[Value], templates: &[Value]) -> String {
    let mut out = if resources.is_empty() {
        format!("The MCP server `{server}` lists no resources.")
    } else {
        format!(
            "Resources of the MCP server `{server}` ({}):",
            resources.len()
        )
    };
    lines(&mut out, resources, "uri");
    if !templates.is_empty() {
        out.push_str(&format!(
            "\nURI templates ({}; fill the {{braces}}):",
            templates.len()
        ));
        lines(&mut out, templates, "uriTemplate");
    }
    out
}

fn lines(out: &mut String, items: &[Value], uri_key: &str) {
    for item in items.iter().take(LISTED) {
        let s = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("");
        out.push('\n');
        out.push_str(s(uri_key));
        let name = s("name");
        if !name.is_empty() && !s(uri_key).ends_with(name) {
            out.push(' ');
            out.push_str(name);
        }
        if !s("mimeType").is_empty() {
            out.push_str(&format!(" ({})", s("mimeType")));
        }
        let description = s("description").lines().next().unwrap_or("").trim();
        if !description.is_empty() {
            out.push_str(": ");
            out.push_str(&cut(description, 160));
        }
    }
    if items.len() > LISTED {
        out.push_str(&format!("\n… and {} more", items.len() - LISTED));
    }
}

fn cut(s: &str, max: usize) -> String {
    if s.chars().count() > max {
        let c: String = s.chars().take(max - 1).collect();
        format!("{c}…")
    } else {
        s.to_owned()
    }
}

/// What the model reads of a `resources/read` result (its JSON, as MCP writes it): a text as it
/// is (several each under the line `[resource URI]`), a blob as a notice of what was left out.
pub fn contents(uri: &str, result: &Value) -> String {
    let items: Vec<&Value> = result
        .get("contents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let single = items.len() == 1;
    let one = |item: &Value| -> String {
        let s = |k: &str| item.get(k).and_then(Value::as_str);
        let at = s("uri").unwrap_or(uri);
        match (s("text"), s("blob")) {
            (Some(text), _) if single => text.to_owned(),
            (Some(text), _) => format!("[resource {at}]\n{text}"),
            (None, Some(blob)) => format!(
                "[a binary resource {at} ({}, about {} bytes): not shown to the model]",
                s("mimeType").unwrap_or("no type given"),
                blob.len() / 4 * 3
            ),
            (None, None) => format!("[the resource {at} has neither text nor data]"),
        }
    };
    if items.is_empty() {
        return format!("(the resource {uri} is empty)");
    }
    items.iter().map(|i| one(i)).collect::<Vec<_>>().join("\n")
}
