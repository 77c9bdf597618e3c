//! The host-directory backend: a directory of the host seen as `/`.
//!
//! - **One writer per root.** `open` takes an exclusive OS lock (a locked file in a lock
//!   directory shared by every backend, plus a registry of the roots this process holds), kept
//!   until `close`; a second open of the same root, of one containing it or of one inside it is
//!   refused, from this process or another.
//! - **One path, one file.** Paths are walked one component at a time from the root's
//!   descriptor with `openat(O_NOFOLLOW)`, never by a path string, so a directory swapped for a
//!   link between a check and an open cannot lead outside. Only directories and regular files
//!   with one link, on the root's file system, under a portable name that is not the backend's
//!   own, are seen; everything else is invisible (absent to read, list and search; `Access
//!   denied` to create over).
//! - **Atomic.** A write goes to a flushed temporary file beside its target, gets the target's
//!   permissions and owner, and is renamed over it (only when the user could write the target
//!   in place: a file without write permission is refused with the system's own error); a create is published with no-replace, so
//!   it never replaces a file that appeared meanwhile. Mutations apply one at a time, in call
//!   order.
//! - **Bounds.** `max_file_bytes` and `max_scan_entries`: a directory over the bound lists as
//!   empty and truncated, a scan stops at it.
//!
//! It is a convenience for a trusted directory, not a security boundary against a process that
//! writes the root at the same time.

mod lock;
mod scan;

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, Stat};
use rustix::io::Errno;

use super::{
    Backend, DirEntry, Expect, Kind, Listing, Meta, PathSink, Probe, ScanEnd, ScanFilter, ScanSink,
    TrashEntry,
};
use crate::error::{Error, Result};
use crate::path::{VPath, is_portable_name, is_reserved_name};

use lock::{RootLock, lock_unpoisoned, take_root_lock};
pub use lock::{default_lock_dir, user_lock_dir};

const TRASH_DIR: &str = ".llembas-trash";
const TMP_PREFIX: &str = ".llembas-tmp-";

/// How a host backend is opened.
#[derive(Debug, Clone)]
pub struct HostOptions {
    /// A file over this many bytes cannot be read, written or edited; search skips it.
    pub max_file_bytes: u64,
    /// A directory with more entries than this lists as empty and truncated.
    pub max_scan_entries: usize,
    /// Where the root locks live; every backend that shares it excludes the others. Default:
    /// the user's own, [`default_lock_dir`].
    pub lock_dir: Option<PathBuf>,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            max_file_bytes: super::DEFAULT_MAX_FILE_BYTES,
            max_scan_entries: super::DEFAULT_MAX_SCAN_ENTRIES,
            lock_dir: None,
        }
    }
}

#[derive(Debug)]
struct Life {
    closed: bool,
    running: usize,
    lock: Option<RootLock>,
}

/// A host directory seen as `/` (see the module documentation for its rules).
#[derive(Debug)]
pub struct HostBackend {
    root: PathBuf,
    root_fd: OwnedFd,
    /// The root's file system, the only one shown; `None` for the whole disk, every file
    /// system.
    root_dev: Option<u64>,
    opts: HostOptions,
    life: Mutex<Life>,
    mutation: Mutex<()>,
    counter: AtomicU64,
}

/// Keeps the backend's lock while an operation runs.
struct Running<'a>(&'a HostBackend);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut life = lock_unpoisoned(&self.0.life);
        life.running -= 1;
        if life.closed && life.running == 0 {
            life.lock.take();
        }
    }
}

fn errno_io(path: &VPath, e: Errno) -> Error {
    Error::io(path, std::io::Error::from(e))
}

/// Removes `name` in `dir` for good: a file or link unlinked, a directory emptied first (never
/// following a link). Gone already is done.
fn remove_tree(dir: &OwnedFd, name: &str, shown: &VPath) -> Result<()> {
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => return Ok(()),
        Err(Errno::ISDIR) | Err(Errno::PERM) => {}
        Err(e) => return Err(errno_io(shown, e)),
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, Mode::empty()).map_err(|e| errno_io(shown, e))?;
    let names: Vec<String> = {
        let dup = rustix::io::fcntl_dupfd_cloexec(&fd, 0).map_err(|e| errno_io(shown, e))?;
        let mut entries = rustix::fs::Dir::new(dup).map_err(|e| errno_io(shown, e))?;
        let mut names = Vec::new();
        while let Some(entry) = entries.read() {
            let entry = entry.map_err(|e| errno_io(shown, e))?;
            let raw = entry.file_name().to_bytes();
            if raw != b"." && raw != b".." {
                names.push(String::from_utf8_lossy(raw).into_owned());
            }
        }
        names
    };
    for child in &names {
        remove_tree(&fd, child, &shown.join(child))?;
    }
    rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR).map_err(|e| errno_io(shown, e))
}

