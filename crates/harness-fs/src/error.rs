//! The one error type of the crate. The texts of the view's refusals are the spec's, word for
//! word (`spec/filesystem.md`, *Errors*): they are what a model reads.

use crate::path::VPath;

/// Everything the file system can refuse or fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The path does not exist, or is hidden behind a visible ancestor.
    #[error("No such file or directory: {0}")]
    NotFound(VPath),
    /// The path is not open to the session (behind a passage, at level none, or a refused
    /// host entry the model tried to create over).
    #[error("Access denied: {0} is not open to this session.")]
    AccessDenied(VPath),
    /// The path is at level `ro`.
    #[error("Read-only: {0} can be read in this session but not changed.")]
    ReadOnly(VPath),
    /// A file operation was given a directory.
    #[error("Is a directory: {0}")]
    IsADirectory(VPath),
    /// A directory operation was given a file, or a file stands where a directory must be.
    #[error("Not a directory: {0}")]
    NotADirectory(VPath),
    /// The name is taken.
    #[error("Already exists: {0}")]
    AlreadyExists(VPath),
    /// Commit asked for at level `stage`.
    #[error(
        "Not committed: this session may change {0} but not commit it; the change stays staged."
    )]
    NotCommitted(VPath),
    /// Commit asked for outside every mount.
    #[error("Nothing to commit: {0} is not in a repository.")]
    NothingToCommit(VPath),
    /// A file over the backend's `max_file_bytes`.
    #[error("Too large: {path} is over the limit of {limit} bytes.")]
    TooLarge {
        /// The file.
        path: VPath,
        /// The backend's bound.
        limit: u64,
    },
    /// A file holding binary data (a NUL byte).
    #[error("Binary file: {0} is not text and is not shown.")]
    Binary(VPath),
    /// A file that is not valid UTF-8.
    #[error("Not text: {0} is not valid UTF-8 and is not shown.")]
    NotUtf8(VPath),
    /// Overwriting or editing a file this session has not read.
    #[error("Not read: read {0} before changing it.")]
    NotRead(VPath),
    /// Overwriting or editing a file that changed since this session read it.
    #[error("Stale: {0} has changed since this session last read it; read it again, then retry.")]
    Stale(VPath),
    /// An edit whose old text is empty.
    #[error("Edit refused: old_string is empty; to write a whole file use write.")]
    EditEmpty(VPath),
    /// An edit whose old text does not occur.
    #[error(
        "Edit refused: old_string was not found in {0}; it must match exactly, including whitespace and indentation."
    )]
    EditNotFound(VPath),
    /// An edit whose old text occurs more than once without `replace_all`.
    #[error(
        "Edit refused: old_string occurs {count} times in {path}; give more surrounding text to make it unique, or set replace_all."
    )]
    EditAmbiguous {
        /// The file.
        path: VPath,
        /// How many times the old text occurs.
        count: usize,
    },
    /// An edit whose old and new text are the same.
    #[error("Edit refused: old_string and new_string are the same in {0}.")]
    EditNoChange(VPath),
    /// A read window that starts past the end of the file.
    #[error("Out of range: offset {offset} is past the end of {path} ({lines} lines).")]
    OffsetOutOfRange {
        /// The file.
        path: VPath,
        /// The offset asked for (1-based).
        offset: usize,
        /// The file's line count.
        lines: usize,
    },
    /// A name given from outside over the longest a name may be (`names::MAX_NAME_BYTES`).
    #[error("Name too long: {name:?} is {bytes} bytes; a name holds at most 255.")]
    NameTooLong {
        /// The name.
        name: String,
        /// Its length in bytes.
        bytes: usize,
    },
    /// A name given from outside that cannot be a name (`names::checked_input`).
    #[error("Invalid name: {name:?} {why}.")]
    BadName {
        /// The name.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// Bad input from the caller: a malformed pattern, a bad argument.
    #[error("Invalid input: {0}")]
    Invalid(String),
    /// Restoring from the trash failed: no such trash entry.
    #[error("Not in the trash: {0}")]
    NotInTrash(String),
    /// A host root is already open by another backend (this process or another).
    #[error(
        "Root in use: {0} (or a directory containing it or inside it) is already open by another backend"
    )]
    RootInUse(String),
    /// A host root that cannot be used.
    #[error("Bad root: {0}")]
    BadRoot(String),
    /// The backend was closed.
    #[error("Closed: the file system was closed")]
    Closed,
    /// An operating-system failure, with the path it concerned.
    #[error("I/O error on {path}: {message}")]
    Io {
        /// The view path (or host path for root operations).
        path: String,
        /// The OS's message.
        message: String,
    },
    /// A tokenizer that could not be loaded or used.
    #[error("Tokenizer: {0}")]
    Tokenizer(String),
    /// A memory change refused (`spec/filesystem.md`, *Memory*).
    #[error("{0}")]
    Memory(String),
    /// A memory file changed between the read and the write of a change (`MemoryFile::update`):
    /// nothing was written. The text is the one a client reads, so it names no host path.
    #[error(
        "Memory: the records changed while this change was made, so nothing was changed. Read them again and retry."
    )]
    MemoryChanged {
        /// The file (for the log, not the message).
        path: String,
    },
    /// A skill operation refused.
    #[error("{0}")]
    Skill(String),
}

impl Error {
    /// An I/O error on a path.
    pub fn io(path: impl std::fmt::Display, err: impl std::fmt::Display) -> Self {
        Error::Io {
            path: path.to_string(),
            message: err.to_string(),
        }
    }
}

/// The crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
