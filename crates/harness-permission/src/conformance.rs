//! The `permission` conformance area: a case is a call in a mode, and what must come of it.
//!
//! Format (DESIGN.md): `{"mode": "manual|edit|auto|plan", "command": "..."}` (shorthand for tool
//! `bash`) or `{"mode", "tool": NAME, "args": {...}}`; optional `"cwd"` (default, and always the
//! workspace root: `/home/user/project`; home is `/home/user`); optional `"rules": [{"tool",
//! "pattern", "action"}]` on top of the defaults; `"expect": {"decision": "allow|ask|deny"}` or
//! `{"decision_any_of": [...]}`, optionally `"always": "prefix *"` (the pattern an "always"
//! approval would save) or `"always_not": "pattern"`.

use std::sync::OnceLock;

use harness_spec::conformance::{AreaRunner, Outcome};
use serde_json::{Value, json};

use crate::{Action, DEFAULT_HOME, DEFAULT_WORKSPACE, Engine, Request, Rule, parse_mode, paths};

/// The runner of the `permission` area.
#[derive(Debug, Default)]
pub struct PermissionRunner {
    engine: OnceLock<std::result::Result<Engine, String>>,
}

impl PermissionRunner {
    fn engine(&self) -> std::result::Result<&Engine, String> {
        self.engine
            .get_or_init(|| Engine::new(harness_spec::Spec::embedded()).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// Every area this crate implements.
pub fn conformance_runners() -> Vec<Box<dyn AreaRunner>> {
    vec![Box::new(PermissionRunner::default())]
}

impl AreaRunner for PermissionRunner {
    fn area(&self) -> &'static str {
        "permission"
    }

    fn run(&self, case: &Value) -> Outcome {
        let engine = match self.engine() {
            Ok(e) => e,
            Err(e) => {
                return Outcome::malformed(format!("the permission engine did not load: {e}"));
            }
        };
        let Some(mode) = case.get("mode").and_then(Value::as_str) else {
            return Outcome::malformed("a case needs a string `mode`");
        };
        let mode = match parse_mode(mode) {
            Ok(m) => m,
            Err(e) => return Outcome::malformed(e.to_string()),
        };
        let (tool, args) = match (case.get("command"), case.get("tool")) {
            (Some(Value::String(c)), None) => ("bash".to_owned(), json!({ "command": c })),
            (None, Some(Value::String(t))) => (
                t.clone(),
                case.get("args").cloned().unwrap_or_else(|| json!({})),
            ),
            _ => {
                return Outcome::malformed(
                    "a case needs either a string `command` or a string `tool` (with `args`)",
                );
            }
        };
        let cwd = match case.get("cwd") {
            None => DEFAULT_WORKSPACE.to_owned(),
            Some(Value::String(c)) => paths::resolve(DEFAULT_WORKSPACE, c),
            Some(_) => return Outcome::malformed("`cwd` must be a string"),
        };
        let rules: Vec<Rule> = match case.get("rules") {
            None => Vec::new(),
            Some(v) => match serde_json::from_value(v.clone()) {
                Ok(r) => r,
                Err(e) => return Outcome::malformed(format!("`rules`: {e}")),
            },
        };
        let Some(expect) = case.get("expect").and_then(Value::as_object) else {
            return Outcome::malformed("a case needs an object `expect`");
        };
        let req = Request {
            tool: &tool,
            args: &args,
            mode,
            workspace_root: DEFAULT_WORKSPACE,
            cwd: &cwd,
            home: DEFAULT_HOME,
            rules: &rules,
            approvals: &[],
        };
        let d = engine.decide(&req);
        let got = d.action.as_str();
        let mut passed = match (expect.get("decision"), expect.get("decision_any_of")) {
            (Some(Value::String(want)), None) => want == got,
            (None, Some(Value::Array(list))) => list.iter().any(|v| v.as_str() == Some(got)),
            _ => {
                return Outcome::malformed(
                    "`expect` needs `decision` (a string) or `decision_any_of` (a list)",
                );
            }
        };
        let pats = &d.always;
        let offered = d.action == Action::Ask;
        if let Some(want) = expect.get("always") {
            let Some(want) = want.as_str() else {
                return Outcome::malformed("`expect.always` must be a string");
            };
            passed &= offered && pats.iter().any(|p| p == want);
        }
        if let Some(not) = expect.get("always_not") {
            let Some(not) = not.as_str() else {
                return Outcome::malformed("`expect.always_not` must be a string");
            };
            passed &= !pats.iter().any(|p| p == not);
        }
        let mut actual = serde_json::Map::new();
        if expect.contains_key("decision_any_of") && passed {
            actual.insert(
                "decision_any_of".into(),
                expect
                    .get("decision_any_of")
                    .cloned()
                    .unwrap_or(Value::Null),
            );
        } else {
            actual.insert("decision".into(), json!(got));
        }
        if expect.contains_key("always") || expect.contains_key("always_not") {
            if passed {
                for k in ["always", "always_not"] {
                    if let Some(v) = expect.get(k) {
                        actual.insert(k.into(), v.clone());
                    }
                }
            } else if !d.always.is_empty() {
                actual.insert("always".into(), json!(d.always));
            }
        }
        if !passed {
            actual.insert("reason".into(), json!(d.reason));
        }
        Outcome {
            passed,
            actual: Value::Object(actual),
        }
    }
}
