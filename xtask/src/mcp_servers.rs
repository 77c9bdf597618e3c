//! The MCP servers harness-mcp's tests start: npm's `@modelcontextprotocol/server-everything`
//! and `@modelcontextprotocol/server-filesystem`, both 2026.8.31, installed once by one
//! `npm install` of npm's own client into a cache outside the clone
//! (`~/.cache/llembas-test/mcp-servers-everything-2026.8.31-filesystem-2026.8.31`, their
//! programs in `node_modules/.bin`). The tests find them there (or where
//! `LLEMBAS_TEST_MCP_EVERYTHING` and `LLEMBAS_TEST_MCP_FILESYSTEM` name the programs) and say
//! they skipped when they are absent.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context as _, Result, bail};

/// The pinned version of the everything server.
pub const EVERYTHING: &str = "2026.8.31";

/// The pinned version of the filesystem server.
pub const FILESYSTEM: &str = "2026.8.31";

/// The packages, pinned, installed together.
fn packages() -> [String; 2] {
    [
        format!("@modelcontextprotocol/server-everything@{EVERYTHING}"),
        format!("@modelcontextprotocol/server-filesystem@{FILESYSTEM}"),
    ]
}

/// The programs the packages install, in `node_modules/.bin`.
const PROGRAMS: [&str; 2] = ["mcp-server-everything", "mcp-server-filesystem"];

/// Installs the servers for the tests and says where, or why not (their tests then say they
/// skipped).
pub fn install_for_tests() {
    match install() {
        Ok(bin) => println!(
            "mcp servers: everything {EVERYTHING}, filesystem {FILESYSTEM} in {}",
            bin.parent().map_or(bin.clone(), PathBuf::from).display()
        ),
        Err(e) => {
            println!("mcp servers: not installed, the tests of MCP servers will skip: {e:#}")
        }
    }
}

/// The installed everything server's program (the filesystem server's beside it), both
/// installed once.
pub fn install() -> Result<PathBuf> {
    let base = dirs::cache_dir().context("no cache directory: set HOME or XDG_CACHE_HOME")?;
    let folder = format!("mcp-servers-everything-{EVERYTHING}-filesystem-{FILESYSTEM}");
    let dir = base.join("llembas-test").join(&folder);
    let bins = PROGRAMS.map(|p| dir.join("node_modules/.bin").join(p));
    let bin = bins[0].clone();
    if bins.iter().all(|b| b.exists()) {
        return Ok(bin);
    }
    let work = base.join("llembas-test").join(format!("{folder}.partial"));
    if work.exists() {
        std::fs::remove_dir_all(&work)
            .with_context(|| format!("cannot clear {}", work.display()))?;
    }
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    std::fs::write(work.join("package.json"), "{\"private\": true}\n")
        .with_context(|| format!("cannot write {}", work.display()))?;
    let packages = packages();
    println!("mcp servers: installing {} with npm", packages.join(" "));
    let status = Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            "--save-exact",
        ])
        .args(&packages)
        .current_dir(&work)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .context("cannot run npm (install Node's npm)")?;
    if !status.success() {
        bail!("npm install {} failed ({status})", packages.join(" "));
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("cannot clear {}", dir.display()))?;
    }
    std::fs::rename(&work, &dir)
        .with_context(|| format!("cannot move {} to {}", work.display(), dir.display()))?;
    if let Some(missing) = bins.iter().find(|b| !b.exists()) {
        bail!(
            "npm installed {} without {}",
            packages.join(" "),
            missing.display()
        );
    }
    Ok(bin)
}
