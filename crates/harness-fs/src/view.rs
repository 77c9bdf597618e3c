//! The view: what one session sees of a backend (`spec/filesystem.md`, *Levels*).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::backend::{Backend, Expect, Kind, Meta, Probe, ScanEnd};
use crate::error::{Error, Result};
use crate::path::VPath;

/// An access level, from least to most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Not open: invisible.
    None,
    /// Read only.
    Ro,
    /// Read and change; in a mount, changes stay staged.
    Stage,
    /// Read, change and, in a mount, commit.
    Commit,
}

impl Level {
    /// The level's name in the spec (`none`, `ro`, `stage`, `commit`).
    pub fn as_str(self) -> &'static str {
        match self {
            Level::None => "none",
            Level::Ro => "ro",
            Level::Stage => "stage",
            Level::Commit => "commit",
        }
    }

    /// Parses a level's name.
    pub fn parse(s: &str) -> Result<Level> {
        Ok(match s {
            "none" => Level::None,
            "ro" => Level::Ro,
            "stage" => Level::Stage,
            "commit" => Level::Commit,
            other => {
                return Err(Error::Invalid(format!(
                    "unknown level {other:?} (none, ro, stage, commit)"
                )));
            }
        })
    }
}

/// A session's grants, floors and mounts.
#[derive(Debug, Clone, Default)]
pub struct Access {
    grants: BTreeMap<VPath, Level>,
    floors: BTreeMap<VPath, Level>,
    mounts: BTreeSet<VPath>,
    /// The same grants and floors keyed by text, for lookups without allocating.
    grant_text: HashMap<String, Level>,
    floor_text: HashMap<String, Level>,
    /// Each mount's `.git`.
    mount_gits: Vec<VPath>,
}

impl Access {
    /// No grant: everything at none.
    pub fn new() -> Self {
        Self::default()
    }

    /// Grants `level` at `path` and everything below (the most specific grant wins).
    pub fn grant(mut self, path: &str, level: Level) -> Self {
        let p = VPath::parse(path);
        self.grant_text.insert(p.as_str().to_string(), level);
        self.grants.insert(p, level);
        self
    }

    /// Caps the session at `level` at `path` and below (the most specific floor applies).
    pub fn floor(mut self, path: &str, level: Level) -> Self {
        let p = VPath::parse(path);
        self.floor_text.insert(p.as_str().to_string(), level);
        self.floors.insert(p, level);
        self
    }

    /// Marks `path` as a mount (a forge repository).
    pub fn mount(mut self, path: &str) -> Self {
        let p = VPath::parse(path);
        self.mount_gits.push(p.join(".git"));
        self.mounts.insert(p);
        self
    }

    /// The entry for `p` or its nearest ancestor, looked up by text without allocating.
    fn most_specific(map: &HashMap<String, Level>, p: &VPath) -> Option<Level> {
        if map.is_empty() {
            return None;
        }
        let mut s = p.as_str();
        loop {
            if let Some(l) = map.get(s) {
                return Some(*l);
            }
            if s == "/" {
                return None;
            }
            s = match s.rfind('/') {
                Some(0) => "/",
                Some(i) => &s[..i],
                None => return None,
            };
        }
    }

    /// The mount `p` is in (or is), if any.
    pub fn mount_of(&self, p: &VPath) -> Option<&VPath> {
        self.mounts
            .iter()
            .filter(|m| p.starts_with(m))
            .max_by_key(|m| m.as_str().len())
    }

    /// Whether `p` is a mount's root.
    pub fn is_mount(&self, p: &VPath) -> bool {
        self.mounts.contains(p)
    }

    fn in_mount_git(&self, p: &VPath) -> bool {
        self.mount_gits.iter().any(|g| p.starts_with(g))
    }

    /// The session's level at `p`: the most specific grant, capped by the most specific floor;
    /// none inside a mount's `.git`.
    pub fn level(&self, p: &VPath) -> Level {
        if self.in_mount_git(p) {
            return Level::None;
        }
        let granted = Self::most_specific(&self.grant_text, p).unwrap_or(Level::None);
        match Self::most_specific(&self.floor_text, p) {
            Some(floor) => granted.min(floor),
            None => granted,
        }
    }

    /// Whether `p` is a passage: at none, with something granted below it.
    pub fn is_passage(&self, p: &VPath) -> bool {
        self.level(p) == Level::None
            && !self.in_mount_git(p)
            && self
                .grants
                .keys()
                .any(|g| g.is_strictly_inside(p) && self.level(g) > Level::None)
    }