fn is_visible_name(name: &str) -> bool {
    is_portable_name(name) && !is_reserved_name(name)
}

impl HostBackend {
    /// Opens `root` (an existing directory), taking its lock.
    pub fn open(root: impl AsRef<Path>, opts: HostOptions) -> Result<Self> {
        let given = root.as_ref();
        let root = std::fs::canonicalize(given)
            .map_err(|e| Error::BadRoot(format!("{}: {e}", given.display())))?;
        let root_fd = rustix::fs::open(
            &root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::BadRoot(format!("{}: {}", root.display(), std::io::Error::from(e))))?;
        let st = rustix::fs::fstat(&root_fd)
            .map_err(|e| Error::BadRoot(format!("{}: {e}", root.display())))?;
        let lock_dir = match &opts.lock_dir {
            Some(d) => d.clone(),
            None => default_lock_dir()?,
        };
        if lock_dir.starts_with(&root) {
            return Err(Error::BadRoot(format!(
                "{}: the lock directory is inside the root",
                root.display()
            )));
        }
        let lock = take_root_lock(&root, &lock_dir)?;
        Ok(HostBackend {
            root,
            root_fd,
            root_dev: Some(st.st_dev as u64),
            opts,
            life: Mutex::new(Life {
                closed: false,
                running: 0,
                lock: Some(lock),
            }),
            mutation: Mutex::new(()),
            counter: AtomicU64::new(0),
        })
    }

    /// The whole disk of this machine, `/` seen as `/`: the backend for paths outside every
    /// directory a session works in. Its rules are the host backend's (one path to a file, no
    /// link followed, atomic writes, portable names) but for two: it takes no lock (it would
    /// contain every other root) and it shows every file system, not only the root's.
    pub fn open_disk(opts: HostOptions) -> Result<Self> {
        let root = PathBuf::from("/");
        let root_fd = rustix::fs::open(
            &root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::BadRoot(format!("/: {}", std::io::Error::from(e))))?;
        Ok(HostBackend {
            root,
            root_fd,
            root_dev: None,
            opts,
            life: Mutex::new(Life {
                closed: false,
                running: 0,
                lock: None,
            }),
            mutation: Mutex::new(()),
            counter: AtomicU64::new(0),
        })
    }

