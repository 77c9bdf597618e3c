//! Memory (`spec/filesystem.md`, *Memory*): the entries the `memory` tool keeps across
//! sessions, in two stores (`memory` and `user`), each entry with an id we give (`m1`, `m2`, …).
//! [`Memory::apply`] takes a call's arguments as the tool's parameters say
//! (`spec/tools/memory.json`): one change (`action` view/add/replace/remove, `id`, `text`,
//! `target`) or a batch (`changes`) applied together or not at all, against each store's size
//! limit. The state is one JSON file ([`Memory::to_json`]) written whole by a backend's atomic
//! write ([`Memory::save`]), so a crash leaves the old file or the new one, never a torn one.
//!
//! Ids come from one counter kept in the file (`next`): the next entry of either store takes
//! `m{next}` and the counter moves on, so an id is never given twice in one file, even after its
//! entry was removed. The prompt's list of entries is made by the caller from
//! [`Memory::entries`] (harness-core's `prompt::memory_entries`).
//!
//! ```
//! use harness_fs::memory::{Memory, Target};
//! use serde_json::json;
//!
//! let mut memory = Memory::new();
//! memory.apply(&json!({"action": "add", "text": "Prefers tabs."})).unwrap();
//! assert_eq!(memory.entries(Target::Memory), vec![("m1", "Prefers tabs.")]);
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::backend::{Backend, Expect};
use crate::error::{Error, Result};
use crate::path::VPath;

/// The default limit of the `memory` store, in characters of all its entries' texts.
pub const DEFAULT_LIMIT: usize = 2200;
/// The default limit of the `user` store, in characters of all its entries' texts.
pub const USER_LIMIT: usize = 1375;
/// The version of the file format [`Memory::to_json`] writes.
pub const FILE_VERSION: u64 = 1;

/// The `memory_limit` variable of `tools/memory.json` as the model reads it: one store's
/// limit (`2,200 characters`) when a project offers one store, each store's when it offers
/// several (`2,200 characters for `memory`, 1,375 for `user``). Both front ends fill the
/// description with this, so the text the model reads matches the limit [`Memory`] enforces.
pub fn limit_words(stores: &[(Target, usize)]) -> String {
    match stores {
        [(_, limit)] => format!("{} characters", thousands(*limit)),
        _ => {
            let parts: Vec<String> = stores
                .iter()
                .enumerate()
                .map(|(i, (target, limit))| {
                    let unit = if i == 0 { " characters" } else { "" };
                    format!("{}{unit} for `{}`", thousands(*limit), target.as_str())
                })
                .collect();
            parts.join(", ")
        }
    }
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// What the model learns about the work, the setup and its tools (the default).
    Memory,
    /// What the model learns about the person.
    User,
}

impl Target {
    /// Both stores, in the order they are shown.
    pub const ALL: [Target; 2] = [Target::Memory, Target::User];

    /// The name the tool uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Target::Memory => "memory",
            Target::User => "user",
        }
    }

    fn index(self) -> usize {
        match self {
            Target::Memory => 0,
            Target::User => 1,
        }
    }
}

/// One entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The id we gave it (`m3`).
    pub id: String,
    /// Its text (trimmed, not empty).
    pub text: String,
}

/// The file as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: u64,
    next: u64,
    memory: Vec<Entry>,
    user: Vec<Entry>,
}

/// Both stores, the id counter and the limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Memory {
    stores: [Vec<Entry>; 2],
    next: u64,
    limits: [usize; 2],
}

impl Default for Memory {
    fn default() -> Self {
        Self::new()
    }
}

/// One change of a call, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    Add {
        target: Target,
        text: String,
    },
    Replace {
        target: Target,
        id: String,
        text: String,
    },
    Remove {
        target: Target,
        id: String,
    },
}

const VIEW_IN_BATCH: &str =
    "view cannot be one of changes; call it alone, or read the answer of the change.";

fn refuse(msg: impl std::fmt::Display) -> Error {
    Error::Memory(format!("Memory: {msg}"))
}

