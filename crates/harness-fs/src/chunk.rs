//! Chunking for search (`spec/filesystem.md`, *Search and indexing*): pieces of at most 480
//! tokens with 64 repeated, counted by a real tokenizer loaded from a `tokenizer.json` (its
//! built-in truncation and padding turned off, special tokens not counted); a piece the
//! embedder refuses is split in two, recursively, never dropped. The character rule
//! ([`chunk_chars`]) is the fallback where no tokenizer is at hand.

use crate::error::{Error, Result};

/// Tokens a piece holds at most.
pub const PIECE_TOKENS: usize = 480;
/// Tokens a piece repeats of the one before.
pub const OVERLAP_TOKENS: usize = 64;
/// Characters a piece holds at most under the character rule.
pub const PIECE_CHARS: usize = 2000;
/// Characters a piece repeats under the character rule.
pub const OVERLAP_CHARS: usize = 200;

/// Counts tokens with a Hugging Face tokenizer.
pub struct TokenCounter {
    tokenizer: tokenizers::Tokenizer,
}

impl std::fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCounter").finish_non_exhaustive()
    }
}

impl TokenCounter {
    /// Loads a `tokenizer.json` from its bytes, turning its truncation and padding off.
    pub fn from_bytes(json: &[u8]) -> Result<Self> {
        let mut tokenizer = tokenizers::Tokenizer::from_bytes(json)
            .map_err(|e| Error::Tokenizer(format!("cannot load tokenizer.json: {e}")))?;
        tokenizer
            .with_truncation(None)
            .map_err(|e| Error::Tokenizer(format!("cannot turn truncation off: {e}")))?;
        tokenizer.with_padding(None);
        Ok(TokenCounter { tokenizer })
    }

    /// Loads a `tokenizer.json` file (host I/O), turning its truncation and padding off.
    pub fn from_file(path: &std::path::Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path.display(), e))?;
        Self::from_bytes(&bytes)
    }

    /// The tokens of `text` (no special tokens) as byte ranges of `text`.
    pub fn token_spans(&self, text: &str) -> Result<Vec<(usize, usize)>> {
        let enc = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| Error::Tokenizer(format!("cannot tokenize: {e}")))?;
        Ok(enc.get_offsets().to_vec())
    }

    /// How many tokens `text` holds (no special tokens).
    pub fn count(&self, text: &str) -> Result<usize> {
        Ok(self.token_spans(text)?.len())
    }
}

/// One piece: a range of tokens and the text it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// First token (0-based).
    pub token_start: usize,
    /// One past the last token.
    pub token_end: usize,
    /// Byte range of the text.
    pub byte_start: usize,
    /// End of the byte range.
    pub byte_end: usize,
}

impl Piece {
    /// The piece's text.
    pub fn text<'t>(&self, text: &'t str) -> &'t str {
        text.get(self.byte_start..self.byte_end).unwrap_or("")
    }

    /// Its token count.
    pub fn tokens(&self) -> usize {
        self.token_end - self.token_start
    }
}

fn piece(spans: &[(usize, usize)], start: usize, end: usize) -> Piece {
    Piece {
        token_start: start,
        token_end: end,
        byte_start: spans[start].0,
        byte_end: spans[end - 1].1,
    }
}

/// Token windows over `n` tokens: at most `max` each, each repeating `overlap` of the one before.
pub fn windows(n: usize, max: usize, overlap: usize) -> Result<Vec<(usize, usize)>> {
    if max == 0 || overlap >= max {
        return Err(Error::Invalid(format!(
            "a piece of {max} tokens cannot repeat {overlap}"
        )));
    }
    let mut out = Vec::new();
    let mut start = 0;
    while start < n {
        let end = (start + max).min(n);
        out.push((start, end));
        if end == n {
            break;
        }
        start = end - overlap;
    }
    Ok(out)
}

