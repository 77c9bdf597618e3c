//! The file tools' logic (the tools themselves are described in `spec/tools/`): read windows,
//! guarded write and edit, multiedit, glob, grep, list, mkdir, mv, rm and restore. Each takes a
//! [`View`] and, where a guard applies, the session's [`Ledger`] of what it last read.

use std::collections::HashMap;
use std::sync::Mutex;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};

use crate::backend::{Expect, Kind};
use crate::error::{Error, Result};
use crate::ignores::Ignores;
use crate::path::VPath;
use crate::view::View;

/// Lines a read shows at most (also the default window).
pub const READ_LINES: usize = 2000;
/// Characters of one line a read shows at most.
pub const READ_LINE_CHARS: usize = 2000;
/// Bytes of lines a read shows at most (50 KiB).
pub const READ_BYTES: usize = 50 * 1024;
/// Bytes sampled for a NUL to call a file binary.
pub const BINARY_SAMPLE: usize = 8192;
/// Paths glob answers at most by default.
pub const GLOB_LIMIT: usize = 100;
/// Matches grep answers at most by default.
pub const GREP_LIMIT: usize = 250;
/// Characters of a matched line grep shows at most.
pub const GREP_LINE_CHARS: usize = 2000;
/// Directories search never enters: version-control stores.
pub const VCS_DIRS: [&str; 6] = [".git", ".svn", ".hg", ".bzr", ".jj", ".sl"];

/// What a session last read of each file: the content hash a write or edit must match.
#[derive(Debug, Default)]
pub struct Ledger {
    seen: Mutex<HashMap<VPath, String>>,
}

impl Ledger {
    /// An empty ledger (a new session).
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that the session saw `path` at `hash`.
    pub fn record(&self, path: &VPath, hash: String) {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path.clone(), hash);
    }

    /// The hash the session last saw `path` at.
    pub fn get(&self, path: &VPath) -> Option<String> {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(path)
            .cloned()
    }

    /// Forgets everything (after compaction, say).
    pub fn clear(&self) {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// Decodes a file as text: binary (a NUL in the first 8 KiB) and invalid UTF-8 are refused.
pub fn decode_text(path: &VPath, data: &[u8]) -> Result<String> {
    if data[..data.len().min(BINARY_SAMPLE)].contains(&0) {
        return Err(Error::Binary(path.clone()));
    }
    String::from_utf8(data.to_vec()).map_err(|_| Error::NotUtf8(path.clone()))
}

fn split_lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    body.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect()
}

/// One read window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadWindow {
    /// The resolved path.
    pub path: VPath,
    /// The file's content hash.
    pub hash: String,
    /// The first line shown (1-based; 0 when none is).
    pub first: usize,
    /// The last line shown.
    pub last: usize,
    /// The file's line count.
    pub total: usize,
    /// The window stopped at the byte cap.
    pub capped: bool,
    /// What the model reads.
    pub text: String,
}

