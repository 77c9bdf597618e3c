//! The MCP server harness-mcp's tests start: npm's `@modelcontextprotocol/server-everything`
//! 2026.8.31, installed once by npm's own client into a cache outside the clone
//! (`~/.cache/llembas-test/mcp-everything-2026.8.31`, its program at
//! `node_modules/.bin/mcp-server-everything`). The tests find it there (or where
//! `LLEMBAS_TEST_MCP_EVERYTHING` names the program) and say they skipped when it is absent.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context as _, Result, bail};

/// The pinned version.
pub const VERSION: &str = "2026.8.31";

/// The package.
const PACKAGE: &str = "@modelcontextprotocol/server-everything";

/// Installs the server for the tests and says where, or why not (its tests then say they
/// skipped).
pub fn install_for_tests() {
    match install() {
        Ok(bin) => println!("mcp server-everything: {VERSION} at {}", bin.display()),
        Err(e) => {
            println!("mcp server-everything: not installed, harness-mcp's tests will skip: {e:#}")
        }
    }
}

/// The installed program, installed once.
pub fn install() -> Result<PathBuf> {
    let base = dirs::cache_dir().context("no cache directory: set HOME or XDG_CACHE_HOME")?;
    let dir = base
        .join("llembas-test")
        .join(format!("mcp-everything-{VERSION}"));
    let bin = dir.join("node_modules/.bin/mcp-server-everything");
    if bin.exists() {
        return Ok(bin);
    }
    let work = base
        .join("llembas-test")
        .join(format!("mcp-everything-{VERSION}.partial"));
    if work.exists() {
        std::fs::remove_dir_all(&work)
            .with_context(|| format!("cannot clear {}", work.display()))?;
    }
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    std::fs::write(work.join("package.json"), "{\"private\": true}\n")
        .with_context(|| format!("cannot write {}", work.display()))?;
    println!("mcp server-everything: installing {PACKAGE}@{VERSION} with npm");
    let status = Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            "--save-exact",
            &format!("{PACKAGE}@{VERSION}"),
        ])
        .current_dir(&work)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .context("cannot run npm (install Node's npm)")?;
    if !status.success() {
        bail!("npm install {PACKAGE}@{VERSION} failed ({status})");
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("cannot clear {}", dir.display()))?;
    }
    std::fs::rename(&work, &dir)
        .with_context(|| format!("cannot move {} to {}", work.display(), dir.display()))?;
    if !bin.exists() {
        bail!(
            "npm installed {PACKAGE}@{VERSION} without {}",
            bin.display()
        );
    }
    Ok(bin)
}
