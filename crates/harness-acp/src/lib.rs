//! `harness-acp`: the ACP agent side of the harness — what makes a harness session an
//! [Agent Client Protocol](https://agentclientprotocol.com) agent for an editor (Zed) or a
//! LLeMbas instance, over any byte stream or `agent-client-protocol` transport.
//!
//! Each ACP session is a `harness_agent::Session`: the client's requests become its ops and
//! queries, its events become `session/update` notifications (and `session/request_permission` requests for
//! the person's questions), a saved session is replayed on `session/load`, and LLeMbas's
//! `_lembas` extensions (`spec/acp.md`: capabilities, status, limits, directories, rewind, jobs,
//! plan state, `show`, the memory API, machine turns) are answered here. What only a front end
//! knows — how a session is put together (its model link, tool world, store, permissions), the
//! directories an instance may open, the models on offer, a directory's listing, where notices
//! go — is behind one trait, [`Host`]. The crate does no process, file or network I/O of its
//! own, and no stdio: the front end hands it the streams.
//!
//! An embedder serves ACP by implementing [`Host`] and calling [`serve_stream`] with its
//! streams (stdin and stdout for an editor's agent):
//!
//! ```no_run
//! use std::sync::Arc;
//! use harness_acp::{AgentInfo, DirEntry, Error, Host, OpenRequest, Opened};
//! use harness_agent::BoxFuture;
//!
//! struct MyHost;
//!
//! impl Host for MyHost {
//!     fn roots(&self) -> Vec<std::path::PathBuf> {
//!         Vec::new()
//!     }
//!     fn models(&self) -> Vec<String> {
//!         Vec::new()
//!     }
//!     fn open(&self, request: OpenRequest) -> BoxFuture<'_, Result<Opened, Error>> {
//!         // Put a `harness_agent::SessionBuilder` together for `request.cwd` (model link, tool
//!         // world, store, permissions) and return it in an `Opened`.
//!         Box::pin(async move { Err(Error::Open(format!("{}: not here", request.cwd.display()))) })
//!     }
//!     fn dir(&self, _path: &std::path::Path) -> Result<Vec<DirEntry>, Error> {
//!         Ok(Vec::new())
//!     }
//!     fn notice(&self, text: &str) {
//!         eprintln!("my-agent: {text}");
//!     }
//! }
//!
//! # async fn run() -> Result<(), Error> {
//! let info = AgentInfo {
//!     name: "my-agent".into(),
//!     title: "My agent".into(),
//!     version: "0.1.0".into(),
//!     instance: "my-agent-1".into(),
//! };
//! harness_acp::serve_stream(Arc::new(MyHost), info, tokio::io::stdin(), tokio::io::stdout()).await
//! # }
//! ```
//!
//! [`serve`] takes any `agent-client-protocol` transport instead of a byte stream pair. The
//! crate's tests drive a whole session through it over `tokio::io::duplex` with
//! `harness_agent::ScriptedModel`.

// A library says nothing on stdout or stderr of its own: it returns what happened.

mod agent;
pub mod commands;
mod error;
pub mod ext;
pub mod host;
mod jobs;
pub mod map;
mod pump;
pub mod wire;

pub use agent::serve;
pub use error::Error;
pub use host::{AgentInfo, DirEntry, Host, ModelChoice, OpenRequest, Opened};

/// Serves ACP as an agent over a byte stream pair (JSON-RPC messages one a line, bad lines
/// answered with parse errors: see [`wire::lines`]) until the client closes `input`.
pub async fn serve_stream(
    host: std::sync::Arc<dyn Host>,
    info: AgentInfo,
    input: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    output: impl tokio::io::AsyncWrite + Unpin + Send + 'static,
) -> Result<(), Error> {
    serve(host, info, wire::lines(input, output)).await
}
