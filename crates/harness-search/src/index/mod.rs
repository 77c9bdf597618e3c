//! The index: the pieces of every file of a root, each with its content hash, its words and
//! (where the embedder is installed) its vector; searched by words (BM25), by vectors (cosine)
//! and by both fused (reciprocal rank fusion). Kept in memory; what must outlive the process
//! goes through a [`Store`] (the server backs it with rows of its database).
//!
//! **The view after scoring.** One index serves every session over a root. A search scores
//! every piece, then keeps those of the files `may_see` allows, and ranks among them only: the
//! word statistics (how many pieces hold a word, their mean length) and the ranks fused are the
//! visible pieces' own. So a file the session cannot see never appears, and it changes neither
//! the scores nor the order of the files it can see: the answer is the one an index without it
//! would give.

mod cut;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::embedder::Embedder;
use crate::error::{Error, Result};
use crate::words::words;

pub use cut::{Cut, Known, cut, cut_all};

/// The numbers of indexing and ranking.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Tokens a piece holds at most (480, `spec/filesystem.md`).
    pub piece_tokens: usize,
    /// Tokens a piece repeats of the one before (64).
    pub overlap_tokens: usize,
    /// The character rule's piece (2000) where no tokenizer is at hand.
    pub piece_chars: usize,
    /// The character rule's repeat (200).
    pub overlap_chars: usize,
    /// Reciprocal rank fusion's constant: a piece scores Σ 1/(k + rank), ranks from 1.
    pub rrf_k: f64,
    /// How many of the best by words go into the fusion.
    pub word_candidates: usize,
    /// How many of the best by vectors go into the fusion.
    pub vector_candidates: usize,
    /// BM25's term saturation.
    pub bm25_k1: f64,
    /// BM25's length normalisation.
    pub bm25_b: f64,
}

impl Params {
    /// The numbers of the spec `spec`: the pieces' sizes are `spec/filesystem.md`'s (harness-fs
    /// holds them), the ranking's are `ranking` of `tools/search.json`.
    pub fn from_spec(spec: &harness_spec::Spec) -> Result<Params> {
        let r = spec
            .tool("search")
            .and_then(|t| t.ranking)
            .ok_or_else(|| Error::Spec {
                what: format!("{}: tools/search.json has no `ranking`", spec.origin()),
            })?;
        Ok(Params {
            piece_tokens: harness_fs::chunk::PIECE_TOKENS,
            overlap_tokens: harness_fs::chunk::OVERLAP_TOKENS,
            piece_chars: harness_fs::chunk::PIECE_CHARS,
            overlap_chars: harness_fs::chunk::OVERLAP_CHARS,
            rrf_k: r.rrf_k,
            word_candidates: r.word_candidates,
            vector_candidates: r.vector_candidates,
            bm25_k1: r.bm25_k1,
            bm25_b: r.bm25_b,
        })
    }

    /// The numbers of the spec built in ([`harness_spec::Spec::embedded`]).
    pub fn embedded() -> Result<Params> {
        Params::from_spec(harness_spec::Spec::embedded())
    }
}

/// One piece as the store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredPiece {
    /// SHA-256 of the piece's text: an unchanged piece keeps its vector.
    pub hash: String,
    /// First line (1-based).
    pub start_line: usize,
    /// Last line (1-based, inclusive).
    pub end_line: usize,
    /// The text (its words are counted again when the index is opened).
    pub text: String,
    /// The vector; `None` without the embedder, or for a single token it refused.
    pub vector: Option<Vec<f32>>,
}

/// One file as the store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredFile {
    /// Its path (as the caller names it; the view's callback gets it back).
    pub path: String,
    /// SHA-256 of its whole text: an unchanged file is not cut again.
    pub hash: String,
    /// Whether its pieces were cut by the model's tokenizer (else by the character rule).
    pub by_tokens: bool,
    /// Its pieces in order.
    pub pieces: Vec<StoredPiece>,
}

/// Where the index keeps what must outlive the process. The server backs it with rows of its
/// database (one row a piece); [`MemoryStore`] keeps it in memory.
pub trait Store {
    /// Every file, at opening.
    fn load(&self) -> Result<Vec<StoredFile>>;
    /// Adds or replaces a file.
    fn put(&mut self, file: &StoredFile) -> Result<()>;
    /// Removes a file (no error when absent).
    fn remove(&mut self, path: &str) -> Result<()>;
    /// Saves what changed, for a store that holds changes back (a file written whole); the
    /// others save at each `put` and `remove`.
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
}

