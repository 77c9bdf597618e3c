//! The conformance runners of the areas this crate implements: `fs_access` (the view over the
//! in-memory tree), `host_fs` (the same format over the host backend on a real temporary
//! directory, with the `host` set-up ops), `instructions`, `chunk_tokens`, `chunk` and
//! `memory`. Formats: each area's `about` in `spec/conformance/`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use harness_spec::conformance::{AreaRunner, Outcome};
use serde_json::{Map, Value, json};

use crate::backend::{Backend, HostBackend, HostOptions, MemoryBackend};
use crate::chunk::{self, TokenCounter};
use crate::error::Error;
use crate::path::VPath;
use crate::view::{Access, Level, View};
use crate::{instructions, memory, tools};

/// The small WordPiece tokenizer the token cases count with (`tests/fixtures/tokenizer.json`:
/// BERT's normaliser and pre-tokeniser, a vocabulary of a few hundred pieces, and — on
/// purpose — truncation at 8 and padding to 8 built in, which loading must turn off).
pub const FIXTURE_TOKENIZER: &[u8] = include_bytes!("../tests/fixtures/tokenizer.json");

/// Every runner of this crate.
pub fn conformance_runners() -> Vec<Box<dyn AreaRunner>> {
    vec![
        Box::new(FsAccess),
        Box::new(HostFs),
        Box::new(InstructionsArea),
        Box::new(ChunkTokens),
        Box::new(ChunkChars),
        Box::new(MemoryArea),
    ]
}

type CaseResult<T> = std::result::Result<T, String>;

fn err_value(e: &Error) -> Value {
    json!({ "error": e.to_string() })
}

/// Whether `actual` satisfies `expect`: equality, except that `{"error": "any"}` takes any
/// refusal and `{"error_any_of": [...]}` one of the texts. `unchanged` and `absent` are checked
/// apart and ignored here.
fn judge(expect: &Value, actual: &Value) -> bool {
    let Some(exp) = expect.as_object() else {
        return expect == actual;
    };
    let mut exp = exp.clone();
    exp.remove("unchanged");
    exp.remove("absent");
    let got = actual.get("error").and_then(Value::as_str);
    if exp.get("error").and_then(Value::as_str) == Some("any") && exp.len() == 1 {
        return got.is_some();
    }
    if let Some(list) = exp.get("error_any_of").and_then(Value::as_array) {
        return got.is_some_and(|g| list.iter().any(|t| t.as_str() == Some(g)));
    }
    Value::Object(exp) == *actual
}

fn string_map(case: &Value, key: &str) -> CaseResult<Vec<(String, String)>> {
    match case.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| {
                v.as_str()
                    .map(|s| (k.clone(), s.to_string()))
                    .ok_or_else(|| format!("`{key}.{k}` must be a string"))
            })
            .collect(),
        Some(_) => Err(format!("`{key}` must be an object")),
    }
}

fn string_list(case: &Value, key: &str) -> CaseResult<Vec<String>> {
    match case.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("`{key}` must hold strings"))
            })
            .collect(),
        Some(_) => Err(format!("`{key}` must be an array")),
    }
}

fn access_of(case: &Value, default_grants: &[(&str, Level)]) -> CaseResult<Access> {
    let mut access = Access::new();
    let grants = string_map(case, "grants")?;
    if case.get("grants").is_none() {
        for (p, l) in default_grants {
            access = access.grant(p, *l);
        }
    }
    for (p, l) in grants {
        access = access.grant(&p, Level::parse(&l).map_err(|e| e.to_string())?);
    }
    for (p, l) in string_map(case, "floor")? {
        access = access.floor(&p, Level::parse(&l).map_err(|e| e.to_string())?);
    }
    for m in string_list(case, "mounts")? {
        access = access.mount(&m);
    }
    Ok(access)
}

fn tree_content(path: &str) -> String {
    format!("content of {path}\n")
}

fn cwd_of(case: &Value) -> String {
    case.get("cwd")
        .and_then(Value::as_str)
        .unwrap_or("/")
        .to_string()
}

fn path_of(case: &Value) -> CaseResult<String> {
    case.get("path")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| "the case needs a string `path`".to_string())
}

