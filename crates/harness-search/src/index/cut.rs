//! Cutting a file into pieces (by tokens, or character windows where the text has none),
//! each with its hash, lines and (where the embedder is installed) its vector, reusing the
//! vectors an index already holds for the same text.

use std::collections::HashMap;

use harness_fs::chunk::{chunk_chars, index_text};

use super::{Params, StoredFile, StoredPiece, Update, line_of, sha256};
use crate::embedder::{Embedder, Encoded};
use crate::error::{Error, Result};

/// What an index knows of a file before it changes ([`Index::known`]): the vectors of its
/// pieces by the hash of their text. `Known::default()` knows nothing: every piece is embedded
/// anew (a rebuild).
#[derive(Debug, Clone, Default)]
pub struct Known {
    pub(super) vectors: HashMap<String, Vec<f32>>,
}

/// A file cut into pieces, each embedded where the embedder is installed, ready for
/// [`Index::apply`].
#[derive(Debug, Clone)]
pub struct Cut {
    pub(super) file: StoredFile,
    pub(super) update: Update,
}

impl Cut {
    /// The file as the index will hold it.
    pub fn file(&self) -> &StoredFile {
        &self.file
    }
}

/// Cuts `text` (the file `path`) into pieces and embeds those `known` has no vector for, with
/// `embedder` (`None`: pieces by the character rule, no vectors): the work of an update, done
/// without the index, which [`Index::apply`] then takes. The file's new pieces are embedded side
/// by side ([`cut_all`]).
pub fn cut(
    embedder: Option<&Embedder>,
    params: &Params,
    known: &Known,
    path: &str,
    text: &str,
) -> Result<Cut> {
    let mut cuts = cut_all(embedder, params, &[(known, path, text)])?;
    match cuts.pop() {
        Some(c) => Ok(c),
        None => cut_one_by_one(embedder, params, known, path, text),
    }
}

/// As [`cut`] for many files (each with what the index knows of it, its path and its text),
/// answered in their order: the pieces to embed of all of them are embedded together, side by
/// side on rayon's pool ([`Embedder::embed_many`]), instead of one after the other. A file
/// cut by the same rules either way: its pieces first tokenized by the model's tokenizer, those
/// of more tokens than the model holds split (as the embedder would refuse them), then the
/// rest embedded; a file one of whose pieces the model fails on is cut again piece by piece.
pub fn cut_all(
    embedder: Option<&Embedder>,
    params: &Params,
    files: &[(&Known, &str, &str)],
) -> Result<Vec<Cut>> {
    let Some(embedder) = embedder else {
        return files
            .iter()
            .map(|&(known, path, text)| cut_one_by_one(None, params, known, path, text))
            .collect();
    };
    let plans = files
        .iter()
        .map(|&(known, path, text)| plan(embedder, params, known, path, text))
        .collect::<Result<Vec<_>>>()?;
    let pending: Vec<&Encoded> = plans
        .iter()
        .flat_map(|p| p.pending.iter().map(|(_, e)| e))
        .collect();
    let mut vectors = embedder.embed_encoded_many(&pending).into_iter();
    let mut out = Vec::with_capacity(plans.len());
    for (plan, &(known, path, text)) in plans.into_iter().zip(files) {
        let mut made: HashMap<&str, Vec<f32>> = HashMap::with_capacity(plan.pending.len());
        let mut failed = false;
        for (hash, _) in &plan.pending {
            match vectors.next() {
                Some(Ok(v)) => {
                    made.insert(hash.as_str(), v);
                }
                _ => failed = true,
            }
        }
        let cut = match (failed, finish(plan.indexed, &made, &known.vectors, text)) {
            (false, Some(pieces)) => Cut {
                file: stored_file(path, text, true, pieces),
                update: Update {
                    pieces: plan.pieces,
                    embedded: plan.embedded,
                    reused: plan.reused,
                    unchanged: false,
                },
            },
            _ => cut_one_by_one(Some(embedder), params, known, path, text)?,
        };
        out.push(cut);
    }
    Ok(out)
}

/// `text`'s pieces by the model's tokenizer, each vector answered by `embed` (`path` names the
/// file in an error).
fn token_pieces(
    embedder: &Embedder,
    params: &Params,
    path: &str,
    text: &str,
    embed: &mut harness_fs::chunk::Embed<'_>,
) -> Result<Vec<harness_fs::chunk::Indexed>> {
    index_text(
        embedder.counter(),
        text,
        params.piece_tokens,
        params.overlap_tokens,
        embed,
    )
    .map_err(|source| Error::Chunk {
        path: path.to_string(),
        source,
    })
}