impl<S: Store + ?Sized> Store for Box<S> {
    fn load(&self) -> Result<Vec<StoredFile>> {
        (**self).load()
    }
    fn put(&mut self, file: &StoredFile) -> Result<()> {
        (**self).put(file)
    }
    fn remove(&mut self, path: &str) -> Result<()> {
        (**self).remove(path)
    }
    fn flush(&mut self) -> Result<()> {
        (**self).flush()
    }
}

/// A store in memory.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    files: std::collections::BTreeMap<String, StoredFile>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every file it holds, by path.
    pub fn files(&self) -> impl Iterator<Item = &StoredFile> {
        self.files.values()
    }
}

impl Store for MemoryStore {
    fn load(&self) -> Result<Vec<StoredFile>> {
        Ok(self.files.values().cloned().collect())
    }
    fn put(&mut self, file: &StoredFile) -> Result<()> {
        self.files.insert(file.path.clone(), file.clone());
        Ok(())
    }
    fn remove(&mut self, path: &str) -> Result<()> {
        self.files.remove(path);
        Ok(())
    }
}

/// How a search ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ranking {
    /// Words and meaning fused (the default where the embedder is installed).
    Combined,
    /// Words alone (BM25).
    Words,
    /// Meaning alone (cosine of the vectors).
    Vectors,
}

/// One passage found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    /// The file.
    pub path: String,
    /// The piece's first line (1-based).
    pub start_line: usize,
    /// Its last line (inclusive).
    pub end_line: usize,
    /// Its score under the ranking used (higher is better).
    pub score: f64,
}

/// A search's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    /// The best passages first.
    pub hits: Vec<Hit>,
    /// How they were ranked.
    pub ranked_by: Ranking,
    /// Said to the model when the ranking is not the one asked for (no embedder: words alone).
    pub note: Option<String>,
}

/// What an update did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Update {
    /// The file's text had not changed: nothing was done.
    pub unchanged: bool,
    /// Pieces the file has now.
    pub pieces: usize,
    /// Pieces embedded by the model this time.
    pub embedded: usize,
    /// Pieces whose vector was kept (their text unchanged).
    pub reused: usize,
}

/// A piece slot's file where the piece has a vector (else [`NO_FILE`]).
const NO_FILE: u32 = u32::MAX;

struct Piece {
    file: usize,
    /// Its place among its file's pieces (ties of path and line broken the same in any index).
    ordinal: usize,
    start_line: usize,
    end_line: usize,
    len: usize,
    /// The terms it holds (for taking it out of their postings).
    terms: Vec<u32>,
}

struct File {
    stored: StoredFile,
    pieces: Vec<usize>,
    /// The word count of its pieces together (BM25's mean length over the visible files).
    words: usize,
}

/// What a search reuses from the one before instead of allocating it again.
#[derive(Default)]
struct Scratch {
    /// Per piece slot: its word score so far in this search (0 where untouched).
    scores: Vec<f64>,
    /// The slots `scores` holds a score for.
    touched: Vec<usize>,
    /// Per file slot: whether the view lets the session see it.
    visible: Vec<bool>,
    /// Candidates being kept (the best so far).
    words: Vec<(usize, f64)>,
    vectors: Vec<(usize, f64)>,
    /// The two fused.
    fused: Vec<(usize, f64)>,
}

/// The index of one root.
pub struct Index<S: Store> {
    store: S,
    embedder: Option<Arc<Embedder>>,
    params: Params,
    files: Vec<Option<File>>,
    free_files: Vec<usize>,
    by_path: HashMap<String, usize>,
    pieces: Vec<Option<Piece>>,
    free_pieces: Vec<usize>,
    /// The vectors' length (0 until one is known).
    dim: usize,
    /// The vectors, one row of `dim` a piece slot (zeros where a slot has none).
    matrix: Vec<f32>,
    /// Per piece slot: its file where it has a vector, else [`NO_FILE`].
    vector_file: Vec<u32>,
    terms: HashMap<String, u32>,
    /// Per term: the piece slots holding it, with how many times.
    postings: Vec<Vec<(u32, u32)>>,
    scratch: Mutex<Scratch>,
}

impl<S: Store> std::fmt::Debug for Index<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("files", &self.by_path.len())
            .field("pieces", &self.piece_count())
            .field("embedder", &self.embedder)
            .finish_non_exhaustive()
    }
}

