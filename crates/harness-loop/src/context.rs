//! Context hygiene (`spec/context.md`): what happens to a tool result when it is inserted, and
//! never afterwards.
//!
//! [`Context`] holds a session's result store (every full output, by id), its read table and its
//! listing table (the dedupe tables), and knows which results are still in what the model sees:
//! a compaction or a rewind takes results out of view, and a stub may only point at a result in
//! view. Nothing here ever changes a text already returned.

use std::collections::{BTreeMap, HashMap, HashSet};

use harness_core::protocol::ResultId;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::config::{ContextConfig, fill};

/// What a read found: the file, the lines it returned, the file's hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadInfo {
    /// The resolved absolute path.
    pub path: String,
    /// The first line returned, from 1.
    pub first: u64,
    /// The last line returned (`first - 1` for an empty window).
    pub last: u64,
    /// The content hash of the whole file at the time of the read.
    pub hash: String,
}

/// A tool's answer, as it comes to be inserted.
#[derive(Debug, Clone, PartialEq)]
pub struct Insert {
    /// The tool's canonical name.
    pub tool: String,
    /// The call's arguments.
    pub args: Value,
    /// The full output the tool produced.
    pub output: String,
    /// Whether it is an error.
    pub is_error: bool,
    /// For a read: what it read.
    pub read: Option<ReadInfo>,
}

impl Insert {
    /// A plain result.
    pub fn new(tool: impl Into<String>, args: Value, output: impl Into<String>) -> Insert {
        Insert {
            tool: tool.into(),
            args,
            output: output.into(),
            is_error: false,
            read: None,
        }
    }

    /// An error result.
    pub fn error(tool: impl Into<String>, args: Value, output: impl Into<String>) -> Insert {
        Insert {
            is_error: true,
            ..Insert::new(tool, args, output)
        }
    }

    /// A read's result.
    pub fn read(args: Value, output: impl Into<String>, read: ReadInfo) -> Insert {
        Insert {
            read: Some(read),
            ..Insert::new("read", args, output)
        }
    }
}

/// Why a result became a stub.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StubKind {
    /// The same lines of an unchanged file.
    UnchangedRead,
    /// Lines inside an earlier read of an unchanged file.
    RangeInside,
    /// The same listing or search with the same answer.
    SameResult,
}

/// How a result went in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum InsertKind {
    /// Whole.
    Full,
    /// Head and tail, `elided` lines not shown whole.
    Capped {
        /// Lines not shown whole.
        elided: usize,
    },
    /// A stub pointing at an earlier result.
    Stub {
        /// The result it points at.
        of: ResultId,
        /// Why.
        why: StubKind,
    },
    /// A recall's window of a stored result.
    Recall {
        /// The result shown.
        of: ResultId,
    },
    /// An error, whole or capped.
    Error,
}

/// A result as it went into the context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Inserted {
    /// Its id.
    pub id: ResultId,
    /// What the model is sent: the label line, then the body.
    pub text: String,
    /// The body alone (the text without the label line).
    pub body: String,
    /// How it went in.
    pub kind: InsertKind,
}

/// One stored result: the full output, kept whatever was inserted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stored {
    /// Its id.
    pub id: ResultId,
    /// The tool.
    pub tool: String,
    /// The call's arguments.
    pub args: Value,
    /// The full output.
    pub output: String,
    /// How it went in.
    pub kind: InsertKind,
    /// The turn it was inserted in.
    pub turn: u32,
    /// Whether it is still in what the model sees.
    pub in_view: bool,
}

/// One result as a transcript recorded it, for [`Context::restore`].
#[derive(Debug, Clone, PartialEq)]
pub struct Restored {
    /// Its id.
    pub id: ResultId,
    /// The tool.
    pub tool: String,
    /// The call's arguments.
    pub args: Value,
    /// The full output.
    pub output: String,
    /// How it went in.
    pub kind: InsertKind,
    /// For a read: what it read.
    pub read: Option<ReadInfo>,
}

#[derive(Debug, Clone, PartialEq)]
struct ReadRecord {
    info: ReadInfo,
    seq: usize,
    /// Inserted whole, so a stub may point at it.
    whole: bool,
}