/// Runs one op of the `fs_access` format (plus `grep`, `instructions`) on a view.
fn run_op(view: &View, case: &Value) -> CaseResult<Value> {
    let op = case
        .get("op")
        .and_then(Value::as_str)
        .ok_or("the case needs a string `op`")?;
    let path = path_of(case)?;
    let want_content = case.get("expect").and_then(|e| e.get("content")).is_some();
    let answer = match op {
        "level" => {
            let (level, passage) = view.level(&path);
            json!({ "level": level.as_str(), "passage": passage })
        }
        "list" => match view.list(&path) {
            Ok(l) if l.truncated => json!({ "entries": l.lines(), "truncated": true }),
            Ok(l) => json!({ "entries": l.lines() }),
            Err(e) => err_value(&e),
        },
        "read" => {
            let p = view.resolve(&path);
            match view.read_bytes(&p).and_then(|b| tools::decode_text(&p, &b)) {
                Ok(text) if want_content => json!({ "ok": true, "content": text }),
                Ok(_) => json!({ "ok": true }),
                Err(e) => err_value(&e),
            }
        }
        "write" => {
            let content = case
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or("written by a conformance case\n");
            match view.write(&path, content.as_bytes()) {
                Ok(()) => json!({ "ok": true }),
                Err(e) => err_value(&e),
            }
        }
        "mkdir" => match view.mkdir(&path) {
            Ok(()) => json!({ "ok": true }),
            Err(e) => err_value(&e),
        },
        "rm" => match view.rm(&path) {
            Ok(_) => json!({ "ok": true }),
            Err(e) => err_value(&e),
        },
        "commit" => match view.commit(&path) {
            Ok(()) => json!({ "ok": true }),
            Err(e) => err_value(&e),
        },
        "grep" => {
            let pattern = case
                .get("pattern")
                .and_then(Value::as_str)
                .ok_or("op grep needs a string `pattern`")?;
            let opts = tools::GrepOptions {
                include: case
                    .get("include")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                ignore_case: false,
                limit: Some(usize::MAX),
                ..Default::default()
            };
            match tools::grep(view, &path, pattern, &opts) {
                Ok(r) => {
                    let m: Vec<String> = r
                        .matches
                        .iter()
                        .map(|m| format!("{}:{}", m.path, m.line))
                        .collect();
                    if r.truncated {
                        json!({ "matches": m, "truncated": true })
                    } else {
                        json!({ "matches": m })
                    }
                }
                Err(e) => err_value(&e),
            }
        }
        "glob" => {
            let pattern = case
                .get("pattern")
                .and_then(Value::as_str)
                .ok_or("op glob needs a string `pattern`")?;
            match tools::glob(view, &path, pattern, usize::MAX) {
                Ok(r) => {
                    let paths: Vec<String> = r.paths.iter().map(|p| p.to_string()).collect();
                    if r.truncated {
                        json!({ "paths": paths, "truncated": true })
                    } else {
                        json!({ "paths": paths })
                    }
                }
                Err(e) => err_value(&e),
            }
        }
        "instructions" => match instructions::stack(view, &path, instructions::DEFAULT_BUDGET) {
            Ok(s) => {
                json!({ "instructions": s.paths().iter().map(|p| p.to_string()).collect::<Vec<_>>() })
            }
            Err(e) => err_value(&e),
        },
        other => return Err(format!("unknown op {other:?}")),
    };
    Ok(answer)
}

fn finish(case: &Value, result: CaseResult<Value>) -> Outcome {
    match result {
        Err(why) => Outcome::malformed(why),
        Ok(actual) => {
            let passed = case.get("expect").is_some_and(|e| judge(e, &actual));
            Outcome { passed, actual }
        }
    }
}

/// `fs_access`: the view over the in-memory tree.
#[derive(Debug)]
pub struct FsAccess;

fn memory_tree(case: &Value) -> CaseResult<MemoryBackend> {
    let tree = MemoryBackend::new();
    for entry in string_list(case, "tree")? {
        let p = VPath::parse(&entry);
        if entry.ends_with('/') {
            tree.add_dir(&p).map_err(|e| e.to_string())?;
        } else {
            tree.add_file(&p, tree_content(p.as_str()))
                .map_err(|e| e.to_string())?;
        }
    }
    for (p, text) in string_map(case, "files")? {
        tree.add_file(&VPath::parse(&p), text)
            .map_err(|e| e.to_string())?;
    }
    Ok(tree)
}

