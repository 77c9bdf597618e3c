//! The decision on a call of a tool other than bash: its risk class by the mode table, the
//! rules and approvals on its permission key, the protected paths of its path arguments,
//! `confirm: always`.

use harness_spec::{Confirm, Risk};
use serde_json::Value;

use crate::floor::Place;
use crate::{Action, Decision, Engine, Request, paths};

/// What the decision of a non-bash call needs to know of its tool.
struct ToolFacts {
    name: String,
    key: String,
    risk: Risk,
    confirm_always: bool,
}

impl Engine {
    /// Decides a call of a tool that is not in the spec but registered by an embedder with its
    /// own risk class (and `confirm: always` when `confirm_always`): the same mode table, rules
    /// and approvals as a spec tool of that risk, the protected paths of any path argument.
    pub fn decide_registered(
        &self,
        req: &Request<'_>,
        risk: Risk,
        confirm_always: bool,
    ) -> Decision {
        if self.find_tool(req.tool).is_some() {
            return self.decide(req);
        }
        let place = Place {
            home: req.home,
            workspace: req.workspace_root,
        };
        let facts = ToolFacts {
            name: req.tool.to_owned(),
            key: req.tool.to_owned(),
            risk,
            confirm_always,
        };
        self.tool_call_with(req, &place, &facts)
    }

    pub(crate) fn tool_call(&self, req: &Request<'_>, place: &Place<'_>) -> Decision {
        let Some(tool) = self.find_tool(req.tool) else {
            return Decision::new(Action::Deny, format!("there is no tool `{}`", req.tool))
                .rule("unknown_tool");
        };
        let key = self
            .data
            .keys
            .get(&tool.name)
            .cloned()
            .unwrap_or_else(|| tool.name.clone());
        let facts = ToolFacts {
            name: tool.name.clone(),
            key,
            risk: tool.risk,
            confirm_always: tool.confirm == Some(Confirm::Always),
        };
        self.tool_call_with(req, place, &facts)
    }

