//! The crate's one error type.

/// What can go wrong while loading the permission rules or reading a request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A permission file of the spec is missing or does not have the shape the engine reads.
    #[error("spec/permission/{file}: {message}")]
    Data {
        /// The file under `spec/permission/`.
        file: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A rule's own example does not behave as the rule says.
    #[error("spec/permission/{file}: rule `{rule}`: {message}")]
    Example {
        /// The file under `spec/permission/`.
        file: &'static str,
        /// The rule's id or prefix.
        rule: String,
        /// Which example failed and how.
        message: String,
    },
    /// A mode name that is not one of manual, edit, auto, plan (or unrestricted).
    #[error("unknown mode `{0}`: expected manual, edit, auto or plan")]
    UnknownMode(String),
    /// A rule whose action is not allow, ask or deny.
    #[error("unknown rule action `{0}`: expected allow, ask or deny")]
    UnknownAction(String),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
