//! `harness-permission`: whether a tool call may run.
//!
//! A call goes in — the tool, its arguments, the mode, the workspace root and current
//! directory, the configured rules and the session's "always" approvals — and a [`Decision`]
//! comes out: allow, ask (with the exact pattern an "always" answer would save) or deny (with the
//! floor rule or rule that refused it, in words a person understands).
//!
//! Everything it decides by is data in `spec/permission/`: the floor (`hardline.json`: commands
//! refused in every mode, cautions asked in every mode, protected paths, and the normalisation
//! that spells a command plainly before it is checked again), the arity table (`arity.json`), the
//! default rules (`defaults.json`) and the four modes (`modes.json`). A bash command is read as a
//! shell reads it, with tree-sitter-bash: every command of a list, pipeline, subshell,
//! substitution, heredoc fed to a shell and `-c` payload is checked, wrappers are peeled, and the
//! strictest answer wins. Unreadable or over-long commands are refused.
//!
//! ```
//! use harness_permission::{Action, Engine, Request};
//! use harness_core::protocol::Mode;
//!
//! let engine = Engine::new(harness_spec::Spec::embedded()).unwrap();
//! let args = serde_json::json!({"command": "git commit -m 'wip'"});
//! let d = engine.decide(&Request::bash(&args, Mode::Manual));
//! assert_eq!(d.action, Action::Ask);
//! assert_eq!(d.always, ["git commit *"]);
//! ```

// A library says nothing on stdout or stderr of its own: it returns what happened.

mod arity;
pub mod conformance;
mod data;
mod error;
mod floor;
mod normalise;
pub mod paths;
mod reads;
pub mod sandbox;
mod shell;
mod tools;
pub mod wildcard;

use harness_core::protocol::Mode;
use harness_spec::Spec;
use serde_json::Value;

pub use data::{Action, Rule};
pub use error::{Error, Result};

use data::Data;
use floor::Place;
use reads::{sources, unless_hit};
use shell::{Analysis, Part};

/// The default home directory and workspace the conformance format assumes.
pub const DEFAULT_HOME: &str = "/home/user";
/// The default workspace root (and current directory) of the conformance format.
pub const DEFAULT_WORKSPACE: &str = "/home/user/project";

/// One call to decide on.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The tool's name as called (a former name works).
    pub tool: &'a str,
    /// The call's arguments (`{"command": ...}` for bash).
    pub args: &'a Value,
    /// The session's mode.
    pub mode: Mode,
    /// The workspace root (absolute).
    pub workspace_root: &'a str,
    /// The current directory (absolute).
    pub cwd: &'a str,
    /// The home directory (absolute).
    pub home: &'a str,
    /// Configured rules, on top of the defaults.
    pub rules: &'a [Rule],
    /// The session's "always" approvals.
    pub approvals: &'a [Rule],
}

impl<'a> Request<'a> {
    /// A bash call in the default places (`/home/user/project`, home `/home/user`), no rules.
    pub fn bash(args: &'a Value, mode: Mode) -> Request<'a> {
        Request::tool("bash", args, mode)
    }

    /// A call of any tool in the default places, no rules.
    pub fn tool(tool: &'a str, args: &'a Value, mode: Mode) -> Request<'a> {
        Request {
            tool,
            args,
            mode,
            workspace_root: DEFAULT_WORKSPACE,
            cwd: DEFAULT_WORKSPACE,
            home: DEFAULT_HOME,
            rules: &[],
            approvals: &[],
        }
    }
}

/// What to do with a call, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Decision {
    /// Allow, ask or deny.
    pub action: Action,
    /// Why, in words a person understands.
    pub reason: String,
    /// The floor rule, caution or configured rule that decided, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// When asking: the patterns an "always" answer saves, one per asking part of a chained
    /// command; empty when "always" is not offered.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub always: Vec<String>,
}