/// Reads a window of a text file: lines from `offset` (1-based, default 1), at most `limit`
/// (default and most 2000), each cut at 2000 characters, at most 50 KiB of lines, numbered
/// `N: text`, with the content hash and a footer saying how to continue. Records the read.
pub fn read(
    view: &View,
    ledger: &Ledger,
    path: &str,
    offset: Option<usize>,
    limit: Option<usize>,
) -> Result<ReadWindow> {
    let p = view.resolve(path);
    let data = view.read_bytes(&p)?;
    let hash = crate::content_hash(&data);
    let text = decode_text(&p, &data)?;
    let lines = split_lines(&text);
    let total = lines.len();
    let offset = offset.unwrap_or(1);
    if offset == 0 {
        return Err(Error::Invalid(format!(
            "offset must be 1 or more (got 0) for {p}"
        )));
    }
    if offset > total && !(offset == 1 && total == 0) {
        return Err(Error::OffsetOutOfRange {
            path: p,
            offset,
            lines: total,
        });
    }
    let limit = limit.unwrap_or(READ_LINES).clamp(1, READ_LINES);
    let mut body = String::new();
    let mut bytes = 0usize;
    let mut last = offset - 1;
    let mut capped = false;
    for (i, line) in lines.iter().enumerate().skip(offset - 1).take(limit) {
        let shown = if line.chars().count() > READ_LINE_CHARS {
            let cut: String = line.chars().take(READ_LINE_CHARS).collect();
            format!("{cut}... (line truncated to {READ_LINE_CHARS} chars)")
        } else {
            (*line).to_string()
        };
        let entry = format!("{}\t{shown}\n", i + 1);
        if bytes + entry.len() > READ_BYTES && last >= offset {
            capped = true;
            break;
        }
        bytes += entry.len();
        body.push_str(&entry);
        last = i + 1;
    }
    let footer = if capped {
        format!(
            "(Output capped at 50 KiB. Showing lines {offset}-{last}. Use offset={} to continue.)",
            last + 1
        )
    } else if last < total {
        format!(
            "(Showing lines {offset}-{last} of {total}. Use offset={} to continue.)",
            last + 1
        )
    } else {
        format!("(End of file - total {total} lines)")
    };
    let rendered = format!("{p} (hash {hash})\n{body}{footer}");
    ledger.record(&p, hash.clone());
    let first = if total == 0 { 0 } else { offset };
    Ok(ReadWindow {
        path: p,
        hash,
        first,
        last,
        total,
        capped,
        text: rendered,
    })
}

/// The result of a write or an edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The resolved path.
    pub path: VPath,
    /// The file did not exist before.
    pub created: bool,
    /// How many occurrences an edit replaced (0 for a write).
    pub replacements: usize,
    /// The new content hash.
    pub hash: String,
    /// A unified diff of the change (3 lines of context).
    pub diff: String,
}

/// A unified diff between two texts, with `path` in the headers.
pub fn unified_diff(path: &VPath, before: &str, after: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(path.as_str(), path.as_str())
        .to_string()
}

/// The version a change must find: the session's last read of an existing file.
fn guard(view: &View, ledger: &Ledger, p: &VPath) -> Result<Option<(String, Vec<u8>)>> {
    let meta = match view.stat(p) {
        Ok(m) => Some(m),
        Err(Error::NotFound(_)) => None,
        Err(e) => return Err(e),
    };
    match meta {
        None => Ok(None),
        Some(m) if m.kind == Kind::Dir => Err(Error::IsADirectory(p.clone())),
        Some(_) => {
            let seen = ledger.get(p).ok_or_else(|| Error::NotRead(p.clone()))?;
            let current = view.read_bytes(p)?;
            if crate::content_hash(&current) != seen {
                return Err(Error::Stale(p.clone()));
            }
            Ok(Some((seen, current)))
        }
    }
}

/// Writes a whole file. Creating needs no read; overwriting needs this session's last read to
/// be of the current version (`Not read`, `Stale`). Answers the diff.
pub fn write(view: &View, ledger: &Ledger, path: &str, content: &str) -> Result<Change> {
    write_bytes(view, ledger, path, content.as_bytes())
}

/// [`write`] of any bytes (a file a program made, text or not): the same levels, the same
/// read-before-change rule, one atomic write. The diff is empty where the new content is not
/// text.
pub fn write_bytes(view: &View, ledger: &Ledger, path: &str, content: &[u8]) -> Result<Change> {
    let p = view.resolve(path);
    view.check_writable(&p)?;
    let existing = guard(view, ledger, &p)?;
    let expect = match &existing {
        Some((hash, _)) => Expect::Version(hash.clone()),
        None => Expect::Absent,
    };
    view.write_bytes(&p, content, &expect)
        .map_err(|e| match e {
            // A file appeared since the check: this session has not read it.
            Error::AlreadyExists(_) => Error::NotRead(p.clone()),
            other => other,
        })?;
    let hash = crate::content_hash(content);
    ledger.record(&p, hash.clone());
    let before = existing.as_ref().map_or(&[][..], |(_, b)| b.as_slice());
    let diff = match std::str::from_utf8(content) {
        Ok(after) => unified_diff(&p, &String::from_utf8_lossy(before), after),
        Err(_) => String::new(),
    };
    Ok(Change {
        diff,
        path: p,
        created: existing.is_none(),
        replacements: 0,
        hash,
    })
}

