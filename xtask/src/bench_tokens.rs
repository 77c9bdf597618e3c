//! `cargo xtask bench tokens`: what a session costs in prompt tokens. Two scripted tasks are
//! replayed against the in-process scripted model (`harness_agent::ScriptedModel`) in a fresh
//! CLI session — the CLI's own world (`llembas_cli::world::HostWorld`) in a new git repository
//! with no skills, an empty library and no memory — and every request the model was sent is
//! shaped as harness-model sends it (`harness_model::shape_request`) and counted with the o200k
//! encoding over the JSON body.
//!
//! - `fix-bug`: fix a one-line bug in a small Python repository — read two files, edit, run the
//!   tests, read one file again, answer (six requests).
//! - `plan-job`: write a plan, read and edit, start the tests as a background job, load
//!   `job_output` (deferred) and read the job's output, mark the plan done, answer, and answer
//!   the job's end.
//!
//! - `long-fix`: a 17-step task in a small Python shop (files of 56–215 lines, in
//!   `xtask/bench-long/`, committed in a fresh repository): a glob, three greps, reads of four
//!   files, a failing unittest run of 12.5 KB, a re-read of part of a file, two edits, a passing
//!   run, an unchanged re-read of the test file, `git diff`, answer.
//!
//! The line to beat, measured on `fix-bug` side by side against one local scripted server
//! (o200k over the request bodies; spec 3.1.0-draft before issue 14):
//!
//! | | llembas (before) | Codex CLI 0.171.0 | OpenCode 1.18.33 |
//! |---|---|---|---|
//! | first request | 11,931 tokens (49.6 KB) | 9,338 | 6,938 |
//! | tools in it | 28 tools, 39.4 KB (~9,400 tokens) | 13 callable, 18.2 KB | 10, 20.8 KB |
//! | system prompt | 9.7 KB | 19.8 KB | 9.6 KB |
//! | whole task | 74,449 tokens, 6 requests | 55,052, 6 requests | 44,446, 7 requests |
//!
//! The aim of issue 14: a first request at or under 6,200 tokens (0.9× OpenCode's) and the whole
//! `fix-bug` task at or under 40,000.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use harness_agent::library::{DirLibrary, Library};
use harness_agent::{Reply, ScriptedModel, SessionBuilder};
use harness_core::protocol::Mode;
use harness_model::{ChatRequest, Message, Quirks, shape_request};
use llembas_cli::exec::Exec;
use llembas_cli::world::{HostJobs, HostWorld};
use serde_json::{Value, json};

/// What one task cost.
pub struct TaskFigures {
    /// The task's name.
    pub name: &'static str,
    /// Tokens of the first request's body.
    pub first: usize,
    /// Bytes of the first request's body.
    pub first_bytes: usize,
    /// Tokens of the first request's `tools`.
    pub tools: usize,
    /// How many tools the first request carried.
    pub tool_count: usize,
    /// Tokens of the first request's system message.
    pub prompt: usize,
    /// Tokens of the last request's body (how far the context grew).
    pub last: usize,
    /// Tokens of every request's body, added up.
    pub whole: usize,
    /// How many requests the model was sent.
    pub requests: usize,
    /// Tokens of the tool results' texts, added up over every request (each result counted in
    /// every request that carries it).
    pub results: usize,
    /// Each request's tokens, in order.
    pub each: Vec<usize>,
    /// The last request's tool results, in order: the call's tool and the result's tokens.
    pub result_sizes: Vec<(String, usize)>,
    /// The tools of the first request, each with its tokens.
    pub names: Vec<(String, usize)>,
}

const CALC: &str = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n";
const TEST: &str = "import unittest\n\nfrom calc import add, mul\n\n\nclass CalcTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n";

fn repo(dir: &Path) -> Result<()> {
    std::fs::write(dir.join("calc.py"), CALC)?;
    std::fs::write(dir.join("test_calc.py"), TEST)?;
    std::fs::write(
        dir.join("README.md"),
        "# calc\n\nTwo functions and their tests: `python3 -m unittest`.\n",
    )?;
    let ok = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        // No git here: the directory is still a repository's shape for the session.
        std::fs::create_dir_all(dir.join(".git"))?;
    }
    Ok(())
}

