//! `apply_patch` (`spec/tools/apply_patch.json`): a patch that adds, deletes, moves and changes
//! files, parsed, checked against the session's [`Ledger`] under the rules of the other file
//! tools (a file changed or deleted must have been read at its current version; a file added or
//! moved to must not exist), and applied all or nothing: every hunk is placed before anything is
//! written, and a write that fails part way undoes the ones before it.

use crate::backend::Expect;
use crate::error::{Error, Result};
use crate::path::VPath;
use crate::tools::{Ledger, decode_text};
use crate::view::View;

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE: &str = "*** Move to: ";
/// The lines that name a file, each followed by its path.
pub const HEADERS: [&str; 4] = [ADD, DELETE, UPDATE, MOVE];
const END_OF_FILE: &str = "*** End of File";

/// A parsed patch: what it does to each file, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    /// One entry per file touched.
    pub ops: Vec<FileOp>,
}

/// What a patch does to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOp {
    /// A new file with this text.
    Add {
        /// The path as the patch gives it.
        path: String,
        /// The whole text.
        text: String,
    },
    /// A file removed (to the trash).
    Delete {
        /// The path as the patch gives it.
        path: String,
    },
    /// A file changed by hunks, and renamed if `move_to` says so.
    Update {
        /// The path as the patch gives it.
        path: String,
        /// The new path, if the file moves.
        move_to: Option<String>,
        /// The changes, in file order.
        hunks: Vec<Hunk>,
    },
}

/// One `@@` section of an update.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hunk {
    /// The line after `@@` that locates the hunk (a function's header, say).
    pub anchor: Option<String>,
    /// The hunk's lines.
    pub lines: Vec<HunkLine>,
    /// `*** End of File` followed it: it must match at the end of the file.
    pub end_of_file: bool,
}

/// A line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    /// Unchanged (` `).
    Keep(String),
    /// Removed (`-`).
    Remove(String),
    /// Added (`+`).
    Add(String),
}

fn invalid(msg: String) -> Error {
    Error::Invalid(format!("apply_patch: {msg} Nothing was changed."))
}

impl FileOp {
    /// The path the patch names first.
    pub fn path(&self) -> &str {
        match self {
            FileOp::Add { path, .. } | FileOp::Delete { path } | FileOp::Update { path, .. } => {
                path
            }
        }
    }

    /// Every path the patch names for this file (an update's `Move to` second).
    pub fn paths(&self) -> Vec<&str> {
        match self {
            FileOp::Add { path, .. } | FileOp::Delete { path } => vec![path],
            FileOp::Update { path, move_to, .. } => {
                let mut v = vec![path.as_str()];
                if let Some(m) = move_to {
                    v.push(m);
                }
                v
            }
        }
    }

    fn paths_mut(&mut self) -> Vec<&mut String> {
        match self {
            FileOp::Add { path, .. } | FileOp::Delete { path } => vec![path],
            FileOp::Update { path, move_to, .. } => {
                let mut v = vec![path];
                if let Some(m) = move_to {
                    v.push(m);
                }
                v
            }
        }
    }
}

