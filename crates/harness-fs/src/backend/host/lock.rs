//! One writer per root: the lock directory, its OS locks and this process's registry of open
//! roots.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rustix::fs::{FileType, Mode};
use rustix::io::Errno;

use crate::error::{Error, Result};

/// The lock directory of backends opened without one: per user, so that one user's locks never
/// lock another out — `$XDG_RUNTIME_DIR/llembas-host-roots` when that variable names a usable
/// directory, else `llembas-host-roots-<uid>` in the system's temporary directory (see
/// [`user_lock_dir`]).
pub fn default_lock_dir() -> Result<PathBuf> {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from);
    user_lock_dir(runtime.as_deref(), &std::env::temp_dir())
}

/// The per-user lock directory for a given runtime directory and temporary directory, created
/// `0700` if absent: `<runtime>/llembas-host-roots` when `runtime` is an absolute directory of
/// this user where that can be made, else `<temp>/llembas-host-roots-<uid>`. A directory found
/// there that another user owns is refused; one of this user's with wider permissions is
/// narrowed to `0700`.
pub fn user_lock_dir(runtime: Option<&Path>, temp: &Path) -> Result<PathBuf> {
    let uid = rustix::process::geteuid().as_raw();
    if let Some(rt) = runtime.filter(|r| r.is_absolute()) {
        let dir = rt.join("llembas-host-roots");
        if let Ok(st) = rustix::fs::stat(rt)
            && FileType::from_raw_mode(st.st_mode) == FileType::Directory
            && st.st_uid == uid
            && private_dir(&dir, uid).is_ok()
        {
            return Ok(dir);
        }
    }
    let dir = temp.join(format!("llembas-host-roots-{uid}"));
    private_dir(&dir, uid)?;
    Ok(dir)
}

/// Makes `dir` a directory of `uid` with mode `0700` (creating it so), refusing one that is not
/// a directory (a link included) or that another user owns.
fn private_dir(dir: &Path, uid: u32) -> Result<()> {
    match rustix::fs::mkdir(dir, Mode::from_raw_mode(0o700)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(Error::io(dir.display(), std::io::Error::from(e))),
    }
    let st = rustix::fs::lstat(dir).map_err(|e| Error::io(dir.display(), e))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return Err(Error::io(
            dir.display(),
            "the lock directory is not a directory",
        ));
    }
    if st.st_uid != uid {
        return Err(Error::io(
            dir.display(),
            format!(
                "the lock directory belongs to user {}, not to this user ({uid})",
                st.st_uid
            ),
        ));
    }
    if st.st_mode & 0o777 != 0o700 {
        rustix::fs::chmod(dir, Mode::from_raw_mode(0o700))
            .map_err(|e| Error::io(dir.display(), e))?;
    }
    Ok(())
}

/// The roots this process holds open.
static OPEN_ROOTS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

pub(super) fn lock_unpoisoned<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn related(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// The held lock of one root: released (file unlocked and removed, registry entry dropped)
/// when dropped.
#[derive(Debug)]
pub(super) struct RootLock {
    root: PathBuf,
    file: Option<File>,
    lock_path: PathBuf,
}

impl Drop for RootLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.lock_path);
        // Closing the file releases the OS lock.
        self.file.take();
        lock_unpoisoned(&OPEN_ROOTS).retain(|r| r != &self.root);
    }
}

pub(super) fn take_root_lock(root: &Path, lock_dir: &Path) -> Result<RootLock> {
    let mut open = lock_unpoisoned(&OPEN_ROOTS);
    if open.iter().any(|r| related(r, root)) {
        return Err(Error::RootInUse(root.display().to_string()));
    }
    std::fs::create_dir_all(lock_dir).map_err(|e| Error::io(lock_dir.display(), e))?;
    // The registry file serialises opens across processes while they look at each other's locks.
    let registry_path = lock_dir.join("registry.lock");
    let registry = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&registry_path)
        .map_err(|e| Error::io(registry_path.display(), e))?;
    registry
        .lock()
        .map_err(|e| Error::io(registry_path.display(), e))?;
    let entries = std::fs::read_dir(lock_dir).map_err(|e| Error::io(lock_dir.display(), e))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension() != Some(OsStr::new("root")) {
            continue;
        }
        let Ok(held) = std::fs::read_to_string(&path) else {
            continue;
        };
        if !related(Path::new(held.trim_end_matches('\n')), root) {
            continue;
        }
        let Ok(file) = File::options().read(true).write(true).open(&path) else {
            continue;
        };
        match file.try_lock() {
            Ok(()) => {
                // Stale: its holder is gone.
                let _ = std::fs::remove_file(&path);
            }
            Err(_) => return Err(Error::RootInUse(root.display().to_string())),
        }
    }
    let digest = crate::content_hash(root.as_os_str().as_bytes());
    let lock_path = lock_dir.join(format!("{digest}.root"));
    let mut file = File::options()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Error::io(lock_path.display(), e))?;
    if file.try_lock().is_err() {
        return Err(Error::RootInUse(root.display().to_string()));
    }
    file.set_len(0)
        .map_err(|e| Error::io(lock_path.display(), e))?;
    file.write_all(root.as_os_str().as_bytes())
        .map_err(|e| Error::io(lock_path.display(), e))?;
    open.push(root.to_path_buf());
    drop(registry);
    Ok(RootLock {
        root: root.to_path_buf(),
        file: Some(file),
        lock_path,
    })
}