/// Reads a whole text file for a program the session runs (`python`'s `files`), recorded as
/// read as [`read`] records it, so the program may then change it.
pub fn read_text(view: &View, ledger: &Ledger, path: &str) -> Result<(VPath, String)> {
    let p = view.resolve(path);
    let data = view.read_bytes(&p)?;
    let text = decode_text(&p, &data)?;
    ledger.record(&p, crate::content_hash(&data));
    Ok((p, text))
}

/// One replacement of an edit.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct EditSpec {
    /// The exact text to replace (not empty).
    pub old_string: String,
    /// What replaces it.
    pub new_string: String,
    /// Replace every occurrence rather than the one.
    #[serde(default)]
    pub replace_all: bool,
}

/// Applies one edit to a text: the one occurrence, or all; refused when the old text is empty,
/// absent, ambiguous or the same as the new. Answers the new text and the count replaced.
pub fn apply_edit(p: &VPath, text: &str, edit: &EditSpec) -> Result<(String, usize)> {
    if edit.old_string.is_empty() {
        return Err(Error::EditEmpty(p.clone()));
    }
    if edit.old_string == edit.new_string {
        return Err(Error::EditNoChange(p.clone()));
    }
    let crlf = text.contains("\r\n") && !edit.old_string.contains("\r\n");
    let (old, new) = if crlf && !text.contains(&edit.old_string) {
        (
            edit.old_string.replace('\n', "\r\n"),
            edit.new_string.replace('\n', "\r\n"),
        )
    } else {
        (edit.old_string.clone(), edit.new_string.clone())
    };
    let count = text.matches(old.as_str()).count();
    match count {
        0 => Err(Error::EditNotFound(p.clone())),
        1 => Ok((text.replacen(old.as_str(), &new, 1), 1)),
        n if edit.replace_all => Ok((text.replace(old.as_str(), &new), n)),
        n => Err(Error::EditAmbiguous {
            path: p.clone(),
            count: n,
        }),
    }
}

/// An edit worked out, not yet written: the path, the version it applies to, the text before
/// and after and the count replaced.
struct EditPlan {
    path: VPath,
    hash: String,
    before: String,
    after: String,
    replaced: usize,
}

fn plan_edits(view: &View, ledger: &Ledger, path: &str, edits: &[EditSpec]) -> Result<EditPlan> {
    if edits.is_empty() {
        return Err(Error::Invalid(
            "multiedit needs at least one edit".to_string(),
        ));
    }
    let p = view.resolve(path);
    view.check_writable(&p)?;
    let (hash, bytes) = match guard(view, ledger, &p)? {
        Some(x) => x,
        None => return Err(Error::NotFound(p)),
    };
    let before = decode_text(&p, &bytes)?;
    let mut text = before.clone();
    let mut replaced = 0;
    for (i, edit) in edits.iter().enumerate() {
        let (next, n) = apply_edit(&p, &text, edit).map_err(|e| {
            if edits.len() > 1 {
                Error::Invalid(format!(
                    "edit {} of {}: {e} No edit was applied.",
                    i + 1,
                    edits.len()
                ))
            } else {
                e
            }
        })?;
        text = next;
        replaced += n;
    }
    Ok(EditPlan {
        path: p,
        hash,
        before,
        after: text,
        replaced,
    })
}

