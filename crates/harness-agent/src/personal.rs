//! The tools over a person's own things: their [`Library`], their memory file, and skills (a
//! project's `.llembas/skills` first, then the person's own directory). A world that has any of
//! them answers their calls through [`PersonalTools::run`]; the texts a model reads are the
//! spec's and `harness-fs`'s.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use harness_core::protocol::ToolCall;
use harness_fs::{HostBackend, HostOptions, Level, View};
use harness_loop::session::ToolOutcome;
use serde_json::Value;

use crate::library::{self, Library};
use crate::registry::ToolRegistry;

/// Where the skill tools look in a project's tree.
const PROJECT_SKILLS: &str = "/.llembas/skills";

/// The skill tools.
pub const SKILL_TOOLS: &[&str] = &["skills_list", "skill_view", "skill_manage"];

/// A session's personal tools; each is answered only when its part is set.
#[derive(Debug, Clone, Default)]
pub struct PersonalTools {
    /// The person's library.
    pub library: Option<Library>,
    /// The part of the library a client scoped this session to (`_meta.lembas.scope`).
    pub scope: Option<Value>,
    /// The memory file.
    pub memory: Option<PathBuf>,
    /// The person's own skills (a directory; a project keeps its own in `.llembas/skills`).
    pub user_skills: Option<PathBuf>,
}

impl PersonalTools {
    /// Whether a call of `name` is answered here.
    pub fn runs(&self, name: &str) -> bool {
        SKILL_TOOLS.contains(&name)
            || (name == "memory" && self.memory.is_some())
            || (library::TOOLS.contains(&name) && self.library.is_some())
    }

    /// Answers `call` by its tool's handler, with `project` the session's tree; `None` when it
    /// is not one of these tools (or its part is not set).
    pub fn run(&self, project: &View, call: &ToolCall) -> Option<ToolOutcome> {
        let handler = PERSONAL_TOOLS.get(call.name.as_str())?;
        let (text, is_error) = handler(self, project, call)?;
        Some(ToolOutcome::answer(&call.id, text, is_error))
    }

    /// How many skills there are, the project's and the person's (the offering's
    /// `skill_count`: with none, the tools that only read skills are not sent).
    pub fn skill_count(&self, project: &View) -> usize {
        let mut n = harness_fs::skills::list(project, PROJECT_SKILLS).map_or(0, |l| l.len());
        if let Some(dir) = self.user_skills.as_deref().filter(|d| d.is_dir())
            && let Ok(backend) = HostBackend::open(dir, HostOptions::default())
        {
            let user = View::new(
                Arc::new(backend),
                harness_fs::Access::new().grant("/", Level::Ro),
            );
            n += harness_fs::skills::list(&user, "/").map_or(0, |l| l.len());
        }
        n
    }

    /// The values these parts give the prompt and the offering: `library_summary` and
    /// `memory_entries` where the library and the memory file are set, `skill_count` over
    /// `project` (0 without one).
    pub fn values(&self, project: Option<&View>) -> std::collections::BTreeMap<String, String> {
        let mut values = std::collections::BTreeMap::new();
        if let Some(lib) = &self.library {
            values.insert("library_summary".into(), lib.summary());
        }
        let skills = project.map_or(0, |p| self.skill_count(p));
        values.insert("skill_count".into(), skills.to_string());
        if let Some(m) = &self.memory {
            values.insert("memory_entries".into(), memory_entries(m));
        }
        values
    }

    /// The person's own skills directory as a view (made when missing), opened for one call
    /// only: other sessions share the directory.
    fn user_skills(&self) -> Result<Option<View>, String> {
        let Some(dir) = &self.user_skills else {
            return Ok(None);
        };
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let backend = HostBackend::open(dir, HostOptions::default()).map_err(|e| e.to_string())?;
        Ok(Some(View::new(
            Arc::new(backend),
            harness_fs::Access::new().grant("/", Level::Commit),
        )))
    }

    /// `skills_list`: the project's skills, then the person's.
    fn skills_list(&self, project: &View, _: &Value) -> Result<String, String> {
        let user = self.user_skills()?;
        let mut lines = Vec::new();
        for (label, view, root) in places(project, user.as_ref()) {
            for sk in harness_fs::skills::list(view, root).map_err(|e| e.to_string())? {
                lines.push(format!("{} — {} ({label})", sk.name, sk.description));
            }
        }
        Ok(if lines.is_empty() {
            "No skills yet.".to_owned()
        } else {
            lines.join("\n")
        })
    }

