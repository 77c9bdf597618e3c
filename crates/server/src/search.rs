//! The chats' `search` (issue 18): one harness-search index of the server's tree, kept in the
//! database (`search_files`, `search_pieces`; migration 0005) and answered through each user's
//! view **after** scoring, so a file a user cannot see never appears and changes nothing of what
//! they see.
//!
//! The index lives in memory (loaded from the rows at start); a change through the chat's file
//! tools or an upload calls [`ServerSearch::file_changed`], which re-cuts the file only when its
//! content hash changed, embeds only its changed pieces, and writes the file's rows in one
//! transaction; a directory (moved, say) is indexed file by file under its new name. At start
//! [`ServerSearch::catch_up`] walks the tree in the background and indexes what changed since
//! the last run (by content hash), and [`ServerSearch::rebuild`] (the admin's
//! `POST /api/admin/search/rebuild`) indexes it all anew. The index's lock is held only to look
//! a file up, to put its pieces in and to rank: queries and pieces are embedded outside it.
//! Portable SQL only (`$N` placeholders; integers, text, bytes), for SQLite and PostgreSQL
//! alike.

use std::path::Path;
use std::sync::{Arc, Mutex};

use harness_fs::{Backend, Kind, VPath, View};
use harness_search::{
    Answer, Embedder, Index, Known, Params, Ranking, Store, StoredFile, StoredPiece,
};
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
    /// The index's embedder, shared: queries and pieces are embedded without its lock.
    embedder: Option<Arc<Embedder>>,
    params: Params,
    /// One change at a time, from reading the file to writing its rows: a file's later change
    /// is never overtaken by an earlier one. Searches never wait for it.
    changing: tokio::sync::Mutex<()>,
    /// The walks of the tree asked for ([`ServerSearch::catch_up`], [`ServerSearch::rebuild`])
    /// and not yet done.
    walks: tokio::sync::watch::Sender<usize>,
    /// One walk at a time.
    walking: tokio::sync::Mutex<()>,
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
        let embedder = embedder.map(Arc::new);
        let index = Index::open_shared(
            Journal {
                loaded,
                pending: Vec::new(),
            },
            embedder.clone(),
            params.clone(),
        )
        .map_err(search_err)?;
        Ok(ServerSearch {
            pool,
            root: root.to_string(),
            index: Mutex::new(index),
            embedder,
            params,
            changing: tokio::sync::Mutex::new(()),
            walks: tokio::sync::watch::Sender::new(0),
            walking: tokio::sync::Mutex::new(()),
        })
    }

    /// The embedder, where installed.
    pub fn embedder(&self) -> Option<&Embedder> {
        self.embedder.as_deref()
    }

    /// The index, locked (searches wait while it is held; the embedding of their query does
    /// not).
    pub fn lock(&self) -> Result<std::sync::MutexGuard<'_, Index<Journal>>> {
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
    /// removal, a move): read whole from the tree, not through any user's view; gone, not text,
    /// or too large, it leaves the index; a directory (one moved here, say) is indexed file by
    /// file, and what was indexed under it and is no longer there leaves. Only a changed file is
    /// cut again, and of it only the changed pieces are embedded. Its rows are written before
    /// this returns.
    pub async fn file_changed(&self, tree: &dyn Backend, path: &str) -> Result<()> {
        let vpath = VPath::parse(path);
        let _one = self.changing.lock().await;
        match tree.stat(&vpath).ok().flatten().map(|m| m.kind) {
            Some(Kind::Dir) => {
                let files = files_under(tree, &vpath);
                for f in &files {
                    self.index_file(tree, f, false).await?;
                }
                let prefix = format!("{}/", vpath.as_str().trim_end_matches('/'));
                let gone = self.indexed(|p| p.starts_with(&prefix) && !files.contains(p))?;
                self.forget(gone).await
            }
            Some(Kind::File) => self.index_file(tree, vpath.as_str(), false).await,
            None => {
                // Gone (a directory too: what was indexed under it goes with it).
                let prefix = format!("{}/", vpath.as_str().trim_end_matches('/'));
                let gone = self.indexed(|p| p == vpath.as_str() || p.starts_with(&prefix))?;
                self.forget(gone).await
            }
        }
    }

    /// The paths indexed that `which` picks.
    fn indexed(&self, which: impl Fn(&str) -> bool) -> Result<Vec<String>> {
        Ok(self
            .lock()?
            .paths()
            .filter(|p| which(p))
            .map(str::to_string)
            .collect())
    }

    /// Takes `paths` out of the index and their rows out of the database.
    async fn forget(&self, paths: Vec<String>) -> Result<()> {
        if paths.is_empty() {
            return Ok(());
        }
        {
            let mut index = self.lock()?;
            for p in &paths {
                index.remove(p).map_err(search_err)?;
            }
        }
        let pending = self.take_pending()?;
        write(&self.pool, &self.root, pending).await
    }

    /// Indexes the file `path` as `tree` holds it now (`anew`: every piece embedded again,
    /// changed or not): the file looked up under the index's lock, cut and embedded without it,
    /// then put in under it again and its rows written. The caller holds `changing`.
    async fn index_file(&self, tree: &dyn Backend, path: &str, anew: bool) -> Result<()> {
        let vpath = VPath::parse(path);
        let text = tree
            .read(&vpath)
            .ok()
            .filter(|b| b.len() <= MAX_INDEXED_BYTES)
            .and_then(|b| String::from_utf8(b).ok());
        let Some(text) = text else {
            return self.forget(self.indexed(|p| p == vpath.as_str())?).await;
        };
        let known = if anew {
            Some(Known::default())
        } else {
            self.lock()?.known(vpath.as_str(), &text)
        };
        let Some(known) = known else {
            return Ok(()); // unchanged
        };
        let (embedder, params, name) = (
            self.embedder.clone(),
            self.params.clone(),
            vpath.as_str().to_string(),
        );
        let cut = tokio::task::spawn_blocking(move || {
            harness_search::cut(embedder.as_deref(), &params, &known, &name, &text)
        })
        .await
        .map_err(|e| Error::Stored(format!("search index: {path}: {e}")))?
        .map_err(search_err)?;
        self.lock()?.apply(cut).map_err(search_err)?;
        let pending = self.take_pending()?;
        write(&self.pool, &self.root, pending).await
    }

    /// Walks `tree` in the background and indexes what changed since the index was last told
    /// (files added, changed or removed while the server was down: by content hash, so an
    /// unchanged file costs its reading only). Called at start.
    pub fn catch_up(self: &Arc<Self>, tree: Arc<dyn Backend>) {
        self.walk(tree, false);
    }

    /// Indexes the whole of `tree` anew in the background: every file cut and embedded again,
    /// the files no longer there forgotten (`POST /api/admin/search/rebuild`).
    pub fn rebuild(self: &Arc<Self>, tree: Arc<dyn Backend>) {
        self.walk(tree, true);
    }

    /// Waits until the walks asked for so far are done.
    pub async fn settled(&self) {
        let mut rx = self.walks.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    fn walk(self: &Arc<Self>, tree: Arc<dyn Backend>, anew: bool) {
        self.walks.send_modify(|n| *n += 1);
        let me = self.clone();
        tokio::spawn(async move {
            let _one = me.walking.lock().await;
            if let Err(e) = me.walk_now(tree.as_ref(), anew).await {
                tracing::warn!("search index: walking the tree: {e}");
            }
            me.walks.send_modify(|n| *n = n.saturating_sub(1));
        });
    }

    async fn walk_now(&self, tree: &dyn Backend, anew: bool) -> Result<()> {
        let tree_files = files_under(tree, &VPath::root());
        for f in &tree_files {
            let _one = self.changing.lock().await;
            if let Err(e) = self.index_file(tree, f, anew).await {
                tracing::warn!("search index: {f}: {e}");
            }
        }
        // What is indexed and was not in the tree: gone, unless it came since the walk began.
        let _one = self.changing.lock().await;
        let gone = self.indexed(|p| !tree_files.contains(p))?;
        let gone = gone
            .into_iter()
            .filter(|p| !matches!(tree.stat(&VPath::parse(p)), Ok(Some(m)) if m.kind == Kind::File))
            .collect();
        self.forget(gone).await
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
        // The query is embedded first; the lock is held only to rank.
        let vector = match &self.embedder {
            Some(e) => Some(e.embed_query(query).map_err(search_err)?),
            None => None,
        };
        let index = self.lock()?;
        Ok(index.search_with(query, vector.as_deref(), limit, Ranking::Combined, &see))
    }
}

/// The files under `dir` in `tree` (itself, if a file), by path.
fn files_under(tree: &dyn Backend, dir: &VPath) -> std::collections::BTreeSet<String> {
    let found = Mutex::new(std::collections::BTreeSet::new());
    let _ = tree.scan_paths(dir, &|_, _| true, None, &|p| {
        if let Ok(mut f) = found.lock() {
            f.insert(p.as_str().to_string());
        }
    });
    found.into_inner().unwrap_or_default()
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
