//! The typed form of `spec/permission/*.json`, and the parts compiled from it.

use std::collections::{BTreeMap, HashMap, HashSet};

use globset::{GlobSet, GlobSetBuilder};
use regex::Regex;
use serde::Deserialize;

use crate::error::{Error, Result};

/// What a rule or a mode does with a call.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Run it.
    Allow,
    /// Put it to the person.
    Ask,
    /// Refuse it.
    Deny,
}

impl Action {
    /// The action's name (`allow`, `ask`, `deny`).
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Allow => "allow",
            Action::Ask => "ask",
            Action::Deny => "deny",
        }
    }
}

impl std::str::FromStr for Action {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "allow" => Ok(Action::Allow),
            "ask" => Ok(Action::Ask),
            "deny" => Ok(Action::Deny),
            other => Err(Error::UnknownAction(other.to_owned())),
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct Limits {
    pub max_chars: usize,
    pub max_depth: usize,
    pub max_parts: usize,
    pub reason: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Step {
    pub step: String,
    pub examples: Vec<(String, String)>,
}

#[derive(Debug, Deserialize, Default)]
pub(crate) struct Wrapper {
    pub name: String,
    #[serde(default)]
    pub value_options: Vec<String>,
    #[serde(default)]
    pub no_command: Vec<String>,
    #[serde(default)]
    pub split_options: Vec<String>,
    #[serde(default)]
    pub assignments: bool,
    #[serde(default)]
    pub positionals: usize,
    #[serde(default)]
    pub joins: bool,
    #[serde(default)]
    pub stdin_operands: bool,
    /// Options that set a replace string (`-I R`, `-iR`, `--replace[=R]`; `{}` when none given).
    #[serde(default)]
    pub replace_options: Vec<String>,
    /// When given, every option of the wrapper is one of these, `value_options`, `no_command`
    /// or `split_options`; any other makes the command it runs uncertain (asked).
    #[serde(default)]
    pub flags: Option<Vec<String>>,
}

/// How awk-like programs run commands and write files.
#[derive(Debug, Deserialize, Default)]
pub(crate) struct RawAwk {
    pub programs: Vec<String>,
    pub value_options: Vec<String>,
    pub program_options: Vec<String>,
    pub runs: String,
    pub writes: String,
    pub dynamic: String,
}

#[derive(Debug)]
pub(crate) struct Awk {
    pub programs: HashSet<String>,
    pub value_options: Vec<String>,
    pub program_options: Vec<String>,
    pub runs: Regex,
    pub writes: Regex,
    pub dynamic: Regex,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Condition {
    Operand(String),
    Redirect(String),
    Flag(Vec<String>),
    Subcommand(Vec<String>),
    LastArg(Vec<String>),
    OnlyFlags(Vec<String>),
    ArgRegex(String),
    AnyWordRegex(String),
    Finding(String),
    Not(Box<Condition>),
}

#[derive(Debug, Deserialize)]
pub(crate) struct RawRule {
    pub id: String,
    pub reason: String,
    pub programs: Vec<String>,
    #[serde(default)]
    pub also_programs: Vec<String>,
    pub when: Vec<Condition>,
    pub must_match: Vec<String>,
    pub must_not_match: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct RawProtected {
    pub reason: String,
    pub paths: Vec<String>,
    #[serde(default)]
    pub except: Vec<String>,
    pub write: Action,
    pub read: Action,
}

#[derive(Debug, Deserialize)]
pub(crate) struct PathExample {
    pub path: String,
    pub write: Option<Action>,
    pub read: Option<Action>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Hardline {
    pub limits: Limits,
    pub unparseable: String,
    pub unknown_program: String,
    pub normalise: Vec<Step>,
    pub wrappers: Vec<Wrapper>,
    pub shells: Vec<String>,
    pub interpreters: BTreeMap<String, Vec<String>>,
    pub exec_calls: String,
    pub delete_calls: String,
    pub raw_devices: String,
    pub system_dirs: Vec<String>,
    pub floor: Vec<RawRule>,
    pub caution: Vec<RawRule>,
    pub protected_paths: Vec<RawProtected>,
    pub path_examples: Vec<PathExample>,
    pub privileged: Vec<String>,
    pub command_options: BTreeMap<String, Vec<String>>,
    pub command_variables: Vec<String>,
    pub git_config_commands: String,
    pub awk: RawAwk,
    pub program_commands: Vec<RawProgramCommands>,
    pub config_options: Vec<RawConfigOptions>,
    pub git_command_options: Vec<GitCommandOptions>,
    pub output_options: BTreeMap<String, Vec<String>>,
    pub listings: Listings,
    pub streams: Streams,
    pub expansions: RawExpansions,
    pub name_operands: BTreeMap<String, Vec<String>>,
}

/// A program's own command language (a pager's `+cmd`, an editor's `-c cmd`).
#[derive(Debug, Deserialize)]
pub(crate) struct RawProgramCommands {
    pub programs: Vec<String>,
    #[serde(default)]
    pub options: Vec<String>,
    #[serde(default)]
    pub plus: bool,
    pub escape: String,
    pub safe: String,
}

#[derive(Debug)]
pub(crate) struct ProgramCommands {
    pub options: Vec<String>,
    pub plus: bool,
    pub escape: Regex,
    pub safe: Regex,
}

/// Options that set a named setting, some of whose settings are commands (`ssh -o ProxyCommand=`).
#[derive(Debug, Deserialize)]
pub(crate) struct RawConfigOptions {
    pub programs: Vec<String>,
    pub options: Vec<String>,
    pub keys: String,
}

#[derive(Debug)]
pub(crate) struct ConfigOptions {
    pub options: Vec<String>,
    pub keys: Regex,
}

/// git subcommands' options whose value is a command (`grep -O`, `fetch --upload-pack`).
#[derive(Debug, Deserialize, Clone)]
pub(crate) struct GitCommandOptions {
    pub subcommands: Vec<String>,
    #[serde(default)]
    pub options: Vec<String>,
    #[serde(default)]
    pub attached: Vec<String>,
    #[serde(default)]
    pub rest: bool,
}

/// Commands whose output lists paths, and the commands that pass a listing on.
#[derive(Debug, Deserialize)]
pub(crate) struct Listings {
    pub producers: BTreeMap<String, String>,
    pub filters: Vec<String>,
}

/// Programs whose output is a download, and programs that decode what they are fed.
#[derive(Debug, Deserialize)]
pub(crate) struct Streams {
    pub fetchers: HashSet<String>,
    pub decoders: HashSet<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct RawExpansions {
    pub runs: String,
    pub unknown: String,
}

#[derive(Debug)]
pub(crate) struct Expansions {
    pub runs: Regex,
    pub unknown: Regex,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ArityEntry {
    pub prefix: String,
    pub arity: usize,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ArityFile {
    pub default_arity: usize,
    pub entries: Vec<ArityEntry>,
    pub never: Vec<String>,
    pub examples: Vec<(String, Option<String>)>,
}

/// One permission rule: which tool (a name, a former name or a permission key; `*` for all),
/// which pattern of what the call touches, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct Rule {
    /// The tool, former name or permission key the rule is written for (`*`: every tool).
    #[serde(alias = "permission")]
    pub tool: String,
    /// The pattern (`*` anything; a trailing ` *` also matches nothing).
    pub pattern: String,
    /// What to do with a call the rule matches.
    pub action: Action,
}

impl Rule {
    /// A rule from its three parts.
    pub fn new(tool: impl Into<String>, pattern: impl Into<String>, action: Action) -> Rule {
        Rule {
            tool: tool.into(),
            pattern: pattern.into(),
            action,
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct Defaults {
    pub keys: HashMap<String, String>,
    pub key_aliases: HashMap<String, String>,
    pub rules: Vec<Rule>,
}

#[derive(Debug, Deserialize, Clone, Copy)]
pub(crate) struct RiskActions {
    pub read: Action,
    pub write: Action,
    pub execute: Action,
    pub interact: Action,
}

#[derive(Debug, Deserialize, Clone, Copy)]
pub(crate) struct Outside {
    pub read: Action,
    pub write: Action,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ModeEntry {
    pub risks: RiskActions,
    pub outside_workspace: Outside,
    pub allow_keys: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ReadCommand {
    pub name: String,
    pub paths: String,
    #[serde(default)]
    pub unless: Vec<String>,
    #[serde(default)]
    pub only: Option<String>,
    #[serde(default)]
    pub max_operands: Option<usize>,
    /// Short options whose value is attached (`-Iseconds`): such a word is not a flag group.
    #[serde(default)]
    pub attached: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct BashRead {
    pub commands: Vec<ReadCommand>,
    pub git_read: Vec<String>,
    pub git_unless: Vec<String>,
    pub quiet_targets: Vec<String>,
    pub git_read_pairs: Vec<String>,
    pub safe_assignments: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Modes {
    pub modes: BTreeMap<String, ModeEntry>,
    pub bash_read: BashRead,
}

/// A compiled floor or caution rule.
#[derive(Debug)]
pub(crate) struct FloorRule {
    pub id: String,
    pub reason: String,
    pub programs: Vec<String>,
    pub also_programs: Vec<String>,
    pub when: Vec<Compiled>,
    pub must_match: Vec<String>,
    pub must_not_match: Vec<String>,
}

#[derive(Debug)]
pub(crate) enum Compiled {
    Operand(String),
    Redirect(String),
    Flag(Vec<String>),
    Subcommand(Vec<String>),
    LastArg(Vec<String>),
    OnlyFlags(Vec<String>),
    ArgRegex(Regex),
    AnyWordRegex(Regex),
    Finding(String),
    Not(Box<Compiled>),
}

/// Protected paths compiled for matching without knowing home or workspace in advance.
#[derive(Debug)]
pub(crate) struct Protected {
    pub reason: String,
    pub absolute: GlobSet,
    pub home: GlobSet,
    pub workspace: GlobSet,
    pub except_absolute: GlobSet,
    pub except_home: GlobSet,
    pub write: Action,
    pub read: Action,
}

/// Everything the engine reads from the spec, compiled.
#[derive(Debug)]
pub(crate) struct Data {
    pub limits: Limits,
    pub unparseable: String,
    pub unknown_program: String,
    pub steps: Vec<Step>,
    pub wrappers: HashMap<String, Wrapper>,
    pub shells: HashSet<String>,
    pub interpreters: BTreeMap<String, Vec<String>>,
    pub exec_calls: Regex,
    pub delete_calls: Regex,
    pub raw_devices: Regex,
    pub system_dirs: Vec<String>,
    pub floor: Vec<FloorRule>,
    pub caution: Vec<FloorRule>,
    pub protected: Vec<Protected>,
    pub arity: HashMap<String, usize>,
    pub default_arity: usize,
    pub never: HashSet<String>,
    pub keys: HashMap<String, String>,
    pub key_aliases: HashMap<String, String>,
    pub defaults: Vec<Rule>,
    pub modes: BTreeMap<String, ModeEntry>,
    pub reads: HashMap<String, ReadCommand>,
    pub git_read: HashSet<String>,
    pub git_unless: Vec<String>,
    pub quiet_targets: HashSet<String>,
    pub path_examples: Vec<PathExample>,
    pub privileged: HashSet<String>,
    pub command_options: BTreeMap<String, Vec<String>>,
    pub command_variables: Vec<String>,
    pub git_config_commands: Regex,
    pub awk: Awk,
    pub program_commands: HashMap<String, ProgramCommands>,
    pub config_options: HashMap<String, ConfigOptions>,
    pub git_command_options: Vec<GitCommandOptions>,
    pub output_options: BTreeMap<String, Vec<String>>,
    pub listings: Listings,
    pub streams: Streams,
    pub expansions: Expansions,
    pub name_operands: BTreeMap<String, Vec<String>>,
    pub git_read_pairs: Vec<String>,
    pub safe_assignments: Vec<String>,
    pub arity_examples: Vec<(String, Option<String>)>,
}

fn regex(file: &'static str, what: &str, src: &str) -> Result<Regex> {
    Regex::new(src).map_err(|e| Error::Data {
        file,
        message: format!("{what}: bad regex: {e}"),
    })
}

fn compile_condition(c: &Condition) -> Result<Compiled> {
    Ok(match c {
        Condition::Operand(p) => Compiled::Operand(p.clone()),
        Condition::Redirect(p) => Compiled::Redirect(p.clone()),
        Condition::Flag(f) => Compiled::Flag(f.clone()),
        Condition::Subcommand(s) => Compiled::Subcommand(s.clone()),
        Condition::LastArg(s) => Compiled::LastArg(s.clone()),
        Condition::OnlyFlags(s) => Compiled::OnlyFlags(s.clone()),
        Condition::ArgRegex(r) => Compiled::ArgRegex(regex("hardline.json", "arg_regex", r)?),
        Condition::AnyWordRegex(r) => {
            Compiled::AnyWordRegex(regex("hardline.json", "any_word_regex", r)?)
        }
        Condition::Finding(f) => Compiled::Finding(f.clone()),
        Condition::Not(inner) => Compiled::Not(Box::new(compile_condition(inner)?)),
    })
}

fn compile_rules(raw: &[RawRule]) -> Result<Vec<FloorRule>> {
    raw.iter()
        .map(|r| {
            Ok(FloorRule {
                id: r.id.clone(),
                reason: r.reason.clone(),
                programs: r.programs.clone(),
                also_programs: r.also_programs.clone(),
                when: r
                    .when
                    .iter()
                    .map(compile_condition)
                    .collect::<Result<_>>()?,
                must_match: r.must_match.clone(),
                must_not_match: r.must_not_match.clone(),
            })
        })
        .collect()
}

fn globset(patterns: &[&str]) -> Result<GlobSet> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        let g = globset::GlobBuilder::new(p)
            .literal_separator(true)
            .build()
            .map_err(|e| Error::Data {
                file: "hardline.json",
                message: format!("path `{p}`: {e}"),
            })?;
        b.add(g);
    }
    b.build().map_err(|e| Error::Data {
        file: "hardline.json",
        message: e.to_string(),
    })
}

fn split_paths(paths: &[String]) -> (Vec<&str>, Vec<&str>, Vec<&str>) {
    let (mut abs, mut home, mut ws) = (Vec::new(), Vec::new(), Vec::new());
    for p in paths {
        if let Some(rest) = p.strip_prefix("~/") {
            home.push(rest);
        } else if p == "~" {
            home.push("");
        } else if let Some(rest) = p.strip_prefix("{workspace}/") {
            ws.push(rest);
        } else if let Some(rest) = p.strip_prefix('/') {
            abs.push(rest);
        } else {
            abs.push(p.as_str());
        }
    }
    (abs, home, ws)
}

impl Data {
    pub(crate) fn load(spec: &harness_spec::Spec) -> Result<Data> {
        let parse = |file: &'static str| -> Result<serde_json::Value> {
            spec.json(&format!("permission/{file}"))
                .cloned()
                .ok_or(Error::Data {
                    file,
                    message: "missing".into(),
                })
        };
        let de = |file: &'static str, v: serde_json::Value| Error::Data {
            file,
            message: v.to_string(),
        };
        let hard: Hardline = serde_json::from_value(parse("hardline.json")?)
            .map_err(|e| de("hardline.json", e.to_string().into()))?;
        let arity: ArityFile = serde_json::from_value(parse("arity.json")?)
            .map_err(|e| de("arity.json", e.to_string().into()))?;
        let defaults: Defaults = serde_json::from_value(parse("defaults.json")?)
            .map_err(|e| de("defaults.json", e.to_string().into()))?;
        let modes: Modes = serde_json::from_value(parse("modes.json")?)
            .map_err(|e| de("modes.json", e.to_string().into()))?;
        for m in ["manual", "edit", "auto", "plan"] {
            if !modes.modes.contains_key(m) {
                return Err(Error::Data {
                    file: "modes.json",
                    message: format!("mode `{m}` is missing"),
                });
            }
        }
        let mut protected = Vec::new();
        for p in &hard.protected_paths {
            let (abs, home, ws) = split_paths(&p.paths);
            let (eabs, ehome, _) = split_paths(&p.except);
            protected.push(Protected {
                reason: p.reason.clone(),
                absolute: globset(&abs)?,
                home: globset(&home)?,
                workspace: globset(&ws)?,
                except_absolute: globset(&eabs)?,
                except_home: globset(&ehome)?,
                write: p.write,
                read: p.read,
            });
        }
        let mut program_commands = HashMap::new();
        for pc in &hard.program_commands {
            for p in &pc.programs {
                program_commands.insert(
                    p.clone(),
                    ProgramCommands {
                        options: pc.options.clone(),
                        plus: pc.plus,
                        escape: regex("hardline.json", "program_commands.escape", &pc.escape)?,
                        safe: regex("hardline.json", "program_commands.safe", &pc.safe)?,
                    },
                );
            }
        }
        let mut config_options = HashMap::new();
        for co in &hard.config_options {
            for p in &co.programs {
                config_options.insert(
                    p.clone(),
                    ConfigOptions {
                        options: co.options.clone(),
                        keys: regex("hardline.json", "config_options.keys", &co.keys)?,
                    },
                );
            }
        }
        let expansions = Expansions {
            runs: regex("hardline.json", "expansions.runs", &hard.expansions.runs)?,
            unknown: regex(
                "hardline.json",
                "expansions.unknown",
                &hard.expansions.unknown,
            )?,
        };
        let data = Data {
            program_commands,
            config_options,
            git_command_options: hard.git_command_options,
            output_options: hard.output_options,
            listings: hard.listings,
            streams: hard.streams,
            expansions,
            name_operands: hard.name_operands,
            unparseable: hard.unparseable.clone(),
            unknown_program: hard.unknown_program.clone(),
            wrappers: hard
                .wrappers
                .into_iter()
                .map(|w| (w.name.clone(), w))
                .collect(),
            shells: hard.shells.into_iter().collect(),
            interpreters: hard.interpreters,
            exec_calls: regex("hardline.json", "exec_calls", &hard.exec_calls)?,
            delete_calls: regex("hardline.json", "delete_calls", &hard.delete_calls)?,
            raw_devices: regex("hardline.json", "raw_devices", &hard.raw_devices)?,
            system_dirs: hard.system_dirs,
            floor: compile_rules(&hard.floor)?,
            caution: compile_rules(&hard.caution)?,
            protected,
            arity: arity
                .entries
                .iter()
                .map(|e| (e.prefix.clone(), e.arity))
                .collect(),
            default_arity: arity.default_arity,
            never: arity.never.iter().cloned().collect(),
            keys: defaults.keys,
            key_aliases: defaults.key_aliases,
            defaults: defaults.rules,
            modes: modes.modes,
            reads: modes
                .bash_read
                .commands
                .into_iter()
                .map(|c| (c.name.clone(), c))
                .collect(),
            git_read: modes.bash_read.git_read.into_iter().collect(),
            git_unless: modes.bash_read.git_unless,
            quiet_targets: modes.bash_read.quiet_targets.into_iter().collect(),
            path_examples: hard.path_examples,
            privileged: hard.privileged.into_iter().collect(),
            command_options: hard.command_options,
            command_variables: hard.command_variables,
            git_config_commands: regex(
                "hardline.json",
                "git_config_commands",
                &hard.git_config_commands,
            )?,
            awk: Awk {
                programs: hard.awk.programs.into_iter().collect(),
                value_options: hard.awk.value_options,
                program_options: hard.awk.program_options,
                runs: regex("hardline.json", "awk.runs", &hard.awk.runs)?,
                writes: regex("hardline.json", "awk.writes", &hard.awk.writes)?,
                dynamic: regex("hardline.json", "awk.dynamic", &hard.awk.dynamic)?,
            },
            git_read_pairs: modes.bash_read.git_read_pairs,
            safe_assignments: modes.bash_read.safe_assignments,
            arity_examples: arity.examples,
            limits: hard.limits,
            steps: hard.normalise,
        };
        Ok(data)
    }

    /// Whether a normalised program name is a wrapper.
    pub(crate) fn wrapper(&self, name: &str) -> Option<&Wrapper> {
        self.wrappers.get(name)
    }
}
