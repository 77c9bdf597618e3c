//! What only a front end knows, behind one trait ([`Host`]): how a session is opened or
//! resumed (its model link, tool world, store and permissions), which directories a LLeMbas
//! instance may open sessions in, the models the device offers, the memory API of an instance,
//! a directory's listing and where notices go.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use harness_agent::{BoxFuture, SessionBuilder};
use harness_core::protocol::Mode;
use serde_json::Value;

use crate::Error;

/// Who the agent is, as `initialize` says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentInfo {
    /// The agent's name (`llembas`).
    pub name: String,
    /// Its title for people (`LLeMbas CLI`).
    pub title: String,
    /// Its version.
    pub version: String,
    /// This instance's id, stable across runs on one machine (`_meta.lembas.instance.id`).
    pub instance: String,
}

/// A session the client asked for (`session/new`, or `session/load` with `resume`).
#[derive(Debug, Clone)]
pub struct OpenRequest {
    /// The session's directory: absolute, and under a root where the client is an instance.
    pub cwd: PathBuf,
    /// The saved session to continue (`session/load`).
    pub resume: Option<String>,
    /// The mode the client asked for (`_meta.lembas.mode`); else a resumed session's last mode
    /// or the front end's default.
    pub mode: Option<Mode>,
    /// The personality preset asked for (`_meta.lembas.personality`).
    pub personality: Option<String>,
    /// The library scope of the chat (`_meta.lembas.scope`, read by
    /// `harness_core::library::scope_from_meta`).
    pub scope: Option<Value>,
    /// The instance's memory API (`_meta.lembas.api` when well formed, only where capability
    /// `memory` was agreed): the session's `memory` tool is to use it instead of a file of this
    /// device.
    pub memory_api: Option<harness_agent::memory_api::Api>,
    /// The MCP servers the client gave (`mcpServers`), for the front end to start beside its
    /// own and end with the session.
    pub mcp_servers: Vec<harness_mcp::ServerConfig>,
}

/// A session the front end put together.
pub struct Opened {
    /// The session, put together (a resumed one with its saved events, which are replayed to
    /// the client, then continued); the agent adds what the client handed over and spawns it.
    pub session: SessionBuilder,
    /// The mode the session starts in.
    pub mode: Mode,
    /// The models its server serves, for the model choice; `None`: only the session's own.
    pub models: Option<Arc<dyn ModelChoice>>,
    /// The memory entries for the prompt, where the memory is an instance's
    /// ([`OpenRequest::memory_api`]).
    pub memory_entries: Option<String>,
    /// What starting the MCP servers said: those that did not start, tools dropped.
    pub mcp_notices: Vec<String>,
    /// The person's prompt commands for this session (`harness_agent::custom`): advertised
    /// after the built-in ones and expanded when a prompt is `/NAME ARGS`. Those of MCP
    /// servers and those that run shell commands (`` !`…` ``) are the terminal's only.
    pub commands: harness_agent::custom::Commands,
}

/// A subdirectory as `_lembas/dir` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Its name.
    pub name: String,
    /// Whether it holds a `.git`.
    pub git: bool,
}

/// The models a session may switch to (`session/set_config_option`).
pub trait ModelChoice: Send + Sync {
    /// The models the session's server serves (empty when it does not say).
    fn list(&self) -> BoxFuture<'_, Vec<String>>;
    /// Whether the server serves `model` (`true` when it cannot tell).
    fn serves<'a>(&'a self, model: &'a str) -> BoxFuture<'a, bool>;
}

impl ModelChoice for harness_model::ModelClient {
    fn list(&self) -> BoxFuture<'_, Vec<String>> {
        Box::pin(async move {
            self.list_models(&harness_model::CancellationToken::new())
                .await
                .unwrap_or_default()
        })
    }

    fn serves<'a>(&'a self, model: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            harness_model::ModelClient::serves(
                self,
                model,
                &harness_model::CancellationToken::new(),
            )
            .await
            .unwrap_or(true)
        })
    }
}

/// What the ACP agent asks of its front end. The agent does no process, file or network I/O of
/// its own: what needs any is here.
pub trait Host: Send + Sync + 'static {
    /// The directories a LLeMbas instance's sessions must lie under (`_meta.lembas.limits`;
    /// empty: remote work is off). A plain editor opens any absolute directory.
    fn roots(&self) -> Vec<PathBuf>;

    /// The models this device offers (`_meta.lembas.limits.models`).
    fn models(&self) -> Vec<String>;

    /// How many sessions a LLeMbas instance may hold open at once (`limits.max_sessions`;
    /// `None`: no limit of the device's own). A `session/new` past it is refused `-32043`.
    fn max_sessions(&self) -> Option<usize> {
        None
    }

    /// Puts a session together: new, or the saved one of [`OpenRequest::resume`]
    /// ([`Error::NoSavedSession`] when there is none).
    fn open(&self, request: OpenRequest) -> BoxFuture<'_, Result<Opened, Error>>;

    /// The subdirectories of `path` (`_lembas/dir`; already checked to be under a root).
    fn dir(&self, path: &Path) -> Result<Vec<DirEntry>, Error>;

    /// A line for the person running the agent (never for the client): a notice of a session,
    /// an input ignored, a session that failed.
    fn notice(&self, text: &str);

    /// The saved sessions (`session/list`), of `cwd` only when given, in any order; none
    /// unless the front end keeps sessions to list.
    fn sessions(&self, cwd: Option<&Path>) -> Result<Vec<harness_agent::Meta>, Error> {
        let _ = cwd;
        Ok(Vec::new())
    }
}
