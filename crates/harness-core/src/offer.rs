//! Offering: which tools a session is given, each exactly as the model is sent it, and what a
//! model's call of one means (aliases, renamed arguments, `purpose`, requirements gone).
//!
//! A tool is offered when all of these hold:
//!
//! - its `scope` includes the project, and its `sessions` admit the session's kind;
//! - `offered: subagent` tools (`report`) only to subagents, never to the main agent;
//! - every requirement it `requires` (`page`, `display`, `forge`) holds now;
//! - `plan_submit` only in plan mode (`plan_write` and `plan_update` in every mode, deferred
//!   but in plan mode);
//! - a read-only helper is given exactly the tools of risk `read`;
//! - a tool that `serves` a world (`library`, `skills`) only while the session's [`Facts`] say
//!   that world holds something (a fact not known counts as holding something).
//!
//! Of the offered tools, those marked `deferred` that the model has not loaded are not sent
//! whole: the loader [`LOADER`] (`load_tools`) is sent instead, its description listing each one
//! by its `summary`. A call of `load_tools` loads tools for the requests after it; a deferred
//! tool called directly still resolves and runs ([`Offering::resolve`]).
//!
//! Each offered tool's description and parameter descriptions are filled for the project (see
//! [`crate::fill`]), its parameters narrowed by the project's `narrow` (see [`crate::narrow`]),
//! and a tool with `purpose: true` gets the `purpose` argument of `purpose.json`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use harness_spec::{Offered, Project, Requirement, Risk, Serves, Spec, Tool};

use crate::error::{Error, Result};
use crate::fill::{Values, fill_schema, fill_text};
use crate::narrow::narrow_parameters;
use crate::plan::todo_to_plan;
use crate::protocol::{Mode, SessionKind, ToolCall};

/// The name of the plan-mode approval tool, offered only in plan mode.
pub const PLAN_SUBMIT: &str = "plan_submit";

/// The loader of deferred tools, sent while some offered tool is deferred and not loaded.
pub const LOADER: &str = "load_tools";

/// The loader's variable that lists the deferred tools.
pub const DEFERRED_TOOLS: &str = "deferred_tools";

/// What the session's worlds hold, for the tools that serve one (`serves`): `None` is not
/// known, which counts as holding something.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Facts {
    /// Notes and knowledge documents in the session's library.
    #[serde(default)]
    pub library: Option<u64>,
    /// Skills the session can see.
    #[serde(default)]
    pub skills: Option<u64>,
}

impl Facts {
    /// From the run-time values: `library_count`, else the counts in `library_summary` (`0
    /// notes, 0 documents` is an empty library), and `skill_count`.
    pub fn from_values(values: &BTreeMap<String, String>) -> Facts {
        let count = |k: &str| values.get(k).and_then(|v| v.trim().parse::<u64>().ok());
        let library = count("library_count")
            .or_else(|| values.get("library_summary").and_then(|s| summary_count(s)));
        Facts {
            library,
            skills: count("skill_count"),
        }
    }

    /// Whether a world holds something (or is not known).
    pub fn holds(&self, world: Serves) -> bool {
        let n = match world {
            Serves::Library => self.library,
            Serves::Skills => self.skills,
        };
        n != Some(0)
    }
}

/// The sum of the numbers a summary line says (`3 notes, 1 document` → 4); `None` when it says
/// none.
fn summary_count(text: &str) -> Option<u64> {
    let numbers: Vec<u64> = text
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    (!numbers.is_empty()).then(|| numbers.iter().sum())
}

/// What holds now for a session: the requirements a tool may have.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Holds {
    /// A browser page of the chat is open and attached.
    #[serde(default)]
    pub page: bool,
    /// The session is shown somewhere a file can be opened (not a bare terminal).
    #[serde(default)]
    pub display: bool,
    /// The session's view holds a repository mounted from a forge.
    #[serde(default)]
    pub forge: bool,
}

impl Holds {
    /// Whether one requirement holds.
    pub fn has(&self, r: Requirement) -> bool {
        match r {
            Requirement::Page => self.page,
            Requirement::Display => self.display,
            Requirement::Forge => self.forge,
        }
    }

    /// From a list of the requirements that hold.
    pub fn from_list(list: &[Requirement]) -> Holds {
        Holds {
            page: list.contains(&Requirement::Page),
            display: list.contains(&Requirement::Display),
            forge: list.contains(&Requirement::Forge),
        }
    }
}

