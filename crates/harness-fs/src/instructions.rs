//! Instruction files (`spec/filesystem.md`, *Instruction files*): they stack from the boundary
//! down to the start directory, outermost first, one per directory (`AGENTS.md`, else
//! `CLAUDE.md`), none from a directory the session cannot read, within a byte budget that says
//! what it cut.

use crate::backend::Kind;
use crate::error::{Error, Result};
use crate::path::VPath;
use crate::view::View;

/// The names looked for in each directory, in order of preference.
pub const NAMES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];
/// The default budget: 32 KiB of instruction text.
pub const DEFAULT_BUDGET: usize = 32 * 1024;

/// One instruction file as it goes into the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstructionFile {
    /// Where it is.
    pub path: VPath,
    /// Its text (cut at a line end when `cut`).
    pub text: String,
    /// It did not fit whole.
    pub cut: bool,
}

/// The stack, outermost first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Instructions {
    /// The files that made it in, outermost first.
    pub files: Vec<InstructionFile>,
    /// Files left out whole because the budget was spent, outermost first.
    pub omitted: Vec<VPath>,
}

impl Instructions {
    /// The files as the prompt takes them (`harness_core::prompt`), outermost first.
    pub fn for_prompt(&self) -> Vec<harness_core::prompt::InstructionFile> {
        self.files
            .iter()
            .map(|f| harness_core::prompt::InstructionFile {
                path: f.path.to_string(),
                text: f.text.clone(),
            })
            .collect()
    }

    /// The files' paths, outermost first.
    pub fn paths(&self) -> Vec<VPath> {
        self.files.iter().map(|f| f.path.clone()).collect()
    }

    /// The files cut to fit.
    pub fn cut(&self) -> Vec<VPath> {
        self.files
            .iter()
            .filter(|f| f.cut)
            .map(|f| f.path.clone())
            .collect()
    }

    /// The text for the prompt: each file under `Instructions from: PATH`, then a note naming
    /// what the budget cut or left out.
    pub fn render(&self, budget: usize) -> String {
        let mut parts: Vec<String> = self
            .files
            .iter()
            .map(|f| format!("Instructions from: {}\n{}", f.path, f.text.trim_end()))
            .collect();
        let cut = self.cut();
        if !cut.is_empty() || !self.omitted.is_empty() {
            let names: Vec<String> = cut
                .iter()
                .chain(self.omitted.iter())
                .map(|p| p.to_string())
                .collect();
            parts.push(format!("[Instruction files over the {budget}-byte budget were cut or left out: {}. Read them if you need them.]", names.join(", ")));
        }
        parts.join("\n\n")
    }
}

/// The directories from `boundary` down to `start` (both included).
fn chain(boundary: &VPath, start: &VPath) -> Vec<VPath> {
    let mut dirs: Vec<VPath> = start
        .ancestors()
        .into_iter()
        .rev()
        .chain(std::iter::once(start.clone()))
        .collect();
    dirs.retain(|d| d.starts_with(boundary));
    dirs
}

/// Finds the instruction file of each readable directory from `/` down to `start` (resolved
/// against the session's directory), and fits them in `budget` bytes: the nearest (most
/// specific) files are kept whole first; one that does not fit is cut at a line end, and those
/// beyond are left out and named.
pub fn stack(view: &View, start: &str, budget: usize) -> Result<Instructions> {
    let start = view.resolve(start);
    let mut found: Vec<(VPath, String)> = Vec::new();
    for dir in chain(&VPath::root(), &start) {
        if !view.access().visible(&dir) {
            continue;
        }
        match view.backend().stat(&dir)? {
            Some(m) if m.kind == Kind::Dir => {}
            _ => continue,
        }
        for name in NAMES {
            let p = dir.join(name);
            if !view.access().visible(&p) {
                continue;
            }
            let text = match view.read_bytes(&p) {
                Ok(bytes) => match crate::tools::decode_text(&p, &bytes) {
                    Ok(t) => t,
                    Err(_) => continue,
                },
                Err(Error::NotFound(_))
                | Err(Error::IsADirectory(_))
                | Err(Error::TooLarge { .. }) => continue,
                Err(e) => return Err(e),
            };
            if text.trim().is_empty() {
                continue;
            }
            found.push((p, text));
            break;
        }
    }
    let mut left = budget;
    let mut fitted: Vec<Option<InstructionFile>> = vec![None; found.len()];
    let mut omitted = Vec::new();
    for (i, (path, text)) in found.iter().enumerate().rev() {
        if text.len() <= left {
            left -= text.len();
            fitted[i] = Some(InstructionFile {
                path: path.clone(),
                text: text.clone(),
                cut: false,
            });
        } else if left > 0 {
            let mut end = left;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            if let Some(nl) = text[..end].rfind('\n') {
                end = nl + 1;
            }
            left = 0;
            if end == 0 {
                omitted.push(path.clone());
            } else {
                fitted[i] = Some(InstructionFile {
                    path: path.clone(),
                    text: text[..end].to_string(),
                    cut: true,
                });
            }
        } else {
            omitted.push(path.clone());
        }
    }
    omitted.reverse();
    Ok(Instructions {
        files: fitted.into_iter().flatten().collect(),
        omitted,
    })
}

/// The instruction files that apply to a session in the host directory `root` (canonical),
/// outermost first: from the repository's top (the nearest directory at or above `root` holding
/// `.git`; `root` itself when there is none) down to `root`, stacked by [`stack`]'s rules within
/// `budget`. The files above `root` are outside a session's view, so they are read into a tree
/// of their own, by their real paths: only regular files, never through a link. Paths are
/// the real ones.
pub fn from_host(root: &std::path::Path, budget: usize) -> Instructions {
    use std::sync::Arc;

    use crate::backend::MemoryBackend;
    use crate::view::{Access, Level};

    let top = root
        .ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(root);
    let tree = MemoryBackend::new();
    for dir in root.ancestors() {
        let vdir = VPath::parse(&dir.display().to_string());
        let _ = tree.add_dir(&vdir);
        for name in NAMES {
            let file = dir.join(name);
            let regular = std::fs::symlink_metadata(&file).is_ok_and(|m| m.is_file());
            if regular && let Ok(text) = std::fs::read(&file) {
                let _ = tree.add_file(&vdir.join(name), text);
            }
        }
        if dir == top {
            break;
        }
    }
    let view = View::new(
        Arc::new(tree),
        Access::new().grant(&top.display().to_string(), Level::Ro),
    );
    stack(&view, &root.display().to_string(), budget).unwrap_or_default()
}