/// Splits `text` into pieces of at most `max` tokens, each repeating `overlap` tokens of the one
/// before (480 and 64 for search).
pub fn chunk_tokens(
    counter: &TokenCounter,
    text: &str,
    max: usize,
    overlap: usize,
) -> Result<Vec<Piece>> {
    let spans = counter.token_spans(text)?;
    Ok(windows(spans.len(), max, overlap)?
        .into_iter()
        .map(|(s, e)| piece(&spans, s, e))
        .collect())
}

/// Splits a token range in two halves that repeat up to `overlap` tokens between them, each
/// strictly shorter than the range (`None` for a single token).
pub fn split_range(
    start: usize,
    end: usize,
    overlap: usize,
) -> Option<((usize, usize), (usize, usize))> {
    let len = end - start;
    if len < 2 {
        return None;
    }
    let ov = overlap.min((len / 2).saturating_sub(1));
    let mid = start + len / 2;
    Some(((start, mid + ov / 2), (mid - (ov - ov / 2), end)))
}

/// An embedder's refusal of a piece (input too long, a tokenizer error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

/// An embedder: a piece's text and token count in, a vector or a refusal out.
pub type Embed<'a> = dyn FnMut(&str, usize) -> Result<Vec<f32>, Refused> + 'a;

/// An indexed piece: its vector, or, for a single token still refused, none and a flag.
#[derive(Debug, Clone, PartialEq)]
pub struct Indexed {
    /// The piece.
    pub piece: Piece,
    /// The embedding, `None` when even the single token was refused.
    pub vector: Option<Vec<f32>>,
    /// How many times the piece's range was halved to get here.
    pub splits: usize,
}

/// Embeds every piece of `text`; a piece `embed` refuses is split in two (repeating `overlap`
/// inside its range) and each half embedded, recursively. Nothing is dropped: a single token
/// that is still refused is kept without a vector.
pub fn index_text(
    counter: &TokenCounter,
    text: &str,
    max: usize,
    overlap: usize,
    embed: &mut Embed<'_>,
) -> Result<Vec<Indexed>> {
    let spans = counter.token_spans(text)?;
    let mut out = Vec::new();
    for (s, e) in windows(spans.len(), max, overlap)? {
        let mut stack = vec![(s, e, 0usize)];
        while let Some((s, e, depth)) = stack.pop() {
            let p = piece(&spans, s, e);
            match embed(p.text(text), e - s) {
                Ok(v) => out.push(Indexed {
                    piece: p,
                    vector: Some(v),
                    splits: depth,
                }),
                Err(_) => match split_range(s, e, overlap) {
                    Some((a, b)) => {
                        stack.push((b.0, b.1, depth + 1));
                        stack.push((a.0, a.1, depth + 1));
                    }
                    None => out.push(Indexed {
                        piece: p,
                        vector: None,
                        splits: depth,
                    }),
                },
            }
        }
    }
    Ok(out)
}

/// The character rule: pieces of at most `max` characters, each repeating `overlap` of the one
/// before; a cut falls after the last line break in the window's second half when there is
/// one. Answers character ranges.
pub fn chunk_chars(text: &str, max: usize, overlap: usize) -> Result<Vec<(usize, usize)>> {
    if max == 0 || overlap >= max {
        return Err(Error::Invalid(format!(
            "a piece of {max} characters cannot repeat {overlap}"
        )));
    }
    let chars: Vec<char> = text.chars().collect();
    let n = chars.len();
    let mut out = Vec::new();
    let mut start = 0;
    while start < n {
        let mut end = (start + max).min(n);
        if end < n {
            let half = start + max / 2;
            if let Some(i) = (half..end).rev().find(|&i| chars[i] == '\n') {
                end = i + 1;
            }
        }
        out.push((start, end));
        if end == n {
            break;
        }
        start = if end - start > overlap {
            end - overlap
        } else {
            end
        };
    }
    Ok(out)
}
