//! The agent: `initialize`, sessions opened and loaded through the [`Host`], prompts, modes,
//! the model choice, cancel, and the `_lembas` requests, each answered as `spec/acp.md` says.
//!
//! By job: [`serve`] is the loop that routes each request to its handler; `open` opens and loads
//! sessions, `prompt` runs a prompt (or a slash command), `model` is the model choice, and
//! `handlers` answers the rest (initialize, cancel, the mode, the session list, the `_lembas`
//! requests).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::PromptResponse;
use harness_agent::Session;
use harness_agent::custom::Commands;
use harness_core::protocol::Mode;
use serde_json::{Value, json};

use crate::host::{AgentInfo, Host, ModelChoice};
use crate::jobs::JobTable;

mod handlers;
mod model;
mod open;
mod prompt;
mod serve;

pub use serve::serve;

/// The `_lembas` protocol this agent speaks.
const LEMBAS_PROTOCOL: u64 = 2;
/// The capability strings this agent implements (`spec/acp.md` §2).
const CAPABILITIES: &[&str] = &[
    "context",
    "library",
    "prototypes",
    "plan_state",
    "rewind",
    "jobs",
    "show",
    "memory",
];

/// The end a request is answered on.
pub(crate) type Responder<T> = agent_client_protocol::v1::Responder<T>;

/// One open session.
pub(crate) struct Open {
    pub(crate) ops: Session,
    pending: Arc<Mutex<Option<Responder<PromptResponse>>>>,
    pub(crate) cwd: PathBuf,
    model: String,
    /// The models the session may switch to (`session/set_config_option`).
    models: Option<Arc<dyn ModelChoice>>,
    chat: Option<String>,
    mode: Arc<Mutex<Mode>>,
    running: Arc<Mutex<bool>>,
    pub(crate) jobs: JobTable,
    /// The person's prompt commands.
    commands: Commands,
}

/// The agent's state: who it is, what the client agreed, its open sessions.
pub(crate) struct State {
    host: Arc<dyn Host>,
    info: AgentInfo,
    agreed: Mutex<Vec<String>>,
    /// The spec version the client said in `initialize` (`_meta.lembas.spec`).
    client_spec: Mutex<String>,
    pub(crate) sessions: Mutex<HashMap<String, Open>>,
    /// Whether the client spoke `_lembas` in `initialize` (an instance over the device link):
    /// its sessions keep to the roots. A plain editor on stdio opens any absolute directory.
    lembas_client: Mutex<bool>,
}

impl State {
    /// The state of an agent that has agreed nothing yet and holds no session.
    fn new(host: Arc<dyn Host>, info: AgentInfo) -> State {
        State {
            host,
            info,
            agreed: Mutex::new(Vec::new()),
            client_spec: Mutex::new(String::new()),
            lembas_client: Mutex::new(false),
            sessions: Mutex::new(HashMap::new()),
        }
    }

    fn client_spec(&self) -> String {
        self.client_spec
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    pub(crate) fn agreed(&self, cap: &str) -> bool {
        self.agreed
            .lock()
            .map(|a| a.iter().any(|c| c == cap))
            .unwrap_or(false)
    }

    fn roots(&self) -> Vec<PathBuf> {
        self.host.roots()
    }

    fn limits(&self) -> Value {
        json!({
            "roots": self.roots(),
            "models": self.host.models(),
            "max_sessions": self.host.max_sessions(),
        })
    }
}

impl crate::jobs::JobSessions for State {
    fn agreed(&self, cap: &str) -> bool {
        State::agreed(self, cap)
    }

    fn job_parts(&self, session: &str) -> Option<(Session, JobTable, PathBuf)> {
        self.sessions.lock().ok().and_then(|s| {
            s.get(session)
                .map(|o| (o.ops.clone(), o.jobs.clone(), o.cwd.clone()))
        })
    }
}
