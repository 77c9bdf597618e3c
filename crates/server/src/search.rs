//! The chats' `search` (issue 18): one harness-search index of the server's tree, kept in the
//! database (`search_files`, `search_pieces`; migration 0005) and answered through each user's
//! view **after** scoring, so a file a user cannot see never appears and changes nothing of what
//! they see.
//!
//! The index lives in memory (loaded from the rows at start); a change through the chat's file
//! tools or an upload calls [`ServerSearch::file_changed`], which re-cuts the file only when its
//! content hash changed, embeds only its changed pieces, and writes the file's rows in one
//! transaction. Portable SQL only (`$N` placeholders; integers, text, bytes), for SQLite and
//! PostgreSQL alike.

use std::path::Path;
use std::sync::Mutex;

use harness_fs::{Backend, VPath, View};
use harness_search::{Answer, Embedder, Index, Params, Ranking, Store, StoredFile, StoredPiece};
use sqlx::Row as _;

use crate::db::{Db, begin_write};
use crate::error::{Error, Result};

/// The embedder's folder for the server's index: `LLEMBAS_EMBEDDER_DIR` (opt-in: without it the
/// server ranks by words alone, and every answer says so).
pub fn embedder_dir() -> Option<std::path::PathBuf> {
    std::env::var_os("LLEMBAS_EMBEDDER_DIR").map(Into::into)
}

/// The root the server's one tree is indexed under.
pub const TREE_ROOT: &str = "/";

/// What an index change waits to be written.
enum Pending {
    Put(StoredFile),
    Remove(String),
}

/// The index's [`Store`]: what was loaded from the rows at start, and the changes since, which
/// [`ServerSearch`] writes to the database after each change (the trait is synchronous, the
/// database is not).
#[derive(Default)]
pub struct Journal {
    loaded: Vec<StoredFile>,
    pending: Vec<Pending>,
}

impl Store for Journal {
    fn load(&self) -> harness_search::Result<Vec<StoredFile>> {
        Ok(self.loaded.clone())
    }
    fn put(&mut self, file: &StoredFile) -> harness_search::Result<()> {
        self.pending.push(Pending::Put(file.clone()));
        Ok(())
    }
    fn remove(&mut self, path: &str) -> harness_search::Result<()> {
        self.pending.push(Pending::Remove(path.to_string()));
        Ok(())
    }
}

fn search_err(e: harness_search::Error) -> Error {
    Error::Stored(format!("search index: {e}"))
}