/// A session's context hygiene state.
#[derive(Debug, Clone)]
pub struct Context {
    cfg: ContextConfig,
    hygiene: bool,
    salt: String,
    counter: u64,
    turn: u32,
    store: Vec<Stored>,
    by_id: HashMap<String, usize>,
    reads: Vec<ReadRecord>,
    read_log: Vec<ReadRecord>,
    listings: HashMap<String, usize>,
    read_tools: HashSet<String>,
    listing_tools: HashSet<String>,
}

impl Context {
    /// A fresh context for one session. `salt` (the session's id) makes result ids differ
    /// between sessions while staying reproducible for one.
    pub fn new(cfg: ContextConfig, salt: impl Into<String>) -> Context {
        let read_tools = cfg.dedupe_tools.read.iter().cloned().collect();
        let listing_tools = cfg.dedupe_tools.same_result.iter().cloned().collect();
        Context {
            cfg,
            hygiene: true,
            salt: salt.into(),
            counter: 0,
            turn: 0,
            store: Vec::new(),
            by_id: HashMap::new(),
            reads: Vec::new(),
            read_log: Vec::new(),
            listings: HashMap::new(),
            read_tools,
            listing_tools,
        }
    }

    /// Turns hygiene off: every result goes in whole, unlabelled, as a harness without these
    /// rules would send it (for measuring what hygiene saves). The store still keeps everything.
    pub fn without_hygiene(mut self) -> Context {
        self.hygiene = false;
        self
    }

    /// The rules' numbers and texts.
    pub fn config(&self) -> &ContextConfig {
        &self.cfg
    }

    /// Marks the start of turn `turn` (from 1); results inserted from now on belong to it.
    pub fn begin_turn(&mut self, turn: u32) {
        self.turn = turn;
    }

    /// The turn results are inserted in now.
    pub fn turn(&self) -> u32 {
        self.turn
    }

    fn next_id(&mut self) -> ResultId {
        let digits = self.cfg.result_id.hex_digits.max(1);
        let mut width = digits;
        let mut tries = 0u32;
        loop {
            self.counter += 1;
            let mut h = Sha256::new();
            h.update(self.salt.as_bytes());
            h.update(b"\0");
            h.update(self.counter.to_le_bytes());
            let hexed = hex::encode(h.finalize());
            let id = format!("{}{}", self.cfg.result_id.prefix, &hexed[..width.min(64)]);
            if !self.by_id.contains_key(&id)
                && let Ok(rid) = ResultId::new(id)
            {
                return rid;
            }
            tries += 1;
            // A session with tens of thousands of results: widen rather than loop forever.
            if tries.is_multiple_of(64) {
                width += 1;
            }
        }
    }

    fn label(&self, id: &ResultId, body: &str) -> String {
        if !self.hygiene {
            return body.to_string();
        }
        let label = fill(&self.cfg.result_id.label, &[("ref", id.as_str())]);
        format!("{label}\n{body}")
    }

    fn in_view(&self, seq: usize) -> bool {
        self.store.get(seq).is_some_and(|s| s.in_view)
    }

    /// Inserts a tool's answer: gives it an id, stores the full output, and decides — once —
    /// what the model is sent: a stub, the head and tail, or the whole text.
    pub fn insert(&mut self, mut ins: Insert) -> Inserted {
        // The call's arguments as the conversation keeps them (`context.kept`).
        ins.args = self.cfg.kept.value(&ins.args);
        let id = self.next_id();
        let seq = self.store.len();
        let (body, kind) = if !self.hygiene {
            (ins.output.clone(), InsertKind::Full)
        } else if ins.is_error {
            let (body, _) = self.shown(&ins.tool, &ins.output, &id);
            (body, InsertKind::Error)
        } else if let Some(stub) = self.stub_for(&ins) {
            stub
        } else {
            let (body, elided) = self.shown(&ins.tool, &ins.output, &id);
            match elided {
                Some(elided) => (body, InsertKind::Capped { elided }),
                None => (body, InsertKind::Full),
            }
        };
        let whole = kind == InsertKind::Full;
        if self.hygiene && !ins.is_error {
            if let Some(read) = &ins.read
                && self.read_tools.contains(&ins.tool)
                && !matches!(kind, InsertKind::Stub { .. })
            {
                let record = ReadRecord {
                    info: read.clone(),
                    seq,
                    whole,
                };
                self.read_log.push(record.clone());
                self.reads.push(record);
            } else if self.listing_tools.contains(&ins.tool) && whole {
                self.listings.insert(listing_key(&ins.tool, &ins.args), seq);
            }
        }
        self.store.push(Stored {
            id: id.clone(),
            tool: ins.tool,
            args: ins.args,
            output: ins.output,
            kind: kind.clone(),
            turn: self.turn,
            in_view: true,
        });
        self.by_id.insert(id.as_str().to_string(), seq);
        Inserted {
            text: self.label(&id, &body),
            id,
            body,
            kind,
        }
    }

