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
