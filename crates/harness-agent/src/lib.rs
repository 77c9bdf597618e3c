//! `harness-agent`: the runtime that drives harness sessions, for the terminal agent, the web
//! server and any Rust program that embeds the harness.
//!
//! A session feeds the loop's state machine (`harness-loop`), calls the model
//! through a [`ModelLink`], dispatches tool calls to its [`ToolWorld`], asks its front end
//! (permission questions, the `question` tool, `show`) through its channels, runs background
//! jobs through a [`JobSpawner`] and subagents as child sessions, compacts, and stores its
//! transcript in a [`SessionStore`]. It does no process or network I/O of its own: all of that
//! is behind the seams. A front end builds it with [`SessionBuilder`], and [`SessionBuilder::spawn`]
//! gives the one way to talk to it: a [`Session`] handle ([`Op`]s in with [`Session::submit`],
//! typed async queries) and its [`Events`], one stream of serde-tagged [`Event`]s.
//!
//! The tool catalogue comes from the spec (for the session's project, kind, mode and
//! requirements), kept to the tools something answers: the loop (`recall`, `report`, the job
//! tools), the runtime (`question`, `show`, `task`, `session_search`, the plan tools) or the
//! world; the world's [`RegisteredTool`]s come beside them.
//!
//! ```
//! use std::sync::Arc;
//! use harness_agent::{
//!     BoxFuture, CallContext, CoreEvent, Event, MemoryStore, Ran, RegisteredTool, Reply,
//!     ScriptedModel, SeamError, SessionBuilder, ShownFile, ToolWorld,
//! };
//! use harness_core::protocol::{Mode, ToolCall};
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
//!     fn read_for_show(&self, path: &str) -> Result<ShownFile, SeamError> {
//!         Err(SeamError::file(path, format!("{path}: No such file or directory")))
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
//! let mut spawned = SessionBuilder::new(Arc::new(model), Arc::new(Clock))
//!     .store(Arc::new(MemoryStore::default()))
//!     .mode(Mode::Manual)
//!     .prompt("What time is it?")
//!     .one_shot(None)
//!     .spawn()?;
//! let mut said = String::new();
//! while let Some(event) = spawned.events.recv().await {
//!     if let Event::Core(CoreEvent::TextDelta { text }) = event {
//!         said.push_str(&text);
//!     }
//! }
//! spawned.run.finished().await?.result?;
//! assert!(said.ends_with("It is noon."));
//! # Ok(())
//! # }
//! ```

// A library says nothing on stdout or stderr of its own: it returns what happened.

pub mod agents;
pub mod args;
pub mod capacity;
pub mod checkpoint;
pub mod commands;
pub mod custom;
mod error;
pub mod export;
pub mod files;
pub mod hooks;
pub mod library;
pub mod memory_api;
pub mod oneshot;
pub mod output;
pub mod perm;
pub mod person;
pub mod personal;
pub mod preview;
pub mod protocol;
pub mod registry;
mod runner;
pub mod scripted;
pub mod seams;
mod session;
pub mod session_search;
pub mod slash;
pub mod store;
pub mod time;
pub mod title;
pub mod typed;

use std::sync::{Arc, Mutex};

use harness_core::plan::PlanState;
use harness_core::protocol::{Mode, SessionKind};
use harness_spec::Project;
use tokio::sync::mpsc;

use runner::{Driver, DriverSetup};

pub use capacity::CapacityGate;
pub use error::{Error, Result, SeamError};
pub use files::{AbsolutePaths, DirPaths, DiskFiles, FileTools, PathMap, Side, ViewPaths};
pub use perm::SessionPermissions;
pub use protocol::{CoreEvent, Event, Op, Query, ShellEnd, stop_reason, turn_end_text};
pub use registry::ToolRegistry;
pub use runner::{AGENTS, FORGE, offered_tools, runtime_values};
pub use scripted::{Reply, ScriptedModel};
pub use seams::{
    BoxFuture, CallContext, Exit, JobSpawner, Meta, ModelLink, OutputSink, Process, Ran,
    RegisteredTool, SessionStore, ShownFile, ToolWorld,
};
pub use session::{Ended, Events, Run, Session, Spawned, WeakSession};
pub use store::MemoryStore;

/// A job spawner for worlds that run no commands: every background command is refused.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoJobs;

