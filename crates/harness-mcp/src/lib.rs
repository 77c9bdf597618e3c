//! The MCP client: the tools of Model Context Protocol servers, offered to a session beside its
//! own, decided by the same permission engine and answered through the same context hygiene.
//!
//! A server is a child process spoken to over its stdin and stdout ([`Transport::Stdio`]: started
//! in a process group of its own, the whole group killed when the server is dropped, so a
//! session's end leaves no orphan) or a streamable HTTP endpoint ([`Transport::Http`], with a
//! bearer token read from a variable; OAuth is not supported yet). [`Mcp::start`] starts every
//! configured server at once, each within [`Limits::start`]; one that does not start is a notice,
//! never a hung session. Each tool is offered as `mcp__SERVER__TOOL` ([`tool_name`]) when its
//! input schema is one a model can take ([`schema::check`]), deferred behind `load_tools` unless
//! the server says otherwise, with its risk from its annotations ([`risk`]). A server that offers
//! resources has one more, `mcp__SERVER__read_resource`, a read that lists them or reads one by
//! its URI ([`resources`]). [`WithMcp`] is a [`ToolWorld`] that adds them to a front end's
//! world.
//!
//! This crate does process and network I/O of its own: it is a seam crate, as `harness-model` is
//! for the model link (DESIGN.md's crate map).
//!
//! ```no_run
//! # async fn run(world: std::sync::Arc<dyn harness_agent::ToolWorld>) {
//! use harness_mcp::{Limits, Mcp, ServerConfig, Transport, WithMcp};
//! let config = ServerConfig::new("everything", Transport::stdio("mcp-server-everything", ["stdio"]));
//! let (mcp, notices) = Mcp::start(&[config], Limits::default()).await;
//! for n in notices {
//!     eprintln!("{n}");
//! }
//! let world = WithMcp::new(world, std::sync::Arc::new(mcp));
//! # let _ = world;
//! # }
//! ```

// A library says nothing on stdout or stderr of its own: it returns what happened.

mod error;
mod outcome;
pub mod resources;
pub mod schema;
mod server;
mod world;

use std::collections::BTreeMap;
use std::time::Duration;

use harness_spec::Risk;

pub use error::{Error, Result};
pub use outcome::map_result;
pub use server::{Mcp, Server, ServerPrompt, ServerTool};
pub use world::WithMcp;

/// The prefix of every MCP tool's name.
pub const PREFIX: &str = "mcp__";

/// One MCP server as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Its name, the middle of its tools' names (`mcp__NAME__TOOL`).
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// Its tools wait behind `load_tools` (the default) rather than being sent whole on every
    /// request.
    pub defer: bool,
}

impl ServerConfig {
    /// A server whose tools are deferred.
    pub fn new(name: impl Into<String>, transport: Transport) -> Self {
        ServerConfig {
            name: name.into(),
            transport,
            defer: true,
        }
    }
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking MCP on its stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for it beside the inherited ones.
        env: BTreeMap<String, String>,
        /// The directory it starts in (the front end's own when `None`).
        cwd: Option<std::path::PathBuf>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// Its URL.
        url: String,
        /// The variable holding a bearer token to send, if any (the token itself is never
        /// stored in a configuration).
        bearer_token_env: Option<String>,
        /// Headers sent with every request, as a client that holds them gave them (ACP's
        /// `mcpServers`).
        headers: Vec<(String, String)>,
    },
}

impl Transport {
    /// The transport a configuration of the server `server` names: a program (`command`, its
    /// `args` and `env`) or a streamable HTTP `url` (with the variable holding its bearer
    /// token); exactly one of the two.
    pub fn configured(
        server: &str,
        command: Option<String>,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        url: Option<String>,
        bearer_token_env: Option<String>,
    ) -> Result<Transport> {
        let refused = |reason| Error::Config {
            server: server.to_owned(),
            reason,
        };
        match (command, url) {
            (Some(command), None) => Ok(Transport::Stdio {
                command,
                args,
                env,
                cwd: None,
            }),
            (None, Some(url)) => Ok(Transport::Http {
                url,
                bearer_token_env,
                headers: Vec::new(),
            }),
            (Some(_), Some(_)) => Err(refused("has both `command` and `url`: give one")),
            (None, None) => Err(refused("needs `command` (a program) or `url`")),
        }
    }

    /// A child process `command args...`.
    pub fn stdio<I: IntoIterator<Item = S>, S: Into<String>>(command: &str, args: I) -> Self {
        Transport::Stdio {
            command: command.to_owned(),
            args: args.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            cwd: None,
        }
    }
}

/// How long a server may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// To start and answer `initialize` and `tools/list`.
    pub start: Duration,
    /// To answer one tool call.
    pub call: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            start: Duration::from_secs(30),
            call: Duration::from_secs(120),
        }
    }
}

/// A tool's offered name, `mcp__SERVER__TOOL`, each part kept to the characters every model
/// server takes in a tool name (`A-Z a-z 0-9 _ -`; others become `_`).
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("{PREFIX}{}__{}", clean(server), clean(tool))
}

fn clean(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The longest tool name model servers take (OpenAI's limit).
pub const MAX_NAME: usize = 64;

/// A tool's risk class from its annotations: `readOnlyHint` true is a read; anything else runs
/// something elsewhere, an execute (asked in manual and edit, allowed in auto, refused in plan),
/// `destructiveHint` (true by MCP's default) included.
pub fn risk(read_only: Option<bool>) -> Risk {
    if read_only == Some(true) {
        Risk::Read
    } else {
        Risk::Execute
    }
}
