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
    Store(String),
    /// A task of the session panicked or was dropped.
    #[error("a task of the session failed: {0}")]
    Task(String),
}

/// The runtime's results.
pub type Result<T> = std::result::Result<T, Error>;
