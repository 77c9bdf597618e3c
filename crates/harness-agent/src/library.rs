//! The library tools (`notes_search`, `note_view`, `note_manage`, `knowledge_search`,
//! `knowledge_get`) over a [`LibraryStore`]: notes the model keeps and knowledge documents the
//! person adds. In a session a client scoped to a chat (`_meta.lembas.scope`), every call reaches
//! only that chat's part (`harness_core::library`). [`DirLibrary`] keeps them as files under a
//! directory (the CLI's data directory): `notes/<id>.md` with `<id>.json` beside it (title,
//! project, chat, updated), and the documents the person puts in `knowledge/` (text or Markdown;
//! an optional `<name>.json` beside one says its title, project and chat).
//!
//! Search is by words (title and text, case folded); this build has no embedder for meaning.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use harness_fs::tools::{self as fst, Ledger};
use harness_fs::{Access, Level, MemoryBackend, VPath, View};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::time::{format_time, now};

/// The library tools.
pub const TOOLS: &[&str] = &[
    "notes_search",
    "note_view",
    "note_manage",
    "knowledge_search",
    "knowledge_get",
];

/// What is kept about a note or a document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// Its title.
    #[serde(default)]
    pub title: String,
    /// The project it belongs to; empty for every project.
    #[serde(default)]
    pub project: String,
    /// The client chat it belongs to, when a scoped session made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<String>,
    /// When it last changed (seconds since the epoch).
    #[serde(default)]
    pub updated: u64,
}

/// A note or a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Its id (a note's, or a document's file name without its extension).
    pub id: String,
    /// What is kept about it.
    pub meta: Meta,
    /// Its text.
    pub text: String,
}

/// Where a library's notes and documents are kept.
pub trait LibraryStore: Send + Sync {
    /// Every note, in any order.
    fn notes(&self) -> Vec<Item>;
    /// Every knowledge document, in any order (a title defaults to the id).
    fn documents(&self) -> Vec<Item>;
    /// Writes a note whole (created or replaced); the error names what failed.
    fn save_note(&self, note: &Item) -> Result<(), String>;
    /// Removes a note; the error names what failed.
    fn delete_note(&self, id: &str) -> Result<(), String>;
}

/// The library of one person, seen from one project.
#[derive(Clone)]
pub struct Library {
    store: Arc<dyn LibraryStore>,
    project: String,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Library")
            .field("project", &self.project)
            .finish()
    }
}

/// A library kept as files under a directory (see the module's doc).
#[derive(Debug, Clone)]
pub struct DirLibrary {
    root: PathBuf,
}

impl DirLibrary {
    /// The library under `root` (`root/notes`, `root/knowledge`).
    pub fn new(root: &Path) -> DirLibrary {
        DirLibrary {
            root: root.to_path_buf(),
        }
    }

    fn notes_dir(&self) -> PathBuf {
        self.root.join("notes")
    }

    fn read_meta(p: &Path) -> Meta {
        std::fs::read_to_string(p.with_extension("json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("note");
        let tmp = path.with_file_name(format!(".{name}.tmp"));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)
    }
}

impl LibraryStore for DirLibrary {
    fn notes(&self) -> Vec<Item> {
        let mut out = Vec::new();
        let Ok(dir) = std::fs::read_dir(self.notes_dir()) else {
            return out;
        };
        for e in dir.flatten() {
            let p = e.path();
            if p.extension().and_then(|x| x.to_str()) != Some("md") {
                continue;
            }
            let Some(id) = p.file_stem().and_then(|s| s.to_str()).map(str::to_owned) else {
                continue;
            };
            let meta = Self::read_meta(&p);
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            out.push(Item { id, meta, text });
        }
        out
    }

    fn documents(&self) -> Vec<Item> {
        let mut out = Vec::new();
        let Ok(dir) = std::fs::read_dir(self.root.join("knowledge")) else {
            return out;
        };
        for e in dir.flatten() {
            let p = e.path();
            let ext = p.extension().and_then(|x| x.to_str()).unwrap_or("");
            if !matches!(ext, "md" | "txt" | "markdown" | "rst") {
                continue;
            }
            let Some(id) = p.file_stem().and_then(|s| s.to_str()).map(str::to_owned) else {
                continue;
            };
            let mut meta = Self::read_meta(&p);
            if meta.title.is_empty() {
                meta.title = id.clone();
            }
            let Ok(text) = std::fs::read_to_string(&p) else {
                continue;
            };
            out.push(Item { id, meta, text });
        }
        out
    }

