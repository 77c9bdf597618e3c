//! The disk a test run uses, said at its start and its end: a machine of this kind once had too
//! little free for a clean build, and rustc's "No space left on device" in the middle of a step
//! did not say how much there had been or how much the build had taken.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The build's target folder: `CARGO_TARGET_DIR` when set, else the workspace's `target/`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                crate::workspace_root().join(dir)
            }
        }
        _ => crate::workspace_root().join("target"),
    }
}

/// Prints `disk (WHEN): F GB free on the target's file system; target/ holds T GB`.
pub fn report(when: &str) {
    let target = target_dir();
    let free = free_bytes(&target);
    let held = held_bytes(&target);
    let free = free.map_or_else(|| "an unknown amount".to_string(), gb);
    println!(
        "disk ({when}): {free} free on the file system of {}; it holds {}",
        target.display(),
        gb(held)
    );
}

fn gb(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

/// Free bytes on the file system holding `dir` (or its nearest existing ancestor), by `df`.
fn free_bytes(dir: &Path) -> Option<u64> {
    let existing = dir.ancestors().find(|d| d.exists())?;
    let out = Command::new("df").arg("-Pk").arg(existing).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let line = text.lines().nth(1)?;
    let kb: u64 = line.split_whitespace().nth(3)?.parse().ok()?;
    Some(kb * 1024)
}

/// Bytes the files under `dir` take on disk (allocated blocks, as `du` counts), 0 when absent.
fn held_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += meta.blocks() * 512;
            }
        }
    }
    total
}
