//! The permission engine plugged into the loop: the session's mode, the configured rules and
//! the "always" approvals given in this session, passed to `harness-permission` for every call.

use std::sync::{Arc, Mutex};

use harness_core::protocol::{Mode, PermissionQuestion, ToolCall};
use harness_loop::session::{Decision, Permissions};
use harness_permission::{Action, Engine, Request, Rule};
use harness_spec::{Risk, Spec};
use serde_json::Value;

use crate::seams::ToolWorld;

/// What every decision of a session shares; cloned handles see the same mode and approvals.
#[derive(Clone)]
pub struct SessionPermissions {
    engine: Arc<Engine>,
    mode: Arc<Mutex<Mode>>,
    root: String,
    home: String,
    rules: Arc<Vec<Rule>>,
    approvals: Arc<Mutex<Vec<Rule>>>,
    /// The risk classes of tools an embedder registered (not in the spec).
    registered: Arc<Vec<(String, Risk)>>,
}

impl std::fmt::Debug for SessionPermissions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionPermissions")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// The engine, built once per process.
pub fn engine() -> Result<Arc<Engine>, harness_permission::Error> {
    static ENGINE: std::sync::OnceLock<Arc<Engine>> = std::sync::OnceLock::new();
    if let Some(e) = ENGINE.get() {
        return Ok(e.clone());
    }
    let e = Arc::new(Engine::new(Spec::embedded())?);
    Ok(ENGINE.get_or_init(|| e).clone())
}

impl SessionPermissions {
    /// Permissions for a session working in `root`.
    pub fn new(engine: Arc<Engine>, mode: Mode, root: &str, home: &str, rules: Vec<Rule>) -> Self {
        SessionPermissions {
            engine,
            mode: Arc::new(Mutex::new(mode)),
            root: root.to_owned(),
            home: home.to_owned(),
            rules: Arc::new(rules),
            approvals: Arc::new(Mutex::new(Vec::new())),
            registered: Arc::new(Vec::new()),
        }
    }

    /// The same permissions, deciding the calls of tools an embedder registered by their risk.
    pub fn with_registered(mut self, tools: Vec<(String, Risk)>) -> Self {
        self.registered = Arc::new(tools);
        self
    }

    /// The mode now.
    pub fn mode(&self) -> Mode {
        self.mode.lock().map(|m| *m).unwrap_or(Mode::Manual)
    }

    /// Changes the mode.
    pub fn set_mode(&self, mode: Mode) {
        if let Ok(mut m) = self.mode.lock() {
            *m = mode;
        }
    }

    /// Remembers an "always" answer: every pattern of the question as an allow rule.
    pub fn approve_always(&self, question: &PermissionQuestion) {
        let Some(pattern) = &question.pattern else {
            return;
        };
        if let Ok(mut a) = self.approvals.lock() {
            for p in pattern.split('\n') {
                a.push(Rule::new(question.tool.clone(), p, Action::Allow));
            }
        }
    }

    /// The engine's decision, as is.
    pub fn decide_raw(&self, tool: &str, args: &Value) -> harness_permission::Decision {
        self.decide_in(self.mode(), tool, args)
    }

    /// The engine's decision were the session in `mode` (a hook's `allow` skips only a question
    /// auto mode would not put).
    pub fn decide_in(&self, mode: Mode, tool: &str, args: &Value) -> harness_permission::Decision {
        let approvals = self.approvals.lock().map(|a| a.clone()).unwrap_or_default();
        let request = Request {
            tool,
            args,
            mode,
            workspace_root: &self.root,
            cwd: &self.root,
            home: &self.home,
            rules: &self.rules,
            approvals: &approvals,
        };
        match self.registered.iter().find(|(name, _)| name == tool) {
            Some((_, risk)) => self.engine.decide_registered(&request, *risk, false),
            None => self.engine.decide(&request),
        }
    }
}

/// What a call is about, as the person reads it in a question: the command, the path (the
/// absolute path it resolves to against `root`, `~` being `home`: the one the call acts on),
/// the URL.
pub fn subject(call: &ToolCall, root: &str, home: &str) -> String {
    let a = &call.arguments;
    // A program (`python`): its code, and the files it will keep.
    if let Some(code) = a.get("code").and_then(Value::as_str) {
        let saves: Vec<String> = a
            .get("save")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|p| harness_core::path::resolve_home(root, home, p))
            .collect();
        return if saves.is_empty() {
            code.to_owned()
        } else {
            format!("{code}\n# saves {}", saves.join(", "))
        };
    }
    for key in [
        "command",
        "path",
        "file_path",
        "url",
        "query",
        "pattern",
        "prompt",
    ] {
        if let Some(s) = a.get(key).and_then(Value::as_str) {
            if matches!(key, "path" | "file_path") {
                return harness_core::path::resolve_home(root, home, s);
            }
            return s.to_owned();
        }
    }
    if a.as_object().is_some_and(|o| o.is_empty()) {
        String::new()
    } else {
        a.to_string()
    }
}

impl SessionPermissions {
    /// The question put to the person about `call`: its subject, and the engine's reason and
    /// "always" patterns where the engine asked (`decision`).
    pub fn question(
        &self,
        call: &ToolCall,
        decision: Option<harness_permission::Decision>,
    ) -> PermissionQuestion {
        let risk = Spec::embedded()
            .tool(&call.name)
            .map(|t| t.risk)
            .or_else(|| {
                self.registered
                    .iter()
                    .find(|(name, _)| *name == call.name)
                    .map(|(_, r)| *r)
            })
            .unwrap_or(Risk::Execute);
        PermissionQuestion {
            tool: call.name.clone(),
            risk,
            subject: subject(call, &self.root, &self.home),
            // the question's wire form keeps the patterns one per line (the ACP agent and
            // the page read it so)
            pattern: decision
                .as_ref()
                .filter(|d| !d.always.is_empty())
                .map(|d| d.always.join("\n")),
            reason: decision.map(|d| d.reason),
            change: None,
        }
    }
}

impl Permissions for SessionPermissions {
    fn decide(&self, call: &ToolCall) -> Decision {
        let d = self.decide_raw(&call.name, &call.arguments);
        match d.action {
            Action::Allow => Decision::Allow,
            Action::Deny => Decision::Deny { reason: d.reason },
            Action::Ask => Decision::Ask(self.question(call, Some(d))),
        }
    }
}

/// A session's permissions with its world's preconditions: a call the person would be asked
/// about is first checked by the world ([`ToolWorld::precheck`]), and one that cannot run is
/// answered with why instead.
pub(crate) struct Checked {
    /// The session's permissions.
    pub perms: SessionPermissions,
    /// The world the calls run in.
    pub world: Arc<dyn ToolWorld>,
}

impl Permissions for Checked {
    fn decide(&self, call: &ToolCall) -> Decision {
        self.perms.decide(call)
    }

    fn check(&self, call: &ToolCall, earlier: &[ToolCall]) -> Option<String> {
        // A call before it in the step runs first and may make it runnable (a command, a write,
        // a read of the file it changes): then it is checked when it runs.
        // A call that may change files (a write, a command, a program that saves) may need a
        // read before it in the step: then it is checked when it runs.
        let changes = Spec::embedded()
            .tool(&call.name)
            .is_none_or(|t| t.risk != Risk::Read);
        let harmless = |c: &ToolCall| {
            Spec::embedded()
                .tool(&c.name)
                .is_some_and(|t| t.risk == Risk::Read)
                && !(changes && c.name == "read")
        };
        if !earlier.iter().all(harmless) {
            return None;
        }
        self.world.precheck(call)
    }
}
