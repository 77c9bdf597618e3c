//! A scripted trajectory for measuring context hygiene: one prompt of many steps (re-reads,
//! ranges of files already read, long command outputs, repeated listings and searches, edits),
//! replayed through a real [`Session`] with hygiene on and off. The figure is the prompt tokens
//! the model would be sent over the whole run (approximate tokens: characters / 4).
//!
//! The script is deterministic (a fixed-seed generator), so both runs see the same calls and the
//! same tool outputs; only what the session inserts differs. With `compact_at`, the replay
//! compacts like a real driver when a request would pass that many tokens (80 % of a 128k-token
//! window: [`COMPACT_AT_TOKENS`]): the summarising request's prompt is counted, and the summary
//! (a fixed handoff text) replaces the history. Without it, nothing is ever dropped, so the
//! figure shows what the insert-time rules alone save.

use harness_core::protocol::{Risk, ToolCall};
use harness_spec::Project;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::config::{Budget, LoopConfig};
use crate::context::{ReadInfo, recall_all};
use crate::error::Result;
use crate::session::{
    Action, AllowAll, EditInfo, Input, ModelOutput, Session, SessionSetup, ToolOutcome, ToolTraits,
};

/// What a replay measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Figure {
    /// Model requests made.
    pub steps: u32,
    /// Prompt tokens over all requests (characters / 4).
    pub prompt_tokens: u64,
    /// Tool calls answered.
    pub calls: usize,
    /// Results whose full output `recall` gives back exactly.
    pub reachable: usize,
    /// Results stored.
    pub stored: usize,
    /// Compactions the run needed.
    pub compactions: u32,
}

/// The window the replay assumes, in tokens.
pub const WINDOW_TOKENS: u64 = 128_000;

/// A request past this many tokens is compacted first (80 % of the window).
pub const COMPACT_AT_TOKENS: u64 = WINDOW_TOKENS * 8 / 10;