fn encode(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn decode(b: &[u8]) -> Option<Vec<f32>> {
    b.len().is_multiple_of(4).then(|| {
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    })
}

fn int(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Every file of `root` the database holds.
pub async fn load(pool: &Db, root: &str) -> Result<Vec<StoredFile>> {
    let files = sqlx::query("SELECT path, hash, by_tokens FROM search_files WHERE root = $1")
        .bind(root)
        .fetch_all(pool)
        .await?;
    let pieces = sqlx::query(
        "SELECT path, hash, start_line, end_line, text, vector FROM search_pieces \
         WHERE root = $1 ORDER BY path, ordinal",
    )
    .bind(root)
    .fetch_all(pool)
    .await?;
    let mut out: std::collections::BTreeMap<String, StoredFile> = Default::default();
    for row in files {
        let path: String = row.try_get("path")?;
        out.insert(
            path.clone(),
            StoredFile {
                path,
                hash: row.try_get("hash")?,
                by_tokens: row.try_get::<i64, _>("by_tokens")? != 0,
                pieces: Vec::new(),
            },
        );
    }
    for row in pieces {
        let path: String = row.try_get("path")?;
        let Some(file) = out.get_mut(&path) else {
            continue;
        };
        let vector: Option<Vec<u8>> = row.try_get("vector")?;
        let line = |name: &str| -> Result<usize> {
            let n: i64 = row.try_get(name)?;
            usize::try_from(n)
                .map_err(|_| Error::Stored(format!("search_pieces {path}: {name} {n}")))
        };
        file.pieces.push(StoredPiece {
            hash: row.try_get("hash")?,
            start_line: line("start_line")?,
            end_line: line("end_line")?,
            text: row.try_get("text")?,
            vector: match vector {
                Some(b) => Some(decode(&b).ok_or_else(|| {
                    Error::Stored(format!(
                        "search_pieces {path}: a vector of {} bytes",
                        b.len()
                    ))
                })?),
                None => None,
            },
        });
    }
    Ok(out.into_values().collect())
}

/// Writes the changes `pending` holds for `root`, each file in one transaction.
async fn write(pool: &Db, root: &str, pending: Vec<Pending>) -> Result<()> {
    for change in pending {
        let mut tx = begin_write(pool).await?;
        let path = match &change {
            Pending::Put(f) => f.path.as_str(),
            Pending::Remove(p) => p.as_str(),
        };
        sqlx::query("DELETE FROM search_pieces WHERE root = $1 AND path = $2")
            .bind(root)
            .bind(path)
            .execute(&mut *tx)
            .await?;
        match &change {
            Pending::Remove(p) => {
                sqlx::query("DELETE FROM search_files WHERE root = $1 AND path = $2")
                    .bind(root)
                    .bind(p.as_str())
                    .execute(&mut *tx)
                    .await?;
            }
            Pending::Put(f) => {
                sqlx::query(
                    "INSERT INTO search_files (root, path, hash, by_tokens) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (root, path) DO UPDATE SET hash = excluded.hash, by_tokens = excluded.by_tokens",
                )
                .bind(root)
                .bind(f.path.as_str())
                .bind(f.hash.as_str())
                .bind(i64::from(f.by_tokens))
                .execute(&mut *tx)
                .await?;
                for (i, p) in f.pieces.iter().enumerate() {
                    sqlx::query(
                        "INSERT INTO search_pieces (root, path, ordinal, hash, start_line, end_line, text, vector) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    )
                    .bind(root)
                    .bind(f.path.as_str())
                    .bind(int(i))
                    .bind(p.hash.as_str())
                    .bind(int(p.start_line))
                    .bind(int(p.end_line))
                    .bind(p.text.as_str())
                    .bind(p.vector.as_deref().map(encode))
                    .execute(&mut *tx)
                    .await?;
                }
            }
        }
        tx.commit().await?;
    }
    Ok(())
}

/// The index of the server's tree, in memory and in the database.
pub struct ServerSearch {
    pool: Db,
    root: String,
    index: Mutex<Index<Journal>>,
}

impl std::fmt::Debug for ServerSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSearch")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// Whether a file is one search indexes: text (UTF-8) of at most this many bytes.
const MAX_INDEXED_BYTES: usize = 1 << 20;

impl ServerSearch {
    /// Opens the index of `root` over its rows; `embedder_dir` where the embedder's files are
    /// (absent: words alone, and every answer says so).
    pub async fn open(pool: Db, root: &str, embedder_dir: Option<&Path>) -> Result<ServerSearch> {
        let loaded = load(&pool, root).await?;
        let embedder = match embedder_dir.filter(|d| harness_search::embedder::model_present(d)) {
            Some(d) => Some(Embedder::load(d).map_err(search_err)?),
            None => None,
        };
        let params = Params::embedded().map_err(search_err)?;
        let index = Index::open(
            Journal {
                loaded,
                pending: Vec::new(),
            },
            embedder,
            params,
        )
        .map_err(search_err)?;
        Ok(ServerSearch {
            pool,
            root: root.to_string(),
            index: Mutex::new(index),
        })
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Index<Journal>>> {
        self.index
            .lock()
            .map_err(|_| Error::Stored("the search index is poisoned".into()))
    }

    /// Takes the changes waiting to be written.
    fn take_pending(&self) -> Result<Vec<Pending>> {
        let mut index = self.lock()?;
        Ok(std::mem::take(&mut index.store_mut().pending))
    }

    /// Indexes the file `path` of `tree` again after a change (a tool's write, an upload, a
    /// removal): read whole from the tree, not through any user's view; gone, not text, or too
    /// large, it leaves the index. Only a changed file is cut again, and of it only the changed
    /// pieces are embedded. Its rows are written before this returns.
    pub async fn file_changed(&self, tree: &dyn Backend, path: &str) -> Result<()> {
        let vpath = VPath::parse(path);
        let text = tree
            .read(&vpath)
            .ok()
            .filter(|b| b.len() <= MAX_INDEXED_BYTES)
            .and_then(|b| String::from_utf8(b).ok());
        {
            let mut index = self.lock()?;
            match text {
                Some(t) => {
                    index.update(vpath.as_str(), &t).map_err(search_err)?;
                }
                None => {
                    // Gone (a directory too: what was indexed under it goes with it).
                    let prefix = format!("{}/", vpath.as_str().trim_end_matches('/'));
                    let gone: Vec<String> = index
                        .paths()
                        .filter(|p| *p == vpath.as_str() || p.starts_with(&prefix))
                        .map(str::to_string)
                        .collect();
                    for p in gone {
                        index.remove(&p).map_err(search_err)?;
                    }
                }
            }
        }
        let pending = self.take_pending()?;
        write(&self.pool, &self.root, pending).await
    }

    /// Searches as the `search` tool does: the best passages of the files `view` lets its user
    /// read (under `within`, a directory or a file, when given).
    pub fn search(
        &self,
        view: &View,
        query: &str,
        within: Option<&str>,
        limit: usize,
    ) -> Result<Answer> {
        let within = within.map(|w| view.resolve(w));
        let see = |p: &str| {
            let vp = VPath::parse(p);
            within
                .as_ref()
                .is_none_or(|w| vp.as_str() == w.as_str() || vp.starts_with(w))
                && view.access().visible(&vp)
        };
        let index = self.lock()?;
        index
            .search(query, limit, Ranking::Combined, &see)
            .map_err(search_err)
    }
}

/// The paths a successful call of a file tool changed, as its arguments name them (relative
/// ones resolved by the caller against the view's directory).
pub fn changed_paths(tool: &str, args: &serde_json::Value) -> Vec<String> {
    let arg = |k: &str| {
        args.get(k)
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    };
    match tool {
        "write" | "edit" | "multiedit" | "rm" => arg("path").into_iter().collect(),
        "mv" => arg("from").into_iter().chain(arg("to")).collect(),
        "apply_patch" => arg("patch")
            .map(|p| {
                p.lines()
                    .filter_map(|l| {
                        [
                            "*** Add File: ",
                            "*** Update File: ",
                            "*** Delete File: ",
                            "*** Move to: ",
                        ]
                        .iter()
                        .find_map(|m| l.strip_prefix(m))
                        .map(|p| p.trim().to_string())
                    })
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// The `search` tool's answer: the passages best first, each its path, lines and score, and
/// the note when it was ranked by words alone.
pub fn answer_text(answer: &Answer) -> String {
    let mut out: Vec<String> = answer
        .hits
        .iter()
        .map(|h| {
            format!(
                "{}:{}-{} (score {:.4})",
                h.path, h.start_line, h.end_line, h.score
            )
        })
        .collect();
    if out.is_empty() {
        out.push("No passages found.".into());
    }
    if let Some(note) = &answer.note {
        out.push(format!("({note}.)"));
    }
    out.join("\n")
}