impl Decision {
    fn new(action: Action, reason: impl Into<String>) -> Decision {
        Decision {
            action,
            reason: reason.into(),
            rule: None,
            always: Vec::new(),
        }
    }
    fn rule(mut self, rule: impl Into<String>) -> Decision {
        self.rule = Some(rule.into());
        self
    }
    fn always(mut self, always: Option<String>) -> Decision {
        self.always = always.into_iter().collect();
        self
    }
}

/// The permission engine, built once from the spec.
#[derive(Debug)]
pub struct Engine {
    data: Data,
    spec: &'static Spec,
}

/// What the floor says about a part before rules and modes.
struct Facts {
    deny: Option<(String, String)>,
    ask: Option<(String, String)>,
    read: bool,
    outside: bool,
    always: Option<String>,
}

impl Engine {
    /// Builds the engine from the spec's permission files and checks every rule's own examples.
    pub fn new(spec: &'static Spec) -> Result<Engine> {
        let data = Data::load(spec)?;
        let engine = Engine { data, spec };
        engine.check_examples()?;
        Ok(engine)
    }

    fn check_examples(&self) -> Result<()> {
        for step in &self.data.steps {
            if !normalise::known(&step.step) {
                return Err(Error::Data {
                    file: "hardline.json",
                    message: format!("unknown normalisation step `{}`", step.step),
                });
            }
            for (input, want) in &step.examples {
                let got = normalise::apply(&step.step, input);
                if &got != want {
                    return Err(Error::Example {
                        file: "hardline.json",
                        rule: step.step.clone(),
                        message: format!("{input:?} became {got:?}, not {want:?}"),
                    });
                }
            }
        }
        let mut wrong = Vec::new();
        for r in self.data.floor.iter().chain(&self.data.caution) {
            for cmd in &r.must_match {
                if !self.rule_hits(cmd).contains(&r.id) {
                    wrong.push(format!("`{}` must match `{cmd}` but does not", r.id));
                }
            }
            for cmd in &r.must_not_match {
                if self.rule_hits(cmd).contains(&r.id) {
                    wrong.push(format!("`{}` must not match `{cmd}` but does", r.id));
                }
            }
        }
        if !wrong.is_empty() {
            return Err(Error::Example {
                file: "hardline.json",
                rule: "floor and caution".into(),
                message: wrong.join("; "),
            });
        }
        let place = Place {
            home: DEFAULT_HOME,
            workspace: DEFAULT_WORKSPACE,
        };
        for ex in &self.data.path_examples {
            for (write, want) in [(true, ex.write), (false, ex.read)] {
                let Some(want) = want else { continue };
                let got = self
                    .data
                    .protected(&ex.path, write, &place)
                    .map(|(a, _)| a)
                    .unwrap_or(Action::Allow);
                if got != want {
                    return Err(Error::Example {
                        file: "hardline.json",
                        rule: "path_examples".into(),
                        message: format!(
                            "{} {} is {}, not {}",
                            if write { "writing" } else { "reading" },
                            ex.path,
                            got.as_str(),
                            want.as_str()
                        ),
                    });
                }
            }
        }
        for (cmd, want) in &self.data.arity_examples {
            let got = self.always_for(cmd);
            if &got != want {
                return Err(Error::Example {
                    file: "arity.json",
                    rule: cmd.clone(),
                    message: format!("the pattern is {got:?}, not {want:?}"),
                });
            }
        }
        Ok(())
    }

    /// The ids of the floor and caution rules a command hits (in the default places), for
    /// tests and the rules' own examples.
    pub fn rule_hits(&self, command: &str) -> Vec<String> {
        let place = Place {
            home: DEFAULT_HOME,
            workspace: DEFAULT_WORKSPACE,
        };
        let mut out = Vec::new();
        for a in self.variants(command, DEFAULT_WORKSPACE, &place) {
            for part in &a.parts {
                for r in self
                    .data
                    .hits(&self.data.floor, part, &place)
                    .into_iter()
                    .chain(self.data.hits(&self.data.caution, part, &place))
                {
                    if !out.contains(&r.id) {
                        out.push(r.id.clone());
                    }
                }
            }
        }
        out
    }

