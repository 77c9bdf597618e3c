//! The typed form of `spec/tools/<name>.json` and `spec/prompts/index.json`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which project: the keys of everything that is per project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Project {
    /// LLeMbas CLI: the terminal agent (`llembas`).
    Cli,
    /// LLeMbas: the web UI (`llembas-server`).
    Llembas,
}

impl Project {
    /// The key used in spec files.
    pub fn as_str(self) -> &'static str {
        match self {
            Project::Cli => "cli",
            Project::Llembas => "llembas",
        }
    }
}

/// Which projects implement a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Both projects.
    Shared,
    /// Only the CLI.
    Cli,
    /// Only LLeMbas.
    Llembas,
}

impl Scope {
    /// Whether a project implements a tool of this scope.
    pub fn includes(self, project: Project) -> bool {
        matches!(
            (self, project),
            (Scope::Shared, _) | (Scope::Cli, Project::Cli) | (Scope::Llembas, Project::Llembas)
        )
    }
}

/// Where a tool is offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sessions {
    /// A conversation on the server, in the server's file system.
    Chat,
    /// A session on a device, on that machine's disk.
    Agent,
    /// Both.
    Both,
}

/// The risk class the permission modes decide on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    /// Reads only.
    Read,
    /// Changes files or state.
    Write,
    /// Runs code.
    Execute,
    /// Asks the person.
    Interact,
}

impl Risk {
    /// The key used in spec files.
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Read => "read",
            Risk::Write => "write",
            Risk::Execute => "execute",
            Risk::Interact => "interact",
        }
    }
}

/// How a call is drawn in a UI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Block {
    /// A shell command and its output.
    Shell,
    /// An edit with its diff.
    Edit,
    /// A read.
    Read,
    /// A search.
    Search,
    /// A web fetch or search.
    Web,
    /// A subagent.
    Task,
    /// Not drawn: the plan card refreshes.
    Plan,
    /// Not shown.
    Hidden,
    /// A generic tool call.
    Tool,
}

/// Who a tool is given to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Offered {
    /// Every agent that may have it.
    All,
    /// Subagents only, never the main agent.
    Subagent,
}

/// What must hold for a tool to be offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Requirement {
    /// A browser page of the chat is open and attached.
    Page,
    /// The session is shown somewhere a file can be opened.
    Display,
    /// The session's view holds a repository mounted from a forge.
    Forge,
}

/// A confirmation rule beyond the modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confirm {
    /// The person is asked before every call, in every mode; nothing remembers the answer.
    Always,
}

/// A `{{variable}}` of a description or prompt text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Variable {
    /// What it means.
    pub meaning: String,
    /// The CLI's value, where it is a fixed fact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cli: Option<String>,
    /// LLeMbas's value, where it is a fixed fact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llembas: Option<String>,
}

impl Variable {
    /// The fixed value for a project, if the spec gives one.
    pub fn value_for(&self, project: Project) -> Option<&str> {
        match project {
            Project::Cli => self.cli.as_deref(),
            Project::Llembas => self.llembas.as_deref(),
        }
    }
}

/// What a project offers of a tool's parameters where it offers less.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Narrow {
    /// Optional properties left out (`a.b`, `a[].b`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drop: Vec<String>,
    /// Properties whose values are kept to these.
    #[serde(default, rename = "enum", skip_serializing_if = "BTreeMap::is_empty")]
    pub enums: BTreeMap<String, Vec<Value>>,
}

/// A world a tool serves (spec 3.1.0): the tool is offered only while that world holds
/// something, as the session's facts say ([`Tool::serves`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Serves {
    /// The person's library: at least one note or knowledge document.
    Library,
    /// Skills: at least one skill the session can see.
    Skills,
}

/// How a former name's arguments convert to the tool's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Renamed {
    /// Former argument name → current name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub arguments: BTreeMap<String, String>,
    /// A conversion that is more than a rename (`todo_to_plan`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub convert: Option<String>,
}

/// A search tool's ranking numbers (`ranking` of `tools/search.json`): words by BM25, vectors
/// by cosine, the best of each fused by reciprocal rank fusion.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SearchRanking {
    /// Reciprocal rank fusion's constant: a piece scores Σ 1/(k + rank), ranks from 1.
    pub rrf_k: f64,
    /// BM25's term saturation.
    pub bm25_k1: f64,
    /// BM25's length normalisation.
    pub bm25_b: f64,
    /// How many of the best by words go into the fusion.
    pub word_candidates: usize,
    /// How many of the best by vectors go into the fusion.
    pub vector_candidates: usize,
}

/// One tool of the spec: exactly what a model is sent plus what the projects need to offer,
/// show and guard it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// The name a model calls.
    pub name: String,
    /// Which projects implement it.
    pub scope: Scope,
    /// Where it is offered.
    pub sessions: Sessions,
    /// Its risk class.
    pub risk: Risk,
    /// Whether a call runs alone.
    pub exclusive: bool,
    /// How a call is drawn.
    pub block: Block,
    /// Whether it gets the `purpose` argument.
    pub purpose: bool,
    /// Former names per project.
    #[serde(default)]
    pub aliases: BTreeMap<Project, Vec<String>>,
    /// Former names whose arguments differ.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub renamed: BTreeMap<String, Renamed>,
    /// The `{{variables}}` of the description and parameter descriptions.
    #[serde(default)]
    pub variables: BTreeMap<String, Variable>,
    /// What a project offers of the parameters where it offers less.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub narrow: BTreeMap<Project, Narrow>,
    /// Who it is given to.
    pub offered: Offered,
    /// What must hold for it to be offered.
    #[serde(default)]
    pub requires: Vec<Requirement>,
    /// What a call answers when a requirement has gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// A confirmation rule beyond the modes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<Confirm>,
    /// The world it serves: offered only while that holds something (spec 3.1.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serves: Option<Serves>,
    /// Offered by one line under the loader (`load_tools`) until the model loads it; a call
    /// of it still runs (spec 3.1.0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deferred: bool,
    /// The one line the loader says for it while it is deferred.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// How it ranks, for a tool that searches by meaning and by words (`search`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranking: Option<SearchRanking>,
    /// The description a model reads (before filling).
    pub description: String,
    /// The JSON Schema of the arguments (before filling and narrowing).
    pub parameters: Value,
    /// Where a text came from, when it came from elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl Tool {
    /// The tool's former names in a project.
    pub fn aliases_for(&self, project: Project) -> &[String] {
        self.aliases.get(&project).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Whether a project offers this tool in a kind of session, going by `scope` and `sessions`.
    pub fn offered_in(&self, project: Project, chat: bool) -> bool {
        self.scope.includes(project)
            && match self.sessions {
                Sessions::Both => true,
                Sessions::Chat => chat,
                Sessions::Agent => !chat,
            }
    }
}

/// One entry of `prompts/index.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptEntry {
    /// Shared, or one project's.
    pub scope: Scope,
    /// The name of this text among LLeMbas's fragments.
    pub fragment: String,
    /// A short human title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The `{{variables}}` the text holds.
    #[serde(default)]
    pub variables: BTreeMap<String, Variable>,
}

/// `prompts/index.json`: every prompt text by its path under `prompts/`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptIndex {
    /// Path under `prompts/` → entry.
    pub fragments: BTreeMap<String, PromptEntry>,
}
