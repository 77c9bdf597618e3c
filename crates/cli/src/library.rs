//! The CLI's own library, as files under the data directory: notes (`library/notes/<id>.md`
//! with `<id>.json` beside it: title, project, chat, updated) and knowledge documents the person
//! puts in `library/knowledge/` (text or Markdown; an optional `<name>.json` beside one says its
//! title, project and chat). The tools `notes_search`, `note_view`, `note_manage`,
//! `knowledge_search` and `knowledge_get` work on them; in a session a client scoped to a chat
//! (`_meta.lembas.scope`), every call reaches only that chat's part (`harness_core::library`).
//!
//! Search is by words (title and text, case folded); this build has no embedder for meaning.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use harness_fs::tools::{self as fst, Ledger};
use harness_fs::{Access, Level, MemoryBackend, VPath, View};
use serde::{Deserialize, Serialize};
use serde_json::Value;

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

/// The library of one person, seen from one project.
#[derive(Debug, Clone)]
pub struct Library {
    root: PathBuf,
    project: String,
}

struct Item {
    id: String,
    meta: Meta,
    text: String,
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
    /// The library under `data/library`, for the project `project` (the working directory's
    /// name).
    pub fn new(data: &Path, project: &str) -> Library {
        Library {
            root: data.join("library"),
            project: project.to_owned(),
        }
    }

    fn notes_dir(&self) -> PathBuf {
        self.root.join("notes")
    }

    fn knowledge_dir(&self) -> PathBuf {
        self.root.join("knowledge")
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

    fn notes(&self, scope: Option<&Value>) -> Vec<Item> {
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
            let meta: Meta = std::fs::read_to_string(p.with_extension("json"))
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default();
            if !Self::in_scope(&meta, scope) {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            out.push(Item { id, meta, text });
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }

    fn documents(&self, scope: Option<&Value>) -> Vec<Item> {
        let mut out = Vec::new();
        let Ok(dir) = std::fs::read_dir(self.knowledge_dir()) else {
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
            let mut meta: Meta = std::fs::read_to_string(p.with_extension("json"))
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default();
            if meta.title.is_empty() {
                meta.title = id.clone();
            }
            if !Self::in_scope(&meta, scope) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&p) else {
                continue;
            };
            out.push(Item { id, meta, text });
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
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
                            crate::store::format_time(i.meta.updated),
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
        let dir = self.notes_dir();
        let save = |id: &str, meta: &Meta, text: &str| -> std::io::Result<()> {
            std::fs::create_dir_all(&dir)?;
            let tmp = dir.join(format!(".{id}.tmp"));
            std::fs::write(&tmp, text)?;
            std::fs::rename(&tmp, dir.join(format!("{id}.md")))?;
            let tmp = dir.join(format!(".{id}.json.tmp"));
            std::fs::write(&tmp, serde_json::to_string_pretty(meta).unwrap_or_default())?;
            std::fs::rename(&tmp, dir.join(format!("{id}.json")))
        };
        match s("action") {
            Some("create") => {
                let (Some(title), Some(content)) = (s("title"), s("content")) else {
                    return err("note_manage create needs `title` and `content`");
                };
                let t = crate::store::now();
                let mut id = format!("n{t:x}");
                let mut k = 1;
                while dir.join(format!("{id}.md")).exists() {
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
                match save(&id, &meta, content) {
                    Ok(()) => (format!("Created note {id}: {title}."), false),
                    Err(e) => err(format!("cannot save note {id}: {e}")),
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
                    let _ = std::fs::remove_file(dir.join(format!("{id}.json")));
                    return match std::fs::remove_file(dir.join(format!("{id}.md"))) {
                        Ok(()) => (format!("Deleted note {id}."), false),
                        Err(e) => err(format!("cannot delete note {id}: {e}")),
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
                note.meta.updated = crate::store::now();
                match save(id, &note.meta, &note.text) {
                    Ok(()) => (format!("Note {id} {action}d."), false),
                    Err(e) => err(format!("cannot save note {id}: {e}")),
                }
            }
            _ => err("note_manage: `action` must be create, update, append or delete"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn notes_round_trip_and_scope() {
        let d = tempfile::tempdir().unwrap();
        let lib = Library::new(d.path(), "api");
        let (t, e) = lib.run(
            "note_manage",
            &json!({"action": "create", "title": "Retry policy", "content": "Retry 503 five times."}),
            None,
        );
        assert!(!e, "{t}");
        let id = t
            .split_whitespace()
            .nth(2)
            .unwrap()
            .trim_end_matches(':')
            .to_owned();
        let (found, _) = lib.run("notes_search", &json!({"query": "retry"}), None);
        assert!(
            found.starts_with(&format!("{id} — Retry policy")),
            "{found}"
        );
        // A chat's scope sees only its own notes.
        let scope = json!({"chat": "c_1"});
        let (none, _) = lib.run("notes_search", &json!({"query": "retry"}), Some(&scope));
        assert_eq!(none, "No notes match.");
        let (t, _) = lib.run(
            "note_manage",
            &json!({"action": "create", "title": "Chat note", "content": "retry in chat"}),
            Some(&scope),
        );
        assert!(t.starts_with("Created note"), "{t}");
        let (one, _) = lib.run("notes_search", &json!({"query": "retry"}), Some(&scope));
        assert!(
            one.contains("Chat note") && !one.contains("Retry policy"),
            "{one}"
        );
        let (v, e) = lib.run("note_view", &json!({"id": id}), Some(&scope));
        assert!(e, "outside the scope a note reads as not found: {v}");
        let (_, e) = lib.run(
            "note_manage",
            &json!({"action": "append", "id": id, "content": "Then fail."}),
            None,
        );
        assert!(!e);
        let (v, _) = lib.run("note_view", &json!({"id": id}), None);
        assert!(v.ends_with("Retry 503 five times.\nThen fail."), "{v}");
    }

    #[test]
    fn knowledge_search_and_get() {
        let d = tempfile::tempdir().unwrap();
        let k = d.path().join("library/knowledge");
        std::fs::create_dir_all(&k).unwrap();
        let text: String = (1..=40)
            .map(|i| {
                if i == 25 {
                    "The backoff doubles each time.\n".to_owned()
                } else {
                    format!("line {i}\n")
                }
            })
            .collect();
        std::fs::write(k.join("manual.md"), &text).unwrap();
        let lib = Library::new(d.path(), "api");
        assert_eq!(lib.summary(), "0 notes, 1 document");
        let (hits, _) = lib.run(
            "knowledge_search",
            &json!({"query": "how does the backoff grow"}),
            None,
        );
        assert!(hits.starts_with("manual — manual (lines"), "{hits}");
        let (w, e) = lib.run(
            "knowledge_get",
            &json!({"id": "manual", "offset": 25, "limit": 1}),
            None,
        );
        assert!(!e, "{w}");
        assert!(w.contains("25: The backoff doubles each time."), "{w}");
    }
}