    /// The host directory seen as `/`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn enter(&self) -> Result<Running<'_>> {
        let mut life = lock_unpoisoned(&self.life);
        if life.closed {
            return Err(Error::Closed);
        }
        life.running += 1;
        Ok(Running(self))
    }

    #[allow(clippy::unnecessary_cast)]
    fn classify(&self, st: &Stat) -> Option<Kind> {
        if self.root_dev.is_some_and(|dev| st.st_dev as u64 != dev) {
            return None;
        }
        match FileType::from_raw_mode(st.st_mode as _) {
            FileType::Directory => Some(Kind::Dir),
            FileType::RegularFile if st.st_nlink as u64 == 1 => Some(Kind::File),
            _ => None,
        }
    }

    fn dup_root(&self) -> Result<OwnedFd> {
        rustix::fs::openat(
            &self.root_fd,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| errno_io(&VPath::root(), e))
    }

    /// Opens the child directory `name` of `dir` without following a link.
    fn open_child_dir(
        &self,
        dir: impl AsFd,
        name: &str,
        here: &VPath,
        full: &VPath,
    ) -> Result<OwnedFd> {
        if !is_visible_name(name) {
            return Err(Error::NotFound(full.clone()));
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match rustix::fs::openat(dir.as_fd(), name, flags, Mode::empty()) {
            Ok(fd) => {
                let st = rustix::fs::fstat(&fd).map_err(|e| errno_io(here, e))?;
                if self.classify(&st) == Some(Kind::Dir) {
                    Ok(fd)
                } else {
                    Err(Error::NotFound(full.clone()))
                }
            }
            Err(Errno::NOENT) => Err(Error::NotFound(full.clone())),
            Err(Errno::NOTDIR) | Err(Errno::LOOP) => {
                match rustix::fs::statat(dir.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) if self.classify(&st) == Some(Kind::File) => {
                        Err(Error::NotADirectory(here.clone()))
                    }
                    _ => Err(Error::NotFound(full.clone())),
                }
            }
            Err(e) => Err(errno_io(here, e)),
        }
    }

    /// Opens the directory at `path`, one component at a time.
    fn open_dir(&self, path: &VPath) -> Result<OwnedFd> {
        let mut fd = self.dup_root()?;
        let mut here = VPath::root();
        for name in path.components() {
            here = here.join(name);
            fd = self.open_child_dir(&fd, name, &here, path)?;
        }
        Ok(fd)
    }

    /// The parent directory's descriptor and the last name of `path` (not the root).
    fn open_parent<'p>(&self, path: &'p VPath) -> Result<(OwnedFd, &'p str)> {
        let parent = path
            .parent()
            .ok_or_else(|| Error::AccessDenied(path.clone()))?;
        let fd = self.open_dir(&parent).map_err(|e| match e {
            Error::NotFound(_) => Error::NotFound(path.clone()),
            other => other,
        })?;
        Ok((fd, path.name()))
    }

    /// What stands at `name` in `dir`: `Ok(None)` when nothing, `Ok(Some((kind, stat)))` when a
    /// visible entry, `Err(AccessDenied)` when an invisible one.
    fn occupant(&self, dir: &OwnedFd, name: &str, path: &VPath) -> Result<Option<(Kind, Stat)>> {
        if !is_visible_name(name) {
            return Err(Error::AccessDenied(path.clone()));
        }
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => match self.classify(&st) {
                Some(kind) => Ok(Some((kind, st))),
                None => Err(Error::AccessDenied(path.clone())),
            },
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(errno_io(path, e)),
        }
    }

    /// Opens a visible regular file `name` of `dir` and checks it is the one `expected` (if
    /// given) described.
    fn open_file(&self, dir: impl AsFd, name: &str, path: &VPath) -> Result<(File, Stat)> {
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
        let fd = match rustix::fs::openat(dir.as_fd(), name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) | Err(Errno::LOOP) | Err(Errno::NXIO) => {
                return Err(Error::NotFound(path.clone()));
            }
            Err(e) => return Err(errno_io(path, e)),
        };
        let st = rustix::fs::fstat(&fd).map_err(|e| errno_io(path, e))?;
        match self.classify(&st) {
            Some(Kind::File) => Ok((File::from(fd), st)),
            Some(Kind::Dir) => Err(Error::IsADirectory(path.clone())),
            None => Err(Error::NotFound(path.clone())),
        }
    }

    fn read_all(&self, mut file: File, path: &VPath, buf: &mut Vec<u8>) -> Result<()> {
        buf.clear();
        let limit = self.opts.max_file_bytes;
        (&mut file)
            .take(limit.saturating_add(1))
            .read_to_end(buf)
            .map_err(|e| Error::io(path, e))?;
        if buf.len() as u64 > limit {
            return Err(Error::TooLarge {
                path: path.clone(),
                limit,
            });
        }
        Ok(())
    }

    fn read_in(&self, dir: &OwnedFd, name: &str, path: &VPath) -> Result<Vec<u8>> {
        let (file, st) = self.open_file(dir, name, path)?;
        if st.st_size as u64 > self.opts.max_file_bytes {
            return Err(Error::TooLarge {
                path: path.clone(),
                limit: self.opts.max_file_bytes,
            });
        }
        let mut buf = Vec::with_capacity(st.st_size as usize);
        self.read_all(file, path, &mut buf)?;
        Ok(buf)
    }

    fn tmp_name(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        format!("{TMP_PREFIX}{}-{n}", std::process::id())
    }

    /// Publishes `tmp` as `name` in `dir`: over the existing file, or with no-replace.
    fn publish(
        &self,
        dir: &OwnedFd,
        tmp: &str,
        name: &str,
        replace: bool,
        path: &VPath,
    ) -> Result<()> {
        if replace {
            return rustix::fs::renameat(dir, tmp, dir, name).map_err(|e| errno_io(path, e));
        }
        match rustix::fs::renameat_with(dir, tmp, dir, name, RenameFlags::NOREPLACE) {
            Ok(()) => Ok(()),
            Err(Errno::EXIST) => Err(Error::AlreadyExists(path.clone())),
            Err(Errno::INVAL) | Err(Errno::NOSYS) | Err(Errno::NOTSUP) => {
                // No renameat2 here: a hard link is a no-replace publication too.
                match rustix::fs::linkat(dir, tmp, dir, name, AtFlags::empty()) {
                    Ok(()) => {
                        let _ = rustix::fs::unlinkat(dir, tmp, AtFlags::empty());
                        Ok(())
                    }
                    Err(Errno::EXIST) => Err(Error::AlreadyExists(path.clone())),
                    Err(e) => Err(errno_io(path, e)),
                }
            }
            Err(e) => Err(errno_io(path, e)),
        }
    }

    fn write_locked(&self, path: &VPath, data: &[u8], expect: &Expect) -> Result<()> {
        let (dir, name) = self.open_parent(path)?;
        let existing = self.occupant(&dir, name, path)?;
        let limit = self.opts.max_file_bytes;
        let existing = match existing {
            Some((Kind::Dir, _)) => return Err(Error::IsADirectory(path.clone())),
            Some((Kind::File, st)) => {
                if st.st_size as u64 > limit {
                    return Err(Error::TooLarge {
                        path: path.clone(),
                        limit,
                    });
                }
                Some(st)
            }
            None => None,
        };
        if existing.is_some() {
            // The rename below would replace a file the user could not write in place (a 0444
            // file in a writable directory): refuse it as the shell's `>` would, with the file
            // system's own error.
            rustix::fs::accessat(
                &dir,
                name,
                rustix::fs::Access::WRITE_OK,
                AtFlags::EACCESS | AtFlags::SYMLINK_NOFOLLOW,
            )
            .map_err(|e| errno_io(path, e))?;
        }
        match (expect, &existing) {
            (Expect::Absent, Some(_)) => return Err(Error::AlreadyExists(path.clone())),
            (Expect::Version(_), None) => return Err(Error::Stale(path.clone())),
            (Expect::Version(v), Some(_)) => {
                let current = self.read_in(&dir, name, path)?;
                if crate::content_hash(&current) != *v {
                    return Err(Error::Stale(path.clone()));
                }
            }
            _ => {}
        }
        if data.len() as u64 > limit {
            return Err(Error::TooLarge {
                path: path.clone(),
                limit,
            });
        }
        let tmp = self.tmp_name();
        let result = (|| {
            let flags =
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = rustix::fs::openat(&dir, tmp.as_str(), flags, Mode::from_raw_mode(0o600))
                .map_err(|e| errno_io(path, e))?;
            let mode = existing
                .as_ref()
                .map(|st| st.st_mode & 0o7777)
                .unwrap_or(0o644);
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode as _))
                .map_err(|e| errno_io(path, e))?;
            if let Some(st) = &existing {
                rustix::fs::fchown(
                    &fd,
                    Some(rustix::fs::Uid::from_raw(st.st_uid)),
                    Some(rustix::fs::Gid::from_raw(st.st_gid)),
                )
                .map_err(|e| {
                    Error::io(
                        path,
                        format!("cannot keep the file's owner: {}", std::io::Error::from(e)),
                    )
                })?;
            }
            let mut file = File::from(fd);
            file.write_all(data).map_err(|e| Error::io(path, e))?;
            file.sync_all().map_err(|e| Error::io(path, e))?;
            drop(file);
            self.publish(&dir, &tmp, name, existing.is_some(), path)
        })();
        if result.is_err() {
            let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), AtFlags::empty());
        }
        result?;
        let _ = rustix::fs::fsync(&dir);
        Ok(())
    }

    fn trash_dir(&self) -> Result<OwnedFd> {
        match rustix::fs::mkdirat(&self.root_fd, TRASH_DIR, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(errno_io(&VPath::root(), e)),
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        rustix::fs::openat(&self.root_fd, TRASH_DIR, flags, Mode::empty())
            .map_err(|e| errno_io(&VPath::root(), e))
    }
}

