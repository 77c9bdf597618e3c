//! How the runtime's events, saved transcripts and turn ends read in ACP: a tool call's kind,
//! title and locations, an edit's diffs, a stop reason, the modes, and a saved conversation
//! replayed as `session/update`s (`session/load`, a subagent's transcript).

use std::path::{Component, Path, PathBuf};

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Diff, Meta, SessionMode, SessionModeState, SessionUpdate,
    StopReason, TextContent, ToolCall as AcpCall, ToolCallContent, ToolCallLocation,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use harness_core::protocol::{Block, Mode, Origin, Risk};
use serde_json::{Value, json};

/// `path` with `.` and `..` applied, lexically.
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Whether `path` (lexically) lies under one of `roots`.
pub fn inside_roots(path: &Path, roots: &[PathBuf]) -> bool {
    let p = lexical(path);
    roots.iter().any(|r| p.starts_with(lexical(r)))
}

/// The session's modes as ACP lists them, `mode` current.
pub fn mode_state(mode: Mode) -> SessionModeState {
    let modes = Mode::ALL
        .iter()
        .map(|m| {
            let name = match m {
                Mode::Manual => "Manual",
                Mode::Edit => "Edit",
                Mode::Auto => "Auto",
                Mode::Plan => "Plan",
            };
            SessionMode::new(m.as_str(), name)
        })
        .collect();
    SessionModeState::new(mode.as_str(), modes)
}

/// A `_meta` object holding `{"lembas": v}`.
pub fn meta(v: Value) -> Meta {
    let mut m = Meta::new();
    m.insert("lembas".into(), v);
    m
}

/// The most of one piece of a running command's output a `tool_call_update` carries: 8 KiB.
pub const OUTPUT_WINDOW: usize = 8 * 1024;

/// What a `tool_call_update` of a running command shows of a new piece of its output: the
/// piece itself, or its last [`OUTPUT_WINDOW`] bytes (on a character boundary) when it is
/// longer. Never the output so far: resent whole with every piece it grew quadratically on the
/// wire.
pub fn output_tail(piece: &str) -> &str {
    let mut start = piece.len().saturating_sub(OUTPUT_WINDOW);
    while !piece.is_char_boundary(start) {
        start += 1;
    }
    &piece[start..]
}

/// A text content block.
pub fn text_block(text: impl Into<String>) -> ContentBlock {
    ContentBlock::Text(TextContent::new(text.into()))
}

/// The ACP kind of a call drawn as `block` (by its risk where the block says nothing).
pub fn kind_of(block: Block, risk: Option<Risk>) -> ToolKind {
    match block {
        Block::Shell => ToolKind::Execute,
        Block::Edit => ToolKind::Edit,
        Block::Read => ToolKind::Read,
        Block::Search => ToolKind::Search,
        Block::Web => ToolKind::Fetch,
        Block::Plan => ToolKind::Think,
        _ => match risk {
            Some(Risk::Read) => ToolKind::Read,
            Some(Risk::Write) => ToolKind::Edit,
            Some(Risk::Execute) => ToolKind::Execute,
            _ => ToolKind::Other,
        },
    }
}