    fn stub_for(&self, ins: &Insert) -> Option<(String, InsertKind)> {
        if let Some(read) = &ins.read
            && self.read_tools.contains(&ins.tool)
        {
            // Exact window first, then the narrowest earlier window that holds this one.
            let mut best: Option<(&ReadRecord, StubKind)> = None;
            for r in self.reads.iter().rev() {
                if !r.whole || !self.in_view(r.seq) || r.info.path != read.path {
                    continue;
                }
                if r.info.hash != read.hash {
                    continue;
                }
                if r.info.first == read.first && r.info.last == read.last {
                    best = Some((r, StubKind::UnchangedRead));
                    break;
                }
                if r.info.first <= read.first && read.last <= r.info.last && best.is_none() {
                    best = Some((r, StubKind::RangeInside));
                }
            }
            let (r, why) = best?;
            let of = self.store[r.seq].id.clone();
            let first = read.first.to_string();
            let last = read.last.to_string();
            let ef = r.info.first.to_string();
            let el = r.info.last.to_string();
            let template = match why {
                StubKind::UnchangedRead => &self.cfg.stubs.unchanged_read,
                _ => &self.cfg.stubs.range_inside,
            };
            let body = fill(
                template,
                &[
                    ("path", &read.path),
                    ("first", &first),
                    ("last", &last),
                    ("ref", of.as_str()),
                    ("earlier_first", &ef),
                    ("earlier_last", &el),
                ],
            );
            return Some((body, InsertKind::Stub { of, why }));
        }
        if self.listing_tools.contains(&ins.tool) {
            let seq = *self.listings.get(&listing_key(&ins.tool, &ins.args))?;
            let earlier = &self.store[seq];
            if !earlier.in_view || earlier.output != ins.output {
                return None;
            }
            let of = earlier.id.clone();
            let body = fill(
                &self.cfg.stubs.same_result,
                &[("ref", of.as_str()), ("tool", &ins.tool)],
            );
            return Some((
                body,
                InsertKind::Stub {
                    of,
                    why: StubKind::SameResult,
                },
            ));
        }
        None
    }

    /// Applies the output cap: the text itself, or its head and tail around the elision line
    /// (and how many lines were not shown whole).
    pub fn cap(&self, text: &str, id: &ResultId) -> (String, Option<usize>) {
        cap_text(&self.cfg, text, id)
    }

    /// What the model is sent of a tool's output: its repeats folded ([`fold_repeats`]), then
    /// the output cap.
    fn shown(&self, tool: &str, text: &str, id: &ResultId) -> (String, Option<usize>) {
        match fold_repeats(&self.cfg, tool, text, id) {
            Some((folded, n)) => {
                let (body, more) = cap_text(&self.cfg, &folded, id);
                (body, Some(n + more.unwrap_or(0)))
            }
            None => cap_text(&self.cfg, text, id),
        }
    }

    /// Puts back a result a transcript recorded (resuming a session): the store, and — as
    /// the insert did — the read or listing table. Compactions and rewinds recorded after it
    /// are replayed by calling [`Context::compact`] and [`Context::rewind`] in order.
    pub fn restore(&mut self, r: Restored) {
        let seq = self.store.len();
        let whole = r.kind == InsertKind::Full;
        if self.hygiene {
            if let Some(read) = &r.read
                && self.read_tools.contains(&r.tool)
                && !matches!(r.kind, InsertKind::Stub { .. } | InsertKind::Error)
            {
                let record = ReadRecord {
                    info: read.clone(),
                    seq,
                    whole,
                };
                self.read_log.push(record.clone());
                self.reads.push(record);
            } else if self.listing_tools.contains(&r.tool) && whole {
                self.listings.insert(listing_key(&r.tool, &r.args), seq);
            }
        }
        self.by_id.insert(r.id.as_str().to_string(), seq);
        self.store.push(Stored {
            id: r.id,
            tool: r.tool,
            args: r.args,
            output: r.output,
            kind: r.kind,
            turn: self.turn,
            in_view: true,
        });
        self.counter = self.counter.max(self.store.len() as u64);
    }

