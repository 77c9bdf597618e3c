//! The session runner: it feeds the loop's state machine ([`harness_loop::session::Session`])
//! and performs the actions it answers — model calls through the [`ModelLink`], tools through
//! the [`ToolWorld`], questions through the front end, jobs through the [`JobSpawner`] — while
//! the front end talks to it only through its [`crate::Session`] ([`Ctl`]s in, [`Event`]s out).
//!
//! Here: the driver, its making and its turn (the run loop, the loop's actions carried out, a
//! wait that keeps ops and job news coming). By job: `catalogue` (what is offered, the system
//! text), `control` (what the front end sends), `model` (the model's steps, compaction),
//! `tools` (dispatch and the runtime's own tools), `jobs` (the job supervisor, subagents).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use harness_core::offer::{OfferContext, Offering};
use harness_core::plan::PlanState;
use harness_core::prompt::{self, InstructionFile, PromptInput};
use harness_core::protocol::{
    Answer, JobDelivery, JobEnd, JobKind, Level, Mode, PermissionQuestion, SessionKind, ToolCall,
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
use crate::protocol::{CoreEvent, Ctl, Event, Op, Query};
mod catalogue;
mod control;
mod hooks;
mod jobs;
mod model;
mod registry;
mod shell;
mod tools;

use catalogue::{Catalogue, offering};
pub use catalogue::{FORGE, offered_tools, runtime_values};
use jobs::JobMsg;
use tools::replay_plan;

use crate::seams::{
    CallContext, Exit, JobSpawner, Meta, ModelLink, Process, Ran, RegisteredTool, SessionStore,
    ToolWorld,
};

/// Everything a session is made from (see [`crate::SessionBuilder`] for a builder).
#[derive(Clone)]
pub(crate) struct DriverSetup {
    /// The model link.
    pub(crate) model: Arc<dyn ModelLink>,
    /// The model's id as shown.
    pub(crate) model_name: String,
    /// The permission state.
    pub(crate) perms: SessionPermissions,
    /// The tools' world (shared with subagents).
    pub(crate) world: Arc<dyn ToolWorld>,
    /// Starts background commands.
    pub(crate) jobs: Arc<dyn JobSpawner>,
    /// The session's plan (shared with subagents).
    pub(crate) plan: Arc<Mutex<PlanState>>,
    /// The model servers' slots (shared with subagents and the process's other sessions).
    pub(crate) capacity: Arc<crate::capacity::CapacityGate>,
    /// The personality preset.
    pub(crate) personality: Option<String>,
    /// The session store.
    pub(crate) store: Arc<dyn SessionStore>,
    /// This session's metadata.
    pub(crate) meta: Meta,
    /// For a subagent: its agent's name (`explore`, `general`, or one the person defined).
    pub(crate) agent: Option<String>,
    /// The subagents the session may start beyond the built-in ones (shared with subagents).
    pub(crate) agents: Arc<crate::agents::Agents>,
    /// The product (`cli` for llembas, `llembas` for the server).
    pub(crate) project: Project,
    /// The session kind (`agent` or `chat`).
    pub(crate) kind: SessionKind,
    /// The product's version, for the prompt.
    pub(crate) product_version: String,
    /// The hooks the person configured (shared with subagents).
    pub(crate) hooks: Option<Arc<crate::hooks::Hooks>>,
}

/// One session, driven.
pub(crate) struct Driver {
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
    out: mpsc::UnboundedSender<Event>,
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
    /// The subagents the person defined.
    agents: Arc<crate::agents::Agents>,
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
    /// The session's hooks.
    hooks: Option<Arc<crate::hooks::Hooks>>,
    /// The `PreToolUse` verdicts of the step being decided.
    verdicts: crate::hooks::Verdicts,
    /// What `SessionStart` hooks added, to go with the next prompt.
    hook_context: Vec<String>,
    /// How often `Stop` hooks sent the model on since the person's last prompt.
    stop_continuations: u32,
    /// What a `Stop` hook sends the model on with, once the turn has ended.
    stop_next: Option<String>,
}

/// The built-in subagents (`prompts/agents/`).
pub const AGENTS: &[&str] = crate::agents::BUILT_IN;

impl Driver {
    /// A new driver; the front end keeps the other ends of `out` and `ops`.
    pub(crate) fn new(
        setup: DriverSetup,
        resume: Option<&[Entry]>,
        out: mpsc::UnboundedSender<Event>,
        ops: mpsc::UnboundedReceiver<Ctl>,
    ) -> Result<Driver> {
        let mut registered = setup.world.registered();
        // A subagent is given only the world's own tools its agent allows.
        registered.retain(|r| allowed(&setup.agents, setup.agent.as_deref(), &r.name, r.risk));
        let perms = setup.perms.clone().with_registered(
            registered
                .iter()
                .map(|r| (r.name.clone(), r.risk))
                .collect(),
        );
        let verdicts = crate::hooks::Verdicts::default();
        let session_setup = loop_setup(&setup, &registered, &perms, &verdicts)?;
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
        let instructions = setup.world.instructions();
        let values = prompt_values(&setup);
        let world = setup.world;
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
            agents: &setup.agents,
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
            agents: setup.agents,
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
            hooks: setup.hooks,
            verdicts,
            hook_context: Vec::new(),
            stop_continuations: 0,
            stop_next: None,
            shown: Arc::new(std::sync::Mutex::new(String::new())),
        };
        for event in lost {
            if let CoreEvent::JobEnded { job_id, .. } = &event {
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

    /// Queues a prompt to run as soon as the session is idle.
    pub(crate) fn queue_prompt(&mut self, text: String) {
        self.queue_prompt_with(text, Vec::new());
    }

    /// Queues a prompt with its images (`data:` or `https:` URLs), as [`Self::queue_prompt`].
    pub(crate) fn queue_prompt_with(&mut self, text: String, images: Vec<String>) {
        self.queued_prompts.push_back((text, images));
    }

    /// Starts the person's prompt, with the images that go with it where the model reads
    /// images (its metadata says so); otherwise they are left out and the person is told.
    async fn prompt(&mut self, text: String, images: Vec<String>) -> Result<()> {
        let Some(text) = self.prompt_hooks(text).await else {
            return Ok(());
        };
        if !images.is_empty() {
            match self.client.model().unread_images() {
                None => self.session.attach_images(images),
                Some(why) => self.notice(
                    Level::Warning,
                    format!(
                        "{why}: {} image{} left out",
                        images.len(),
                        if images.len() == 1 { "" } else { "s" }
                    ),
                ),
            }
        }
        self.feed(Input::Prompt { text }).await
    }

    /// The session's id.
    pub(crate) fn id(&self) -> &str {
        &self.meta.id
    }

    /// How the last turn ended.
    pub(crate) fn last_end(&self) -> Option<&TurnEnd> {
        self.last_end.as_ref()
    }

    /// The session's jobs as the loop keeps them, running or ended, in id order.
    pub(crate) fn jobs(&self) -> Vec<harness_loop::jobs::Job> {
        let mut v: Vec<_> = self.session.jobs().all().cloned().collect();
        v.sort_by_key(|j| j.id);
        v
    }

    fn emit(&self, event: CoreEvent) {
        let _ = self.out.send(Event::Core(event));
    }

    fn notice(&self, level: Level, text: impl Into<String>) {
        self.emit(CoreEvent::Notice {
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
    pub(crate) async fn run(&mut self, until_idle: bool) -> Result<()> {
        // A resumed session may have closed the turn a crash cut short.
        self.flush_log()?;
        self.session_start_hooks().await;
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
                    Some(Ctl::Op(Op::Message { text })) => self.feed(Input::Message { text }).await?,
                    Some(Ctl::Op(Op::Shell { command })) => self.shell(command).await?,
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

    async fn feed(&mut self, input: Input) -> Result<()> {
        let mut queue: VecDeque<Action> = self.session.handle(input)?.into();
        self.flush_log()?;
        while let Some(action) = queue.pop_front() {
            let next = match action {
                // A change is asked about with the diff it would make: approved seen, not blind.
                Action::Emit(CoreEvent::ToolCallAsked {
                    call_id,
                    mut question,
                }) => {
                    // A call whose facts its arguments do not say (a merge's head commit) is asked
                    // about with them, as the world will use them.
                    let pending = self.session.pending_call(&call_id).cloned();
                    if let Some(call) = pending
                        && let Some(subject) = self.world.subject(&call).await
                    {
                        question.subject = subject;
                    }
                    if question.change.is_none() {
                        question.change = self
                            .session
                            .pending_call(&call_id)
                            .and_then(|call| crate::preview::change(&*self.world, call));
                    }
                    self.emit(CoreEvent::ToolCallAsked { call_id, question });
                    None
                }
                // A turn that finished is put to the `Stop` hooks first: one that sends the model
                // on goes on as the same turn for the front end.
                Action::Emit(CoreEvent::TurnEnded {
                    reason: TurnEnd::Finished,
                }) => {
                    self.stop_next = self.stop_hooks().await;
                    if self.stop_next.is_none() {
                        self.emit(CoreEvent::TurnEnded {
                            reason: TurnEnd::Finished,
                        });
                    }
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
                    self.stop_next.take().map(|text| Input::Prompt { text })
                }
                Action::CallModel(request) => {
                    let input = self.step(request).await?;
                    self.pre_tool_hooks(&input).await;
                    Some(input)
                }
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
                    self.deliver_to_job(id, message, false);
                    None
                }
                Action::RestartJob { id, message } => {
                    self.deliver_to_job(id, message, true);
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

    /// The history the model sees now.
    pub(crate) fn history(&self) -> &[Message] {
        self.session.history()
    }

    /// The model's name.
    pub(crate) fn model_name(&self) -> &str {
        &self.model_name
    }
}

/// The loop's session for `setup`: its catalogue knows the world's registered tools and what
/// something here answers, its permissions are the session's.
fn loop_setup(
    setup: &DriverSetup,
    registered: &[RegisteredTool],
    perms: &SessionPermissions,
    verdicts: &crate::hooks::Verdicts,
) -> Result<SessionSetup> {
    let world = setup.world.clone();
    let agents = setup.agents.clone();
    let agent = setup.agent.clone();
    let own: Vec<(String, ToolTraits)> = registered
        .iter()
        .map(|r| {
            let traits = ToolTraits {
                risk: r.risk,
                exclusive: r.exclusive,
            };
            (r.name.clone(), traits)
        })
        .collect();
    Ok(SessionSetup {
        config: LoopConfig::embedded()?,
        project: setup.project,
        budget: None,
        id: setup.meta.id.clone(),
        catalog: Box::new(move |name: &str| {
            let traits = own.iter().find(|(n, _)| n == name).map(|(_, t)| *t);
            let traits = traits.or_else(|| {
                let answered = harness_loop::session::LOOP_ANSWERS.contains(&name)
                    || registry::answers(name)
                    || world.runs(name);
                answered.then(|| Spec::embedded().traits(name)).flatten()
            });
            // A call of a tool the agent was not given is a call of an unknown tool.
            traits.filter(|t| allowed(&agents, agent.as_deref(), name, t.risk))
        }),
        permissions: Box::new(crate::hooks::Gated {
            inner: crate::perm::Checked {
                perms: perms.clone(),
                world: setup.world.clone(),
            },
            verdicts: verdicts.clone(),
        }),
        subagent: setup.agent.is_some(),
        hygiene: true,
    })
}

/// Whether the session of subagent `agent` (`None`: the main agent) may be given tool `name`
/// of risk `risk`: the read-only helper only reads, and a defined agent's `tools` list narrows
/// what it is given, never widens it.
fn allowed(
    agents: &crate::agents::Agents,
    agent: Option<&str>,
    name: &str,
    risk: harness_spec::Risk,
) -> bool {
    match agent {
        None => true,
        Some(prompt::READ_ONLY_AGENT) => risk == harness_spec::Risk::Read,
        Some(a) => agents.get(a).is_none_or(|d| d.allows(name)),
    }
}

/// The prompt's run-time values: the world's, and what the system text needs that a world may
/// leave out.
fn prompt_values(setup: &DriverSetup) -> BTreeMap<String, String> {
    let world = &setup.world;
    let mut values = world.values();
    values.entry("cwd".into()).or_insert_with(|| world.place());
    // A world that says no platform or shell (a chat's) has none to say: the bullets
    // disappear (`spec/prompts/index.json`).
    for name in ["platform", "shell", "git_status"] {
        values.entry(name.into()).or_default();
    }
    values.insert("product_version".into(), setup.product_version.clone());
    values.insert(
        "date".into(),
        crate::time::format_time(crate::time::now())[..10].to_owned(),
    );
    values.insert("model".into(), setup.model_name.clone());
    values
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