impl Backend for HostBackend {
    fn stat(&self, path: &VPath) -> Result<Option<Meta>> {
        let _run = self.enter()?;
        if path.is_root() {
            return Ok(Some(Meta {
                kind: Kind::Dir,
                size: 0,
            }));
        }
        let (dir, name) = match self.open_parent(path) {
            Ok(x) => x,
            Err(Error::NotFound(_)) | Err(Error::NotADirectory(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        match self.occupant(&dir, name, path) {
            Ok(Some((kind, st))) => Ok(Some(Meta {
                kind,
                size: if kind == Kind::File {
                    st.st_size as u64
                } else {
                    0
                },
            })),
            Ok(None) | Err(Error::AccessDenied(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn list(&self, path: &VPath) -> Result<Listing> {
        let _run = self.enter()?;
        let fd = self.open_dir(path)?;
        let (entries, dir) = self.raw_entries(fd, path)?;
        let Some(entries) = entries else {
            return Ok(Listing {
                entries: Vec::new(),
                truncated: true,
            });
        };
        let mut out: Vec<DirEntry> = entries
            .into_iter()
            .filter_map(|(name, ft)| {
                self.entry_kind(&dir, &name, ft)
                    .map(|kind| DirEntry { name, kind })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Listing {
            entries: out,
            truncated: false,
        })
    }

    fn read(&self, path: &VPath) -> Result<Vec<u8>> {
        let _run = self.enter()?;
        if path.is_root() {
            return Err(Error::IsADirectory(path.clone()));
        }
        let (dir, name) = self.open_parent(path)?;
        match self.occupant(&dir, name, path) {
            Ok(Some((Kind::Dir, _))) => Err(Error::IsADirectory(path.clone())),
            Ok(Some((Kind::File, _))) => self.read_in(&dir, name, path),
            Ok(None) | Err(Error::AccessDenied(_)) => Err(Error::NotFound(path.clone())),
            Err(e) => Err(e),
        }
    }

    fn write(&self, path: &VPath, data: &[u8], expect: &Expect) -> Result<()> {
        let _run = self.enter()?;
        let _order = lock_unpoisoned(&self.mutation);
        self.write_locked(path, data, expect)
    }

    fn mkdir(&self, path: &VPath) -> Result<()> {
        let _run = self.enter()?;
        let _order = lock_unpoisoned(&self.mutation);
        if path.is_root() {
            return Err(Error::AlreadyExists(path.clone()));
        }
        let (dir, name) = self.open_parent(path)?;
        if self.occupant(&dir, name, path)?.is_some() {
            return Err(Error::AlreadyExists(path.clone()));
        }
        match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o755)) {
            Ok(()) => Ok(()),
            Err(Errno::EXIST) => match self.occupant(&dir, name, path)? {
                Some(_) => Err(Error::AlreadyExists(path.clone())),
                None => Err(Error::AccessDenied(path.clone())),
            },
            Err(e) => Err(errno_io(path, e)),
        }
    }

    fn rename(&self, from: &VPath, to: &VPath) -> Result<()> {
        let _run = self.enter()?;
        let _order = lock_unpoisoned(&self.mutation);
        if to.starts_with(from) {
            return Err(Error::Invalid(format!(
                "cannot move {from} into itself ({to})"
            )));
        }
        let (src_dir, src_name) = self.open_parent(from)?;
        if self
            .occupant(&src_dir, src_name, from)
            .map_err(|_| Error::NotFound(from.clone()))?
            .is_none()
        {
            return Err(Error::NotFound(from.clone()));
        }
        let (dst_dir, dst_name) = self.open_parent(to)?;
        if self.occupant(&dst_dir, dst_name, to)?.is_some() {
            return Err(Error::AlreadyExists(to.clone()));
        }
        match rustix::fs::renameat_with(
            &src_dir,
            src_name,
            &dst_dir,
            dst_name,
            RenameFlags::NOREPLACE,
        ) {
            Ok(()) => Ok(()),
            Err(Errno::EXIST) => Err(Error::AlreadyExists(to.clone())),
            Err(Errno::INVAL) | Err(Errno::NOSYS) | Err(Errno::NOTSUP) => {
                rustix::fs::renameat(&src_dir, src_name, &dst_dir, dst_name)
                    .map_err(|e| errno_io(from, e))
            }
            Err(e) => Err(errno_io(from, e)),
        }
    }

    fn trash(&self, path: &VPath) -> Result<String> {
        let _run = self.enter()?;
        let _order = lock_unpoisoned(&self.mutation);
        let (dir, name) = self.open_parent(path)?;
        if self
            .occupant(&dir, name, path)
            .map_err(|_| Error::NotFound(path.clone()))?
            .is_none()
        {
            return Err(Error::NotFound(path.clone()));
        }
        let trash = self.trash_dir()?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let id = format!("{stamp}-{}", self.counter.fetch_add(1, Ordering::Relaxed));
        let record = format!("{id}.path");
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&trash, record.as_str(), flags, Mode::from_raw_mode(0o600))
            .map_err(|e| errno_io(path, e))?;
        let mut file = File::from(fd);
        file.write_all(path.as_str().as_bytes())
            .map_err(|e| Error::io(path, e))?;
        file.sync_all().map_err(|e| Error::io(path, e))?;
        if let Err(e) =
            rustix::fs::renameat_with(&dir, name, &trash, id.as_str(), RenameFlags::NOREPLACE)
        {
            let _ = rustix::fs::unlinkat(&trash, record.as_str(), AtFlags::empty());
            return Err(errno_io(path, e));
        }
        Ok(id)
    }

    fn restore(&self, id: &str) -> Result<VPath> {
        let _run = self.enter()?;
        let _order = lock_unpoisoned(&self.mutation);
        if !is_visible_name(id) {
            return Err(Error::NotInTrash(id.to_string()));
        }
        let trash = self.trash_dir()?;
        let record = format!("{id}.path");
        let text = match rustix::fs::openat(
            &trash,
            record.as_str(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => {
                let mut s = String::new();
                File::from(fd)
                    .read_to_string(&mut s)
                    .map_err(|e| Error::io(id, e))?;
                s
            }
            Err(_) => return Err(Error::NotInTrash(id.to_string())),
        };
        let path = VPath::parse(&text);
        let (dir, name) = self.open_parent(&path)?;
        if self.occupant(&dir, name, &path)?.is_some() {
            return Err(Error::AlreadyExists(path));
        }
        match rustix::fs::renameat_with(&trash, id, &dir, name, RenameFlags::NOREPLACE) {
            Ok(()) => {}
            Err(Errno::EXIST) => return Err(Error::AlreadyExists(path)),
            Err(e) => return Err(errno_io(&path, e)),
        }
        let _ = rustix::fs::unlinkat(&trash, record.as_str(), AtFlags::empty());
        Ok(path)
    }

    fn purge(&self, id: &str) -> Result<()> {
        let _run = self.enter()?;
        let _order = lock_unpoisoned(&self.mutation);
        if !is_visible_name(id) {
            return Err(Error::NotInTrash(id.to_string()));
        }
        let trash = self.trash_dir()?;
        let record = format!("{id}.path");
        if rustix::fs::statat(&trash, record.as_str(), AtFlags::SYMLINK_NOFOLLOW).is_err() {
            return Err(Error::NotInTrash(id.to_string()));
        }
        remove_tree(&trash, id, &VPath::parse(id))?;
        rustix::fs::unlinkat(&trash, record.as_str(), AtFlags::empty())
            .map_err(|e| errno_io(&VPath::parse(id), e))
    }

    fn trash_list(&self) -> Result<Vec<TrashEntry>> {
        let _run = self.enter()?;
        let trash = self.trash_dir()?;
        let mut dir = rustix::fs::Dir::new(trash).map_err(|e| errno_io(&VPath::root(), e))?;
        let mut out = Vec::new();
        while let Some(Ok(entry)) = dir.read() {
            let name = String::from_utf8_lossy(entry.file_name().to_bytes()).to_string();
            let Some(id) = name.strip_suffix(".path") else {
                continue;
            };
            let Ok(fd) = dir.fd() else { continue };
            let Ok(file) = rustix::fs::openat(
                fd,
                name.as_str(),
                OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) else {
                continue;
            };
            let mut s = String::new();
            if File::from(file).read_to_string(&mut s).is_ok() {
                out.push(TrashEntry {
                    id: id.to_string(),
                    path: VPath::parse(&s),
                });
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    fn scan(
        &self,
        under: &VPath,
        filter: &ScanFilter<'_>,
        probe: Option<&Probe<'_>>,
        sink: &ScanSink<'_>,
    ) -> Result<ScanEnd> {
        self.scan_impl(under, filter, probe, true, sink)
    }

    fn scan_paths(
        &self,
        under: &VPath,
        filter: &ScanFilter<'_>,
        probe: Option<&Probe<'_>>,
        sink: &PathSink<'_>,
    ) -> Result<ScanEnd> {
        self.scan_impl(under, filter, probe, false, &|p, _| sink(p))
    }

    fn max_file_bytes(&self) -> u64 {
        self.opts.max_file_bytes
    }

    fn close(&self) {
        let mut life = lock_unpoisoned(&self.life);
        life.closed = true;
        if life.running == 0 {
            life.lock.take();
        }
    }
}

impl Drop for HostBackend {
    fn drop(&mut self) {
        self.close();
    }
}
