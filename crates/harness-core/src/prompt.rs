//! The system prompt of a session, assembled from `spec/prompts/`.
//!
//! `system/default.md` is one text for both projects; its `{{variables}}` (declared in
//! `prompts/index.json`) take the project's fixed values where the spec gives them, and
//! otherwise what is computed here or given by the project at run time:
//!
//! - `subagent_block`: for a subagent, `blocks/subagent.md`, a blank line and its agent's text
//!   (`agents/<name>.md`, or the text of an agent the person defined); empty for the main agent;
//! - `mode_text`: `modes/<mode>.md`; `personality`: `personality/<name>.md` (`default`);
//! - `workspace_block`: `blocks/workspace.md` in a chat (with `cwd` and `grants`);
//! - `context_block`: `blocks/context.md`, always;
//! - `jobs_block`: `blocks/jobs.md` when `bash` or `task` is offered;
//! - `library_block`: `blocks/library.md` when a library tool is offered;
//! - `prototypes_block`: `blocks/prototypes.md` when an instance older than 3.0.0 handed the
//!   session prototypes and `show` is offered (see [`prototype_lines`]);
//! - `instructions_block`: `blocks/instructions.md` with the stacked instruction files;
//! - `plan_block`: `blocks/plan.md` with `{{plan_context}}` while the session has a plan;
//! - `memory_block`: `blocks/memory.md` when the run-time value `memory_entries` (made by
//!   [`memory_entries`]) is not empty;
//! - `client_context_block`: `blocks/client_context.md` when an ACP client handed a `context`
//!   text (the run-time value `client_context`, CLI only).
//!
//! Every block is filled by the same rules before it is put in; the assembled text has no run
//! of more than one blank line (a block left empty leaves no hole) and ends with one newline.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use harness_spec::{Project, Spec};

use crate::error::{Error, Result};
use crate::fill::{Values, fill_text};
use crate::plan::Plan;
use crate::protocol::{Mode, SessionKind};

/// The tools of the CLI's local library (notes and knowledge); `blocks/library.md` is put in
/// when one of them is offered, and their calls are scoped to the chat in a session a LLeMbas
/// chat opened (the `library` module).
pub const LIBRARY_TOOLS: [&str; 5] = [
    "knowledge_get",
    "knowledge_search",
    "note_manage",
    "note_view",
    "notes_search",
];

/// The tools that can start a job; `blocks/jobs.md` is put in when one of them is offered.
pub const JOB_TOOLS: [&str; 2] = ["bash", "task"];

/// The built-in agent that is a read-only helper (given exactly the tools of risk `read`).
pub const READ_ONLY_AGENT: &str = "explore";

/// Run-time values that may be empty when unknown (`prompts/index.json` says so for each):
/// missing, they are filled with nothing rather than refused.
const EMPTY_WHEN_UNKNOWN: [&str; 7] = [
    "model",
    "platform",
    "shell",
    "git_status",
    "library_summary",
    "memory_entries",
    "client_context",
];

