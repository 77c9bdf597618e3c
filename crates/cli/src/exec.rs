//! Running tool calls on this machine: the file tools through `harness-fs`'s host backend
//! rooted at the working directory, `bash` as a real process, and the plan tools on the
//! session's plan. The texts a model reads come from the core crates; this module moves bytes.
//!
//! The host backend shows the working directory as `/`. The model is told the real directory
//! (its shell runs there), so paths are mapped both ways: an absolute path inside the working
//! directory, a relative path, or a path of the view go in; the paths of answers come back as
//! real absolute paths.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result};
use harness_agent::{FileTools, PathMap};
use harness_core::protocol::ToolCall;
use harness_fs::{HostBackend, HostOptions, Level, MemoryBackend, VPath, View};

use harness_loop::session::ToolOutcome;
use serde_json::Value;
use tokio::sync::mpsc;

use harness_agent::{Exit, Ran};

use crate::process;

/// The spec tools this machine's world runs besides harness-agent's file tools (the runtime
/// answers the plan tools, `task`, `question`, `show` and `session_search`; the loop `recall`,
/// `report` and the job tools).
pub const RUNS: &[&str] = &[
    "bash",
    "notes_search",
    "note_view",
    "note_manage",
    "knowledge_search",
    "knowledge_get",
    "memory",
    "skills_list",
    "skill_view",
    "skill_manage",
    "web_fetch",
];

/// Seconds a command runs in the foreground by default and at most: bash's `variables` as the
/// spec fills them for the CLI (the numbers live only there).
fn bash_timeouts() -> std::result::Result<(u64, u64), String> {
    let var = |name: &str| {
        harness_spec::Spec::embedded()
            .tool("bash")
            .and_then(|t| t.variables.get(name))
            .and_then(|v| v.value_for(harness_spec::Project::Cli))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("the spec gives bash no whole number of seconds for {name}"))
    };
    Ok((var("timeout_default")?, var("timeout_max")?))
}

/// The file system of one session.
pub struct Exec {
    root: PathBuf,
    /// The view while some call uses it: the host backend (and its lock on the directory) is
    /// held only while calls run, so other sessions in the same directory can work too.
    open: Mutex<std::sync::Weak<View>>,
    files: FileTools,
    /// The person's library.
    pub library: Option<crate::library::Library>,
    /// The part of the library a client scoped this session to (`_meta.lembas.scope`).
    pub scope: Option<Value>,
    /// The memory file.
    pub memory: Option<PathBuf>,
    /// The client instance's HTTP API the `memory` tool works on instead of the file
    /// (capability `memory`; the driver runs those calls).
    pub memory_api: Option<crate::memory_api::Api>,
    /// The person's own skills (a directory; a project keeps its own in `.llembas/skills`).
    pub user_skills: Option<PathBuf>,
}

fn arg_str<'a>(a: &'a Value, key: &str) -> Option<&'a str> {
    a.get(key).and_then(Value::as_str)
}

impl Exec {
    /// Opens the working directory `root` (canonical) as the session's file system.
    pub fn open(root: &Path) -> Result<Exec> {
        let exec = Exec {
            root: root.to_path_buf(),
            open: Mutex::new(std::sync::Weak::new()),
            files: FileTools::new(),
            library: None,
            scope: None,
            memory: None,
            memory_api: None,
            user_skills: None,
        };
        // Check now that the directory can be opened at all (a clear error at start).
        exec.view()
            .with_context(|| format!("cannot open {} as the working directory", root.display()))?;
        Ok(exec)
    }