fn edit_many(view: &View, ledger: &Ledger, path: &str, edits: &[EditSpec]) -> Result<Change> {
    let plan = plan_edits(view, ledger, path, edits)?;
    let p = plan.path;
    view.write_bytes(&p, plan.after.as_bytes(), &Expect::Version(plan.hash))?;
    let new_hash = crate::content_hash(plan.after.as_bytes());
    ledger.record(&p, new_hash.clone());
    Ok(Change {
        diff: unified_diff(&p, &plan.before, &plan.after),
        path: p,
        created: false,
        replacements: plan.replaced,
        hash: new_hash,
    })
}

/// Checks, without writing, everything [`edit`] and [`multiedit`] would check before writing:
/// the path writable, a file this session has read at its current version, text, every edit
/// applying. The refusal is the one the call itself would get.
pub fn check_edits(view: &View, ledger: &Ledger, path: &str, edits: &[EditSpec]) -> Result<()> {
    plan_edits(view, ledger, path, edits).map(|_| ())
}

/// Checks, without writing, everything [`write`] would check before writing: the path
/// writable, not a directory, and an existing file read by this session at its current version.
pub fn check_write(view: &View, ledger: &Ledger, path: &str) -> Result<()> {
    let p = view.resolve(path);
    view.check_writable(&p)?;
    guard(view, ledger, &p).map(|_| ())
}

/// Edits a file this session has read at its current version (a stale edit says `Stale`, not
/// "not found"). Answers the diff.
pub fn edit(
    view: &View,
    ledger: &Ledger,
    path: &str,
    old_string: &str,
    new_string: &str,
    replace_all: bool,
) -> Result<Change> {
    let spec = EditSpec {
        old_string: old_string.to_string(),
        new_string: new_string.to_string(),
        replace_all,
    };
    edit_many(view, ledger, path, std::slice::from_ref(&spec))
}

/// Several edits of one file, each applied to the result of the one before: all or nothing.
pub fn multiedit(view: &View, ledger: &Ledger, path: &str, edits: &[EditSpec]) -> Result<Change> {
    edit_many(view, ledger, path, edits)
}

/// Builds an include matcher as ripgrep's `--glob`: a pattern without `/` matches a file's
/// name, one with `/` its path relative to the search root.
pub struct Include {
    matcher: globset::GlobMatcher,
    by_path: bool,
}

impl Include {
    /// Compiles a pattern.
    pub fn new(pattern: &str) -> Result<Self> {
        let by_path = pattern.contains('/');
        let pat = pattern.strip_prefix('/').unwrap_or(pattern);
        let glob = globset::GlobBuilder::new(pat)
            .literal_separator(by_path)
            .build()
            .map_err(|e| Error::Invalid(format!("bad glob {pattern:?}: {e}")))?;
        Ok(Include {
            matcher: glob.compile_matcher(),
            by_path,
        })
    }

    /// Whether the file `p` under `root` matches.
    pub fn matches(&self, root: &VPath, p: &VPath) -> bool {
        if self.by_path {
            p.relative_to(root)
                .is_some_and(|rel| self.matcher.is_match(rel))
        } else {
            self.matcher.is_match(p.name())
        }
    }
}

fn not_vcs(p: &VPath, kind: Kind) -> bool {
    kind != Kind::Dir || !VCS_DIRS.contains(&p.name())
}

fn keep_prefix<T>(items: &mut Vec<T>, cut_at: &Option<VPath>, key: impl Fn(&T) -> &VPath) {
    if let Some(cut) = cut_at {
        items.retain(|i| key(i) <= cut);
    }
}

/// A glob's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobResult {
    /// Matching files in path order.
    pub paths: Vec<VPath>,
    /// More matched than the limit, or a directory over the bound cut the walk.
    pub truncated: bool,
}

