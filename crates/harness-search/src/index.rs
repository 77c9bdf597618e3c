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

use std::collections::HashMap;

use harness_fs::chunk::{chunk_chars, index_text};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::embedder::Embedder;
use crate::error::{Error, Result};
use crate::words::words;

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
    /// Reciprocal rank fusion's constant: a piece scores Σ 1/(k + rank).
    pub rrf_k: f64,
    /// How deep each ranking goes into the fusion.
    pub fuse_depth: usize,
    /// BM25's term saturation.
    pub bm25_k1: f64,
    /// BM25's length normalisation.
    pub bm25_b: f64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            piece_tokens: harness_fs::chunk::PIECE_TOKENS,
            overlap_tokens: harness_fs::chunk::OVERLAP_TOKENS,
            piece_chars: harness_fs::chunk::PIECE_CHARS,
            overlap_chars: harness_fs::chunk::OVERLAP_CHARS,
            rrf_k: 60.0,
            fuse_depth: 200,
            bm25_k1: 1.2,
            bm25_b: 0.75,
        }
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

struct Piece {
    file: usize,
    start_line: usize,
    end_line: usize,
    len: usize,
    terms: Vec<(u32, u32)>,
    vector: Option<Vec<f32>>,
}

struct File {
    stored: StoredFile,
    pieces: Vec<usize>,
}

/// The index of one root.
pub struct Index<S: Store> {
    store: S,
    embedder: Option<Embedder>,
    params: Params,
    files: Vec<Option<File>>,
    by_path: HashMap<String, usize>,
    pieces: Vec<Option<Piece>>,
    free_pieces: Vec<usize>,
    terms: HashMap<String, u32>,
    postings: Vec<Vec<usize>>,
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
        let mut index = Index {
            store,
            embedder,
            params,
            files: Vec::new(),
            by_path: HashMap::new(),
            pieces: Vec::new(),
            free_pieces: Vec::new(),
            terms: HashMap::new(),
            postings: Vec::new(),
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
        self.embedder.as_ref()
    }

    /// Pieces indexed.
    pub fn piece_count(&self) -> usize {
        self.pieces.iter().filter(|p| p.is_some()).count()
    }

    /// Files indexed.
    pub fn file_count(&self) -> usize {
        self.by_path.len()
    }

