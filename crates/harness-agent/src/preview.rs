//! The change a file-changing call would make, put on its permission question so that the
//! person does not approve it blind (every front end shows the same diff): the file as the
//! world reads it now, the call's edits applied the way the tool applies them.

use harness_core::protocol::ToolCall;
use serde_json::Value;

use crate::seams::ToolWorld;

/// Lines of context around a change the person reads: more than the model's answer keeps
/// (`context.diff` in `loop.json`), which holds the file's earlier read besides.
const PERSON_CONTEXT_LINES: usize = 3;

/// A change as the person reads it: a unified diff of `path`, `--- /dev/null` for a new file,
/// with [`PERSON_CONTEXT_LINES`] around each change.
pub fn diff(path: &str, before: &str, after: &str) -> String {
    let body = harness_loop::context::unified_diff(path, before, after, PERSON_CONTEXT_LINES);
    let from = if before.is_empty() { "/dev/null" } else { path };
    let mut text = format!("--- {from}\n+++ {path}\n");
    for l in body.lines().skip_while(|l| !l.starts_with("@@")) {
        text.push_str(l);
        text.push('\n');
    }
    text
}

/// The change `call` would make, read through `world` (its view and its rules): the diff of a
/// `write`, `edit` or `multiedit`, the patch of an `apply_patch`. `None` when the call changes
/// no file or its change cannot be foreseen (the file unreadable, an edit that does not apply:
/// the tool refuses such a call and says why).
pub fn change(world: &dyn ToolWorld, call: &ToolCall) -> Option<String> {
    let s = |k: &str| call.arguments.get(k).and_then(Value::as_str);
    if call.name == "apply_patch" {
        return s("patch").map(|p| patch_by_real_paths(world, p));
    }
    if !matches!(call.name.as_str(), "write" | "edit" | "multiedit") {
        return None;
    }
    let path = s("path")?;
    let now = world.read_for_show(path);
    // A file not there yet is named as the world names the files it has: under its place.
    let shown = match &now {
        Ok(f) => f.path.clone(),
        Err(_) => world.resolve(path),
    };
    let (before, after) = if call.name == "write" {
        (
            now.map(|f| f.content).unwrap_or_default(),
            s("content")?.to_owned(),
        )
    } else {
        let before = now.ok()?.content;
        let edits: Vec<harness_fs::tools::EditSpec> = match call.arguments.get("edits") {
            Some(list) => serde_json::from_value(list.clone()).ok()?,
            None => vec![serde_json::from_value(call.arguments.clone()).ok()?],
        };
        let vpath = harness_fs::VPath::resolve(&harness_fs::VPath::root(), &shown);
        let mut text = before.clone();
        for e in &edits {
            text = harness_fs::tools::apply_edit(&vpath, &text, e).ok()?.0;
        }
        (before, text)
    };
    Some(diff(&shown, &before, &after))
}

/// A patch as the person reads it: each file it names by the absolute path the call acts on
/// (an absolute path is left as the patch gives it: the tool refuses it).
fn patch_by_real_paths(world: &dyn ToolWorld, patch: &str) -> String {
    let mut out = String::with_capacity(patch.len());
    for line in patch.split_inclusive('\n') {
        let header = harness_fs::patch::HEADERS
            .iter()
            .find_map(|h| line.strip_prefix(h).map(|rest| (h, rest)));
        match header {
            Some((h, rest)) if !rest.trim().is_empty() && !rest.trim().starts_with('/') => {
                let end = &rest[rest.trim_end().len()..];
                out.push_str(h);
                out.push_str(&world.resolve(rest.trim()));
                out.push_str(end);
            }
            _ => out.push_str(line),
        }
    }
    out
}