impl Patch {
    /// Reads a patch from `*** Begin Patch` to `*** End Patch` (blank lines around it and CR
    /// line ends are allowed).
    pub fn parse(text: &str) -> Result<Patch> {
        let lines: Vec<&str> = text
            .lines()
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .collect();
        let first = lines.iter().position(|l| !l.trim().is_empty());
        let last = lines.iter().rposition(|l| !l.trim().is_empty());
        let (Some(first), Some(last)) = (first, last) else {
            return Err(invalid("the patch is empty.".into()));
        };
        if lines[first].trim() != BEGIN {
            return Err(invalid(format!("the patch must start with `{BEGIN}`.")));
        }
        if last == first || lines[last].trim() != END {
            return Err(invalid(format!("the patch must end with `{END}`.")));
        }
        let mut ops: Vec<FileOp> = Vec::new();
        let mut i = first + 1;
        while i < last {
            let line = lines[i];
            let no = i - first + 1;
            if let Some(p) = line.strip_prefix(ADD) {
                let path = header_path(p, no)?;
                i += 1;
                let mut text = String::new();
                while i < last && !lines[i].starts_with("*** ") {
                    let Some(body) = lines[i].strip_prefix('+') else {
                        return Err(invalid(format!(
                            "line {}: every line of an added file starts with `+`.",
                            i - first + 1
                        )));
                    };
                    text.push_str(body);
                    text.push('\n');
                    i += 1;
                }
                ops.push(FileOp::Add { path, text });
            } else if let Some(p) = line.strip_prefix(DELETE) {
                ops.push(FileOp::Delete {
                    path: header_path(p, no)?,
                });
                i += 1;
            } else if let Some(p) = line.strip_prefix(UPDATE) {
                let path = header_path(p, no)?;
                i += 1;
                let mut move_to = None;
                if i < last
                    && let Some(m) = lines[i].strip_prefix(MOVE)
                {
                    move_to = Some(header_path(m, i - first + 1)?);
                    i += 1;
                }
                let mut hunks: Vec<Hunk> = Vec::new();
                while i < last {
                    let l = lines[i];
                    if l.trim_end() == END_OF_FILE {
                        match hunks.last_mut() {
                            Some(h) => h.end_of_file = true,
                            None => {
                                return Err(invalid(format!(
                                    "line {}: `{END_OF_FILE}` follows no hunk.",
                                    i - first + 1
                                )));
                            }
                        }
                    } else if l.starts_with("*** ") {
                        break;
                    } else if let Some(rest) = l.strip_prefix("@@") {
                        let anchor = rest.trim();
                        hunks.push(Hunk {
                            anchor: (!anchor.is_empty()).then(|| anchor.to_owned()),
                            ..Hunk::default()
                        });
                    } else {
                        let hl = if let Some(t) = l.strip_prefix(' ') {
                            HunkLine::Keep(t.to_owned())
                        } else if let Some(t) = l.strip_prefix('-') {
                            HunkLine::Remove(t.to_owned())
                        } else if let Some(t) = l.strip_prefix('+') {
                            HunkLine::Add(t.to_owned())
                        } else if l.is_empty() {
                            // An unchanged blank line whose leading space was lost.
                            HunkLine::Keep(String::new())
                        } else {
                            return Err(invalid(format!(
                                "line {}: a hunk line starts with ` `, `-` or `+`, not {l:?}.",
                                i - first + 1
                            )));
                        };
                        // The first hunk may come without its `@@`.
                        if hunks.is_empty() {
                            hunks.push(Hunk::default());
                        }
                        if let Some(h) = hunks.last_mut() {
                            h.lines.push(hl);
                        }
                    }
                    i += 1;
                }
                if let Some(h) = hunks.iter().find(|h| {
                    !h.lines
                        .iter()
                        .any(|l| matches!(l, HunkLine::Add(_) | HunkLine::Remove(_)))
                }) {
                    let at = h.anchor.as_deref().unwrap_or("");
                    return Err(invalid(format!(
                        "a hunk of {path} (`@@ {at}`) changes no line."
                    )));
                }
                if hunks.is_empty() && move_to.is_none() {
                    return Err(invalid(format!("the update of {path} has no hunk.")));
                }
                ops.push(FileOp::Update {
                    path,
                    move_to,
                    hunks,
                });
            } else if line.trim().is_empty() {
                i += 1;
            } else {
                return Err(invalid(format!(
                    "line {no}: expected `{ADD}`, `{DELETE}` or `{UPDATE}`, not {line:?}."
                )));
            }
        }
        if ops.is_empty() {
            return Err(invalid("the patch changes no file.".into()));
        }
        Ok(Patch { ops })
    }