    /// The view of the working directory, opened for as long as the returned handle lives
    /// (shared by the calls that run at once). Another process holding the directory is waited
    /// for, up to a few seconds.
    fn view(&self) -> std::result::Result<Arc<View>, harness_fs::Error> {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(v) = open.upgrade() {
            return Ok(v);
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let backend = loop {
            match HostBackend::open(&self.root, HostOptions::default()) {
                Ok(b) => break b,
                Err(harness_fs::Error::RootInUse(_)) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(e),
            }
        };
        let v = Arc::new(View::new(
            Arc::new(backend),
            harness_fs::Access::new().grant("/", Level::Commit),
        ));
        *open = Arc::downgrade(&v);
        Ok(v)
    }

    /// The instruction files that apply (`AGENTS.md`, else `CLAUDE.md`), outermost first: from
    /// the repository's top (the nearest directory above holding `.git`; the working directory
    /// when there is none) down to the working directory. The files above the working directory
    /// are outside the session's view, so they are put in a tree of their own (by their real
    /// paths) and stacked there by `harness-fs`'s rules.
    pub fn instructions(&self) -> Vec<harness_core::prompt::InstructionFile> {
        use harness_fs::instructions::{DEFAULT_BUDGET, NAMES, stack};
        let top = self
            .root
            .ancestors()
            .find(|d| d.join(".git").exists())
            .unwrap_or(&self.root)
            .to_path_buf();
        let tree = MemoryBackend::new();
        for dir in self.root.ancestors() {
            let vdir = VPath::parse(&dir.display().to_string());
            let _ = tree.add_dir(&vdir);
            for name in NAMES {
                let file = dir.join(name);
                // Only regular files, never through a link.
                let regular = std::fs::symlink_metadata(&file).is_ok_and(|m| m.is_file());
                if regular && let Ok(text) = std::fs::read(&file) {
                    let _ = tree.add_file(&vdir.join(name), text);
                }
            }
            if dir == top {
                break;
            }
        }
        let view = View::new(
            Arc::new(tree),
            harness_fs::Access::new().grant(&top.display().to_string(), Level::Ro),
        );
        let Ok(stacked) = stack(&view, &self.root.display().to_string(), DEFAULT_BUDGET) else {
            return Vec::new();
        };
        stacked
            .files
            .iter()
            .map(|f| harness_core::prompt::InstructionFile {
                path: f.path.to_string(),
                text: f.text.clone(),
            })
            .collect()
    }

    /// A file for `show`, read through the view as `read` reads it.
    pub fn read_for_show(
        &self,
        path: &str,
    ) -> std::result::Result<harness_agent::ShownFile, String> {
        let view = self.view().map_err(|e| e.to_string())?;
        self.files.read_for_show(&view, self, path)
    }

    /// The working directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A path as the model gave it, as a path of the view.
    pub fn to_view(&self, input: &str) -> String {
        let p = Path::new(input);
        if p.is_absolute()
            && let Ok(rel) = p.strip_prefix(&self.root)
        {
            return format!("/{}", rel.display());
        }
        input.to_owned()
    }

    /// A path of the view as the real path.
    pub fn to_host(&self, p: &VPath) -> String {
        let rel = p.as_str().trim_start_matches('/');
        if rel.is_empty() {
            self.root.display().to_string()
        } else {
            self.root.join(rel).display().to_string()
        }
    }

    fn error(&self, call: &ToolCall, e: harness_fs::Error) -> ToolOutcome {
        ToolOutcome::error(&call.id, e.to_string())
    }

    /// Runs a call that is not bash (bash needs the runtime: [`Exec::bash`]).
    pub fn run_sync(&self, call: &ToolCall) -> ToolOutcome {
        let a = &call.arguments;
        let view = match self.view() {
            Ok(v) => v,
            Err(e) => return self.error(call, e),
        };
        let view = &*view;
        if let Some(out) = self.files.run(view, self, call) {
            return out;
        }
        let mut out = match call.name.as_str() {
            "skills_list" | "skill_view" | "skill_manage" => {
                let (output, is_error) = match self.skills(view, &call.name, a) {
                    Ok(t) => (t, false),
                    Err(e) => (e, true),
                };
                ToolOutcome::answer(&call.id, output, is_error)
            }
            "memory" if self.memory.is_some() => {
                let (output, is_error) = match &self.memory {
                    Some(p) => crate::tools::memory(p, a),
                    None => (String::new(), true),
                };
                ToolOutcome::answer(&call.id, output, is_error)
            }
            name if crate::library::TOOLS.contains(&name) && self.library.is_some() => {
                let scoped = harness_core::library::scope_call(name, a, self.scope.as_ref());
                let (output, is_error) = match &self.library {
                    Some(lib) => lib.run(name, &scoped.arguments, scoped.scope.as_ref()),
                    None => (String::new(), true),
                };
                ToolOutcome::answer(&call.id, output, is_error)
            }
            other => ToolOutcome::error(&call.id, format!("{other} cannot run in llembas")),
        };
        out.call_id = call.id.clone();
        out
    }

    /// The skill tools over the project's `.llembas/skills` (first) and the person's own.
    fn skills(&self, project: &View, tool: &str, a: &Value) -> std::result::Result<String, String> {
        use harness_fs::skills;
        const PROJECT: &str = "/.llembas/skills";
        let user = match &self.user_skills {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
                // Opened for this call only: other sessions share the directory.
                let backend =
                    HostBackend::open(dir, HostOptions::default()).map_err(|e| e.to_string())?;
                Some(View::new(
                    Arc::new(backend),
                    harness_fs::Access::new().grant("/", Level::Commit),
                ))
            }
            None => None,
        };
        let places: Vec<(&str, &View, &str)> = std::iter::once(("project", project, PROJECT))
            .chain(user.as_ref().map(|v| ("user", v, "/")))
            .collect();
        let s = |k: &str| a.get(k).and_then(Value::as_str);
        match tool {
            "skills_list" => {
                let mut lines = Vec::new();
                for (label, view, root) in &places {
                    for sk in skills::list(view, root).map_err(|e| e.to_string())? {
                        lines.push(format!("{} — {} ({label})", sk.name, sk.description));
                    }
                }
                Ok(if lines.is_empty() {
                    "No skills yet.".to_owned()
                } else {
                    lines.join("\n")
                })
            }
            "skill_view" => {
                let name = s("name").ok_or("skill_view: `name` is missing")?;
                let mut last = String::new();
                for (_, view, root) in &places {
                    match skills::view_skill(view, root, name, s("file")) {
                        Ok(t) => return Ok(t),
                        Err(e) => last = e.to_string(),
                    }
                }
                Err(last)
            }
            _ => {
                let action: skills::SkillAction =
                    serde_json::from_value(a.clone()).map_err(|e| format!("skill_manage: {e}"))?;
                let name = s("name").unwrap_or_default();
                // A new skill goes where `scope` says; a change goes where the skill is.
                let exists_in_project = skills::view_skill(project, PROJECT, name, None).is_ok();
                let (view, root) = if s("action") == Some("create") {
                    if s("scope") == Some("project") {
                        (project, PROJECT)
                    } else {
                        match &user {
                            Some(v) => (v, "/"),
                            None => (project, PROJECT),
                        }
                    }
                } else if exists_in_project || user.is_none() {
                    (project, PROJECT)
                } else {
                    match &user {
                        Some(v) => (v, "/"),
                        None => (project, PROJECT),
                    }
                };
                skills::manage(view, root, &action).map_err(|e| e.to_string())
            }
        }
    }