impl JobSpawner for NoJobs {
    fn spawn(&self, command: &str) -> std::result::Result<Arc<dyn Process>, SeamError> {
        Err(SeamError::command(
            command,
            format!("this session runs no commands, so `{command}` cannot run as a job"),
        ))
    }
}

/// Puts a session together: a model link and a tool world, and, each with a default, the
/// store (in memory), the job spawner (none), the project (`cli`), the kind (`agent`), the mode
/// (`manual`), the permission rules (the spec's defaults), the personality, the transcript to
/// resume and what the front end holds (questions, a viewer) or hands over (a client's context,
/// library, prototypes, memory). [`SessionBuilder::spawn`] starts it.
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
    model_name: Option<String>,
    perms: Option<SessionPermissions>,
    capacity: Option<Arc<CapacityGate>>,
    plan: Option<Arc<Mutex<PlanState>>>,
    meta: Option<Meta>,
    resume: Option<Vec<harness_loop::transcript::Entry>>,
    agents: agents::Agents,
    hooks: Option<Arc<hooks::Hooks>>,
    front: Front,
}

/// What the front end holds and hands over, set on the driver once it is made.
#[derive(Default)]
struct Front {
    asks: bool,
    display: bool,
    client_context: Option<String>,
    library_summary: Option<String>,
    prototypes: Option<harness_core::prompt::PrototypeHandoff>,
    memory_entries: Option<String>,
    saved_mode: Option<Mode>,
    prompts: Vec<(String, Vec<String>)>,
    one_shot: bool,
    job_wait: Option<std::time::Duration>,
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
            model_name: None,
            perms: None,
            capacity: None,
            plan: None,
            meta: None,
            resume: None,
            agents: agents::Agents::default(),
            hooks: None,
            front: Front::default(),
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