/// The long task's repository: `xtask/bench-long/`, committed.
const SHOP: [(&str, &str); 6] = [
    ("shop/__init__.py", ""),
    (
        "shop/pricing.py",
        include_str!("../bench-long/shop/pricing.py"),
    ),
    (
        "shop/models.py",
        include_str!("../bench-long/shop/models.py"),
    ),
    ("shop/cart.py", include_str!("../bench-long/shop/cart.py")),
    ("tests/__init__.py", ""),
    (
        "tests/test_cart.py",
        include_str!("../bench-long/tests/test_cart.py"),
    ),
];

fn shop_repo(dir: &Path) -> Result<()> {
    for (path, text) in SHOP {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, text)?;
    }
    std::fs::write(
        dir.join("README.md"),
        "# shop\n\nA cart, its prices and their tests: `python3 -m unittest`.\n",
    )?;
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args([
                "-c",
                "user.name=bench",
                "-c",
                "user.email=bench@example.com",
            ])
            .args(args)
            .current_dir(dir)
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    if !(git(&["init", "-q"]) && git(&["add", "."]) && git(&["commit", "-qm", "shop"])) {
        bail!(
            "git could not make the long task's repository in {}",
            dir.display()
        );
    }
    Ok(())
}

fn long_fix(root: &str) -> Vec<Reply> {
    let at = |p: &str| format!("{root}/{p}");
    let tests = "python3 -m unittest 2>&1";
    vec![
        Reply::call("glob", json!({"pattern": "**/*.py"})),
        Reply::call(
            "grep",
            json!({"pattern": "def (net|tax|total)", "path": root}),
        ),
        Reply::call("grep", json!({"pattern": "apply_discount", "path": root})),
        Reply::call("read", json!({"path": at("shop/cart.py")})),
        Reply::call("read", json!({"path": at("shop/pricing.py")})),
        Reply::call("read", json!({"path": at("tests/test_cart.py")})),
        Reply::call(
            "bash",
            json!({"purpose": "run the tests", "command": tests}),
        ),
        Reply::call("read", json!({"path": at("shop/models.py")})),
        Reply::call(
            "grep",
            json!({"pattern": "quantity", "path": at("shop"), "include": "*.py"}),
        ),
        Reply::call(
            "edit",
            json!({
                "path": at("shop/pricing.py"),
                "old_string": "    return price * Decimal(percent) / 100",
                "new_string": "    return price * (100 - Decimal(percent)) / 100"
            }),
        ),
        Reply::call(
            "read",
            json!({"path": at("shop/cart.py"), "offset": 33, "limit": 20}),
        ),
        Reply::call(
            "edit",
            json!({
                "path": at("shop/cart.py"),
                "old_string": "            total = quantity\n",
                "new_string": "            total = line.quantity + quantity\n"
            }),
        ),
        Reply::call(
            "bash",
            json!({"purpose": "run the tests again", "command": tests}),
        ),
        Reply::call("read", json!({"path": at("tests/test_cart.py")})),
        Reply::call(
            "bash",
            json!({"purpose": "show the change", "command": "git diff"}),
        ),
        Reply::text(
            "Fixed two bugs: `apply_discount` returned the discount instead of the discounted price (shop/pricing.py), and adding a SKU already in the cart replaced its quantity instead of adding to it (shop/cart.py). All 19 tests pass.",
        ),
    ]
}

fn fix_bug(root: &str) -> Vec<Reply> {
    let calc = format!("{root}/calc.py");
    let test = format!("{root}/test_calc.py");
    vec![
        Reply::call("read", json!({"path": calc})),
        Reply::call("read", json!({"path": test})),
        Reply::call(
            "edit",
            json!({"path": calc, "old_string": "return a - b", "new_string": "return a + b"}),
        ),
        Reply::call(
            "bash",
            json!({"purpose": "run the unit tests", "command": "python3 -m unittest -q 2>&1"}),
        ),
        Reply::call("read", json!({"path": calc})),
        Reply::text("Fixed: `add` subtracted instead of adding (calc.py line 2); both tests pass."),
    ]
}

