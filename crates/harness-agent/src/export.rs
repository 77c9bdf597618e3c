//! A session written out for a person to keep or share (`/export`): Markdown, the conversation
//! as it reads (the person's turns, the answers, each call with its result folded), or JSON,
//! the transcript's entries as they are stored with the session's metadata. One writing for
//! every front end.

use harness_core::protocol::Origin;
use harness_loop::transcript::Entry;
use serde_json::json;

use crate::seams::Meta;

/// Lines of a tool result kept in the Markdown (the JSON keeps everything).
const RESULT_LINES: usize = 40;

/// The session `meta` with `entries` as Markdown.
pub fn markdown(meta: &Meta, entries: &[Entry]) -> String {
    write_markdown(meta, entries, true)
}

/// The session as [`markdown`] writes it, for someone who may read the conversation as it
/// stands but not what the tools read: each call is named by its title, its result left out,
/// and the turns rewound away are not there at all (see [`as_it_stands`]).
pub fn markdown_without_results(meta: &Meta, entries: &[Entry]) -> String {
    write_markdown(meta, &as_it_stands(entries), false)
}

/// The entries of the conversation as it stands: a rewind to before turn N takes away the
/// entries from that turn's start to the rewind (the transcript keeps them, marked).
pub fn as_it_stands(entries: &[Entry]) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::with_capacity(entries.len());
    for e in entries {
        if let Entry::Rewound { turn } = e {
            let start = out
                .iter()
                .rposition(|k| matches!(k, Entry::TurnStarted { turn: t, .. } if t == turn));
            if let Some(at) = start {
                out.truncate(at);
            }
            continue;
        }
        out.push(e.clone());
    }
    out
}

fn write_markdown(meta: &Meta, entries: &[Entry], results: bool) -> String {
    let title = if meta.title.trim().is_empty() {
        "Session"
    } else {
        meta.title.trim()
    };
    let mut out = format!(
        "# {title}\n\nSession `{}` · model `{}` · in `{}`\n",
        meta.id,
        meta.model,
        meta.cwd.display()
    );
    let mut calls = std::collections::HashMap::new();
    for e in entries {
        match e {
            Entry::TurnStarted { text, origin, .. } => {
                let who = if *origin == Origin::Person {
                    "You"
                } else {
                    "Wake-up"
                };
                out.push_str(&format!("\n## {who}\n\n{}\n", text.trim_end()));
            }
            Entry::User {
                text,
                origin: Origin::Person,
            } => out.push_str(&format!("\n## You\n\n{}\n", text.trim_end())),
            Entry::Assistant {
                text, tool_calls, ..
            } => {
                if !text.trim().is_empty() {
                    out.push_str(&format!("\n{}\n", text.trim()));
                }
                for c in tool_calls {
                    let block = harness_spec::Spec::embedded()
                        .tool(&c.name)
                        .map(|t| t.block)
                        .unwrap_or(harness_core::protocol::Block::Tool);
                    calls.insert(
                        c.id.clone(),
                        crate::title::call_title(&c.name, block, &c.arguments),
                    );
                }
            }
            Entry::ToolResult {
                call_id,
                tool,
                output,
                ..
            } => {
                let title = calls.remove(call_id).unwrap_or_else(|| tool.clone());
                if results {
                    out.push_str(&result_block(&title, output));
                } else {
                    out.push_str(&format!("\n*{}*\n", title.replace('*', "\\*")));
                }
            }
            Entry::JobStarted { id, title, .. } => {
                out.push_str(&format!("\n*Job {id} started: {title}*\n"));
            }
            Entry::Compacted { .. } => {
                out.push_str("\n*The conversation was compacted here.*\n");
            }
            Entry::Rewound { turn } => {
                out.push_str(&format!("\n*Rewound to before turn {turn}.*\n"));
            }
            _ => {}
        }
    }
    out
}

/// The session `meta` with `entries` as JSON: `{"session": {...}, "entries": [...]}`.
pub fn json(meta: &Meta, entries: &[Entry]) -> String {
    let v = json!({
        "session": {
            "id": meta.id,
            "title": meta.title,
            "model": meta.model,
            "cwd": meta.cwd,
            "created": meta.created,
            "updated": meta.updated,
        },
        "entries": entries,
    });
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}

/// A call and its result, folded (`<details>`), the result cut to [`RESULT_LINES`] lines in a
/// fence longer than any run of backticks it holds.
fn result_block(title: &str, output: &str) -> String {
    let lines: Vec<&str> = output.lines().collect();
    let mut body: String = lines
        .iter()
        .take(RESULT_LINES)
        .map(|l| format!("{l}\n"))
        .collect();
    if lines.len() > RESULT_LINES {
        body.push_str(&format!("… {} more lines\n", lines.len() - RESULT_LINES));
    }
    let longest = output.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let summary = title.replace('<', "&lt;");
    format!("\n<details><summary>{summary}</summary>\n\n{fence}\n{body}{fence}\n\n</details>\n")
}