/// The conversation of saved events as `session/update`s, in order (ACP's `session/load`).
/// A message the harness wrote (a job's wake-up, a machine turn, a nudge) is never replayed as
/// the person's: with `machine` (the client agreed capability `jobs`) it is a
/// `user_message_chunk` marked `_meta.lembas.machine` (`spec/acp.md` §10), else it is left out.
pub fn replay_updates(
    entries: &[harness_loop::transcript::Entry],
    cwd: &Path,
    machine: bool,
) -> Vec<SessionUpdate> {
    use harness_loop::transcript::Entry;
    let spec = harness_spec::Spec::embedded();
    let mut out = Vec::new();
    let mut edits = std::collections::HashSet::new();
    for e in entries {
        match e {
            Entry::TurnStarted { text, origin, .. } | Entry::User { text, origin } => {
                let mut chunk = ContentChunk::new(text_block(text.clone()));
                if *origin == Origin::Machine {
                    if !machine {
                        continue;
                    }
                    chunk = chunk.meta(meta(json!({"machine": true})));
                }
                out.push(SessionUpdate::UserMessageChunk(chunk));
            }
            Entry::Assistant {
                text,
                reasoning,
                tool_calls,
            } => {
                if !reasoning.is_empty() {
                    out.push(SessionUpdate::AgentThoughtChunk(ContentChunk::new(
                        text_block(reasoning.clone()),
                    )));
                }
                if !text.is_empty() {
                    out.push(SessionUpdate::AgentMessageChunk(ContentChunk::new(
                        text_block(text.clone()),
                    )));
                }
                for call in tool_calls {
                    let tool = spec.tool(&call.name);
                    let block = tool.map(|t| t.block).unwrap_or(Block::Tool);
                    let risk = tool.map(|t| t.risk);
                    let title =
                        harness_agent::title::call_title(&call.name, block, &call.arguments);
                    if block == Block::Edit {
                        edits.insert(call.id.clone());
                    }
                    let mut c = AcpCall::new(call.id.clone(), title)
                        .kind(kind_of(block, risk))
                        .status(ToolCallStatus::Pending)
                        .raw_input(call.arguments.clone())
                        .meta(meta(
                            json!({"tool": call.name, "block": block, "risk": risk}),
                        ));
                    if let Some(l) = call_locations(&call.arguments, cwd) {
                        c = c.locations(l);
                    }
                    out.push(SessionUpdate::ToolCall(c));
                }
            }
            Entry::ToolResult {
                call_id,
                tool,
                result_id,
                text,
                kind,
                ..
            } => {
                let status = if *kind == harness_loop::context::InsertKind::Error {
                    ToolCallStatus::Failed
                } else {
                    ToolCallStatus::Completed
                };
                // An edit is replayed with its diffs, as it was shown when it ran.
                let diffs = if edits.contains(call_id) && status == ToolCallStatus::Completed {
                    diffs_in(text, cwd)
                } else {
                    Vec::new()
                };
                let content = if diffs.is_empty() {
                    vec![ToolCallContent::from(text_block(text.clone()))]
                } else {
                    diffs.into_iter().map(ToolCallContent::from).collect()
                };
                out.push(SessionUpdate::ToolCallUpdate(
                    ToolCallUpdate::new(
                        call_id.clone(),
                        ToolCallUpdateFields::new().status(status).content(content),
                    )
                    .meta(meta(json!({"tool": tool, "result": result_id}))),
                ));
            }
            _ => {}
        }
    }
    out
}

/// The per-file diffs of an edit's saved result or of a change asked about (a unified diff:
/// `+++ b<path>` and hunks, or an `apply_patch` patch), each as the lines around the change
/// before and after; the transcript keeps no whole file.
pub fn diffs_in(text: &str, cwd: &Path) -> Vec<Diff> {
    // A file the change creates (`--- /dev/null`) has no old text.
    let diff = |(p, old, new, created): (PathBuf, String, String, bool)| {
        let d = Diff::new(p, new);
        if created { d } else { d.old_text(old) }
    };
    let mut out = Vec::new();
    let mut current: Option<(PathBuf, String, String, bool)> = None;
    let mut in_hunk = false;
    let mut created = false;
    for line in text.lines() {
        if line == "--- /dev/null" {
            created = true;
        }
        // apply_patch's own form: `*** Add File: p` (every line added), `*** Update File: p`
        // (hunks after `@@`), `*** Move to: q`; a deleted file has no text to show.
        if let Some(marker) = line.strip_prefix("*** ") {
            let file = marker
                .strip_prefix("Add File: ")
                .map(|p| (p, true))
                .or_else(|| marker.strip_prefix("Update File: ").map(|p| (p, false)));
            if let Some(moved) = marker.strip_prefix("Move to: ")
                && let Some((p, ..)) = current.as_mut()
            {
                *p = cwd.join(moved.trim());
            } else if marker.starts_with("Delete File: ") || file.is_some() {
                if let Some(c) = current.take() {
                    out.push(diff(c));
                }
                if let Some((p, added)) = file {
                    current = Some((cwd.join(p.trim()), String::new(), String::new(), added));
                    in_hunk = added;
                }
            }
            continue;
        }
        if let Some(path) = line.strip_prefix("+++ ") {
            if let Some(c) = current.take() {
                out.push(diff(c));
            }
            let path = path
                .strip_prefix('b')
                .filter(|p| p.starts_with('/'))
                .unwrap_or(path);
            let p = Path::new(path.trim());
            current = Some((
                if p.is_absolute() {
                    p.to_path_buf()
                } else {
                    cwd.join(p)
                },
                String::new(),
                String::new(),
                std::mem::take(&mut created),
            ));
            in_hunk = false;
            continue;
        }
        let Some((_, old, new, _)) = current.as_mut() else {
            continue;
        };
        if line.starts_with("@@") {
            in_hunk = true;
        } else if !in_hunk || line.starts_with("--- ") {
            in_hunk = false;
        } else if let Some(l) = line.strip_prefix('+') {
            new.push_str(l);
            new.push('\n');
        } else if let Some(l) = line.strip_prefix('-') {
            old.push_str(l);
            old.push('\n');
        } else {
            let l = line.strip_prefix(' ').unwrap_or(line);
            for side in [&mut *old, &mut *new] {
                side.push_str(l);
                side.push('\n');
            }
        }
    }
    if let Some(c) = current {
        out.push(diff(c));
    }
    out
}