    /// Runs a bash call in the foreground, streaming its output to `chunks`; a command still
    /// running at its timeout is handed back as [`Ran::Overran`].
    pub async fn bash(
        &self,
        call: &ToolCall,
        chunks: Option<mpsc::UnboundedSender<String>>,
        cancel: &harness_model::CancellationToken,
    ) -> Ran {
        let a = &call.arguments;
        let Some(command) = arg_str(a, "command") else {
            return Ran::Done(harness_agent::files::missing(call, "command"));
        };
        let (default, max) = match bash_timeouts() {
            Ok(t) => t,
            Err(e) => {
                return Ran::Done(ToolOutcome::error(&call.id, e));
            }
        };
        let seconds = a
            .get("timeout")
            .and_then(Value::as_u64)
            .unwrap_or(default)
            .clamp(1, max);
        let running = match process::spawn(command, &self.root, chunks) {
            Ok(r) => r,
            Err(e) => {
                return Ran::Done(ToolOutcome::error(&call.id, format!("{e:#}")));
            }
        };
        tokio::select! {
            exit = running.wait_for(Duration::from_secs(seconds)) => match exit {
                Some(exit) => Ran::Done(bash_outcome(&call.id, &running.output(), exit)),
                None => Ran::Overran {
                    call_id: call.id.clone(),
                    title: command.lines().next().unwrap_or_default().to_owned(),
                    seconds,
                    running: std::sync::Arc::new(running),
                },
            },
            () = cancel.cancelled() => {
                let exit = running.stop().await;
                Ran::Done(bash_outcome(&call.id, &running.output(), exit))
            }
        }
    }
}

/// The host backend shows the working directory as `/`; the model and the person know real
/// paths.
impl PathMap for Exec {
    fn to_view(&self, input: &str) -> String {
        Exec::to_view(self, input)
    }

    fn shown(&self, p: &VPath) -> String {
        self.to_host(p)
    }
}

/// A finished command's result: its output, then its exit status.
pub fn bash_outcome(call_id: &str, output: &str, exit: Exit) -> ToolOutcome {
    let status = match exit {
        Exit::Code(c) => format!("exit code {c}"),
        Exit::Signal(s) => format!("killed by signal {s}"),
    };
    let body = output.trim_end_matches('\n');
    let text = if body.is_empty() {
        format!("(no output)\n{status}")
    } else {
        format!("{body}\n{status}")
    };
    ToolOutcome::answer(call_id, text, exit != Exit::Code(0))
}

#[cfg(test)]
mod tests {
    #[test]
    fn bash_timeouts_come_from_the_spec() {
        assert_eq!(super::bash_timeouts(), Ok((120, 600)));
    }
}
