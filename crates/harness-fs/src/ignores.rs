//! The ignore files search honours, as ripgrep does by default: `.ignore` everywhere, and
//! inside a repository (a directory holding `.git`, or one below it) `.gitignore` and
//! `.git/info/exclude`. Each directory's files are read through the backend while the scan
//! enters it ([`crate::backend::Probe`]), so no link is followed and nothing invisible is read;
//! the search root's ancestors' files are read through the backend before the scan.
//!
//! Precedence as ripgrep's: a `.ignore` match wins over a `.gitignore` one, which wins over
//! `.git/info/exclude`; within each kind the nearest directory's file decides, and within a file
//! the last matching line (`!` re-includes); a pattern ending in `/` matches directories only.
//! `.gitignore` files above the repository's root do not apply inside it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::backend::{Backend, Kind, Probe};
use crate::path::VPath;

/// What the scan looks for in each directory.
const MARKS: [&str; 1] = [".git"];
const FILES: [&str; 3] = [".ignore", ".gitignore", ".git/info/exclude"];

/// One directory's ignore files (only directories that have some, or a `.git`, get a node).
#[derive(Debug)]
struct Node {
    parent: Option<Arc<Node>>,
    ignore: Option<Gitignore>,
    gitignore: Option<Gitignore>,
    exclude: Option<Gitignore>,
    git: bool,
    /// This directory or one above holds `.git`.
    in_repo: bool,
}

/// Parses an ignore file rooted at `dir`: lines as git reads them (a leading BOM dropped, CR
/// before LF dropped); a line that is not UTF-8 or not a valid pattern is skipped, as ripgrep
/// skips it. `None` when nothing is left.
fn matcher(dir: &VPath, data: &[u8]) -> Option<Gitignore> {
    let mut b = GitignoreBuilder::new(dir.as_str());
    for (i, line) in data.split(|&c| c == b'\n').enumerate() {
        let Ok(line) = std::str::from_utf8(line) else {
            continue;
        };
        let line = line.strip_suffix('\r').unwrap_or(line);
        let line = if i == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            line
        };
        let _ = b.add_line(None, line);
    }
    b.build().ok().filter(|g| !g.is_empty())
}

/// The ignore rules met so far in one search.
#[derive(Debug, Default)]
pub(crate) struct Ignores {
    dirs: RwLock<HashMap<VPath, Option<Arc<Node>>>>,
    /// Some directory has rules: until then no entry is looked up.
    any: AtomicBool,
}

impl Ignores {
    /// Rules for a search of `root`: the ignore files of its ancestors (from `/` down) read
    /// through the backend. Nothing is read for a file root, which is searched whatever
    /// ignores it.
    pub(crate) fn for_root(backend: &dyn Backend, root: &VPath) -> Self {
        let me = Ignores::default();
        let mut chain = Vec::new();
        let mut p = root.parent();
        while let Some(d) = p {
            p = d.parent();
            chain.push(d);
        }
        for dir in chain.into_iter().rev() {
            let marks = MARKS
                .iter()
                .map(|m| backend.stat(&dir.join(m)).ok().flatten().is_some())
                .collect();
            let files = FILES
                .iter()
                .map(|f| {
                    let path = VPath::parse(&format!("{dir}/{f}"));
                    match backend.stat(&path) {
                        Ok(Some(m)) if m.kind == Kind::File => backend.read(&path).ok(),
                        _ => None,
                    }
                })
                .collect();
            me.enter(&dir, marks, files);
        }
        me
    }

    /// Records a directory the scan entered (the [`Probe`] callback).
    pub(crate) fn enter(&self, dir: &VPath, marks: Vec<bool>, files: Vec<Option<Vec<u8>>>) {
        let parent = dir.parent().and_then(|p| {
            self.dirs
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .get(&p)
                .cloned()
                .flatten()
        });
        let git = marks.first().copied().unwrap_or(false);
        let in_repo = git || parent.as_ref().is_some_and(|p| p.in_repo);
        let mut read = files.into_iter().enumerate().map(|(i, f)| {
            // A .gitignore outside every repository never applies (nor does anything above a
            // repository's root inside it), so it is not even parsed.
            f.filter(|_| i == 0 || in_repo)
                .and_then(|data| matcher(dir, &data))
        });
        let (ignore, gitignore, exclude) = (
            read.next().flatten(),
            read.next().flatten(),
            read.next().flatten(),
        );
        let node = if !git && ignore.is_none() && gitignore.is_none() && exclude.is_none() {
            parent
        } else {
            self.any.store(true, Ordering::Release);
            Some(Arc::new(Node {
                parent,
                ignore,
                gitignore,
                exclude,
                git,
                in_repo,
            }))
        };
        self.dirs
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(dir.clone(), node);
    }

