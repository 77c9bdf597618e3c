//! The file tools on a session's view (`harness-fs`): `read`, `write`, `edit`, `multiedit`,
//! `apply_patch`, `glob`, `grep` and `list`, with their answers as the model reads them and the
//! read ledger that guards writes. Any backend serves: the CLI's host directory, a chat's view
//! of the server's tree, an embedder's in-memory tree. Paths go in and come out through a
//! [`PathMap`], so answers name paths as the person knows them.

use std::path::Path;

use harness_core::protocol::ToolCall;
use harness_fs::tools::{self as fst, EditSpec, GrepMode, GrepOptions, Ledger};
use harness_fs::{VPath, View};
use harness_loop::context::ReadInfo;
use harness_loop::session::{EditInfo, ToolOutcome};
use serde_json::Value;

use crate::seams::ShownFile;

/// How the paths a model writes map onto the view and back.
pub trait PathMap: Send + Sync {
    /// A path as the model gave it, as a path of the view.
    fn to_view(&self, input: &str) -> String;
    /// A path of the view as the person knows it.
    fn shown(&self, p: &VPath) -> String;
}

/// The view's own paths, both ways.
#[derive(Debug, Clone, Copy, Default)]
pub struct ViewPaths;

impl PathMap for ViewPaths {
    fn to_view(&self, input: &str) -> String {
        input.to_owned()
    }

    fn shown(&self, p: &VPath) -> String {
        p.as_str().to_owned()
    }
}

/// The largest file `show` sends to a viewer.
const SHOW_MAX_BYTES: u64 = 8 * 1024 * 1024;

/// The file tools of one session (its read ledger).
#[derive(Debug, Default)]
pub struct FileTools {
    ledger: Ledger,
}

/// A typed argument: `Ok(None)` when absent (or null), the answer to send when of the wrong
/// type.
type Arg<T> = Result<Option<T>, Refused>;

/// The answer a call gets instead of running (boxed: an outcome is large).
type Refused = Box<ToolOutcome>;

fn arg_str<'a>(call: &'a ToolCall, key: &str) -> Arg<&'a str> {
    match call.arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(wrong_type(call, key, "a string").into()),
    }
}

fn arg_usize(call: &ToolCall, key: &str) -> Arg<usize> {
    match call.arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| wrong_type(call, key, "a whole number, 0 or more").into()),
    }
}

fn arg_bool(call: &ToolCall, key: &str) -> Arg<bool> {
    match call.arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(wrong_type(call, key, "true or false").into()),
    }
}

/// A required string argument: the answer to send when it is absent or not a string.
fn required_str<'a>(call: &'a ToolCall, key: &str) -> Result<&'a str, Refused> {
    arg_str(call, key)?.ok_or_else(|| missing(call, key).into())
}

/// The answer to a call missing a required argument.
pub fn missing(call: &ToolCall, key: &str) -> ToolOutcome {
    ToolOutcome::error(
        &call.id,
        format!("{}: the argument `{key}` is missing", call.name),
    )
}

/// The answer to a call whose argument `key` is there but of the wrong type (`what` it must
/// be: "a string", "true or false", ...).
pub fn wrong_type(call: &ToolCall, key: &str, what: &str) -> ToolOutcome {
    ToolOutcome::error(&call.id, format!("{}: `{key}` must be {what}", call.name))
}

