//! Putting a session together from the settings: the model link (asking the server which model
//! it serves when none is named), the permission state, the working directory's file system and
//! the session's place in the store.

#![allow(
    clippy::print_stderr,
    reason = "what putting the session together says to the person (MCP, the sandbox)"
)]

use anyhow::{Context as _, Result, anyhow};
use harness_agent::library::{DirLibrary, Library};
use harness_loop::transcript::Entry;
use harness_model::{CancellationToken, ModelClient};

use std::sync::Arc;

use harness_agent::perm::engine;
use harness_agent::{Meta, SessionBuilder, SessionPermissions};
use harness_core::protocol::SessionKind;
use harness_spec::Project;

use crate::exec::Exec;
use crate::settings::Settings;
pub use crate::settings::home_dir;
use crate::store::{Store, read_transcript};
use crate::world::{HostJobs, HostWorld};

/// A session ready to drive, and the saved events to continue from.
pub struct SessionParts {
    /// The model link.
    pub client: ModelClient,
    /// The model's id as shown.
    pub model_name: String,
    /// The permission state.
    pub perms: SessionPermissions,
    /// The working directory's file system (a front end may still set its parts).
    pub exec: Exec,
    /// The personality preset.
    pub personality: Option<String>,
    /// The session store.
    pub store: Store,
    /// This session's metadata.
    pub meta: Meta,
    /// A resumed session's events.
    pub resume: Option<Vec<Entry>>,
    /// The model servers' slots (shared by the sessions of this process).
    pub capacity: Arc<harness_agent::CapacityGate>,
    /// The MCP servers started for it (ended with it).
    pub mcp: Option<Arc<harness_mcp::Mcp>>,
    /// What starting them said (servers that did not start, tools dropped); said on stderr by
    /// [`SessionParts::into_setup`] unless a front end took them to say otherwise.
    pub mcp_notices: Vec<String>,
    /// The subagents the person defined for this directory; what reading them said is said on
    /// stderr by [`SessionParts::into_builder`].
    pub agents: harness_agent::agents::Agents,
    /// The hooks it runs (the person's, and the project's where trusted; what reading them
    /// said is among the MCP notices).
    pub hooks: Option<Arc<harness_agent::hooks::Hooks>>,
}

impl SessionParts {
    /// The session on this machine's world, processes and store, ready for what the front end
    /// holds (questions, a one-shot run) and to spawn.
    pub fn into_builder(self) -> SessionBuilder {
        for n in &self.mcp_notices {
            eprintln!("llembas: {n}");
        }
        let mut agents = self.agents;
        for n in agents.take_notices() {
            eprintln!("llembas: {n}");
        }
        let exec = Arc::new(self.exec);
        let jobs = Arc::new(HostJobs::new(exec.root(), exec.spill.clone()));
        let mut world: Arc<dyn harness_agent::ToolWorld> = Arc::new(HostWorld::new(exec));
        if let Some(mcp) = self.mcp {
            world = Arc::new(harness_mcp::WithMcp::new(world, mcp));
        }
        let mut builder = SessionBuilder::new(Arc::new(self.client), world)
            .model_name(&self.model_name)
            .permissions(self.perms)
            .jobs(jobs)
            .capacity(self.capacity)
            .personality(self.personality)
            .store(Arc::new(self.store))
            .project(Project::Cli)
            .kind(SessionKind::Agent)
            .product_version(env!("CARGO_PKG_VERSION"))
            .agents(agents);
        if let Some(hooks) = self.hooks {
            builder = builder.hooks(hooks);
        }
        match self.resume {
            Some(entries) => builder.resume(self.meta, entries),
            None => builder.meta(self.meta),
        }
    }
}

/// Where the search embedder's files are, for `knowledge_search` and `notes_search` to rank by
/// meaning: `LLEMBAS_EMBEDDER_DIR`, else where pip installed them under the user's cache.
fn embedder_dir() -> Option<std::path::PathBuf> {
    if let Some(d) = std::env::var_os("LLEMBAS_EMBEDDER_DIR") {
        return Some(d.into());
    }
    harness_agent::library::installed_embedder(&dirs::cache_dir()?)
}