    /// Whether the session can see `p` (level ro or more).
    pub fn visible(&self, p: &VPath) -> bool {
        self.level(p) >= Level::Ro
    }

    /// Whether anything strictly inside `p` is granted or capped below `Stage` (or is a mount).
    fn restricted_below(&self, p: &VPath) -> Option<Level> {
        let mut worst: Option<Level> = None;
        for g in self
            .grants
            .keys()
            .chain(self.floors.keys())
            .chain(self.mounts.iter())
        {
            if g.is_strictly_inside(p) {
                let l = if self.mounts.contains(g) {
                    Level::None
                } else {
                    self.level(g)
                };
                if l < Level::Stage {
                    worst = Some(worst.map_or(l, |w| w.min(l)));
                }
            }
        }
        if self.mounts.iter().any(|m| m.is_strictly_inside(p)) {
            worst = Some(Level::None);
        }
        worst
    }
}

/// One entry of a view listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListEntry {
    /// The name.
    pub name: String,
    /// Directory or file.
    pub kind: Kind,
    /// A mount's root.
    pub mount: bool,
    /// At ro in a directory the session may change.
    pub read_only: bool,
}

impl ListEntry {
    /// The entry as a listing shows it: `name`, `dir/`, `repo/ [mount]`, `ref/ [read-only]`.
    pub fn line(&self) -> String {
        let mut s = self.name.clone();
        if self.kind == Kind::Dir {
            s.push('/');
        }
        if self.mount {
            s.push_str(" [mount]");
        }
        if self.read_only {
            s.push_str(" [read-only]");
        }
        s
    }
}

/// A directory as the session sees it: directories first, then by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewListing {
    /// The listed directory.
    pub path: VPath,
    /// The visible entries.
    pub entries: Vec<ListEntry>,
    /// The directory was over the backend's bound and lists as empty.
    pub truncated: bool,
}

impl ViewListing {
    /// Each entry's line.
    pub fn lines(&self) -> Vec<String> {
        self.entries.iter().map(ListEntry::line).collect()
    }
}

/// A session's view over a backend: its access, and its directory (where relative paths start).
#[derive(Clone)]
pub struct View {
    backend: Arc<dyn Backend>,
    access: Access,
    cwd: VPath,
}

impl std::fmt::Debug for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("View")
            .field("access", &self.access)
            .field("cwd", &self.cwd)
            .finish_non_exhaustive()
    }
}

impl View {
    /// A view at `/`.
    pub fn new(backend: Arc<dyn Backend>, access: Access) -> Self {
        View {
            backend,
            access,
            cwd: VPath::root(),
        }
    }