/// Everything that decides what a session is offered.
#[derive(Debug, Clone)]
pub struct OfferContext {
    /// The project offering.
    pub project: Project,
    /// Chat or agent session.
    pub kind: SessionKind,
    /// The permission mode.
    pub mode: Mode,
    /// What holds now.
    pub holds: Holds,
    /// Whether the session is a subagent's.
    pub subagent: bool,
    /// Whether the session is a read-only helper (given only the tools of risk `read`).
    pub read_only: bool,
    /// Run-time values of tool variables that have no fixed value in the spec.
    pub values: BTreeMap<String, String>,
    /// What the worlds hold, for tools that serve one.
    pub facts: Facts,
    /// The deferred tools the model has loaded (sent whole).
    pub loaded: BTreeSet<String>,
}

impl OfferContext {
    /// A main-agent context with nothing holding and no run-time values.
    pub fn new(project: Project, kind: SessionKind, mode: Mode) -> Self {
        OfferContext {
            project,
            kind,
            mode,
            holds: Holds::default(),
            subagent: false,
            read_only: false,
            values: BTreeMap::new(),
            facts: Facts::default(),
            loaded: BTreeSet::new(),
        }
    }
}

impl OfferContext {
    /// Makes this the context of a subagent running the built-in or defined agent `agent`;
    /// the read-only helper (`explore`) is given exactly the tools of risk `read`.
    pub fn for_subagent(mut self, agent: &str) -> Self {
        self.subagent = true;
        self.read_only = agent == crate::prompt::READ_ONLY_AGENT;
        self
    }
}

/// One tool as it is offered: exactly what the model is sent, plus the spec's tool.
#[derive(Debug, Clone, Serialize)]
pub struct OfferedTool<'s> {
    /// The spec's tool (risk, block, confirm, ... for the loop and the UI).
    #[serde(skip)]
    pub tool: &'s Tool,
    /// The name the model calls.
    pub name: String,
    /// The filled description.
    pub description: String,
    /// The filled, narrowed parameters (with `purpose` where the tool has it).
    pub parameters: Value,
}

impl OfferedTool<'_> {
    /// Checks arguments against the parameters exactly as offered (narrowed, with `purpose`):
    /// `Err` holds one line per problem, each naming the JSON pointer at fault, to answer the
    /// model with. A call valid here is valid for the whole tool.
    pub fn check_arguments(&self, arguments: &Value) -> std::result::Result<(), String> {
        let validator = jsonschema::validator_for(&self.parameters)
            .map_err(|e| format!("the parameters of `{}` do not compile: {e}", self.name))?;
        let problems: Vec<String> = validator
            .iter_errors(arguments)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    format!("{e}")
                } else {
                    format!("{at}: {e}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("\n"))
        }
    }
}

/// Whether a tool is offered in a context (before filling).
pub fn is_offered(tool: &Tool, cx: &OfferContext) -> bool {
    tool.scope.includes(cx.project)
        && cx.kind.admits(tool.sessions)
        && (tool.offered == Offered::All || cx.subagent)
        && tool.requires.iter().all(|r| cx.holds.has(*r))
        && (tool.name != PLAN_SUBMIT || cx.mode == Mode::Plan)
        && (!cx.read_only || tool.risk == Risk::Read)
        && tool.serves.is_none_or(|w| cx.facts.holds(w))
        && tool.name != LOADER
}

/// The plan's own tools: deferred in every mode but plan mode, where they are the work.
const PLAN_TOOLS: [&str; 2] = ["plan_write", "plan_update"];

/// Whether an offered tool goes as one line under the loader rather than whole (the plan's
/// tools never in plan mode).
pub fn is_deferred(tool: &Tool, cx: &OfferContext) -> bool {
    tool.deferred
        && !cx.loaded.contains(&tool.name)
        && !(cx.mode == Mode::Plan && PLAN_TOOLS.contains(&tool.name.as_str()))
}

/// The `purpose` argument of `purpose.json`: its name, its schema, where it goes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PurposeArg {
    /// The property's name (`purpose`).
    pub name: String,
    /// The property's schema, exactly as inserted.
    pub property: Value,
    /// Whether it is added to the tool's required list.
    pub required: bool,
    /// Whether it goes before the tool's own parameters.
    pub first: bool,
}

/// Reads `purpose.json`.
pub fn purpose_arg(spec: &Spec) -> Result<PurposeArg> {
    spec.parse::<PurposeArg>("purpose.json")
        .map_err(|e| Error::Spec(e.to_string()))
}