    /// `skill_view`: a skill's text (or one of its files), the project's first.
    fn skill_view(&self, project: &View, a: &Value) -> Result<String, String> {
        let user = self.user_skills()?;
        let s = |k: &str| a.get(k).and_then(Value::as_str);
        let name = s("name").ok_or("skill_view: `name` is missing")?;
        let mut last = String::new();
        for (_, view, root) in places(project, user.as_ref()) {
            match harness_fs::skills::view_skill(view, root, name, s("file")) {
                Ok(t) => return Ok(t),
                Err(e) => last = e.to_string(),
            }
        }
        Err(last)
    }

    /// `skill_manage`: a new skill goes where `scope` says (the person's own by default); a
    /// change goes where the skill is.
    fn skill_manage(&self, project: &View, a: &Value) -> Result<String, String> {
        use harness_fs::skills;
        let user = self.user_skills()?;
        let s = |k: &str| a.get(k).and_then(Value::as_str);
        let action: skills::SkillAction =
            serde_json::from_value(a.clone()).map_err(|e| format!("skill_manage: {e}"))?;
        let name = s("name").unwrap_or_default();
        let in_project = skills::view_skill(project, PROJECT_SKILLS, name, None).is_ok();
        let to_project = if s("action") == Some("create") {
            s("scope") == Some("project")
        } else {
            in_project
        };
        let (view, root) = match &user {
            Some(v) if !to_project => (v, "/"),
            _ => (project, PROJECT_SKILLS),
        };
        skills::manage(view, root, &action).map_err(|e| e.to_string())
    }

    /// A library tool's call, scoped as the session is.
    fn library_call(&self, call: &ToolCall) -> Option<(String, bool)> {
        let lib = self.library.as_ref()?;
        let scoped =
            harness_core::library::scope_call(&call.name, &call.arguments, self.scope.as_ref());
        Some(lib.run(&call.name, &scoped.arguments, scoped.scope.as_ref()))
    }
}

/// Where skills are looked for: the project's `.llembas/skills`, then the person's own.
fn places<'a>(
    project: &'a View,
    user: Option<&'a View>,
) -> Vec<(&'static str, &'a View, &'static str)> {
    std::iter::once(("project", project, PROJECT_SKILLS))
        .chain(user.map(|v| ("user", v, "/")))
        .collect()
}

/// A personal tool's handler: the session's parts, its project tree and the call in; its answer
/// (text, whether it is an error) out, `None` when the part it needs is not set.
type PersonalHandler = fn(&PersonalTools, &View, &ToolCall) -> Option<(String, bool)>;

/// A skill tool's answer as a personal tool's.
fn skill_answer(r: Result<String, String>) -> Option<(String, bool)> {
    Some(match r {
        Ok(t) => (t, false),
        Err(e) => (e, true),
    })
}

/// The personal tools by canonical name.
static PERSONAL_TOOLS: std::sync::LazyLock<ToolRegistry<PersonalHandler>> =
    std::sync::LazyLock::new(|| {
        let mut r = ToolRegistry::new()
            .with(
                "skills_list",
                (|p, v, c| skill_answer(p.skills_list(v, &c.arguments))) as PersonalHandler,
            )
            .with("skill_view", |p, v, c| {
                skill_answer(p.skill_view(v, &c.arguments))
            })
            .with("skill_manage", |p, v, c| {
                skill_answer(p.skill_manage(v, &c.arguments))
            })
            .with("memory", |p, _, c| {
                Some(memory(p.memory.as_deref()?, &c.arguments))
            });
        for name in library::TOOLS {
            r = r.with(name, |p, _, c| p.library_call(c));
        }
        r
    });

/// Run-time values of the tool variables the spec leaves to the product (the memory limits),
/// said once in the runner's catalogue.
pub use crate::runner::runtime_values;

/// The memory file's entries, for the prompt (empty when there is no file or it is unreadable).
pub fn memory_entries(path: &Path) -> String {
    use harness_fs::memory::{Memory, Target};
    let Ok(data) = std::fs::read(path) else {
        return String::new();
    };
    let Ok(m) = Memory::from_json(&path.display().to_string(), &data) else {
        return String::new();
    };
    let mut all = m.entries(Target::Memory);
    all.extend(m.entries(Target::User));
    harness_core::prompt::memory_entries(all)
}

/// Runs a `memory` call on the file at `path` (created on the first change), written whole
/// ([`harness_fs::write_atomic`]) so a crash leaves the old state or the new one, and refused
/// when the file changed between its read and its write (an instance's memory API wrote
/// meanwhile), never overwriting that change.
pub fn memory(path: &Path, args: &Value) -> (String, bool) {
    let file = harness_fs::memory::MemoryFile::new(path);
    match file.update(|m| m.apply(args)) {
        Ok(text) => (text, false),
        Err(e) => (e.to_string(), true),
    }
}