/// The run-time value `memory_entries`: one line per entry, `- [ID] TEXT`, in the order stored
/// (an entry's inner line breaks folded to spaces so a line stays a line).
pub fn memory_entries<'e>(entries: impl IntoIterator<Item = (&'e str, &'e str)>) -> String {
    entries
        .into_iter()
        .map(|(id, text)| {
            let text: Vec<&str> = text.split_whitespace().collect();
            format!("- [{id}] {}", text.join(" "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One instruction file that applies, outermost first (from `harness-fs`'s stacking).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstructionFile {
    /// Its absolute path.
    pub path: String,
    /// Its text.
    pub text: String,
}

/// One prototype a client handed the session over ACP.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Prototype {
    /// Its title.
    #[serde(default)]
    pub title: String,
    /// The path of its HTML file.
    #[serde(default)]
    pub path: String,
    /// What it is, when the client said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// What a client handed the session about prototypes: the instance's spec version and the list.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PrototypeHandoff {
    /// The spec version the LLeMbas instance speaks (`2.0.0`, `3.0.0`, ...).
    pub instance: String,
    /// The prototypes it handed over.
    #[serde(default)]
    pub prototypes: Vec<Prototype>,
}

/// Everything the system prompt of a session is made from.
#[derive(Debug, Clone)]
pub struct PromptInput<'a> {
    /// The project.
    pub project: Project,
    /// Chat or agent session.
    pub kind: SessionKind,
    /// The permission mode.
    pub mode: Mode,
    /// For a subagent, its agent's name (`general`, `explore`, or one the person defined).
    pub subagent: Option<&'a str>,
    /// For a subagent of an agent the person defined, its text (put in as given, where a
    /// built-in agent's `agents/<name>.md` goes); `None` for a built-in agent.
    pub agent_text: Option<&'a str>,
    /// The personality preset (`default` when none).
    pub personality: Option<&'a str>,
    /// The names of the tools offered (from the offering).
    pub offered: &'a [&'a str],
    /// The instruction files that apply, outermost first.
    pub instructions: &'a [InstructionFile],
    /// The session's plan, while it has one.
    pub plan: Option<&'a Plan>,
    /// Prototypes a client handed over, if any.
    pub prototypes: Option<&'a PrototypeHandoff>,
    /// Run-time values: `product_version`, `cwd`, `date` (required), `model`, `platform`,
    /// `shell`, `git_status`, `library_summary`, `memory_entries`, `client_context` (empty when
    /// missing), `grants` (required in a chat), `max_running` (default: `loop.json`
    /// `jobs.limits.max_running`).
    pub values: &'a BTreeMap<String, String>,
}

/// The lines of `{{prototypes}}`, or `None` when the block is not put in: only in the CLI, only
/// when the handing instance is older than 3.0.0 (a 3.0.0 instance sends none, and any it sends
/// are ignored), only when `show` is offered, and only for prototypes with a title and a path.
/// Each line is `- TITLE — PATH`, with ` — DESCRIPTION` when one is given; blanks inside are
/// folded to one space so a line stays a line.
pub fn prototype_lines(
    project: Project,
    handoff: Option<&PrototypeHandoff>,
    show_offered: bool,
) -> Option<Vec<String>> {
    let handoff = handoff?;
    if project != Project::Cli || !show_offered || instance_major(&handoff.instance)? >= 3 {
        return None;
    }
    let fold = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let lines: Vec<String> = handoff
        .prototypes
        .iter()
        .filter(|p| !fold(&p.title).is_empty() && !fold(&p.path).is_empty())
        .map(|p| {
            let mut line = format!("- {} — {}", fold(&p.title), fold(&p.path));
            if let Some(d) = p.description.as_deref().map(fold).filter(|d| !d.is_empty()) {
                line.push_str(" — ");
                line.push_str(&d);
            }
            line
        })
        .collect();
    (!lines.is_empty()).then_some(lines)
}

/// The major version of an instance's spec version (`2.0.0`, `3.0.0-draft`); `None` when it
/// is not a version, so nothing is put in on the strength of a garbled field.
fn instance_major(v: &str) -> Option<u64> {
    let v = v.trim().trim_start_matches('v');
    let major = v.split(['.', '-']).next()?;
    major.parse().ok()
}

fn text<'s>(spec: &'s Spec, rel: &str) -> Result<&'s str> {
    spec.prompt(rel)
        .ok_or_else(|| Error::Spec(format!("prompts/{rel} does not exist")))
}

/// Fills one prompt text by its index entry, fixed values first, then `values`.
fn fill_prompt(
    spec: &Spec,
    rel: &str,
    project: Project,
    values: &BTreeMap<String, String>,
) -> Result<String> {
    let empty = BTreeMap::new();
    let declared = spec
        .prompt_index()
        .fragments
        .get(rel)
        .map(|e| &e.variables)
        .unwrap_or(&empty);
    let v = Values {
        project,
        declared,
        runtime: values,
    };
    fill_text(text(spec, rel)?, &format!("prompt {rel}"), &v)
}

/// A session's system prompt, assembled again only when what it is made of changed: a session
/// sends the same text with each request until its mode, its tools, its plan or a value
/// changes, and comparing the inputs costs far less than filling every block again (200 chats
/// asking at once spent 7–10% of the server's time here).
#[derive(Debug)]
pub struct Assembled<'s> {
    spec: &'s Spec,
    last: Option<(OwnedInput, String)>,
}