/// The visible files under `root` that match `pattern` (as ripgrep's `--glob`), in path order,
/// at most `limit`. What ignore files exclude is skipped, as in [`grep`].
pub fn glob(view: &View, root: &str, pattern: &str, limit: usize) -> Result<GlobResult> {
    let root = view.resolve(root);
    let include = Include::new(pattern)?;
    let found = Mutex::new(Vec::new());
    let ignores = Ignores::for_root(view.backend().as_ref(), &root);
    let on_dir = |d: &VPath, marks, files| ignores.enter(d, marks, files);
    let end = view.scan_paths(
        &root,
        &|p, kind| {
            not_vcs(p, kind)
                && (*p == root || !ignores.ignored(p, kind))
                && (kind == Kind::Dir || include.matches(&root, p))
        },
        Some(&ignores.probe(&on_dir)),
        &|p: &VPath| {
            found
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(p.clone())
        },
    )?;
    let mut paths = found.into_inner().unwrap_or_else(|e| e.into_inner());
    paths.sort();
    keep_prefix(&mut paths, &end.cut_at, |p| p);
    let truncated = end.cut_at.is_some() || paths.len() > limit;
    paths.truncate(limit);
    Ok(GlobResult { paths, truncated })
}

/// One line grep answers: a matching line, or a context line beside one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrepMatch {
    /// The file.
    pub path: VPath,
    /// The line number (1-based).
    pub line: u64,
    /// The line (without its line ending, cut at 2000 characters; empty in modes `files` and
    /// `count`, which show no lines).
    pub text: String,
}

/// What grep answers (`spec/tools/grep.json`, `mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GrepMode {
    /// Each matching line as `path:line: text` (the default).
    #[default]
    Lines,
    /// Only the paths of the files that match, once each.
    Files,
    /// Each matching file with its number of matching lines, `path:N`.
    Count,
}

impl GrepMode {
    /// The mode a model names: `lines`, `files` or `count`.
    pub fn parse(name: &str) -> Option<GrepMode> {
        match name {
            "lines" => Some(GrepMode::Lines),
            "files" => Some(GrepMode::Files),
            "count" => Some(GrepMode::Count),
            _ => None,
        }
    }
}

/// What grep is asked.
#[derive(Debug, Clone, Default)]
pub struct GrepOptions {
    /// Only files matching this glob (as ripgrep's `--glob`).
    pub include: Option<String>,
    /// Match case-insensitively.
    pub ignore_case: bool,
    /// At most this many results (default [`GREP_LIMIT`]): matching lines in mode `lines`,
    /// files in modes `files` and `count`.
    pub limit: Option<usize>,
    /// What to answer.
    pub mode: GrepMode,
    /// Lines of context before and after each match, in mode `lines` (at most the schema's
    /// maximum, [`grep_context_max`]).
    pub context: usize,
}

/// A number of a tool's parameter schema in the embedded spec (`spec/tools/<tool>.json`,
/// `parameters.properties.<param>.<key>`).
fn schema_number(tool: &str, param: &str, key: &str) -> Option<usize> {
    harness_spec::Spec::embedded()
        .tool(tool)?
        .parameters
        .get("properties")?
        .get(param)?
        .get(key)?
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
}

/// The most lines of context grep shows around a match (the `context` schema's `maximum`).
pub fn grep_context_max() -> usize {
    schema_number("grep", "context", "maximum").unwrap_or(usize::MAX)
}

/// The most levels a listing goes down (the `depth` schema's `maximum`).
pub fn list_depth_max() -> usize {
    schema_number("list", "depth", "maximum").unwrap_or(usize::MAX)
}

/// Grep's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrepResult {
    /// What was asked.
    pub mode: GrepMode,
    /// Matching lines in path then line order: in mode `lines` at most the limit; in mode
    /// `count` every matching line of the files answered; in mode `files` the first of each.
    pub matches: Vec<GrepMatch>,
    /// The lines of context beside the matches answered, in path then line order (mode
    /// `lines` with `context` only; never a matching line).
    pub context_lines: Vec<GrepMatch>,
    /// The lines of context asked for.
    pub context: usize,
    /// More matched than the limit, or a directory over the bound cut the walk.
    pub truncated: bool,
}