/// A refusal of harness-fs, with the view path it names shown as the person knows it (the form
/// successes use).
fn error(call: &ToolCall, paths: &dyn PathMap, e: harness_fs::Error) -> ToolOutcome {
    use harness_fs::Error as E;
    let text = match &e {
        E::Io { path, message } => {
            format!(
                "I/O error on {}: {message}",
                paths.shown(&VPath::parse(path))
            )
        }
        E::NotFound(p)
        | E::AccessDenied(p)
        | E::ReadOnly(p)
        | E::IsADirectory(p)
        | E::NotADirectory(p)
        | E::AlreadyExists(p)
        | E::NotCommitted(p)
        | E::NothingToCommit(p)
        | E::TooLarge { path: p, .. }
        | E::Binary(p)
        | E::NotUtf8(p)
        | E::NotRead(p)
        | E::Stale(p)
        | E::EditNotFound(p)
        | E::EditAmbiguous { path: p, .. }
        | E::EditNoChange(p)
        | E::OffsetOutOfRange { path: p, .. } => {
            // The path is the first `/` of each of these texts.
            let text = e.to_string();
            match text.find(p.as_str()) {
                Some(at) => format!(
                    "{}{}{}",
                    &text[..at],
                    paths.shown(p),
                    &text[at + p.as_str().len()..]
                ),
                None => text,
            }
        }
        _ => e.to_string(),
    };
    ToolOutcome::error(&call.id, text)
}

impl FileTools {
    /// The tools it runs.
    pub const NAMES: &[&str] = &[
        "read",
        "write",
        "edit",
        "multiedit",
        "apply_patch",
        "glob",
        "grep",
        "list",
    ];

    /// The tools that change a view's tree itself (a chat's: the agent's disk is changed with
    /// its shell).
    pub const TREE: &[&str] = &["mkdir", "mv", "rm"];

    /// File tools with an empty read ledger.
    pub fn new() -> FileTools {
        FileTools::default()
    }

    /// Runs `call` on `view`; `None` when it is not a file tool.
    pub fn run(&self, view: &View, paths: &dyn PathMap, call: &ToolCall) -> Option<ToolOutcome> {
        let out = match call.name.as_str() {
            "read" => self.read(view, paths, call),
            "write" | "edit" | "multiedit" => self.change(view, paths, call),
            "apply_patch" => self.patch(view, paths, call),
            "mkdir" | "mv" | "rm" => Ok(FileTools::tree(view, call)),
            "glob" => (|| {
                let pattern = required_str(call, "pattern")?;
                let root = paths.to_view(arg_str(call, "path")?.unwrap_or("/"));
                match fst::glob(view, &root, pattern, 200) {
                    Ok(g) => {
                        let mut text: Vec<String> =
                            g.paths.iter().map(|p| paths.shown(p)).collect();
                        if text.is_empty() {
                            text.push("No files found".to_owned());
                        }
                        if g.truncated {
                            text.push(
                                "(Results truncated. Use a more specific path or pattern.)"
                                    .to_owned(),
                            );
                        }
                        Ok(ToolOutcome::ok(&call.id, text.join("\n")))
                    }
                    Err(e) => Ok(error(call, paths, e)),
                }
            })(),
            "grep" => (|| {
                let pattern = required_str(call, "pattern")?;
                let root = paths.to_view(arg_str(call, "path")?.unwrap_or("/"));
                let opts = GrepOptions {
                    include: arg_str(call, "include")?.map(str::to_owned),
                    ignore_case: arg_bool(call, "ignore_case")?.unwrap_or(false),
                    limit: arg_usize(call, "limit")?,
                    mode: match arg_str(call, "mode")? {
                        None => GrepMode::default(),
                        Some(m) => GrepMode::parse(m).ok_or_else(|| {
                            Refused::from(wrong_type(
                                call,
                                "mode",
                                "one of `lines`, `files`, `count`",
                            ))
                        })?,
                    },
                    context: arg_usize(call, "context")?.unwrap_or(0),
                };
                Ok(match fst::grep(view, &root, pattern, &opts) {
                    Ok(mut g) => {
                        for m in g.matches.iter_mut().chain(&mut g.context_lines) {
                            m.path = VPath::parse(&paths.shown(&m.path));
                        }
                        ToolOutcome::ok(&call.id, g.render())
                    }
                    Err(e) => error(call, paths, e),
                })
            })(),
            "list" => (|| {
                let path = paths.to_view(arg_str(call, "path")?.unwrap_or("/"));
                let depth = arg_usize(call, "depth")?;
                Ok(match fst::list(view, &path, depth) {
                    Ok(text) => {
                        // A note on the directory itself names it as successes name paths
                        // (no entry's line holds a `/` before its end).
                        let vp = view.resolve(&path);
                        let text = match text.strip_prefix(&format!("({vp} ")) {
                            Some(rest) => format!("({} {rest}", paths.shown(&vp)),
                            None => text,
                        };
                        ToolOutcome::ok(&call.id, text)
                    }
                    Err(e) => error(call, paths, e),
                })
            })(),
            _ => return None,
        };
        Some(out.unwrap_or_else(|refusal| *refusal))
    }

