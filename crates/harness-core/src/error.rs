//! The crate's one error type.

/// What can go wrong turning the spec's data into what a model is sent, or a call into what it
/// means. Every message names the value at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A mode name that is none of `manual`, `edit`, `auto`, `plan` (or `unrestricted`).
    #[error("unknown mode `{0}` (expected manual, edit, auto or plan)")]
    UnknownMode(String),
    /// A session kind that is neither `chat` nor `agent`.
    #[error("unknown session kind `{0}` (expected chat or agent)")]
    UnknownSessionKind(String),
    /// A project that is neither `cli` nor `llembas`.
    #[error("unknown project `{0}` (expected cli or llembas)")]
    UnknownProject(String),
    /// A result id that is not `#` followed by lowercase letters or digits.
    #[error("invalid result id `{0}` (expected `#` and lowercase letters or digits, as `#a3f2`)")]
    InvalidResultId(String),
    /// A `{{variable}}` with no value would have reached a model.
    #[error("{place}: `{{{{{name}}}}}` has no value")]
    Unfilled {
        /// Where: the tool and field, or the prompt text.
        place: String,
        /// The variable's name.
        name: String,
    },
    /// A `{{` without its `}}`, or a name that is not a variable name.
    #[error("{place}: malformed variable `{text}`")]
    MalformedVariable {
        /// Where.
        place: String,
        /// The text at fault.
        text: String,
    },
    /// A narrow rule that would not leave a subset of the parameters.
    #[error("narrow of `{tool}` at `{path}`: {reason}")]
    Narrow {
        /// The tool narrowed.
        tool: String,
        /// The path at fault.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A tool name that is neither a tool nor an alias in this project.
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    /// Arguments that do not fit the call.
    #[error("{tool}: {reason}")]
    Arguments {
        /// The tool called.
        tool: String,
        /// What is wrong with its arguments.
        reason: String,
    },
    /// A spec file the crate needs is missing or not in the shape it expects.
    #[error("spec: {0}")]
    Spec(String),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