impl GrepResult {
    /// The files answered, in path order, each with its number of matching lines.
    pub fn files(&self) -> Vec<(&VPath, usize)> {
        let mut out: Vec<(&VPath, usize)> = Vec::new();
        for m in &self.matches {
            match out.last_mut() {
                Some((p, n)) if **p == m.path => *n += 1,
                _ => out.push((&m.path, 1)),
            }
        }
        out
    }

    /// The answer as the model reads it: each file's path on a line of its own, then its
    /// matching lines `line: text` (context lines `line- text`, and `--` between groups that do
    /// not touch, as ripgrep's `--heading -C`), a blank line between files; or paths (`files`),
    /// or `path:N` (`count`).
    pub fn render(&self) -> String {
        self.render_with(&|p| p.to_string())
    }

    /// [`GrepResult::render`] with each path as `show` names it (e.g. relative to the working
    /// directory).
    pub fn render_with(&self, show: &dyn Fn(&VPath) -> String) -> String {
        if self.matches.is_empty() {
            return "No matches found".to_string();
        }
        let mut out = String::new();
        match self.mode {
            GrepMode::Files => {
                for (p, _) in self.files() {
                    out.push_str(&format!("{}\n", show(p)));
                }
            }
            GrepMode::Count => {
                for (p, n) in self.files() {
                    out.push_str(&format!("{}:{n}\n", show(p)));
                }
            }
            GrepMode::Lines => {
                let mut all: Vec<(&GrepMatch, bool)> = self
                    .matches
                    .iter()
                    .map(|m| (m, true))
                    .chain(self.context_lines.iter().map(|m| (m, false)))
                    .collect();
                all.sort_by(|a, b| (&a.0.path, a.0.line).cmp(&(&b.0.path, b.0.line)));
                let mut last: Option<(&VPath, u64)> = None;
                for (m, matched) in all {
                    match last {
                        Some((p, _)) if *p != m.path => {
                            out.push_str(&format!("\n{}\n", show(&m.path)));
                        }
                        None => out.push_str(&format!("{}\n", show(&m.path))),
                        Some((_, l)) if !self.context_lines.is_empty() && l + 1 != m.line => {
                            out.push_str("--\n");
                        }
                        Some(_) => {}
                    }
                    let sep = if matched { ':' } else { '-' };
                    out.push_str(&format!("{}{sep} {}\n", m.line, m.text));
                    last = Some((&m.path, m.line));
                }
            }
        }
        if self.truncated {
            out.push_str("(Results truncated. Use a more specific path, pattern or include.)\n");
        }
        out
    }
}

/// A line the searcher reported: its number, byte range in the file and whether it matched.
type Found = (u64, usize, usize, bool);

/// One file's reported lines, each with whether it matched.
type FileLines = (VPath, Vec<(GrepMatch, bool)>);

/// A sink collecting each reported line; in mode `files` it stops at the first match.
struct Lines<'a> {
    out: &'a mut Vec<Found>,
    first_only: bool,
}

impl Lines<'_> {
    fn push(&mut self, first: Option<u64>, offset: u64, bytes: &[u8], matched: bool) {
        let (mut line, mut start) = (first.unwrap_or(0), offset as usize);
        for l in grep_searcher::LineIter::new(b'\n', bytes) {
            self.out.push((line, start, start + l.len(), matched));
            line += 1;
            start += l.len();
        }
    }
}

impl Sink for Lines<'_> {
    type Error = std::io::Error;

    fn matched(
        &mut self,
        _searcher: &Searcher,
        m: &SinkMatch<'_>,
    ) -> std::result::Result<bool, Self::Error> {
        self.push(m.line_number(), m.absolute_byte_offset(), m.bytes(), true);
        Ok(!self.first_only)
    }

    fn context(
        &mut self,
        _searcher: &Searcher,
        c: &SinkContext<'_>,
    ) -> std::result::Result<bool, Self::Error> {
        self.push(c.line_number(), c.absolute_byte_offset(), c.bytes(), false);
        Ok(true)
    }
}

