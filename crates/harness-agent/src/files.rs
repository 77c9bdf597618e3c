//! The file tools on a session's view (`harness-fs`): `read`, `write`, `edit`, `multiedit`,
//! `apply_patch`, `glob`, `grep` and `list`, with their answers as the model reads them and the
//! read ledger that guards writes. Any backend serves: the CLI's host directory, a chat's view
//! of the server's tree, an embedder's in-memory tree. Paths go in and come out through a
//! [`PathMap`], so answers name paths as the person knows them. On a machine's disk
//! ([`DiskFiles`]) a call runs in the session's directory or on the rest of the disk, as the
//! path it names resolves; either way it acts on that one absolute path.

use std::path::Path;
use std::sync::Arc;

use harness_core::protocol::ToolCall;
use harness_fs::tools::{self as fst, EditSpec, GrepMode, GrepOptions, Ledger};
use harness_fs::{VPath, View};
use harness_loop::context::ReadInfo;
use harness_loop::session::{EditInfo, ToolOutcome};
use serde_json::Value;

use crate::args::{Refused, arg_bool, arg_str, arg_usize, required_str};
pub use crate::args::{missing, wrong_type};
use crate::error::SeamError;
use crate::registry::ToolRegistry;
use crate::seams::ShownFile;

/// How the paths a model writes map onto the view and back.
pub trait PathMap: Send + Sync {
    /// A path as the model gave it, as a path of the view.
    fn to_view(&self, input: &str) -> String;
    /// A path of the view as the person knows it.
    fn shown(&self, p: &VPath) -> String;
    /// Where `glob`, `grep` and `list` work when the call names no path, as the model would
    /// write it: the view's root unless the map says otherwise.
    fn here(&self) -> &str {
        "/"
    }
    /// A path of the view as `glob` and `grep` list it: relative to the working directory when
    /// inside it (shorter, and the file tools take it as given), else as [`PathMap::shown`].
    fn listed(&self, p: &VPath) -> String {
        self.shown(p)
    }
}

/// `abs` relative to the directory `root` when inside it (and not `root` itself).
fn relative_to(root: &str, abs: String) -> String {
    match abs.strip_prefix(root) {
        Some(rest) if root != "/" && rest.len() > 1 && rest.starts_with('/') => {
            rest[1..].to_owned()
        }
        _ => abs,
    }
}

/// A directory of a machine's disk seen as the view's `/` (the host backend rooted there): a
/// path is resolved against the directory by the one resolver (`~` the home directory), and
/// one inside it is the view path it names there. Answers name real absolute paths.
#[derive(Debug, Clone)]
pub struct DirPaths {
    root: String,
    home: String,
}

impl DirPaths {
    /// The directory `root` (absolute), `~` being `home`.
    pub fn new(root: &str, home: &str) -> DirPaths {
        DirPaths {
            root: harness_core::path::resolve("/", root),
            home: home.to_owned(),
        }
    }

    /// `input` as the absolute path it names.
    pub fn resolve(&self, input: &str) -> String {
        harness_core::path::resolve_home(&self.root, &self.home, input)
    }

    /// Whether `input` names a path in the directory.
    pub fn holds(&self, input: &str) -> bool {
        harness_core::path::inside(&self.resolve(input), &self.root)
    }
}

impl PathMap for DirPaths {
    /// A path inside the directory as the view's; any other as its absolute path (which the
    /// view would take as inside: [`DiskFiles`] never sends one here).
    fn to_view(&self, input: &str) -> String {
        let abs = self.resolve(input);
        match abs.strip_prefix(&self.root) {
            _ if self.root == "/" => abs,
            Some("") => "/".to_owned(),
            Some(rest) if rest.starts_with('/') => rest.to_owned(),
            _ => abs,
        }
    }

    fn shown(&self, p: &VPath) -> String {
        harness_core::path::resolve(&self.root, p.as_str().trim_start_matches('/'))
    }

    fn here(&self) -> &str {
        "."
    }

    fn listed(&self, p: &VPath) -> String {
        relative_to(&self.root, self.shown(p))
    }
}

/// The whole disk seen as the view's `/` ([`harness_fs::HostBackend::open_disk`]): a path is
/// resolved against the session's directory by the one resolver and is the view path itself.
#[derive(Debug, Clone)]
pub struct AbsolutePaths(DirPaths);

impl PathMap for AbsolutePaths {
    fn to_view(&self, input: &str) -> String {
        self.0.resolve(input)
    }