    /// Rewrites every path the patch names (a front end mapping its own paths to the view's).
    pub fn map_paths(&mut self, f: impl Fn(&str) -> String) {
        for op in &mut self.ops {
            for p in op.paths_mut() {
                *p = f(p);
            }
        }
    }
}

fn header_path(raw: &str, line: usize) -> Result<String> {
    let p = raw.trim();
    if p.is_empty() {
        return Err(invalid(format!("line {line}: the file's path is missing.")));
    }
    Ok(p.to_owned())
}

/// What happened to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// The file's path (after a move, the new one).
    pub path: VPath,
    /// The path it had before a move.
    pub moved_from: Option<VPath>,
    /// Its text before (empty for an added file).
    pub before: String,
    /// Its text after (empty for a deleted file).
    pub after: String,
    /// Added.
    pub added: bool,
    /// Deleted.
    pub deleted: bool,
}

impl FileChange {
    /// The unified diff of the change (3 lines of context), headed by the old and new paths.
    pub fn diff(&self) -> String {
        let from = self.moved_from.as_ref().unwrap_or(&self.path);
        similar::TextDiff::from_lines(&self.before, &self.after)
            .unified_diff()
            .context_radius(3)
            .header(from.as_str(), self.path.as_str())
            .to_string()
    }
}

/// What a patch did: one change a file, in the patch's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The files changed.
    pub files: Vec<FileChange>,
}

impl Applied {
    /// Every file's diff, one after another.
    pub fn diff(&self) -> String {
        self.files.iter().map(FileChange::diff).collect()
    }
}

/// One file's planned change, checked and computed before anything is written.
struct Plan {
    path: VPath,
    to: Option<VPath>,
    /// The current version's hash (None: the file is new).
    hash: Option<String>,
    before: String,
    after: Option<String>,
}

/// A step done, and how to take it back.
enum Undo {
    /// An added file: remove it.
    Added(VPath),
    /// A changed file: put its old bytes back over the new version.
    Changed(VPath, String, String),
    /// A moved file: move it back.
    Moved(VPath, VPath),
    /// A deleted file: restore it from the trash.
    Deleted(String),
}

/// Applies `patch` through `view`: all of it, or (on any error) none of it. Paths are relative
/// to the view's working directory; an absolute path is refused.
pub fn apply(view: &View, ledger: &Ledger, patch: &Patch) -> Result<Applied> {
    let plans = plan(view, ledger, patch)?;
    write_plans(view, ledger, plans)
}

/// Checks, without writing, everything [`apply`] checks before it writes (every path writable
/// and named once, every file read at its current version, every hunk placed): the refusal is
/// the one `apply` would give.
pub fn check(view: &View, ledger: &Ledger, patch: &Patch) -> Result<()> {
    plan(view, ledger, patch).map(|_| ())
}