    /// Indexes `text` as the file `path` (added or changed): an unchanged file does nothing,
    /// and of a changed one only the pieces whose text changed are embedded again.
    pub fn update(&mut self, path: &str, text: &str) -> Result<Update> {
        let hash = sha256(text);
        let by_tokens = self.embedder.is_some();
        let old = self
            .by_path
            .get(path)
            .and_then(|&i| self.files[i].as_ref())
            .map(|f| &f.stored);
        if old.is_some_and(|o| o.hash == hash && o.by_tokens == by_tokens) {
            return Ok(Update {
                unchanged: true,
                pieces: old.map_or(0, |o| o.pieces.len()),
                ..Update::default()
            });
        }
        let known: HashMap<&str, &Vec<f32>> = old
            .map(|o| {
                o.pieces
                    .iter()
                    .filter_map(|p| p.vector.as_ref().map(|v| (p.hash.as_str(), v)))
                    .collect()
            })
            .unwrap_or_default();

        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        let lines = |start: usize, end: usize| {
            (
                line_of(&line_starts, start),
                line_of(&line_starts, end.saturating_sub(1).max(start)),
            )
        };
        let mut update = Update::default();
        let mut pieces = Vec::new();
        match &self.embedder {
            Some(embedder) => {
                let mut embed = |piece: &str, _tokens: usize| {
                    if let Some(v) = known.get(sha256(piece).as_str()) {
                        update.reused += 1;
                        return Ok((*v).clone());
                    }
                    let v = embedder.embed(piece)?;
                    update.embedded += 1;
                    Ok(v)
                };
                let indexed = index_text(
                    embedder.counter(),
                    text,
                    self.params.piece_tokens,
                    self.params.overlap_tokens,
                    &mut embed,
                )
                .map_err(|source| Error::Chunk {
                    path: path.to_string(),
                    source,
                })?;
                for ix in indexed {
                    let piece_text = ix.piece.text(text);
                    let (start_line, end_line) = lines(ix.piece.byte_start, ix.piece.byte_end);
                    pieces.push(StoredPiece {
                        hash: sha256(piece_text),
                        start_line,
                        end_line,
                        text: piece_text.to_string(),
                        vector: ix.vector,
                    });
                }
            }
            None => {
                let ranges = chunk_chars(text, self.params.piece_chars, self.params.overlap_chars)
                    .map_err(|source| Error::Chunk {
                        path: path.to_string(),
                        source,
                    })?;
                // Character ranges to byte ranges.
                let bytes: Vec<usize> = text
                    .char_indices()
                    .map(|(b, _)| b)
                    .chain([text.len()])
                    .collect();
                for (s, e) in ranges {
                    let (bs, be) = (bytes[s], bytes[e]);
                    let piece_text = &text[bs..be];
                    let (start_line, end_line) = lines(bs, be);
                    pieces.push(StoredPiece {
                        hash: sha256(piece_text),
                        start_line,
                        end_line,
                        text: piece_text.to_string(),
                        vector: None,
                    });
                }
            }
        }
        update.pieces = pieces.len();
        let file = StoredFile {
            path: path.to_string(),
            hash,
            by_tokens,
            pieces,
        };
        self.store.put(&file)?;
        self.drop_file(path);
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
        for &p in &file.pieces {
            if let Some(piece) = self.pieces[p].take() {
                for (t, _) in piece.terms {
                    self.postings[t as usize].retain(|&q| q != p);
                }
                self.free_pieces.push(p);
            }
        }
    }

