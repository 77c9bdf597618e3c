//! Subagents a person defines, beside the built-in ones (`explore`, `general`): Markdown files
//! as Claude Code writes them, read by the front end from the project's `.llembas/agents/` and
//! `.claude/agents/`, then the user's (`agents/` beside `config.toml`, and `~/.claude/agents/`),
//! and handed to the session builder ([`crate::SessionBuilder::agents`]). This module parses
//! and checks them, so every front end reads them alike.
//!
//! A file's front matter (read as prompt commands' is, [`crate::custom`]) gives `name` (else the
//! file's stem), `description` (required: what the agent is for, listed in the `task` tool's
//! description), `tools` (optional: comma-separated or a list; our names or Claude Code's, such
//! as `Read, Grep, Glob, Bash, Edit, Write, WebFetch`, without case; absent, the agent has the
//! tools of its parent) and `model` (optional: a model of the configured endpoint, or `inherit`).
//! The text after it is the agent's text in the subagent's system prompt, where a built-in
//! agent's `prompts/agents/<name>.md` goes.
//!
//! The first definition added under a name wins (a front end adds the project's before the
//! user's), and the built-in agents win over all of them. A subagent's tools never exceed its
//! parent's: `tools` only narrows what a `general` subagent of the same session would have, and
//! a subagent never has `task`.

use std::collections::BTreeMap;

use harness_spec::{Project, Spec};

use crate::custom::front_matter;

/// The built-in subagents (`prompts/agents/`).
pub const BUILT_IN: &[&str] = &["explore", "general"];

/// The tools a defined agent with a `tools` list keeps whatever the list says: the harness's own,
/// which touch nothing outside the session (`report` to its parent, `recall` of its own stubbed
/// results, and the loader of the deferred tools it was given).
pub const ALWAYS: &[&str] = &["report", "recall", "load_tools"];

/// Claude Code's tool names that are not ours, lowercase, with ours.
const CLAUDE_NAMES: &[(&str, &str)] = &[
    ("ls", "list"),
    ("bashoutput", "job_output"),
    ("killshell", "job_stop"),
    ("killbash", "job_stop"),
    ("webfetch", "web_fetch"),
    ("websearch", "web_search"),
    ("todowrite", "plan_write"),
    ("exitplanmode", "plan_submit"),
    ("askuserquestion", "question"),
];

/// Claude Code's model aliases: without a model of that name, the parent's model is used.
const CLAUDE_MODELS: &[&str] = &["sonnet", "opus", "haiku"];

/// Longest description kept (Claude Code's descriptions can carry whole examples).
const DESCRIPTION_CHARS: usize = 300;

/// Where an agent comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentSource {
    /// The spec's own (`prompts/agents/`).
    BuiltIn,
    /// A file of the project's.
    Project,
    /// A file of the person's own, for every project.
    User,
}

/// One subagent the person defined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDef {
    /// What `task`'s `agent` names.
    pub name: String,
    /// What it is for (one line).
    pub description: String,
    /// The tools it is limited to (ours, and MCP tools by their names); `None`: its parent's.
    pub tools: Option<Vec<String>>,
    /// The model it runs on; `None`: its parent's.
    pub model: Option<String>,
    /// Its text in the subagent's system prompt.
    pub text: String,
    /// Where it comes from.
    pub source: AgentSource,
    /// The file it was read from.
    pub path: String,
}

impl AgentDef {
    /// Whether the agent may be offered tool `name` (its parent offering it too): always
    /// without a `tools` list, else when the list or [`ALWAYS`] names it.
    pub fn allows(&self, name: &str) -> bool {
        match &self.tools {
            None => name != "task",
            Some(list) => {
                ALWAYS.contains(&name) || list.iter().any(|t| t.eq_ignore_ascii_case(name))
            }
        }
    }
}