fn string_field(obj: &Map<String, Value>, key: &str) -> Result<Option<String>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(refuse(format!("{key} must be a string, not {other}."))),
    }
}

fn target_of(obj: &Map<String, Value>) -> Result<Target> {
    match string_field(obj, "target")?.as_deref() {
        None | Some("memory") => Ok(Target::Memory),
        Some("user") => Ok(Target::User),
        Some(other) => Err(refuse(format!(
            "unknown target {other:?}; use memory or user."
        ))),
    }
}

fn text_of(action: &str, text: Option<String>) -> Result<String> {
    let text = text.ok_or_else(|| refuse(format!("{action} needs text.")))?;
    let text = text.trim();
    if text.is_empty() {
        return Err(refuse("text is empty; give the entry's words."));
    }
    Ok(text.to_string())
}

fn id_of(action: &str, id: Option<String>) -> Result<String> {
    let id = id.ok_or_else(|| refuse(format!("{action} needs id, the entry's id such as m3.")))?;
    Ok(id.trim().to_string())
}

fn change_of(obj: &Map<String, Value>, in_batch: bool) -> Result<Option<Change>> {
    const KEYS: [&str; 4] = ["action", "id", "text", "target"];
    // A parameter sent as null counts as not sent (some models fill every field).
    if let Some(key) = obj
        .iter()
        .find(|(k, v)| !KEYS.contains(&k.as_str()) && !v.is_null())
        .map(|(k, _)| k)
    {
        return Err(refuse(format!(
            "unknown parameter {key:?}; a change takes action, id, text and target."
        )));
    }
    let action = string_field(obj, "action")?.ok_or_else(|| {
        refuse(if in_batch {
            "a change needs action: add, replace or remove."
        } else {
            "give action (view, add, replace or remove) or changes."
        })
    })?;
    let target = target_of(obj)?;
    let id = string_field(obj, "id")?;
    let text = string_field(obj, "text")?;
    match action.as_str() {
        "view" if !in_batch => {
            if id.is_some() || text.is_some() {
                return Err(refuse("view takes no id or text."));
            }
            Ok(None)
        }
        "view" => Err(refuse(VIEW_IN_BATCH)),
        "add" => {
            if id.is_some() {
                return Err(refuse("add takes no id; the new entry is given one."));
            }
            Ok(Some(Change::Add {
                target,
                text: text_of("add", text)?,
            }))
        }
        "replace" => Ok(Some(Change::Replace {
            target,
            id: id_of("replace", id)?,
            text: text_of("replace", text)?,
        })),
        "remove" => {
            if text.is_some() {
                return Err(refuse("remove takes no text, only id."));
            }
            Ok(Some(Change::Remove {
                target,
                id: id_of("remove", id)?,
            }))
        }
        other => Err(refuse(format!(
            "unknown action {other:?}; use {}.",
            if in_batch {
                "add, replace or remove"
            } else {
                "view, add, replace or remove"
            }
        ))),
    }
}

/// What a call asks: a view (of the named store, if one was) or changes.
enum Call {
    View(Option<Target>),
    Changes(Vec<Change>),
}

fn parse_call(args: &Value) -> Result<Call> {
    let obj = args
        .as_object()
        .ok_or_else(|| refuse(format!("the arguments must be an object, not {args}.")))?;
    match obj.get("changes") {
        None | Some(Value::Null) => {
            let change = change_of(obj, false)?;
            Ok(match change {
                None => Call::View(obj.get("target").map(|_| target_of(obj)).transpose()?),
                Some(c) => Call::Changes(vec![c]),
            })
        }
        Some(Value::Array(items)) => {
            if let Some(key) = obj
                .iter()
                .find(|(k, v)| k.as_str() != "changes" && !v.is_null())
                .map(|(k, _)| k)
            {
                return Err(refuse(format!(
                    "give changes alone, or action without changes (found {key} beside changes)."
                )));
            }
            if items.is_empty() {
                return Err(refuse("changes is empty; give at least one change."));
            }
            let n = items.len();
            let mut out = Vec::with_capacity(n);
            for (i, item) in items.iter().enumerate() {
                let parsed = item
                    .as_object()
                    .ok_or_else(|| refuse(format!("a change must be an object, not {item}.")))
                    .and_then(|o| change_of(o, true));
                match parsed {
                    Ok(Some(c)) => out.push(c),
                    Ok(None) => return Err(in_batch(refuse(VIEW_IN_BATCH), i, n)),
                    Err(e) => return Err(in_batch(e, i, n)),
                }
            }
            Ok(Call::Changes(out))
        }
        Some(other) => Err(refuse(format!("changes must be a list, not {other}."))),
    }
}