fn summary() -> String {
    let mut s = String::from(
        "Summary of the work so far (another model started this task):\n\
         Goal: fix the failing tests and keep the build green.\n\
         Progress: ran the test suite several times; failures are in modules 3, 7 and 11; \
         edited compute functions in several modules.\n\
         Next: re-run the tests, read the failing modules again, fix what remains.\n",
    );
    for i in 0..14 {
        s.push_str(&format!(
            "- /work/project/src/module_{i}.rs: compute_{i} and its callers; see the table below.\n"
        ));
    }
    s
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

struct File {
    path: String,
    lines: Vec<String>,
}

impl File {
    fn text(&self) -> String {
        let mut t = self.lines.join("\n");
        t.push('\n');
        t
    }

    fn hash(&self) -> String {
        hex::encode(Sha256::digest(self.text().as_bytes()))
    }
}

/// The tools the script calls, with their traits.
fn catalog(name: &str) -> Option<ToolTraits> {
    let risk = match name {
        "read" | "list" | "grep" | "glob" | "recall" => Risk::Read,
        "edit" => Risk::Write,
        "bash" => Risk::Execute,
        _ => return None,
    };
    Some(ToolTraits {
        risk,
        exclusive: false,
    })
}

enum Planned {
    Read { file: usize, first: u64, limit: u64 },
    List { dir: usize },
    Grep { pattern: usize },
    Bash { run: u64, lines: u64 },
    Edit { file: usize, line: usize },
}

/// The project's directories, as the scripted `list` calls name them.
const DIRS: [&str; 3] = ["/work/project", "/work/project/src", "/work/project/tests"];
/// The patterns the scripted `grep` calls look for.
const PATTERNS: [&str; 4] = ["compute_3", "offset", "TODO", "fn main"];

/// Replays the scripted trajectory of `steps` model requests (the last one answers in text),
/// with context hygiene on or off, compacting past `compact_at` tokens if given.
pub fn replay(steps: u32, hygiene: bool, compact_at: Option<u64>) -> Result<Figure> {
    let config = LoopConfig::embedded()?;
    let mut session = Session::new(SessionSetup {
        config,
        project: Project::Cli,
        budget: Some(Budget {
            steps: steps + 10,
            tokens: u64::MAX,
        }),
        id: "trajectory".into(),
        catalog: Box::new(catalog),
        permissions: Box::new(AllowAll),
        subagent: false,
        hygiene,
    });
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut files = project_files(&mut rng);
    let dirs = DIRS;
    let patterns = PATTERNS;

    let mut actions = session.handle(Input::Prompt {
        text: "Fix the failing tests in the project and keep the build green.".into(),
    })?;
    let mut prompt_tokens = 0u64;
    let mut model_steps = 0u32;
    let mut calls_answered = 0usize;
    let mut call_no = 0u64;
    let mut bash_runs = 0u64;
    let mut compactions = 0u32;
    loop {
        let mut next_input = None;
        for a in &actions {
            match a {
                Action::CallModel(req) => {
                    let mut tokens = req.approx_tokens();
                    if compact_at.is_some_and(|at| tokens > at) {
                        // The summarising request sees the whole context; then the step is
                        // sent again over the summary.
                        prompt_tokens += tokens;
                        session.compact(&summary())?;
                        compactions += 1;
                        tokens = session.request_again().map_or(0, |r| r.approx_tokens());
                    }
                    prompt_tokens += tokens;
                    model_steps += 1;
                    if model_steps >= steps {
                        next_input = Some(Input::Model(ModelOutput {
                            text: "All tests pass now; the fixes are in modules 3 and 7.".into(),
                            ..ModelOutput::default()
                        }));
                        continue;
                    }
                    // One call per step, two reads side by side now and then.
                    let count = if rng.below(5) == 0 { 2 } else { 1 };
                    let mut calls = Vec::new();
                    for _ in 0..count {
                        call_no += 1;
                        let planned = plan_call(&mut rng, &files, &mut bash_runs);
                        calls.push(to_call(call_no, &planned, &files, &dirs, &patterns));
                    }
                    next_input = Some(Input::Model(ModelOutput {
                        text: String::new(),
                        tool_calls: calls,
                        ..ModelOutput::default()
                    }));
                }
                Action::RunTools { calls, .. } => {
                    let results = calls
                        .iter()
                        .map(|c| run_tool(c, &mut files, &dirs))
                        .collect();
                    calls_answered += calls.len();
                    next_input = Some(Input::ToolResults(results));
                }
                Action::EndTurn(_) => {
                    next_input = None;
                }
                _ => {}
            }
        }
        let Some(input) = next_input else { break };
        actions = session.handle(input)?;
    }

    let (reachable, stored) = recalled_whole(&mut session);
    Ok(Figure {
        steps: model_steps,
        prompt_tokens,
        calls: calls_answered,
        reachable,
        stored,
        compactions,
    })
}

/// The project's 14 files, of 40 to 500 lines each.
fn project_files(rng: &mut Rng) -> Vec<File> {
    (0..14)
        .map(|i| {
            let n = 40 + rng.below(460) as usize;
            File {
                path: format!("/work/project/src/module_{i}.rs"),
                lines: (1..=n)
                    .map(|l| {
                        format!("    let value_{l} = compute_{i}(input_{l}, {l}) + offset; // v0")
                    })
                    .collect(),
            }
        })
        .collect()
}

/// The next scripted call: re-reads of a few files most often, then reads of a part, lists,
/// greps, commands (`bash_runs` counts them) and edits.
fn plan_call(rng: &mut Rng, files: &[File], bash_runs: &mut u64) -> Planned {
    let roll = rng.below(100);
    if roll < 38 {
        // Re-reads dominate: the same few files again and again.
        let file = (rng.below(6) + if rng.below(4) == 0 { 6 } else { 0 }) as usize;
        Planned::Read {
            file,
            first: 1,
            limit: 2000,
        }
    } else if roll < 52 {
        let file = rng.below(files.len() as u64) as usize;
        let len = files[file].lines.len() as u64;
        let first = 1 + rng.below(len.saturating_sub(40).max(1));
        Planned::Read {
            file,
            first,
            limit: 30 + rng.below(60),
        }
    } else if roll < 66 {
        Planned::List {
            dir: rng.below(DIRS.len() as u64) as usize,
        }
    } else if roll < 76 {
        Planned::Grep {
            pattern: rng.below(PATTERNS.len() as u64) as usize,
        }
    } else if roll < 92 {
        *bash_runs += 1;
        Planned::Bash {
            run: *bash_runs,
            lines: 60 + rng.below(700),
        }
    } else {
        let file = rng.below(files.len() as u64) as usize;
        let line = rng.below(files[file].lines.len() as u64) as usize;
        Planned::Edit { file, line }
    }
}

/// Every stored result must come back whole through recall: how many do (an empty one
/// counts), of how many stored.
fn recalled_whole(session: &mut Session) -> (usize, usize) {
    let ids: Vec<_> = session
        .context()
        .results()
        .iter()
        .map(|s| {
            (
                s.id.clone(),
                s.output.lines().collect::<Vec<_>>().join("\n"),
            )
        })
        .collect();
    let stored = ids.len();
    let mut reachable = 0;
    for (id, full) in ids {
        if recall_all(session.context_mut(), &id).is_some_and(|back| back == full)
            || full.is_empty()
        {
            reachable += 1;
        }
    }
    (reachable, stored)
}

fn to_call(n: u64, p: &Planned, files: &[File], dirs: &[&str], patterns: &[&str]) -> ToolCall {
    let (name, arguments) = match p {
        Planned::Read { file, first, limit } => (
            "read",
            if *first == 1 && *limit == 2000 {
                json!({"path": files[*file].path})
            } else {
                json!({"path": files[*file].path, "offset": first, "limit": limit})
            },
        ),
        Planned::List { dir } => ("list", json!({"path": dirs[*dir]})),
        Planned::Grep { pattern } => (
            "grep",
            json!({"pattern": patterns[*pattern], "path": "/work/project"}),
        ),
        Planned::Bash { run, lines } => (
            "bash",
            json!({"command": "cargo test 2>&1", "run": run, "lines": lines}),
        ),
        Planned::Edit { file, line } => ("edit", json!({"path": files[*file].path, "line": line})),
    };
    ToolCall {
        id: format!("call_{n}"),
        name: name.into(),
        arguments,
    }
}

fn run_tool(call: &ToolCall, files: &mut [File], dirs: &[&str]) -> ToolOutcome {
    let a = &call.arguments;
    let path = a.get("path").and_then(|v| v.as_str()).unwrap_or("");
    match call.name.as_str() {
        "read" => {
            let Some(f) = files.iter().find(|f| f.path == path) else {
                return ToolOutcome::ok(&call.id, "no such file");
            };
            let total = f.lines.len() as u64;
            let first = a
                .get("offset")
                .and_then(|v| v.as_u64())
                .unwrap_or(1)
                .min(total);
            let limit = a.get("limit").and_then(|v| v.as_u64()).unwrap_or(2000);
            let last = (first + limit - 1).min(total);
            let hash = f.hash();
            let mut out: String = (first..=last)
                .map(|n| format!("{n:>6}\t{}\n", f.lines[(n - 1) as usize]))
                .collect();
            out.push_str(&format!(
                "(lines {first}-{last} of {total}; sha256 {})",
                &hash[..16]
            ));
            ToolOutcome {
                read: Some(ReadInfo {
                    path: path.into(),
                    first,
                    last,
                    hash,
                }),
                ..ToolOutcome::ok(&call.id, out)
            }
        }
        "list" => {
            let d = dirs.iter().position(|d| *d == path).unwrap_or(0);
            let out: Vec<String> = match d {
                1 => files
                    .iter()
                    .map(|f| f.path.rsplit('/').next().unwrap_or("").to_string())
                    .collect(),
                2 => (0..40).map(|i| format!("test_case_{i}.rs")).collect(),
                _ => vec![
                    "Cargo.toml".into(),
                    "README.md".into(),
                    "src/".into(),
                    "tests/".into(),
                    "target/".into(),
                ],
            };
            ToolOutcome::ok(&call.id, out.join("\n"))
        }
        "grep" => {
            let pat = a.get("pattern").and_then(|v| v.as_str()).unwrap_or("");
            let mut out = Vec::new();
            for f in files.iter() {
                for (i, l) in f.lines.iter().enumerate() {
                    if l.contains(pat) && out.len() < 100 {
                        out.push(format!("{}:{}:{l}", f.path, i + 1));
                    }
                }
            }
            ToolOutcome::ok(&call.id, out.join("\n"))
        }
        "bash" => {
            let run = a.get("run").and_then(|v| v.as_u64()).unwrap_or(0);
            let lines = a.get("lines").and_then(|v| v.as_u64()).unwrap_or(100);
            let out: Vec<String> = (1..=lines)
                .map(|n| {
                    if n % 97 == 0 {
                        format!("test module_{}::case_{n} ... FAILED (run {run})", n % 14)
                    } else {
                        format!("test module_{}::case_{n} ... ok", n % 14)
                    }
                })
                .collect();
            ToolOutcome::ok(&call.id, out.join("\n"))
        }
        "edit" => {
            let line = a.get("line").and_then(|v| v.as_u64()).unwrap_or(0) as usize;
            let Some(f) = files.iter_mut().find(|f| f.path == path) else {
                return ToolOutcome::ok(&call.id, "no such file");
            };
            let before = f.text();
            if let Some(l) = f.lines.get_mut(line) {
                let v = l
                    .rsplit("// v")
                    .next()
                    .and_then(|s| s.parse::<u32>().ok())
                    .unwrap_or(0);
                let head = l
                    .rsplit_once("// v")
                    .map(|(h, _)| h.to_string())
                    .unwrap_or_default();
                *l = format!("{head}// v{}", v + 1);
            }
            let after = f.text();
            ToolOutcome {
                edit: Some(EditInfo {
                    path: path.into(),
                    before,
                    after,
                }),
                ..ToolOutcome::ok(&call.id, "edited")
            }
        }
        _ => ToolOutcome::ok(&call.id, ""),
    }
}