/// Every file's change, checked and worked out before anything is written.
fn plan(view: &View, ledger: &Ledger, patch: &Patch) -> Result<Vec<Plan>> {
    let mut plans = Vec::new();
    let mut touched: Vec<VPath> = Vec::new();
    for op in &patch.ops {
        let resolve = |raw: &str| -> Result<VPath> {
            if raw.starts_with('/') {
                return Err(invalid(format!(
                    "{raw} is absolute; paths in a patch are relative to the working directory."
                )));
            }
            let p = view.resolve(raw);
            view.check_writable(&p)?;
            Ok(p)
        };
        let p = resolve(op.path())?;
        let mut names = vec![p.clone()];
        let plan = match op {
            FileOp::Add { text, .. } => {
                match view.stat(&p) {
                    Ok(_) => return Err(Error::AlreadyExists(p)),
                    Err(Error::NotFound(_)) => {}
                    Err(e) => return Err(e),
                }
                Plan {
                    path: p,
                    to: None,
                    hash: None,
                    before: String::new(),
                    after: Some(text.clone()),
                }
            }
            FileOp::Delete { .. } => {
                let (hash, bytes) = current(view, ledger, &p)?;
                Plan {
                    before: String::from_utf8_lossy(&bytes).into_owned(),
                    path: p,
                    to: None,
                    hash: Some(hash),
                    after: None,
                }
            }
            FileOp::Update { move_to, hunks, .. } => {
                let (hash, bytes) = current(view, ledger, &p)?;
                let before = decode_text(&p, &bytes)?;
                let after = apply_hunks(&p, &before, hunks)?;
                let to = match move_to {
                    Some(m) => {
                        let to = resolve(m)?;
                        if to != p {
                            match view.stat(&to) {
                                Ok(_) => return Err(Error::AlreadyExists(to)),
                                Err(Error::NotFound(_)) => {}
                                Err(e) => return Err(e),
                            }
                            names.push(to.clone());
                            Some(to)
                        } else {
                            None
                        }
                    }
                    None => None,
                };
                Plan {
                    path: p,
                    to,
                    hash: Some(hash),
                    before,
                    after: Some(after),
                }
            }
        };
        for n in names {
            if touched.contains(&n) {
                return Err(invalid(format!("{n} is named twice in the patch.")));
            }
            touched.push(n);
        }
        plans.push(plan);
    }
    Ok(plans)
}

/// Writes the planned changes in order; on any error takes back what was written.
fn write_plans(view: &View, ledger: &Ledger, plans: Vec<Plan>) -> Result<Applied> {
    let mut done: Vec<Undo> = Vec::new();
    let mut files = Vec::new();
    for plan in plans {
        match write_one(view, &plan, &mut done) {
            Ok(()) => {}
            Err(e) => {
                undo(view, done);
                return Err(e);
            }
        }
        let path = plan.to.clone().unwrap_or_else(|| plan.path.clone());
        if let Some(after) = &plan.after {
            ledger.record(&path, crate::content_hash(after.as_bytes()));
        }
        files.push(FileChange {
            moved_from: plan.to.as_ref().map(|_| plan.path.clone()),
            path,
            added: plan.hash.is_none(),
            deleted: plan.after.is_none(),
            before: plan.before,
            after: plan.after.unwrap_or_default(),
        });
    }
    Ok(Applied { files })
}

/// The current version of an existing file the session has read at that version.
fn current(view: &View, ledger: &Ledger, p: &VPath) -> Result<(String, Vec<u8>)> {
    let meta = view.stat(p)?;
    if meta.kind == crate::backend::Kind::Dir {
        return Err(Error::IsADirectory(p.clone()));
    }
    let seen = ledger.get(p).ok_or_else(|| Error::NotRead(p.clone()))?;
    let bytes = view.read_bytes(p)?;
    if crate::content_hash(&bytes) != seen {
        return Err(Error::Stale(p.clone()));
    }
    Ok((seen, bytes))
}

fn write_one(view: &View, plan: &Plan, done: &mut Vec<Undo>) -> Result<()> {
    match (&plan.hash, &plan.after) {
        (None, Some(text)) => {
            view.write_bytes(&plan.path, text.as_bytes(), &Expect::Absent)?;
            done.push(Undo::Added(plan.path.clone()));
        }
        (Some(_), None) => {
            // To the trash: restorable, by `undo` too.
            let id = view.rm(plan.path.as_str())?;
            done.push(Undo::Deleted(id));
        }
        (Some(hash), Some(after)) => {
            let mut at = plan.path.clone();
            if let Some(to) = &plan.to {
                at = view.mv(plan.path.as_str(), to.as_str())?;
                done.push(Undo::Moved(at.clone(), plan.path.clone()));
            }
            if *after != plan.before {
                view.write_bytes(&at, after.as_bytes(), &Expect::Version(hash.clone()))?;
                done.push(Undo::Changed(
                    at,
                    plan.before.clone(),
                    crate::content_hash(after.as_bytes()),
                ));
            }
        }
        (None, None) => {}
    }
    Ok(())
}