    /// The plan the session keeps (a new, empty one by default).
    pub fn plan(mut self, plan: Arc<Mutex<PlanState>>) -> Self {
        self.plan = Some(plan);
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

    /// The model's name as shown (the model link's by default).
    pub fn model_name(mut self, name: &str) -> Self {
        self.model_name = Some(name.to_owned());
        self
    }

    /// A new session whose metadata the front end made in the store already.
    pub fn meta(mut self, meta: Meta) -> Self {
        self.meta = Some(meta);
        self
    }

    /// Continues the session `meta` from its transcript `entries`.
    pub fn resume(mut self, meta: Meta, entries: Vec<harness_loop::transcript::Entry>) -> Self {
        self.meta = Some(meta);
        self.resume = Some(entries);
        self
    }

    /// The model's name as the session will show it.
    pub fn shown_model(&self) -> String {
        self.model_name
            .clone()
            .unwrap_or_else(|| self.model.model().name.clone())
    }

    /// The transcript the session continues ([`Self::resume`]).
    pub fn resumed(&self) -> Option<&[harness_loop::transcript::Entry]> {
        self.resume.as_deref()
    }

    /// The hooks the person configured ([`hooks`]): commands run on the session's events.
    pub fn hooks(mut self, hooks: Arc<hooks::Hooks>) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// The front end answers [`Event::Question`]s: the `question` tool is offered.
    pub fn answers_questions(mut self, yes: bool) -> Self {
        self.front.asks = yes;
        self
    }

    /// The front end has a viewer (`display` holds, as over ACP with capability `show`): the
    /// `show` tool is offered and its calls come as [`Event::Show`].
    pub fn holds_display(mut self, yes: bool) -> Self {
        self.front.display = yes;
        self
    }

    /// Text a client handed over for the prompt (`_meta.lembas.context`), put into the system
    /// text as given.
    pub fn client_context(mut self, text: &str) -> Self {
        self.front.client_context = Some(text.to_owned());
        self
    }

    /// The library line a client handed over: the prompt's `{{library_summary}}` (an empty
    /// library's tools are not offered).
    pub fn library_summary(mut self, text: &str) -> Self {
        self.front.library_summary = Some(text.to_owned());
        self
    }

    /// The chat's prototypes a client handed over (capability `prototypes`).
    pub fn prototypes(mut self, handoff: harness_core::prompt::PrototypeHandoff) -> Self {
        self.front.prototypes = Some(handoff);
        self
    }

    /// The prompt's memory entries as the client instance holds them (capability `memory`).
    pub fn memory_entries(mut self, text: String) -> Self {
        self.front.memory_entries = Some(text);
        self
    }

    /// The mode a resumed session was left in: set as the session starts, as a mode change
    /// (its [`CoreEvent::ModeChanged`] is the first event).
    pub fn saved_mode(mut self, mode: Mode) -> Self {
        self.front.saved_mode = Some(mode);
        self
    }

    /// A prompt to run first.
    pub fn prompt(mut self, text: impl Into<String>) -> Self {
        self.front.prompts.push((text.into(), Vec::new()));
        self
    }

    /// A prompt with its images (`data:` or `https:` URLs), as [`Self::prompt`].
    pub fn prompt_with_images(mut self, text: impl Into<String>, images: Vec<String>) -> Self {
        self.front.prompts.push((text.into(), images));
        self
    }

    /// The subagents the person defined, which `task` offers beside the built-in ones (read
    /// by the front end: see [`agents`]).
    pub fn agents(mut self, agents: agents::Agents) -> Self {
        self.agents = agents;
        self
    }

    /// The session ends as soon as it is idle with no prompt queued and no job running (a
    /// one-shot run, a test); with `job_wait`, the jobs still running that long after its turn
    /// ended are stopped and it ends then.
    pub fn one_shot(mut self, job_wait: Option<std::time::Duration>) -> Self {
        self.front.one_shot = true;
        self.front.job_wait = job_wait;
        self
    }

    /// Starts the session in a task of its own: its handle, its events and its run. Without
    /// [`Self::one_shot`] it runs until the last [`Session`] handle is dropped.
    pub fn spawn(self) -> Result<Spawned> {
        let one_shot = self.front.one_shot;
        let store = self.store.clone();
        let (mut driver, ctl, out) = self.driver()?;
        let session = Session::new(ctl, driver.id(), driver.model_name(), store);
        let task = tokio::spawn(async move {
            let result = driver.run(one_shot).await;
            let running_jobs = driver.running_jobs();
            driver.shutdown().await;
            Ended {
                id: driver.id().to_owned(),
                result,
                last_end: driver.last_end().cloned(),
                history: driver.history().to_vec(),
                running_jobs,
            }
        });
        Ok(Spawned {
            session,
            events: Events::new(out),
            run: Run::new(task),
        })
    }

    /// The driver and the front end's ends of its channels.
    fn driver(
        self,
    ) -> Result<(
        Driver,
        mpsc::UnboundedSender<protocol::Ctl>,
        mpsc::UnboundedReceiver<Event>,
    )> {
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
        let model_name = self
            .model_name
            .unwrap_or_else(|| self.model.model().name.clone());
        let meta = match self.meta {
            Some(m) => m,
            None => self
                .store
                .create(&self.world.place(), &model_name)
                .map_err(Error::Store)?,
        };
        let setup = DriverSetup {
            model_name,
            model: self.model,
            perms,
            world: self.world,
            jobs: self.jobs,
            plan: self
                .plan
                .unwrap_or_else(|| Arc::new(Mutex::new(PlanState::default()))),
            capacity: match self.capacity {
                Some(gate) => gate,
                None => Arc::new(CapacityGate::new()?),
            },
            personality: self.personality,
            store: self.store,
            meta,
            agent: None,
            agents: Arc::new(self.agents),
            project: self.project,
            kind: self.kind,
            product_version: self.product_version,
            hooks: self.hooks,
        };
        let (out_tx, out) = mpsc::unbounded_channel();
        let (ctl, ctl_rx) = mpsc::unbounded_channel();
        let mut driver = Driver::new(setup, self.resume.as_deref(), out_tx, ctl_rx)?;
        let front = self.front;
        if let Some(text) = &front.client_context {
            driver.set_client_context(text);
        }
        if let Some(text) = &front.library_summary {
            driver.set_library_summary(text);
        }
        if let Some(handoff) = front.prototypes {
            driver.set_prototypes(handoff);
        }
        if let Some(text) = front.memory_entries {
            driver.set_memory_entries(text);
        }
        if front.asks {
            driver.answers_questions();
        }
        if front.display {
            driver.holds_display();
        }
        if let Some(mode) = front.saved_mode {
            driver.set_mode(mode);
        }
        if let Some(wait) = front.job_wait {
            driver.wait_for_jobs_at_most(wait);
        }
        for (text, images) in front.prompts {
            driver.queue_prompt_with(text, images);
        }
        Ok((driver, ctl, out))
    }
}