/// One tool prepared for a project: filled, narrowed, with `purpose` where it has it.
pub fn prepare<'s>(spec: &Spec, tool: &'s Tool, cx: &OfferContext) -> Result<OfferedTool<'s>> {
    let values = Values {
        project: cx.project,
        declared: &tool.variables,
        runtime: &cx.values,
    };
    let description = fill_text(
        &tool.description,
        &format!("tool {} description", tool.name),
        &values,
    )?;
    let mut parameters = match tool.narrow.get(&cx.project) {
        Some(n) => narrow_parameters(&tool.name, &tool.parameters, n)?,
        None => tool.parameters.clone(),
    };
    parameters = fill_schema(
        &parameters,
        &format!("tool {} parameters", tool.name),
        &values,
    )?;
    if tool.purpose {
        let p = purpose_arg(spec)?;
        add_property(&mut parameters, &p, &tool.name)?;
    }
    Ok(OfferedTool {
        tool,
        name: tool.name.clone(),
        description,
        parameters,
    })
}

fn add_property(params: &mut Value, p: &PurposeArg, tool: &str) -> Result<()> {
    let obj = params
        .as_object_mut()
        .ok_or_else(|| Error::Spec(format!("tools/{tool}.json parameters is not an object")))?;
    let props = obj
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| {
            Error::Spec(format!(
                "tools/{tool}.json parameters.properties is not an object"
            ))
        })?;
    if props.contains_key(&p.name) {
        return Err(Error::Spec(format!(
            "tools/{tool}.json already has a `{}` parameter, and purpose is true",
            p.name
        )));
    }
    if p.first {
        let mut with_first = Map::new();
        with_first.insert(p.name.clone(), p.property.clone());
        with_first.extend(std::mem::take(props));
        *props = with_first;
    } else {
        props.insert(p.name.clone(), p.property.clone());
    }
    if p.required {
        let req = obj
            .entry("required")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(r) = req {
            let name = Value::String(p.name.clone());
            if p.first {
                r.insert(0, name);
            } else {
                r.push(name);
            }
        }
    }
    Ok(())
}

/// The tools a session is offered, in the spec's order (by name), each prepared.
pub fn offer<'s>(spec: &'s Spec, cx: &OfferContext) -> Result<Vec<OfferedTool<'s>>> {
    spec.tools()
        .iter()
        .filter(|t| is_offered(t, cx))
        .map(|t| prepare(spec, t, cx))
        .collect()
}

/// What a call answers when one of the tool's requirements does not hold any more: the tool's
/// `unavailable` text, word for word. `None` when every requirement holds.
pub fn unavailable<'t>(tool: &'t Tool, holds: &Holds) -> Option<&'t str> {
    if tool.requires.iter().all(|r| holds.has(*r)) {
        return None;
    }
    Some(tool.unavailable.as_deref().unwrap_or(
        "This tool cannot run now: what it needs is no longer available in this session.",
    ))
}

/// A call resolved to its tool: the canonical name, the arguments converted from any former
/// name, and the `purpose` taken out.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedCall<'s> {
    /// The spec's tool.
    pub tool: &'s Tool,
    /// The call with the tool's own name and current arguments (`purpose` removed).
    pub call: ToolCall,
    /// The former name the model used, if it used one.
    pub former: Option<String>,
    /// What the call said it is for.
    pub purpose: Option<String>,
}

/// Resolves a call in a project: the tool by its name or a former name (`aliases`), with the
/// former name's arguments renamed and converted (`renamed`; `todo` → `plan_write`).
pub fn resolve_call<'s>(
    spec: &'s Spec,
    project: Project,
    call: &ToolCall,
) -> Result<ResolvedCall<'s>> {
    let tool = spec
        .tool_by_any_name(project, &call.name)
        .filter(|t| t.scope.includes(project))
        .ok_or_else(|| Error::UnknownTool(call.name.clone()))?;
    let former = (tool.name != call.name).then(|| call.name.clone());
    let mut arguments = match &call.arguments {
        Value::Null => Value::Object(Map::new()),
        Value::Object(_) => call.arguments.clone(),
        other => {
            return Err(Error::Arguments {
                tool: call.name.clone(),
                reason: format!("arguments must be a JSON object, not {other}"),
            });
        }
    };
    if let Some(former) = &former
        && let Some(renamed) = tool.renamed.get(former)
    {
        if let Value::Object(map) = &mut arguments {
            let old = std::mem::take(map);
            for (k, v) in old {
                let k = renamed.arguments.get(&k).cloned().unwrap_or(k);
                map.insert(k, v);
            }
        }
        match renamed.convert.as_deref() {
            None => {}
            Some("todo_to_plan") => arguments = todo_to_plan(&arguments)?,
            Some(other) => {
                return Err(Error::Spec(format!(
                    "tools/{}.json renamed.{former}.convert names unknown conversion `{other}`",
                    tool.name
                )));
            }
        }
    }
    let purpose = if tool.purpose {
        let name = purpose_arg(spec)
            .map(|p| p.name)
            .unwrap_or_else(|_| "purpose".into());
        arguments
            .as_object_mut()
            .and_then(|m| m.remove(&name))
            .and_then(|v| v.as_str().map(str::to_owned))
    } else {
        None
    };
    Ok(ResolvedCall {
        tool,
        call: ToolCall {
            id: call.id.clone(),
            name: tool.name.clone(),
            arguments,
        },
        former,
        purpose,
    })
}