/// A file's pieces by the model's tokenizer, before its new pieces are embedded ([`cut_all`]).
struct Plan {
    /// The pieces; a vector left empty is one to embed.
    indexed: Vec<harness_fs::chunk::Indexed>,
    /// The texts to embed, by the hash of their text (each once), tokenized.
    pending: Vec<(String, Encoded)>,
    pieces: usize,
    embedded: usize,
    reused: usize,
}

fn plan(
    embedder: &Embedder,
    params: &Params,
    known: &Known,
    path: &str,
    text: &str,
) -> Result<Plan> {
    let mut pending: Vec<(String, Encoded)> = Vec::new();
    let (mut embedded, mut reused) = (0, 0);
    let mut embed = |piece: &str, _tokens: usize| {
        let hash = sha256(piece);
        if let Some(v) = known.vectors.get(hash.as_str()) {
            reused += 1;
            return Ok(v.clone());
        }
        if !pending.iter().any(|(h, _)| *h == hash) {
            // Refused (too long) here as the embedder would refuse it: index_text splits it.
            let enc = embedder.encode(piece)?;
            pending.push((hash, enc));
        }
        embedded += 1;
        Ok(Vec::new())
    };
    let indexed = token_pieces(embedder, params, path, text, &mut embed)?;
    Ok(Plan {
        pieces: indexed.len(),
        indexed,
        pending,
        embedded,
        reused,
    })
}

/// The pieces of a [`Plan`] with their vectors (`made` by the hash of their text, else
/// `known`'s); `None` where one is missing.
fn finish(
    indexed: Vec<harness_fs::chunk::Indexed>,
    made: &HashMap<&str, Vec<f32>>,
    known: &HashMap<String, Vec<f32>>,
    text: &str,
) -> Option<Vec<StoredPiece>> {
    let lines = Lines::new(text);
    indexed
        .into_iter()
        .map(|ix| {
            let vector = match ix.vector {
                Some(v) if v.is_empty() => {
                    let hash = sha256(ix.piece.text(text));
                    Some(
                        made.get(hash.as_str())
                            .or_else(|| known.get(&hash))?
                            .clone(),
                    )
                }
                v => v,
            };
            Some(lines.piece(text, ix.piece.byte_start, ix.piece.byte_end, vector))
        })
        .collect()
}

/// Where a file's lines start, to name a piece's lines.
struct Lines(Vec<usize>);

impl Lines {
    fn new(text: &str) -> Lines {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Lines(starts)
    }

    /// The piece of `text` at the bytes `start..end` as stored: its hash, lines and text.
    fn piece(&self, text: &str, start: usize, end: usize, vector: Option<Vec<f32>>) -> StoredPiece {
        let piece_text = text.get(start..end).unwrap_or("");
        let (start_line, end_line) = self.of(start, end);
        StoredPiece {
            hash: sha256(piece_text),
            start_line,
            end_line,
            text: piece_text.to_string(),
            vector,
        }
    }

    /// The first and last line (1-based) of the bytes `start..end`.
    fn of(&self, start: usize, end: usize) -> (usize, usize) {
        (
            line_of(&self.0, start),
            line_of(&self.0, end.saturating_sub(1).max(start)),
        )
    }
}

fn stored_file(path: &str, text: &str, by_tokens: bool, pieces: Vec<StoredPiece>) -> StoredFile {
    StoredFile {
        path: path.to_string(),
        hash: sha256(text),
        by_tokens,
        pieces,
    }
}

/// [`cut`] piece after piece, each embedded as index_text asks for it (without the embedder:
/// by the character rule).
fn cut_one_by_one(
    embedder: Option<&Embedder>,
    params: &Params,
    known: &Known,
    path: &str,
    text: &str,
) -> Result<Cut> {
    let by_tokens = embedder.is_some();
    let known = &known.vectors;
    let lines = Lines::new(text);
    let mut update = Update::default();
    let mut pieces = Vec::new();
    match embedder {
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
            let indexed = token_pieces(embedder, params, path, text, &mut embed)?;
            for ix in indexed {
                pieces.push(lines.piece(text, ix.piece.byte_start, ix.piece.byte_end, ix.vector));
            }
        }
        None => {
            let ranges =
                chunk_chars(text, params.piece_chars, params.overlap_chars).map_err(|source| {
                    Error::Chunk {
                        path: path.to_string(),
                        source,
                    }
                })?;
            // Character ranges to byte ranges.
            let bytes: Vec<usize> = text
                .char_indices()
                .map(|(b, _)| b)
                .chain([text.len()])
                .collect();
            for (s, e) in ranges {
                pieces.push(lines.piece(text, bytes[s], bytes[e], None));
            }
        }
    }
    update.pieces = pieces.len();
    Ok(Cut {
        file: stored_file(path, text, by_tokens, pieces),
        update,
    })
}
