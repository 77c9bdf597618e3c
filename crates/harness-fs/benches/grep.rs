//! grep over a large real tree (the cargo registry's sources, or `HARNESS_FS_BENCH_TREE`),
//! through the host backend and the view, beside `rg` on the same tree and pattern.
//!
//! `cargo bench -p harness-fs --bench grep`. `rg` runs as
//! `rg --no-config --hidden -g '!.git' -n PATTERN TREE` (ignore files honoured, hidden files
//! searched, `.git` skipped: what our grep does) and is skipped if absent.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

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
    let ours = tools::grep(&view, "/", PATTERN, &opts)
        .unwrap()
        .matches
        .len();
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
    group.bench_function("harness-fs", |b| {
        b.iter(|| {
            tools::grep(&view, "/", PATTERN, &opts)
                .unwrap()
                .matches
                .len()
        })
    });
    let rg = Command::new("rg")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if rg {
        let run = || {
            Command::new("rg")
                .args(["--no-config", "--hidden", "-g", "!.git", "-n", PATTERN])
                .arg(&root)
                .output()
                .unwrap()
        };
        let theirs = String::from_utf8_lossy(&run().stdout).lines().count();
        eprintln!("matches: harness-fs {ours}, rg {theirs}");
        group.bench_function("rg", |b| b.iter(|| run().stdout.len()));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