    /// A file for `show`, read through the view as `read` reads it (a path the view does not
    /// show answers as `read` answers it).
    pub fn read_for_show(
        &self,
        view: &View,
        paths: &dyn PathMap,
        path: &str,
    ) -> Result<ShownFile, String> {
        let vp = view.resolve(&paths.to_view(path));
        let bytes = view.read_bytes(&vp).map_err(|e| e.to_string())?;
        let host = paths.shown(&vp);
        if bytes.len() as u64 > SHOW_MAX_BYTES {
            return Err(format!(
                "{host} is {} bytes: files over {SHOW_MAX_BYTES} bytes are not shown",
                bytes.len()
            ));
        }
        let content = String::from_utf8(bytes)
            .map_err(|_| format!("{host} is not UTF-8 text: it cannot be shown"))?;
        Ok(ShownFile {
            path: host,
            content,
        })
    }

    fn read(
        &self,
        view: &View,
        paths: &dyn PathMap,
        call: &ToolCall,
    ) -> Result<ToolOutcome, Refused> {
        let path = required_str(call, "path")?;
        let vp = paths.to_view(path);
        let (offset, limit) = (arg_usize(call, "offset")?, arg_usize(call, "limit")?);
        Ok(match fst::read(view, &self.ledger, &vp, offset, limit) {
            Ok(w) => {
                let host = paths.shown(&w.path);
                let text = w.text.replacen(
                    &format!("<path>{}</path>", w.path),
                    &format!("<path>{host}</path>"),
                    1,
                );
                ToolOutcome {
                    call_id: call.id.clone(),
                    output: text,
                    is_error: false,
                    read: Some(ReadInfo {
                        path: host,
                        first: w.first as u64,
                        last: w.last as u64,
                        hash: w.hash,
                    }),
                    edit: None,
                }
            }
            Err(e) => error(call, paths, e),
        })
    }