impl AreaRunner for FsAccess {
    fn area(&self) -> &'static str {
        "fs_access"
    }

    fn run(&self, case: &Value) -> Outcome {
        let result = (|| {
            let tree = memory_tree(case)?;
            let view = View::new(Arc::new(tree), access_of(case, &[])?).with_cwd(&cwd_of(case));
            run_op(&view, case)
        })();
        finish(case, result)
    }
}

/// `host_fs`: the `fs_access` format over the host backend on a real temporary directory.
#[derive(Debug)]
pub struct HostFs;

struct HostCase {
    _dir: tempfile_dir::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

/// A temporary directory removed when dropped (host I/O of the runner only).
mod tempfile_dir {
    use std::path::{Path, PathBuf};

    pub struct TempDir(PathBuf);

    impl TempDir {
        pub fn new() -> std::io::Result<Self> {
            use std::sync::atomic::{AtomicU64, Ordering};
            static N: AtomicU64 = AtomicU64::new(0);
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let dir = std::env::temp_dir().join(format!(
                "harness-fs-case-{}-{stamp}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir)?;
            Ok(TempDir(dir))
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn host_path(root: &Path, view_path: &str) -> PathBuf {
    let p = VPath::parse(view_path);
    match p.relative_to(&VPath::root()) {
        Some(rel) if !rel.is_empty() => root.join(rel),
        _ => root.to_path_buf(),
    }
}

impl HostCase {
    fn target(&self, t: &str) -> PathBuf {
        if let Some(rest) = t.strip_prefix("{outside}") {
            let rest = rest.trim_start_matches('/');
            if rest.is_empty() {
                self.outside.clone()
            } else {
                self.outside.join(rest)
            }
        } else if t.starts_with('/') {
            host_path(&self.root, t)
        } else {
            PathBuf::from(t)
        }
    }

    fn at(&self, view_path: &str) -> CaseResult<PathBuf> {
        let p = host_path(&self.root, view_path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("set-up: {}: {e}", parent.display()))?;
        }
        Ok(p)
    }

    fn build(case: &Value) -> CaseResult<HostCase> {
        let dir = tempfile_dir::TempDir::new()
            .map_err(|e| format!("set-up: temporary directory: {e}"))?;
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        for d in [&root, &outside] {
            std::fs::create_dir_all(d).map_err(|e| format!("set-up: {e}"))?;
        }
        let hc = HostCase {
            _dir: dir,
            root,
            outside,
        };
        let io = |what: &str, e: std::io::Error| format!("set-up: {what}: {e}");
        for entry in string_list(case, "tree")? {
            let p = hc.at(&entry)?;
            if entry.ends_with('/') {
                std::fs::create_dir_all(&p).map_err(|e| io(&entry, e))?;
            } else {
                std::fs::write(&p, tree_content(VPath::parse(&entry).as_str()))
                    .map_err(|e| io(&entry, e))?;
            }
        }
        for (p, text) in string_map(case, "files")? {
            std::fs::write(hc.at(&p)?, text).map_err(|e| io(&p, e))?;
        }
        let host = case.get("host").cloned().unwrap_or(Value::Null);
        for (name, text) in string_map(&host, "outside")? {
            let p = hc.outside.join(name.trim_start_matches('/'));
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).map_err(|e| io(&name, e))?;
            }
            std::fs::write(&p, text).map_err(|e| io(&name, e))?;
        }
        for (p, text) in string_map(&host, "file")? {
            std::fs::write(hc.at(&p)?, text).map_err(|e| io(&p, e))?;
        }
        for (p, h) in string_map(&host, "file_hex")? {
            let bytes =
                hex::decode(h.replace(' ', "")).map_err(|e| format!("host.file_hex.{p}: {e}"))?;
            std::fs::write(hc.at(&p)?, bytes).map_err(|e| io(&p, e))?;
        }
        if let Some(many) = host.get("many").and_then(Value::as_object) {
            for (d, n) in many {
                let n = n
                    .as_u64()
                    .ok_or_else(|| format!("host.many.{d} must be a count"))?;
                let dir = host_path(&hc.root, d);
                std::fs::create_dir_all(&dir).map_err(|e| io(d, e))?;
                for i in 0..n {
                    std::fs::write(dir.join(format!("f{i:05}.txt")), format!("file {i}\n"))
                        .map_err(|e| io(d, e))?;
                }
            }
        }
        for (p, t) in string_map(&host, "symlink")? {
            std::os::unix::fs::symlink(hc.target(&t), hc.at(&p)?).map_err(|e| io(&p, e))?;
        }
        for (p, t) in string_map(&host, "hardlink")? {
            std::fs::hard_link(hc.target(&t), hc.at(&p)?).map_err(|e| io(&p, e))?;
        }
        for p in string_list(&host, "fifo")? {
            let at = hc.at(&p)?;
            rustix::fs::mknodat(
                rustix::fs::CWD,
                &at,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o644),
                0,
            )
            .map_err(|e| io(&p, e.into()))?;
        }
        for p in string_list(&host, "socket")? {
            std::os::unix::net::UnixListener::bind(hc.at(&p)?).map_err(|e| io(&p, e))?;
        }
        Ok(hc)
    }