/// What a session was offered, kept for resolving its calls.
#[derive(Debug, Clone)]
pub struct Offering<'s> {
    spec: &'s Spec,
    /// The context it was made for.
    pub context: OfferContext,
    /// The tools, as sent (the loader among them while some tool is deferred).
    pub tools: Vec<OfferedTool<'s>>,
    /// The deferred tools not loaded: offered (a call resolves) but not sent whole.
    pub deferred: Vec<OfferedTool<'s>>,
    /// Deferred tools from outside the spec (an embedder's, an MCP server's) not loaded: their
    /// names and one-line summaries, listed by the loader after the spec's.
    pub outside: Vec<(String, String)>,
}

impl<'s> Offering<'s> {
    /// Makes the offering for a context.
    pub fn new(spec: &'s Spec, context: OfferContext) -> Result<Self> {
        let (deferred, tools) = offer(spec, &context)?
            .into_iter()
            .partition(|t| is_deferred(t.tool, &context));
        let mut o = Offering {
            spec,
            context,
            tools,
            deferred,
            outside: Vec::new(),
        };
        o.add_loader()?;
        Ok(o)
    }

    /// Keeps only the tools `keep` says (sent and deferred alike); the loader lists the deferred
    /// ones left, and goes when none is.
    pub fn retain(&mut self, keep: impl Fn(&OfferedTool<'s>) -> bool) -> Result<()> {
        self.tools.retain(|t| t.name != LOADER && keep(t));
        self.deferred.retain(|t| keep(t));
        self.add_loader()
    }

    /// Defers tools from outside the spec (name, one-line summary) behind the loader, those
    /// the model has not loaded yet; the caller sends the others whole.
    pub fn defer_outside(&mut self, tools: Vec<(String, String)>) -> Result<()> {
        self.outside = tools
            .into_iter()
            .filter(|(name, _)| !self.context.loaded.contains(name))
            .collect();
        self.add_loader()
    }

    /// Sends the loader, listing the deferred tools, when there is one (and it is offered).
    fn add_loader(&mut self) -> Result<()> {
        self.tools.retain(|t| t.name != LOADER);
        if self.deferred.is_empty() && self.outside.is_empty() {
            return Ok(());
        }
        let Some(loader) = self.spec.tool(LOADER) else {
            return Ok(());
        };
        let mut cx = self.context.clone();
        if !(loader.scope.includes(cx.project) && cx.kind.admits(loader.sessions)) {
            return Ok(());
        }
        let mut lines = deferred_lines(&self.deferred);
        for (name, summary) in &self.outside {
            if !lines.is_empty() {
                lines.push('\n');
            }
            lines.push_str(&format!("- {name}: {summary}"));
        }
        cx.values.insert(DEFERRED_TOOLS.to_owned(), lines);
        let prepared = prepare(self.spec, loader, &cx)?;
        let at = self
            .tools
            .iter()
            .position(|t| t.name.as_str() > LOADER)
            .unwrap_or(self.tools.len());
        self.tools.insert(at, prepared);
        Ok(())
    }

    /// The offered tools' names: those sent and those deferred (each can be called).
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .tools
            .iter()
            .chain(&self.deferred)
            .map(|t| t.name.as_str())
            .collect();
        names.sort_unstable();
        names
    }

    /// Whether a tool (by its own name) is offered, sent or deferred.
    pub fn offers(&self, name: &str) -> bool {
        self.find(name).is_some()
    }