    /// The "always" pattern a single command would be offered, as `decide` computes it.
    pub fn always_for(&self, command: &str) -> Option<String> {
        let place = Place {
            home: DEFAULT_HOME,
            workspace: DEFAULT_WORKSPACE,
        };
        let a = shell::analyse(
            &self.data,
            command,
            DEFAULT_WORKSPACE,
            DEFAULT_HOME,
            DEFAULT_WORKSPACE,
        );
        let part = a.parts.last()?;
        self.facts(part, &place).always
    }

    fn variants(&self, command: &str, cwd: &str, place: &Place<'_>) -> Vec<Analysis> {
        let raw = shell::analyse(&self.data, command, cwd, place.home, place.workspace);
        let plain = normalise::plain(&self.data.steps, command);
        let mut out = vec![];
        if plain != command && !raw.too_big {
            out.push(shell::analyse(
                &self.data,
                &plain,
                cwd,
                place.home,
                place.workspace,
            ));
        }
        // as `bash -c` would get it: an execve argument ends at its first NUL
        if let Some(nul) = command.find('\0')
            && !raw.too_big
        {
            let cut = &command[..nul];
            out.push(shell::analyse(
                &self.data,
                cut,
                cwd,
                place.home,
                place.workspace,
            ));
            let plain_cut = normalise::plain(&self.data.steps, cut);
            if plain_cut != cut {
                out.push(shell::analyse(
                    &self.data,
                    &plain_cut,
                    cwd,
                    place.home,
                    place.workspace,
                ));
            }
        }
        out.insert(0, raw);
        out
    }

    /// Decides one call.
    pub fn decide(&self, req: &Request<'_>) -> Decision {
        let place = Place {
            home: req.home,
            workspace: req.workspace_root,
        };
        if req.tool == "bash" || self.key_of(req.tool).as_deref() == Some("bash") {
            let Some(command) = req.args.get("command").and_then(Value::as_str) else {
                return Decision::new(Action::Deny, "a bash call needs a `command` string");
            };
            let cwd = req
                .args
                .get("cwd")
                .or_else(|| req.args.get("workdir"))
                .and_then(Value::as_str)
                .map(|d| paths::resolve(req.cwd, d))
                .unwrap_or_else(|| req.cwd.to_owned());
            return self.bash(req, command, &cwd, &place);
        }
        self.tool_call(req, &place)
    }

    fn key_of(&self, name: &str) -> Option<String> {
        let tool = self.find_tool(name)?;
        Some(
            self.data
                .keys
                .get(&tool.name)
                .cloned()
                .unwrap_or_else(|| tool.name.clone()),
        )
    }