    /// After the op: `unchanged` files must hold their content, `absent` paths must not exist.
    fn check_after(&self, case: &Value) -> CaseResult<Vec<String>> {
        let mut problems = Vec::new();
        let expect = case.get("expect").cloned().unwrap_or(Value::Null);
        for src in [case, &expect] {
            for (p, want) in string_map(src, "unchanged")? {
                let at = self.target(&p);
                match std::fs::read(&at) {
                    Ok(got) if got == want.as_bytes() => {}
                    Ok(_) => problems.push(format!("{p} changed")),
                    Err(_) => problems.push(format!("{p} is gone")),
                }
            }
            for p in string_list(src, "absent")? {
                let at = if p.starts_with("{outside}") {
                    self.target(&p)
                } else {
                    host_path(&self.root, &p)
                };
                if std::fs::symlink_metadata(at).is_ok() {
                    problems.push(format!("{p} exists"));
                }
            }
        }
        Ok(problems)
    }
}

impl AreaRunner for HostFs {
    fn area(&self) -> &'static str {
        "host_fs"
    }

    fn run(&self, case: &Value) -> Outcome {
        let result = (|| {
            let hc = HostCase::build(case)?;
            let mut opts = HostOptions {
                lock_dir: Some(hc.root.with_file_name("locks")),
                ..HostOptions::default()
            };
            if let Some(l) = case.get("limits") {
                if let Some(n) = l.get("max_file_bytes").and_then(Value::as_u64) {
                    opts.max_file_bytes = n;
                }
                if let Some(n) = l.get("max_scan_entries").and_then(Value::as_u64) {
                    opts.max_scan_entries = n as usize;
                }
            }
            let backend = HostBackend::open(&hc.root, opts).map_err(|e| format!("set-up: {e}"))?;
            let backend: Arc<dyn Backend> = Arc::new(backend);
            let view = View::new(backend.clone(), access_of(case, &[("/", Level::Commit)])?)
                .with_cwd(&cwd_of(case));
            let mut actual = run_op(&view, case)?;
            backend.close();
            let problems = hc.check_after(case)?;
            if !problems.is_empty()
                && let Some(m) = actual.as_object_mut()
            {
                m.insert("after".to_string(), json!(problems));
            }
            Ok(actual)
        })();
        finish(case, result)
    }
}

/// `instructions`: the stack of instruction files.
#[derive(Debug)]
pub struct InstructionsArea;

impl AreaRunner for InstructionsArea {
    fn area(&self) -> &'static str {
        "instructions"
    }

    fn run(&self, case: &Value) -> Outcome {
        let result = (|| {
            let tree = memory_tree(case)?;
            let view = View::new(Arc::new(tree), access_of(case, &[("/", Level::Ro)])?)
                .with_cwd(&cwd_of(case));
            let start = case
                .get("start")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| cwd_of(case));
            let budget = case
                .get("budget")
                .and_then(Value::as_u64)
                .map(|b| b as usize)
                .unwrap_or(instructions::DEFAULT_BUDGET);
            let expect = case.get("expect").cloned().unwrap_or(Value::Null);
            Ok(match instructions::stack(&view, &start, budget) {
                Ok(s) => {
                    let names =
                        |v: Vec<VPath>| json!(v.iter().map(|p| p.to_string()).collect::<Vec<_>>());
                    let mut m = Map::new();
                    m.insert("instructions".to_string(), names(s.paths()));
                    let cut = s.cut();
                    if !cut.is_empty() || expect.get("cut").is_some() {
                        m.insert("cut".to_string(), names(cut));
                    }
                    if !s.omitted.is_empty() || expect.get("omitted").is_some() {
                        m.insert("omitted".to_string(), names(s.omitted.clone()));
                    }
                    if expect.get("text").is_some() {
                        m.insert("text".to_string(), json!(s.render(budget)));
                    }
                    Value::Object(m)
                }
                Err(e) => err_value(&e),
            })
        })();
        finish(case, result)
    }
}