/// A definition read from `path` (its file name's stem stands for a missing `name`): the agent
/// and what is said about it (tools left out, a model not known), or why it is left out.
pub fn parse(
    path: &str,
    text: &str,
    source: AgentSource,
) -> Result<(AgentDef, Vec<String>), String> {
    let (fields, body) = front_matter(text);
    let field = |k: &str| fields.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
    let stem = std::path::Path::new(path)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = field("name").unwrap_or(&stem).to_owned();
    let typable = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !typable {
        return Err(format!(
            "{path}: the agent's name {name:?} is not one word of letters, digits, `-`, `_` or `.`; the agent is left out"
        ));
    }
    let Some(description) = field("description") else {
        return Err(format!(
            "{path}: no `description` in its front matter (between `---` lines), which says what the agent is for; the agent is left out"
        ));
    };
    let mut said = Vec::new();
    let tools = fields
        .get("tools")
        .map(|list| tool_names(path, list, &mut said));
    let model = match field("model") {
        None => None,
        Some(m) if m.eq_ignore_ascii_case("inherit") => None,
        Some(m) if is_unknown_alias(m) => {
            said.push(format!(
                "{path}: model `{m}` is not a model known here; agent `{name}` runs on the session's model"
            ));
            None
        }
        Some(m) => Some(m.to_owned()),
    };
    let def = AgentDef {
        name,
        description: one_line(description),
        tools,
        model,
        text: body.trim().to_owned(),
        source,
        path: path.to_owned(),
    };
    Ok((def, said))
}

/// Our names of the tools in `list` (comma-separated, maybe in `[...]`); each name not known
/// is said once and left out, as is `task`.
fn tool_names(path: &str, list: &str, said: &mut Vec<String>) -> Vec<String> {
    let spec = Spec::embedded();
    let list = list.trim().trim_start_matches('[').trim_end_matches(']');
    let mut names: Vec<String> = Vec::new();
    let mut unknown: Vec<String> = Vec::new();
    for raw in list.split(',') {
        let raw = raw.trim().trim_matches('"').trim_matches('\'');
        if raw.is_empty() {
            continue;
        }
        let lower = raw.to_ascii_lowercase();
        let ours = CLAUDE_NAMES
            .iter()
            .find(|(claude, _)| *claude == lower)
            .map(|(_, ours)| (*ours).to_owned())
            .or_else(|| spec.tool(&lower).map(|t| t.name.clone()))
            .or_else(|| {
                spec.tool_by_any_name(Project::Cli, &lower)
                    .map(|t| t.name.clone())
            });
        let name = match ours {
            Some(n) if n == "task" => {
                said.push(format!(
                    "{path}: a subagent cannot start subagents of its own, so `{raw}` is left out"
                ));
                continue;
            }
            Some(n) => n,
            // An MCP server's tool, by the name the session offers it under.
            None if lower.starts_with("mcp__") => raw.to_owned(),
            None => {
                if !unknown.contains(&raw.to_owned()) {
                    unknown.push(raw.to_owned());
                }
                continue;
            }
        };
        if !names.contains(&name) {
            names.push(name);
        }
    }
    if !unknown.is_empty() {
        let quoted: Vec<String> = unknown.iter().map(|u| format!("`{u}`")).collect();
        said.push(format!(
            "{path}: no tool is called {}; left out of the agent's tools",
            quoted.join(", ")
        ));
    }
    names
}

/// Whether `model` is one of Claude Code's aliases that names no model of the catalogue.
fn is_unknown_alias(model: &str) -> bool {
    let lower = model.to_ascii_lowercase();
    CLAUDE_MODELS.contains(&lower.as_str())
        && harness_model::Catalogue::embedded().map_or(true, |c| c.find(model).is_none())
}

/// The first line of `text`, at most [`DESCRIPTION_CHARS`] characters.
fn one_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default().trim();
    if line.chars().count() <= DESCRIPTION_CHARS {
        return line.to_owned();
    }
    let mut out: String = line.chars().take(DESCRIPTION_CHARS - 1).collect();
    out.push('…');
    out
}

/// The subagents a session may start beyond the built-in ones, by name, and what reading them
/// said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Agents {
    defined: BTreeMap<String, AgentDef>,
    notices: Vec<String>,
}

