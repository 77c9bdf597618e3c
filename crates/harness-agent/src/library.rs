//! The library tools (`notes_search`, `note_view`, `note_manage`, `knowledge_search`,
//! `knowledge_get`) over a [`LibraryStore`]: notes the model keeps and knowledge documents the
//! person adds. In a session a client scoped to a chat (`_meta.lembas.scope`), every call reaches
//! only that chat's part (`harness_core::library`). [`DirLibrary`] keeps them as files under a
//! directory (the CLI's data directory): `notes/<id>.md` with `<id>.json` beside it (title,
//! project, chat, updated), and the documents the person puts in `knowledge/` (text or Markdown;
//! an optional `<name>.json` beside one says its title, project and chat).
//!
//! `notes_search` and `knowledge_search` rank with harness-search: by meaning and by words
//! fused where the embedder's files are found ([`Library::with_search`]), else by words alone,
//! and then the answer says so. The index covers every note and document, kept in a file
//! ([`harness_search::FileStore`]) so only what changed is embedded again; a session's scope is
//! applied after scoring, as `search`'s view is.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use harness_search::{Embedder, FileStore, Index, MemoryStore, Params, Ranking, Store};

use harness_fs::tools::{self as fst, Ledger};
use harness_fs::{Access, Level, MemoryBackend, VPath, View};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::SeamError;
use crate::registry::ToolRegistry;
use crate::time::{format_time, now};

/// The library tools.
pub const TOOLS: &[&str] = &[
    "notes_search",
    "note_view",
    "note_manage",
    "knowledge_search",
    "knowledge_get",
];

/// A library tool's handler: its (already scoped) arguments and the scope in, its answer out.
type LibraryHandler = fn(&Library, &Value, Option<&Value>) -> Answer;

/// The library tools by canonical name.
static LIBRARY_TOOLS: std::sync::LazyLock<ToolRegistry<LibraryHandler>> =
    std::sync::LazyLock::new(|| {
        ToolRegistry::new()
            .with("notes_search", Library::notes_search as LibraryHandler)
            .with("note_view", Library::note_view)
            .with("note_manage", Library::manage)
            .with("knowledge_search", Library::knowledge_search)
            .with("knowledge_get", Library::knowledge_get)
    });

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
    /// Writes a note whole (created or replaced); the error names the file that failed.
    fn save_note(&self, note: &Item) -> Result<(), SeamError>;
    /// Removes a note; the error names the file that failed.
    fn delete_note(&self, id: &str) -> Result<(), SeamError>;
}

/// The library of one person, seen from one project.
#[derive(Clone)]
pub struct Library {
    store: Arc<dyn LibraryStore>,
    project: String,
    search: Arc<Search>,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Library")
            .field("project", &self.project)
            .field("index_file", &self.search.index_file)
            .field("embedder_dir", &self.search.embedder_dir)
            .finish()
    }
}

type SearchIndex = Index<Box<dyn Store + Send>>;

/// The search index over the library, opened at the first search.
#[derive(Default)]
struct Search {
    /// Where the index is kept (none: in memory, built again by each process).
    index_file: Option<PathBuf>,
    /// The embedder's folder, where its files were found.
    embedder_dir: Option<PathBuf>,
    index: Mutex<Option<SearchIndex>>,
}

/// The embedder's folder where a binary installed it under the user's cache folder `cache`
/// (`cache/llembas/`, or `cache/llembas-test/` where `cargo xtask test` put it), if its files are
/// there.
pub fn installed_embedder(cache: &Path) -> Option<PathBuf> {
    ["llembas", "llembas-test"]
        .iter()
        .map(|n| harness_search::embedder::installed_model_dir(&cache.join(n)))
        .find(|d| harness_search::embedder::model_present(d))
}

/// What the index calls a note and a document.
fn note_path(id: &str) -> String {
    format!("notes/{id}")
}

fn document_path(id: &str) -> String {
    format!("knowledge/{id}")
}

/// A note as indexed: its title, a blank line, its text.
fn note_text(n: &Item) -> String {
    format!("{}\n\n{}", n.meta.title, n.text)
}

impl Search {
    fn open(&self) -> Result<SearchIndex, String> {
        let store: Box<dyn Store + Send> = match &self.index_file {
            Some(path) => Box::new(FileStore::open(path).unwrap_or_else(|_| {
                // Not an index (or another format): it is rebuilt, and replaced at the flush.
                FileStore::new(path)
            })),
            None => Box::new(MemoryStore::new()),
        };
        let embedder = self
            .embedder_dir
            .as_deref()
            .filter(|d| harness_search::embedder::model_present(d))
            .and_then(|d| Embedder::load(d).ok());
        let params = Params::embedded().map_err(|e| e.to_string())?;
        Index::open(store, embedder, params).map_err(|e| e.to_string())
    }

