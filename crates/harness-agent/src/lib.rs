//! `harness-agent`: the runtime that drives harness sessions, for the terminal agent, the web
//! server and any Rust program that embeds the harness.
//!
//! A session ([`Driver`]) feeds the loop's state machine (`harness-loop`), calls the model
//! through a [`ModelLink`], dispatches tool calls to its [`ToolWorld`], asks its front end
//! (permission questions, the `question` tool, `show`) through its channels, runs background
//! jobs through a [`JobSpawner`] and subagents as child sessions, compacts, and stores its
//! transcript in a [`SessionStore`]. It does no process or network I/O of its own: all of that
//! is behind the seams. The front end sends [`Ctl`]s and draws the [`Out`]s that come back.
//!
//! The tool catalogue comes from the spec (for the session's project, kind, mode and
//! requirements), kept to the tools something answers: the loop (`recall`, `report`, the job
//! tools), the runtime (`question`, `show`, `task`, `session_search`, the plan tools) or the
//! world; the world's [`RegisteredTool`]s come beside them.
//!
//! ```
//! use std::sync::Arc;
//! use harness_agent::{
//!     BoxFuture, CallContext, MemoryStore, Out, Ran, RegisteredTool, Reply, ScriptedModel,
//!     SessionBuilder, ShownFile, ToolWorld,
//! };
//! use harness_core::protocol::{Event, Mode, ToolCall};
//! use harness_loop::session::ToolOutcome;
//!
//! /// A world with one tool of its own and nothing else.
//! struct Clock;
//!
//! impl ToolWorld for Clock {
//!     fn runs(&self, _name: &str) -> bool {
//!         false
//!     }
//!     fn registered(&self) -> Vec<RegisteredTool> {
//!         vec![RegisteredTool {
//!             name: "clock".into(),
//!             description: "The time of day.".into(),
//!             parameters: serde_json::json!({"type": "object", "properties": {}}),
//!             risk: harness_spec::Risk::Read,
//!             exclusive: false,
//!             deferred: false,
//!         }]
//!     }
//!     fn call<'a>(&'a self, call: &'a ToolCall, _cx: CallContext) -> BoxFuture<'a, Ran> {
//!         Box::pin(async move { Ran::Done(ToolOutcome::ok(&call.id, "12:00")) })
//!     }
//!     fn read_for_show(&self, path: &str) -> Result<ShownFile, String> {
//!         Err(format!("{path}: No such file or directory"))
//!     }
//!     fn place(&self) -> String {
//!         "/".into()
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), harness_agent::Error> {
//! let model = ScriptedModel::new([
//!     Reply::call("clock", serde_json::json!({})),
//!     Reply::text("It is noon."),
//! ]);
//! let mut session = SessionBuilder::new(Arc::new(model), Arc::new(Clock))
//!     .store(Arc::new(MemoryStore::default()))
//!     .mode(Mode::Manual)
//!     .build()?;
//! session.driver.queue_prompt("What time is it?".into());
//! session.driver.run(true).await?;
//! let mut said = String::new();
//! while let Ok(out) = session.out.try_recv() {
//!     if let Out::Event(Event::TextDelta { text }) = out {
//!         said.push_str(&text);
//!     }
//! }
//! assert!(said.ends_with("It is noon."));
//! # Ok(())
//! # }
//! ```

pub mod capacity;
pub mod commands;
mod error;
pub mod files;
pub mod library;
mod manager;
pub mod memory_api;
pub mod oneshot;
pub mod output;
pub mod perm;
pub mod person;
pub mod personal;
pub mod preview;
pub mod protocol;
mod runner;
pub mod scripted;
pub mod seams;
pub mod session_search;
pub mod slash;
pub mod store;
pub mod time;
pub mod title;
pub mod typed;
pub mod undo;

use std::sync::{Arc, Mutex};

use harness_core::plan::PlanState;
use harness_core::protocol::{Mode, SessionKind};
use harness_spec::Project;
use tokio::sync::mpsc;

pub use capacity::CapacityGate;
pub use error::{Error, Result};
pub use files::{AbsolutePaths, DirPaths, DiskFiles, FileTools, PathMap, Side, ViewPaths};
pub use manager::SessionManager;
pub use perm::SessionPermissions;
pub use protocol::{Ctl, Out, Query, stop_reason, turn_end_text};
pub use runner::{AGENTS, Driver, DriverSetup, offered_tools, runtime_values};
pub use scripted::{Reply, ScriptedModel};
pub use seams::{
    BoxFuture, CallContext, Exit, JobSpawner, Meta, ModelLink, OutputSink, Process, Ran,
    RegisteredTool, SessionStore, ShownFile, ToolWorld,
};
pub use store::MemoryStore;

/// A job spawner for worlds that run no commands: every background command is refused.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoJobs;

impl JobSpawner for NoJobs {
    fn spawn(&self, command: &str) -> std::result::Result<Arc<dyn Process>, String> {
        Err(format!(
            "this session runs no commands, so `{command}` cannot run as a job"
        ))
    }
}

/// A built session and the front end's ends of its channels.
pub struct Built {
    /// The session.
    pub driver: Driver,
    /// Send it ops and the front end's questions.
    pub ctl: mpsc::UnboundedSender<Ctl>,
    /// What it says.
    pub out: mpsc::UnboundedReceiver<Out>,
}

/// Puts a session together: a model link and a tool world, and, each with a default, the
/// store (in memory), the job spawner (none), the project (`cli`), the kind (`agent`), the mode
/// (`manual`), the permission rules (the spec's defaults), the personality and the transcript
/// to resume.
pub struct SessionBuilder {
    model: Arc<dyn ModelLink>,
    world: Arc<dyn ToolWorld>,
    store: Arc<dyn SessionStore>,
    jobs: Arc<dyn JobSpawner>,
    project: Project,
    kind: SessionKind,
    mode: Mode,
    rules: Vec<harness_permission::Rule>,
    home: String,
    personality: Option<String>,
    product_version: String,
    perms: Option<SessionPermissions>,
    capacity: Option<Arc<CapacityGate>>,
    meta: Option<Meta>,
    resume: Option<Vec<harness_loop::transcript::Entry>>,
}

impl SessionBuilder {
    /// A session of `model` working in `world`.
    pub fn new(model: Arc<dyn ModelLink>, world: Arc<dyn ToolWorld>) -> SessionBuilder {
        SessionBuilder {
            model,
            world,
            store: Arc::new(MemoryStore::default()),
            jobs: Arc::new(NoJobs),
            project: Project::Cli,
            kind: SessionKind::Agent,
            mode: Mode::Manual,
            rules: Vec::new(),
            home: "/".into(),
            personality: None,
            product_version: env!("CARGO_PKG_VERSION").into(),
            perms: None,
            capacity: None,
            meta: None,
            resume: None,
        }
    }

    /// Where the transcript and metadata are kept.
    pub fn store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.store = store;
        self
    }

    /// What starts background commands.
    pub fn jobs(mut self, jobs: Arc<dyn JobSpawner>) -> Self {
        self.jobs = jobs;
        self
    }

    /// The product the session belongs to (its tools' texts and numbers).
    pub fn project(mut self, project: Project) -> Self {
        self.project = project;
        self
    }

    /// The session kind.
    pub fn kind(mut self, kind: SessionKind) -> Self {
        self.kind = kind;
        self
    }

    /// The permission mode to start in.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Permission rules on top of the spec's defaults, and the home directory they see.
    pub fn rules(mut self, rules: Vec<harness_permission::Rule>, home: &str) -> Self {
        self.rules = rules;
        self.home = home.to_owned();
        self
    }

    /// Permissions made elsewhere (their mode, rules and approvals), instead of [`Self::mode`]
    /// and [`Self::rules`].
    pub fn permissions(mut self, perms: SessionPermissions) -> Self {
        self.perms = Some(perms);
        self
    }

    /// The slots this session shares with other sessions of the process (a new gate of its own
    /// by default).
    pub fn capacity(mut self, gate: Arc<CapacityGate>) -> Self {
        self.capacity = Some(gate);
        self
    }

    /// A personality preset of `spec/prompts/personality/`.
    pub fn personality(mut self, name: Option<String>) -> Self {
        self.personality = name;
        self
    }

    /// The product's version, for the prompt.
    pub fn product_version(mut self, version: &str) -> Self {
        self.product_version = version.to_owned();
        self
    }

    /// Continues the session `meta` from its transcript `entries`.
    pub fn resume(mut self, meta: Meta, entries: Vec<harness_loop::transcript::Entry>) -> Self {
        self.meta = Some(meta);
        self.resume = Some(entries);
        self
    }

    /// The session, with the front end's ends of its channels.
    pub fn build(self) -> Result<Built> {
        let perms = match self.perms {
            Some(p) => p,
            None => SessionPermissions::new(
                perm::engine()?,
                self.mode,
                &self.world.place(),
                &self.home,
                self.rules,
            ),
        };
        let meta = match self.meta {
            Some(m) => m,
            None => self
                .store
                .create(&self.world.place(), &self.model.model().name)
                .map_err(Error::Store)?,
        };
        let setup = DriverSetup {
            model_name: self.model.model().name.clone(),
            model: self.model,
            perms,
            world: self.world,
            jobs: self.jobs,
            plan: Arc::new(Mutex::new(PlanState::default())),
            capacity: match self.capacity {
                Some(gate) => gate,
                None => Arc::new(CapacityGate::new()?),
            },
            personality: self.personality,
            store: self.store,
            meta,
            agent: None,
            project: self.project,
            kind: self.kind,
            product_version: self.product_version,
        };
        let (out_tx, out) = mpsc::unbounded_channel();
        let (ctl, ctl_rx) = mpsc::unbounded_channel();
        let driver = Driver::new(setup, self.resume.as_deref(), out_tx, ctl_rx)?;
        Ok(Built { driver, ctl, out })
    }
}
