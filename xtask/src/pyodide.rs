//! Pyodide for the server's tests: npm's `pyodide` 314.0.7, fetched once by npm's own client
//! (`npm pack`), checked against its pinned sha512, unpacked into a cache outside the clone
//! (`~/.cache/llembas-test/pyodide-314.0.7`, or the folder `LLEMBAS_TEST_PYODIDE` names). The
//! server's `python` browser test finds it there (through `LLEMBAS_TEST_PYODIDE`, else that
//! cache folder) and says it was skipped when neither holds it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context as _, Result, bail};
use sha2::{Digest as _, Sha512};

/// The version the server serves (`/pyodide/314.0.7/`).
pub const VERSION: &str = "314.0.7";

/// The npm registry's integrity of `pyodide-314.0.7.tgz`.
pub const INTEGRITY: &str = "sha512-0YvXxEhfEdpLfb/XkM2BFAeMROq0iMUX2bzzH9pOttyMcWkwq+HbE5uyuGD82LN7y2q+SNvi/6V5JEsOlD2R1A==";

/// The variable naming an unpacked Pyodide folder (one holding `pyodide.mjs`).
pub const DIR_VAR: &str = "LLEMBAS_TEST_PYODIDE";

/// Installs Pyodide for the tests and says where, or why not (the test then says it skipped).
pub fn install_for_tests() {
    match install() {
        Ok(dir) => println!("pyodide: {VERSION} in {}", dir.display()),
        Err(e) => println!("pyodide: not installed, its browser test will skip: {e:#}"),
    }
}

fn present(dir: &Path) -> bool {
    [
        "pyodide.mjs",
        "pyodide.asm.wasm",
        "pyodide.asm.mjs",
        "python_stdlib.zip",
        "pyodide-lock.json",
    ]
    .iter()
    .all(|f| dir.join(f).is_file())
}

/// The standard base64 of `bytes` (with padding), as npm's integrity strings are written.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ABC[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The unpacked folder, installed once.
pub fn install() -> Result<PathBuf> {
    if let Ok(dir) = std::env::var(DIR_VAR) {
        let dir = PathBuf::from(dir);
        if !present(&dir) {
            bail!("{DIR_VAR}={} lacks Pyodide's files", dir.display());
        }
        return Ok(dir);
    }
    let base = dirs::cache_dir().context("no cache directory: set HOME or XDG_CACHE_HOME")?;
    let dir = base.join("llembas-test").join(format!("pyodide-{VERSION}"));
    if dir.join(".complete").exists() && present(&dir) {
        return Ok(dir);
    }
    let work = base
        .join("llembas-test")
        .join(format!("pyodide-{VERSION}.partial"));
    for d in [&dir, &work] {
        if d.exists() {
            std::fs::remove_dir_all(d).with_context(|| format!("cannot clear {}", d.display()))?;
        }
    }
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    println!("pyodide: fetching pyodide@{VERSION} with npm (a 6.5 MB download)");
    let out = Command::new("npm")
        .args([
            "pack",
            &format!("pyodide@{VERSION}"),
            "--json",
            "--pack-destination",
        ])
        .arg(&work)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .context("cannot run npm (install Node's npm)")?;
    if !out.status.success() {
        bail!("npm pack pyodide@{VERSION} failed ({})", out.status);
    }
    let tgz = work.join(format!("pyodide-{VERSION}.tgz"));
    let bytes = std::fs::read(&tgz).with_context(|| format!("cannot read {}", tgz.display()))?;
    let got = format!("sha512-{}", base64(&Sha512::digest(&bytes)));
    if got != INTEGRITY {
        bail!(
            "{} is not the pinned pyodide@{VERSION}: its integrity is {got}",
            tgz.display()
        );
    }
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(&tgz)
        .arg("-C")
        .arg(&work)
        .status()
        .context("cannot run tar")?;
    if !status.success() {
        bail!("tar could not unpack {} ({status})", tgz.display());
    }
    let package = work.join("package");
    if !present(&package) {
        bail!("{} lacks Pyodide's files", tgz.display());
    }
    std::fs::rename(&package, &dir)
        .with_context(|| format!("cannot move {} to {}", package.display(), dir.display()))?;
    std::fs::remove_dir_all(&work).with_context(|| format!("cannot clear {}", work.display()))?;
    std::fs::write(dir.join(".complete"), INTEGRITY)
        .with_context(|| format!("cannot mark {} complete", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_is_the_standard_one() {
        assert_eq!(super::base64(b""), "");
        assert_eq!(super::base64(b"f"), "Zg==");
        assert_eq!(super::base64(b"fo"), "Zm8=");
        assert_eq!(super::base64(b"foo"), "Zm9v");
        assert_eq!(super::base64(b"foobar"), "Zm9vYmFy");
    }
}