    /// Brings the index up to the library's notes and documents (only what changed is cut and
    /// embedded again), then searches it; `see` is the scope, applied after scoring.
    fn search(
        &self,
        items: &[(String, String)],
        query: &str,
        limit: usize,
        see: &dyn Fn(&str) -> bool,
    ) -> Result<harness_search::Answer, String> {
        let mut guard = self
            .index
            .lock()
            .map_err(|_| "the library's search index is poisoned".to_string())?;
        if guard.is_none() {
            *guard = Some(self.open()?);
        }
        let Some(index) = guard.as_mut() else {
            return Err("the library's search index did not open".into());
        };
        for (path, text) in items {
            index.update(path, text).map_err(|e| e.to_string())?;
        }
        let gone: Vec<String> = index
            .paths()
            .filter(|p| !items.iter().any(|(q, _)| q == p))
            .map(str::to_owned)
            .collect();
        for p in gone {
            index.remove(&p).map_err(|e| e.to_string())?;
        }
        index.flush().map_err(|e| e.to_string())?;
        index
            .search(query, limit, Ranking::Combined, see)
            .map_err(|e| e.to_string())
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
        harness_fs::write_atomic(path, text.as_bytes()).map_err(std::io::Error::other)
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

    fn save_note(&self, note: &Item) -> Result<(), SeamError> {
        let dir = self.notes_dir();
        let id = &note.id;
        let saved = std::fs::create_dir_all(&dir)
            .and_then(|()| Self::write_atomic(&dir.join(format!("{id}.md")), &note.text))
            .and_then(|()| {
                let meta = serde_json::to_string_pretty(&note.meta).unwrap_or_default();
                Self::write_atomic(&dir.join(format!("{id}.json")), &meta)
            });
        saved.map_err(|e| {
            SeamError::file(
                &dir.join(format!("{id}.md")).display().to_string(),
                format!("cannot save note {id} in {}: {e}", dir.display()),
            )
        })
    }

    fn delete_note(&self, id: &str) -> Result<(), SeamError> {
        let dir = self.notes_dir();
        let _ = std::fs::remove_file(dir.join(format!("{id}.json")));
        let text = dir.join(format!("{id}.md"));
        std::fs::remove_file(&text).map_err(|e| {
            SeamError::file(
                &text.display().to_string(),
                format!("cannot delete note {id} in {}: {e}", dir.display()),
            )
        })
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

/// A tool argument's text.
fn str_arg<'a>(a: &'a Value, k: &str) -> Option<&'a str> {
    a.get(k).and_then(Value::as_str)
}

/// A tool argument's count.
fn usize_arg(a: &Value, k: &str) -> Option<usize> {
    a.get(k).and_then(Value::as_u64).map(|v| v as usize)
}

/// The line of a note's hit piece that has most of the query's words `q` (the first of
/// equals), else the piece's first line that is not the note's title; trimmed.
fn best_line<'t>(text: &'t str, hit: &harness_search::Hit, q: &[String], title: &str) -> &'t str {
    let lines: Vec<&str> = text
        .lines()
        .skip(hit.start_line.saturating_sub(1))
        .take(hit.end_line + 1 - hit.start_line.max(1))
        .filter(|l| !l.trim().is_empty())
        .collect();
    let mut line = lines
        .iter()
        .copied()
        .find(|l| l.trim() != title.trim())
        .unwrap_or("");
    let mut best = 0;
    for &l in &lines {
        let sc = score(q, l);
        if sc > best {
            (best, line) = (sc, l);
        }
    }
    line.trim()
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
            search: Arc::new(Search::default()),
        }
    }

    /// Keeps the search index in `index_file` (else in memory) and ranks by meaning too with
    /// the embedder in `embedder_dir` where its files are there (else by words alone, and the
    /// answers say so).
    pub fn with_search(
        mut self,
        index_file: Option<PathBuf>,
        embedder_dir: Option<PathBuf>,
    ) -> Library {
        self.search = Arc::new(Search {
            index_file,
            embedder_dir,
            index: Mutex::new(None),
        });
        self
    }

    /// Every note and document as the index holds them (path, text).
    fn indexed_items(&self) -> (Vec<Item>, Vec<Item>, Vec<(String, String)>) {
        let notes = self.store.notes();
        let docs = self.store.documents();
        let items = notes
            .iter()
            .map(|n| (note_path(&n.id), note_text(n)))
            .chain(docs.iter().map(|d| (document_path(&d.id), d.text.clone())))
            .collect();
        (notes, docs, items)
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

    /// Runs a library tool with its (already scoped) arguments, by the tool's handler.
    pub fn run(&self, tool: &str, a: &Value, scope: Option<&Value>) -> Answer {
        match LIBRARY_TOOLS.get(tool) {
            Some(handler) => handler(self, a, scope),
            None => err(format!("{tool} is not a library tool")),
        }
    }

    /// `notes_search`: the notes in scope (this project's and every project's, or all) whose
    /// pieces match best, each named once with its line that has most of the query's words.
    fn notes_search(&self, a: &Value, scope: Option<&Value>) -> Answer {
        let Some(query) = str_arg(a, "query") else {
            return err("notes_search: `query` is missing");
        };
        let all = str_arg(a, "scope") == Some("all");
        let limit = usize_arg(a, "limit").unwrap_or(10).clamp(1, 50);
        let (notes, _, items) = self.indexed_items();
        let seen: Vec<&Item> = notes
            .iter()
            .filter(|i| Self::in_scope(&i.meta, scope))
            .filter(|i| {
                scope.is_some()
                    || all
                    || i.meta.project.is_empty()
                    || i.meta.project == self.project
            })
            .collect();
        let see = |p: &str| seen.iter().any(|i| note_path(&i.id) == p);
        // Pieces, best first: a note is named once, by its best piece.
        let answer = match self.search.search(&items, query, limit * 4, &see) {
            Ok(a) => a,
            Err(e) => return err(format!("notes_search: {e}")),
        };
        let q = words(query);
        let mut out: Vec<String> = Vec::new();
        let mut named: Vec<&str> = Vec::new();
        for hit in &answer.hits {
            let Some(note) = seen.iter().find(|i| note_path(&i.id) == hit.path) else {
                continue;
            };
            if named.contains(&note.id.as_str()) || named.len() == limit {
                continue;
            }
            named.push(&note.id);
            let text = note_text(note);
            let line = best_line(&text, hit, &q, &note.meta.title);
            out.push(format!("{} — {}\n  {}", note.id, note.meta.title, line));
        }
        let mut text = if out.is_empty() {
            "No notes match.".to_string()
        } else {
            out.join("\n")
        };
        if let Some(note) = &answer.note {
            text.push_str(&format!("\n\n({note}.)"));
        }
        (text, false)
    }

    /// `note_view`: a note in scope, whole, with its id, when it changed and its project.
    fn note_view(&self, a: &Value, scope: Option<&Value>) -> Answer {
        let Some(id) = str_arg(a, "id") else {
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

    /// `knowledge_search`: the passages of the documents in scope (or of one) that match best.
    fn knowledge_search(&self, a: &Value, scope: Option<&Value>) -> Answer {
        let Some(query) = str_arg(a, "query") else {
            return err("knowledge_search: `query` is missing");
        };
        let only = str_arg(a, "document");
        let limit = usize_arg(a, "limit").unwrap_or(8).clamp(1, 30);
        let (_, docs, items) = self.indexed_items();
        let seen: Vec<&Item> = docs
            .iter()
            .filter(|d| Self::in_scope(&d.meta, scope))
            .filter(|d| only.is_none_or(|o| o == d.id))
            .collect();
        let see = |p: &str| seen.iter().any(|d| document_path(&d.id) == p);
        let answer = match self.search.search(&items, query, limit, &see) {
            Ok(a) => a,
            Err(e) => return err(format!("knowledge_search: {e}")),
        };
        let out: Vec<String> = answer
            .hits
            .iter()
            .filter_map(|hit| {
                let d = seen.iter().find(|d| document_path(&d.id) == hit.path)?;
                let (a, b) = (hit.start_line.max(1), hit.end_line.max(hit.start_line));
                let passage: Vec<&str> = d.text.lines().skip(a - 1).take(b + 1 - a).collect();
                Some(format!(
                    "{} — {} (lines {a}-{b})\n{}",
                    d.id,
                    d.meta.title,
                    passage.join("\n")
                ))
            })
            .collect();
        let mut text = if out.is_empty() {
            "No passages match.".to_string()
        } else {
            out.join("\n\n")
        };
        if let Some(note) = &answer.note {
            text.push_str(&format!("\n\n({note}.)"));
        }
        (text, false)
    }

    /// `knowledge_get`: a document in scope, windowed as `read` windows a file.
    fn knowledge_get(&self, a: &Value, scope: Option<&Value>) -> Answer {
        let Some(id) = str_arg(a, "id") else {
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
            usize_arg(a, "offset"),
            usize_arg(a, "limit"),
        ) {
            Ok(w) => (w.text, false),
            Err(e) => err(e.to_string()),
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
                    Err(e) => err(e.to_string()),
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
                        Err(e) => err(e.to_string()),
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
                    Err(e) => err(e.to_string()),
                }
            }
            _ => err("note_manage: `action` must be create, update, append or delete"),
        }
    }
}
