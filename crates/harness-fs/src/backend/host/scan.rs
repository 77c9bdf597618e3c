//! Scans: a directory tree read in parallel, each directory and file opened without following
//! a link, bounded by `max_scan_entries`.

use std::os::fd::OwnedFd;
use std::sync::{Arc, Condvar, Mutex};

use rustix::fs::{AtFlags, FileType};

use super::super::{Kind, Probe, ScanEnd, ScanFilter};
use super::lock::lock_unpoisoned;
use super::{HostBackend, errno_io, is_visible_name};
use crate::error::{Error, Result};
use crate::path::VPath;

/// A directory's raw entries (name, type), `None` when over the bound.
type RawEntries = Option<Vec<(String, FileType)>>;

/// Where a queued directory of a scan is.
enum At {
    /// Already open (the start).
    Open(OwnedFd),
    /// The child `name` of an open directory, opened (without following a link) in its turn.
    Child(Arc<OwnedFd>, String),
}

/// One piece of a scan's work.
enum Job {
    /// A directory to read.
    Dir(VPath, At),
    /// A file to read: its path, its directory and its name there.
    File(VPath, Arc<OwnedFd>, String),
}

impl HostBackend {
    /// Reads a directory's raw entries (at most the bound + 1): `None` when over the bound.
    pub(super) fn raw_entries(&self, fd: OwnedFd, path: &VPath) -> Result<(RawEntries, OwnedFd)> {
        let dup = rustix::io::fcntl_dupfd_cloexec(&fd, 0).map_err(|e| errno_io(path, e))?;
        let mut dir = rustix::fs::Dir::new(fd).map_err(|e| errno_io(path, e))?;
        let mut out = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(|e| errno_io(path, e))?;
            let raw = entry.file_name().to_bytes();
            if raw == b"." || raw == b".." {
                continue;
            }
            if out.len() == self.opts.max_scan_entries {
                return Ok((None, dup));
            }
            // A name that is not UTF-8 is not portable: keep a placeholder so it counts.
            let name = String::from_utf8(raw.to_vec()).unwrap_or_default();
            out.push((name, entry.file_type()));
        }
        Ok((Some(out), dup))
    }

    /// The kind of a directory entry, statting when the directory did not say.
    pub(super) fn entry_kind(&self, dir: &OwnedFd, name: &str, ft: FileType) -> Option<Kind> {
        if !is_visible_name(name) {
            return None;
        }
        match ft {
            FileType::Symlink
            | FileType::Fifo
            | FileType::Socket
            | FileType::CharacterDevice
            | FileType::BlockDevice => None,
            _ => rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .ok()
                .and_then(|st| self.classify(&st)),
        }
    }

    /// As [`Self::entry_kind`] for a scan that opens what it visits: a directory or regular
    /// file the directory names is taken on its word here, and checked on the opened
    /// descriptor (file system, link count) before anything is read from it.
    fn scan_kind(&self, dir: &OwnedFd, name: &str, ft: FileType) -> Option<Kind> {
        if !is_visible_name(name) {
            return None;
        }
        match ft {
            FileType::Directory => Some(Kind::Dir),
            FileType::RegularFile => Some(Kind::File),
            _ => self.entry_kind(dir, name, ft),
        }
    }

    /// Reads what `probe` asks of the directory `path` (open as `dir`, holding `entries`) and
    /// hands it over; a file is looked for only when its first segment is among the entries.
    fn run_probe(
        &self,
        probe: &Probe<'_>,
        path: &VPath,
        dir: &OwnedFd,
        entries: &[(String, FileType)],
    ) {
        let entry = |name: &str| entries.iter().find(|(n, _)| n == name);
        let marks = probe
            .marks
            .iter()
            .map(|m| entry(m).is_some_and(|(n, ft)| self.scan_kind(dir, n, *ft).is_some()))
            .collect();
        let files = probe
            .files
            .iter()
            .map(|f| {
                let segs: Vec<&str> = f.split('/').collect();
                let (last, mids) = segs.split_last()?;
                entry(segs[0])?;
                if !is_visible_name(last) {
                    return None;
                }
                let full = VPath::parse(&format!("{path}/{f}"));
                let mut here = path.clone();
                let mut fd: Option<OwnedFd> = None;
                for m in mids {
                    here = here.join(m);
                    let next = match &fd {
                        None => self.open_child_dir(dir, m, &here, &full),
                        Some(d) => self.open_child_dir(d, m, &here, &full),
                    };
                    fd = Some(next.ok()?);
                }
                match &fd {
                    None => self.read_in(dir, last, &full),
                    Some(d) => self.read_in(d, last, &full),
                }
                .ok()
            })
            .collect();
        (probe.on_dir)(path, marks, files);
    }

    /// Reads one directory of a scan: probes it, filters its entries, queues what is to be
    /// entered or read into `found` (directories before files, so its files, taken last in
    /// first out, are read first) and hands files' paths to `sink` when no content is wanted.
    #[allow(clippy::too_many_arguments)]
    fn scan_dir(
        &self,
        fd: OwnedFd,
        path: &VPath,
        filter: &ScanFilter<'_>,
        probe: Option<&Probe<'_>>,
        content: bool,
        sink: &(dyn Fn(&VPath, &[u8]) + Sync),
        cuts: &Mutex<Vec<VPath>>,
        found: &mut Vec<Job>,
    ) {
        let (entries, dir) = match self.raw_entries(fd, path) {
            Ok((Some(entries), dir)) => (entries, dir),
            Ok((None, _)) | Err(_) => {
                lock_unpoisoned(cuts).push(path.clone());
                return;
            }
        };
        if let Some(probe) = probe {
            self.run_probe(probe, path, &dir, &entries);
        }
        let dir = Arc::new(dir);
        let mut files = Vec::new();
        for (name, ft) in entries {
            let kind = if content {
                self.scan_kind(&dir, &name, ft)
            } else {
                self.entry_kind(&dir, &name, ft)
            };
            let Some(kind) = kind else {
                continue;
            };
            let child = path.join(&name);
            if !filter(&child, kind) {
                continue;
            }
            match kind {
                Kind::Dir => found.push(Job::Dir(child, At::Child(Arc::clone(&dir), name))),
                Kind::File if content => files.push(Job::File(child, Arc::clone(&dir), name)),
                Kind::File => {
                    if rustix::fs::statat(&*dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
                        .map(|st| st.st_size as u64 <= self.opts.max_file_bytes)
                        .unwrap_or(false)
                    {
                        sink(&child, &[]);
                    }
                }
            }
        }
        found.append(&mut files);
    }

    pub(super) fn scan_impl(
        &self,
        under: &VPath,
        filter: &ScanFilter<'_>,
        probe: Option<&Probe<'_>>,
        content: bool,
        sink: &(dyn Fn(&VPath, &[u8]) + Sync),
    ) -> Result<ScanEnd> {
        let _run = self.enter()?;
        let start = if under.is_root() {
            self.dup_root()?
        } else {
            let (dir, name) = self.open_parent(under)?;
            match self
                .occupant(&dir, name, under)
                .map_err(|_| Error::NotFound(under.clone()))?
            {
                None => return Err(Error::NotFound(under.clone())),
                Some((Kind::File, _)) => {
                    if filter(under, Kind::File) {
                        if content {
                            if let Ok(data) = self.read_in(&dir, name, under) {
                                sink(under, &data);
                            }
                        } else {
                            sink(under, &[]);
                        }
                    }
                    return Ok(ScanEnd::default());
                }
                Some((Kind::Dir, _)) => self.open_child_dir(&dir, name, under, under)?,
            }
        };
        // One queue of work for every thread: directories to read and, when the content is
        // wanted, files to read, so a directory of many files is shared too. Last in, first
        // out (depth first), and a queued directory is opened only when its turn comes: what
        // stays open is a descriptor per directory with work pending, not one per directory
        // found.
        let queue = Mutex::new((vec![Job::Dir(under.clone(), At::Open(start))], 0usize));
        let wake = Condvar::new();
        let cuts: Mutex<Vec<VPath>> = Mutex::new(Vec::new());
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .clamp(1, 8);
        let worker = || {
            let mut buf = Vec::new();
            loop {
                let job = {
                    let mut q = lock_unpoisoned(&queue);
                    loop {
                        if let Some(job) = q.0.pop() {
                            q.1 += 1;
                            break Some(job);
                        }
                        if q.1 == 0 {
                            break None;
                        }
                        q = wake.wait(q).unwrap_or_else(|e| e.into_inner());
                    }
                };
                let Some(job) = job else {
                    wake.notify_all();
                    return;
                };
                let mut found = Vec::new();
                match job {
                    Job::File(child, dir, name) => {
                        if let Ok((file, st)) = self.open_file(&*dir, &name, &child)
                            && st.st_size as u64 <= self.opts.max_file_bytes
                            && self.read_all(file, &child, &mut buf).is_ok()
                        {
                            sink(&child, &buf);
                        }
                    }
                    Job::Dir(path, at) => {
                        let fd = match at {
                            At::Open(fd) => Some(fd),
                            At::Child(parent, name) => {
                                self.open_child_dir(&*parent, &name, &path, &path).ok()
                            }
                        };
                        if let Some(fd) = fd {
                            self.scan_dir(
                                fd, &path, filter, probe, content, sink, &cuts, &mut found,
                            );
                        }
                    }
                }
                let mut q = lock_unpoisoned(&queue);
                let more = !found.is_empty();
                q.0.extend(found);
                q.1 -= 1;
                let done = q.1 == 0 && q.0.is_empty();
                drop(q);
                if more || done {
                    wake.notify_all();
                }
            }
        };
        std::thread::scope(|s| {
            for _ in 1..threads {
                s.spawn(worker);
            }
            worker();
        });
        let cut_at = cuts
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .into_iter()
            .min();
        Ok(ScanEnd { cut_at })
    }
}
