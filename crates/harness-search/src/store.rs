//! [`FileStore`]: the index kept in one file (the CLI's, under its data directory), read whole
//! at opening and written whole, atomically (a temporary file renamed over it), at
//! [`Store::flush`].
//!
//! The file is JSON: `{"format": 1, "files": [StoredFile...]}`, each vector the base64 of its
//! numbers as little-endian f32 (a quarter of the text of decimal numbers).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::index::{Store, StoredFile, StoredPiece};

const FORMAT: u32 = 1;

#[derive(Serialize, Deserialize)]
struct OnDisk {
    format: u32,
    files: Vec<DiskFile>,
}

#[derive(Serialize, Deserialize)]
struct DiskFile {
    path: String,
    hash: String,
    by_tokens: bool,
    pieces: Vec<DiskPiece>,
}

#[derive(Serialize, Deserialize)]
struct DiskPiece {
    hash: String,
    start_line: usize,
    end_line: usize,
    text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    vector: Option<String>,
}

fn encode(v: &[f32]) -> String {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn decode(s: &str) -> Option<Vec<f32>> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(s).ok()?;
    if bytes.len() % 4 != 0 {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

/// The index kept in one file.
#[derive(Debug, Clone)]
pub struct FileStore {
    path: PathBuf,
    files: BTreeMap<String, StoredFile>,
    dirty: bool,
}

impl FileStore {
    /// An empty store that will be written to `path` (whatever is there is replaced at the
    /// first flush).
    pub fn new(path: &Path) -> FileStore {
        FileStore {
            path: path.to_path_buf(),
            files: BTreeMap::new(),
            dirty: false,
        }
    }

    /// The store in `path`; empty when there is no such file. A file that cannot be read or
    /// is not an index (or of another format) is an error naming it.
    pub fn open(path: &Path) -> Result<FileStore> {
        let err = |reason: String| Error::Store {
            path: path.display().to_string(),
            reason,
        };
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(FileStore::new(path)),
            Err(e) => return Err(err(e.to_string())),
        };
        let disk: OnDisk =
            serde_json::from_slice(&bytes).map_err(|e| err(format!("not an index: {e}")))?;
        if disk.format != FORMAT {
            return Err(err(format!(
                "index format {} (this build reads {FORMAT})",
                disk.format
            )));
        }
        let mut files = BTreeMap::new();
        for f in disk.files {
            let mut pieces = Vec::with_capacity(f.pieces.len());
            for p in f.pieces {
                let vector = match p.vector {
                    Some(v) => Some(decode(&v).ok_or_else(|| {
                        err(format!("{}: a vector is not base64 of f32s", f.path))
                    })?),
                    None => None,
                };
                pieces.push(StoredPiece {
                    hash: p.hash,
                    start_line: p.start_line,
                    end_line: p.end_line,
                    text: p.text,
                    vector,
                });
            }
            files.insert(
                f.path.clone(),
                StoredFile {
                    path: f.path,
                    hash: f.hash,
                    by_tokens: f.by_tokens,
                    pieces,
                },
            );
        }
        Ok(FileStore {
            path: path.to_path_buf(),
            files,
            dirty: false,
        })
    }

    /// The file it is kept in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The paths of the files it holds.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    fn write(&self) -> Result<()> {
        let err = |path: &Path, e: std::io::Error| Error::Store {
            path: path.display().to_string(),
            reason: e.to_string(),
        };
        let disk = OnDisk {
            format: FORMAT,
            files: self
                .files
                .values()
                .map(|f| DiskFile {
                    path: f.path.clone(),
                    hash: f.hash.clone(),
                    by_tokens: f.by_tokens,
                    pieces: f
                        .pieces
                        .iter()
                        .map(|p| DiskPiece {
                            hash: p.hash.clone(),
                            start_line: p.start_line,
                            end_line: p.end_line,
                            text: p.text.clone(),
                            vector: p.vector.as_deref().map(encode),
                        })
                        .collect(),
                })
                .collect(),
        };
        let text = serde_json::to_vec(&disk).map_err(|e| Error::Store {
            path: self.path.display().to_string(),
            reason: e.to_string(),
        })?;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| err(dir, e))?;
        }
        harness_fs::write_atomic(&self.path, &text).map_err(|e| Error::Store {
            path: self.path.display().to_string(),
            reason: e.to_string(),
        })
    }
}

impl Store for FileStore {
    fn load(&self) -> Result<Vec<StoredFile>> {
        Ok(self.files.values().cloned().collect())
    }
    fn put(&mut self, file: &StoredFile) -> Result<()> {
        self.files.insert(file.path.clone(), file.clone());
        self.dirty = true;
        Ok(())
    }
    fn remove(&mut self, path: &str) -> Result<()> {
        if self.files.remove(path).is_some() {
            self.dirty = true;
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        if self.dirty {
            self.write()?;
            self.dirty = false;
        }
        Ok(())
    }
}