fn plan_job(root: &str) -> Vec<Reply> {
    let calc = format!("{root}/calc.py");
    vec![
        Reply::call(
            "plan_write",
            json!({
                "title": "Fix add",
                "summary": "add subtracts; fix it and run the tests.",
                "phases": [{"title": "Fix", "tasks": [
                    {"title": "Fix add in calc.py", "status": "doing"},
                    {"title": "Run the tests"}
                ]}]
            }),
        ),
        Reply::call("read", json!({"path": calc})),
        Reply::call(
            "edit",
            json!({"path": calc, "old_string": "return a - b", "new_string": "return a + b"}),
        ),
        Reply::call(
            "bash",
            json!({
                "purpose": "run the unit tests",
                "command": "python3 -m unittest -q 2>&1",
                "background": true
            }),
        ),
        // A deferred tool, loaded first.
        Reply::call("load_tools", json!({"names": ["job_output"]})),
        Reply::call("job_output", json!({"id": 1})),
        Reply::call(
            "plan_update",
            json!({"tasks": [{"id": "t1", "status": "done"}, {"id": "t2", "status": "done"}]}),
        ),
        Reply::text("Fixed `add`; the tests run as job 1."),
        // The job's end wakes the session.
        Reply::text("Job 1 says both tests pass."),
    ]
}

/// A task: its name, its repository, its prompt and the model's script.
struct Task {
    name: &'static str,
    repo: fn(&Path) -> Result<()>,
    prompt: &'static str,
    script: fn(&str) -> Vec<Reply>,
}

const CALC_PROMPT: &str = "The tests fail: fix the bug in calc.py.";

const TASKS: [Task; 3] = [
    Task {
        name: "fix-bug",
        repo,
        prompt: CALC_PROMPT,
        script: fix_bug,
    },
    Task {
        name: "plan-job",
        repo,
        prompt: CALC_PROMPT,
        script: plan_job,
    },
    Task {
        name: "long-fix",
        repo: shop_repo,
        prompt: "The cart's tests fail (`python3 -m unittest`): find the bugs in shop/ and fix them.",
        script: long_fix,
    },
];

/// A fresh CLI session in a new repository, answering the task's script, with the MCP servers
/// `mcp`; the requests it sent.
fn run(
    task: &Task,
    mcp: &[harness_mcp::ServerConfig],
) -> Result<(Vec<ChatRequest>, ScriptedModel)> {
    let tmp = BenchDir::make()?;
    let root = tmp.0.join("calc");
    std::fs::create_dir_all(&root)?;
    let root = std::fs::canonicalize(&root)?;
    (task.repo)(&root)?;
    let data = tmp.0.join("data");
    std::fs::create_dir_all(&data)?;
    let mut exec = Exec::open(&root)?;
    exec.personal = harness_agent::personal::PersonalTools {
        library: Some(Library::new(
            Arc::new(DirLibrary::new(&data.join("library"))),
            "calc",
        )),
        scope: None,
        memory: Some(data.join("memory.json")),
        user_skills: Some(data.join("skills")),
    };
    let spill = exec.spill.clone();
    let exec = Arc::new(exec);
    let model = ScriptedModel::new((task.script)(&root.display().to_string()));
    let store = llembas_cli::store::Store::new(data.join("sessions"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut world: Arc<dyn harness_agent::ToolWorld> = Arc::new(HostWorld::new(exec.clone()));
        if !mcp.is_empty() {
            let (servers, notices) =
                harness_mcp::Mcp::start(mcp, harness_mcp::Limits::default()).await;
            if servers.servers().len() != mcp.len() {
                bail!("the MCP servers did not all start: {}", notices.join("; "));
            }
            world = Arc::new(harness_mcp::WithMcp::new(world, Arc::new(servers)));
        }
        let mut spawned = SessionBuilder::new(Arc::new(model.clone()), world)
            .store(Arc::new(store))
            .jobs(Arc::new(HostJobs::new(&root, spill)))
            .mode(Mode::Auto)
            .rules(Vec::new(), &data.display().to_string())
            // The terminal answers questions, as a fresh interactive session does.
            .answers_questions(true)
            .prompt(task.prompt)
            .one_shot(None)
            .spawn()
            .context("the session did not build")?;
        while spawned.events.recv().await.is_some() {}
        spawned
            .run
            .finished()
            .await
            .and_then(|ended| ended.result)
            .context("the session failed")?;
        anyhow::Ok(())
    })?;
    llembas_cli::process::end_all();
    Ok((model.requests(), model))
}

