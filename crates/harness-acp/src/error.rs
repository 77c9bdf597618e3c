//! The crate's errors.

/// What can fail in the ACP agent: opening a session, or the connection itself. What a client
/// asked wrongly is answered to it as a JSON-RPC error, never one of these.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `session/load` of a session that was never saved here.
    #[error("Resource not found: no saved session {0}")]
    NoSavedSession(String),
    /// The front end could not put the session together (the model server, the directory).
    #[error("the session could not be opened: {0}")]
    Open(String),
    /// The runtime refused the session.
    #[error(transparent)]
    Agent(#[from] harness_agent::Error),
    /// The connection to the client failed.
    #[error("the ACP connection failed: {0}")]
    Connection(String),
    /// The directory `path` could not be listed (`_lembas/dir`).
    #[error("{message}")]
    Dir {
        /// The directory.
        path: std::path::PathBuf,
        /// Why.
        message: String,
    },
    /// The saved sessions in `dir` could not be listed (`session/list`).
    #[error("{message}")]
    Sessions {
        /// Where the front end keeps them.
        dir: std::path::PathBuf,
        /// Why.
        message: String,
    },
}

impl Error {
    /// The JSON-RPC error the client is answered with.
    pub(crate) fn to_acp(&self) -> agent_client_protocol::Error {
        match self {
            Error::NoSavedSession(_) => agent_client_protocol::Error::new(-32002, self.to_string()),
            Error::Open(why) => {
                agent_client_protocol::Error::internal_error().data(serde_json::json!(why))
            }
            other => agent_client_protocol::Error::internal_error()
                .data(serde_json::json!(other.to_string())),
        }
    }
}