    fn shown(&self, p: &VPath) -> String {
        p.as_str().to_owned()
    }

    fn here(&self) -> &str {
        "."
    }

    fn listed(&self, p: &VPath) -> String {
        relative_to(&self.0.root, self.shown(p))
    }
}

/// Which of a machine's two views a call runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The session's directory (its own backend).
    Dir,
    /// The rest of the disk.
    Disk,
}

/// The file tools of a session on a machine's disk: its directory through one view, the rest of
/// the disk through another, each with its read ledger. A call runs in the view its paths
/// resolve into (by the one resolver, as the permission engine resolved them), so the path the
/// person was asked about is the path the answer names and the file touched.
#[derive(Debug)]
pub struct DiskFiles {
    dir: DirPaths,
    disk: AbsolutePaths,
    in_dir: FileTools,
    on_disk: FileTools,
}

impl DiskFiles {
    /// The file tools of a session working in `root` (absolute), `~` being `home`.
    pub fn new(root: &str, home: &str) -> DiskFiles {
        let dir = DirPaths::new(root, home);
        DiskFiles {
            disk: AbsolutePaths(dir.clone()),
            dir,
            in_dir: FileTools::new(),
            on_disk: FileTools::new(),
        }
    }

    /// The session's directory's paths.
    pub fn dir_paths(&self) -> &DirPaths {
        &self.dir
    }

    /// Where `call` runs: in the directory when every path it names lies there (a call that
    /// names none, or whose arguments cannot be read, too: it answers why there), else on the
    /// disk. A patch that changes files on both sides is refused: the text to answer.
    pub fn side(&self, call: &ToolCall) -> Result<Side, String> {
        let by = |inside: bool| if inside { Side::Dir } else { Side::Disk };
        match call.name.as_str() {
            "apply_patch" => {
                let Some(Ok(patch)) = call
                    .arguments
                    .get("patch")
                    .and_then(Value::as_str)
                    .map(harness_fs::patch::Patch::parse)
                else {
                    return Ok(Side::Dir);
                };
                let mut outside = Vec::new();
                let mut inside = false;
                for op in &patch.ops {
                    for raw in op.paths() {
                        // An absolute path outside is refused by the patch's own rule.
                        if Path::new(raw).is_absolute() || self.dir.holds(raw) {
                            inside = true;
                        } else {
                            outside.push(self.dir.resolve(raw));
                        }
                    }
                }
                match outside.first() {
                    None => Ok(Side::Dir),
                    Some(_) if !inside => Ok(Side::Disk),
                    Some(first) => Err(format!(
                        "apply_patch: the patch changes files both inside {} and outside it \
                         ({first}); send one patch for each. Nothing was changed.",
                        self.dir.root
                    )),
                }
            }
            _ => match call.arguments.get("path") {
                Some(Value::String(p)) => Ok(by(self.dir.holds(p))),
                _ => Ok(Side::Dir),
            },
        }
    }

    /// The side a path for `show` is read on.
    pub fn side_of(&self, path: &str) -> Side {
        if self.dir.holds(path) {
            Side::Dir
        } else {
            Side::Disk
        }
    }

    /// The view, paths and tools of a side.
    fn of(&self, side: Side) -> (&dyn PathMap, &FileTools) {
        match side {
            Side::Dir => (&self.dir, &self.in_dir),
            Side::Disk => (&self.disk, &self.on_disk),
        }
    }

    /// Runs `call` in the view `views` opens for its side; `None` when it is not a file tool.
    pub fn run(
        &self,
        views: &dyn Fn(Side) -> Result<Arc<View>, harness_fs::Error>,
        call: &ToolCall,
    ) -> Option<ToolOutcome> {
        if !FileTools::NAMES.contains(&call.name.as_str()) {
            return None;
        }
        self.on_side(views, call, |files, view, paths| {
            files.run(view, paths, call)
        })
    }

    /// [`FileTools::precheck`] in the view of `call`'s side.
    pub fn precheck(
        &self,
        views: &dyn Fn(Side) -> Result<Arc<View>, harness_fs::Error>,
        call: &ToolCall,
    ) -> Option<ToolOutcome> {
        if !FileTools::NAMES.contains(&call.name.as_str()) {
            return None;
        }
        self.on_side(views, call, |files, view, paths| {
            files.precheck(view, paths, call)
        })
    }

