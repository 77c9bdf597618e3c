//! The session runner: it feeds the loop's state machine ([`harness_loop::session::Session`])
//! and performs the actions it answers — model calls through the [`ModelLink`], tools through
//! the [`ToolWorld`], questions through the front end, jobs through the [`JobSpawner`] — while
//! the front end talks to it only with [`Ctl`]s in and [`Out`]s (the core event stream) out.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use harness_core::offer::{OfferContext, Offering};
use harness_core::plan::PlanState;
use harness_core::prompt::{self, InstructionFile, PromptInput};
use harness_core::protocol::{
    Answer, Event, JobEnd, JobKind, Level, Mode, Op, PermissionQuestion, SessionKind, ToolCall,
    TurnEnd,
};
use harness_loop::config::LoopConfig;
use harness_loop::session::ToolTraits;
use harness_loop::session::{
    Action, Input, Message, ModelOutput, ModelRequest, Session, SessionSetup, ToolCatalog as _,
    ToolOutcome,
};
use harness_loop::transcript::Entry;
use harness_model::{
    CancellationToken, ChatRequest, Completion, FinishReason, StreamEvent, ToolChoice, ToolSpec,
};
use harness_spec::{Project, Spec};
use tokio::sync::mpsc;

use crate::error::{Error, Result};
use crate::perm::SessionPermissions;
use crate::protocol::{Ctl, Out, Query};
use crate::seams::{
    CallContext, Exit, JobSpawner, Meta, ModelLink, Process, Ran, RegisteredTool, SessionStore,
    ToolWorld,
};

/// A running subagent: its final reply, or why it failed.
type SubagentRun = tokio::task::JoinHandle<std::result::Result<String, String>>;

/// A subagent started: its control channel, its run, its session's id.
type Launched = (mpsc::UnboundedSender<Ctl>, SubagentRun, String);

/// What a job's watcher reports.
#[derive(Debug)]
pub(crate) enum JobMsg {
    /// New output of a command job.
    Output {
        /// The job.
        id: u32,
        /// The output.
        text: String,
    },
    /// A command job ended.
    Ended {
        /// The job.
        id: u32,
        /// How.
        exit: Exit,
    },
    /// A subagent job said something with `report`.
    Report {
        /// The job.
        id: u32,
        /// What.
        text: String,
    },
    /// A subagent job ended: its final reply, or why it failed.
    SubagentEnded {
        /// The job.
        id: u32,
        /// The reply or the failure.
        reply: std::result::Result<String, String>,
    },
}

/// Everything a session is made from (see [`crate::SessionBuilder`] for a builder).
#[derive(Clone)]
pub struct DriverSetup {
    /// The model link.
    pub model: Arc<dyn ModelLink>,
    /// The model's id as shown.
    pub model_name: String,
    /// The permission state.
    pub perms: SessionPermissions,
    /// The tools' world (shared with subagents).
    pub world: Arc<dyn ToolWorld>,
    /// Starts background commands.
    pub jobs: Arc<dyn JobSpawner>,
    /// The session's plan (shared with subagents).
    pub plan: Arc<Mutex<PlanState>>,
    /// The model servers' slots (shared with subagents and the process's other sessions).
    pub capacity: Arc<crate::capacity::CapacityGate>,
    /// The personality preset.
    pub personality: Option<String>,
    /// The session store.
    pub store: Arc<dyn SessionStore>,
    /// This session's metadata.
    pub meta: Meta,
    /// For a subagent: its agent's name (`explore`, `general`).
    pub agent: Option<String>,
    /// The product (`cli` for llembas, `llembas` for the server).
    pub project: Project,
    /// The session kind (`agent` or `chat`).
    pub kind: SessionKind,
    /// The product's version, for the prompt.
    pub product_version: String,
}

/// One session, driven.
pub struct Driver {
    session: Session,
    client: Arc<dyn ModelLink>,
    model_name: String,
    perms: SessionPermissions,
    world: Arc<dyn ToolWorld>,
    spawner: Arc<dyn JobSpawner>,
    plan: Arc<Mutex<PlanState>>,
    capacity: Arc<crate::capacity::CapacityGate>,
    project: Project,
    kind: SessionKind,
    product_version: String,
    registered: Vec<RegisteredTool>,
    /// Whether the store answers `session_search`.
    searches: bool,
    offering: Offering<'static>,
    /// The offering's tools as the model is sent them, made once an offering (and shared by
    /// every request until the offering changes), with the characters they take.
    specs: std::sync::OnceLock<(Arc<[ToolSpec]>, usize)>,
    /// The system text, assembled again only when what it is made of changed.
    assembled: std::sync::Mutex<prompt::Assembled<'static>>,
    personality: Option<String>,
    instructions: Vec<InstructionFile>,
    values: BTreeMap<String, String>,
    store: Arc<dyn SessionStore>,
    meta: Meta,
    out: mpsc::UnboundedSender<Out>,
    ops: mpsc::UnboundedReceiver<Ctl>,
    job_tx: mpsc::UnboundedSender<JobMsg>,
    job_rx: mpsc::UnboundedReceiver<JobMsg>,
    jobs: HashMap<u32, Arc<dyn Process>>,
    stopping: HashSet<u32>,
    cancel: CancellationToken,
    cancelled: bool,
    /// Prompts waiting for the session to be idle, with their images.
    queued_prompts: VecDeque<(String, Vec<String>)>,
    last_end: Option<TurnEnd>,
    agent: Option<String>,
    report_to: Option<(mpsc::UnboundedSender<JobMsg>, u32)>,
    subagents: HashMap<u32, mpsc::UnboundedSender<Ctl>>,
    /// Each subagent job's agent and saved session, to start it again (`job_send` after its end).
    subagent_sessions: HashMap<u32, (String, String)>,
    /// Whether the front end answers questions (the `question` tool is offered then only).
    asks: bool,
    /// Whether the front end has a viewer for `show` (`display` holds).
    display: bool,
    /// The prototypes an older LLeMbas instance handed over (capability `prototypes`).
    prototypes: Option<prompt::PrototypeHandoff>,
    reply: Option<(String, Option<String>)>,
    /// The last model call ended in a context overflow (compaction and one retry follow).
    overflowed: bool,
    /// A compaction asked for by the person runs (a cancel stops it).
    compacting: bool,
    /// The calls the person approved when asked (run outside a world's sandbox).
    approved: HashSet<String>,
    /// The answer text shown so far of the step being streamed (kept if the person stops it).
    shown: Arc<std::sync::Mutex<String>>,
    /// How long [`Driver::run`] until idle waits for jobs after a turn ended (`None`: as long
    /// as they run).
    job_wait: Option<std::time::Duration>,
}

/// The built-in subagents (`prompts/agents/`).
pub const AGENTS: &[&str] = &["explore", "general"];

/// The tools the runtime answers itself (with the front end, the store or the plan), in any
/// world.
const RUNTIME_ANSWERS: &[&str] = &[
    "question",
    "show",
    "task",
    "session_search",
    "plan_write",
    "plan_update",
    "plan_submit",
    harness_core::offer::LOADER,
];

/// What decides a session's catalogue besides the spec.
struct Catalogue<'a> {
    project: Project,
    kind: SessionKind,
    mode: Mode,
    agent: Option<&'a str>,
    asks: bool,
    display: bool,
    searches: bool,
    world: &'a dyn ToolWorld,
    /// The session's run-time values (the facts of the worlds tools serve).
    values: &'a BTreeMap<String, String>,
    /// The deferred tools the model has loaded.
    loaded: &'a std::collections::BTreeSet<String>,
}

