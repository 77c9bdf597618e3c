//! grep over a large real tree (the cargo registry's sources, or `HARNESS_FS_BENCH_TREE`),
//! through the host backend and the view, beside `rg` on the same tree and pattern.
//!
//! `cargo bench -p harness-fs --bench grep`. `rg` runs as
//! `rg --no-config --hidden -g '!.git' -n PATTERN TREE` (ignore files honoured, hidden files
//! searched, `.git` skipped: what our grep does) and is skipped if absent.
//!
//! `HARNESS_FS_BENCH_SECS` sets criterion's measurement time. `HARNESS_FS_BENCH_ALTERNATE=N`
//! instead runs the two N times each, alternately (so a change in the machine's load falls on
//! both), and prints each one's median wall time and median CPU time (user + system, from
//! `/proc/self/stat`: our threads, and the waited-for `rg`).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
#![allow(
    clippy::print_stderr,
    reason = "a benchmark: the figures are its output"
)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use harness_fs::tools::{self, GrepOptions};
use harness_fs::{Access, HostBackend, HostOptions, Level, View};

const PATTERN: &str = r"unsafe\s+fn\s+\w+";

fn tree() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("HARNESS_FS_BENCH_TREE") {
        return Some(PathBuf::from(p));
    }
    let home = std::env::var("CARGO_HOME")
        .map(PathBuf::from)
        .ok()
        .or_else(|| {
            std::env::var("HOME")
                .ok()
                .map(|h| PathBuf::from(h).join(".cargo"))
        })?;
    let p = home.join("registry").join("src");
    p.is_dir().then_some(p)
}

/// CPU seconds (user + system) of this process and of its waited-for children.
fn cpu() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which ends at the last ')'): state is field 3, utime 14.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    let at = |i: usize| f.get(i - 3).copied().unwrap_or(0.0) / 100.0;
    (at(14) + at(15), at(16) + at(17))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs `ours` and `theirs` `rounds` times each, alternately; prints the medians.
fn alternate(rounds: usize, ours: impl Fn() -> usize, theirs: impl Fn() -> usize) {
    let (mut wall, mut cpus) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    for _ in 0..rounds {
        for (i, run) in [&ours as &dyn Fn() -> usize, &theirs]
            .into_iter()
            .enumerate()
        {
            let (c0, t0) = (cpu(), Instant::now());
            std::hint::black_box(run());
            let (elapsed, c1) = (t0.elapsed().as_secs_f64(), cpu());
            wall[i].push(elapsed * 1e3);
            cpus[i].push(if i == 0 { c1.0 - c0.0 } else { c1.1 - c0.1 } * 1e3);
        }
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let [w0, w1] = wall.map(median);
    let [c0, c1] = cpus.map(median);
    eprintln!(
        "alternate x{rounds}: harness-fs {w0:.1} ms (cpu {c0:.0} ms), rg {w1:.1} ms (cpu {c1:.0} ms), ratio {:.3}; load {}",
        w0 / w1,
        load.trim()
    );
}

fn bench(c: &mut Criterion) {
    let Some(root) = tree() else {
        eprintln!("no tree to search: set HARNESS_FS_BENCH_TREE");
        return;
    };
    let locks = std::env::temp_dir().join("harness-fs-bench-locks");
    let backend = HostBackend::open(
        &root,
        HostOptions {
            lock_dir: Some(locks),
            ..HostOptions::default()
        },
    )
    .unwrap();
    let view = View::new(Arc::new(backend), Access::new().grant("/", Level::Ro));
    let opts = GrepOptions {
        limit: Some(usize::MAX),
        ..GrepOptions::default()
    };
    let ours_run = || {
        tools::grep(&view, "/", PATTERN, &opts)
            .unwrap()
            .matches
            .len()
    };
    let found = tools::grep(&view, "/", PATTERN, &opts).unwrap().matches;
    let ours = found.len();
    let rg = Command::new("rg")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let run = || {
        Command::new("rg")
            .args(["--no-config", "--hidden", "-g", "!.git", "-n", PATTERN])
            .arg(&root)
            .output()
            .unwrap()
    };
    if rg {
        // The same matches, not just as many: (path below the tree, line number) of each.
        let out = String::from_utf8_lossy(&run().stdout).into_owned();
        let prefix = format!("{}/", root.display());
        let mut theirs: Vec<(String, u64)> = out
            .lines()
            .filter_map(|l| {
                let rest = l.strip_prefix(&prefix)?;
                let (path, rest) = rest.split_once(':')?;
                let (line, _) = rest.split_once(':')?;
                Some((format!("/{path}"), line.parse().ok()?))
            })
            .collect();
        theirs.sort();
        let mut mine: Vec<(String, u64)> =
            found.iter().map(|m| (m.path.to_string(), m.line)).collect();
        mine.sort();
        eprintln!(
            "matches: harness-fs {ours}, rg {} ({})",
            theirs.len(),
            if mine == theirs {
                "the same"
            } else {
                "DIFFERENT"
            }
        );
        if let Some(rounds) = std::env::var("HARNESS_FS_BENCH_ALTERNATE")
            .ok()
            .and_then(|s| s.parse().ok())
        {
            alternate(rounds, ours_run, || run().stdout.len());
            return;
        }
    }
    let mut group = c.benchmark_group("grep");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(
            std::env::var("HARNESS_FS_BENCH_SECS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(8),
        ));
    group.bench_function("harness-fs", |b| b.iter(ours_run));
    if rg {
        group.bench_function("rg", |b| b.iter(|| run().stdout.len()));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