    /// A probe feeding these rules.
    pub(crate) fn probe<'a>(&'a self, on_dir: &'a crate::backend::ProbeSink<'a>) -> Probe<'a> {
        Probe {
            marks: &MARKS,
            files: &FILES,
            on_dir,
        }
    }

    /// Whether the entry `p` (whose parent the scan has entered) is ignored.
    pub(crate) fn ignored(&self, p: &VPath, kind: Kind) -> bool {
        if !self.any.load(Ordering::Acquire) {
            return false;
        }
        let Some(parent) = p.parent() else {
            return false;
        };
        let node = self
            .dirs
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&parent)
            .cloned()
            .flatten();
        let Some(node) = node else {
            return false;
        };
        let is_dir = kind == Kind::Dir;
        let chain = || std::iter::successors(Some(&node), |n| n.parent.as_ref());
        let any_git = node.in_repo;
        let (mut m_ignore, mut m_git, mut m_exclude) = (Match::None, Match::None, Match::None);
        let mut saw_git = false;
        for n in chain() {
            if m_ignore.is_none()
                && let Some(g) = &n.ignore
            {
                m_ignore = g.matched(p.as_str(), is_dir);
            }
            if any_git && !saw_git {
                if m_git.is_none()
                    && let Some(g) = &n.gitignore
                {
                    m_git = g.matched(p.as_str(), is_dir);
                }
                if m_exclude.is_none()
                    && let Some(g) = &n.exclude
                {
                    m_exclude = g.matched(p.as_str(), is_dir);
                }
            }
            saw_git = saw_git || n.git;
        }
        m_ignore.or(m_git).or(m_exclude).is_ignore()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(dirs: &[(&str, bool, &str, &str)]) -> Ignores {
        let me = Ignores::default();
        for (dir, git, ignore, gitignore) in dirs {
            let some = |s: &str| (!s.is_empty()).then(|| s.as_bytes().to_vec());
            me.enter(
                &VPath::parse(dir),
                vec![*git],
                vec![some(ignore), some(gitignore), None],
            );
        }
        me
    }

    #[test]
    fn the_nearest_file_and_the_last_line_decide() {
        let r = rules(&[
            ("/", true, "", "*.log\ntarget/\n"),
            ("/a", false, "", "!keep.log\n"),
        ]);
        let f = |p: &str, k| r.ignored(&VPath::parse(p), k);
        assert!(f("/x.log", Kind::File));
        assert!(!f("/a/keep.log", Kind::File));
        assert!(f("/a/other.log", Kind::File));
        assert!(f("/target", Kind::Dir));
        assert!(!f("/target", Kind::File), "a directory-only pattern");
    }

    #[test]
    fn gitignore_needs_a_repository_and_ignore_does_not() {
        let r = rules(&[("/", false, "*.tmp\n", "*.log\n")]);
        assert!(!r.ignored(&VPath::parse("/x.log"), Kind::File));
        assert!(r.ignored(&VPath::parse("/x.tmp"), Kind::File));
    }

    #[test]
    fn ignore_wins_over_gitignore_and_gitignore_stops_at_the_repository() {
        let r = rules(&[
            ("/", true, "!*.log\n", "*.log\n*.md\n"),
            ("/sub", true, "", ""),
        ]);
        assert!(!r.ignored(&VPath::parse("/x.log"), Kind::File));
        assert!(r.ignored(&VPath::parse("/x.md"), Kind::File));
        // /sub is a repository of its own: the outer .gitignore stops at it.
        assert!(!r.ignored(&VPath::parse("/sub/y.md"), Kind::File));
    }
}
