//! `cargo xtask test`, the whole test suite as CI runs it, arranged so that a clean run compiles
//! the workspace as few times as it can and waits for downloads as little as it can:
//!
//! - clippy lints during the one build the tests use: the build runs with `clippy-driver` as
//!   cargo's workspace wrapper (what `cargo clippy` does, in a build instead of a check), so the
//!   lints cost no second compilation of the workspace and its dependencies; every later cargo
//!   step keeps the same wrapper and so reuses that build;
//! - what the tests need from outside — npm's Pyodide and MCP server, the real model server (a
//!   llama.cpp build from source where the prebuilt one cannot run), the embedder's files — is
//!   installed on threads of its own from the start, while the build runs, and each is waited for
//!   just before the first step that needs it;
//! - each step says how long it took, and the run ends with every step's time.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

use crate::{disk, mcp_servers, pyodide, real_model, search_eval};

/// What `clippy-driver` reads its lint arguments from (`cargo clippy -- -D warnings` passes them
/// the same way, joined by this separator). `.ci/run` sets the same value before it builds xtask.
pub const CLIPPY_ARGS: &str = "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__";

/// The variable `.ci/run` names its folder of system-package installs with (`status` holds the
/// exit code once they are done, `log` their output); the tests step waits for it.
pub const CI_SETUP_VAR: &str = "LLEMBAS_CI_SETUP";

/// The environment every cargo step of the suite runs with (the lint wrapper), once chosen.
static STEP_ENV: OnceLock<Vec<(String, String)>> = OnceLock::new();

/// The variables a cargo step of the suite adds to its own.
pub fn step_env() -> &'static [(String, String)] {
    STEP_ENV.get().map_or(&[], Vec::as_slice)
}

/// `clippy-driver` of the toolchain that runs here, found beside its `rustc`.
fn clippy_driver() -> Result<PathBuf> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = std::process::Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .with_context(|| format!("cannot run {rustc} --print sysroot"))?;
    let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let driver = Path::new(&sysroot).join("bin/clippy-driver");
    if !driver.is_file() {
        anyhow::bail!(
            "{} does not exist: clippy is not installed (rustup component add clippy)",
            driver.display()
        );
    }
    Ok(driver)
}

/// Step names, outcomes and times, printed as they end and once more at the end.
#[derive(Default)]
struct Steps {
    done: Vec<(&'static str, bool, Duration)>,
}

impl Steps {
    fn run(&mut self, name: &'static str, step: impl FnOnce() -> Result<bool>) -> Result<bool> {
        let started = Instant::now();
        let passed = step()?;
        self.record(name, passed, started.elapsed());
        Ok(passed)
    }

    fn record(&mut self, name: &'static str, passed: bool, took: Duration) {
        println!(
            "step {name}: {} in {}",
            if passed { "passed" } else { "FAILED" },
            minutes(took)
        );
        disk::report(&format!("after {name}"));
        self.done.push((name, passed, took));
    }

    fn failed(&self) -> Vec<&'static str> {
        self.done
            .iter()
            .filter(|(_, passed, _)| !passed)
            .map(|(name, _, _)| *name)
            .collect()
    }

    fn summary(&self, total: Duration) -> String {
        let steps: Vec<String> = self
            .done
            .iter()
            .map(|(name, _, took)| format!("{name} {}", minutes(*took)))
            .collect();
        format!("{} (total {})", steps.join(", "), minutes(total))
    }
}

/// `1m 05s`, or `7.3s` under a minute.
fn minutes(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 60.0 {
        format!("{secs:.1}s")
    } else {
        let whole = d.as_secs();
        format!("{}m {:02}s", whole / 60, whole % 60)
    }
}

/// A preparation running on a thread of its own; waited for (never left running) when dropped.
struct Background<T> {
    what: &'static str,
    handle: Option<JoinHandle<T>>,
}

impl<T: Send + 'static> Background<T> {
    fn start(what: &'static str, work: impl FnOnce() -> T + Send + 'static) -> Self {
        Self {
            what,
            handle: Some(std::thread::spawn(work)),
        }
    }

    /// Its result, after saying how long the suite waited for it.
    fn join(mut self) -> Result<T> {
        let started = Instant::now();
        let handle = self.handle.take().context("joined twice")?;
        let value = handle
            .join()
            .map_err(|_| anyhow::anyhow!("the thread preparing {} panicked", self.what))?;
        let waited = started.elapsed();
        if waited > Duration::from_millis(500) {
            println!("prepare: waited {} for {}", minutes(waited), self.what);
        }
        Ok(value)
    }
}