    /// Shows a stored result by id, a window of lines at a time (`offset` from 1, at most `limit`
    /// lines, never more than the window). The answer is itself a result (with an id), never
    /// stubbed, capped or recorded as a read.
    pub fn recall(&mut self, args: Value) -> Inserted {
        let asked = args
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_string();
        let asked = if asked.starts_with('#') || asked.is_empty() {
            asked
        } else {
            format!("#{asked}")
        };
        let offset = args
            .get("offset")
            .and_then(Value::as_u64)
            .unwrap_or(1)
            .max(1) as usize;
        let window = self.cfg.recall.window_lines;
        let limit = args
            .get("limit")
            .and_then(Value::as_u64)
            .map_or(window, |n| (n as usize).clamp(1, window));
        let id = self.next_id();
        let (body, kind) = match self.by_id.get(&asked).map(|&s| &self.store[s]) {
            None => (
                fill(&self.cfg.recall.unknown, &[("ref", &asked)]),
                InsertKind::Error,
            ),
            Some(stored) => (
                recall_window(&self.cfg, stored, offset, limit),
                InsertKind::Recall {
                    of: stored.id.clone(),
                },
            ),
        };
        let output = body.clone();
        self.store.push(Stored {
            id: id.clone(),
            tool: "recall".into(),
            args,
            output,
            kind: kind.clone(),
            turn: self.turn,
            in_view: true,
        });
        self.by_id
            .insert(id.as_str().to_string(), self.store.len() - 1);
        Inserted {
            text: self.label(&id, &body),
            id,
            body,
            kind,
        }
    }

    /// The full output stored under `id` (`#a3f2`).
    pub fn stored(&self, id: &str) -> Option<&Stored> {
        self.by_id.get(id).map(|&s| &self.store[s])
    }

    /// Every stored result, oldest first.
    pub fn results(&self) -> &[Stored] {
        &self.store
    }

    /// The table of reads compaction adds: each window of a file the session read (and did not
    /// rewind), its latest read, in the order first read. Empty when nothing was read.
    pub fn read_table(&self) -> String {
        let mut rows: Vec<(String, u64, u64)> = Vec::new();
        let mut latest: BTreeMap<(String, u64, u64), &ReadRecord> = BTreeMap::new();
        for r in &self.read_log {
            let key = (r.info.path.clone(), r.info.first, r.info.last);
            if !latest.contains_key(&key) {
                rows.push(key.clone());
            }
            latest.insert(key, r);
        }
        if rows.is_empty() {
            return String::new();
        }
        let mut out = vec![
            self.cfg.compaction.table_heading.clone(),
            self.cfg.compaction.table_header.clone(),
        ];
        for key in rows {
            let Some(r) = latest.get(&key) else { continue };
            let hash = short_hash(&r.info.hash, self.cfg.compaction.hash_chars);
            out.push(fill(
                &self.cfg.compaction.table_row,
                &[
                    ("path", &r.info.path),
                    ("first", &r.info.first.to_string()),
                    ("last", &r.info.last.to_string()),
                    ("hash", &hash),
                    ("ref", self.store[r.seq].id.as_str()),
                ],
            ));
        }
        out.join("\n")
    }

    /// Compaction: returns the table of reads to add to the summary, takes every result out of
    /// view and empties the dedupe tables. The store is kept, so `recall` still works.
    pub fn compact(&mut self) -> String {
        let table = self.read_table();
        for s in &mut self.store {
            s.in_view = false;
        }
        self.reads.clear();
        self.listings.clear();
        table
    }