impl<'s> Assembled<'s> {
    /// Nothing assembled yet, from `spec`.
    pub fn new(spec: &'s Spec) -> Self {
        Assembled { spec, last: None }
    }

    /// The text [`assemble`] makes of `input`: the last one when `input` is the same.
    pub fn text(&mut self, input: &PromptInput<'_>) -> Result<String> {
        if let Some((made_of, text)) = &self.last
            && made_of.is(input)
        {
            return Ok(text.clone());
        }
        let text = assemble(self.spec, input)?;
        self.last = Some((OwnedInput::of(input), text.clone()));
        Ok(text)
    }
}

/// A [`PromptInput`] kept.
#[derive(Debug)]
struct OwnedInput {
    project: Project,
    kind: SessionKind,
    mode: Mode,
    subagent: Option<String>,
    agent_text: Option<String>,
    personality: Option<String>,
    offered: Vec<String>,
    instructions: Vec<InstructionFile>,
    plan: Option<Plan>,
    prototypes: Option<PrototypeHandoff>,
    values: BTreeMap<String, String>,
}

impl OwnedInput {
    fn of(input: &PromptInput<'_>) -> Self {
        let PromptInput {
            project,
            kind,
            mode,
            subagent,
            agent_text,
            personality,
            offered,
            instructions,
            plan,
            prototypes,
            values,
        } = *input;
        OwnedInput {
            project,
            kind,
            mode,
            subagent: subagent.map(str::to_owned),
            agent_text: agent_text.map(str::to_owned),
            personality: personality.map(str::to_owned),
            offered: offered.iter().map(|s| (*s).to_owned()).collect(),
            instructions: instructions.to_vec(),
            plan: plan.cloned(),
            prototypes: prototypes.cloned(),
            values: values.clone(),
        }
    }

    /// Whether `input` is this one ([`OwnedInput::of`] names every field of [`PromptInput`];
    /// each is compared here).
    fn is(&self, input: &PromptInput<'_>) -> bool {
        self.project == input.project
            && self.kind == input.kind
            && self.mode == input.mode
            && self.subagent.as_deref() == input.subagent
            && self.agent_text.as_deref() == input.agent_text
            && self.personality.as_deref() == input.personality
            && self
                .offered
                .iter()
                .map(String::as_str)
                .eq(input.offered.iter().copied())
            && self.instructions == input.instructions
            && self.plan.as_ref() == input.plan
            && self.prototypes.as_ref() == input.prototypes
            && self.values == *input.values
    }
}

