//! harness-fs owns the harness's file system (`spec/filesystem.md`): the **view** a session
//! works through (levels none/ro/stage/commit, grants, floors, mounts, passages, the exact
//! error texts, listings), the **backends** behind one trait (an in-memory tree and a host
//! directory seen as `/`), the **file tools' logic** (read windows with line numbers and a
//! content hash, guarded write and edit, multiedit, glob, grep, list, mkdir, mv, rm to a
//! restorable trash), **instruction files** stacked from the boundary down, **chunking** by
//! tokens for search, **memory** (two stores of entries with ids, saved whole) and
//! **skills**. Only the host backend does I/O.
//!
//! ```
//! use std::sync::Arc;
//! use harness_fs::{Access, Level, MemoryBackend, VPath, View};
//!
//! let tree = MemoryBackend::new();
//! tree.add_file(&VPath::parse("/notes/a.md"), "hello\n").unwrap();
//! let access = Access::new().grant("/", Level::Stage);
//! let view = View::new(Arc::new(tree), access);
//! assert_eq!(view.list("/notes").unwrap().lines(), vec!["a.md".to_string()]);
//! ```

// A library says nothing on stdout or stderr of its own: it returns what happened.

mod atomic;
pub mod backend;
pub mod chunk;
pub mod conformance;
mod error;
mod ignores;
pub mod instructions;
pub mod memory;
pub mod names;
pub mod patch;
mod path;
pub mod skills;
pub mod tools;
mod view;

pub use atomic::write_atomic;
pub use backend::{
    Backend, DirEntry, Expect, HostBackend, HostOptions, Kind, Listing, MemoryBackend, Meta,
    TrashEntry,
};
pub use error::{Error, Result};
pub use names::checked_input;
pub use path::{VPath, is_portable_name};
pub use view::{Access, Level, ListEntry, View, ViewListing};

/// The content hash of a file: the first 16 hex digits of its SHA-256. A read answers it; a
/// write or edit of an existing file needs the session's last read to carry the current one.
pub fn content_hash(data: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(data);
    hex::encode(&digest[..8])
}