fn sha256(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// 1-based line of a byte offset, given the offsets where lines start.
fn line_of(line_starts: &[usize], byte: usize) -> usize {
    line_starts.partition_point(|&s| s <= byte).max(1)
}

impl<S: Store> Index<S> {
    /// Opens the index over what `store` holds; `embedder` is `None` where the model's files
    /// are absent (words alone, and every answer says so).
    pub fn open(store: S, embedder: Option<Embedder>, params: Params) -> Result<Self> {
        Self::open_shared(store, embedder.map(Arc::new), params)
    }

    /// As [`Index::open`], with an embedder shared with its owner (who embeds queries and cuts
    /// files with it without holding the index: [`Index::known`], [`cut`], [`Index::apply`]).
    pub fn open_shared(store: S, embedder: Option<Arc<Embedder>>, params: Params) -> Result<Self> {
        let dim = embedder.as_deref().map_or(0, Embedder::dim);
        let mut index = Index {
            store,
            embedder,
            params,
            files: Vec::new(),
            free_files: Vec::new(),
            by_path: HashMap::new(),
            pieces: Vec::new(),
            free_pieces: Vec::new(),
            dim,
            matrix: Vec::new(),
            vector_file: Vec::new(),
            terms: HashMap::new(),
            postings: Vec::new(),
            scratch: Mutex::new(Scratch::default()),
        };
        for file in index.store.load()? {
            index.insert(file);
        }
        Ok(index)
    }

    /// The store behind it.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The embedder, where installed.
    pub fn embedder(&self) -> Option<&Embedder> {
        self.embedder.as_deref()
    }

    /// The embedder, shared, where installed.
    pub fn shared_embedder(&self) -> Option<Arc<Embedder>> {
        self.embedder.clone()
    }

    /// The numbers it indexes and ranks with.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Pieces indexed.
    pub fn piece_count(&self) -> usize {
        self.pieces.len() - self.free_pieces.len()
    }

    /// The store behind it, to change it directly (the index does not see such changes until
    /// it is opened again); [`Index::flush`] is the way to save what the index changed.
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Asks the store to save what it holds ([`Store::flush`]).
    pub fn flush(&mut self) -> Result<()> {
        self.store.flush()
    }

    /// Files indexed.
    pub fn file_count(&self) -> usize {
        self.by_path.len()
    }

    /// The paths of the files indexed, in no order.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.by_path.keys().map(String::as_str)
    }

    /// Indexes `text` as the file `path` (added or changed): an unchanged file does nothing,
    /// and of a changed one only the pieces whose text changed are embedded again.
    pub fn update(&mut self, path: &str, text: &str) -> Result<Update> {
        let Some(known) = self.known(path, text) else {
            return Ok(Update {
                unchanged: true,
                pieces: self.pieces_of(path),
                ..Update::default()
            });
        };
        let c = cut(self.embedder.as_deref(), &self.params, &known, path, text)?;
        self.apply(c)
    }

    /// Indexes many files (path and text), as [`Index::update`] each in their order, the
    /// changed pieces of all of them embedded together, side by side ([`cut_all`]): the way
    /// to index a whole tree. On an error none of them is indexed.
    pub fn update_all(&mut self, files: &[(&str, &str)]) -> Result<Vec<Update>> {
        let known: Vec<Option<Known>> = files.iter().map(|(p, t)| self.known(p, t)).collect();
        let jobs: Vec<(&Known, &str, &str)> = files
            .iter()
            .zip(&known)
            .filter_map(|(&(p, t), k)| k.as_ref().map(|k| (k, p, t)))
            .collect();
        let mut cuts = cut_all(self.embedder.as_deref(), &self.params, &jobs)?.into_iter();
        let mut out = Vec::with_capacity(files.len());
        for (&(path, _), k) in files.iter().zip(&known) {
            match k.as_ref().and_then(|_| cuts.next()) {
                Some(c) => out.push(self.apply(c)?),
                None => out.push(Update {
                    unchanged: true,
                    pieces: self.pieces_of(path),
                    ..Update::default()
                }),
            }
        }
        Ok(out)
    }

    fn pieces_of(&self, path: &str) -> usize {
        self.by_path
            .get(path)
            .and_then(|&i| self.files[i].as_ref())
            .map_or(0, |f| f.stored.pieces.len())
    }

    /// What [`cut`] needs to know of the file `path` as indexed before it is given `text`:
    /// `None` when it is indexed with that very text already (nothing to do), else the vectors
    /// of its pieces by their hash (kept for the pieces whose text is unchanged). Quick: made
    /// under a lock held on the index, the cutting and embedding after it is let go.
    pub fn known(&self, path: &str, text: &str) -> Option<Known> {
        let by_tokens = self.embedder.is_some();
        let old = self
            .by_path
            .get(path)
            .and_then(|&i| self.files[i].as_ref())
            .map(|f| &f.stored);
        if old.is_some_and(|o| o.by_tokens == by_tokens && o.hash == sha256(text)) {
            return None;
        }
        Some(Known {
            vectors: old
                .map(|o| {
                    o.pieces
                        .iter()
                        .filter_map(|p| p.vector.clone().map(|v| (p.hash.clone(), v)))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// Puts a file [`cut`] made into the index (and its store), in place of what it held of
    /// that path.
    pub fn apply(&mut self, cut: Cut) -> Result<Update> {
        let Cut { file, update } = cut;
        self.store.put(&file)?;
        self.drop_file(&file.path);
        self.insert(file);
        Ok(update)
    }

    /// Forgets a file (deleted or moved away); whether it was indexed.
    pub fn remove(&mut self, path: &str) -> Result<bool> {
        if !self.by_path.contains_key(path) {
            return Ok(false);
        }
        self.store.remove(path)?;
        self.drop_file(path);
        Ok(true)
    }

    fn drop_file(&mut self, path: &str) {
        let Some(i) = self.by_path.remove(path) else {
            return;
        };
        let Some(file) = self.files[i].take() else {
            return;
        };
        self.free_files.push(i);
        for &p in &file.pieces {
            if let Some(piece) = self.pieces[p].take() {
                for t in piece.terms {
                    self.postings[t as usize].retain(|&(q, _)| q as usize != p);
                }
                self.vector_file[p] = NO_FILE;
                self.free_pieces.push(p);
            }
        }
    }

    fn insert(&mut self, stored: StoredFile) {
        let fi = match self.free_files.pop() {
            Some(i) => i,
            None => {
                self.files.push(None);
                self.files.len() - 1
            }
        };
        let mut ids = Vec::with_capacity(stored.pieces.len());
        let mut file_words = 0;
        for sp in &stored.pieces {
            let mut tf: HashMap<u32, u32> = HashMap::new();
            let ws = words(&sp.text);
            for w in &ws {
                let next = self.terms.len() as u32;
                let t = *self.terms.entry(w.clone()).or_insert(next);
                if t as usize == self.postings.len() {
                    self.postings.push(Vec::new());
                }
                *tf.entry(t).or_insert(0) += 1;
            }
            let mut terms: Vec<(u32, u32)> = tf.into_iter().collect();
            terms.sort_unstable();
            file_words += ws.len();
            let piece = Piece {
                file: fi,
                ordinal: ids.len(),
                start_line: sp.start_line,
                end_line: sp.end_line,
                len: ws.len(),
                terms: terms.iter().map(|&(t, _)| t).collect(),
            };
            let p = match self.free_pieces.pop() {
                Some(p) => {
                    self.pieces[p] = Some(piece);
                    p
                }
                None => {
                    self.pieces.push(Some(piece));
                    self.vector_file.push(NO_FILE);
                    self.pieces.len() - 1
                }
            };
            for (t, n) in terms {
                self.postings[t as usize].push((p as u32, n));
            }
            self.set_vector(p, fi, sp.vector.as_deref());
            ids.push(p);
        }
        self.by_path.insert(stored.path.clone(), fi);
        self.files[fi] = Some(File {
            stored,
            pieces: ids,
            words: file_words,
        });
    }

    /// Puts a piece's vector in its row of the matrix (a vector of another length than the
    /// index's is left out: the piece is found by words only).
    fn set_vector(&mut self, p: usize, file: usize, vector: Option<&[f32]>) {
        let Some(v) = vector.filter(|v| !v.is_empty()) else {
            self.vector_file[p] = NO_FILE;
            return;
        };
        if self.dim == 0 {
            self.dim = v.len();
        }
        if v.len() != self.dim {
            self.vector_file[p] = NO_FILE;
            return;
        }
        let rows = self.pieces.len() * self.dim;
        if self.matrix.len() < rows {
            self.matrix.resize(rows.max(self.matrix.len() * 2), 0.0);
        }
        self.matrix[p * self.dim..(p + 1) * self.dim].copy_from_slice(v);
        self.vector_file[p] = file as u32;
    }

    /// Searches: the `limit` best passages of the files `may_see` allows, ranked as asked
    /// (`Combined` and `Vectors` fall back to words alone without the embedder, and the answer
    /// says so). The query is embedded once, here.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        ranking: Ranking,
        may_see: &dyn Fn(&str) -> bool,
    ) -> Result<Answer> {
        let vector = match (&self.embedder, ranking) {
            (Some(e), Ranking::Combined | Ranking::Vectors) => Some(e.embed_query(query)?),
            _ => None,
        };
        Ok(self.search_with(query, vector.as_deref(), limit, ranking, may_see))
    }

    /// Searches with the query's vector already made (by [`Embedder::embed_query`], e.g. outside
    /// a lock held on the index); without one, `Combined` and `Vectors` rank by words alone and
    /// the answer says so.
    pub fn search_with(
        &self,
        query: &str,
        query_vector: Option<&[f32]>,
        limit: usize,
        ranking: Ranking,
        may_see: &dyn Fn(&str) -> bool,
    ) -> Answer {
        let (ranking, note, qv) = match (query_vector, ranking) {
            (None, Ranking::Combined | Ranking::Vectors) => (
                Ranking::Words,
                Some(
                    "ranked by words alone: the embedding model is not installed, so nothing was found by meaning"
                        .to_string(),
                ),
                None,
            ),
            (qv, r) => (r, None, qv),
        };
        // The buffers of the search before (another search running at once makes its own).
        let mut own = None;
        let mut guard = self.scratch.try_lock().ok();
        let scratch: &mut Scratch = match guard.as_deref_mut() {
            Some(s) => s,
            None => own.insert(Scratch::default()),
        };
        // The view, file by file, asked once a search.
        scratch.visible.clear();
        scratch.visible.extend(
            self.files
                .iter()
                .map(|f| f.as_ref().is_some_and(|f| may_see(&f.stored.path))),
        );
        let (words_depth, vectors_depth) = match ranking {
            Ranking::Words => (limit, 0),
            Ranking::Vectors => (0, limit),
            Ranking::Combined => (self.params.word_candidates, self.params.vector_candidates),
        };
        if words_depth > 0 {
            self.rank_words(query, words_depth, scratch);
        } else {
            scratch.words.clear();
        }
        scratch.vectors.clear();
        if let (Some(q), true) = (qv, vectors_depth > 0) {
            self.rank_vectors(q, vectors_depth, scratch);
        }
        let ranked: &[(usize, f64)] = match ranking {
            Ranking::Words => &scratch.words,
            Ranking::Vectors => &scratch.vectors,
            Ranking::Combined => {
                let k = self.params.rrf_k;
                let Scratch {
                    words,
                    vectors,
                    fused,
                    ..
                } = &mut *scratch;
                fused.clear();
                for list in [&*words, &*vectors] {
                    for (rank, &(p, _)) in list.iter().enumerate() {
                        let add = 1.0 / (k + rank as f64 + 1.0);
                        match fused.iter_mut().find(|(q, _)| *q == p) {
                            Some(f) => f.1 += add,
                            None => fused.push((p, add)),
                        }
                    }
                }
                fused.sort_unstable_by(|a, b| self.order(a, b));
                fused
            }
        };
        let hits = ranked
            .iter()
            .take(limit)
            .filter_map(|&(p, score)| {
                let piece = self.pieces[p].as_ref()?;
                let file = self.files[piece.file].as_ref()?;
                Some(Hit {
                    path: file.stored.path.clone(),
                    start_line: piece.start_line,
                    end_line: piece.end_line,
                    score,
                })
            })
            .collect();
        Answer {
            hits,
            ranked_by: ranking,
            note,
        }
    }

    /// BM25 over the visible pieces, with the visible pieces' own statistics: the `depth` best
    /// in `scratch.words`, best first.
    fn rank_words(&self, query: &str, depth: usize, scratch: &mut Scratch) {
        let Scratch {
            scores,
            touched,
            visible,
            words: best,
            ..
        } = scratch;
        best.clear();
        let mut qterms: Vec<u32> = words(query)
            .iter()
            .filter_map(|w| self.terms.get(w).copied())
            .collect();
        qterms.sort_unstable();
        qterms.dedup();
        if qterms.is_empty() {
            return;
        }
        let (mut n, mut total_len) = (0usize, 0usize);
        for (f, file) in self.files.iter().enumerate() {
            if let (Some(file), true) = (file, visible[f]) {
                n += file.pieces.len();
                total_len += file.words;
            }
        }
        if n == 0 {
            return;
        }
        if scores.len() < self.pieces.len() {
            scores.resize(self.pieces.len(), 0.0);
        }
        let seen = |p: u32| {
            self.pieces[p as usize]
                .as_ref()
                .is_some_and(|piece| visible[piece.file])
        };
        let avg = (total_len as f64 / n as f64).max(1e-9);
        let (k1, b) = (self.params.bm25_k1, self.params.bm25_b);
        for t in qterms {
            let list = &self.postings[t as usize];
            let df = list.iter().filter(|&&(p, _)| seen(p)).count() as f64;
            if df == 0.0 {
                continue;
            }
            let idf = ((n as f64 - df + 0.5) / (df + 0.5) + 1.0).ln();
            for &(p, tf) in list {
                let Some(piece) = self.pieces[p as usize].as_ref() else {
                    continue;
                };
                if !visible[piece.file] {
                    continue;
                }
                let (p, tf) = (p as usize, tf as f64);
                let norm = k1 * (1.0 - b + b * piece.len as f64 / avg);
                if scores[p] == 0.0 {
                    touched.push(p);
                }
                scores[p] += idf * tf * (k1 + 1.0) / (tf + norm);
            }
        }
        let mut bar = f64::NEG_INFINITY;
        for &p in touched.iter() {
            self.keep_best(best, &mut bar, (p, scores[p]), depth);
            scores[p] = 0.0;
        }
        touched.clear();
        self.finish_best(best, depth);
    }

    /// The cosine (a dot product of unit vectors) of every visible piece that has a vector: the
    /// `depth` best in `scratch.vectors`, best first.
    fn rank_vectors(&self, q: &[f32], depth: usize, scratch: &mut Scratch) {
        let Scratch {
            visible,
            vectors: best,
            ..
        } = scratch;
        best.clear();
        if self.dim == 0 || q.len() != self.dim {
            return;
        }
        let mut bar = f64::NEG_INFINITY;
        for (p, &f) in self.vector_file.iter().enumerate() {
            if f == NO_FILE || !visible[f as usize] {
                continue;
            }
            let row = &self.matrix[p * self.dim..(p + 1) * self.dim];
            self.keep_best(best, &mut bar, (p, dot(q, row) as f64), depth);
        }
        self.finish_best(best, depth);
    }

    /// Adds a candidate, keeping at most twice `depth` of them (the best). `bar` is the score
    /// of the worst kept once `depth` were kept (`-inf` before): a candidate scoring below it
    /// cannot be among the best and is not even pushed (one scoring the same still can, by its
    /// place).
    fn keep_best(
        &self,
        best: &mut Vec<(usize, f64)>,
        bar: &mut f64,
        c: (usize, f64),
        depth: usize,
    ) {
        if c.1 < *bar {
            return;
        }
        best.push(c);
        if best.len() >= 2 * depth.max(1) {
            best.select_nth_unstable_by(depth - 1, |a, b| self.order(a, b));
            best.truncate(depth);
            if let Some(worst) = best.last() {
                *bar = worst.1;
            }
        }
    }

    fn finish_best(&self, best: &mut Vec<(usize, f64)>, depth: usize) {
        if best.len() > depth {
            best.select_nth_unstable_by(depth - 1, |a, b| self.order(a, b));
            best.truncate(depth);
        }
        self.sort_desc(best);
    }
}

/// The dot product, eight lanes at a time (the compiler makes them one vector instruction).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

impl<S: Store> Index<S> {
    /// Where a piece lies, for a fixed order of equal scores that no other file changes.
    fn place(&self, p: usize) -> (&str, usize, usize) {
        match &self.pieces[p] {
            Some(piece) => (
                self.files[piece.file]
                    .as_ref()
                    .map_or("", |f| f.stored.path.as_str()),
                piece.start_line,
                piece.ordinal,
            ),
            None => ("", 0, 0),
        }
    }

    /// Best first; equal scores by path and line.
    fn order(&self, a: &(usize, f64), b: &(usize, f64)) -> std::cmp::Ordering {
        b.1.total_cmp(&a.1)
            .then_with(|| self.place(a.0).cmp(&self.place(b.0)))
    }

    /// (Unstable, allocating nothing: the order is total, no two pieces have one place.)
    fn sort_desc(&self, v: &mut [(usize, f64)]) {
        v.sort_unstable_by(|a, b| self.order(a, b));
    }
}
