//! The in-memory tree: the server's chats and the tests.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use super::{
    Backend, DirEntry, Expect, Kind, Listing, Meta, PathSink, Probe, ScanEnd, ScanFilter, ScanSink,
    TrashEntry,
};
use crate::error::{Error, Result};
use crate::path::VPath;

#[derive(Debug, Clone)]
enum Node {
    Dir,
    File(Vec<u8>),
}

/// A trashed subtree: its id, where it was, its nodes.
type Trashed = (String, VPath, Vec<(VPath, Node)>);

#[derive(Debug, Default)]
struct State {
    nodes: BTreeMap<VPath, Node>,
    trash: Vec<Trashed>,
    next_trash: u64,
}

/// A tree held in memory. Mutations take one lock, so they apply one at a time, in call order.
#[derive(Debug)]
pub struct MemoryBackend {
    state: Mutex<State>,
    max_file_bytes: u64,
    max_scan_entries: usize,
    closed: AtomicBool,
}

impl Default for MemoryBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryBackend {
    /// An empty tree (just `/`) with the default bounds.
    pub fn new() -> Self {
        Self::with_bounds(
            super::DEFAULT_MAX_FILE_BYTES,
            super::DEFAULT_MAX_SCAN_ENTRIES,
        )
    }

    /// An empty tree with these bounds.
    pub fn with_bounds(max_file_bytes: u64, max_scan_entries: usize) -> Self {
        let mut nodes = BTreeMap::new();
        nodes.insert(VPath::root(), Node::Dir);
        MemoryBackend {
            state: Mutex::new(State {
                nodes,
                ..State::default()
            }),
            max_file_bytes,
            max_scan_entries,
            closed: AtomicBool::new(false),
        }
    }

    /// Adds a directory and its missing parents (setting up a tree; no view rules).
    pub fn add_dir(&self, path: &VPath) -> Result<()> {
        let mut st = self.lock()?;
        for p in path
            .ancestors()
            .into_iter()
            .rev()
            .chain(std::iter::once(path.clone()))
        {
            match st.nodes.get(&p) {
                Some(Node::File(_)) => return Err(Error::NotADirectory(p)),
                Some(Node::Dir) => {}
                None => {
                    st.nodes.insert(p, Node::Dir);
                }
            }
        }
        Ok(())
    }

    /// Adds a file and its missing parents, replacing a file already there.
    pub fn add_file(&self, path: &VPath, data: impl Into<Vec<u8>>) -> Result<()> {
        if let Some(parent) = path.parent() {
            self.add_dir(&parent)?;
        }
        let mut st = self.lock()?;
        if let Some(Node::Dir) = st.nodes.get(path) {
            return Err(Error::IsADirectory(path.clone()));
        }
        st.nodes.insert(path.clone(), Node::File(data.into()));
        Ok(())
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, State>> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        self.state
            .lock()
            .map_err(|_| Error::io("/", "the tree's lock was poisoned"))
    }

    fn need_parent_dir(st: &State, path: &VPath) -> Result<()> {
        let parent = path
            .parent()
            .ok_or_else(|| Error::AlreadyExists(path.clone()))?;
        match st.nodes.get(&parent) {
            Some(Node::Dir) => Ok(()),
            Some(Node::File(_)) => Err(Error::NotADirectory(parent)),
            None => Err(Error::NotFound(path.clone())),
        }
    }

