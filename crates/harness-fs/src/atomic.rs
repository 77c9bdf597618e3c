//! The one door to the disk for a whole-file write on the host ([`write_atomic`]): every store
//! that keeps a file whole (a session's metadata, settings, notes, memory, a search index) goes
//! through it, so a crash or a full disk leaves the old file or the new one, never a torn one.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// Temporary names taken in this process, so two writers of one file never share one.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Writes `data` as the whole of the host file `path`: a temporary file in the same directory
/// (created anew, given the old file's permissions), written and synced, then renamed over the
/// file and the directory synced. A symbolic link is followed first, so the file it names is
/// replaced and the link kept. The directory must exist. Errors name the path at fault.
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    let target = resolve(path)?;
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = target
        .file_name()
        .ok_or_else(|| Error::io(target.display(), "the path names no file"))?
        .to_string_lossy()
        .into_owned();
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let written = write_new(&tmp, &target, data)
        .and_then(|()| std::fs::rename(&tmp, &target).map_err(|e| Error::io(target.display(), e)));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    // The rename is durable once the directory is synced (a directory that cannot be opened
    // for it, as on some file systems, still has the file whole).
    if let Ok(d) = std::fs::File::open(&dir) {
        d.sync_all().map_err(|e| Error::io(dir.display(), e))?;
    }
    Ok(())
}

/// The file a write of `path` replaces: `path` itself, or the file its links lead to.
fn resolve(path: &Path) -> Result<PathBuf> {
    let mut at = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = std::fs::read_link(&at).map_err(|e| Error::io(at.display(), e))?;
                at = match at.parent() {
                    Some(dir) => dir.join(link),
                    None => link,
                };
            }
            _ => return Ok(at),
        }
    }
    Err(Error::io(
        path.display(),
        "too many levels of symbolic links",
    ))
}

fn write_new(tmp: &Path, target: &Path, data: &[u8]) -> Result<()> {
    let err = |e: std::io::Error| Error::io(tmp.display(), e);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(err)?;
    if let Ok(old) = std::fs::metadata(target) {
        f.set_permissions(old.permissions()).map_err(err)?;
    }
    f.write_all(data).map_err(err)?;
    f.sync_all().map_err(err)
}