/// Assembles the system prompt of a session.
pub fn assemble(spec: &Spec, input: &PromptInput<'_>) -> Result<String> {
    let project = input.project;
    let mut values = input.values.clone();
    for name in EMPTY_WHEN_UNKNOWN {
        values.entry(name.to_owned()).or_default();
    }
    if !values.contains_key("max_running")
        && let Some(n) = spec
            .json("loop.json")
            .and_then(|l| l.pointer("/jobs/limits/max_running"))
            .and_then(Value::as_u64)
    {
        values.insert("max_running".into(), n.to_string());
    }
    let offers = |name: &str| input.offered.contains(&name);

    let subagent_block = match input.subagent {
        None => String::new(),
        Some(agent) => {
            let text = match input.agent_text {
                Some(text) => text.trim().to_owned(),
                None => {
                    let rel = format!("agents/{agent}.md");
                    if spec.prompt(&rel).is_none() {
                        return Err(Error::Spec(format!(
                            "unknown agent `{agent}` (no prompts/{rel})"
                        )));
                    }
                    fill_prompt(spec, &rel, project, &values)?
                        .trim_end()
                        .to_owned()
                }
            };
            format!(
                "{}\n\n{text}",
                fill_prompt(spec, "blocks/subagent.md", project, &values)?.trim_end(),
            )
        }
    };
    let mode_text = fill_prompt(spec, &format!("modes/{}.md", input.mode), project, &values)?;
    let preset = input.personality.unwrap_or("default");
    let personality_rel = format!("personality/{preset}.md");
    if spec.prompt(&personality_rel).is_none() {
        return Err(Error::Spec(format!(
            "unknown personality preset `{preset}` (no prompts/{personality_rel})"
        )));
    }
    let personality = fill_prompt(spec, &personality_rel, project, &values)?;
    let workspace_block = if input.kind == SessionKind::Chat {
        fill_prompt(spec, "blocks/workspace.md", project, &values)?
    } else {
        String::new()
    };
    let context_block = fill_prompt(spec, "blocks/context.md", project, &values)?;
    let jobs_block = if JOB_TOOLS.iter().any(|t| offers(t)) {
        fill_prompt(spec, "blocks/jobs.md", project, &values)?
    } else {
        String::new()
    };
    let library_block = if LIBRARY_TOOLS.iter().any(|t| offers(t)) {
        fill_prompt(spec, "blocks/library.md", project, &values)?
    } else {
        String::new()
    };
    let prototypes_block = match prototype_lines(project, input.prototypes, offers("show")) {
        Some(lines) => {
            let mut v = values.clone();
            v.insert("prototypes".into(), lines.join("\n"));
            fill_prompt(spec, "blocks/prototypes.md", project, &v)?
        }
        None => String::new(),
    };
    let instructions_block = if input.instructions.is_empty() {
        String::new()
    } else {
        let joined = input
            .instructions
            .iter()
            .map(|f| format!("## {}\n\n{}", f.path, f.text.trim_end()))
            .collect::<Vec<_>>()
            .join("\n\n");
        let mut v = values.clone();
        v.insert("instructions".into(), joined);
        fill_prompt(spec, "blocks/instructions.md", project, &v)?
    };
    let plan_block = match input.plan {
        Some(plan) => {
            let mut v = values.clone();
            v.insert("plan_context".into(), plan.render());
            fill_prompt(spec, "blocks/plan.md", project, &v)?
        }
        None => String::new(),
    };

    let memory_block = if values
        .get("memory_entries")
        .is_some_and(|v| !v.trim().is_empty())
    {
        fill_prompt(spec, "blocks/memory.md", project, &values)?
    } else {
        String::new()
    };
    let client_context_block = if project == Project::Cli
        && values
            .get("client_context")
            .is_some_and(|v| !v.trim().is_empty())
    {
        fill_prompt(spec, "blocks/client_context.md", project, &values)?
    } else {
        String::new()
    };

    for (name, value) in [
        ("memory_block", memory_block),
        ("client_context_block", client_context_block),
        ("subagent_block", subagent_block),
        ("mode_text", mode_text),
        ("personality", personality),
        ("workspace_block", workspace_block),
        ("context_block", context_block),
        ("jobs_block", jobs_block),
        ("library_block", library_block),
        ("prototypes_block", prototypes_block),
        ("instructions_block", instructions_block),
        ("plan_block", plan_block),
    ] {
        values.insert(name.to_owned(), value.trim_end().to_owned());
    }
    let system = fill_prompt(spec, "system/default.md", project, &values)?;
    Ok(tidy(&system))
}

/// Folds runs of blank lines to one and ends the text with one newline.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 || out.is_empty() {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tidy_folds_blank_runs() {
        assert_eq!(tidy("a\n\n\n\nb  \n\n"), "a\n\nb\n");
        assert_eq!(tidy("\n\na"), "a\n");
    }

    #[test]
    fn prototypes_only_below_3() {
        let h = |v: &str| PrototypeHandoff {
            instance: v.into(),
            prototypes: vec![Prototype {
                title: "Chart\n demo".into(),
                path: "/p/chart.html".into(),
                description: None,
            }],
        };
        assert_eq!(
            prototype_lines(Project::Cli, Some(&h("2.0.0")), true),
            Some(vec!["- Chart demo — /p/chart.html".to_string()])
        );
        assert_eq!(prototype_lines(Project::Cli, Some(&h("3.0.0")), true), None);
        assert_eq!(
            prototype_lines(Project::Cli, Some(&h("2.0.0")), false),
            None
        );
        assert_eq!(
            prototype_lines(Project::Llembas, Some(&h("2.0.0")), true),
            None
        );
        assert_eq!(
            prototype_lines(Project::Cli, Some(&h("garbage")), true),
            None
        );
    }
}
