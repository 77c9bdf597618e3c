//! The runtime's errors.

/// What can stop a session of the runtime. A tool's failure is never one of these: it is
/// answered to the model as the call's result.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The loop refused an input or its spec numbers did not load.
    #[error(transparent)]
    Loop(#[from] harness_loop::Error),
    /// The spec's texts or offerings could not be made.
    #[error(transparent)]
    Core(#[from] harness_core::Error),
    /// The spec itself.
    #[error(transparent)]
    Spec(#[from] harness_spec::Error),
    /// The permission engine did not load.
    #[error(transparent)]
    Permission(#[from] harness_permission::Error),
    /// The session store failed (the transcript or the metadata could not be written or read).
    #[error("the session store: {0}")]
    Store(SeamError),
    /// A hook's definition is wrong (a matcher that is not a regular expression, a settings
    /// file's `hooks` not in Claude Code's shape).
    #[error("hooks: {message}")]
    Hook {
        /// What is wrong, naming the hook or the file's part.
        message: String,
    },
    /// A task of the session panicked or was dropped.
    #[error("a task of the session failed: {0}")]
    Task(String),
}

/// What a seam of the runtime (the session store, the tool world, the job spawner, the model
/// link, the files and snapshots of the checkpoints) answers when it cannot do what it was asked: each names the
/// session, path, command or model at fault. Its text is the one the model or the person reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SeamError {
    /// Session `id` (empty before it has one) could not be created, saved, appended to or read.
    #[error("{message}")]
    Store {
        /// The session.
        id: String,
        /// What went wrong.
        message: String,
    },
    /// The store holds no session `id`.
    #[error("no session {id} in the store")]
    NoSession {
        /// The session asked for.
        id: String,
    },
    /// The file `path` could not be read, shown, written or removed.
    #[error("{message}")]
    File {
        /// The file, as the person knows it.
        path: String,
        /// What went wrong (the text the model or the person reads).
        message: String,
    },
    /// The command could not be started.
    #[error("{message}")]
    Command {
        /// The command line.
        command: String,
        /// Why.
        message: String,
    },
    /// The link cannot reach the model `name`.
    #[error("{message}")]
    Model {
        /// The model asked for.
        name: String,
        /// Why.
        message: String,
    },
}

impl SeamError {
    /// Session `id` failed in the store.
    pub fn store(id: &str, message: impl std::fmt::Display) -> SeamError {
        SeamError::Store {
            id: id.to_owned(),
            message: message.to_string(),
        }
    }

    /// The file `path` failed.
    pub fn file(path: &str, message: impl std::fmt::Display) -> SeamError {
        SeamError::File {
            path: path.to_owned(),
            message: message.to_string(),
        }
    }

    /// The command did not start.
    pub fn command(command: &str, message: impl std::fmt::Display) -> SeamError {
        SeamError::Command {
            command: command.to_owned(),
            message: message.to_string(),
        }
    }

    /// The model `name` cannot be reached.
    pub fn model(name: &str, message: impl std::fmt::Display) -> SeamError {
        SeamError::Model {
            name: name.to_owned(),
            message: message.to_string(),
        }
    }
}

/// The runtime's results.
pub type Result<T> = std::result::Result<T, Error>;