/// Puts "change I of N" on a batch's refusal and says nothing was changed.
fn in_batch(e: Error, i: usize, n: usize) -> Error {
    match e {
        Error::Memory(msg) if n > 1 => {
            let rest = msg.strip_prefix("Memory: ").unwrap_or(&msg);
            Error::Memory(format!(
                "Memory: change {} of {n}: {rest} Nothing was changed.",
                i + 1
            ))
        }
        other => other,
    }
}

/// What one change did, in the words every answer uses (`added m4`).
fn did(action: &str, id: &str) -> String {
    format!("{action} {id}")
}

/// The opening sentence of an answer: what the changes did, capitalised (`Added m4, removed
/// m2.` without the full stop).
fn sentence(done: &[String]) -> String {
    let said = done.join(", ");
    match said.get(..1) {
        Some(first) => format!("{}{}", first.to_uppercase(), &said[1..]),
        None => said,
    }
}

/// A call's arguments as the body of the HTTP API of `spec/acp.md` §12 (`{"changes": [...]}`,
/// `None` for a view), checked by the same rules and with the same refusals as [`Memory::apply`].
/// The instance keeps one store, so `target` is dropped.
pub fn api_changes(args: &Value) -> Result<Option<Value>> {
    let changes = match parse_call(args)? {
        Call::View(_) => return Ok(None),
        Call::Changes(c) => c,
    };
    let list: Vec<Value> = changes
        .iter()
        .map(|c| match c {
            Change::Add { text, .. } => serde_json::json!({"action": "add", "text": text}),
            Change::Replace { id, text, .. } => {
                serde_json::json!({"action": "replace", "id": id, "text": text})
            }
            Change::Remove { id, .. } => serde_json::json!({"action": "remove", "id": id}),
        })
        .collect();
    Ok(Some(serde_json::json!({ "changes": list })))
}

/// The opening sentence of an answer to changes an instance applied (`body` as
/// [`api_changes`] made it, `after` the entries it answered with): the words [`Memory::apply`]
/// uses, an added entry named by the id the instance gave its text.
pub fn api_said(body: &Value, after: &[(String, String)]) -> String {
    let list = body.get("changes").and_then(Value::as_array);
    let done: Vec<String> = list
        .into_iter()
        .flatten()
        .map(|c| {
            let field = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default();
            match field("action") {
                "add" => {
                    let id = after
                        .iter()
                        .rev()
                        .find(|(_, t)| t == field("text"))
                        .map(|(id, _)| id.as_str())
                        .unwrap_or("an entry");
                    did("added", id)
                }
                "replace" => did("replaced", field("id")),
                _ => did("removed", field("id")),
            }
        })
        .collect();
    sentence(&done)
}

