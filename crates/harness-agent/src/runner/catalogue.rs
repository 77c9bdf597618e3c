//! The tool catalogue: what the spec offers the session (its project, kind, mode, agent and
//! what the front end holds), kept to the tools something answers, as the model is sent them,
//! and the system text made of it.

use super::*;

/// The run-time value a world sets to `true` when its view holds a repository mounted from a
/// forge (the requirement `forge` holds: `commit`, `branch`, `pr`, `merge`, `tag`, `release`).
pub const FORGE: &str = "forge";

/// What decides a session's catalogue besides the spec.
pub(super) struct Catalogue<'a> {
    pub(super) project: Project,
    pub(super) kind: SessionKind,
    pub(super) mode: Mode,
    pub(super) agent: Option<&'a str>,
    pub(super) asks: bool,
    pub(super) display: bool,
    pub(super) searches: bool,
    pub(super) world: &'a dyn ToolWorld,
    /// The subagents the person defined (listed by `task`; a defined agent's own tools).
    pub(super) agents: &'a crate::agents::Agents,
    /// The session's run-time values (the facts of the worlds tools serve).
    pub(super) values: &'a BTreeMap<String, String>,
    /// The deferred tools the model has loaded.
    pub(super) loaded: &'a std::collections::BTreeSet<String>,
}

/// The session's spec tools: what the spec offers this project, kind, mode and requirements,
/// of those the tools that something here answers (the loop, the runtime, the world). The
/// world's registered tools come beside them.
pub(super) fn offering(c: &Catalogue<'_>) -> Result<Offering<'static>> {
    let spec = Spec::embedded();
    let mut cx = OfferContext::new(c.project, c.kind, c.mode);
    cx.holds.display = c.display;
    cx.holds.forge = c.values.get(FORGE).is_some_and(|v| v == "true");
    cx.values = runtime_values();
    cx.subagent = c.agent.is_some();
    cx.read_only = c.agent == Some("explore");
    cx.facts = harness_core::offer::Facts::from_values(c.values);
    cx.loaded = c.loaded.clone();
    let mut o = Offering::new(spec, cx)?;
    o.retain(|t| {
        let name = t.name.as_str();
        let answered = harness_loop::session::LOOP_ANSWERS.contains(&name)
            || super::registry::answers(name)
            || c.world.runs(name);
        answered
            && !(c.agent.is_some() && name == "task")
            && (c.asks || name != "question")
            && (c.searches || name != "session_search")
            && super::allowed(c.agents, c.agent, name, t.tool.risk)
    })?;
    // The world's deferred tools (an MCP server's) go behind the same loader.
    let deferred = c
        .world
        .registered()
        .into_iter()
        .filter(|r| r.deferred && super::allowed(c.agents, c.agent, &r.name, r.risk));
    o.defer_outside(deferred.map(|r| (r.name.clone(), r.summary())).collect())?;
    // `task` lists the agents the person defined after the built-in ones.
    for t in o.tools.iter_mut().chain(o.deferred.iter_mut()) {
        if t.name == "task" {
            t.description = crate::agents::task_description(&t.description, c.project, c.agents);
        }
    }
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
        agents: &Default::default(),
        values: &values,
        loaded: &Default::default(),
    })?;
    Ok(specs_of(&o, &world.registered()))
}

/// The specs of an offering's tools and a world's registered ones, in that order.
pub(super) fn specs_of(offering: &Offering<'_>, registered: &[RegisteredTool]) -> Vec<ToolSpec> {
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

/// The facts of the runtime that fill tool descriptions (`{{memory_limit}}`: the memory
/// limits), worked out once for the process; every session, the server's `python` tool and the
/// CLI's `spec tool` take them from here.
pub fn runtime_values() -> BTreeMap<String, String> {
    static VALUES: std::sync::OnceLock<BTreeMap<String, String>> = std::sync::OnceLock::new();
    VALUES
        .get_or_init(|| {
            use harness_fs::memory::{DEFAULT_LIMIT, Target, USER_LIMIT, limit_words};
            let limit = limit_words(&[(Target::Memory, DEFAULT_LIMIT), (Target::User, USER_LIMIT)]);
            BTreeMap::from([("memory_limit".to_owned(), limit)])
        })
        .clone()
}

impl Driver {
    /// Makes what each request sends of the offering (the tools, the system text) before the
    /// first request, when the offering was made: a session's first request then only shapes
    /// its messages (200 messages sent at once to new chats spent a quarter of the server's
    /// time making both).
    pub(super) fn prepare(&self) {
        let _ = self.specs_and_size();
        // An error here is said by the request that needs the text.
        let _ = self.system_text();
    }

    /// The catalogue's offering for the session as it is now.
    pub(super) fn offer_again(&mut self) {
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
            agents: &self.agents,
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
    pub(crate) fn set_client_context(&mut self, text: &str) {
        self.values.insert("client_context".into(), text.to_owned());
    }

    /// The library line a client handed over (`_meta.lembas.library.summary`, capability
    /// `library`): the prompt's `{{library_summary}}`.
    pub(crate) fn set_library_summary(&mut self, text: &str) {
        self.values
            .insert("library_summary".into(), text.to_owned());
        // An empty library's tools are not offered (`serves: library`).
        self.offer_again();
    }

    /// The chat's prototypes a client handed over (capability `prototypes`); the prompt shows
    /// them only as harness-core's `prompt::prototype_lines` decides (an instance older than
    /// 3.0.0, `show` offered).
    pub(crate) fn set_prototypes(&mut self, handoff: prompt::PrototypeHandoff) {
        self.prototypes = Some(handoff);
    }

    /// The prompt's memory entries as the client instance holds them (capability `memory`).
    pub(crate) fn set_memory_entries(&mut self, text: String) {
        self.values.insert("memory_entries".into(), text);
    }

    /// Says that the front end answers [`Event::Question`]s: the `question` tool is offered.
    pub(crate) fn answers_questions(&mut self) {
        self.asks = true;
        self.offer_again();
    }

    /// Says that the front end has a viewer (`display` holds, as over ACP with capability
    /// `show`): the `show` tool is offered and its calls come as [`Event::Show`].
    pub(crate) fn holds_display(&mut self) {
        self.display = true;
        self.offer_again();
    }

    pub(super) fn system_text(&self) -> Result<String> {
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
                agent_text: self
                    .agent
                    .as_deref()
                    .filter(|a| !AGENTS.contains(a))
                    .and_then(|a| self.agents.get(a))
                    .map(|d| d.text.as_str()),
                personality: self.personality.as_deref(),
                offered: &names,
                instructions: &self.instructions,
                plan: plan.as_ref(),
                prototypes: self.prototypes.as_ref(),
                values: &self.values,
            })?;
        Ok(text)
    }

    /// The offered tools as the model link sends them (harness-model leaves them out for a
    /// model whose metadata says it calls no tools).
    pub(super) fn tool_specs(&self) -> Arc<[ToolSpec]> {
        self.specs_and_size().0.clone()
    }

    pub(super) fn specs_and_size(&self) -> &(Arc<[ToolSpec]>, usize) {
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

    /// Whether the runtime answers `name` itself (with the front end, the store or the plan)
    /// rather than the world.
    pub(super) fn answers(&self, name: &str) -> bool {
        super::registry::answers(name)
    }
}