    /// Rewind to the start of `turn`: results of that turn and later leave the view and stop
    /// being stub targets; the store keeps them.
    pub fn rewind(&mut self, turn: u32) {
        for s in &mut self.store {
            if s.turn >= turn {
                s.in_view = false;
            }
        }
        let store = &self.store;
        self.reads.retain(|r| store[r.seq].in_view);
        self.read_log.retain(|r| store[r.seq].turn < turn);
        self.listings.retain(|_, seq| store[*seq].in_view);
        self.turn = turn;
    }

    /// An edit's answer: the unified diff of the change, with the configured context lines.
    pub fn edit_diff(&self, path: &str, before: &str, after: &str) -> String {
        unified_diff(path, before, after, self.cfg.diff.context_lines)
    }
}

/// A unified diff of `before` → `after` of `path`, `context` lines around each change.
pub fn unified_diff(path: &str, before: &str, after: &str, context: usize) -> String {
    let diff = similar::TextDiff::from_lines(before, after);
    diff.unified_diff()
        .context_radius(context)
        .header(&format!("a{path}"), &format!("b{path}"))
        .to_string()
}

fn short_hash(hash: &str, chars: usize) -> String {
    let bare = hash.rsplit(':').next().unwrap_or(hash);
    bare.chars().take(chars).collect()
}

/// Arguments in a canonical form (object keys sorted) so equal calls key equally.
pub fn canonical_args(v: &Value) -> String {
    fn canon(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let sorted: BTreeMap<&String, Value> =
                    m.iter().map(|(k, v)| (k, canon(v))).collect();
                let mut out = serde_json::Map::new();
                for (k, v) in sorted {
                    out.insert(k.clone(), v);
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(canon).collect()),
            other => other.clone(),
        }
    }
    canon(v).to_string()
}

fn listing_key(tool: &str, args: &Value) -> String {
    format!("{tool}\0{}", canonical_args(args))
}

/// A line's shape: digits one `0`, quoted text emptied — the lines of a test run's failures,
/// or a build's warnings, share theirs.
fn shape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut quote: Option<char> = None;
    let mut digit = false;
    for c in line.chars() {
        if let Some(q) = quote {
            if c == q {
                out.push(c);
                quote = None;
            }
            continue;
        }
        if c.is_ascii_digit() {
            if !digit {
                out.push('0');
            }
            digit = true;
            continue;
        }
        digit = false;
        if c == '"' || c == '\'' {
            quote = Some(c);
        }
        out.push(c);
    }
    out
}

/// `context.repeats`: the output of a command (a tool `cfg.repeats.tools` names) of at least
/// `min_chars` characters whose middle — the lines after the head, before the tail — repeats
/// the shapes ([`shape`]) of the lines before it, at least `min_repeated_percent` of its lines,
/// keeps its head and tail around the elision line; `None` when it is shown as it is. The
/// answer is the text and how many lines it leaves out.
pub fn fold_repeats(
    cfg: &ContextConfig,
    tool: &str,
    text: &str,
    id: &ResultId,
) -> Option<(String, usize)> {
    let r = &cfg.repeats;
    if !r.tools.iter().any(|t| t == tool) || text.chars().count() < r.min_chars {
        return None;
    }
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= r.head_lines + r.tail_lines {
        return None;
    }
    let (head, rest) = lines.split_at(r.head_lines);
    let (middle, tail) = rest.split_at(rest.len() - r.tail_lines);
    let mut seen: HashSet<String> = head.iter().map(|l| shape(l)).collect();
    let mut repeated = 0usize;
    for line in middle {
        if !seen.insert(shape(line)) {
            repeated += 1;
        }
    }
    if repeated * 100 < r.min_repeated_percent * middle.len() {
        return None;
    }
    let marker = fill(
        &r.elision,
        &[("n", &middle.len().to_string()), ("ref", id.as_str())],
    );
    let mut out = head.join("\n");
    out.push('\n');
    out.push_str(&marker);
    for line in tail {
        out.push('\n');
        out.push_str(line);
    }
    Some((out, middle.len()))
}