/// The location a call works on: its `path` resolved against the session's directory by the
/// one resolver (`~` the home directory), the absolute path the call acts on.
pub fn call_locations(args: &Value, cwd: &Path) -> Option<Vec<ToolCallLocation>> {
    let path = args.get("path").and_then(Value::as_str)?;
    if path.is_empty() {
        return None;
    }
    let home = std::env::home_dir().unwrap_or_else(|| PathBuf::from("/"));
    let full =
        harness_core::path::resolve_home(&cwd.to_string_lossy(), &home.to_string_lossy(), path);
    Some(vec![ToolCallLocation::new(PathBuf::from(full))])
}

/// The ACP type of a stop reason harness-agent named.
pub fn acp_stop(stop: &str) -> StopReason {
    match stop {
        "cancelled" => StopReason::Cancelled,
        "max_tokens" => StopReason::MaxTokens,
        "max_turn_requests" => StopReason::MaxTurnRequests,
        _ => StopReason::EndTurn,
    }
}

/// What a prompt's content blocks give the session: its text and its images (`data:` URLs).
/// Text blocks are the text; a resource link is named in it as a Markdown link; an embedded
/// text resource (a file the editor attached) follows as `<context ref="URI">…</context>`; an
/// image, or an embedded resource of an image type, is an image; any other block is named in
/// the text as left out, never dropped unsaid.
pub fn prompt_input(blocks: &[ContentBlock]) -> (String, Vec<String>) {
    use agent_client_protocol::v1::schema::EmbeddedResourceResource;
    let mut text = String::new();
    let mut images = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(t) => text.push_str(&t.text),
            ContentBlock::ResourceLink(l) => {
                text.push_str(&format!("\n[{}]({})\n", l.name, l.uri));
            }
            ContentBlock::Image(i) => match &i.uri {
                Some(uri) if i.data.is_empty() && uri.starts_with("https:") => {
                    images.push(uri.clone());
                }
                _ => images.push(format!("data:{};base64,{}", i.mime_type, i.data)),
            },
            ContentBlock::Resource(r) => match &r.resource {
                EmbeddedResourceResource::TextResourceContents(t) => {
                    text.push_str(&format!(
                        "\n<context ref=\"{}\">\n{}\n</context>\n",
                        t.uri,
                        t.text.trim_end_matches('\n')
                    ));
                }
                EmbeddedResourceResource::BlobResourceContents(b) => match b.mime_type.as_deref() {
                    Some(m) if m.starts_with("image/") => {
                        images.push(format!("data:{m};base64,{}", b.blob));
                    }
                    m => text.push_str(&format!(
                        "\n[{} ({}): binary content, not read]\n",
                        b.uri,
                        m.unwrap_or("no type")
                    )),
                },
                _ => text.push_str("\n[an embedded resource of an unknown kind, not read]\n"),
            },
            ContentBlock::Audio(a) => {
                text.push_str(&format!("\n[an audio clip ({}), not taken]\n", a.mime_type));
            }
            _ => text.push_str("\n[a content block of an unknown kind, not read]\n"),
        }
    }
    (text, images)
}
