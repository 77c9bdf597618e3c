//! The crate's one error type.

/// What went wrong with an MCP server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration that names no way to reach the server, or two.
    #[error("the MCP server {server:?} {reason}")]
    Config {
        /// The server's name.
        server: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Its process could not be started.
    #[error("the MCP server `{server}` did not start: cannot run `{command}`: {reason}")]
    Spawn {
        /// The server's name.
        server: String,
        /// The program.
        command: String,
        /// Why.
        reason: String,
    },
    /// It started but did not complete the MCP handshake.
    #[error("the MCP server `{server}` did not start: {reason}")]
    Handshake {
        /// The server's name.
        server: String,
        /// Why (with the end of what it wrote on stderr, where it wrote something).
        reason: String,
    },
    /// It did not answer in time.
    #[error("the MCP server `{server}` did not answer `{what}` within {seconds} s")]
    Timeout {
        /// The server's name.
        server: String,
        /// The request.
        what: String,
        /// The limit.
        seconds: u64,
    },
    /// A configuration names a variable that is not set.
    #[error(
        "the MCP server `{server}` needs the variable {var} (its bearer token), which is not set"
    )]
    MissingVar {
        /// The server's name.
        server: String,
        /// The variable.
        var: String,
    },
    /// Listing its tools failed.
    #[error("the MCP server `{server}` could not list its tools: {reason}")]
    List {
        /// The server's name.
        server: String,
        /// Why.
        reason: String,
    },
}

/// The crate's result.
pub type Result<T> = std::result::Result<T, Error>;