    fn subtree(st: &State, path: &VPath) -> Vec<VPath> {
        st.nodes
            .range(path.clone()..)
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(path))
            .cloned()
            .collect()
    }

    fn walk(
        &self,
        under: &VPath,
        filter: &ScanFilter<'_>,
        probe: Option<&Probe<'_>>,
        visit: &mut dyn FnMut(&VPath, &[u8]),
    ) -> Result<ScanEnd> {
        let st = self.lock()?;
        let mut end = ScanEnd::default();
        match st.nodes.get(under) {
            None => return Err(Error::NotFound(under.clone())),
            Some(Node::File(data)) => {
                if filter(under, Kind::File) && data.len() as u64 <= self.max_file_bytes {
                    visit(under, data);
                }
                return Ok(end);
            }
            Some(Node::Dir) => {}
        }
        // Depth first in path order; a directory over the bound ends the walk.
        let mut stack = vec![under.clone()];
        while let Some(dir) = stack.pop() {
            let children: Vec<(VPath, Node)> = st
                .nodes
                .range(dir.clone()..)
                .skip(1)
                .take_while(|(k, _)| k.starts_with(&dir))
                .filter(|(k, _)| k.parent().as_ref() == Some(&dir))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if children.len() > self.max_scan_entries {
                end.cut_at = Some(dir);
                break;
            }
            if let Some(probe) = probe {
                let marks = probe
                    .marks
                    .iter()
                    .map(|m| st.nodes.contains_key(&dir.join(m)))
                    .collect();
                let files = probe
                    .files
                    .iter()
                    .map(
                        |f| match st.nodes.get(&VPath::parse(&format!("{dir}/{f}"))) {
                            Some(Node::File(data)) if data.len() as u64 <= self.max_file_bytes => {
                                Some(data.clone())
                            }
                            _ => None,
                        },
                    )
                    .collect();
                (probe.on_dir)(&dir, marks, files);
            }
            let mut subdirs = Vec::new();
            for (p, node) in children {
                match node {
                    Node::Dir => {
                        if filter(&p, Kind::Dir) {
                            subdirs.push(p);
                        }
                    }
                    Node::File(data) => {
                        if filter(&p, Kind::File) && data.len() as u64 <= self.max_file_bytes {
                            visit(&p, &data);
                        }
                    }
                }
            }
            // Children were visited in path order; descend into subdirectories in path order.
            subdirs.reverse();
            stack.extend(subdirs);
        }
        Ok(end)
    }
}

impl Backend for MemoryBackend {
    fn stat(&self, path: &VPath) -> Result<Option<Meta>> {
        let st = self.lock()?;
        Ok(st.nodes.get(path).map(|n| match n {
            Node::Dir => Meta {
                kind: Kind::Dir,
                size: 0,
            },
            Node::File(d) => Meta {
                kind: Kind::File,
                size: d.len() as u64,
            },
        }))
    }

    fn list(&self, path: &VPath) -> Result<Listing> {
        let st = self.lock()?;
        match st.nodes.get(path) {
            None => return Err(Error::NotFound(path.clone())),
            Some(Node::File(_)) => return Err(Error::NotADirectory(path.clone())),
            Some(Node::Dir) => {}
        }
        let mut entries = Vec::new();
        for (k, v) in st
            .nodes
            .range(path.clone()..)
            .skip(1)
            .take_while(|(k, _)| k.starts_with(path))
        {
            if k.parent().as_ref() != Some(path) {
                continue;
            }
            if entries.len() == self.max_scan_entries {
                return Ok(Listing {
                    entries: Vec::new(),
                    truncated: true,
                });
            }
            let kind = if matches!(v, Node::Dir) {
                Kind::Dir
            } else {
                Kind::File
            };
            entries.push(DirEntry {
                name: k.name().to_string(),
                kind,
            });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Listing {
            entries,
            truncated: false,
        })
    }

    fn read(&self, path: &VPath) -> Result<Vec<u8>> {
        let st = self.lock()?;
        match st.nodes.get(path) {
            None => Err(Error::NotFound(path.clone())),
            Some(Node::Dir) => Err(Error::IsADirectory(path.clone())),
            Some(Node::File(d)) if d.len() as u64 > self.max_file_bytes => Err(Error::TooLarge {
                path: path.clone(),
                limit: self.max_file_bytes,
            }),
            Some(Node::File(d)) => Ok(d.clone()),
        }
    }

    fn write(&self, path: &VPath, data: &[u8], expect: &Expect) -> Result<()> {
        let mut st = self.lock()?;
        Self::need_parent_dir(&st, path)?;
        if data.len() as u64 > self.max_file_bytes {
            return Err(Error::TooLarge {
                path: path.clone(),
                limit: self.max_file_bytes,
            });
        }
        match (st.nodes.get(path), expect) {
            (Some(Node::Dir), _) => return Err(Error::IsADirectory(path.clone())),
            (Some(Node::File(d)), _) if d.len() as u64 > self.max_file_bytes => {
                return Err(Error::TooLarge {
                    path: path.clone(),
                    limit: self.max_file_bytes,
                });
            }
            (Some(Node::File(_)), Expect::Absent) => {
                return Err(Error::AlreadyExists(path.clone()));
            }
            (Some(Node::File(d)), Expect::Version(v)) if crate::content_hash(d) != *v => {
                return Err(Error::Stale(path.clone()));
            }
            (None, Expect::Version(_)) => return Err(Error::Stale(path.clone())),
            _ => {}
        }
        st.nodes.insert(path.clone(), Node::File(data.to_vec()));
        Ok(())
    }

