//! The server's errors: one enum, each variant naming what failed, and the HTTP answer each
//! becomes (`{"error": "…"}` with its status).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// What can go wrong in the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database refused or failed a query.
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    /// The database could not be reached or is not one the server knows (its URL shown without a
    /// password).
    #[error("database: {0}")]
    Database(String),
    /// A migration failed.
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The runtime could not build or drive a chat.
    #[error("{0}")]
    Agent(#[from] harness_agent::Error),
    /// The file system refused (the spec's exact texts).
    #[error("{0}")]
    Fs(#[from] harness_fs::Error),
    /// The model link could not be set up.
    #[error("model: {0}")]
    Model(String),
    /// A stored value could not be read back.
    #[error("stored data is not valid: {0}")]
    Stored(String),
    /// Password hashing failed.
    #[error("password hashing failed: {0}")]
    Hash(String),
    /// No randomness from the OS.
    #[error("no randomness from the operating system: {0}")]
    Random(String),
    /// The request is not valid.
    #[error("{0}")]
    BadRequest(String),
    /// Not signed in (or a wrong password or token).
    #[error("{0}")]
    Unauthorized(String),
    /// Signed in, but not allowed.
    #[error("{0}")]
    Forbidden(String),
    /// No such thing (for this user).
    #[error("{0}")]
    NotFound(String),
    /// The thing is in a state that refuses this.
    #[error("{0}")]
    Conflict(String),
    /// Too many attempts: try again after `retry_after` seconds (sent as `Retry-After`).
    #[error("{message}")]
    TooMany {
        /// Why, and how long to wait.
        message: String,
        /// Seconds to wait.
        retry_after: u64,
    },
    /// The body is too large.
    #[error("{0}")]
    TooLarge(String),
    /// The server is shutting down (or cannot serve this now).
    #[error("{0}")]
    Unavailable(String),
    /// The request's body was refused as it came (not JSON, wrong type).
    #[error("{message}")]
    Rejected {
        /// The status axum gave.
        status: StatusCode,
        /// Why.
        message: String,
    },
}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The HTTP status this error answers with.
    pub fn status(&self) -> StatusCode {
        use harness_fs::Error as F;
        match self {
            Error::BadRequest(_) => StatusCode::BAD_REQUEST,
            Error::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Error::Forbidden(_) => StatusCode::FORBIDDEN,
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::Conflict(_) => StatusCode::CONFLICT,
            Error::TooMany { .. } => StatusCode::TOO_MANY_REQUESTS,
            Error::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Error::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Error::Rejected { status, .. } => *status,
            Error::Fs(e) => match e {
                F::NotFound(_) | F::NotInTrash(_) => StatusCode::NOT_FOUND,
                F::AccessDenied(_) | F::ReadOnly(_) => StatusCode::FORBIDDEN,
                F::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
                F::NameTooLong { .. } | F::BadName { .. } => StatusCode::BAD_REQUEST,
                F::IsADirectory(_)
                | F::NotADirectory(_)
                | F::AlreadyExists(_)
                | F::Binary(_)
                | F::NotUtf8(_) => StatusCode::CONFLICT,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            },
            Error::Model(_) => StatusCode::BAD_GATEWAY,
            Error::Db(_)
            | Error::Database(_)
            | Error::Migrate(_)
            | Error::Agent(_)
            | Error::Stored(_)
            | Error::Hash(_)
            | Error::Random(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// What a client reads of a 500: the detail is logged, never sent.
pub const INTERNAL: &str =
    "Internal error: the server could not do this; the detail is in its log.";

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::error!("{self}");
        }
        let retry_after = match &self {
            Error::TooMany { retry_after, .. } => Some(*retry_after),
            _ => None,
        };
        // A 500's own text (paths, database and I/O messages) stays in the log.
        let text = if status == StatusCode::INTERNAL_SERVER_ERROR {
            INTERNAL.to_owned()
        } else {
            self.to_string()
        };
        let mut response = (status, Json(json!({ "error": text }))).into_response();
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}