/// Builds a session (new, or resumed with `resume`: empty for the newest here, else an id).
pub async fn build(settings: &Settings, resume: Option<&str>) -> Result<SessionParts> {
    let m = settings.model.as_ref().map_err(|line| anyhow!("{line}"))?;
    let (client, name) = m.connect(&CancellationToken::new()).await?;
    let root = std::fs::canonicalize(&settings.cwd)
        .with_context(|| format!("cannot resolve {}", settings.cwd.display()))?;
    let mut exec = Exec::open(&root)?;
    let project = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    exec.personal = harness_agent::personal::PersonalTools {
        library: Some(
            Library::new(
                Arc::new(DirLibrary::new(&settings.dirs.data.join("library"))),
                &project,
            )
            .with_search(
                Some(settings.dirs.data.join("search/library.json")),
                embedder_dir(),
            ),
        ),
        scope: None,
        memory: Some(settings.dirs.data.join("memory.json")),
        user_skills: Some(settings.dirs.data.join("skills")),
    };
    let perms = SessionPermissions::new(
        engine()?,
        settings.mode,
        &root.display().to_string(),
        &home_dir(),
        settings.rules.clone(),
    );
    let mut store = Store::new(settings.dirs.sessions());
    let (meta, resume) = match resume {
        None => {
            let meta = store.create(&root, &name)?;
            store.hold(&meta.id)?;
            (meta, None)
        }
        Some(id) => {
            let meta = store.find(id, &root)?;
            // Held before anything of it is read or ended: another process may be running it.
            store.hold(&meta.id)?;
            let entries = read_transcript(&store.transcript(&meta.id))?;
            (meta, Some(entries))
        }
    };
    exec.spill = Arc::new(
        crate::process::SpillDir::for_session(
            store.dir(&meta.id).join("output"),
            &meta.id,
            sandbox(settings, &root)?,
        )
        .hiding(settings.key_variables.clone()),
    );
    if resume.is_some() {
        let ended = crate::process::end_left_by(&meta.id);
        if ended > 0 {
            eprintln!(
                "llembas: ended {ended} process{} an earlier run of this session left running",
                if ended == 1 { "" } else { "es" }
            );
        }
    }
    let (mcp, mut mcp_notices) = start_mcp(&crate::mcp::enabled(settings.mcp.clone())).await;
    let (hooks, notices) = crate::hooks::for_session(
        &settings.hooks,
        &settings.dirs.data,
        &root,
        settings.trust_project_hooks,
    )?;
    mcp_notices.extend(notices);
    // A matcher that is not a regular expression is an error before anything runs.
    let hooks = if hooks.is_empty() {
        None
    } else {
        let runner = crate::hooks::HostHooks::new(&root, settings.key_variables.clone());
        Some(Arc::new(harness_agent::hooks::Hooks::new(hooks, runner)?))
    };
    Ok(SessionParts {
        hooks,
        mcp,
        mcp_notices,
        agents: crate::agents::load(&root, &settings.dirs.config_file),
        client,
        model_name: name,
        perms,
        exec,
        personality: settings.personality.clone(),
        store,
        meta,
        resume,
        capacity: harness_agent::CapacityGate::process()?,
    })
}

/// Starts the session's MCP servers: them (`None` when none is configured), and what starting
/// them said (which did not start, which tools were dropped).
pub async fn start_mcp(
    servers: &[harness_mcp::ServerConfig],
) -> (Option<Arc<harness_mcp::Mcp>>, Vec<String>) {
    if servers.is_empty() {
        return (None, Vec::new());
    }
    let (mcp, notices) = harness_mcp::Mcp::start(servers, harness_mcp::Limits::default()).await;
    (Some(Arc::new(mcp)), notices)
}

/// The OS sandbox of the session's commands, as the spec and the settings say; `None` (said in
/// one line) when it is off or the kernel cannot enforce it.
fn sandbox(settings: &Settings, root: &std::path::Path) -> Result<Option<crate::process::Sandbox>> {
    let spec = harness_permission::sandbox::Sandbox::from_spec(harness_spec::Spec::embedded())?;
    if !settings.sandbox.unwrap_or(spec.enabled) {
        eprintln!("llembas: {}", spec.texts.off);
        return Ok(None);
    }
    if !crate::process::landlock_works() {
        eprintln!("llembas: {}", spec.texts.unavailable);
        return Ok(None);
    }
    let tmp = std::env::temp_dir();
    let confinement = spec.confinement(
        harness_permission::sandbox::Places {
            workspace: &root.display().to_string(),
            home: &home_dir(),
            tmp: &tmp.display().to_string(),
        },
        settings.sandbox_network,
    );
    let sandbox = crate::process::Sandbox::new(&confinement, root, &spec.texts.refused_note)?;
    if !sandbox.guards_git() && root.join(".git").is_dir() {
        eprintln!("llembas: {}", spec.texts.git_unguarded);
    }
    Ok(Some(sandbox))
}