    fn change(
        &self,
        view: &View,
        paths: &dyn PathMap,
        call: &ToolCall,
    ) -> Result<ToolOutcome, Refused> {
        let a = &call.arguments;
        let path = required_str(call, "path")?;
        let vp = paths.to_view(path);
        let resolved = view.resolve(&vp);
        let before = view
            .read_bytes(&resolved)
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned());
        let result = match call.name.as_str() {
            "write" => {
                let content = required_str(call, "content")?;
                fst::write(view, &self.ledger, &vp, content)
            }
            "edit" => {
                let old = required_str(call, "old_string")?;
                let new = required_str(call, "new_string")?;
                let all = arg_bool(call, "replace_all")?.unwrap_or(false);
                fst::edit(view, &self.ledger, &vp, old, new, all)
            }
            _ => {
                let edits: Vec<EditSpec> = match a
                    .get("edits")
                    .cloned()
                    .map(serde_json::from_value)
                    .transpose()
                {
                    Ok(Some(e)) => e,
                    Ok(None) => return Err(missing(call, "edits").into()),
                    Err(e) => {
                        return Err(ToolOutcome::error(
                            &call.id,
                            format!("multiedit: `edits` is malformed: {e}"),
                        )
                        .into());
                    }
                };
                fst::multiedit(view, &self.ledger, &vp, &edits)
            }
        };
        Ok(match result {
            Ok(change) => {
                let after = view
                    .read_bytes(&change.path)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                let host = paths.shown(&change.path);
                let what = if change.created {
                    format!("Created {host}.")
                } else {
                    format!("Changed {host}.")
                };
                ToolOutcome {
                    call_id: call.id.clone(),
                    output: what,
                    is_error: false,
                    read: None,
                    edit: Some(EditInfo {
                        path: host,
                        before: before.unwrap_or_default(),
                        after,
                    }),
                }
            }
            Err(e) => error(call, paths, e),
        })
    }

    /// `apply_patch` through harness-fs (all or nothing, the read ledger's guards), answered
    /// with what happened to each file and its diff, by real paths.
    fn patch(
        &self,
        view: &View,
        paths: &dyn PathMap,
        call: &ToolCall,
    ) -> Result<ToolOutcome, Refused> {
        let text = required_str(call, "patch")?;
        let mut patch = match harness_fs::patch::Patch::parse(text) {
            Ok(p) => p,
            Err(e) => return Ok(error(call, paths, e)),
        };
        // A real path inside the working directory is taken as the relative path it names.
        patch.map_paths(|p| {
            if Path::new(p).is_absolute() {
                let v = paths.to_view(p);
                if v != p {
                    return v.trim_start_matches('/').to_owned();
                }
            }
            p.to_owned()
        });
        let applied = match harness_fs::patch::apply(view, &self.ledger, &patch) {
            Ok(a) => a,
            Err(e) => return Ok(error(call, paths, e)),
        };
        let context = harness_loop::config::LoopConfig::embedded()
            .map(|c| c.context.diff.context_lines)
            .unwrap_or(3);
        let mut out = Vec::new();
        for f in &applied.files {
            let host = paths.shown(&f.path);
            let line = match &f.moved_from {
                _ if f.added => format!("Added {host}."),
                _ if f.deleted => format!("Deleted {host}."),
                Some(from) => format!("Moved {} to {host}.", paths.shown(from)),
                None => format!("Changed {host}."),
            };
            out.push(line);
            let diff = harness_loop::context::unified_diff(&host, &f.before, &f.after, context);
            if !diff.is_empty() {
                out.push(diff.trim_end_matches('\n').to_owned());
            }
        }
        Ok(ToolOutcome::ok(&call.id, out.join("\n")))
    }
}

impl FileTools {
    /// `mkdir`, `mv` and `rm` (to the trash) on `view`, by the view's rules and texts.
    fn tree(view: &View, call: &ToolCall) -> ToolOutcome {
        let a = &call.arguments;
        let arg = |k: &str| a.get(k).and_then(Value::as_str);
        let answer = match call.name.as_str() {
            "mkdir" => match arg("path") {
                None => return missing(call, "path"),
                Some(p) => view
                    .mkdir(p)
                    .map(|()| format!("Created {}", view.resolve(p))),
            },
            "mv" => match (arg("from"), arg("to")) {
                (None, _) => return missing(call, "from"),
                (_, None) => return missing(call, "to"),
                (Some(from), Some(to)) => view
                    .mv(from, to)
                    .map(|dst| format!("Moved {} to {dst}", view.resolve(from))),
            },
            _ => match arg("path") {
                None => return missing(call, "path"),
                Some(p) => {
                    let recursive = a.get("recursive").and_then(Value::as_bool) == Some(true);
                    let vp = view.resolve(p);
                    match view.list(p) {
                        Ok(listing) if !listing.entries.is_empty() && !recursive => {
                            return ToolOutcome::error(
                                &call.id,
                                format!(
                                    "Not empty: {vp} holds entries; pass recursive: true to delete it with everything in it."
                                ),
                            );
                        }
                        _ => {}
                    }
                    view.rm(p)
                        .map(|id| format!("Moved {vp} to the trash (restore id {id})."))
                }
            },
        };
        match answer {
            Ok(text) => ToolOutcome::ok(&call.id, text),
            Err(e) => ToolOutcome::error(&call.id, e.to_string()),
        }
    }
}
