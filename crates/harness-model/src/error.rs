//! The crate's one error type.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

/// What kind of error an answer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The prompt did not fit the model's window: compact, then send again.
    ContextOverflow,
    /// The server is busy, rate limited or loading: wait and send again.
    Capacity,
    /// Anything else.
    Other,
}

/// One classified error answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelError {
    /// Its class.
    pub class: ErrorClass,
    /// The HTTP status, or the error's numeric code inside a 200 stream.
    pub status: Option<u16>,
    /// The server's message (or the start of its body).
    pub message: String,
    /// How long the server asked us to wait (`Retry-After`).
    pub retry_after: Option<Duration>,
    /// Whether the server said it is loading the model (a longer retry budget).
    pub loading: bool,
    /// Whether sending the same request again may help (capacity, 5xx, a stream cut short).
    pub retryable: bool,
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Some(status) => write!(f, "{status}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Everything that can go wrong on the model link.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The spec's `quirks.json` or model catalogue could not be read into our types.
    #[error("spec file {file} does not fit harness-model: {message}")]
    Spec {
        /// The file under `spec/`.
        file: String,
        /// What did not fit.
        message: String,
    },
    /// The endpoint or request is configured wrongly (bad URL, unknown effort, ...).
    #[error("model configuration: {0}")]
    Config(String),
    /// Which model server or model to use cannot be settled (an unknown endpoint, a key
    /// variable not set, a server that lists no model or several): the text says what to do.
    #[error("{0}")]
    Setup(String),
    /// The prompt does not fit the model's window, said by the server or found before sending.
    /// Not retried as is: compact and send again.
    #[error("context overflow: {0}")]
    ContextOverflow(ModelError),
    /// The server is busy, rate limited or loading a model; retried with backoff until the
    /// attempts ran out. `retry_after` is what the server asked for, if it said.
    #[error("the model server has no capacity now (after {attempts} attempts): {error}")]
    Capacity {
        /// The last answer.
        error: ModelError,
        /// How many requests were sent.
        attempts: u32,
    },
    /// Any other error answer of the server (4xx/5xx, an error inside a stream, a stream that
    /// ended early). `retryable` says whether sending again may help.
    #[error("the model server answered with an error: {0}")]
    Server(ModelError),
    /// The connection failed (refused, reset, timed out, DNS) before an answer came.
    #[error("cannot reach the model server at {url}: {message}")]
    Transport {
        /// The URL requested.
        url: String,
        /// What the HTTP stack said.
        message: String,
    },
    /// A call took longer than the endpoint's deadline (`Endpoint::deadline`), its attempts and
    /// the waits between them included: a server that trickles its answer or never sends its
    /// headers. Not retried.
    #[error(
        "the model request to {url} took longer than its deadline of {} s (the endpoint's `deadline`)",
        limit.as_secs_f64()
    )]
    Deadline {
        /// The URL requested.
        url: String,
        /// The deadline that passed.
        limit: std::time::Duration,
    },
    /// An answer that is not the JSON of a chat completion.
    #[error("the model server sent a body that is not a chat completion: {0}")]
    Decode(String),
    /// The request was cancelled by the caller.
    #[error("the model request was cancelled")]
    Cancelled,
}

impl Error {
    /// How long the server asked us to wait, when it said (capacity answers).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Capacity { error, .. }
            | Error::Server(error)
            | Error::ContextOverflow(error) => error.retry_after,
            _ => None,
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