    /// The same view starting in `cwd`.
    pub fn with_cwd(mut self, cwd: &str) -> Self {
        self.cwd = VPath::parse(cwd);
        self
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// The access.
    pub fn access(&self) -> &Access {
        &self.access
    }

    /// The session's directory.
    pub fn cwd(&self) -> &VPath {
        &self.cwd
    }

    /// Resolves a path the model gave against the session's directory.
    pub fn resolve(&self, input: &str) -> VPath {
        VPath::resolve(&self.cwd, input)
    }

    /// The level at a path and whether it is a passage.
    pub fn level(&self, input: &str) -> (Level, bool) {
        let p = self.resolve(input);
        (self.access.level(&p), self.access.is_passage(&p))
    }

    /// The refusal for a path the session cannot see: `Access denied` for a passage or behind
    /// one, else `No such file or directory` (a hidden entry and a missing one read the same).
    pub fn hidden(&self, p: &VPath) -> Error {
        if self.access.is_passage(p) {
            return Error::AccessDenied(p.clone());
        }
        for a in p.ancestors() {
            if self.access.visible(&a) {
                return Error::NotFound(p.clone());
            }
            if self.access.is_passage(&a) {
                return Error::AccessDenied(p.clone());
            }
        }
        Error::AccessDenied(p.clone())
    }

    /// Refuses a path the session cannot see.
    pub fn check_visible(&self, p: &VPath) -> Result<()> {
        if self.access.visible(p) {
            Ok(())
        } else {
            Err(self.hidden(p))
        }
    }

    /// Refuses changing (or creating) `p`: `Access denied` at none, `Read-only` at ro.
    pub fn check_writable(&self, p: &VPath) -> Result<()> {
        match self.access.level(p) {
            Level::None => Err(Error::AccessDenied(p.clone())),
            Level::Ro => Err(Error::ReadOnly(p.clone())),
            Level::Stage | Level::Commit => Ok(()),
        }
    }

    /// The metadata of a visible path.
    pub fn stat(&self, p: &VPath) -> Result<Meta> {
        self.check_visible(p)?;
        self.backend
            .stat(p)?
            .ok_or_else(|| Error::NotFound(p.clone()))
    }

    /// Lists a directory.
    pub fn list(&self, input: &str) -> Result<ViewListing> {
        let p = self.resolve(input);
        self.check_visible(&p)?;
        let listing = self.backend.list(&p).map_err(|e| match e {
            Error::NotFound(_) => Error::NotFound(p.clone()),
            Error::NotADirectory(_) => Error::NotADirectory(p.clone()),
            other => other,
        })?;
        let writable = self.access.level(&p) >= Level::Stage;
        let mut entries: Vec<ListEntry> = listing
            .entries
            .into_iter()
            .filter_map(|e| {
                let child = p.join(&e.name);
                let level = self.access.level(&child);
                (level >= Level::Ro).then(|| ListEntry {
                    mount: e.kind == Kind::Dir && self.access.is_mount(&child),
                    read_only: writable && level == Level::Ro,
                    name: e.name,
                    kind: e.kind,
                })
            })
            .collect();
        entries.sort_by(|a, b| (a.kind != Kind::Dir, &a.name).cmp(&(b.kind != Kind::Dir, &b.name)));
        Ok(ViewListing {
            path: p,
            entries,
            truncated: listing.truncated,
        })
    }

    /// A visible file's bytes.
    pub fn read_bytes(&self, p: &VPath) -> Result<Vec<u8>> {
        self.check_visible(p)?;
        self.backend.read(p)
    }

    fn ensure_dir(&self, d: &VPath) -> Result<()> {
        match self.backend.stat(d)? {
            Some(Meta {
                kind: Kind::Dir, ..
            }) => Ok(()),
            Some(_) => Err(Error::NotADirectory(d.clone())),
            None => {
                if let Some(parent) = d.parent() {
                    self.ensure_dir(&parent)?;
                }
                match self.backend.mkdir(d) {
                    Ok(()) => Ok(()),
                    Err(Error::AlreadyExists(_)) => match self.backend.stat(d)? {
                        Some(Meta {
                            kind: Kind::Dir, ..
                        }) => Ok(()),
                        Some(_) => Err(Error::NotADirectory(d.clone())),
                        None => Err(Error::AccessDenied(d.clone())),
                    },
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Writes a whole file (creating missing parent directories), with the given expectation.
    pub fn write_bytes(&self, p: &VPath, data: &[u8], expect: &Expect) -> Result<()> {
        self.check_writable(p)?;
        if p.is_root() {
            return Err(Error::IsADirectory(p.clone()));
        }
        if let Some(parent) = p.parent() {
            self.ensure_dir(&parent).map_err(|e| match e {
                Error::AccessDenied(_) => Error::AccessDenied(p.clone()),
                other => other,
            })?;
        }
        self.backend.write(p, data, expect)
    }

    /// Writes a whole file, whatever is there (the view's `write`).
    pub fn write(&self, input: &str, data: &[u8]) -> Result<()> {
        let p = self.resolve(input);
        self.write_bytes(&p, data, &Expect::Any)
    }

    /// Creates a directory and its missing parents; an existing directory is fine.
    pub fn mkdir(&self, input: &str) -> Result<()> {
        let p = self.resolve(input);
        self.check_writable(&p)?;
        match self.backend.stat(&p)? {
            Some(Meta {
                kind: Kind::Dir, ..
            }) => Ok(()),
            Some(_) => Err(Error::AlreadyExists(p)),
            None => self.ensure_dir(&p).map_err(|e| match e {
                Error::AccessDenied(_) => Error::AccessDenied(p.clone()),
                other => other,
            }),
        }
    }

    fn check_removable(&self, p: &VPath) -> Result<()> {
        self.check_visible(p)?;
        if p.is_root() || self.access.is_mount(p) {
            return Err(Error::AccessDenied(p.clone()));
        }
        if self.access.level(p) < Level::Stage {
            return Err(Error::ReadOnly(p.clone()));
        }
        match self.access.restricted_below(p) {
            Some(Level::None) => Err(Error::AccessDenied(p.clone())),
            Some(_) => Err(Error::ReadOnly(p.clone())),
            None => Ok(()),
        }
    }

    /// Moves a file or directory to the trash; answers the id to restore it by.
    pub fn rm(&self, input: &str) -> Result<String> {
        let p = self.resolve(input);
        self.check_removable(&p)?;
        if self.backend.stat(&p)?.is_none() {
            return Err(Error::NotFound(p));
        }
        self.backend.trash(&p)
    }

    /// Puts a trashed entry back.
    pub fn restore(&self, id: &str) -> Result<VPath> {
        let entry = self
            .backend
            .trash_list()?
            .into_iter()
            .find(|e| e.id == id)
            .ok_or_else(|| Error::NotInTrash(id.to_string()))?;
        self.check_writable(&entry.path)?;
        self.backend.restore(id)
    }

    /// The trash's entries this view may restore (their place writable here), oldest first.
    pub fn trash_list(&self) -> Result<Vec<crate::backend::TrashEntry>> {
        Ok(self
            .backend
            .trash_list()?
            .into_iter()
            .filter(|e| self.check_writable(&e.path).is_ok())
            .collect())
    }

    /// Deletes a trashed entry for good, one this view may restore.
    pub fn purge(&self, id: &str) -> Result<()> {
        let entry = self
            .backend
            .trash_list()?
            .into_iter()
            .find(|e| e.id == id)
            .ok_or_else(|| Error::NotInTrash(id.to_string()))?;
        self.check_writable(&entry.path)
            .map_err(|_| Error::NotInTrash(id.to_string()))?;
        self.backend.purge(id)
    }

    /// Moves (renames) a file or directory to a free name.
    pub fn mv(&self, from: &str, to: &str) -> Result<VPath> {
        let src = self.resolve(from);
        let dst = self.resolve(to);
        self.check_removable(&src)?;
        if self.backend.stat(&src)?.is_none() {
            return Err(Error::NotFound(src));
        }
        self.check_writable(&dst)?;
        if self.backend.stat(&dst)?.is_some() {
            return Err(Error::AlreadyExists(dst));
        }
        if let Some(parent) = dst.parent() {
            self.ensure_dir(&parent)?;
        }
        self.backend.rename(&src, &dst)?;
        Ok(dst)
    }

    /// Whether the session may commit `p`: it needs a mount and level commit.
    pub fn commit(&self, input: &str) -> Result<()> {
        let p = self.resolve(input);
        self.check_visible(&p)?;
        if self.access.mount_of(&p).is_none() {
            return Err(Error::NothingToCommit(p));
        }
        match self.access.level(&p) {
            Level::Commit => Ok(()),
            Level::Stage => Err(Error::NotCommitted(p)),
            _ => Err(Error::ReadOnly(p)),
        }
    }

    fn scan_filter<'a>(
        &'a self,
        accept: &'a (dyn Fn(&VPath, Kind) -> bool + Sync),
    ) -> impl Fn(&VPath, Kind) -> bool + Sync + 'a {
        move |p: &VPath, kind: Kind| self.access.visible(p) && accept(p, kind)
    }

    fn scan_start(&self, under: &VPath) -> Result<()> {
        self.check_visible(under)?;
        if self.backend.stat(under)?.is_none() {
            return Err(Error::NotFound(under.clone()));
        }
        Ok(())
    }

    /// Walks the visible files under `under` with their content; `accept` prunes directories
    /// and files; `probe` reads each entered directory's ignore files through the backend
    /// (whatever their level: they only decide what is skipped). The sink may be called from several threads, in any order; drop what comes
    /// after `cut_at` in path order.
    pub fn scan(
        &self,
        under: &VPath,
        accept: &(dyn Fn(&VPath, Kind) -> bool + Sync),
        probe: Option<&Probe<'_>>,
        sink: &(dyn Fn(&VPath, &[u8]) + Sync),
    ) -> Result<ScanEnd> {
        self.scan_start(under)?;
        self.backend
            .scan(under, &self.scan_filter(accept), probe, sink)
    }

    /// As [`View::scan`] without the content.
    pub fn scan_paths(
        &self,
        under: &VPath,
        accept: &(dyn Fn(&VPath, Kind) -> bool + Sync),
        probe: Option<&Probe<'_>>,
        sink: &(dyn Fn(&VPath) + Sync),
    ) -> Result<ScanEnd> {
        self.scan_start(under)?;
        self.backend
            .scan_paths(under, &self.scan_filter(accept), probe, sink)
    }
}