/// Takes back the steps done, last first (best effort: the first error is the one reported).
fn undo(view: &View, done: Vec<Undo>) {
    for step in done.into_iter().rev() {
        let _ = match step {
            Undo::Added(p) => view.rm(p.as_str()).map(|_| ()),
            Undo::Changed(p, before, hash) => {
                view.write_bytes(&p, before.as_bytes(), &Expect::Version(hash))
            }
            Undo::Moved(now, was) => view.mv(now.as_str(), was.as_str()).map(|_| ()),
            Undo::Deleted(id) => view.restore(&id).map(|_| ()),
        };
    }
}

/// Lines of a text without their ends; whether it used CRLF and ended with a line end.
fn split(text: &str) -> (Vec<&str>, bool, bool) {
    let crlf = text.contains("\r\n");
    let ends = text.ends_with('\n');
    let body = text.strip_suffix('\n').unwrap_or(text);
    let lines = if text.is_empty() {
        Vec::new()
    } else {
        body.split('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .collect()
    };
    (lines, crlf, ends)
}

/// Places every hunk (each after the one before, uniquely) and answers the new text.
pub fn apply_hunks(p: &VPath, text: &str, hunks: &[Hunk]) -> Result<String> {
    let (lines, crlf, ends) = split(text);
    let same = |a: &str, b: &str| a.trim_end() == b.trim_end();
    let mut cursor = 0usize;
    // (start, length replaced, new lines)
    let mut edits: Vec<(usize, usize, Vec<String>)> = Vec::new();
    for (n, h) in hunks.iter().enumerate() {
        let which = || match &h.anchor {
            Some(a) => format!("hunk {} of {p} (`@@ {a}`)", n + 1),
            None => format!("hunk {} of {p}", n + 1),
        };
        if let Some(anchor) = &h.anchor {
            let found = (cursor..lines.len()).find(|&i| lines[i].trim() == anchor.trim());
            match found {
                Some(i) => cursor = i + 1,
                None => {
                    return Err(invalid(format!(
                        "{}: its `@@` line is not in the file.",
                        which()
                    )));
                }
            }
        }
        let old: Vec<&str> = h
            .lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Keep(t) | HunkLine::Remove(t) => Some(t.as_str()),
                HunkLine::Add(_) => None,
            })
            .collect();
        let start = if old.is_empty() {
            if h.end_of_file || h.anchor.is_none() {
                lines.len()
            } else {
                cursor
            }
        } else {
            let fits = |at: usize| {
                at + old.len() <= lines.len()
                    && old.iter().zip(&lines[at..]).all(|(a, b)| same(a, b))
            };
            let places: Vec<usize> = if h.end_of_file {
                lines
                    .len()
                    .checked_sub(old.len())
                    .filter(|&at| at >= cursor && fits(at))
                    .into_iter()
                    .collect()
            } else {
                (cursor..=lines.len().saturating_sub(old.len()))
                    .filter(|&at| fits(at))
                    .collect()
            };
            match places.as_slice() {
                [at] => *at,
                [] => {
                    return Err(invalid(format!(
                        "{}: its unchanged and removed lines were not found{}; they must match the file.",
                        which(),
                        if h.end_of_file {
                            " at the end of the file"
                        } else {
                            ""
                        }
                    )));
                }
                many => {
                    return Err(invalid(format!(
                        "{}: its lines match {} places; give more unchanged lines or an `@@` line to pick one.",
                        which(),
                        many.len()
                    )));
                }
            }
        };
        // Unchanged lines keep the file's own text (its trailing whitespace).
        let mut new = Vec::new();
        let mut k = start;
        for l in &h.lines {
            match l {
                HunkLine::Keep(_) => {
                    new.push(lines[k].to_owned());
                    k += 1;
                }
                HunkLine::Remove(_) => k += 1,
                HunkLine::Add(t) => new.push(t.clone()),
            }
        }
        edits.push((start, old.len(), new));
        cursor = start + old.len();
    }
    let mut out: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    for (start, len, new) in edits.into_iter().rev() {
        out.splice(start..start + len, new);
    }
    let eol = if crlf { "\r\n" } else { "\n" };
    let mut text = out.join(eol);
    if !out.is_empty() && (ends || text.is_empty() || lines.is_empty()) {
        text.push_str(eol);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::backend::MemoryBackend;
    use crate::view::{Access, Level};

    fn setup(files: &[(&str, &str)]) -> (View, Ledger) {
        let tree = MemoryBackend::new();
        for (p, t) in files {
            tree.add_file(&VPath::parse(p), *t).unwrap();
        }
        let view = View::new(Arc::new(tree), Access::new().grant("/", Level::Stage));
        (view, Ledger::new())
    }

    fn read(view: &View, ledger: &Ledger, p: &str) {
        crate::tools::read(view, ledger, p, None, None).unwrap();
    }

    fn text(view: &View, p: &str) -> Option<String> {
        view.read_bytes(&VPath::parse(p))
            .ok()
            .map(|b| String::from_utf8(b).unwrap())
    }

    const APP: &str = "import os\n\ndef handle(request):\n    user = load(request)\n    return render(user)\n\ndef other():\n    return render(user)\n";

    #[test]
    fn the_spec_example_applies_whole() {
        let (view, ledger) = setup(&[("/src/app.py", APP), ("/src/old_helpers.py", "x = 1\n")]);
        read(&view, &ledger, "src/app.py");
        read(&view, &ledger, "src/old_helpers.py");
        let patch = Patch::parse(
            "*** Begin Patch\n*** Add File: docs/usage.md\n+Every line of the new file,\n+each one starting with +.\n*** Update File: src/app.py\n*** Move to: src/main.py\n@@ def handle(request):\n     user = load(request)\n-    return render(user)\n+    return render(user, request.locale)\n*** Delete File: src/old_helpers.py\n*** End Patch",
        )
        .unwrap();
        let done = apply(&view, &ledger, &patch).unwrap();
        assert_eq!(
            text(&view, "/docs/usage.md").unwrap(),
            "Every line of the new file,\neach one starting with +.\n"
        );
        assert_eq!(text(&view, "/src/app.py"), None);
        assert_eq!(text(&view, "/src/old_helpers.py"), None);
        let main = text(&view, "/src/main.py").unwrap();
        assert_eq!(
            main,
            APP.replacen("render(user)\n", "render(user, request.locale)\n", 1)
        );
        let diff = done.diff();
        assert!(
            diff.contains("--- /src/app.py\n+++ /src/main.py\n"),
            "{diff}"
        );
        assert!(
            diff.contains("+    return render(user, request.locale)\n"),
            "{diff}"
        );
        assert!(diff.contains("+++ /docs/usage.md\n"), "{diff}");
        assert!(diff.contains("-x = 1\n"), "{diff}");
        // The changed file may be changed again without reading it (the ledger has it).
        let again = Patch::parse(
            "*** Begin Patch\n*** Update File: src/main.py\n@@\n-import os\n+import sys\n*** End Patch",
        )
        .unwrap();
        apply(&view, &ledger, &again).unwrap();
        assert!(
            text(&view, "/src/main.py")
                .unwrap()
                .starts_with("import sys\n")
        );
    }

    #[test]
    fn guards_of_the_other_file_tools_hold() {
        let (view, ledger) = setup(&[("/a.txt", "one\ntwo\n"), ("/b.txt", "b\n")]);
        let upd =
            Patch::parse("*** Begin Patch\n*** Update File: a.txt\n-one\n+uno\n*** End Patch")
                .unwrap();
        assert!(matches!(
            apply(&view, &ledger, &upd),
            Err(Error::NotRead(_))
        ));
        let del = Patch::parse("*** Begin Patch\n*** Delete File: b.txt\n*** End Patch").unwrap();
        assert!(matches!(
            apply(&view, &ledger, &del),
            Err(Error::NotRead(_))
        ));
        read(&view, &ledger, "a.txt");
        view.write("/a.txt", b"one\ntwo\nthree\n").unwrap();
        assert!(matches!(apply(&view, &ledger, &upd), Err(Error::Stale(_))));
        let add =
            Patch::parse("*** Begin Patch\n*** Add File: b.txt\n+new\n*** End Patch").unwrap();
        assert!(matches!(
            apply(&view, &ledger, &add),
            Err(Error::AlreadyExists(_))
        ));
        let abs =
            Patch::parse("*** Begin Patch\n*** Add File: /c.txt\n+new\n*** End Patch").unwrap();
        let e = apply(&view, &ledger, &abs).unwrap_err().to_string();
        assert!(e.contains("/c.txt is absolute"), "{e}");
    }

    #[test]
    fn a_failing_part_changes_nothing() {
        let (view, ledger) = setup(&[("/a.txt", "one\ntwo\n"), ("/b.txt", "b\n")]);
        read(&view, &ledger, "a.txt");
        read(&view, &ledger, "b.txt");
        let patch = Patch::parse(
            "*** Begin Patch\n*** Add File: new.txt\n+n\n*** Update File: a.txt\n-one\n+uno\n*** Delete File: b.txt\n*** Update File: b.txt\n-zzz\n+y\n*** End Patch",
        )
        .unwrap();
        let e = apply(&view, &ledger, &patch).unwrap_err().to_string();
        assert!(e.contains("Nothing was changed."), "{e}");
        assert_eq!(text(&view, "/a.txt").unwrap(), "one\ntwo\n");
        assert_eq!(text(&view, "/b.txt").unwrap(), "b\n");
        assert_eq!(text(&view, "/new.txt"), None);
    }

    #[test]
    fn a_write_that_fails_part_way_is_undone() {
        let tree = MemoryBackend::new();
        tree.add_file(&VPath::parse("/w/a.txt"), "a\n").unwrap();
        tree.add_file(&VPath::parse("/w/b.txt"), "b\n").unwrap();
        let view = View::new(Arc::new(tree), Access::new().grant("/w", Level::Stage));
        let ledger = Ledger::new();
        read(&view, &ledger, "/w/a.txt");
        read(&view, &ledger, "/w/b.txt");
        let patch = Patch::parse(
            "*** Begin Patch\n*** Update File: a.txt\n-a\n+A\n*** Update File: b.txt\n-b\n+B\n*** End Patch",
        )
        .unwrap();
        let view = view.with_cwd("/w");
        // b changed behind the session's back between the check and the write: a plan whose
        // hash no longer matches, written step by step as `apply` does.
        let mut done = Vec::new();
        let a = Plan {
            path: VPath::parse("/w/a.txt"),
            to: None,
            hash: Some(crate::content_hash(b"a\n")),
            before: "a\n".into(),
            after: Some("A\n".into()),
        };
        write_one(&view, &a, &mut done).unwrap();
        assert_eq!(text(&view, "/w/a.txt").unwrap(), "A\n");
        let b = Plan {
            path: VPath::parse("/w/b.txt"),
            to: None,
            hash: Some("0000".into()),
            before: "b\n".into(),
            after: Some("B\n".into()),
        };
        assert!(write_one(&view, &b, &mut done).is_err());
        undo(&view, done);
        assert_eq!(text(&view, "/w/a.txt").unwrap(), "a\n");
        // And the whole patch, applied normally, works.
        apply(&view, &ledger, &patch).unwrap();
        assert_eq!(text(&view, "/w/b.txt").unwrap(), "B\n");
    }

    #[test]
    fn hunks_are_placed_uniquely_and_in_order() {
        let p = VPath::parse("/f");
        let twice = "a\nx\nb\nx\n";
        let hunk = |lines: Vec<HunkLine>| Hunk {
            lines,
            ..Hunk::default()
        };
        let replace_x = hunk(vec![
            HunkLine::Remove("x".into()),
            HunkLine::Add("y".into()),
        ]);
        let e = apply_hunks(&p, twice, std::slice::from_ref(&replace_x))
            .unwrap_err()
            .to_string();
        assert!(e.contains("match 2 places"), "{e}");
        let anchored = Hunk {
            anchor: Some("b".into()),
            ..replace_x.clone()
        };
        assert_eq!(apply_hunks(&p, twice, &[anchored]).unwrap(), "a\nx\nb\ny\n");
        let at_end = Hunk {
            end_of_file: true,
            ..replace_x.clone()
        };
        assert_eq!(apply_hunks(&p, twice, &[at_end]).unwrap(), "a\nx\nb\ny\n");
        // Two hunks: the second is looked for after the first (where it is unique).
        let first = hunk(vec![
            HunkLine::Keep("a".into()),
            HunkLine::Remove("x".into()),
            HunkLine::Add("y".into()),
        ]);
        assert_eq!(
            apply_hunks(&p, twice, &[first, replace_x.clone()]).unwrap(),
            "a\ny\nb\ny\n"
        );
        let missing = hunk(vec![
            HunkLine::Keep("zzz".into()),
            HunkLine::Add("q".into()),
        ]);
        let e = apply_hunks(&p, twice, &[missing]).unwrap_err().to_string();
        assert!(e.contains("were not found"), "{e}");
        // Trailing whitespace may differ; the file's own unchanged lines are kept; CRLF stays.
        let crlf = "keep  \r\nold\r\n";
        let h = hunk(vec![
            HunkLine::Keep("keep".into()),
            HunkLine::Remove("old ".into()),
            HunkLine::Add("new".into()),
        ]);
        assert_eq!(apply_hunks(&p, crlf, &[h]).unwrap(), "keep  \r\nnew\r\n");
        // A pure addition with no anchor goes at the end; no final newline stays none.
        let add = hunk(vec![HunkLine::Add("z".into())]);
        assert_eq!(apply_hunks(&p, "a\nb", &[add]).unwrap(), "a\nb\nz");
    }

    #[test]
    fn malformed_patches_are_refused_with_the_line() {
        for (patch, says) in [
            ("", "empty"),
            (
                "*** Update File: a\n-x\n+y\n*** End Patch",
                "must start with",
            ),
            (
                "*** Begin Patch\n*** Update File: a\n-x\n+y\n",
                "must end with",
            ),
            ("*** Begin Patch\n*** End Patch", "changes no file"),
            (
                "*** Begin Patch\n*** Add File: a\nplain\n*** End Patch",
                "line 3: every line",
            ),
            (
                "*** Begin Patch\n*** Update File: a\n*** End Patch",
                "has no hunk",
            ),
            (
                "*** Begin Patch\n*** Update File: a\n@@ f\n x\n*** End Patch",
                "changes no line",
            ),
            (
                "*** Begin Patch\n*** Update File: a\n?x\n*** End Patch",
                "line 3: a hunk line",
            ),
            (
                "*** Begin Patch\n*** Frobnicate: a\n*** End Patch",
                "line 2: expected",
            ),
        ] {
            let e = Patch::parse(patch).unwrap_err().to_string();
            assert!(e.contains(says), "{patch:?}: {e}");
            assert!(e.ends_with("Nothing was changed."), "{e}");
        }
        let e = {
            let (view, ledger) = setup(&[("/a", "x\n")]);
            read(&view, &ledger, "a");
            let p = Patch::parse(
                "*** Begin Patch\n*** Update File: a\n-x\n+y\n*** Delete File: a\n*** End Patch",
            )
            .unwrap();
            apply(&view, &ledger, &p).unwrap_err().to_string()
        };
        assert!(e.contains("/a is named twice"), "{e}");
    }
}
