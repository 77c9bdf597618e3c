//! Backends: where the bytes live. One trait, two implementations: [`MemoryBackend`] (a tree
//! in memory, for the server's chats and for tests) and [`HostBackend`] (a directory of the
//! host seen as `/`). A backend knows nothing of levels; the [`crate::View`] puts them on top.

mod host;
mod memory;

pub use host::{HostBackend, HostOptions, default_lock_dir, user_lock_dir};
pub use memory::MemoryBackend;

use crate::error::Result;
use crate::path::VPath;

/// Default bound on a file's size: 10 MiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
/// Default bound on the entries read from one directory: 10,000.
pub const DEFAULT_MAX_SCAN_ENTRIES: usize = 10_000;

/// What a visible entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
}

/// A visible entry's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// Directory or file.
    pub kind: Kind,
    /// Size in bytes (0 for a directory).
    pub size: u64,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name.
    pub name: String,
    /// Directory or file.
    pub kind: Kind,
}

/// A directory's visible entries in name order. A directory with more than the backend's
/// `max_scan_entries` entries lists as empty and `truncated`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// The entries, in name order.
    pub entries: Vec<DirEntry>,
    /// The directory was over the bound and was not read.
    pub truncated: bool,
}

/// What a write expects to find at its target: the compare-and-set of the file tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// Create or replace, whatever is there.
    Any,
    /// Create only: refused if a file is (or appears) there.
    Absent,
    /// Replace only the file whose content hash ([`crate::content_hash`]) is this.
    Version(String),
}

/// The end of a scan: where it was cut, if it was.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanEnd {
    /// The first directory (in path order) over the bound; what comes after it in path order
    /// is not part of the result, so a cut result is a prefix of the full one.
    pub cut_at: Option<VPath>,
}

/// Decides during a scan whether to enter a directory (`Kind::Dir`) or visit a file.
pub type ScanFilter<'a> = dyn Fn(&VPath, Kind) -> bool + Sync + 'a;
/// Receives each visited file with its content (files over the bound are skipped). May be
/// called from several threads at once, in any order.
pub type ScanSink<'a> = dyn Fn(&VPath, &[u8]) + Sync + 'a;
/// Receives each visited file's path, without its content.
pub type PathSink<'a> = dyn Fn(&VPath) + Sync + 'a;

/// What a scan reads in each directory it enters, before it filters that directory's entries:
/// the ignore files of search. Names are relative to the directory, walked one segment at a
/// time like every other path (no link followed, invisible entries absent).
pub struct Probe<'a> {
    /// Entries whose presence (as a visible directory or file) is reported, e.g. `.git`.
    pub marks: &'a [&'a str],
    /// Files read, e.g. `.gitignore` or `.git/info/exclude`; one missing, invisible or over
    /// `max_file_bytes` is `None`.
    pub files: &'a [&'a str],
    /// Gets each directory the scan enters (the start included), with what of `marks` it
    /// holds and what of `files` it read, each in its list's order. It is called before any
    /// entry of that directory is filtered, on the thread that filters them.
    pub on_dir: &'a ProbeSink<'a>,
}

/// Receives a probed directory: the marks found and the files read, in the probe's orders.
pub type ProbeSink<'a> = dyn Fn(&VPath, Vec<bool>, Vec<Option<Vec<u8>>>) + Sync + 'a;

/// An entry moved to the trash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrashEntry {
    /// The id to restore it by.
    pub id: String,
    /// Where it was.
    pub path: VPath,
}

/// Storage for a view. Paths are view paths. Implementations show only directories and
/// regular files; mutations through one backend apply one at a time, in call order.
pub trait Backend: Send + Sync {
    /// The metadata of a visible entry, `None` when absent or invisible.
    fn stat(&self, path: &VPath) -> Result<Option<Meta>>;
    /// A directory's visible entries in name order.
    fn list(&self, path: &VPath) -> Result<Listing>;
    /// A file's bytes (refused over `max_file_bytes`).
    fn read(&self, path: &VPath) -> Result<Vec<u8>>;
    /// Writes a whole file atomically; its parent must exist. A name taken by an invisible
    /// entry is `Access denied`.
    fn write(&self, path: &VPath, data: &[u8], expect: &Expect) -> Result<()>;
    /// Creates one directory; its parent must exist. `Already exists` when the name is taken.
    fn mkdir(&self, path: &VPath) -> Result<()>;
    /// Moves an entry to a name that must be free.
    fn rename(&self, from: &VPath, to: &VPath) -> Result<()>;
    /// Moves an entry to the trash, answering its id.
    fn trash(&self, path: &VPath) -> Result<String>;
    /// Puts a trashed entry back where it was (refused if that name is taken).
    fn restore(&self, id: &str) -> Result<VPath>;
    /// What is in the trash, oldest first.
    fn trash_list(&self) -> Result<Vec<TrashEntry>>;
    /// Deletes a trashed entry for good (`Not in the trash` when there is no such entry).
    fn purge(&self, id: &str) -> Result<()>;
    /// Walks `under` (a directory or a file): `filter` decides which directories are entered
    /// and which files visited; `probe`, if given, reads each entered directory's ignore files
    /// first; `sink` gets each visited file's content.
    fn scan(
        &self,
        under: &VPath,
        filter: &ScanFilter<'_>,
        probe: Option<&Probe<'_>>,
        sink: &ScanSink<'_>,
    ) -> Result<ScanEnd>;
    /// As [`Backend::scan`] without reading the files.
    fn scan_paths(
        &self,
        under: &VPath,
        filter: &ScanFilter<'_>,
        probe: Option<&Probe<'_>>,
        sink: &PathSink<'_>,
    ) -> Result<ScanEnd>;
    /// The bound on a file's size.
    fn max_file_bytes(&self) -> u64;
    /// Closes the backend: idempotent, never blocks; later operations are refused.
    fn close(&self);
}