/// The lines matching `pattern` (a Rust regex, linear time) in the visible text files under
/// `root`, in path then line order, as `opts.mode` asks, with `opts.context` lines around each
/// match (overlapping ones merged). Binary files, invalid UTF-8 and files over the bound are
/// skipped, and so is what ignore files exclude, as ripgrep skips it by default (`.ignore`;
/// in a repository `.gitignore` and `.git/info/exclude`; `spec/filesystem.md`, *The file
/// tools*); `root` itself is searched even when ignored.
pub fn grep(view: &View, root: &str, pattern: &str, opts: &GrepOptions) -> Result<GrepResult> {
    let root = view.resolve(root);
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(opts.ignore_case)
        .line_terminator(Some(b'\n'))
        .build(pattern)
        .map_err(|e| Error::Invalid(format!("bad regex {pattern:?}: {e}")))?;
    let include = opts.include.as_deref().map(Include::new).transpose()?;
    let mode = opts.mode;
    let context = if mode == GrepMode::Lines {
        opts.context.min(grep_context_max())
    } else {
        0
    };
    // Each file's lines (matches and context), already in line order: only the files are
    // sorted at the end.
    let found: Mutex<Vec<FileLines>> = Mutex::new(Vec::new());
    let ignores = Ignores::for_root(view.backend().as_ref(), &root);
    let on_dir = |d: &VPath, marks, files| ignores.enter(d, marks, files);
    let end = view.scan(
        &root,
        &|p, kind| {
            not_vcs(p, kind)
                && (*p == root || !ignores.ignored(p, kind))
                && (kind == Kind::Dir || include.as_ref().is_none_or(|i| i.matches(&root, p)))
        },
        Some(&ignores.probe(&on_dir)),
        &|p: &VPath, data: &[u8]| {
            if memchr::memchr(0, data).is_some() {
                return;
            }
            thread_local! {
                // The searcher and the context it was built for.
                static SEARCHER: std::cell::RefCell<Option<(usize, Searcher)>> =
                    const { std::cell::RefCell::new(None) };
            }
            let mut local: Vec<Found> = Vec::new();
            SEARCHER.with(|cell| {
                let mut cell = cell.borrow_mut();
                if cell.as_ref().is_none_or(|(c, _)| *c != context) {
                    let searcher = SearcherBuilder::new()
                        .line_number(true)
                        .binary_detection(BinaryDetection::none())
                        .before_context(context)
                        .after_context(context)
                        .build();
                    *cell = Some((context, searcher));
                }
                if let Some((_, searcher)) = cell.as_mut() {
                    let _ = searcher.search_slice(
                        &matcher,
                        data,
                        Lines {
                            out: &mut local,
                            first_only: mode == GrepMode::Files,
                        },
                    );
                }
            });
            if !local.iter().any(|f| f.3) {
                return;
            }
            let Ok(text) = std::str::from_utf8(data) else {
                return;
            };
            let out: Vec<(GrepMatch, bool)> = local
                .into_iter()
                .map(|(line, start, end, matched)| {
                    let text = if mode == GrepMode::Lines {
                        let s = text
                            .get(start..end)
                            .unwrap_or_default()
                            .trim_end_matches(['\n', '\r']);
                        if s.len() > GREP_LINE_CHARS && s.chars().count() > GREP_LINE_CHARS {
                            s.chars().take(GREP_LINE_CHARS).collect()
                        } else {
                            s.to_string()
                        }
                    } else {
                        String::new()
                    };
                    let m = GrepMatch {
                        path: p.clone(),
                        line,
                        text,
                    };
                    (m, matched)
                })
                .collect();
            found
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((p.clone(), out));
        },
    )?;
    let mut files = found.into_inner().unwrap_or_else(|e| e.into_inner());
    files.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    keep_prefix(&mut files, &end.cut_at, |f| &f.0);
    let limit = opts.limit.unwrap_or(GREP_LIMIT);
    let mut truncated = end.cut_at.is_some();
    let (mut matches, mut context_lines) = (Vec::new(), Vec::new());
    if mode == GrepMode::Lines {
        'files: for (_, lines) in files {
            // The last matching line kept in this file: context past its window goes.
            let mut last_kept: Option<u64> = None;
            for (m, matched) in lines {
                if matched {
                    if matches.len() == limit {
                        truncated = true;
                        // Lines before this match in its file that no kept match reaches.
                        let reach = last_kept.map(|l| l + context as u64);
                        context_lines.retain(|c: &GrepMatch| {
                            c.path != m.path || reach.is_some_and(|r| c.line <= r)
                        });
                        break 'files;
                    }
                    last_kept = Some(m.line);
                    matches.push(m);
                } else {
                    context_lines.push(m);
                }
            }
        }
    } else {
        truncated |= files.len() > limit;
        files.truncate(limit);
        matches = files
            .into_iter()
            .flat_map(|(_, lines)| lines.into_iter().filter(|l| l.1).map(|l| l.0))
            .collect();
    }
    Ok(GrepResult {
        mode,
        matches,
        context_lines,
        context,
        truncated,
    })
}