/// The session's spec tools: what the spec offers this project, kind, mode and requirements,
/// of those the tools that something here answers (the loop, the runtime, the world). The
/// world's registered tools come beside them.
fn offering(c: &Catalogue<'_>) -> Result<Offering<'static>> {
    let spec = Spec::embedded();
    let mut cx = OfferContext::new(c.project, c.kind, c.mode);
    cx.holds.display = c.display;
    cx.values = runtime_values();
    cx.subagent = c.agent.is_some();
    cx.read_only = c.agent == Some("explore");
    cx.facts = harness_core::offer::Facts::from_values(c.values);
    cx.loaded = c.loaded.clone();
    let mut o = Offering::new(spec, cx)?;
    o.retain(|t| {
        let name = t.name.as_str();
        let answered = harness_loop::session::LOOP_ANSWERS.contains(&name)
            || RUNTIME_ANSWERS.contains(&name)
            || c.world.runs(name);
        answered
            && !(c.agent.is_some() && name == "task")
            && (c.asks || name != "question")
            && (c.searches || name != "session_search")
    })?;
    // The world's deferred tools (an MCP server's) go behind the same loader.
    let deferred = c.world.registered().into_iter().filter(|r| r.deferred);
    o.defer_outside(deferred.map(|r| (r.name.clone(), r.summary())).collect())?;
    Ok(o)
}

/// The tools a new session on `world` is offered, each as the model is sent it (the spec's,
/// deferred ones behind the loader, then the world's own): what a front end tells its person a
/// session of this project, kind and mode can do. `asks`: the front end answers `question`;
/// `display`: it shows files (`show`); `searches`: its store answers `session_search`.
pub fn offered_tools(
    world: &dyn ToolWorld,
    (project, kind, mode): (Project, SessionKind, harness_core::protocol::Mode),
    (asks, display, searches): (bool, bool, bool),
) -> Result<Vec<ToolSpec>> {
    let values = world.values();
    let o = offering(&Catalogue {
        project,
        kind,
        mode,
        agent: None,
        asks,
        display,
        searches,
        world,
        values: &values,
        loaded: &Default::default(),
    })?;
    Ok(specs_of(&o, &world.registered()))
}

/// The specs of an offering's tools and a world's registered ones, in that order.
fn specs_of(offering: &Offering<'_>, registered: &[RegisteredTool]) -> Vec<ToolSpec> {
    offering
        .tools
        .iter()
        .map(|t| ToolSpec {
            name: t.name.clone(),
            description: t.description.clone(),
            parameters: t.parameters.clone(),
        })
        .chain(
            registered
                .iter()
                .filter(|r| !offering.is_deferred(&r.name))
                .map(|r| ToolSpec {
                    name: r.name.clone(),
                    description: r.description.clone(),
                    parameters: r.parameters.clone(),
                }),
        )
        .collect()
}

/// The facts of the runtime that fill tool descriptions (`{{memory_limit}}`).
pub fn runtime_values() -> BTreeMap<String, String> {
    use harness_fs::memory::{DEFAULT_LIMIT, Target, USER_LIMIT, limit_words};
    let limit = limit_words(&[(Target::Memory, DEFAULT_LIMIT), (Target::User, USER_LIMIT)]);
    BTreeMap::from([("memory_limit".to_owned(), limit)])
}

impl Driver {
    /// A new driver; the front end keeps the other ends of `out` and `ops`.
    pub fn new(
        setup: DriverSetup,
        resume: Option<&[Entry]>,
        out: mpsc::UnboundedSender<Out>,
        ops: mpsc::UnboundedReceiver<Ctl>,
    ) -> Result<Driver> {
        let cfg = LoopConfig::embedded()?;
        let registered = setup.world.registered();
        let perms = setup.perms.clone().with_registered(
            registered
                .iter()
                .map(|r| (r.name.clone(), r.risk))
                .collect(),
        );
        let world = setup.world.clone();
        let own: Vec<(String, ToolTraits)> = registered
            .iter()
            .map(|r| {
                (
                    r.name.clone(),
                    ToolTraits {
                        risk: r.risk,
                        exclusive: r.exclusive,
                    },
                )
            })
            .collect();
        let session_setup = SessionSetup {
            config: cfg,
            project: setup.project,
            budget: None,
            id: setup.meta.id.clone(),
            catalog: Box::new(move |name: &str| {
                if let Some((_, t)) = own.iter().find(|(n, _)| n == name) {
                    return Some(*t);
                }
                let answered = harness_loop::session::LOOP_ANSWERS.contains(&name)
                    || RUNTIME_ANSWERS.contains(&name)
                    || world.runs(name);
                if answered {
                    Spec::embedded().traits(name)
                } else {
                    None
                }
            }),
            permissions: Box::new(crate::perm::Checked {
                perms: perms.clone(),
                world: setup.world.clone(),
            }),
            subagent: setup.agent.is_some(),
            hygiene: true,
        };
        let mut session = match resume {
            Some(entries) => Session::resume(session_setup, entries),
            None => Session::new(session_setup),
        };
        if let Some(entries) = resume {
            replay_plan(&setup.plan, entries);
        }
        let lost = if resume.is_some() {
            session.end_lost_jobs()
        } else {
            Vec::new()
        };
        setup
            .store
            .append(&setup.meta.id, &session.take_log())
            .map_err(Error::Store)?;
        let world = setup.world;
        let instructions = world.instructions();
        let mut values = world.values();
        // What the system text needs that a world may leave out.
        values.entry("cwd".into()).or_insert_with(|| world.place());
        values
            .entry("platform".into())
            .or_insert_with(|| std::env::consts::OS.into());
        values
            .entry("shell".into())
            .or_insert_with(|| "none".into());
        values.insert("product_version".into(), setup.product_version.clone());
        values.insert(
            "date".into(),
            crate::time::format_time(crate::time::now())[..10].to_owned(),
        );
        values.insert("model".into(), setup.model_name.clone());
        if let Some(slots) = setup.model.model().capacity {
            setup.capacity.set_slots(&setup.model.server(), slots);
        }
        let (job_tx, job_rx) = mpsc::unbounded_channel();
        let searches = setup.store.searches();
        let offering = offering(&Catalogue {
            project: setup.project,
            kind: setup.kind,
            mode: perms.mode(),
            agent: setup.agent.as_deref(),
            asks: false,
            display: false,
            searches,
            world: &*world,
            values: &values,
            loaded: &Default::default(),
        })?;
        let driver = Driver {
            session,
            client: setup.model,
            model_name: setup.model_name,
            offering,
            specs: std::sync::OnceLock::new(),
            assembled: std::sync::Mutex::new(prompt::Assembled::new(Spec::embedded())),
            perms,
            world,
            spawner: setup.jobs,
            plan: setup.plan,
            capacity: setup.capacity,
            project: setup.project,
            kind: setup.kind,
            product_version: setup.product_version,
            registered,
            searches,
            personality: setup.personality,
            instructions,
            values,
            store: setup.store,
            meta: setup.meta,
            out,
            ops,
            job_tx,
            job_rx,
            jobs: HashMap::new(),
            stopping: HashSet::new(),
            cancel: CancellationToken::new(),
            cancelled: false,
            queued_prompts: VecDeque::new(),
            last_end: None,
            agent: setup.agent,
            report_to: None,
            subagents: HashMap::new(),
            subagent_sessions: HashMap::new(),
            asks: false,
            display: false,
            prototypes: None,
            reply: None,
            overflowed: false,
            compacting: false,
            job_wait: None,
            approved: HashSet::new(),
            shown: Arc::new(std::sync::Mutex::new(String::new())),
        };
        for event in lost {
            if let Event::JobEnded { job_id, .. } = &event {
                driver.notice(
                    Level::Warning,
                    format!(
                        "job {job_id} was still running when its session was cut off; \
                         its process is gone, so it is marked failed"
                    ),
                );
            }
            driver.emit(event);
        }
        driver.prepare();
        Ok(driver)
    }

    /// Makes what each request sends of the offering (the tools, the system text) before the
    /// first request, when the offering was made: a session's first request then only shapes
    /// its messages (200 messages sent at once to new chats spent a quarter of the server's
    /// time making both).
    fn prepare(&self) {
        let _ = self.specs_and_size();
        // An error here is said by the request that needs the text.
        let _ = self.system_text();
    }

    /// The catalogue's offering for the session as it is now.
    fn offer_again(&mut self) {
        let loaded = self.offering.context.loaded.clone();
        let made = offering(&Catalogue {
            project: self.project,
            kind: self.kind,
            mode: self.perms.mode(),
            agent: self.agent.as_deref(),
            asks: self.asks,
            display: self.display,
            searches: self.searches,
            world: &*self.world,
            values: &self.values,
            loaded: &loaded,
        });
        match made {
            Ok(o) => {
                self.offering = o;
                self.specs = std::sync::OnceLock::new();
                self.prepare();
            }
            Err(e) => self.notice(Level::Warning, format!("cannot offer the tools: {e}")),
        }
    }

    /// Text an ACP client handed over for the prompt (`_meta.lembas.context`, capability
    /// `context`), put into the system text as given.
    pub fn set_client_context(&mut self, text: &str) {
        self.values.insert("client_context".into(), text.to_owned());
    }

    /// The library line a client handed over (`_meta.lembas.library.summary`, capability
    /// `library`): the prompt's `{{library_summary}}`.
    pub fn set_library_summary(&mut self, text: &str) {
        self.values
            .insert("library_summary".into(), text.to_owned());
        // An empty library's tools are not offered (`serves: library`).
        self.offer_again();
    }

    /// The chat's prototypes a client handed over (capability `prototypes`); the prompt shows
    /// them only as harness-core's `prompt::prototype_lines` decides (an instance older than
    /// 3.0.0, `show` offered).
    pub fn set_prototypes(&mut self, handoff: prompt::PrototypeHandoff) {
        self.prototypes = Some(handoff);
    }

    /// The prompt's memory entries as the client instance holds them (capability `memory`).
    pub fn set_memory_entries(&mut self, text: String) {
        self.values.insert("memory_entries".into(), text);
    }

    /// Says that the front end answers [`Out::Question`]s: the `question` tool is offered.
    pub fn answers_questions(&mut self) {
        self.asks = true;
        self.offer_again();
    }

    /// Says that the front end has a viewer (`display` holds, as over ACP with capability
    /// `show`): the `show` tool is offered and its calls come as [`Out::Show`].
    pub fn holds_display(&mut self) {
        self.display = true;
        self.offer_again();
    }

    /// Queues a prompt to run as soon as the session is idle.
    pub fn queue_prompt(&mut self, text: String) {
        self.queued_prompts.push_back((text, Vec::new()));
    }

    /// Starts the person's prompt, with the images that go with it where the model reads
    /// images (its metadata says so); otherwise they are left out and the person is told.
    async fn prompt(&mut self, text: String, images: Vec<String>) -> Result<()> {
        if !images.is_empty() {
            let model = self.client.model();
            if model.vision {
                self.session.attach_images(images);
            } else {
                self.notice(
                    Level::Warning,
                    format!(
                        "{} does not read images (its metadata says so): {} image{} left out",
                        model.name,
                        images.len(),
                        if images.len() == 1 { "" } else { "s" }
                    ),
                );
            }
        }
        self.feed(Input::Prompt { text }).await
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.meta.id
    }

    /// How the last turn ended.
    pub fn last_end(&self) -> Option<&TurnEnd> {
        self.last_end.as_ref()
    }

    /// The session's jobs as the loop keeps them, running or ended, in id order.
    pub fn jobs(&self) -> Vec<harness_loop::jobs::Job> {
        let mut v: Vec<_> = self.session.jobs().all().cloned().collect();
        v.sort_by_key(|j| j.id);
        v
    }

    /// Jobs still running.
    pub fn running_jobs(&self) -> usize {
        self.jobs.len() + self.subagents.len()
    }

    fn emit(&self, event: Event) {
        let _ = self.out.send(Out::Event(event));
    }

    fn notice(&self, level: Level, text: impl Into<String>) {
        self.emit(Event::Notice {
            level,
            text: text.into(),
        });
    }

    fn flush_log(&mut self) -> Result<()> {
        let entries = self.session.take_log();
        if entries.is_empty() {
            return Ok(());
        }
        for e in &entries {
            if let Entry::TurnStarted { text, .. } = e
                && self.meta.title.is_empty()
            {
                self.meta.title = first_line_title(text);
            }
        }
        self.store
            .append(&self.meta.id, &entries)
            .map_err(Error::Store)?;
        self.meta.updated = crate::time::now();
        self.store.save(&self.meta).map_err(Error::Store)
    }

    /// Runs until the front end closes its end of `ops`; with `until_idle`, returns as soon as
    /// the session is idle with no prompt queued and no job running (a one-shot run).
    pub async fn run(&mut self, until_idle: bool) -> Result<()> {
        // A resumed session may have closed the turn a crash cut short.
        self.flush_log()?;
        let mut idle_since: Option<tokio::time::Instant> = None;
        loop {
            if let Some((text, images)) = self.queued_prompts.pop_front() {
                self.prompt(text, images).await?;
                continue;
            }
            let idle = until_idle && !self.session.busy();
            if idle && self.jobs.is_empty() && self.subagents.is_empty() {
                return Ok(());
            }
            idle_since = if idle {
                idle_since.or_else(|| Some(tokio::time::Instant::now()))
            } else {
                None
            };
            let deadline = idle_since.zip(self.job_wait).map(|(at, wait)| at + wait);
            let wait_over = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = wait_over => {
                    self.stop_waited_jobs().await?;
                    return Ok(());
                }
                op = self.ops.recv() => match op {
                    None => break,
                    Some(Ctl::Op(Op::Prompt { text, images, .. })) => {
                        self.prompt(text, images).await?;
                    }
                    Some(Ctl::Message(text)) => self.feed(Input::Message { text }).await?,
                    Some(Ctl::Query(Query::Compact, reply)) => {
                        let text = match self.compact().await? {
                            Ok(text) | Err(text) => text,
                        };
                        let _ = reply.send(text);
                    }
                    Some(ctl) => {
                        let _ = self.op_while_busy(ctl);
                    }
                },
                Some(msg) = self.job_rx.recv() => {
                    let input = self.job_input(msg);
                    self.feed(input).await?;
                }
            }
        }
        self.shutdown().await;
        Ok(())
    }

    /// With [`Driver::run`] until idle, the jobs still running `wait` after a turn ended are
    /// stopped and the run ends (a one-shot run ends with its turn, not with its jobs; their
    /// ends wake the session in that time as usual).
    pub fn wait_for_jobs_at_most(&mut self, wait: std::time::Duration) {
        self.job_wait = Some(wait);
    }

    /// The jobs waited for long enough: each is stopped, recorded as stopped (its wake-up kept
    /// for a later turn), and the person told.
    async fn stop_waited_jobs(&mut self) -> Result<()> {
        let seconds = self.job_wait.map_or(0, |w| w.as_secs());
        for id in self.session.jobs().running_ids() {
            let title = self
                .session
                .jobs()
                .get(id)
                .map(|j| j.title.clone())
                .unwrap_or_default();
            let text = harness_loop::config::fill(
                LoopConfig::embedded()?.job_text("oneshot_stopped"),
                &[
                    ("id", &id.to_string()),
                    ("title", &title),
                    ("seconds", &seconds.to_string()),
                ],
            );
            self.notice(Level::Warning, text);
        }
        for child in self.subagents.values() {
            let _ = child.send(Ctl::Op(Op::Cancel));
        }
        self.shutdown().await;
        for event in self.session.end_running_jobs() {
            self.emit(event);
        }
        self.flush_log()
    }

    /// Stops every job (the session is ending).
    pub async fn shutdown(&mut self) {
        for (_, r) in self.jobs.drain() {
            r.stop().await;
        }
    }

    fn job_input(&mut self, msg: JobMsg) -> Input {
        match msg {
            JobMsg::Report { id, text } => Input::Report { id, text },
            JobMsg::SubagentEnded { id, reply } => {
                self.subagents.remove(&id);
                let stopped = self.stopping.remove(&id);
                let (end, final_reply) = match reply {
                    _ if stopped => (JobEnd::Stopped, None),
                    Ok(text) => (JobEnd::Done { exit_code: None }, Some(text)),
                    Err(message) => (JobEnd::Failed { message }, None),
                };
                Input::JobEnded {
                    id,
                    end,
                    final_reply,
                }
            }
            JobMsg::Output { id, text } => Input::JobOutput { id, text },
            JobMsg::Ended { id, exit } => {
                self.jobs.remove(&id);
                let end = if self.stopping.remove(&id) {
                    JobEnd::Stopped
                } else {
                    match exit {
                        Exit::Code(c) => JobEnd::Done { exit_code: Some(c) },
                        Exit::Signal(s) => JobEnd::Failed {
                            message: format!("killed by signal {s}"),
                        },
                    }
                };
                Input::JobEnded {
                    id,
                    end,
                    final_reply: None,
                }
            }
        }
    }

    /// An op that came while the driver waits on something (or is idle and it is not a prompt).
    fn op_while_busy(&mut self, ctl: Ctl) -> Option<(String, Answer)> {
        let op = match ctl {
            Ctl::Op(op) => op,
            Ctl::Reply(call_id, text) => {
                self.reply = Some((call_id, text));
                return None;
            }
            Ctl::Message(text) => {
                match self.session.handle(Input::Message { text }) {
                    Ok(actions) => {
                        for a in actions {
                            if let Action::Emit(e) = a {
                                self.emit(e);
                            }
                        }
                    }
                    Err(e) => self.notice(Level::Warning, e.to_string()),
                }
                let _ = self.flush_log();
                return None;
            }
            Ctl::JobOutput(id, offset, reply) => {
                let r = self.session.jobs().get(id).map(|j| {
                    let text: String = j
                        .output
                        .chars()
                        .skip(offset.saturating_sub(j.dropped_chars))
                        .collect();
                    (j.clone(), text)
                });
                let _ = reply.send(r);
                return None;
            }
            Ctl::SendJob(id, message, reply) => {
                if self.session.jobs().get(id).is_none() {
                    let _ = reply.send(None);
                    return None;
                }
                let args = serde_json::json!({"id": id, "message": message});
                let r = match self.session.jobs_mut().tool("job_send", &args) {
                    Some(harness_loop::jobs::JobDecision::Deliver { id, message, .. }) => {
                        if let Some(child) = self.subagents.get(&id) {
                            let _ = child.send(Ctl::Message(message));
                        }
                        Ok(true)
                    }
                    Some(harness_loop::jobs::JobDecision::Restart { id, message, .. }) => {
                        self.restart_subagent(id, message);
                        Ok(false)
                    }
                    Some(d) => Err(d.text().to_owned()),
                    None => Err(format!("no job {id}")),
                };
                let _ = reply.send(Some(r));
                return None;
            }
            Ctl::JobTranscript(id, reply) => {
                let r = self.session.jobs().get(id).cloned().map(|job| {
                    let entries = self
                        .subagent_sessions
                        .get(&id)
                        .and_then(|(_, session)| self.store.load(session).ok());
                    (job, entries)
                });
                let _ = reply.send(r);
                return None;
            }
            Ctl::StopJob(id, reply) => {
                let args = serde_json::json!({"id": id});
                let r = match self.session.jobs_mut().tool("job_stop", &args) {
                    Some(harness_loop::jobs::JobDecision::Stop { .. }) => {
                        self.stop_job(id);
                        Ok(())
                    }
                    Some(d) => Err(d.text().to_owned()),
                    None => Err(format!("no job {id}")),
                };
                let _ = reply.send(r);
                return None;
            }
            Ctl::Keep(turns, reply) => {
                let have = self.session.turns();
                let r = if self.session.busy() {
                    Err("a prompt is running: cancel it first".to_owned())
                } else if turns > have {
                    Err(format!("the session has {have} turns, not {turns}"))
                } else if turns == have {
                    Ok(turns)
                } else {
                    self.session
                        .rewind(turns + 1)
                        .map(|()| turns)
                        .map_err(|e| e.to_string())
                };
                let _ = self.flush_log();
                let _ = reply.send(r);
                return None;
            }
            Ctl::Query(q, reply) => {
                let text = self.query(q);
                let _ = self.flush_log();
                let _ = reply.send(text);
                return None;
            }
        };
        match op {
            Op::Prompt { text, images, .. } => {
                self.queued_prompts.push_back((text, images));
                None
            }
            Op::Cancel => {
                if self.session.busy() || self.compacting {
                    self.cancelled = true;
                    self.cancel.cancel();
                }
                None
            }
            Op::SetMode { mode } => {
                self.set_mode(mode);
                None
            }
            Op::Answer { call_id, answer } => Some((call_id, answer)),
            _ => None,
        }
    }

    fn query(&mut self, q: Query) -> String {
        match q {
            // Reached only while a prompt runs (an idle session compacts in `run`).
            Query::Compact => "a prompt is running: compact after it".into(),
            Query::Jobs => match self
                .session
                .jobs_mut()
                .tool("job_list", &serde_json::json!({}))
            {
                Some(d) => d.text().to_owned(),
                None => "no jobs".to_owned(),
            },
            Query::Plan => match self.plan.lock().ok().and_then(|p| p.plan.clone()) {
                Some(p) => p.render(),
                None => "no plan yet".to_owned(),
            },
            Query::Recall(id) => match self.session.context().stored(&id) {
                Some(s) => s.output.clone(),
                None => format!("no stored result {id}"),
            },
            Query::Rewind(0) => format!(
                "{} turns; /rewind N goes back to before turn N",
                self.session.turns()
            ),
            Query::Rewind(n) => match self.session.rewind(n) {
                Ok(()) => format!(
                    "rewound: turn {n} and those after it are gone from what the model sees"
                ),
                Err(e) => e.to_string(),
            },
            Query::Model(Some(name)) => {
                if self.session.busy() {
                    return "a prompt is running: switch the model after it".into();
                }
                match self.client.with_model(&name) {
                    Ok(c) => {
                        self.client = c;
                        self.model_name = name.clone();
                        self.values.insert("model".into(), name.clone());
                        format!("model: {name}")
                    }
                    Err(e) => e.to_string(),
                }
            }
            Query::Model(None) => self.client.describe(),
        }
    }

    /// Changes the permission mode (and what is offered with it).
    pub fn set_mode(&mut self, mode: Mode) {
        self.perms.set_mode(mode);
        self.offer_again();
        // Kept with the session, so that resuming it restores the mode.
        if self.meta.mode != Some(mode) {
            self.meta.mode = Some(mode);
            if let Err(e) = self.store.save(&self.meta) {
                self.notice(Level::Warning, format!("the mode was not saved: {e}"));
            }
        }
        self.emit(Event::ModeChanged { mode });
    }

    async fn feed(&mut self, input: Input) -> Result<()> {
        let mut queue: VecDeque<Action> = self.session.handle(input)?.into();
        self.flush_log()?;
        while let Some(action) = queue.pop_front() {
            let next = match action {
                // A change is asked about with the diff it would make: approved seen, not blind.
                Action::Emit(Event::ToolCallAsked {
                    call_id,
                    mut question,
                }) => {
                    if question.change.is_none() {
                        question.change = self
                            .session
                            .pending_call(&call_id)
                            .and_then(|call| crate::preview::change(&*self.world, call));
                    }
                    self.emit(Event::ToolCallAsked { call_id, question });
                    None
                }
                Action::Emit(event) => {
                    self.emit(event);
                    None
                }
                Action::EndTurn(reason) => {
                    self.last_end = Some(reason);
                    self.cancelled = false;
                    self.cancel = CancellationToken::new();
                    None
                }
                Action::CallModel(request) => Some(self.step(request).await?),
                Action::RunTools { calls, parallel } => {
                    Some(self.run_tools(calls, parallel).await?)
                }
                Action::Ask { call_id, question } => Some(self.ask(call_id, question).await?),
                Action::StartJob { id, kind, call } => {
                    self.start_job(id, kind, &call);
                    None
                }
                Action::StopJob { id } => {
                    self.stop_job(id);
                    None
                }
                Action::DeliverToJob { id, message } => {
                    if let Some(child) = self.subagents.get(&id) {
                        let _ = child.send(Ctl::Message(message));
                    }
                    None
                }
                Action::RestartJob { id, message } => {
                    self.restart_subagent(id, message);
                    None
                }
                Action::ReportToParent { text } => {
                    if let Some((tx, id)) = &self.report_to {
                        let _ = tx.send(JobMsg::Report { id: *id, text });
                    }
                    None
                }
            };
            if let Some(input) = next {
                let more = self.session.handle(input)?;
                self.flush_log()?;
                queue.extend(more);
            }
        }
        Ok(())
    }

    /// Waits for `task` while ops and job messages keep coming; job messages are fed to the
    /// session at once (they never need an answer), ops are applied.
    async fn wait<T: Send + 'static>(&mut self, task: tokio::task::JoinHandle<T>) -> Result<T> {
        let mut task = task;
        loop {
            tokio::select! {
                r = &mut task => return r.map_err(|e| Error::Task(e.to_string())),
                Some(op) = self.ops.recv() => {
                    // An answer outside a question is stale; nothing to do with it.
                    let _ = self.op_while_busy(op);
                }
                Some(msg) = self.job_rx.recv() => {
                    for other in self.job_while_waiting(msg)? {
                        self.notice(Level::Info, format!("deferred action dropped: {other:?}"));
                    }
                }
            }
        }
    }

    /// A job's message that came while the session waits on something: fed to the session at
    /// once (it never needs an answer), its events shown; the other actions it gave back.
    fn job_while_waiting(&mut self, msg: JobMsg) -> Result<Vec<Action>> {
        let input = self.job_input(msg);
        let actions = self.session.handle(input)?;
        self.flush_log()?;
        let mut rest = Vec::new();
        for a in actions {
            match a {
                Action::Emit(e) => self.emit(e),
                other => rest.push(other),
            }
        }
        Ok(rest)
    }

    fn system_text(&self) -> Result<String> {
        let mut names = self.offering.names();
        names.extend(self.registered.iter().map(|r| r.name.as_str()));
        let plan = self.plan.lock().ok().and_then(|p| p.plan.clone());
        let text = self
            .assembled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .text(&PromptInput {
                project: self.project,
                kind: self.kind,
                mode: self.perms.mode(),
                subagent: self.agent.as_deref(),
                personality: self.personality.as_deref(),
                offered: &names,
                instructions: &self.instructions,
                plan: plan.as_ref(),
                prototypes: self.prototypes.as_ref(),
                values: &self.values,
            })?;
        Ok(text)
    }

    /// One model step: compacted first when the request would fill the window past the spec's
    /// share, and compacted and sent once more when the answer says the context overflowed.
    async fn step(&mut self, request: ModelRequest) -> Result<Input> {
        let mut request = request;
        let mut compacted = false;
        if self.near_full(&request)?
            && let Some(again) = self.compact_in_turn().await?
        {
            request = again;
            compacted = true;
        }
        self.overflowed = false;
        let input = self.call_model(request).await?;
        if std::mem::take(&mut self.overflowed)
            && harness_loop::context::compact_after_overflow(compacted, self.cancelled)
            && let Some(again) = self.compact_in_turn().await?
        {
            self.overflowed = false;
            return self.call_model(again).await;
        }
        Ok(input)
    }

    /// Whether `request` (with the system text) would fill more than the spec's share of the
    /// model's context window. A history that is one message (just compacted) is never full.
    fn near_full(&self, request: &ModelRequest) -> Result<bool> {
        if self.client.model().context.is_none() {
            // No window known: the loop's rule compacts nothing; skip assembling the prompt.
            return Ok(false);
        }
        let percent = LoopConfig::embedded()?.context.compaction.near_full_percent;
        // The tools offered take room too (their schemas as sent, four characters a token).
        let tools: usize = if request.tools && self.client.model().tools {
            self.specs_and_size().1
        } else {
            0
        };
        let tokens = request.approx_tokens() + ((self.system_text()?.len() + tools) / 4) as u64;
        Ok(harness_loop::context::near_full(
            percent,
            self.client.model().context,
            tokens,
            request.messages.len(),
        ))
    }

    /// Compacts inside a turn (the session waits for the model): the request to send instead,
    /// or `None` when the compaction could not be done (said in a notice).
    async fn compact_in_turn(&mut self) -> Result<Option<ModelRequest>> {
        match self.compact().await? {
            Ok(text) => {
                self.notice(Level::Info, text);
                Ok(self.session.request_again())
            }
            Err(why) => {
                self.notice(Level::Warning, format!("cannot compact: {why}"));
                Ok(None)
            }
        }
    }

    /// Compaction (`spec/context.md` §8): the model is asked, with no tools, for a summary of
    /// the conversation (`loop.json` `context.compaction.request`); the session's history then
    /// becomes that summary and the table of reads, and the dedupe table empties. `Ok(Err)`
    /// says why nothing was compacted.
    pub async fn compact(&mut self) -> Result<std::result::Result<String, String>> {
        let Some(request) = self.session.summary_request() else {
            return Ok(Err(if self.session.history().is_empty() {
                "nothing to compact yet".into()
            } else {
                "calls are being run".into()
            }));
        };
        let before = self.session.history().len();
        let before_tokens = approx_tokens(self.session.history());
        let mut messages = vec![Message::System {
            text: self.system_text()?,
        }];
        messages.extend(request.messages);
        let chat = ChatRequest {
            messages,
            // The tools stay listed (the prompt's cache holds) but none may be called.
            tools: self.tool_specs(),
            tool_choice: Some(ToolChoice::None),
            ..ChatRequest::default()
        };
        self.compacting = true;
        let task = self.model_task(chat, false);
        let result = self.wait(task).await;
        self.compacting = false;
        if self.cancelled || self.cancel.is_cancelled() {
            if !self.session.busy() {
                self.cancelled = false;
                self.cancel = CancellationToken::new();
            }
            return Ok(Err("cancelled".into()));
        }
        let completion = match result? {
            Ok(c) => c,
            Err(e) => return Ok(Err(format!("the model gave no summary: {e}"))),
        };
        if matches!(
            completion.finish.reason,
            FinishReason::Error | FinishReason::ContextOverflow | FinishReason::Capacity
        ) {
            let why = completion
                .finish
                .error
                .map(|e| e.to_string())
                .unwrap_or_else(|| completion.finish.reason.as_str().to_owned());
            return Ok(Err(format!("the model gave no summary: {why}")));
        }
        match self.session.compact_with_answer(&completion.text) {
            Ok(_) => {
                self.flush_log()?;
                self.emit(Event::Compacted {
                    before_tokens,
                    after_tokens: approx_tokens(self.session.history()),
                });
                Ok(Ok(format!(
                    "compacted: {before} messages became a summary of {} characters",
                    completion.text.trim().chars().count()
                )))
            }
            Err(e) => Ok(Err(e.to_string())),
        }
    }

    /// The offered tools as the model link sends them (harness-model leaves them out for a
    /// model whose metadata says it calls no tools).
    fn tool_specs(&self) -> Arc<[ToolSpec]> {
        self.specs_and_size().0.clone()
    }

    fn specs_and_size(&self) -> &(Arc<[ToolSpec]>, usize) {
        self.specs.get_or_init(|| {
            let specs = specs_of(&self.offering, &self.registered);
            let specs = harness_model::shape::shared_tools(specs);
            let size = specs
                .iter()
                .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
                .sum();
            (specs, size)
        })
    }

    async fn call_model(&mut self, request: ModelRequest) -> Result<Input> {
        let mut messages = vec![Message::System {
            text: self.system_text()?,
        }];
        messages.extend(request.messages.iter().cloned());
        let chat = ChatRequest {
            messages,
            tools: if request.tools {
                self.tool_specs()
            } else {
                Arc::default()
            },
            tool_choice: if request.tools {
                None
            } else {
                Some(ToolChoice::None)
            },
            ..ChatRequest::default()
        };
        self.shown = Arc::new(std::sync::Mutex::new(String::new()));
        let task = self.model_task(chat, true);
        let result = self.wait(task).await?;
        let shown = |d: &Self| d.shown.lock().map(|s| s.clone()).unwrap_or_default();
        if self.cancelled {
            return Ok(Input::Stopped {
                shown: shown(self),
                results: Vec::new(),
            });
        }
        Ok(match result {
            Ok(c) => self.model_input(c),
            Err(harness_model::Error::Cancelled) => Input::Stopped {
                shown: shown(self),
                results: Vec::new(),
            },
            Err(e) => {
                self.overflowed = matches!(e, harness_model::Error::ContextOverflow(_));
                Input::ModelFailed {
                    message: e.to_string(),
                }
            }
        })
    }

    /// One model request as a task: it first waits for a slot of the model's server (a
    /// subagent's requests go in the slot it holds), streams the answer's pieces to the front end
    /// when `shown`, and gives the slot back.
    fn model_task(
        &self,
        chat: ChatRequest,
        shown: bool,
    ) -> tokio::task::JoinHandle<std::result::Result<Completion, harness_model::Error>> {
        let client = self.client.clone();
        let cancel = self.cancel.clone();
        let out = self.out.clone();
        let gate = self.capacity.clone();
        let seen = self.shown.clone();
        let server = client.server();
        let holder = self
            .agent
            .is_none()
            .then(|| harness_loop::capacity::Holder::Request(self.meta.id.clone()));
        tokio::spawn(async move {
            if let Some(h) = &holder {
                let notices = out.clone();
                let mut queued = |position: usize| {
                    let _ = notices.send(Out::Event(Event::Notice {
                        level: Level::Info,
                        text: format!(
                            "waiting for a free slot of {server}: number {position} in line"
                        ),
                    }));
                };
                if !gate.acquire(&server, h, &cancel, &mut queued).await {
                    return Err(harness_model::Error::Cancelled);
                }
            }
            let mut on_event = |e: &StreamEvent| {
                // A retry is told even for a request whose answer is not shown (compaction).
                if let StreamEvent::Retry(r) = e {
                    let _ = out.send(Out::Event(Event::Notice {
                        level: Level::Info,
                        text: r.to_string(),
                    }));
                    return;
                }
                if !shown {
                    return;
                }
                let ev = match e {
                    StreamEvent::Text(t) => {
                        if let Ok(mut s) = seen.lock() {
                            s.push_str(t);
                        }
                        Event::TextDelta { text: t.clone() }
                    }
                    StreamEvent::Reasoning(t) => Event::ReasoningDelta { text: t.clone() },
                    _ => return,
                };
                let _ = out.send(Out::Event(ev));
            };
            let answer = client.stream(&chat, &cancel, &mut on_event).await;
            if let Some(h) = &holder {
                gate.release(&server, h);
            }
            answer
        })
    }

    fn model_input(&mut self, c: Completion) -> Input {
        match c.finish.reason {
            FinishReason::Error | FinishReason::ContextOverflow | FinishReason::Capacity => {
                self.overflowed = c.finish.reason == FinishReason::ContextOverflow;
                let message = c.finish.error.map(|e| e.to_string()).unwrap_or_else(|| {
                    format!("the model's answer ended with {}", c.finish.reason.as_str())
                });
                return Input::ModelFailed { message };
            }
            FinishReason::Length if c.tool_calls.is_empty() => {
                self.notice(Level::Warning, "the answer was cut at the output limit");
            }
            _ => {}
        }
        for bad in &c.invalid_calls {
            self.notice(
                Level::Warning,
                format!("a call of {:?} was not run: {}", bad.name, bad.reason),
            );
        }
        let note = match harness_model::Quirks::embedded() {
            Ok(q) => c.invalid_calls_note(q),
            Err(e) => {
                self.notice(Level::Warning, format!("the quirks did not load: {e}"));
                None
            }
        };
        self.emit(Event::ModelAnswered {
            usage: c.usage.map(Into::into),
        });
        let spec = Spec::embedded();
        let (calls, purposes): (Vec<ToolCall>, Vec<Option<String>>) = c
            .tool_calls
            .into_iter()
            .map(|call| match self.offering.resolve(&call) {
                Ok(r) => (r.call, r.purpose),
                Err(_) => (call, None),
            })
            .unzip();
        // A deferred tool the model called directly is sent whole from the next request on.
        let called: Vec<String> = calls
            .iter()
            .filter(|c| self.offering.is_deferred(&c.name))
            .map(|c| c.name.clone())
            .collect();
        if !called.is_empty() {
            self.offering.context.loaded.extend(called);
            self.offer_again();
        }
        for (call, purpose) in calls.iter().zip(purposes) {
            let block = spec
                .tool(&call.name)
                .map(|t| t.block)
                .unwrap_or(harness_spec::Block::Tool);
            self.emit(Event::ToolCallStarted {
                call: call.clone(),
                block,
                purpose,
            });
        }
        Input::Model(ModelOutput {
            text: c.text,
            reasoning: c.reasoning,
            tool_calls: calls,
            usage: c.usage.map(Into::into),
            note,
        })
    }

    async fn ask(&mut self, call_id: String, question: PermissionQuestion) -> Result<Input> {
        loop {
            tokio::select! {
                op = self.ops.recv() => match op {
                    None => {
                        return Ok(Input::Answer {
                            call_id,
                            answer: Answer::Deny { feedback: None },
                        });
                    }
                    Some(op) => {
                        if let Some((id, answer)) = self.op_while_busy(op)
                            && id == call_id
                        {
                            if answer == Answer::Always {
                                self.perms.approve_always(&question);
                            }
                            if matches!(answer, Answer::Once | Answer::Always) {
                                self.approved.insert(call_id.clone());
                            }
                            return Ok(Input::Answer { call_id, answer });
                        }
                        if self.cancelled {
                            return Ok(Input::Cancel);
                        }
                    }
                },
                Some(msg) = self.job_rx.recv() => {
                    let _ = self.job_while_waiting(msg)?;
                }
            }
        }
    }

    /// Whether the runtime answers `name` itself (with the front end, the store or the plan)
    /// rather than the world.
    fn answers(&self, name: &str) -> bool {
        RUNTIME_ANSWERS.contains(&name)
    }

    async fn run_tools(&mut self, calls: Vec<ToolCall>, parallel: bool) -> Result<Input> {
        // The loop said which batches may run at once (by the spec's `exclusive`); calls the
        // runtime answers itself wait on the front end or the session, so they run one by one.
        let parallel = parallel && calls.iter().all(|c| !self.answers(&c.name));
        let mut results = Vec::new();
        if parallel {
            let world = self.world.clone();
            let approved = self.approved.clone();
            let cancel = self.cancel.clone();
            let out = self.out.clone();
            let batch = calls.clone();
            let task = tokio::spawn(async move {
                let runs = batch.iter().map(|c| {
                    let cx = CallContext {
                        cancel: cancel.clone(),
                        output: forward_output(&out, &c.id),
                        approved: approved.contains(&c.id),
                    };
                    world.call(c, cx)
                });
                futures_util::future::join_all(runs).await
            });
            let ran = self.wait(task).await?;
            for (call, ran) in calls.iter().zip(ran) {
                let outcome = self.finish(call, ran).await;
                results.push(outcome);
            }
        } else {
            for call in calls {
                if self.cancelled {
                    break;
                }
                let outcome = self.run_one(call).await?;
                results.push(outcome);
            }
        }
        if self.cancelled {
            // What ran stays as it ran; the rest is answered `cancelled`.
            return Ok(Input::Stopped {
                shown: String::new(),
                results,
            });
        }
        Ok(Input::ToolResults(results))
    }

    async fn run_one(&mut self, call: ToolCall) -> Result<ToolOutcome> {
        match call.name.as_str() {
            "question" => return self.question(&call).await,
            "show" => return self.show(&call).await,
            "task" => return self.task(&call).await,
            "session_search" => {
                let q = call
                    .arguments
                    .get("query")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let limit = call
                    .arguments
                    .get("limit")
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(5) as usize;
                let store = self.store.clone();
                let me = self.meta.id.clone();
                let task = tokio::task::spawn_blocking(move || store.search(&q, limit, &me));
                let text = self.wait(task).await?.unwrap_or_default();
                return Ok(ToolOutcome::ok(&call.id, text));
            }
            "plan_write" | "plan_update" | "plan_submit" => return Ok(self.plan_call(&call)),
            harness_core::offer::LOADER => return Ok(self.load_tools(&call)),
            _ => {}
        }
        let world = self.world.clone();
        let cx = CallContext {
            cancel: self.cancel.clone(),
            output: forward_output(&self.out, &call.id),
            approved: self.approved.contains(&call.id),
        };
        let c = call.clone();
        let task = tokio::spawn(async move { world.call(&c, cx).await });
        let ran = self.wait(task).await?;
        Ok(self.finish(&call, ran).await)
    }

    /// A call of the loader: the deferred tools it names are sent whole from the next request on.
    fn load_tools(&mut self, call: &ToolCall) -> ToolOutcome {
        let (names, load) = self.offering.load(call);
        if !names.is_empty() {
            self.offering.context.loaded.extend(names);
            self.offer_again();
        }
        let (text, error) = load.answer();
        ToolOutcome::answer(&call.id, text, error)
    }

    /// A plan tool's call on the session's plan (harness-core's rules).
    fn plan_call(&mut self, call: &ToolCall) -> ToolOutcome {
        let plan_mode = self.perms.mode() == Mode::Plan;
        let applied = self
            .plan
            .lock()
            .map_err(|_| "the plan is not available".to_owned())
            .and_then(|mut p| {
                p.apply(&call.name, &call.arguments, plan_mode)
                    .map_err(|e| e.to_string())
            });
        match applied {
            Ok(text) => {
                let (plan, open) = match self.plan.lock() {
                    Ok(p) => (p.plan.clone(), open_tasks(p.plan.as_ref())),
                    Err(_) => (None, Vec::new()),
                };
                self.session.set_open_tasks(open);
                self.emit(Event::PlanChanged { plan });
                ToolOutcome::ok(&call.id, text)
            }
            Err(text) => ToolOutcome::error(&call.id, text),
        }
    }

    /// What a world's run of a call becomes: its outcome (an edit shown to the front end), or,
    /// for a command that outlived its timeout, a job as the loop decides.
    async fn finish(&mut self, call: &ToolCall, ran: Ran) -> ToolOutcome {
        match ran {
            Ran::Done(outcome) => {
                if let Some(e) = &outcome.edit
                    && !outcome.is_error
                {
                    let _ = self.out.send(Out::Edit {
                        call_id: call.id.clone(),
                        path: e.path.clone(),
                        before: e.before.clone(),
                        after: e.after.clone(),
                    });
                }
                outcome
            }
            Ran::Overran {
                call_id,
                title,
                seconds,
                running,
            } => {
                let (seen, so_far) = running.output_since(0);
                match self.session.jobs_mut().overrun(&title, seconds, &so_far) {
                    harness_loop::jobs::Overrun::Continue { id, text } => {
                        self.emit(Event::JobStarted {
                            job_id: id.to_string(),
                            kind: JobKind::Command,
                            title,
                        });
                        self.watch_job(id, running, seen);
                        let body = so_far.trim_end_matches('\n');
                        let output = if body.is_empty() {
                            text
                        } else {
                            format!("{body}\n\n{text}")
                        };
                        ToolOutcome::ok(call_id, output)
                    }
                    harness_loop::jobs::Overrun::Kill { text } => {
                        running.stop().await;
                        ToolOutcome::error(call_id, text)
                    }
                }
            }
        }
    }

    /// A `task` call in the foreground: a subagent runs to its end and its reply answers.
    async fn task(&mut self, call: &ToolCall) -> Result<ToolOutcome> {
        Ok(match self.spawn_subagent(call, None, self.cancel.clone()) {
            Ok((_ctl, handle, _)) => match self.wait(handle).await? {
                Ok(text) => ToolOutcome::ok(&call.id, text),
                Err(message) => ToolOutcome::error(&call.id, message),
            },
            Err(message) => ToolOutcome::error(&call.id, message),
        })
    }

    fn start_job(&mut self, id: u32, kind: JobKind, call: &ToolCall) {
        if kind != JobKind::Command {
            match self.spawn_subagent(call, Some(id), CancellationToken::new()) {
                Ok((ctl, handle, session)) => {
                    let agent = call
                        .arguments
                        .get("agent")
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or("general")
                        .to_owned();
                    self.subagent_sessions.insert(id, (agent, session));
                    self.watch_subagent(id, Ok((ctl, handle)));
                }
                Err(message) => self.watch_subagent(id, Err(message)),
            }
            return;
        }
        let command = call
            .arguments
            .get("command")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        let started = if self.approved.contains(&call.id) {
            self.spawner.spawn_approved(command)
        } else {
            self.spawner.spawn(command)
        };
        match started {
            Ok(r) => self.watch_job(id, r, 0),
            Err(e) => {
                self.notice(Level::Warning, format!("job {id} did not start: {e}"));
                let _ = self.job_tx.send(JobMsg::Ended {
                    id,
                    exit: Exit::Code(127),
                });
            }
        }
    }

    /// Puts a `question` call to the person and waits for the reply (or a cancel).
    async fn question(&mut self, call: &ToolCall) -> Result<ToolOutcome> {
        let a = &call.arguments;
        let question = a
            .get("question")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let options: Vec<String> = a
            .get("options")
            .and_then(serde_json::Value::as_array)
            .map(|o| {
                o.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        self.reply = None;
        let _ = self.out.send(Out::Question {
            call_id: call.id.clone(),
            question,
            options,
        });
        Ok(match self.wait_reply(&call.id).await? {
            Some(Some(t)) => ToolOutcome::ok(&call.id, t),
            Some(None) => ToolOutcome::error(&call.id, "Nobody answered the question."),
            None => ToolOutcome::error(&call.id, ""),
        })
    }

    /// Waits for the front end's [`Ctl::Reply`] to `call_id` while ops and job messages keep
    /// coming; `None` when the turn was cancelled first.
    async fn wait_reply(&mut self, call_id: &str) -> Result<Option<Option<String>>> {
        loop {
            if let Some((id, text)) = self.reply.take()
                && id == call_id
            {
                return Ok(Some(text));
            }
            if self.cancelled {
                return Ok(None);
            }
            tokio::select! {
                op = self.ops.recv() => match op {
                    Some(op) => { let _ = self.op_while_busy(op); }
                    None => self.reply = Some((call_id.to_owned(), None)),
                },
                Some(msg) = self.job_rx.recv() => {
                    let _ = self.job_while_waiting(msg)?;
                }
            }
        }
    }

    /// Sends a `show` call's file to the front end's viewer (it holds `display`) and waits
    /// for it to say whether the file opened; when the viewer is gone, the tool's
    /// `unavailable` text answers, word for word.
    async fn show(&mut self, call: &ToolCall) -> Result<ToolOutcome> {
        let unavailable = || {
            let holds = harness_core::offer::Holds::default();
            Spec::embedded()
                .tool("show")
                .and_then(|t| harness_core::offer::unavailable(t, &holds))
                .unwrap_or_default()
                .to_owned()
        };
        if !self.display {
            return Ok(ToolOutcome::error(&call.id, unavailable()));
        }
        let Some(rel) = call
            .arguments
            .get("path")
            .and_then(serde_json::Value::as_str)
        else {
            return Ok(ToolOutcome::error(
                &call.id,
                "show: the argument `path` is missing",
            ));
        };
        // Through the session's view, as `read` would see the path.
        let world = self.world.clone();
        let rel = rel.to_owned();
        let task = tokio::task::spawn_blocking(move || world.read_for_show(&rel));
        let file = match self.wait(task).await? {
            Ok(f) => f,
            Err(text) => return Ok(ToolOutcome::error(&call.id, text)),
        };
        let path = std::path::Path::new(&file.path);
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let (kind, language) = match ext.as_str() {
            "md" | "markdown" => ("markdown", None),
            "html" | "htm" => ("html", None),
            "" | "txt" | "log" | "text" => ("text", None),
            other => ("code", Some(other.to_owned())),
        };
        self.reply = None;
        let _ = self.out.send(Out::Show {
            call_id: call.id.clone(),
            path: file.path.clone(),
            title: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            kind: kind.to_owned(),
            language,
            line: call
                .arguments
                .get("line")
                .and_then(serde_json::Value::as_u64),
            content: file.content,
        });
        Ok(match self.wait_reply(&call.id).await? {
            Some(Some(_)) => ToolOutcome::ok(
                &call.id,
                format!("{} is open for the person to see.", file.path),
            ),
            Some(None) => ToolOutcome::error(&call.id, unavailable()),
            None => ToolOutcome::error(&call.id, ""),
        })
    }

    /// Starts a subagent for a `task` call: a session of its own on the same disk, model and
    /// permissions, driven to the end of its prompt. `job`: it runs as that background job (its
    /// `report`s go to this session). A cancel of `cancel` cancels it. The handle gives its final
    /// reply.
    fn spawn_subagent(
        &self,
        call: &ToolCall,
        job: Option<u32>,
        cancel: CancellationToken,
    ) -> std::result::Result<Launched, String> {
        if self.agent.is_some() {
            return Err("a subagent cannot start subagents of its own".into());
        }
        let a = &call.arguments;
        let agent = a
            .get("agent")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("general");
        if !AGENTS.contains(&agent) {
            return Err(format!(
                "there is no agent {agent:?}: use one of {}",
                AGENTS.join(", ")
            ));
        }
        let Some(prompt) = a.get("prompt").and_then(serde_json::Value::as_str) else {
            return Err("task: the argument `prompt` is missing".into());
        };
        let mut meta = self.store.create(&self.world.place(), &self.model_name)?;
        meta.title = format!("{agent}: {}", prompt.lines().next().unwrap_or_default());
        self.launch(agent, prompt, meta, None, job, cancel)
    }

    /// Starts ended subagent job `id` again with its saved context and `message`.
    fn restart_subagent(&mut self, id: u32, message: String) {
        let Some((agent, session)) = self.subagent_sessions.get(&id).cloned() else {
            let _ = self.job_tx.send(JobMsg::SubagentEnded {
                id,
                reply: Err("the subagent's session is not known here".into()),
            });
            return;
        };
        let started = self.store.find(&session).and_then(|meta| {
            let entries = self.store.load(&meta.id)?;
            self.launch(
                &agent,
                &message,
                meta,
                Some(entries),
                Some(id),
                CancellationToken::new(),
            )
        });
        self.watch_subagent(id, started.map(|(ctl, handle, _)| (ctl, handle)));
    }

    /// Keeps a background subagent's control channel and wakes the session when it ends (or at
    /// once, with the reason, when it could not start).
    fn watch_subagent(
        &mut self,
        id: u32,
        started: std::result::Result<(mpsc::UnboundedSender<Ctl>, SubagentRun), String>,
    ) {
        match started {
            Ok((ctl, handle)) => {
                self.subagents.insert(id, ctl);
                let tx = self.job_tx.clone();
                tokio::spawn(async move {
                    let reply = handle
                        .await
                        .unwrap_or_else(|e| Err(format!("the subagent failed: {e}")));
                    let _ = tx.send(JobMsg::SubagentEnded { id, reply });
                });
            }
            Err(message) => {
                let _ = self.job_tx.send(JobMsg::SubagentEnded {
                    id,
                    reply: Err(message),
                });
            }
        }
    }

    fn launch(
        &self,
        agent: &str,
        prompt: &str,
        meta: Meta,
        resume: Option<Vec<Entry>>,
        job: Option<u32>,
        cancel: CancellationToken,
    ) -> std::result::Result<Launched, String> {
        let setup = DriverSetup {
            model: self.client.clone(),
            model_name: self.model_name.clone(),
            perms: self.perms.clone(),
            world: self.world.clone(),
            jobs: self.spawner.clone(),
            plan: self.plan.clone(),
            capacity: self.capacity.clone(),
            personality: self.personality.clone(),
            store: self.store.clone(),
            meta,
            agent: Some(agent.to_owned()),
            project: self.project,
            kind: self.kind,
            product_version: self.product_version.clone(),
        };
        let (out_tx, mut out_rx) = mpsc::unbounded_channel();
        let (ctl_tx, ctl_rx) = mpsc::unbounded_channel();
        let mut child =
            Driver::new(setup, resume.as_deref(), out_tx, ctl_rx).map_err(|e| format!("{e:#}"))?;
        let session_id = child.id().to_owned();
        child.report_to = job.map(|id| (self.job_tx.clone(), id));
        child.queue_prompt(prompt.to_owned());
        // What a subagent has to tell the person (the loop's notices, such as a declined
        // call) reaches the parent's front end, named by the job or task.
        let parent_out = self.out.clone();
        let label = match job {
            Some(id) => format!("job {id}"),
            None => format!("task {agent}"),
        };
        tokio::spawn(async move {
            while let Some(out) = out_rx.recv().await {
                if let Out::Event(Event::Notice {
                    level: Level::Warning,
                    text,
                }) = out
                {
                    let _ = parent_out.send(Out::Event(Event::Notice {
                        level: Level::Warning,
                        text: format!("{label}: {text}"),
                    }));
                }
            }
        });
        let cancel_tx = ctl_tx.clone();
        // A running subagent holds a slot of its server (it is admitted at once, and the main
        // agent's requests wait while the slots are full); its own requests go in it.
        let gate = self.capacity.clone();
        let server = self.client.server();
        let slot =
            harness_loop::capacity::Holder::Subagent(format!("{}/{session_id}", self.meta.id));
        let handle = tokio::spawn(async move {
            gate.acquire(&server, &slot, &CancellationToken::new(), &mut |_| {})
                .await;
            let watch = tokio::spawn(async move {
                cancel.cancelled().await;
                let _ = cancel_tx.send(Ctl::Op(Op::Cancel));
            });
            let r = child.run(true).await;
            gate.release(&server, &slot);
            watch.abort();
            child.shutdown().await;
            if let Err(e) = r {
                return Err(format!("the subagent failed: {e:#}"));
            }
            match child.last_end() {
                Some(TurnEnd::Finished) => Ok(child
                    .history()
                    .iter()
                    .rev()
                    .find_map(|m| match m {
                        Message::Assistant { text, .. } if !text.trim().is_empty() => {
                            Some(text.clone())
                        }
                        _ => None,
                    })
                    .unwrap_or_default()),
                Some(end) => Err(format!(
                    "the subagent stopped: {}",
                    crate::protocol::turn_end_text(end)
                )),
                None => Err("the subagent did not run".into()),
            }
        });
        Ok((ctl_tx, handle, session_id))
    }

    /// Stops a running job: a subagent is cancelled, a command's process stopped; its end comes
    /// back as the job's usual end, marked stopped.
    fn stop_job(&mut self, id: u32) {
        if let Some(child) = self.subagents.get(&id) {
            self.stopping.insert(id);
            let _ = child.send(Ctl::Op(Op::Cancel));
        } else if let Some(r) = self.jobs.get(&id).cloned() {
            self.stopping.insert(id);
            tokio::spawn(async move {
                r.stop().await;
            });
        }
    }

    /// Follows a running job: its new output and its end go to the session.
    fn watch_job(&mut self, id: u32, running: Arc<dyn Process>, seen: u64) {
        self.jobs.insert(id, running.clone());
        let tx = self.job_tx.clone();
        tokio::spawn(async move {
            let mut seen = seen;
            loop {
                let done = running
                    .wait_for(std::time::Duration::from_millis(250))
                    .await;
                let (total, text) = running.output_since(seen);
                if total > seen {
                    let _ = tx.send(JobMsg::Output { id, text });
                    seen = total;
                }
                if let Some(exit) = done {
                    let _ = tx.send(JobMsg::Ended { id, exit });
                    return;
                }
            }
        });
    }

    /// The history the model sees now.
    pub fn history(&self) -> &[Message] {
        self.session.history()
    }

    /// The model's name.
    pub fn model_name(&self) -> &str {
        &self.model_name
    }
}

/// Puts the plan back as the saved plan calls left it (the plan is not in the transcript; its
/// calls and their answers are).
fn replay_plan(plan: &Mutex<PlanState>, entries: &[Entry]) {
    let mut calls: HashMap<String, ToolCall> = HashMap::new();
    let Ok(mut plan) = plan.lock() else {
        return;
    };
    for e in entries {
        match e {
            Entry::Assistant { tool_calls, .. } => {
                for c in tool_calls {
                    calls.insert(c.id.clone(), c.clone());
                }
            }
            Entry::ToolResult { call_id, kind, .. }
                if *kind != harness_loop::context::InsertKind::Error =>
            {
                if let Some(c) = calls.get(call_id)
                    && c.name.starts_with("plan_")
                {
                    let _ = plan.apply(&c.name, &c.arguments, true);
                }
            }
            _ => {}
        }
    }
}

fn open_tasks(plan: Option<&harness_core::plan::Plan>) -> Vec<String> {
    let Some(plan) = plan else {
        return Vec::new();
    };
    let v = serde_json::to_value(plan).unwrap_or_default();
    let mut out = Vec::new();
    if let Some(phases) = v.get("phases").and_then(|p| p.as_array()) {
        for ph in phases {
            for t in ph
                .get("tasks")
                .and_then(|t| t.as_array())
                .into_iter()
                .flatten()
            {
                let status = t.get("status").and_then(|s| s.as_str()).unwrap_or("");
                if (status == "todo" || status == "doing")
                    && let Some(title) = t.get("title").and_then(|s| s.as_str())
                {
                    out.push(title.to_owned());
                }
            }
        }
    }
    out
}

/// Where a call's output goes as it comes: each piece to the front end as [`Out::ToolOutput`],
/// in order, before the call's result.
fn forward_output(out: &mpsc::UnboundedSender<Out>, call_id: &str) -> crate::seams::OutputSink {
    let out = out.clone();
    let call_id = call_id.to_owned();
    Arc::new(move |text: String| {
        let _ = out.send(Out::ToolOutput {
            call_id: call_id.clone(),
            text,
        });
    })
}

/// A history's size in tokens, estimated as the loop estimates a prompt (four characters a
/// token).
fn approx_tokens(history: &[Message]) -> u64 {
    (history.iter().map(Message::chars).sum::<usize>() / 4) as u64
}

/// A session's title from its first message: its first line with words, trimmed, at most 80
/// characters.
fn first_line_title(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .chars()
        .take(80)
        .collect()
}
