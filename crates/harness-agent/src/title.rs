//! The one-line title of a tool call, as every front end shows it (a terminal's line, an ACP
//! client's `tool_call` title).

use harness_core::protocol::Block;

/// The one-line title of a call: what it does, per its block.
pub fn call_title(name: &str, block: Block, args: &serde_json::Value) -> String {
    let s = |k: &str| {
        args.get(k)
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
    };
    match block {
        Block::Shell => format!("$ {}", s("command")),
        Block::Edit if !s("patch").is_empty() => {
            // A patch: the files its headers name.
            let files: Vec<&str> = s("patch")
                .lines()
                .filter_map(|l| {
                    ["*** Add File: ", "*** Update File: ", "*** Delete File: "]
                        .iter()
                        .find_map(|h| l.strip_prefix(h))
                })
                .map(str::trim)
                .collect();
            format!("{name} {}", files.join(", "))
        }
        Block::Edit | Block::Read => format!("{name} {}", s("path")),
        Block::Search => {
            let path = s("path");
            if path.is_empty() {
                format!("{name} {}", s("pattern"))
            } else {
                format!("{name} {} in {path}", s("pattern"))
            }
        }
        Block::Web => format!(
            "{name} {}",
            if s("url").is_empty() {
                s("query")
            } else {
                s("url")
            }
        ),
        Block::Task => format!("{name} {}", s("prompt").lines().next().unwrap_or("")),
        Block::Plan => plan_title(name, args),
        _ => {
            let a = args.to_string();
            if a == "{}" {
                name.to_owned()
            } else {
                format!("{name} {a}")
            }
        }
    }
}

/// A plan call's title, in words (never its arguments as JSON): the plan's title for
/// `plan_write`, the tasks changed and added for `plan_update`.
fn plan_title(name: &str, args: &serde_json::Value) -> String {
    use serde_json::Value;
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let list = |k: &str| {
        args.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    match name {
        "plan_write" => match text(args, "title") {
            t if t.is_empty() => "Plan".to_owned(),
            t => format!("Plan: {t}"),
        },
        "plan_update" => {
            let mut parts: Vec<String> = list("tasks")
                .iter()
                .map(|t| {
                    let (id, status) = (text(t, "id"), text(t, "status"));
                    if status.is_empty() {
                        format!("{id} renamed")
                    } else {
                        format!("{id} {status}")
                    }
                })
                .collect();
            let added = list("add").len();
            if added > 0 {
                parts.push(format!(
                    "{added} task{} added",
                    if added == 1 { "" } else { "s" }
                ));
            }
            if parts.is_empty() {
                "Plan update".to_owned()
            } else {
                format!("Plan update: {}", parts.join(", "))
            }
        }
        "plan_submit" => "Plan submitted for approval".to_owned(),
        other => other.to_owned(),
    }
}