    fn insert(&mut self, stored: StoredFile) {
        let fi = self.files.len();
        let mut ids = Vec::with_capacity(stored.pieces.len());
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
            let piece = Piece {
                file: fi,
                start_line: sp.start_line,
                end_line: sp.end_line,
                len: ws.len(),
                terms,
                vector: sp.vector.clone(),
            };
            let p = match self.free_pieces.pop() {
                Some(p) => {
                    self.pieces[p] = Some(piece);
                    p
                }
                None => {
                    self.pieces.push(Some(piece));
                    self.pieces.len() - 1
                }
            };
            if let Some(piece) = &self.pieces[p] {
                for &(t, _) in &piece.terms {
                    self.postings[t as usize].push(p);
                }
            }
            ids.push(p);
        }
        self.by_path.insert(stored.path.clone(), fi);
        self.files.push(Some(File {
            stored,
            pieces: ids,
        }));
    }

    /// Searches: the `limit` best passages of the files `may_see` allows, ranked as asked
    /// (`Combined` and `Vectors` fall back to words alone without the embedder, and the answer
    /// says so).
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        ranking: Ranking,
        may_see: &dyn Fn(&str) -> bool,
    ) -> Result<Answer> {
        let (ranking, note) = match (&self.embedder, ranking) {
            (None, Ranking::Combined | Ranking::Vectors) => (
                Ranking::Words,
                Some(
                    "ranked by words alone: the embedding model is not installed, so nothing was found by meaning"
                        .to_string(),
                ),
            ),
            (_, r) => (r, None),
        };
        // The view, file by file, asked once a search.
        let visible: Vec<bool> = self
            .files
            .iter()
            .map(|f| f.as_ref().is_some_and(|f| may_see(&f.stored.path)))
            .collect();
        let seen = |p: &Piece| visible[p.file];

        let by_words = || self.rank_words(query, &visible);
        let by_vectors = || -> Result<Vec<(usize, f64)>> {
            let Some(embedder) = &self.embedder else {
                return Ok(Vec::new());
            };
            let q = embedder.embed_query(query)?;
            let mut scored: Vec<(usize, f64)> = self
                .pieces
                .iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    let p = p.as_ref().filter(|p| seen(p))?;
                    let v = p.vector.as_ref()?;
                    Some((i, dot(&q, v) as f64))
                })
                .collect();
            self.sort_desc(&mut scored);
            Ok(scored)
        };
        let ranked = match ranking {
            Ranking::Words => by_words(),
            Ranking::Vectors => by_vectors()?,
            Ranking::Combined => {
                let depth = self.params.fuse_depth;
                let mut fused: HashMap<usize, f64> = HashMap::new();
                for list in [by_words(), by_vectors()?] {
                    for (rank, (p, _)) in list.into_iter().take(depth).enumerate() {
                        *fused.entry(p).or_insert(0.0) +=
                            1.0 / (self.params.rrf_k + rank as f64 + 1.0);
                    }
                }
                let mut fused: Vec<(usize, f64)> = fused.into_iter().collect();
                self.sort_desc(&mut fused);
                fused
            }
        };
        let hits = ranked
            .into_iter()
            .take(limit)
            .filter_map(|(p, score)| {
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
        Ok(Answer {
            hits,
            ranked_by: ranking,
            note,
        })
    }

    /// BM25 over the visible pieces, with the visible pieces' own statistics.
    fn rank_words(&self, query: &str, visible: &[bool]) -> Vec<(usize, f64)> {
        let mut qterms: Vec<u32> = words(query)
            .iter()
            .filter_map(|w| self.terms.get(w).copied())
            .collect();
        qterms.sort_unstable();
        qterms.dedup();
        if qterms.is_empty() {
            return Vec::new();
        }
        let (mut n, mut total_len) = (0usize, 0usize);
        for p in self.pieces.iter().flatten() {
            if visible[p.file] {
                n += 1;
                total_len += p.len;
            }
        }
        if n == 0 {
            return Vec::new();
        }
        let avg = total_len as f64 / n as f64;
        let (k1, b) = (self.params.bm25_k1, self.params.bm25_b);
        let mut scores: HashMap<usize, f64> = HashMap::new();
        for t in qterms {
            let list: Vec<usize> = self.postings[t as usize]
                .iter()
                .copied()
                .filter(|&p| self.pieces[p].as_ref().is_some_and(|p| visible[p.file]))
                .collect();
            let df = list.len() as f64;
            if df == 0.0 {
                continue;
            }
            let idf = ((n as f64 - df + 0.5) / (df + 0.5) + 1.0).ln();
            for p in list {
                let Some(piece) = &self.pieces[p] else {
                    continue;
                };
                let tf = piece
                    .terms
                    .binary_search_by_key(&t, |&(term, _)| term)
                    .map(|i| piece.terms[i].1 as f64)
                    .unwrap_or(0.0);
                let norm = k1 * (1.0 - b + b * piece.len as f64 / avg.max(1e-9));
                *scores.entry(p).or_insert(0.0) += idf * tf * (k1 + 1.0) / (tf + norm);
            }
        }
        let mut scored: Vec<(usize, f64)> = scores.into_iter().collect();
        self.sort_desc(&mut scored);
        scored
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

impl<S: Store> Index<S> {
    /// Where a piece lies, for a fixed order of equal scores that no other file changes.
    fn place(&self, p: usize) -> (&str, usize) {
        match &self.pieces[p] {
            Some(piece) => (
                self.files[piece.file]
                    .as_ref()
                    .map_or("", |f| f.stored.path.as_str()),
                piece.start_line,
            ),
            None => ("", 0),
        }
    }

    /// Best first; equal scores by path and line.
    fn sort_desc(&self, v: &mut [(usize, f64)]) {
        v.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then_with(|| self.place(a.0).cmp(&self.place(b.0)))
        });
    }
}