/// An entry's text folded to one line for showing.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Memory {
    /// Empty stores with the default limits.
    pub fn new() -> Self {
        Memory {
            stores: [Vec::new(), Vec::new()],
            next: 1,
            limits: [DEFAULT_LIMIT, USER_LIMIT],
        }
    }

    /// The same memory with `limit` characters for `target`.
    pub fn with_limit(mut self, target: Target, limit: usize) -> Self {
        self.limits[target.index()] = limit;
        self
    }

    /// The limit of a store, in characters.
    pub fn limit(&self, target: Target) -> usize {
        self.limits[target.index()]
    }

    /// The characters a store's entries take: the sum of their texts' characters.
    pub fn usage(&self, target: Target) -> usize {
        usage_of(&self.stores[target.index()])
    }

    /// A store's entries as stored.
    pub fn store(&self, target: Target) -> &[Entry] {
        &self.stores[target.index()]
    }

    /// A store's entries as `(id, text)` pairs in the order stored: what the prompt lists
    /// (harness-core's `prompt::memory_entries` formats them).
    pub fn entries(&self, target: Target) -> Vec<(&str, &str)> {
        self.stores[target.index()]
            .iter()
            .map(|e| (e.id.as_str(), e.text.as_str()))
            .collect()
    }

    /// The number the next entry's id takes (`m{next}`).
    pub fn next_id(&self) -> u64 {
        self.next
    }

    /// A store as the model reads it: a heading line with how full it is, then one line per
    /// entry, `- [ID] TEXT`.
    pub fn view(&self, target: Target) -> String {
        let entries = self.store(target);
        let mut out = format!(
            "{}: {} {}, {} of {} characters used",
            target.as_str(),
            entries.len(),
            if entries.len() == 1 {
                "entry"
            } else {
                "entries"
            },
            self.usage(target),
            self.limit(target)
        );
        for e in entries {
            out.push_str(&format!("\n- [{}] {}", e.id, one_line(&e.text)));
        }
        out
    }

    /// The stores a call's answer shows: `memory` always, `user` when it holds entries or the
    /// call named it.
    fn shown(&self, named: &[Target]) -> String {
        Target::ALL
            .iter()
            .filter(|t| **t == Target::Memory || !self.store(**t).is_empty() || named.contains(t))
            .map(|t| self.view(*t))
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    fn find(&self, target: Target, id: &str) -> Result<usize> {
        if let Some(at) = self.stores[target.index()].iter().position(|e| e.id == id) {
            return Ok(at);
        }
        let other = Target::ALL
            .into_iter()
            .find(|t| *t != target && self.stores[t.index()].iter().any(|e| e.id == id));
        Err(match other {
            Some(o) => refuse(format!(
                "{id} is in {}, not {}; give target {}.",
                o.as_str(),
                target.as_str(),
                o.as_str()
            )),
            None => refuse(format!(
                "there is no entry {id:?} in {}; view shows the ids.",
                target.as_str()
            )),
        })
    }

    /// Applies one change to `self`, answering what it did in a few words.
    fn step(&mut self, change: &Change) -> Result<String> {
        match change {
            Change::Add { target, text } => {
                let store = &mut self.stores[target.index()];
                if let Some(e) = store.iter().find(|e| &e.text == text) {
                    return Ok(format!("nothing added: {} already holds that text", e.id));
                }
                let id = format!("m{}", self.next);
                self.next += 1;
                store.push(Entry {
                    id: id.clone(),
                    text: text.clone(),
                });
                Ok(did("added", &id))
            }
            Change::Replace { target, id, text } => {
                let at = self.find(*target, id)?;
                let store = &mut self.stores[target.index()];
                if let Some(e) = store.iter().find(|e| &e.id != id && &e.text == text) {
                    return Err(refuse(format!(
                        "{} already holds that text; remove {id} instead.",
                        e.id
                    )));
                }
                store[at].text = text.clone();
                Ok(did("replaced", id))
            }
            Change::Remove { target, id } => {
                let at = self.find(*target, id)?;
                self.stores[target.index()].remove(at);
                Ok(did("removed", id))
            }
        }
    }

    /// Runs one call of the `memory` tool on its arguments (the tool's parameters): a view, one
    /// change, or `changes` applied together. Answers the text the model reads (what was done,
    /// then the memory after it); a refusal leaves `self` as it was and says why, naming the
    /// change at fault in a batch. A store whose result would be over its limit (and bigger than
    /// it is now) refuses the whole call and shows what is stored.
    pub fn apply(&mut self, args: &Value) -> Result<String> {
        let changes = match parse_call(args)? {
            Call::View(named) => return Ok(self.shown(named.as_slice())),
            Call::Changes(c) => c,
        };
        let n = changes.len();
        let mut next = self.clone();
        let mut done = Vec::with_capacity(n);
        for (i, change) in changes.iter().enumerate() {
            done.push(next.step(change).map_err(|e| in_batch(e, i, n))?);
        }
        let named: Vec<Target> = changes
            .iter()
            .map(|c| match c {
                Change::Add { target, .. }
                | Change::Replace { target, .. }
                | Change::Remove { target, .. } => *target,
            })
            .collect();
        for t in Target::ALL {
            let (after, limit) = (next.usage(t), next.limit(t));
            if after > limit && after > self.usage(t) {
                return Err(Error::Memory(format!(
                    "Memory full: {} would take {after} of {limit} characters, so nothing was changed. Shorten or merge entries with replace, or remove stale ones, in the same call.\n\n{}",
                    t.as_str(),
                    self.view(t)
                )));
            }
        }
        *self = next;
        Ok(format!("{}.\n\n{}", sentence(&done), self.shown(&named)))
    }

    /// The file's text: `{"version": 1, "next": N, "memory": [{"id", "text"}], "user": [...]}`.
    pub fn to_json(&self) -> Vec<u8> {
        let file = File {
            version: FILE_VERSION,
            next: self.next,
            memory: self.stores[0].clone(),
            user: self.stores[1].clone(),
        };
        let mut out = serde_json::to_vec_pretty(&file).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// Reads a file written by [`Memory::to_json`]; `name` (the file's path) is named in the
    /// refusal of a bad one. Limits are the defaults ([`Memory::with_limit`] to change them).
    pub fn from_json(name: &str, data: &[u8]) -> Result<Self> {
        let bad = |why: String| Error::Memory(format!("Memory file {name} is not valid: {why}"));
        let file: File = serde_json::from_slice(data).map_err(|e| bad(e.to_string()))?;
        if file.version != FILE_VERSION {
            return Err(bad(format!(
                "version {} (this program reads version {FILE_VERSION})",
                file.version
            )));
        }
        let mut seen = std::collections::HashSet::new();
        for e in file.memory.iter().chain(&file.user) {
            let n = e
                .id
                .strip_prefix('m')
                .and_then(|d| d.parse::<u64>().ok())
                .filter(|n| *n >= 1 && format!("m{n}") == e.id)
                .ok_or_else(|| bad(format!("entry id {:?} is not m followed by a number", e.id)))?;
            if n >= file.next {
                return Err(bad(format!(
                    "entry id {} is not below next ({})",
                    e.id, file.next
                )));
            }
            if !seen.insert(n) {
                return Err(bad(format!("entry id {} is given twice", e.id)));
            }
            if e.text.trim().is_empty() {
                return Err(bad(format!("entry {} has no text", e.id)));
            }
        }
        Ok(Memory {
            stores: [file.memory, file.user],
            next: file.next,
            limits: [DEFAULT_LIMIT, USER_LIMIT],
        })
    }

    /// Loads the file at `path` of a backend, with its content hash ([`crate::content_hash`])
    /// to save against; a missing file is empty memory (and no hash).
    pub fn load(backend: &dyn Backend, path: &VPath) -> Result<(Self, Option<String>)> {
        if backend.stat(path)?.is_none() {
            return Ok((Memory::new(), None));
        }
        let data = backend.read(path)?;
        let hash = crate::content_hash(&data);
        Ok((Memory::from_json(path.as_str(), &data)?, Some(hash)))
    }

    /// Writes the file at `path` whole through the backend's atomic write (a temporary file
    /// renamed over the old one), expecting what [`Memory::load`] found there: `Some(hash)`
    /// that version, `None` no file; a file changed meanwhile is refused, not overwritten.
    /// Answers the new content hash.
    pub fn save(
        &self,
        backend: &dyn Backend,
        path: &VPath,
        loaded: Option<&str>,
    ) -> Result<String> {
        let data = self.to_json();
        let expect = match loaded {
            Some(h) => Expect::Version(h.to_string()),
            None => Expect::Absent,
        };
        backend.write(path, &data, &expect)?;
        Ok(crate::content_hash(&data))
    }
}

/// One writer of memory files at a time in this process ([`MemoryFile::update`]), so the
/// memory tool and the memory API of one server cannot interleave their reads and writes.
static UPDATING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A memory file on the host, as the `memory` tool and an instance's memory API both change
/// it: read, changed and written whole ([`crate::write_atomic`]), refused when the file changed
/// between the read and the write ([`Error::MemoryChanged`]), so one writer never silently
/// overwrites another's change.
#[derive(Debug, Clone)]
pub struct MemoryFile {
    path: std::path::PathBuf,
}

impl MemoryFile {
    /// The file at `path` (created by the first change, with its directory).
    pub fn new(path: impl Into<std::path::PathBuf>) -> Self {
        MemoryFile { path: path.into() }
    }

    /// The file's path.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// The memory in the file (empty when there is none) and the bytes it was read from.
    pub fn read(&self) -> Result<(Memory, Option<Vec<u8>>)> {
        let name = self.path.display().to_string();
        match std::fs::read(&self.path) {
            Ok(data) => Ok((Memory::from_json(&name, &data)?, Some(data))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((Memory::new(), None)),
            Err(e) => Err(Error::io(name, e)),
        }
    }

    /// Reads the file, runs `change` on its memory and writes the result whole, unless `change`
    /// refused (nothing written) or the file changed meanwhile (nothing written, refused with
    /// [`Error::MemoryChanged`]).
    pub fn update<T, E: From<Error>>(
        &self,
        change: impl FnOnce(&mut Memory) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let _one = UPDATING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (mut m, before) = self.read()?;
        let out = change(&mut m)?;
        let name = self.path.display().to_string();
        let now = match std::fs::read(&self.path) {
            Ok(data) => Some(data),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io(name, e).into()),
        };
        if now != before {
            return Err(Error::MemoryChanged { path: name }.into());
        }
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display(), e))?;
        }
        crate::write_atomic(&self.path, &m.to_json())?;
        Ok(out)
    }
}