fn case_text(case: &Value) -> CaseResult<String> {
    if let Some(t) = case.get("text").and_then(Value::as_str) {
        return Ok(t.to_string());
    }
    if let Some(r) = case.get("repeat") {
        let piece = r
            .get("text")
            .and_then(Value::as_str)
            .ok_or("`repeat.text` must be a string")?;
        let times = r
            .get("times")
            .and_then(Value::as_u64)
            .ok_or("`repeat.times` must be a count")?;
        return Ok(piece.repeat(times as usize));
    }
    Err("the case needs `text` or `repeat`".to_string())
}

fn usize_of(case: &Value, key: &str, default: usize) -> usize {
    case.get(key)
        .and_then(Value::as_u64)
        .map(|n| n as usize)
        .unwrap_or(default)
}

/// `chunk_tokens`: pieces by tokens, and splitting what the embedder refuses.
#[derive(Debug)]
pub struct ChunkTokens;

impl AreaRunner for ChunkTokens {
    fn area(&self) -> &'static str {
        "chunk_tokens"
    }

    fn run(&self, case: &Value) -> Outcome {
        let result = (|| {
            let counter = TokenCounter::from_bytes(FIXTURE_TOKENIZER).map_err(|e| e.to_string())?;
            let text = case_text(case)?;
            let max = usize_of(case, "max_tokens", chunk::PIECE_TOKENS);
            let overlap = usize_of(case, "overlap", chunk::OVERLAP_TOKENS);
            let expect = case.get("expect").cloned().unwrap_or(Value::Null);
            let tokens = match counter.count(&text) {
                Ok(n) => n,
                Err(e) => return Ok(err_value(&e)),
            };
            let mut m = Map::new();
            m.insert("tokens".to_string(), json!(tokens));
            if let Some(refuse_over) = case.get("refuse_over").and_then(Value::as_u64) {
                let mut embed = |_: &str, n: usize| -> Result<Vec<f32>, chunk::Refused> {
                    if n as u64 > refuse_over {
                        Err(chunk::Refused("input too long".to_string()))
                    } else {
                        Ok(vec![n as f32])
                    }
                };
                match chunk::index_text(&counter, &text, max, overlap, &mut embed) {
                    Ok(done) => {
                        let spans: Vec<Value> = done
                            .iter()
                            .filter(|d| d.vector.is_some())
                            .map(|d| json!([d.piece.token_start, d.piece.token_end]))
                            .collect();
                        let kept: Vec<Value> = done
                            .iter()
                            .filter(|d| d.vector.is_none())
                            .map(|d| json!([d.piece.token_start, d.piece.token_end]))
                            .collect();
                        m.insert("pieces".to_string(), json!(spans));
                        m.insert("unembedded".to_string(), json!(kept));
                    }
                    Err(e) => return Ok(err_value(&e)),
                }
            } else {
                match chunk::chunk_tokens(&counter, &text, max, overlap) {
                    Ok(pieces) => {
                        m.insert(
                            "pieces".to_string(),
                            json!(
                                pieces
                                    .iter()
                                    .map(|p| json!([p.token_start, p.token_end]))
                                    .collect::<Vec<_>>()
                            ),
                        );
                        if expect.get("texts").is_some() {
                            m.insert(
                                "texts".to_string(),
                                json!(pieces.iter().map(|p| p.text(&text)).collect::<Vec<_>>()),
                            );
                        }
                    }
                    Err(e) => return Ok(err_value(&e)),
                }
            }
            Ok(Value::Object(m))
        })();
        finish(case, result)
    }
}

/// `chunk`: the character rule.
#[derive(Debug)]
pub struct ChunkChars;

