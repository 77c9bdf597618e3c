//! Validates the whole spec before the crate that embeds it is compiled: a broken spec fails the
//! build naming the file, the JSON pointer and what is wrong.

#![allow(
    clippy::print_stderr,
    clippy::print_stdout,
    reason = "a build script speaks to cargo on stdout and to the person on stderr"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[path = "src/validate.rs"]
#[allow(dead_code)]
mod validate;

fn collect(dir: &Path, root: &Path, out: &mut BTreeMap<String, Vec<u8>>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        if entry.file_type()?.is_dir() {
            collect(&path, root, out)?;
        } else {
            let rel = path
                .strip_prefix(root)
                .map_err(std::io::Error::other)?
                .to_string_lossy()
                .replace('\\', "/");
            out.insert(rel, std::fs::read(&path)?);
        }
    }
    Ok(())
}

fn main() {
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into()));
    let spec = manifest.join("../../spec");
    println!("cargo::rerun-if-changed={}", spec.display());
    println!("cargo::rerun-if-changed=src/validate.rs");
    let mut files = BTreeMap::new();
    if let Err(e) = collect(&spec, &spec, &mut files) {
        eprintln!("error: cannot read the spec at {}: {e}", spec.display());
        std::process::exit(1);
    }
    let report = validate::validate(&files);
    for note in &report.notes {
        println!("cargo::warning={note}");
    }
    if !report.problems.is_empty() {
        eprintln!(
            "error: the spec is invalid ({} problems):",
            report.problems.len()
        );
        for p in &report.problems {
            eprintln!("  {p}");
        }
        std::process::exit(1);
    }
}