/// What a directory over the bound says instead of its entries.
const LIST_TOO_MANY: &str = "has too many entries to list; use glob or grep with a pattern";

/// A directory as the model reads it: one entry a line, and a note when it was over the bound.
/// `depth` (default 1, at most [`list_depth_max`]) is how many levels are listed: below 1,
/// each subdirectory's entries follow its line, indented two spaces a level (a version-control
/// store is not entered; a subdirectory over the bound says so in place of its entries).
pub fn list(view: &View, path: &str, depth: Option<usize>) -> Result<String> {
    let listing = view.list(path)?;
    if listing.truncated {
        return Ok(format!("({} {LIST_TOO_MANY})", listing.path));
    }
    if listing.entries.is_empty() {
        return Ok(format!("({} is empty)", listing.path));
    }
    let depth = depth.unwrap_or(1).clamp(1, list_depth_max());
    let mut out = Vec::new();
    list_into(view, &listing, depth - 1, 0, &mut out);
    Ok(out.join("\n"))
}

/// Appends `listing`'s entries at `indent` levels, and `below` levels of their subdirectories.
fn list_into(
    view: &View,
    listing: &crate::view::ViewListing,
    below: usize,
    indent: usize,
    out: &mut Vec<String>,
) {
    let pad = "  ".repeat(indent);
    for entry in &listing.entries {
        out.push(format!("{pad}{}", entry.line()));
        if below == 0 || entry.kind != Kind::Dir || VCS_DIRS.contains(&entry.name.as_str()) {
            continue;
        }
        // An entry the listing showed is visible; one that cannot be listed now (gone since,
        // say) shows no entries.
        let Ok(sub) = view.list(listing.path.join(&entry.name).as_str()) else {
            continue;
        };
        if sub.truncated {
            out.push(format!("{pad}  ({LIST_TOO_MANY})"));
        } else {
            list_into(view, &sub, below - 1, indent + 1, out);
        }
    }
}

/// Creates a directory (and its parents).
pub fn mkdir(view: &View, path: &str) -> Result<VPath> {
    view.mkdir(path)?;
    Ok(view.resolve(path))
}

/// Moves a file or directory.
pub fn mv(view: &View, from: &str, to: &str) -> Result<VPath> {
    view.mv(from, to)
}

/// Moves a file or directory to the trash; answers the id [`restore`] takes.
pub fn rm(view: &View, path: &str) -> Result<String> {
    view.rm(path)
}

/// Puts a trashed entry back where it was.
pub fn restore(view: &View, id: &str) -> Result<VPath> {
    view.restore(id)
}
