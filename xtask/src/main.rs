//! Developer commands for the workspace: `cargo xtask conformance` runs the spec's conformance
//! areas (or an outside case file) through the Rust implementation, and records expected results.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "developer commands: their reports are their output"
)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use harness_spec::Spec;
use harness_spec::conformance::{AreaRunner, CaseFile, Summary, run_cases};
use serde_json::Value;

mod bench_server;
mod bench_tokens;
mod disk;
mod mcp_servers;
mod pyodide;
mod real_model;
mod runners;
mod search_eval;
mod suite;

#[derive(Parser)]
#[command(name = "xtask", about = "Developer commands for the LLeMbas workspace")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the conformance areas of spec/conformance (or one outside case file).
    Conformance(ConformanceArgs),
    /// The whole test suite: format and lint checks, every crate's tests, the real-model tests,
    /// then every conformance area.
    Test,
    /// Only the tests that need a real model server: install (once, into a cache outside the
    /// clone), start and probe one, run them against it.
    RealModel,
    /// Benchmarks: `tokens` replays scripted tasks in a fresh CLI session and counts the
    /// prompt tokens of every request (o200k); `server` runs 200 concurrent streaming chats
    /// on the release llembas-server.
    Bench {
        #[command(subcommand)]
        what: BenchWhat,
    },
    /// Index a folder with harness-search and print recall@5 and MRR of labelled queries
    /// (words alone, vectors alone, combined), index speed and query latency.
    SearchEval(search_eval::Args),
}

#[derive(Subcommand)]
enum BenchWhat {
    /// First-request and whole-task tokens of the scripted tasks.
    Tokens,
    /// 200 concurrent streaming chats on the release llembas-server against a scripted model:
    /// added latency to the first token and per event, RSS, errors; then 10,000 chats made and
    /// deleted by one user, and the RSS they leave.
    Server {
        /// The cargo profile to build and run the server (and the load) in.
        #[arg(long, default_value = "release")]
        profile: String,
    },
}

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
struct ConformanceArgs {
    #[command(subcommand)]
    action: Option<ConformanceAction>,
    /// Run only this area (with --cases: the area the file's cases belong to).
    #[arg(long)]
    area: Option<String>,
    /// Run the cases of this file instead of the spec's (area: the file's stem, or --area).
    #[arg(long, value_name = "FILE")]
    cases: Option<PathBuf>,
    /// Print every failing case of the spec's areas too, not only with --cases.
    #[arg(long, short)]
    verbose: bool,
    /// Fail when an area is skipped (no implementation) or has no cases, as `cargo xtask test`
    /// does.
    #[arg(long)]
    strict: bool,
}