impl Agents {
    /// Reads the definition file at `path` with text `text` and adds it (see [`Agents::add`]);
    /// what is wrong with it is kept as a notice.
    pub fn add_file(&mut self, path: &str, text: &str, source: AgentSource) {
        match parse(path, text, source) {
            Ok((def, said)) => {
                self.notices.extend(said);
                self.add(def);
            }
            Err(why) => self.notices.push(why),
        }
    }

    /// Adds `def` unless an earlier definition has its name; one naming a built-in agent is
    /// said and left out.
    pub fn add(&mut self, def: AgentDef) {
        if BUILT_IN.contains(&def.name.as_str()) {
            self.notices.push(format!(
                "{}: `{}` is a built-in agent; this definition is ignored",
                def.path, def.name
            ));
            return;
        }
        self.defined.entry(def.name.clone()).or_insert(def);
    }

    /// The defined agent named `name`.
    pub fn get(&self, name: &str) -> Option<&AgentDef> {
        self.defined.get(name)
    }

    /// The defined agents, by name.
    pub fn defined(&self) -> impl Iterator<Item = &AgentDef> {
        self.defined.values()
    }

    /// Whether `name` is an agent of the session (built-in or defined).
    pub fn knows(&self, name: &str) -> bool {
        BUILT_IN.contains(&name) || self.defined.contains_key(name)
    }

    /// Every agent's name: the built-in ones, then the defined ones.
    pub fn names(&self) -> Vec<&str> {
        let defined = self.defined.keys().map(String::as_str);
        BUILT_IN.iter().copied().chain(defined).collect()
    }

    /// Keeps `text` among the notices (a front end's: a file it could not read).
    pub fn add_notice(&mut self, text: String) {
        self.notices.push(text);
    }

    /// What reading the definitions said (a file left out, a tool unknown), one line each.
    pub fn notices(&self) -> &[String] {
        &self.notices
    }

    /// Takes the notices, for a front end to say them once.
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    /// The bullet lines that follow the built-in agents in the `task` tool's `{{agents}}`
    /// (each `\n- `name`: description`); empty without defined agents.
    pub fn task_lines(&self) -> String {
        self.defined()
            .map(|d| format!("\n- `{}`: {}", d.name, d.description))
            .collect()
    }

    /// `/agents`: each agent of the session with what it is for and where it comes from.
    pub fn listing(&self, project: Project) -> String {
        let mut out = String::new();
        for line in built_in_lines(project) {
            if let Some((name, what)) = line.split_once("`: ") {
                let name = name.trim_start_matches("- ").trim_matches('`');
                out.push_str(&format!("{name:<16} {what} (built-in)\n"));
            }
        }
        for d in self.defined() {
            let from = match d.source {
                AgentSource::BuiltIn => "built-in",
                AgentSource::Project => "project",
                AgentSource::User => "user",
            };
            let mut extra = String::new();
            if let Some(tools) = &d.tools {
                extra.push_str(&format!("; tools: {}", tools.join(", ")));
            }
            if let Some(model) = &d.model {
                extra.push_str(&format!("; model: {model}"));
            }
            out.push_str(&format!(
                "{:<16} {} ({from}: {}{extra})\n",
                d.name, d.description, d.path
            ));
        }
        out
    }
}

/// The built-in agents' bullet lines as the `task` tool's description gives them.
fn built_in_lines(project: Project) -> Vec<String> {
    Spec::embedded()
        .tool("task")
        .and_then(|t| t.variables.get("agents"))
        .and_then(|v| v.value_for(project))
        .map(|v| v.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The `task` tool's description as filled for `project`, with the defined agents' lines after
/// the built-in ones (the spec's `{{agents}}`: "a project appends agents the person has
/// defined").
pub(crate) fn task_description(description: &str, project: Project, agents: &Agents) -> String {
    let lines = agents.task_lines();
    if lines.is_empty() {
        return description.to_owned();
    }
    let built_in = built_in_lines(project).join("\n");
    let at = description
        .find(&built_in)
        .filter(|_| !built_in.is_empty())
        .map(|at| at + built_in.len());
    match at {
        Some(at) => format!("{}{lines}{}", &description[..at], &description[at..]),
        None => format!("{description}\n\nMore agents:{lines}"),
    }
}