    fn find_tool(&self, name: &str) -> Option<&'static harness_spec::Tool> {
        self.spec.tool(name).or_else(|| {
            self.spec
                .tools()
                .iter()
                .find(|t| t.aliases.values().any(|a| a.iter().any(|x| x == name)))
        })
    }

    /// Whether a rule's `tool` reaches a call of `tool` (canonical name) with permission `key`.
    fn rule_reaches(&self, rule_tool: &str, tool: &str, key: &str) -> bool {
        if rule_tool == "*" || rule_tool == tool || rule_tool == key {
            return true;
        }
        if self
            .data
            .key_aliases
            .get(rule_tool)
            .is_some_and(|k| k == key || k == tool)
        {
            return true;
        }
        self.find_tool(rule_tool).is_some_and(|t| t.name == tool)
    }

    /// The strictest rule among defaults, configured rules and approvals that matches any subject.
    fn rule_for(
        &self,
        req: &Request<'_>,
        tool: &str,
        key: &str,
        subjects: &[String],
    ) -> Option<(Action, String)> {
        let mut best: Option<(Action, String)> = None;
        let home_prefixed = |p: &str| -> String {
            if let Some(rest) = p.strip_prefix("~/") {
                format!("{}/{rest}", req.home)
            } else {
                p.to_owned()
            }
        };
        for r in self
            .data
            .defaults
            .iter()
            .chain(req.rules)
            .chain(req.approvals)
        {
            if !self.rule_reaches(&r.tool, tool, key) {
                continue;
            }
            let pat = home_prefixed(&r.pattern);
            if subjects.iter().any(|s| wildcard::matches(&pat, s))
                && best.as_ref().is_none_or(|(a, _)| r.action > *a)
            {
                best = Some((
                    r.action,
                    format!("{} `{}` {}", r.tool, r.pattern, r.action.as_str()),
                ));
            }
        }
        best
    }

    fn mode_entry(&self, mode: Mode) -> Option<&data::ModeEntry> {
        self.data.modes.get(mode.as_str())
    }

    fn bash(&self, req: &Request<'_>, command: &str, cwd: &str, place: &Place<'_>) -> Decision {
        let variants = self.variants(command, cwd, place);
        let mut decisions = Vec::new();
        let mut unparseable = false;
        for a in &variants {
            if a.too_big {
                return Decision::new(Action::Deny, self.data.limits.reason.clone()).rule("limits");
            }
            unparseable |= a.unparseable && std::ptr::eq(a, &variants[0]);
            decisions.push(self.combine(req, a, place));
        }
        let mut best = decisions.remove(0);
        for d in decisions {
            if d.action > best.action {
                best = d;
            } else if d.action == best.action && d.action == Action::Ask && d.always != best.always
            {
                best.always.clear();
            }
        }
        if unparseable && best.action != Action::Deny {
            return Decision::new(Action::Deny, self.data.unparseable.clone()).rule("unparseable");
        }
        best
    }

    fn combine(&self, req: &Request<'_>, a: &Analysis, place: &Place<'_>) -> Decision {
        if a.parts.is_empty() {
            return Decision::new(Action::Allow, "nothing runs");
        }
        let mut asks: Vec<Decision> = Vec::new();
        let mut allows: Vec<Decision> = Vec::new();
        for part in &a.parts {
            let d = self.part_decision(req, part, place);
            match d.action {
                Action::Deny => return d,
                Action::Ask => asks.push(d),
                Action::Allow => allows.push(d),
            }
        }
        if let Some(first) = asks.first().cloned() {
            let mut pats: Vec<String> = Vec::new();
            let mut all = true;
            for d in &asks {
                if d.always.is_empty() {
                    all = false;
                }
                for p in &d.always {
                    if !pats.contains(p) {
                        pats.push(p.clone());
                    }
                }
            }
            let mut d = first;
            d.always = if all { pats } else { Vec::new() };
            return d;
        }
        allows
            .into_iter()
            .next()
            .unwrap_or_else(|| Decision::new(Action::Allow, "nothing runs"))
    }

    fn part_decision(&self, req: &Request<'_>, part: &Part, place: &Place<'_>) -> Decision {
        let facts = self.facts(part, place);
        let shown = if part.redirect_only {
            "(redirection)".to_owned()
        } else {
            part.text()
        };
        if let Some((reason, id)) = facts.deny {
            return Decision::new(
                Action::Deny,
                format!("refused by the floor: {reason} (`{shown}`)"),
            )
            .rule(id);
        }
        let mut subjects = vec![shown.clone()];
        if part.path_qualified && !part.redirect_only {
            let rest: Vec<&str> = part.args().iter().map(|w| w.text.as_str()).collect();
            subjects.push(
                std::iter::once(part.program.as_str())
                    .chain(rest)
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        }
        let mut rule = self.rule_for(req, "bash", "bash", &subjects);
        // a rule over a prefix (`find *`) does not grant the program's dangerous forms
        if let Some((Action::Allow, r)) = &rule
            && let Some(rc) = self.data.reads.get(&part.program)
        {
            let texts: Vec<&str> = part.args().iter().map(|w| w.text.as_str()).collect();
            if let Some(flag) = unless_hit(rc, &texts)
                && !r.contains(flag.trim_end_matches(['*', '=']))
            {
                rule = None;
            }
        }
        if let Some((Action::Deny, r)) = &rule {
            return Decision::new(Action::Deny, format!("refused by the rule {r} (`{shown}`)"))
                .rule(r.clone());
        }
        let Some(mode) = self.mode_entry(req.mode) else {
            return Decision::new(Action::Deny, format!("unknown mode {}", req.mode));
        };
        let (risk, mode_action) = if facts.read {
            (
                "read",
                if facts.outside {
                    mode.outside_workspace.read
                } else {
                    mode.risks.read
                },
            )
        } else {
            ("execute", mode.risks.execute)
        };
        if mode_action == Action::Deny {
            return Decision::new(
                Action::Deny,
                format!(
                    "{} mode refuses commands that {} (`{shown}`)",
                    req.mode,
                    if risk == "read" {
                        "read outside the workspace"
                    } else {
                        "do more than read"
                    }
                ),
            )
            .rule(format!("mode:{}", req.mode));
        }
        if let Some((reason, id)) = facts.ask {
            return Decision::new(
                Action::Ask,
                format!("asked in every mode: {reason} (`{shown}`)"),
            )
            .rule(id);
        }
        match rule {
            Some((Action::Ask, r)) => {
                return Decision::new(Action::Ask, format!("the rule {r} asks (`{shown}`)"))
                    .rule(r)
                    .always(facts.always);
            }
            Some((Action::Allow, r)) => {
                return Decision::new(Action::Allow, format!("allowed by the rule {r}")).rule(r);
            }
            _ => {}
        }
        match mode_action {
            Action::Allow => Decision::new(
                Action::Allow,
                if risk == "read" {
                    format!("`{shown}` only reads")
                } else {
                    format!("{} mode runs commands", req.mode)
                },
            ),
            _ => Decision::new(
                Action::Ask,
                if risk == "read" {
                    format!(
                        "{} mode asks before reading outside the workspace (`{shown}`)",
                        req.mode
                    )
                } else {
                    format!("{} mode asks before running `{shown}`", req.mode)
                },
            )
            .always(facts.always),
        }
    }

    fn facts(&self, part: &Part, place: &Place<'_>) -> Facts {
        let d = &self.data;
        let mut f = Facts {
            deny: None,
            ask: None,
            read: false,
            outside: false,
            always: None,
        };
        if let Some(r) = d.hits(&d.floor, part, place).first() {
            f.deny = Some((r.reason.clone(), r.id.clone()));
            return f;
        }
        // writes: redirects and write operands
        let mut writes: Vec<String> = part
            .redirects
            .iter()
            .filter(|r| r.write)
            .map(|r| r.target.text.clone())
            .collect();
        writes.extend(
            floor::write_targets(part)
                .into_iter()
                .map(|w| floor::target_text(w).to_owned()),
        );
        if let Some(opts) = d.output_options.get(&part.program) {
            writes.extend(shell::option_values(part.args(), opts));
        }
        let mut noisy_write = false;
        for t in &writes {
            let path = paths::resolve(&part.cwd, t);
            if d.quiet_targets.contains(&path) {
                continue;
            }
            if part
                .redirects
                .iter()
                .any(|r| r.write && r.target.text == *t)
            {
                noisy_write = true;
            }
            if shell::has_pattern(t) && f.ask.is_none() && self.pattern_reaches(&path, true, place)
            {
                f.ask = Some((
                    format!(
                        "writes to a path pattern outside the workspace that could name a protected file ({path})"
                    ),
                    "protected_path".into(),
                ));
            }
            match d.protected(&path, true, place) {
                Some((Action::Deny, why)) => {
                    f.deny = Some((format!("writes to {why} ({path})"), "protected_path".into()));
                    return f;
                }
                Some((Action::Ask, why)) if f.ask.is_none() => {
                    f.ask = Some((format!("writes to {why} ({path})"), "protected_path".into()));
                }
                _ => {}
            }
        }
        // reads
        let (read, read_paths) = self.classify(part);
        f.read = read && !noisy_write && !part.redirect_only;
        let mut reads = read_paths;
        reads.extend(
            part.redirects
                .iter()
                .filter(|r| !r.write)
                .map(|r| r.target.text.clone()),
        );
        reads.extend(sources(part));
        for t in &reads {
            let path = paths::resolve(&part.cwd, t);
            if d.quiet_targets.contains(&path) || path.starts_with("/dev/fd/") {
                continue;
            }
            if shell::has_pattern(t) && f.ask.is_none() && self.pattern_reaches(&path, false, place)
            {
                f.ask = Some((
                    format!(
                        "reads a path pattern outside the workspace that could name a protected file ({path})"
                    ),
                    "protected_path".into(),
                ));
            }
            match d.protected(&path, false, place) {
                Some((Action::Deny, why)) => {
                    f.deny = Some((format!("reads {why} ({path})"), "protected_path".into()));
                    return f;
                }
                Some((Action::Ask, why)) if f.ask.is_none() => {
                    f.ask = Some((format!("reads {why} ({path})"), "protected_path".into()));
                }
                _ => {}
            }
            if !paths::inside(&path, place.workspace) {
                f.outside = true;
            }
        }
        if f.ask.is_none()
            && let Some(r) = d.hits(&d.caution, part, place).first()
        {
            f.ask = Some((r.reason.clone(), r.id.clone()));
        }
        if f.ask.is_none() && (part.dynamic_program || part.argv.first().is_some_and(|w| w.glob)) {
            f.ask = Some((d.unknown_program.clone(), "unknown_program".into()));
        }
        let offer = f.ask.is_none()
            && part.wrappers.is_empty()
            && !part.dynamic
            && !part.path_qualified
            && !part.inline_code
            && !part.redirect_only
            && part.findings.is_empty();
        if offer {
            let words: Vec<&str> = part.argv.iter().map(|w| w.text.as_str()).collect();
            f.always = arity::pattern(d, &words);
        }
        f
    }

    /// Whether a path pattern (`~/.ss?/id_rsa`, `/et?`) could name a protected path: its
    /// literal directory is the root, lies in the home directory outside the workspace, or is
    /// itself in a protected tree.
    fn pattern_reaches(&self, path: &str, write: bool, place: &Place<'_>) -> bool {
        let first = path.find(['*', '?', '[']).unwrap_or(path.len());
        let dir = match path[..first].rfind('/') {
            Some(0) | None => "/",
            Some(i) => &path[..i],
        };
        if paths::inside(dir, place.workspace) {
            return false;
        }
        dir == "/"
            || paths::inside(dir, place.home)
            || self
                .data
                .protected(&format!("{dir}/x"), write, place)
                .is_some()
    }
}

/// The text `llembas permission check` prints for a decision.
pub fn render_check(decision: &Decision) -> String {
    let mut s = format!(
        "decision: {}\nreason: {}\n",
        decision.action.as_str(),
        decision.reason
    );
    if let Some(r) = &decision.rule {
        s.push_str(&format!("rule: {r}\n"));
    }
    if decision.action == Action::Ask {
        for p in &decision.always {
            s.push_str(&format!("always: {p}\n"));
        }
        if decision.always.is_empty() {
            s.push_str("always: (not offered)\n");
        }
    }
    s
}

/// Parses a mode name as the spec spells it (`unrestricted` is read as `auto`).
pub fn parse_mode(name: &str) -> Result<Mode> {
    name.parse::<Mode>()
        .map_err(|_| Error::UnknownMode(name.to_owned()))
}