fn usage_of(entries: &[Entry]) -> usize {
    entries.iter().map(|e| e.text.chars().count()).sum()
}

#[cfg(test)]
mod tests {
    #[test]
    fn limit_words_reads_like_the_description() {
        use super::{DEFAULT_LIMIT, Target, USER_LIMIT, limit_words};
        assert_eq!(
            limit_words(&[(Target::Memory, DEFAULT_LIMIT)]),
            "2,200 characters"
        );
        assert_eq!(
            limit_words(&[(Target::Memory, DEFAULT_LIMIT), (Target::User, USER_LIMIT)]),
            "2,200 characters for `memory`, 1,375 for `user`"
        );
        assert_eq!(
            limit_words(&[(Target::Memory, 12_345_678)]),
            "12,345,678 characters"
        );
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn ids_are_never_given_twice() {
        let mut m = Memory::new();
        m.apply(&json!({"action": "add", "text": "a"})).unwrap();
        m.apply(&json!({"action": "remove", "id": "m1"})).unwrap();
        m.apply(&json!({"action": "add", "text": "b", "target": "user"}))
            .unwrap();
        assert_eq!(m.entries(Target::User), vec![("m2", "b")]);
        let back = Memory::from_json("/m.json", &m.to_json()).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn a_refused_batch_changes_nothing() {
        let mut m = Memory::new();
        m.apply(&json!({"action": "add", "text": "a"})).unwrap();
        let before = m.clone();
        let e = m
            .apply(&json!({"changes": [
                {"action": "add", "text": "b"},
                {"action": "remove", "id": "m9"}
            ]}))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "Memory: change 2 of 2: there is no entry \"m9\" in memory; view shows the ids. Nothing was changed."
        );
        assert_eq!(m, before);
    }

    #[test]
    fn a_torn_or_foreign_file_is_refused_naming_it() {
        let e = Memory::from_json("/mem.json", b"{\"version\": 1, \"next\": 2, \"memory\": [")
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("Memory file /mem.json is not valid: ")
        );
        let e = Memory::from_json(
            "/mem.json",
            br#"{"version": 1, "next": 2, "memory": [{"id": "m2", "text": "x"}], "user": []}"#,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "Memory file /mem.json is not valid: entry id m2 is not below next (2)"
        );
    }
}