/// The tasks' directory: a name of `tempfile`'s shape (`.tmp` and six random characters, as the
/// figures before it were measured in), but fixed, so that the paths the requests carry — the
/// working directory, the arguments, a traceback's file names — are the same on every run and
/// the figures do not move with a random name's tokens.
const BENCH_DIR: &str = ".tmpdPxaJ8";

/// A task's directory, `$TMPDIR/.tmpdPxaJ8`, removed when dropped. One bench at a time on a
/// machine: a directory left by a run that was killed is removed first.
struct BenchDir(std::path::PathBuf);

impl BenchDir {
    fn make() -> Result<BenchDir> {
        let dir = std::env::temp_dir().join(BENCH_DIR);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .with_context(|| format!("could not remove {}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("could not make {}", dir.display()))?;
        Ok(BenchDir(dir))
    }
}

impl Drop for BenchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn count(bpe: &tiktoken_rs::CoreBPE, v: &Value) -> usize {
    bpe.encode_with_special_tokens(&v.to_string()).len()
}

fn figures(task: &Task, bpe: &tiktoken_rs::CoreBPE) -> Result<TaskFigures> {
    figures_with(task, bpe, &[])
}

fn figures_with(
    task: &Task,
    bpe: &tiktoken_rs::CoreBPE,
    mcp: &[harness_mcp::ServerConfig],
) -> Result<TaskFigures> {
    let name = task.name;
    let (requests, model) = run(task, mcp)?;
    if requests.is_empty() {
        bail!("{name}: the model was sent no request");
    }
    let quirks = Quirks::embedded()?;
    let profile = quirks.server("other");
    let info = harness_agent::ModelLink::model(&model).clone();
    let mut bodies = Vec::new();
    for r in &requests {
        let shaped = shape_request(quirks, &profile, &info, r, true)?;
        bodies.push(shaped.body);
    }
    if let Some(dir) = std::env::var_os("BENCH_TOKENS_DUMP") {
        // Every body as sent, to read what the tokens went on; a run with MCP servers apart,
        // so that it does not write over the task's own.
        let folder = match mcp.len() {
            0 => name.to_owned(),
            n => format!(
                "{name}-mcp{n}-{}",
                if mcp[0].defer { "deferred" } else { "whole" }
            ),
        };
        let dir = std::path::PathBuf::from(dir).join(folder);
        std::fs::create_dir_all(&dir)?;
        for (i, b) in bodies.iter().enumerate() {
            std::fs::write(
                dir.join(format!("{}.json", i + 1)),
                serde_json::to_string_pretty(b)?,
            )?;
        }
    }
    let first = &bodies[0];
    let tools = first.get("tools").cloned().unwrap_or(Value::Null);
    let names = tools
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| {
                    let name = t
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or("?");
                    (name.to_owned(), count(bpe, t))
                })
                .collect()
        })
        .unwrap_or_default();
    let system = requests[0]
        .messages
        .iter()
        .find_map(|m| match m {
            Message::System { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let tokens = |text: &str| bpe.encode_with_special_tokens(text).len();
    let results = requests
        .iter()
        .flat_map(|r| &r.messages)
        .map(|m| match m {
            Message::Tool { text, .. } => tokens(text),
            _ => 0,
        })
        .sum();
    let mut result_sizes = Vec::new();
    if let Some(last) = requests.last() {
        let mut names = std::collections::HashMap::new();
        for m in &last.messages {
            match m {
                Message::Assistant { tool_calls, .. } => {
                    for c in tool_calls {
                        names.insert(c.id.clone(), c.name.clone());
                    }
                }
                Message::Tool { call_id, text } => {
                    let name = names.get(call_id).cloned().unwrap_or_default();
                    result_sizes.push((name, tokens(text)));
                }
                _ => {}
            }
        }
    }
    Ok(TaskFigures {
        name,
        first: count(bpe, first),
        first_bytes: first.to_string().len(),
        tools: if tools.is_null() {
            0
        } else {
            count(bpe, &tools)
        },
        tool_count: requests[0].tools.len(),
        prompt: bpe.encode_with_special_tokens(&system).len(),
        last: bodies.last().map_or(0, |b| count(bpe, b)),
        whole: bodies.iter().map(|b| count(bpe, b)).sum(),
        requests: bodies.len(),
        results,
        each: bodies.iter().map(|b| count(bpe, b)).collect(),
        result_sizes,
        names,
    })
}

/// Every task's figures.
pub fn measure() -> Result<Vec<TaskFigures>> {
    let bpe = tiktoken_rs::o200k_base()?;
    TASKS.iter().map(|t| figures(t, &bpe)).collect()
}

/// Prints the table.
pub fn bench_tokens() -> Result<()> {
    let all = measure()?;
    println!(
        "| task | first request | tools in it | system prompt | last request | whole task | tool results | requests |\n|---|---|---|---|---|---|---|---|"
    );
    for f in &all {
        println!(
            "| {} | {} tokens ({:.1} KB) | {} tools, {} tokens | {} tokens | {} tokens | {} tokens | {} tokens ({:.0} %) | {} |",
            f.name,
            f.first,
            f.first_bytes as f64 / 1000.0,
            f.tool_count,
            f.tools,
            f.prompt,
            f.last,
            f.whole,
            f.results,
            100.0 * f.results as f64 / f.whole.max(1) as f64,
            f.requests
        );
    }
    for f in &all {
        let each: Vec<String> = f.each.iter().map(usize::to_string).collect();
        println!("\n{}: each request (tokens): {}", f.name, each.join(", "));
        let sizes: Vec<String> = f
            .result_sizes
            .iter()
            .map(|(n, t)| format!("{n} {t}"))
            .collect();
        println!(
            "{}: each tool result (tokens): {}",
            f.name,
            sizes.join(", ")
        );
    }
    if let Some(f) = all.first() {
        let each: Vec<String> = f.names.iter().map(|(n, t)| format!("{n} {t}")).collect();
        println!("\ntools of the first request (tokens): {}", each.join(", "));
    }
    mcp_table()
}

/// `fix-bug`'s first request with three `server-everything`s configured (42 MCP tools: 13 tools
/// and `read_resource` each), their
/// tools deferred behind `load_tools` (the default) and sent whole, beside none.
fn mcp_table() -> Result<()> {
    let bin = match crate::mcp_servers::install() {
        Ok(bin) => bin,
        Err(e) => {
            println!("\nMCP: skipped, server-everything is not installed: {e:#}");
            return Ok(());
        }
    };
    let bpe = tiktoken_rs::o200k_base()?;
    let servers = |defer: bool| -> Vec<harness_mcp::ServerConfig> {
        ["one", "two", "three"]
            .iter()
            .map(|name| {
                let mut c = harness_mcp::ServerConfig::new(
                    *name,
                    harness_mcp::Transport::stdio(&bin.display().to_string(), ["stdio"]),
                );
                c.defer = defer;
                c
            })
            .collect()
    };
    println!(
        "\n| fix-bug with MCP | first request | tools in it | whole task |\n|---|---|---|---|"
    );
    for (label, mcp) in [
        ("no MCP server", Vec::new()),
        ("42 MCP tools, deferred", servers(true)),
        ("42 MCP tools, sent whole", servers(false)),
    ] {
        let f = figures_with(&TASKS[0], &bpe, &mcp)?;
        println!(
            "| {label} | {} tokens ({:.1} KB) | {} tools, {} tokens | {} tokens |",
            f.first,
            f.first_bytes as f64 / 1000.0,
            f.tool_count,
            f.tools,
            f.whole
        );
    }
    Ok(())
}