/// The output cap of `cfg` applied to `text` (see [`Context::cap`]).
pub fn cap_text(cfg: &ContextConfig, text: &str, id: &ResultId) -> (String, Option<usize>) {
    let cap = &cfg.cap;
    let lines: Vec<&str> = text.lines().collect();
    let chars = text.chars().count();
    if lines.len() <= cap.max_lines && chars <= cap.max_chars {
        return (text.to_string(), None);
    }
    let mut head: Vec<String> = Vec::new();
    let mut used = 0usize;
    let mut partial_head = false;
    for line in &lines {
        let n = line.chars().count() + 1;
        if head.len() >= cap.head_lines || used + n > cap.head_chars {
            break;
        }
        used += n;
        head.push((*line).to_string());
    }
    if head.is_empty()
        && let Some(first) = lines.first()
    {
        head.push(first.chars().take(cap.head_chars).collect());
        partial_head = true;
    }
    let whole_head = if partial_head { 0 } else { head.len() };
    let start_tail = if partial_head { 1 } else { head.len() };
    let mut tail: Vec<&str> = Vec::new();
    let mut used = 0usize;
    for line in lines[start_tail..].iter().rev() {
        let n = line.chars().count() + 1;
        if tail.len() >= cap.tail_lines || used + n > cap.tail_chars {
            break;
        }
        used += n;
        tail.push(line);
    }
    tail.reverse();
    let elided = lines.len() - whole_head - tail.len();
    if elided == 0 {
        // Over the character cap only through the newline count: nothing to elide.
        return (text.to_string(), None);
    }
    let marker = fill(
        &cap.elision,
        &[("n", &elided.to_string()), ("ref", id.as_str())],
    );
    let mut out = head.join("\n");
    out.push('\n');
    out.push_str(&marker);
    if !tail.is_empty() {
        out.push('\n');
        out.push_str(&tail.join("\n"));
    }
    (out, Some(elided))
}

fn recall_window(cfg: &ContextConfig, stored: &Stored, offset: usize, limit: usize) -> String {
    let lines: Vec<&str> = stored.output.lines().collect();
    let total = lines.len();
    let start = offset.min(total.max(1)) - 1;
    let mut end = start;
    let mut used = 0usize;
    while end < total && end - start < limit {
        let n = lines[end].chars().count() + 1;
        if end > start && used + n > cfg.cap.max_chars {
            break;
        }
        used += n;
        end += 1;
    }
    let header = fill(
        &cfg.recall.header,
        &[
            ("ref", stored.id.as_str()),
            ("tool", &stored.tool),
            ("first", &(start + 1).min(total).to_string()),
            ("last", &end.to_string()),
            ("total", &total.to_string()),
        ],
    );
    let mut out = header;
    for line in &lines[start..end] {
        out.push('\n');
        out.push_str(line);
    }
    if end < total {
        out.push('\n');
        out.push_str(&fill(
            &cfg.recall.more,
            &[
                ("ref", stored.id.as_str()),
                ("next", &(end + 1).to_string()),
            ],
        ));
    }
    out
}

/// The lines `recall` shows of a result, in order, window after window (for checking that every
/// result is reachable).
pub fn recall_all(ctx: &mut Context, id: &ResultId) -> Option<String> {
    let total = ctx.stored(id.as_str())?.output.lines().count();
    let mut got: Vec<String> = Vec::new();
    let mut offset = 1usize;
    while offset <= total {
        let shown = ctx.recall(serde_json::json!({"id": id.as_str(), "offset": offset}));
        let body_lines: Vec<&str> = shown.body.lines().collect();
        // The header first; a `more` pointer last when there is more.
        let mut content: &[&str] = body_lines.get(1..).unwrap_or(&[]);
        if let Some(last) = content.last() {
            let next = (offset + content.len() - 1).to_string();
            let more = fill(
                &ctx.cfg.recall.more,
                &[("ref", id.as_str()), ("next", &next)],
            );
            if *last == more && offset + content.len() - 1 <= total {
                content = &content[..content.len() - 1];
            }
        }
        if content.is_empty() {
            return None;
        }
        offset += content.len();
        got.extend(content.iter().map(|s| s.to_string()));
    }
    Some(got.join("\n"))
}

/// Whether a request is compacted before it is sent (`context.md` §8): its prompt (system
/// text, tools and history, estimated in tokens) fills more than `near_full_percent` of the
/// model's window. A history of one message (just compacted) never is, nor a request to a
/// model whose window is unknown.
pub fn near_full(
    near_full_percent: u8,
    window: Option<u64>,
    prompt_tokens: u64,
    messages: usize,
) -> bool {
    let Some(window) = window else {
        return false;
    };
    messages >= 2 && prompt_tokens * 100 > window * u64::from(near_full_percent)
}