    fn on_side(
        &self,
        views: &dyn Fn(Side) -> Result<Arc<View>, harness_fs::Error>,
        call: &ToolCall,
        f: impl FnOnce(&FileTools, &View, &dyn PathMap) -> Option<ToolOutcome>,
    ) -> Option<ToolOutcome> {
        let side = match self.side(call) {
            Ok(s) => s,
            Err(refused) => return Some(ToolOutcome::error(&call.id, refused)),
        };
        let (paths, files) = self.of(side);
        match views(side) {
            Ok(view) => f(files, &view, paths),
            Err(e) => Some(error(call, paths, e)),
        }
    }

    /// A file for `show`, read on its side as `read` reads it.
    pub fn read_for_show(
        &self,
        views: &dyn Fn(Side) -> Result<Arc<View>, harness_fs::Error>,
        path: &str,
    ) -> Result<ShownFile, SeamError> {
        let side = self.side_of(path);
        let (paths, files) = self.of(side);
        let view = views(side).map_err(|e| SeamError::file(path, e))?;
        files.read_for_show(&view, paths, path)
    }
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

/// The replacements of an `edit` (its `old_string`, `new_string`, `replace_all`) or a
/// `multiedit` (its `edits`).
fn edit_specs(call: &ToolCall) -> Result<Vec<EditSpec>, Refused> {
    if call.name == "edit" {
        return Ok(vec![EditSpec {
            old_string: required_str(call, "old_string")?.to_owned(),
            new_string: required_str(call, "new_string")?.to_owned(),
            replace_all: arg_bool(call, "replace_all")?.unwrap_or(false),
        }]);
    }
    match call
        .arguments
        .get("edits")
        .cloned()
        .map(serde_json::from_value)
        .transpose()
    {
        Ok(Some(e)) => Ok(e),
        Ok(None) => Err(missing(call, "edits").into()),
        Err(e) => Err(ToolOutcome::error(
            &call.id,
            format!("multiedit: `edits` is malformed: {e}"),
        )
        .into()),
    }
}

/// A `grep` call's options.
fn grep_options(call: &ToolCall) -> Result<GrepOptions, Refused> {
    Ok(GrepOptions {
        include: arg_str(call, "include")?.map(str::to_owned),
        ignore_case: arg_bool(call, "ignore_case")?.unwrap_or(false),
        limit: arg_usize(call, "limit")?,
        mode: match arg_str(call, "mode")? {
            None => GrepMode::default(),
            Some(m) => GrepMode::parse(m).ok_or_else(|| {
                Refused::from(wrong_type(call, "mode", "one of `lines`, `files`, `count`"))
            })?,
        },
        context: arg_usize(call, "context")?.unwrap_or(0),
    })
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

    /// A whole text file a program of the session reads (`python`'s `files`), recorded as read:
    /// its view path and text, or the error `read` would answer.
    pub fn read_for_program(
        &self,
        view: &View,
        paths: &dyn PathMap,
        path: &str,
    ) -> Result<(VPath, String), String> {
        fst::read_text(view, &self.ledger, &paths.to_view(path)).map_err(|e| e.to_string())
    }

    /// Keeps a file a program of the session wrote (`python`'s `save`) as `write` keeps one:
    /// the view's levels, read before it is replaced, one atomic write. The written path, or
    /// the error `write` would answer.
    pub fn save_for_program(
        &self,
        view: &View,
        paths: &dyn PathMap,
        path: &str,
        bytes: &[u8],
    ) -> Result<VPath, String> {
        fst::write_bytes(view, &self.ledger, &paths.to_view(path), bytes)
            .map(|c| c.path)
            .map_err(|e| e.to_string())
    }

    /// Whether a program of the session may replace `path` (`python`'s `save`): it is not
    /// there yet, or was read at its current version; else the error `write` would answer.
    pub fn check_program_save(
        &self,
        view: &View,
        paths: &dyn PathMap,
        path: &str,
    ) -> Result<(), String> {
        fst::check_write(view, &self.ledger, &paths.to_view(path)).map_err(|e| e.to_string())
    }

    /// Runs `call` on `view` by its tool's handler; `None` when it is not a file tool.
    pub fn run(&self, view: &View, paths: &dyn PathMap, call: &ToolCall) -> Option<ToolOutcome> {
        let tool = FILE_TOOLS.get(call.name.as_str())?;
        Some((tool.run)(self, view, paths, call).unwrap_or_else(|refusal| *refusal))
    }

    /// A file for `show`, read through the view as `read` reads it (a path the view does not
    /// show answers as `read` answers it).
    pub fn read_for_show(
        &self,
        view: &View,
        paths: &dyn PathMap,
        path: &str,
    ) -> Result<ShownFile, SeamError> {
        let vp = view.resolve(&paths.to_view(path));
        let bytes = view.read_bytes(&vp).map_err(|e| SeamError::file(path, e))?;
        let host = paths.shown(&vp);
        if bytes.len() as u64 > SHOW_MAX_BYTES {
            return Err(SeamError::file(
                &host,
                format!(
                    "{host} is {} bytes: files over {SHOW_MAX_BYTES} bytes are not shown",
                    bytes.len()
                ),
            ));
        }
        let content = String::from_utf8(bytes).map_err(|_| {
            SeamError::file(
                &host,
                format!("{host} is not UTF-8 text: it cannot be shown"),
            )
        })?;
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
                // The header names the file as grep and glob list it (relative to the working
                // directory inside it); the read's record keeps the real path.
                let text = w.text.replacen(
                    &format!("{} (hash ", w.path),
                    &format!("{} (hash ", paths.listed(&w.path)),
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

    /// `write`, `edit` or `multiedit` (`op` the change itself, after the path is read), answered
    /// with what it did and the file before and after it.
    fn change(
        &self,
        view: &View,
        paths: &dyn PathMap,
        call: &ToolCall,
        op: ChangeOp,
    ) -> Result<ToolOutcome, Refused> {
        let path = required_str(call, "path")?;
        let vp = paths.to_view(path);
        let resolved = view.resolve(&vp);
        let before = view
            .read_bytes(&resolved)
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned());
        let result = op(self, view, &vp, call)?;
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

    fn glob(
        &self,
        view: &View,
        paths: &dyn PathMap,
        call: &ToolCall,
    ) -> Result<ToolOutcome, Refused> {
        let pattern = required_str(call, "pattern")?;
        let root = paths.to_view(arg_str(call, "path")?.unwrap_or(paths.here()));
        Ok(match fst::glob(view, &root, pattern, 200) {
            Ok(g) => {
                let mut text: Vec<String> = g.paths.iter().map(|p| paths.listed(p)).collect();
                if text.is_empty() {
                    text.push("No files found".to_owned());
                }
                if g.truncated {
                    text.push(
                        "(Results truncated. Use a more specific path or pattern.)".to_owned(),
                    );
                }
                ToolOutcome::ok(&call.id, text.join("\n"))
            }
            Err(e) => error(call, paths, e),
        })
    }

    fn grep(
        &self,
        view: &View,
        paths: &dyn PathMap,
        call: &ToolCall,
    ) -> Result<ToolOutcome, Refused> {
        let pattern = required_str(call, "pattern")?;
        let root = paths.to_view(arg_str(call, "path")?.unwrap_or(paths.here()));
        let opts = grep_options(call)?;
        Ok(match fst::grep(view, &root, pattern, &opts) {
            Ok(g) => ToolOutcome::ok(&call.id, g.render_with(&|p| paths.listed(p))),
            Err(e) => error(call, paths, e),
        })
    }

    fn list(
        &self,
        view: &View,
        paths: &dyn PathMap,
        call: &ToolCall,
    ) -> Result<ToolOutcome, Refused> {
        let path = paths.to_view(arg_str(call, "path")?.unwrap_or(paths.here()));
        let depth = arg_usize(call, "depth")?;
        Ok(match fst::list(view, &path, depth) {
            Ok(text) => {
                // A note on the directory itself names it as successes name paths (no entry's
                // line holds a `/` before its end).
                let vp = view.resolve(&path);
                let text = match text.strip_prefix(&format!("({vp} ")) {
                    Some(rest) => format!("({} {rest}", paths.shown(&vp)),
                    None => text,
                };
                ToolOutcome::ok(&call.id, text)
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
        map_patch(&mut patch, paths);
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

/// A patch's paths as the view's, relative to its root as the patch's rule wants them: a
/// relative path resolved by the map, an absolute one the map takes as the view's (a real path
/// inside a working directory) the relative path it names; any other absolute path is left for
/// the patch's own refusal.
fn map_patch(patch: &mut harness_fs::patch::Patch, paths: &dyn PathMap) {
    patch.map_paths(|p| {
        let v = paths.to_view(p);
        if Path::new(p).is_absolute() && v == p {
            return p.to_owned();
        }
        v.trim_start_matches('/').to_owned()
    });
}

impl FileTools {
    /// What `call` would answer without changing anything when a precondition of its own
    /// fails — its arguments, the path resolving to what the tool needs (a file to read or
    /// change, a directory to list or search), a file read before it is changed and unchanged
    /// since, every edit or hunk applying — checked as the call itself checks them; `None`
    /// when it may run, or is not a file tool. Nothing is recorded as read.
    pub fn precheck(
        &self,
        view: &View,
        paths: &dyn PathMap,
        call: &ToolCall,
    ) -> Option<ToolOutcome> {
        let tool = FILE_TOOLS.get(call.name.as_str())?;
        match (tool.precheck)(self, view, paths, call) {
            Ok(None) => None,
            Ok(Some(e)) => Some(error(call, paths, e)),
            Err(refused) => Some(*refused),
        }
    }
}

/// A file tool's handler: how a call runs, and how its own preconditions are checked without
/// running it (the view's refusal it would meet, or the answer to its arguments).
#[derive(Clone, Copy)]
struct FileTool {
    run: fn(&FileTools, &View, &dyn PathMap, &ToolCall) -> Result<ToolOutcome, Refused>,
    precheck: Precheck,
}

/// A file tool's check of its preconditions: the view's refusal the call would meet.
type Precheck = fn(&FileTools, &View, &dyn PathMap, &ToolCall) -> Checked;

/// The change a `write`, `edit` or `multiedit` makes at its view path.
type ChangeOp = fn(&FileTools, &View, &str, &ToolCall) -> ChangeResult;

/// The file tools by canonical name (`mkdir`, `mv` and `rm` too, for a view's tree).
static FILE_TOOLS: std::sync::LazyLock<ToolRegistry<FileTool>> = std::sync::LazyLock::new(|| {
    let tool = |run, precheck| FileTool { run, precheck };
    ToolRegistry::new()
        .with("read", tool(FileTools::read, check_read))
        .with(
            "write",
            tool(|f, v, p, c| f.change(v, p, c, write), check_write),
        )
        .with(
            "edit",
            tool(|f, v, p, c| f.change(v, p, c, edit), check_edits),
        )
        .with(
            "multiedit",
            tool(|f, v, p, c| f.change(v, p, c, multiedit), check_edits),
        )
        .with("apply_patch", tool(FileTools::patch, check_patch))
        .with("glob", tool(FileTools::glob, check_glob))
        .with("grep", tool(FileTools::grep, check_grep))
        .with("list", tool(FileTools::list, check_list))
        .with("mkdir", tool(mkdir, no_precheck))
        .with("mv", tool(mv, no_precheck))
        .with("rm", tool(rm, no_precheck))
});

fn write(f: &FileTools, view: &View, vp: &str, call: &ToolCall) -> ChangeResult {
    let content = required_str(call, "content")?;
    Ok(fst::write(view, &f.ledger, vp, content))
}

fn edit(f: &FileTools, view: &View, vp: &str, call: &ToolCall) -> ChangeResult {
    let old = required_str(call, "old_string")?;
    let new = required_str(call, "new_string")?;
    let all = arg_bool(call, "replace_all")?.unwrap_or(false);
    Ok(fst::edit(view, &f.ledger, vp, old, new, all))
}

fn multiedit(f: &FileTools, view: &View, vp: &str, call: &ToolCall) -> ChangeResult {
    Ok(fst::multiedit(view, &f.ledger, vp, &edit_specs(call)?))
}

/// What a [`ChangeOp`] gives.
type ChangeResult = Result<harness_fs::Result<fst::Change>, Refused>;

/// A precheck's answer.
type Checked = Result<Option<harness_fs::Error>, Refused>;

fn no_precheck(_: &FileTools, _: &View, _: &dyn PathMap, _: &ToolCall) -> Checked {
    Ok(None)
}

fn check_read(_: &FileTools, view: &View, paths: &dyn PathMap, call: &ToolCall) -> Checked {
    let vp = paths.to_view(required_str(call, "path")?);
    let (offset, limit) = (arg_usize(call, "offset")?, arg_usize(call, "limit")?);
    Ok(fst::read(view, &Ledger::new(), &vp, offset, limit).err())
}

fn check_write(f: &FileTools, view: &View, paths: &dyn PathMap, call: &ToolCall) -> Checked {
    let vp = paths.to_view(required_str(call, "path")?);
    required_str(call, "content")?;
    Ok(fst::check_write(view, &f.ledger, &vp).err())
}

fn check_edits(f: &FileTools, view: &View, paths: &dyn PathMap, call: &ToolCall) -> Checked {
    let vp = paths.to_view(required_str(call, "path")?);
    let edits = edit_specs(call)?;
    Ok(fst::check_edits(view, &f.ledger, &vp, &edits).err())
}

fn check_patch(f: &FileTools, view: &View, paths: &dyn PathMap, call: &ToolCall) -> Checked {
    let text = required_str(call, "patch")?;
    Ok(match harness_fs::patch::Patch::parse(text) {
        Err(e) => Some(e),
        Ok(mut patch) => {
            map_patch(&mut patch, paths);
            harness_fs::patch::check(view, &f.ledger, &patch).err()
        }
    })
}

/// Where `glob`, `grep` or `list` would look, its arguments read as the call reads them.
fn search_root(paths: &dyn PathMap, call: &ToolCall) -> Result<String, Refused> {
    let at = paths.to_view(arg_str(call, "path")?.unwrap_or(paths.here()));
    arg_usize(call, "depth")?;
    Ok(at)
}

fn check_glob(_: &FileTools, view: &View, paths: &dyn PathMap, call: &ToolCall) -> Checked {
    required_str(call, "pattern")?;
    let at = search_root(paths, call)?;
    Ok(view.stat(&view.resolve(&at)).err())
}

fn check_grep(_: &FileTools, view: &View, paths: &dyn PathMap, call: &ToolCall) -> Checked {
    required_str(call, "pattern")?;
    let at = paths.to_view(arg_str(call, "path")?.unwrap_or(paths.here()));
    grep_options(call)?;
    arg_usize(call, "depth")?;
    Ok(view.stat(&view.resolve(&at)).err())
}

fn check_list(_: &FileTools, view: &View, paths: &dyn PathMap, call: &ToolCall) -> Checked {
    let at = search_root(paths, call)?;
    // One level is enough to find what the listing would refuse.
    Ok(fst::list(view, &at, Some(1)).err())
}

/// A tree tool's answer from the view's result.
fn tree_answer(call: &ToolCall, answer: harness_fs::Result<String>) -> ToolOutcome {
    match answer {
        Ok(text) => ToolOutcome::ok(&call.id, text),
        Err(e) => ToolOutcome::error(&call.id, e.to_string()),
    }
}

/// A tree tool's string argument, as those tools have always read them (a value of another
/// type is taken as absent).
fn tree_arg<'a>(call: &'a ToolCall, key: &str) -> Result<&'a str, Refused> {
    call.arguments
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| missing(call, key).into())
}

/// `mkdir` on the view, by its rules and texts.
fn mkdir(
    _: &FileTools,
    view: &View,
    _: &dyn PathMap,
    call: &ToolCall,
) -> Result<ToolOutcome, Refused> {
    let p = tree_arg(call, "path")?;
    Ok(tree_answer(
        call,
        view.mkdir(p)
            .map(|()| format!("Created {}", view.resolve(p))),
    ))
}

/// `mv` on the view, by its rules and texts.
fn mv(
    _: &FileTools,
    view: &View,
    _: &dyn PathMap,
    call: &ToolCall,
) -> Result<ToolOutcome, Refused> {
    let from = tree_arg(call, "from")?;
    let to = tree_arg(call, "to")?;
    Ok(tree_answer(
        call,
        view.mv(from, to)
            .map(|dst| format!("Moved {} to {dst}", view.resolve(from))),
    ))
}

/// `rm` (to the trash) on the view: a directory with entries only with `recursive`.
fn rm(
    _: &FileTools,
    view: &View,
    _: &dyn PathMap,
    call: &ToolCall,
) -> Result<ToolOutcome, Refused> {
    let p = tree_arg(call, "path")?;
    let recursive = call.arguments.get("recursive").and_then(Value::as_bool) == Some(true);
    let vp = view.resolve(p);
    if let Ok(listing) = view.list(p)
        && !listing.entries.is_empty()
        && !recursive
    {
        return Ok(ToolOutcome::error(
            &call.id,
            format!(
                "Not empty: {vp} holds entries; pass recursive: true to delete it with everything in it."
            ),
        ));
    }
    Ok(tree_answer(
        call,
        view.rm(p)
            .map(|id| format!("Moved {vp} to the trash (restore id {id}).")),
    ))
}