    fn save_note(&self, note: &Item) -> Result<(), String> {
        let dir = self.notes_dir();
        let id = &note.id;
        let saved = std::fs::create_dir_all(&dir)
            .and_then(|()| Self::write_atomic(&dir.join(format!("{id}.md")), &note.text))
            .and_then(|()| {
                let meta = serde_json::to_string_pretty(&note.meta).unwrap_or_default();
                Self::write_atomic(&dir.join(format!("{id}.json")), &meta)
            });
        saved.map_err(|e| format!("cannot save note {id} in {}: {e}", dir.display()))
    }

    fn delete_note(&self, id: &str) -> Result<(), String> {
        let dir = self.notes_dir();
        let _ = std::fs::remove_file(dir.join(format!("{id}.json")));
        std::fs::remove_file(dir.join(format!("{id}.md")))
            .map_err(|e| format!("cannot delete note {id} in {}: {e}", dir.display()))
    }
}

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn score(query: &[String], text: &str) -> usize {
    let hay = words(text);
    query
        .iter()
        .map(|q| hay.iter().filter(|w| *w == q).count())
        .sum()
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A tool's answer: the text, and whether it is an error.
pub type Answer = (String, bool);

fn err(text: impl Into<String>) -> Answer {
    (text.into(), true)
}

impl Library {
    /// The library in `store`, seen from the project `project` (the working directory's name).
    pub fn new(store: Arc<dyn LibraryStore>, project: &str) -> Library {
        Library {
            store,
            project: project.to_owned(),
        }
    }

    /// "N notes, M documents", for the prompt.
    pub fn summary(&self) -> String {
        let notes = self.notes(None).len();
        let docs = self.documents(None).len();
        format!(
            "{notes} note{}, {docs} document{}",
            if notes == 1 { "" } else { "s" },
            if docs == 1 { "" } else { "s" }
        )
    }

    fn in_scope(meta: &Meta, scope: Option<&Value>) -> bool {
        let Some(scope) = scope else {
            return true;
        };
        let chat = scope.get("chat").and_then(Value::as_str);
        let project = scope.get("project").and_then(Value::as_str);
        meta.chat.as_deref().is_some_and(|c| Some(c) == chat)
            || project.is_some_and(|p| !p.is_empty() && meta.project == p)
    }

    fn scoped(mut items: Vec<Item>, scope: Option<&Value>) -> Vec<Item> {
        items.retain(|i| Self::in_scope(&i.meta, scope));
        items.sort_by(|a, b| a.id.cmp(&b.id));
        items
    }

    fn notes(&self, scope: Option<&Value>) -> Vec<Item> {
        Self::scoped(self.store.notes(), scope)
    }

    fn documents(&self, scope: Option<&Value>) -> Vec<Item> {
        Self::scoped(self.store.documents(), scope)
    }

    /// Runs a library tool with its (already scoped) arguments.
    pub fn run(&self, tool: &str, a: &Value, scope: Option<&Value>) -> Answer {
        let s = |k: &str| a.get(k).and_then(Value::as_str);
        let n = |k: &str| a.get(k).and_then(Value::as_u64).map(|v| v as usize);
        match tool {
            "notes_search" => {
                let Some(q) = s("query") else {
                    return err("notes_search: `query` is missing");
                };
                let all = s("scope") == Some("all");
                let q = words(q);
                let mut hits: Vec<(usize, Item)> = self
                    .notes(scope)
                    .into_iter()
                    .filter(|i| {
                        scope.is_some()
                            || all
                            || i.meta.project.is_empty()
                            || i.meta.project == self.project
                    })
                    .map(|i| (score(&q, &i.meta.title) * 3 + score(&q, &i.text), i))
                    .filter(|(sc, _)| *sc > 0)
                    .collect();
                hits.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.id.cmp(&b.1.id)));
                hits.truncate(n("limit").unwrap_or(10).clamp(1, 50));
                if hits.is_empty() {
                    return ("No notes match.".into(), false);
                }
                let out: Vec<String> = hits
                    .iter()
                    .map(|(_, i)| {
                        let line = i
                            .text
                            .lines()
                            .max_by_key(|l| score(&q, l))
                            .unwrap_or("")
                            .trim();
                        format!("{} — {}\n  {}", i.id, i.meta.title, line)
                    })
                    .collect();
                (out.join("\n"), false)
            }
            "note_view" => {
                let Some(id) = s("id") else {
                    return err("note_view: `id` is missing");
                };
                match self.notes(scope).into_iter().find(|i| i.id == id) {
                    Some(i) => (
                        format!(
                            "# {}\n(id {}, changed {}, {})\n\n{}",
                            i.meta.title,
                            i.id,
                            format_time(i.meta.updated),
                            if i.meta.project.is_empty() {
                                "every project".to_owned()
                            } else {
                                format!("project {}", i.meta.project)
                            },
                            i.text
                        ),
                        false,
                    ),
                    None => err(format!("No note {id}.")),
                }
            }
            "note_manage" => self.manage(a, scope),
            "knowledge_search" => {
                let Some(q) = s("query") else {
                    return err("knowledge_search: `query` is missing");
                };
                let q = words(q);
                let only = s("document");
                let mut hits: Vec<(usize, String, String, usize, usize, String)> = Vec::new();
                for d in self.documents(scope) {
                    if only.is_some_and(|o| o != d.id) {
                        continue;
                    }
                    let lines: Vec<&str> = d.text.lines().collect();
                    for start in (0..lines.len()).step_by(10) {
                        let end = (start + 20).min(lines.len());
                        let passage = lines[start..end].join("\n");
                        let sc = score(&q, &passage);
                        if sc > 0 {
                            hits.push((
                                sc,
                                d.id.clone(),
                                d.meta.title.clone(),
                                start + 1,
                                end,
                                passage,
                            ));
                        }
                    }
                }
                hits.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.3.cmp(&b.3)));
                hits.truncate(n("limit").unwrap_or(8).clamp(1, 30));
                if hits.is_empty() {
                    return ("No passages match.".into(), false);
                }
                let out: Vec<String> = hits
                    .iter()
                    .map(|(_, id, title, a, b, p)| format!("{id} — {title} (lines {a}-{b})\n{p}"))
                    .collect();
                (out.join("\n\n"), false)
            }
            "knowledge_get" => {
                let Some(id) = s("id") else {
                    return err("knowledge_get: `id` is missing");
                };
                let Some(d) = self.documents(scope).into_iter().find(|d| d.id == id) else {
                    return err(format!("No document {id}."));
                };
                // The same windowing as `read`, over the document alone.
                let tree = MemoryBackend::new();
                let path = VPath::parse(&format!("/{id}"));
                if let Err(e) = tree.add_file(&path, d.text.as_str()) {
                    return err(e.to_string());
                }
                let view = View::new(Arc::new(tree), Access::new().grant("/", Level::Ro));
                match fst::read(
                    &view,
                    &Ledger::new(),
                    path.as_str(),
                    n("offset"),
                    n("limit"),
                ) {
                    Ok(w) => (w.text, false),
                    Err(e) => err(e.to_string()),
                }
            }
            other => err(format!("{other} is not a library tool")),
        }
    }

    fn manage(&self, a: &Value, scope: Option<&Value>) -> Answer {
        let s = |k: &str| a.get(k).and_then(Value::as_str);
        match s("action") {
            Some("create") => {
                let (Some(title), Some(content)) = (s("title"), s("content")) else {
                    return err("note_manage create needs `title` and `content`");
                };
                let t = now();
                let mut id = format!("n{t:x}");
                let taken: Vec<String> = self.store.notes().into_iter().map(|n| n.id).collect();
                let mut k = 1;
                while taken.contains(&id) {
                    k += 1;
                    id = format!("n{t:x}{k}");
                }
                let meta = Meta {
                    title: title.to_owned(),
                    project: match scope {
                        Some(sc) => sc
                            .get("project")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                        None if s("scope") == Some("global") => String::new(),
                        None => self.project.clone(),
                    },
                    chat: scope
                        .and_then(|sc| sc.get("chat"))
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    updated: t,
                };
                let note = Item {
                    id,
                    meta,
                    text: content.to_owned(),
                };
                match self.store.save_note(&note) {
                    Ok(()) => (format!("Created note {}: {title}.", note.id), false),
                    Err(e) => err(e),
                }
            }
            Some(action @ ("update" | "append" | "delete")) => {
                let Some(id) = s("id").filter(|i| valid_id(i)) else {
                    return err(format!("note_manage {action} needs the note's `id`"));
                };
                let Some(mut note) = self.notes(scope).into_iter().find(|i| i.id == id) else {
                    return err(format!("No note {id}."));
                };
                if action == "delete" {
                    return match self.store.delete_note(id) {
                        Ok(()) => (format!("Deleted note {id}."), false),
                        Err(e) => err(e),
                    };
                }
                if action == "append" {
                    let Some(more) = s("content") else {
                        return err("note_manage append needs `content`");
                    };
                    if !note.text.ends_with('\n') && !note.text.is_empty() {
                        note.text.push('\n');
                    }
                    note.text.push_str(more);
                } else {
                    if let Some(t) = s("title") {
                        note.meta.title = t.to_owned();
                    }
                    if let Some(c) = s("content") {
                        note.text = c.to_owned();
                    }
                }
                note.meta.updated = now();
                match self.store.save_note(&note) {
                    Ok(()) => (format!("Note {id} {action}d."), false),
                    Err(e) => err(e),
                }
            }
            _ => err("note_manage: `action` must be create, update, append or delete"),
        }
    }
}