impl<T> Drop for Background<T> {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// Waits for `.ci/run`'s system packages (PostgreSQL, Chromium) when it installs them in the
/// background; true when there are none to wait for or they installed.
fn system_packages() -> bool {
    let Some(dir) = std::env::var_os(CI_SETUP_VAR) else {
        return true;
    };
    let dir = PathBuf::from(dir);
    let status = dir.join("status");
    let started = Instant::now();
    let mut said = false;
    while !status.exists() {
        if !said {
            println!(
                "prepare: waiting for .ci/run's system packages ({})",
                dir.display()
            );
            said = true;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let code = std::fs::read_to_string(&status).unwrap_or_default();
    if said {
        println!(
            "prepare: waited {} for the system packages",
            minutes(started.elapsed())
        );
    }
    if code.trim() == "0" {
        return true;
    }
    let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(20).collect();
    println!(
        "prepare: the system packages failed (exit {}); the last lines of {}:",
        code.trim(),
        dir.join("log").display()
    );
    for line in tail.into_iter().rev() {
        println!("  {line}");
    }
    false
}

/// The whole suite: format, one build that also lints, every crate's tests, the real-model
/// tests, the embedder's tests, the doctests, every conformance area.
pub fn test() -> Result<ExitCode> {
    let started = Instant::now();
    disk::report("start");
    let driver = clippy_driver()?;
    let _ = STEP_ENV.set(vec![
        (
            "RUSTC_WORKSPACE_WRAPPER".into(),
            driver.to_string_lossy().into_owned(),
        ),
        ("CLIPPY_ARGS".into(), CLIPPY_ARGS.into()),
    ]);

    // Everything from outside, started now and waited for where first needed.
    let npm = Background::start("npm's packages", || {
        pyodide::install_for_tests();
        mcp_servers::install_for_tests();
    });
    let out = crate::real_model_dir();
    let model = Background::start("the real model server", move || real_model::start(&out));
    let embedder = Background::start("the embedder's files", search_eval::install_embedder);

    let mut steps = Steps::default();
    steps.run("format", || {
        crate::cargo(&["fmt", "--all", "--", "--check"])
    })?;
    // The lints run inside this build (see the module doc), on every target `--all-targets`
    // names, as `cargo clippy --workspace --all-targets -- -D warnings` did.
    let built = steps.run("build and lints", || {
        crate::cargo(&[
            "test",
            "--workspace",
            "--all-targets",
            "--locked",
            "--no-run",
        ])
    })?;
    let t = Instant::now();
    npm.join()?;
    let system = system_packages();
    if !system {
        steps.record("system packages", false, t.elapsed());
    }
    if built {
        steps.run("tests", || {
            crate::cargo(&["test", "--workspace", "--all-targets", "--locked"])
        })?;
        let server = model.join()?;
        steps.run("real-model", || crate::real_model_tests(server))?;
        let dir = embedder.join()?;
        steps.run("embedder", || search_eval::embedder_tests(dir))?;
        steps.run("doctests", || {
            crate::cargo(&["test", "--workspace", "--doc", "--locked"])
        })?;
    } else {
        println!(
            "the build failed: the tests, real-model, embedder and doctests steps did not run"
        );
        for name in ["tests", "real-model", "embedder", "doctests"] {
            steps.record(name, false, Duration::ZERO);
        }
    }
    steps.run("conformance", || {
        println!("$ cargo xtask conformance");
        Ok(crate::conformance(crate::ConformanceArgs {
            action: None,
            area: None,
            cases: None,
            verbose: true,
            strict: true,
        })? == ExitCode::SUCCESS)
    })?;
    println!("step times: {}", steps.summary(started.elapsed()));
    let failed = steps.failed();
    if failed.is_empty() {
        println!("test suite: all steps passed");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("test suite: failed steps: {}", failed.join(", "));
        Ok(ExitCode::FAILURE)
    }
}