    fn find(&self, name: &str) -> Option<&OfferedTool<'s>> {
        self.tools
            .iter()
            .chain(&self.deferred)
            .find(|t| t.name == name)
    }

    /// Whether a tool is deferred (offered by one line under the loader, not loaded).
    pub fn is_deferred(&self, name: &str) -> bool {
        self.deferred.iter().any(|t| t.name == name) || self.outside.iter().any(|(n, _)| n == name)
    }

    /// A call of the loader: the deferred tools it names (by name or former name) to load,
    /// and the answer. A name that is not a deferred tool of this offering is said in the answer
    /// (already sent, or not offered), and an empty list is an error.
    pub fn load(&self, call: &ToolCall) -> (Vec<String>, ToolLoad) {
        let asked: Vec<String> = call
            .arguments
            .get("names")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let mut load = Vec::new();
        let mut sent = Vec::new();
        let mut unknown = Vec::new();
        for name in &asked {
            let own = self
                .spec
                .tool_by_any_name(self.context.project, name)
                .map(|t| t.name.clone())
                .unwrap_or_else(|| name.clone());
            if self.is_deferred(&own) {
                if !load.contains(&own) {
                    load.push(own);
                }
            } else if self.tools.iter().any(|t| t.name == own) {
                sent.push(own);
            } else {
                unknown.push(name.clone());
            }
        }
        let answer = ToolLoad {
            loaded: load.clone(),
            sent,
            unknown,
        };
        (load, answer)
    }

    /// Resolves a call against this offering: a tool not offered is unknown here, even if the
    /// spec has it; a deferred tool resolves as a sent one.
    pub fn resolve(&self, call: &ToolCall) -> Result<ResolvedCall<'s>> {
        let r = resolve_call(self.spec, self.context.project, call)?;
        if !self.offers(&r.tool.name) {
            return Err(Error::UnknownTool(call.name.clone()));
        }
        Ok(r)
    }

    /// Resolves a call as [`Offering::resolve`] does and checks its arguments (converted from a
    /// former name, `purpose` still in) against the tool as offered; a call that does not fit
    /// is an [`Error::Arguments`] whose reason lists every problem, to answer the model with.
    pub fn check(&self, call: &ToolCall) -> Result<ResolvedCall<'s>> {
        let r = self.resolve(call)?;
        let offered = self
            .find(&r.tool.name)
            .ok_or_else(|| Error::UnknownTool(call.name.clone()))?;
        let mut full = r.call.arguments.clone();
        if let (Some(p), Value::Object(m)) = (&r.purpose, &mut full) {
            let name = purpose_arg(self.spec)
                .map(|a| a.name)
                .unwrap_or_else(|_| "purpose".into());
            m.insert(name, Value::String(p.clone()));
        }
        offered
            .check_arguments(&full)
            .map_err(|reason| Error::Arguments {
                tool: r.tool.name.clone(),
                reason: format!("invalid arguments:\n{reason}"),
            })?;
        Ok(r)
    }

    /// What a call of `tool` answers instead of running when one of its requirements does not
    /// hold any more (the tool's `unavailable` text, word for word); `None` when it can run.
    pub fn unavailable_now(&self, tool: &str, holds: &Holds) -> Option<&'s str> {
        let t = self.find(tool)?.tool;
        unavailable(t, holds)
    }
}

/// The lines of the loader's `{{deferred_tools}}`: `- NAME: SUMMARY`, one per tool.
pub fn deferred_lines(deferred: &[OfferedTool<'_>]) -> String {
    deferred
        .iter()
        .map(|t| {
            format!(
                "- {}: {}",
                t.name,
                t.tool.summary.as_deref().unwrap_or("(no summary)")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a call of the loader did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolLoad {
    /// The tools loaded: sent whole from the next request on.
    pub loaded: Vec<String>,
    /// Named tools that were already sent whole.
    pub sent: Vec<String>,
    /// Named tools this session is not offered.
    pub unknown: Vec<String>,
}

impl ToolLoad {
    /// The answer to the model, and whether it is an error (nothing could be loaded or was
    /// already there).
    pub fn answer(&self) -> (String, bool) {
        let mut lines = Vec::new();
        if !self.loaded.is_empty() {
            lines.push(format!(
                "Loaded {}: callable with their full parameters from your next step on.",
                self.loaded.join(", ")
            ));
        }
        if !self.sent.is_empty() {
            lines.push(format!("Already loaded: {}.", self.sent.join(", ")));
        }
        if !self.unknown.is_empty() {
            lines.push(format!(
                "Not tools of this session: {}. Load only tools listed in `{LOADER}`.",
                self.unknown.join(", ")
            ));
        }
        if lines.is_empty() {
            lines.push(format!(
                "`names` is empty: name the tools to load, as `{LOADER}` lists them."
            ));
        }
        let error = self.loaded.is_empty() && self.sent.is_empty();
        (lines.join("\n"), error)
    }
}