/// Whether an answer saying the context overflowed is followed by a compaction and the same
/// step sent once more: only when this step was not compacted already and the person did not
/// cancel.
pub fn compact_after_overflow(compacted_this_step: bool, cancelled: bool) -> bool {
    !compacted_this_step && !cancelled
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LoopConfig;
    use serde_json::json;

    fn ctx() -> Context {
        Context::new(LoopConfig::embedded().unwrap().context, "test")
    }

    fn read(ctx: &mut Context, path: &str, first: u64, last: u64, hash: &str) -> Inserted {
        let text: String = (first..=last).map(|n| format!("{n}: line\n")).collect();
        ctx.insert(Insert::read(
            json!({"path": path}),
            text,
            ReadInfo {
                path: path.into(),
                first,
                last,
                hash: hash.into(),
            },
        ))
    }

    #[test]
    fn ids_are_hash_and_four_hex() {
        let mut c = ctx();
        let a = c.insert(Insert::new("bash", json!({}), "x"));
        let b = c.insert(Insert::new("bash", json!({}), "x"));
        assert_ne!(a.id, b.id);
        assert_eq!(a.id.as_str().len(), 5);
        assert!(a.text.starts_with(&format!("[{}]\n", a.id)));
    }

    #[test]
    fn reread_and_range_are_stubs_until_compaction() {
        let mut c = ctx();
        let first = read(&mut c, "/a", 1, 50, "h1");
        let again = read(&mut c, "/a", 1, 50, "h1");
        assert!(
            matches!(again.kind, InsertKind::Stub { ref of, why: StubKind::UnchangedRead } if *of == first.id)
        );
        let inner = read(&mut c, "/a", 10, 20, "h1");
        assert!(matches!(
            inner.kind,
            InsertKind::Stub {
                why: StubKind::RangeInside,
                ..
            }
        ));
        let changed = read(&mut c, "/a", 1, 50, "h2");
        assert_eq!(changed.kind, InsertKind::Full);
        let table = c.compact();
        assert!(table.contains("| /a | 1-50 | h2 |"), "{table}");
        let after = read(&mut c, "/a", 1, 50, "h2");
        assert_eq!(after.kind, InsertKind::Full);
    }

    #[test]
    fn recall_shows_at_most_limit_lines() {
        let mut c = ctx();
        let text: String = (1..=400).map(|n| format!("line {n}\n")).collect();
        let r = c.insert(Insert::new("bash", json!({"command": "x"}), text));
        let shown = c.recall(json!({"id": r.id.as_str(), "offset": 3, "limit": 5}));
        let lines: Vec<&str> = shown.body.lines().collect();
        // The header, the five lines asked for, the pointer to the rest.
        assert_eq!(lines.len(), 7, "{}", shown.body);
        assert_eq!(
            &lines[1..6],
            ["line 3", "line 4", "line 5", "line 6", "line 7"]
        );
        assert!(
            lines[0].contains("3") && lines[0].contains("7"),
            "{}",
            lines[0]
        );
        assert!(lines[6].contains("8"), "{}", lines[6]);
        // A limit above the window is the window.
        let all = c.recall(json!({"id": r.id.as_str(), "limit": 100_000}));
        assert_eq!(
            all.body.lines().count(),
            1 + c.cfg.recall.window_lines.min(400)
        );
    }

    #[test]
    fn cap_keeps_head_and_tail() {
        let mut c = ctx();
        let text: String = (1..=1000).map(|n| format!("line {n}\n")).collect();
        // grep's: a command's output whose middle repeats is folded by `context.repeats` first.
        let r = c.insert(Insert::new("grep", json!({"pattern": "x"}), text.clone()));
        assert_eq!(r.kind, InsertKind::Capped { elided: 650 });
        assert!(
            r.body
                .contains(&format!("[650 lines elided, full output {}]", r.id))
        );
        assert!(r.body.starts_with("line 1\n"));
        assert!(r.body.ends_with("line 1000"));
        assert_eq!(recall_all(&mut c, &r.id).unwrap(), text.trim_end());
    }
}