    fn mkdir(&self, path: &VPath) -> Result<()> {
        let mut st = self.lock()?;
        if st.nodes.contains_key(path) {
            return Err(Error::AlreadyExists(path.clone()));
        }
        Self::need_parent_dir(&st, path)?;
        st.nodes.insert(path.clone(), Node::Dir);
        Ok(())
    }

    fn rename(&self, from: &VPath, to: &VPath) -> Result<()> {
        let mut st = self.lock()?;
        if !st.nodes.contains_key(from) {
            return Err(Error::NotFound(from.clone()));
        }
        if st.nodes.contains_key(to) {
            return Err(Error::AlreadyExists(to.clone()));
        }
        if to.starts_with(from) {
            return Err(Error::Invalid(format!(
                "cannot move {from} into itself ({to})"
            )));
        }
        Self::need_parent_dir(&st, to)?;
        for old in Self::subtree(&st, from) {
            if let Some(node) = st.nodes.remove(&old) {
                let rel = old.relative_to(from).unwrap_or("").to_string();
                let new = if rel.is_empty() {
                    to.clone()
                } else {
                    VPath::parse(&format!("{to}/{rel}"))
                };
                st.nodes.insert(new, node);
            }
        }
        Ok(())
    }

    fn trash(&self, path: &VPath) -> Result<String> {
        let mut st = self.lock()?;
        if path.is_root() {
            return Err(Error::AccessDenied(path.clone()));
        }
        if !st.nodes.contains_key(path) {
            return Err(Error::NotFound(path.clone()));
        }
        let mut taken = Vec::new();
        for p in Self::subtree(&st, path) {
            if let Some(n) = st.nodes.remove(&p) {
                taken.push((p, n));
            }
        }
        st.next_trash += 1;
        let id = format!("t{}", st.next_trash);
        st.trash.push((id.clone(), path.clone(), taken));
        Ok(id)
    }

    fn restore(&self, id: &str) -> Result<VPath> {
        let mut st = self.lock()?;
        let idx = st
            .trash
            .iter()
            .position(|(i, _, _)| i == id)
            .ok_or_else(|| Error::NotInTrash(id.to_string()))?;
        let path = st.trash[idx].1.clone();
        if st.nodes.contains_key(&path) {
            return Err(Error::AlreadyExists(path));
        }
        Self::need_parent_dir(&st, &path)?;
        let (_, _, taken) = st.trash.remove(idx);
        for (p, n) in taken {
            st.nodes.insert(p, n);
        }
        Ok(path)
    }

    fn purge(&self, id: &str) -> Result<()> {
        let mut st = self.lock()?;
        let idx = st
            .trash
            .iter()
            .position(|(i, _, _)| i == id)
            .ok_or_else(|| Error::NotInTrash(id.to_string()))?;
        st.trash.remove(idx);
        Ok(())
    }

    fn trash_list(&self) -> Result<Vec<TrashEntry>> {
        let st = self.lock()?;
        Ok(st
            .trash
            .iter()
            .map(|(id, p, _)| TrashEntry {
                id: id.clone(),
                path: p.clone(),
            })
            .collect())
    }

    fn scan(
        &self,
        under: &VPath,
        filter: &ScanFilter<'_>,
        probe: Option<&Probe<'_>>,
        sink: &ScanSink<'_>,
    ) -> Result<ScanEnd> {
        self.walk(under, filter, probe, &mut |p, d| sink(p, d))
    }

    fn scan_paths(
        &self,
        under: &VPath,
        filter: &ScanFilter<'_>,
        probe: Option<&Probe<'_>>,
        sink: &PathSink<'_>,
    ) -> Result<ScanEnd> {
        self.walk(under, filter, probe, &mut |p, _| sink(p))
    }

    fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
    }

    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }
}