    fn tool_call_with(&self, req: &Request<'_>, place: &Place<'_>, tool: &ToolFacts) -> Decision {
        let key = tool.key.clone();
        let Some(mode) = self.mode_entry(req.mode) else {
            return Decision::new(Action::Deny, format!("unknown mode {}", req.mode));
        };
        let paths = tool_paths(req.args, req.cwd, req.home);
        let mut deny: Option<String> = None;
        let mut ask: Option<String> = None;
        let mut outside = false;
        let write = tool.risk == Risk::Write;
        for p in &paths {
            if matches!(tool.risk, Risk::Read | Risk::Write) {
                match self.data.protected(p, write, place) {
                    Some((Action::Deny, why)) if deny.is_none() => {
                        deny = Some(format!(
                            "{} {why} ({p})",
                            if write { "writes to" } else { "reads" }
                        ))
                    }
                    Some((Action::Ask, why)) if ask.is_none() => {
                        ask = Some(format!(
                            "{} {why} ({p})",
                            if write { "writes to" } else { "reads" }
                        ))
                    }
                    _ => {}
                }
            }
            if !paths::inside(p, place.workspace) {
                outside = true;
            }
        }
        let mut subjects: Vec<String> = paths.clone();
        for k in ["url", "query", "pattern", "name", "agent", "subagent_type"] {
            if let Some(s) = req.args.get(k).and_then(Value::as_str) {
                subjects.push(s.to_owned());
            }
        }
        if subjects.is_empty() {
            subjects.push(String::new());
        }
        let what = paths.first().cloned().unwrap_or_else(|| tool.name.clone());
        if let Some(why) = deny {
            return Decision::new(Action::Deny, format!("refused by the floor: {why}"))
                .rule("protected_path");
        }
        let rule = self.rule_for(req, &tool.name, &key, &subjects);
        if let Some((Action::Deny, r)) = &rule {
            return Decision::new(Action::Deny, format!("refused by the rule {r}")).rule(r.clone());
        }
        let mode_action = if mode.allow_keys.iter().any(|k| *k == key || *k == tool.name) {
            Action::Allow
        } else {
            match tool.risk {
                Risk::Read if outside => mode.outside_workspace.read,
                Risk::Write if outside => mode.outside_workspace.write,
                Risk::Read => mode.risks.read,
                Risk::Write => mode.risks.write,
                Risk::Execute => mode.risks.execute,
                Risk::Interact => mode.risks.interact,
            }
        };
        if mode_action == Action::Deny {
            return Decision::new(
                Action::Deny,
                format!(
                    "{} mode refuses {} ({})",
                    req.mode,
                    risk_words(tool.risk, outside),
                    tool.name
                ),
            )
            .rule(format!("mode:{}", req.mode));
        }
        if let Some(why) = ask {
            return Decision::new(Action::Ask, format!("asked in every mode: {why}"))
                .rule("protected_path");
        }
        if tool.confirm_always {
            return Decision::new(
                Action::Ask,
                format!(
                    "`{}` is confirmed by the person every time, in every mode",
                    tool.name
                ),
            )
            .rule("confirm:always");
        }
        let always = Some(if outside {
            paths
                .first()
                .map(|p| format!("{}/*", p.rsplit_once('/').map(|x| x.0).unwrap_or("")))
                .unwrap_or_else(|| "*".into())
        } else {
            "*".into()
        });
        match rule {
            Some((Action::Ask, r)) => {
                return Decision::new(Action::Ask, format!("the rule {r} asks ({what})"))
                    .rule(r)
                    .always(always);
            }
            Some((Action::Allow, r)) => {
                return Decision::new(Action::Allow, format!("allowed by the rule {r}")).rule(r);
            }
            _ => {}
        }
        match mode_action {
            Action::Allow => Decision::new(
                Action::Allow,
                format!(
                    "{} mode allows {}",
                    req.mode,
                    risk_words(tool.risk, outside)
                ),
            ),
            _ => Decision::new(
                Action::Ask,
                format!(
                    "{} mode asks before {} ({what})",
                    req.mode,
                    risk_words(tool.risk, outside)
                ),
            )
            .always(always),
        }
    }
}

fn risk_words(risk: Risk, outside: bool) -> &'static str {
    match (risk, outside) {
        (Risk::Read, false) => "reads",
        (Risk::Read, true) => "reads outside the workspace",
        (Risk::Write, false) => "writes",
        (Risk::Write, true) => "writes outside the workspace",
        (Risk::Execute, _) => "running commands",
        (Risk::Interact, _) => "questions to the person",
    }
}
/// The absolute paths a file tool's arguments name.
fn tool_paths(args: &Value, cwd: &str, home: &str) -> Vec<String> {
    let mut raw: Vec<String> = Vec::new();
    for k in [
        "path",
        "file_path",
        "filePath",
        "target",
        "destination",
        "source",
        "from",
        "to",
        "directory",
        "dir",
    ] {
        if let Some(s) = args.get(k).and_then(Value::as_str) {
            raw.push(s.to_owned());
        }
    }
    if let Some(list) = args.get("paths").and_then(Value::as_array) {
        raw.extend(list.iter().filter_map(Value::as_str).map(str::to_owned));
    }
    if let Some(edits) = args.get("edits").and_then(Value::as_array) {
        raw.extend(
            edits
                .iter()
                .filter_map(|e| e.get("path").and_then(Value::as_str))
                .map(str::to_owned),
        );
    }
    for k in ["patch", "input"] {
        if let Some(p) = args.get(k).and_then(Value::as_str) {
            for line in p.lines() {
                for prefix in [
                    "*** Add File: ",
                    "*** Update File: ",
                    "*** Delete File: ",
                    "*** Move to: ",
                    "+++ b/",
                    "--- a/",
                ] {
                    if let Some(rest) = line.strip_prefix(prefix) {
                        raw.push(rest.trim().to_owned());
                    }
                }
            }
        }
    }
    raw.into_iter()
        .map(|p| harness_core::path::resolve_home(cwd, home, &p))
        .collect()
}