impl AreaRunner for ChunkChars {
    fn area(&self) -> &'static str {
        "chunk"
    }

    fn run(&self, case: &Value) -> Outcome {
        let result = (|| {
            let text = case_text(case)?;
            let max = usize_of(case, "max_chars", chunk::PIECE_CHARS);
            let overlap = usize_of(case, "overlap", chunk::OVERLAP_CHARS);
            let expect = case.get("expect").cloned().unwrap_or(Value::Null);
            Ok(match chunk::chunk_chars(&text, max, overlap) {
                Ok(spans) => {
                    let mut m = Map::new();
                    m.insert(
                        "pieces".to_string(),
                        json!(spans.iter().map(|(s, e)| json!([s, e])).collect::<Vec<_>>()),
                    );
                    if expect.get("texts").is_some() {
                        let chars: Vec<char> = text.chars().collect();
                        let texts: Vec<String> = spans
                            .iter()
                            .map(|(s, e)| chars[*s..*e].iter().collect())
                            .collect();
                        m.insert("texts".to_string(), json!(texts));
                    }
                    Value::Object(m)
                }
                Err(e) => err_value(&e),
            })
        })();
        finish(case, result)
    }
}

/// `memory`: calls of the `memory` tool on a state, against the stores' limits.
#[derive(Debug)]
pub struct MemoryArea;

fn memory_pairs(v: Option<&Value>, key: &str) -> CaseResult<Vec<Value>> {
    let Some(v) = v else {
        return Ok(Vec::new());
    };
    let items = v
        .as_array()
        .ok_or_else(|| format!("`{key}` must be a list of [id, text] pairs"))?;
    items
        .iter()
        .map(|p| match p.as_array().map(Vec::as_slice) {
            Some([Value::String(id), Value::String(text)]) => Ok(json!({"id": id, "text": text})),
            _ => Err(format!("`{key}` must be a list of [id, text] pairs")),
        })
        .collect()
}

fn memory_state(case: &Value) -> CaseResult<memory::Memory> {
    let mut m = match case.get("state") {
        None | Some(Value::Null) => memory::Memory::new(),
        Some(state) => {
            let file = json!({
                "version": memory::FILE_VERSION,
                "next": state.get("next").cloned().unwrap_or(json!(1)),
                "memory": memory_pairs(state.get("memory"), "state.memory")?,
                "user": memory_pairs(state.get("user"), "state.user")?,
            });
            memory::Memory::from_json("state", file.to_string().as_bytes())
                .map_err(|e| e.to_string())?
        }
    };
    if let Some(limits) = case.get("limits") {
        for t in memory::Target::ALL {
            if let Some(l) = limits.get(t.as_str()) {
                let l = l
                    .as_u64()
                    .ok_or_else(|| format!("`limits.{}` must be a count", t.as_str()))?;
                m = m.with_limit(t, l as usize);
            }
        }
    }
    Ok(m)
}

impl AreaRunner for MemoryArea {
    fn area(&self) -> &'static str {
        "memory"
    }

    fn run(&self, case: &Value) -> Outcome {
        let result = (|| {
            let mut m = memory_state(case)?;
            let calls: Vec<Value> = match (case.get("call"), case.get("calls")) {
                (Some(c), None) => vec![c.clone()],
                (None, Some(Value::Array(cs))) if !cs.is_empty() => cs.clone(),
                _ => return Err("the case needs `call` or a non-empty `calls`".to_string()),
            };
            let n = calls.len();
            let mut last = None;
            for (i, call) in calls.iter().enumerate() {
                let before = m.clone();
                let got = m.apply(call);
                if i + 1 < n {
                    if let Err(e) = got {
                        return Err(format!("call {} of {n} was refused: {e}", i + 1));
                    }
                } else {
                    last = Some((before, got));
                }
            }
            let Some((before, got)) = last else {
                return Err("no call ran".to_string());
            };
            let expect = case.get("expect").cloned().unwrap_or(Value::Null);
            let mut out = Map::new();
            match got {
                Ok(answer) => {
                    if expect.get("answer").is_some() || expect.get("error").is_some() {
                        out.insert("answer".to_string(), json!(answer));
                    }
                }
                Err(e) => {
                    out.insert("error".to_string(), json!(e.to_string()));
                    if m != before {
                        out.insert("changed_by_refused_call".to_string(), json!(true));
                    }
                }
            }
            for t in memory::Target::ALL {
                if expect.get(t.as_str()).is_some() {
                    let pairs: Vec<Value> = m
                        .entries(t)
                        .iter()
                        .map(|(id, text)| json!([id, text]))
                        .collect();
                    out.insert(t.as_str().to_string(), json!(pairs));
                }
            }
            if expect.get("next").is_some() {
                out.insert("next".to_string(), json!(m.next_id()));
            }
            Ok(Value::Object(out))
        })();
        finish(case, result)
    }
}
