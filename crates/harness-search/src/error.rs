//! The crate's one error type.

/// What went wrong, naming the path or value at fault.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A model file could not be read.
    #[error("cannot read the embedder's {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A model file is not what the embedder expects.
    #[error("the embedder's {path} is not usable: {reason}")]
    Model {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The tokenizer failed on a text.
    #[error("cannot tokenize {what}: {reason}")]
    Tokenize {
        /// What was being tokenized.
        what: String,
        /// Why.
        reason: String,
    },
    /// The model failed on a text.
    #[error("the embedder failed on {what}: {reason}")]
    Embed {
        /// What was being embedded.
        what: String,
        /// Why.
        reason: String,
    },
    /// Chunking failed (harness-fs).
    #[error("cannot cut {path} into pieces: {source}")]
    Chunk {
        /// The file.
        path: String,
        /// Why.
        source: harness_fs::Error,
    },
    /// The spec lacks a number the index needs.
    #[error("the spec is not usable for search: {what}")]
    Spec {
        /// What is missing, naming the spec and the file.
        what: String,
    },
    /// The storage behind the index failed.
    #[error("the index's storage failed on {path}: {reason}")]
    Store {
        /// The file (or `*` for the whole store).
        path: String,
        /// Why.
        reason: String,
    },
}

/// The crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