#[derive(Subcommand)]
enum ConformanceAction {
    /// Fill in the expected results that cases of spec/conformance lack, from the implementation.
    Record {
        /// Do not write: list every case whose recorded result would change.
        #[arg(long)]
        all: bool,
        /// Only this area.
        #[arg(long)]
        area: Option<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Conformance(args) => conformance(args),
        Command::Test => suite::test(),
        Command::Bench {
            what: BenchWhat::Tokens,
        } => bench_tokens::bench_tokens().map(|()| ExitCode::SUCCESS),
        Command::Bench {
            what: BenchWhat::Server { profile },
        } => bench_server::bench_server(&profile).map(|()| ExitCode::SUCCESS),
        Command::SearchEval(args) => search_eval::search_eval(args).map(|()| ExitCode::SUCCESS),
        Command::RealModel => real_model_tests(real_model::start(&real_model_dir())).map(|ok| {
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn cargo(args: &[&str]) -> Result<bool> {
    cargo_with(args, &[])
}

fn cargo_with(args: &[&str], env: &[(&str, &str)]) -> Result<bool> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    println!("$ cargo {}", args.join(" "));
    let mut command = std::process::Command::new(cargo);
    for var in cargo_run_vars() {
        command.env_remove(var);
    }
    let status = command
        .args(args)
        .envs(suite::step_env().iter().map(|(k, v)| (k, v)))
        .envs(env.iter().copied())
        .current_dir(workspace_root())
        .status()
        .context("cannot run cargo")?;
    Ok(status.success())
}

/// The variables `cargo run` set for xtask (its manifest and package), which a cargo started from
/// here must not see: build scripts watch some of them (ring's `rerun-if-env-changed` names
/// `CARGO_MANIFEST_DIR` and `CARGO_PKG_*`), and cargo compares them with its own environment, so a
/// cargo from xtask and one from the shell saw them change and compiled ring, everything above it
/// (rustls, reqwest) and every crate of ours again, each time they took turns.
fn cargo_run_vars() -> Vec<std::ffi::OsString> {
    std::env::vars_os()
        .map(|(name, _)| name)
        .filter(|name| {
            let name = name.to_string_lossy();
            name.starts_with("CARGO_PKG_")
                || matches!(
                    name.as_ref(),
                    "CARGO_MANIFEST_DIR"
                        | "CARGO_MANIFEST_PATH"
                        | "CARGO_MANIFEST_LINKS"
                        | "CARGO_CRATE_NAME"
                        | "CARGO_BIN_NAME"
                        | "CARGO_PRIMARY_PACKAGE"
                )
        })
        .collect()
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where cargo puts what it builds: `CARGO_TARGET_DIR` (relative to the workspace), else the
/// workspace's `target/`.
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => workspace_root().join(d),
        None => workspace_root().join("target"),
    }
}

/// The folder of `target_dir()` a cargo profile builds into (`dev` and `test` build `debug`).
fn profile_dir(profile: &str) -> PathBuf {
    let name = match profile {
        "dev" | "test" => "debug",
        "bench" => "release",
        other => other,
    };
    target_dir().join(name)
}

/// Where the real-model tests keep the servers' install and run logs.
fn real_model_dir() -> PathBuf {
    workspace_root().join("target/real-model")
}

/// The tests that need a real model server (ignored by plain `cargo test`, their names holding
/// `real_model`), run against `server`, the first that runs here (or why none does). Prints the
/// line outside checks read: `real-model test: ran against NAME VERSION` or `real-model test:
/// skipped: REASON`.
fn real_model_tests(server: Result<real_model::Server, String>) -> Result<bool> {
    let out = real_model_dir();
    let server = match server {
        Ok(server) => server,
        Err(reason) => {
            println!("real-model test: skipped: {reason}");
            return Ok(true);
        }
    };
    println!(
        "real-model: {} answers at {} (server kind {})",
        server.name, server.base_url, server.kind
    );
    let report = out.join("ran.txt");
    let _ = std::fs::remove_file(&report);
    let report_path = report.to_string_lossy().into_owned();
    let context = real_model::CONTEXT.to_string();
    let passed = cargo_with(
        &[
            "test",
            "--workspace",
            "--tests",
            "--locked",
            "--",
            "--ignored",
            "real_model",
        ],
        &[
            ("LLEMBAS_REAL_MODEL_URL", &server.base_url),
            ("LLEMBAS_REAL_MODEL_SERVER", server.kind),
            ("LLEMBAS_REAL_MODEL_CONTEXT", &context),
            ("LLEMBAS_REAL_MODEL_REPORT", &report_path),
        ],
    )?;
    let ran = std::fs::read_to_string(&report).unwrap_or_default();
    let name = server.name.clone();
    drop(server);
    if !passed {
        println!("real-model test: failed against {name}");
        return Ok(false);
    }
    // Each test writes a line when it has run to its end; the terminal agent's is the one
    // that must have run.
    if !ran.lines().any(|l| l.starts_with("llembas-cli ")) {
        println!(
            "real-model test: failed against {name}: the terminal agent's test did not run (ran: {:?})",
            ran.lines().collect::<Vec<_>>()
        );
        return Ok(false);
    }
    println!("real-model test: ran against {name}");
    Ok(true)
}

fn spec_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec")
}

fn conformance(args: ConformanceArgs) -> Result<ExitCode> {
    let runners = runners::all();
    let spec = Spec::embedded();
    if let Some(ConformanceAction::Record { all, area }) = args.action {
        return record(&runners, area.as_deref(), all);
    }
    if let Some(path) = args.cases {
        return run_outside_file(&runners, &path, args.area.as_deref());
    }

    let known = spec.conformance_areas();
    let areas: Vec<&str> = match args.area.as_deref() {
        Some(name) => {
            if !known.contains(&name) && !runners.iter().any(|r| r.area() == name) {
                bail!(
                    "unknown conformance area {name:?}; the spec has: {}",
                    known.join(", ")
                );
            }
            vec![name]
        }
        None => known,
    };

    let (mut passed, mut failed, mut skipped) = (0usize, 0usize, 0usize);
    let mut skipped_names = Vec::new();
    let mut empty_names = Vec::new();
    for area in areas {
        let Some(file) = spec.conformance(area) else {
            bail!("spec/conformance/{area}.json does not exist");
        };
        match runners.iter().find(|r| r.area() == area) {
            None => {
                skipped += file.cases.len();
                skipped_names.push(area);
                println!(
                    "{area}: skipped, {} cases (no implementation yet)",
                    file.cases.len()
                );
            }
            Some(_) if file.cases.is_empty() => {
                empty_names.push(area);
                println!("{area}: no cases");
            }
            Some(runner) => {
                let summary = run_cases(runner.as_ref(), &file);
                print_area_line(area, &summary);
                if args.verbose {
                    print_failures(&summary);
                }
                passed += summary.passed;
                failed += summary.failures.len();
            }
        }
    }
    if !skipped_names.is_empty() {
        println!("skipped areas: {}", skipped_names.join(", "));
    }
    if !empty_names.is_empty() {
        println!("areas without cases: {}", empty_names.join(", "));
    }
    println!("{passed} passed, {failed} failed, {skipped} skipped");
    let strict_failure = args.strict && (!skipped_names.is_empty() || !empty_names.is_empty());
    if strict_failure {
        println!("conformance: every area must run and have cases");
    }
    Ok(if failed > 0 || strict_failure {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn print_area_line(area: &str, summary: &Summary) {
    println!(
        "{area}: {} passed, {} failed",
        summary.passed,
        summary.failures.len()
    );
}

fn print_failures(summary: &Summary) {
    for f in &summary.failures {
        println!("  case {} failed", f.index);
        println!("    case:     {}", compact(&f.case));
        println!("    expected: {}", compact(&f.expected));
        println!("    actual:   {}", compact(&f.actual));
    }
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| v.to_string())
}

fn read_case_file(path: &Path) -> Result<CaseFile> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let value: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", path.display()))?;
    CaseFile::from_value(&value).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

fn run_outside_file(
    runners: &[Box<dyn AreaRunner>],
    path: &Path,
    area: Option<&str>,
) -> Result<ExitCode> {
    let area = match area {
        Some(a) => a.to_string(),
        None => path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .context("the case file has no name to take the area from; pass --area")?,
    };
    let Some(runner) = runners.iter().find(|r| r.area() == area) else {
        let names: Vec<&str> = runners.iter().map(|r| r.area()).collect();
        bail!(
            "no implementation runs the area {area:?} (implemented: {}); pass --area NAME",
            names.join(", ")
        );
    };
    let file = read_case_file(path)?;
    let summary = run_cases(runner.as_ref(), &file);
    print_area_line(&area, &summary);
    print_failures(&summary);
    println!(
        "{} passed, {} failed, 0 skipped",
        summary.passed,
        summary.failures.len()
    );
    Ok(if summary.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn record(runners: &[Box<dyn AreaRunner>], only: Option<&str>, all: bool) -> Result<ExitCode> {
    let dir = spec_dir().join("conformance");
    let mut changes = 0usize;
    for runner in runners {
        let area = runner.area();
        if only.is_some_and(|o| o != area) {
            continue;
        }
        let path = dir.join(format!("{area}.json"));
        if !path.exists() {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let mut value: Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not valid JSON", path.display()))?;
        let Some(cases) = value.get_mut("cases").and_then(Value::as_array_mut) else {
            bail!("{} has no `cases` array", path.display());
        };
        let mut filled = 0usize;
        for (index, case) in cases.iter_mut().enumerate() {
            let outcome = runner.run(case);
            match case.get("expect") {
                None => {
                    if all {
                        println!(
                            "{area} case {index}: no expected result; would record {}",
                            compact(&outcome.actual)
                        );
                        changes += 1;
                    } else if let Some(obj) = case.as_object_mut() {
                        obj.insert("expect".into(), outcome.actual);
                        filled += 1;
                    }
                }
                Some(expected) if all && !outcome.passed => {
                    println!(
                        "{area} case {index}: would change\n    from {}\n    to   {}",
                        compact(expected),
                        compact(&outcome.actual)
                    );
                    changes += 1;
                }
                Some(_) => {}
            }
        }
        if filled > 0 {
            let mut out = serde_json::to_string_pretty(&value)?;
            out.push('\n');
            let tmp = path.with_extension("json.tmp");
            std::fs::write(&tmp, out).with_context(|| format!("cannot write {}", tmp.display()))?;
            std::fs::rename(&tmp, &path)
                .with_context(|| format!("cannot replace {}", path.display()))?;
            println!(
                "{area}: recorded {filled} expected results in {}",
                path.display()
            );
        }
    }
    if all {
        println!("{changes} cases would change");
    }
    Ok(ExitCode::SUCCESS)
}
