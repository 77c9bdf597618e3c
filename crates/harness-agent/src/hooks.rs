//! Hooks: commands the person configured that run on a session's events, read a JSON payload
//! on stdin and answer in JSON, as Claude Code's hooks do (its settings' shape is read too, so a
//! project's `.claude/settings.json` hooks work as they are).
//!
//! Here: the events ([`HookEvent`]), the hooks ([`HookDef`], matched by a case-insensitive
//! regular expression over the tool's name), the payload each gets, what an answer says
//! ([`HookAnswer`]) and how a `PreToolUse` answer combines with the permission engine's
//! decision ([`combine`]). Running a command is the front end's ([`HookRunner`]): this crate
//! does no process I/O.
//!
//! The safety rule: a hook's `allow` only skips the question the mode would put (a call that
//! auto mode would run); it never lets through what the floor or a deny rule refuses, nor what
//! a rule or the floor asks about in every mode. `deny` refuses with the hook's reason; `ask`
//! asks the person even where the mode would allow.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the end of a prompt a `UserPromptSubmit` hook blocked begins: its `UserInput` is told
/// (the front end waits for the end of its prompt's turn) but no turn of the session started,
/// so what counts turns (the checkpoints) leaves it out.
pub const PROMPT_BLOCKED: &str = "a UserPromptSubmit hook blocked the prompt";

use harness_core::protocol::{Mode, PermissionQuestion, ToolCall};
use harness_loop::session::{Decision, Permissions};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{Error, SeamError};
use crate::seams::BoxFuture;

/// How long a hook may run when its definition names no `timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How many times `Stop` hooks may send the model back to work after one prompt of the person.
pub const MAX_STOP_CONTINUATIONS: u32 = 3;

/// When a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HookEvent {
    /// Before a tool call runs (after the model made it): may allow, ask or deny.
    PreToolUse,
    /// After a tool call ran: may add feedback to its result for the model.
    PostToolUse,
    /// When the person's prompt is submitted: may block it, or add context to it.
    UserPromptSubmit,
    /// When a turn ends with the model's answer: may send the model on.
    Stop,
    /// When a session starts: may add context to it.
    SessionStart,
}

impl HookEvent {
    /// Every event, in the order they are documented.
    pub const ALL: [HookEvent; 5] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::UserPromptSubmit,
        HookEvent::Stop,
        HookEvent::SessionStart,
    ];

    /// Its name, as configured and as `hook_event_name` says it.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::Stop => "Stop",
            HookEvent::SessionStart => "SessionStart",
        }
    }

    /// The event named `name` (as configured).
    pub fn parse(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|e| e.as_str() == name)
    }

    /// Whether its hooks are matched against a tool's name.
    pub fn has_tool(self) -> bool {
        matches!(self, HookEvent::PreToolUse | HookEvent::PostToolUse)
    }
}

/// One configured hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HookDef {
    /// When it runs.
    pub event: HookEvent,
    /// A regular expression over the tool's name, matched whole and case-insensitively
    /// (`Bash|Edit|Write` matches `bash`, `edit` and `write`); empty or `*` matches every tool.
    pub matcher: String,
    /// The command (run with `sh -c` in the project's directory).
    pub command: String,
    /// Seconds it may run ([`DEFAULT_TIMEOUT`] when `None`).
    pub timeout: Option<u64>,
}

impl HookDef {
    /// How long it may run.
    pub fn time_limit(&self) -> Duration {
        self.timeout.map_or(DEFAULT_TIMEOUT, Duration::from_secs)
    }
}

fn hook_error(message: impl Into<String>) -> Error {
    Error::Hook {
        message: message.into(),
    }
}

/// The hooks of a Claude Code settings file (`.claude/settings.json`): its `hooks` object,
/// `{"EVENT": [{"matcher": "...", "hooks": [{"type": "command", "command": "...", "timeout":
/// N}]}]}`. Events this harness does not have are left out (named in the second list), as are
/// entries of another `type`. A file without `hooks` has none.
pub fn from_claude_settings(text: &str) -> Result<(Vec<HookDef>, Vec<String>), Error> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| hook_error(format!("not JSON: {e}")))?;
    let Some(hooks) = value.get("hooks") else {
        return Ok((Vec::new(), Vec::new()));
    };
    let Some(events) = hooks.as_object() else {
        return Err(hook_error("`hooks` is not an object"));
    };
    let mut defs = Vec::new();
    let mut unknown = Vec::new();
    for (name, groups) in events {
        let Some(event) = HookEvent::parse(name) else {
            unknown.push(name.clone());
            continue;
        };
        let groups = groups
            .as_array()
            .ok_or_else(|| hook_error(format!("`hooks.{name}` is not a list")))?;
        for group in groups {
            let matcher = group
                .get("matcher")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let list = group
                .get("hooks")
                .and_then(Value::as_array)
                .ok_or_else(|| {
                    hook_error(format!("an entry of `hooks.{name}` has no `hooks` list"))
                })?;
            for h in list {
                if h.get("type").and_then(Value::as_str).unwrap_or("command") != "command" {
                    continue;
                }
                let command = h.get("command").and_then(Value::as_str).ok_or_else(|| {
                    hook_error(format!("a hook of `hooks.{name}` has no `command`"))
                })?;
                defs.push(HookDef {
                    event,
                    matcher: matcher.clone(),
                    command: command.to_owned(),
                    timeout: h.get("timeout").and_then(Value::as_u64),
                });
            }
        }
    }
    Ok((defs, unknown))
}

/// What a hook's command gave.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookOutput {
    /// Its exit code (`None`: a signal ended it, or it was killed at its timeout).
    pub code: Option<i32>,
    /// What it wrote on stdout.
    pub stdout: String,
    /// What it wrote on stderr.
    pub stderr: String,
    /// It outlived its timeout and was killed, with everything it started.
    pub timed_out: bool,
}

/// Runs hook commands: the front end's seam (the CLI starts `sh -c COMMAND` in the project's
/// directory, in a process group of its own, killed whole at the timeout).
pub trait HookRunner: Send + Sync {
    /// Runs `command` with `stdin` as its input, for at most `timeout`.
    fn run<'a>(
        &'a self,
        command: &'a str,
        stdin: Vec<u8>,
        timeout: Duration,
    ) -> BoxFuture<'a, Result<HookOutput, SeamError>>;
}

/// What one hook answered.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HookAnswer {
    /// It blocks (exit 2, or `decision: "block"`), with this reason.
    pub block: Option<String>,
    /// `PreToolUse`: its permission decision (`hookSpecificOutput.permissionDecision`) and
    /// reason.
    pub permission: Option<(Verdict, String)>,
    /// Context it adds (`additionalContext`, or plain stdout where the event takes it).
    pub context: Option<String>,
    /// What went wrong, said to the person (it changes nothing).
    pub problem: Option<String>,
}

/// A `PreToolUse` hook's permission decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Skip the mode's question.
    Allow,
    /// Ask the person even where the mode would allow.
    Ask,
    /// Refuse the call.
    Deny,
}

/// Reads what a hook's command gave, for `event`: exit 0 with JSON (or plain text), exit 2 a
/// block with stderr as the reason, another exit a problem said to the person.
pub fn answer(event: HookEvent, def: &HookDef, ran: Result<HookOutput, SeamError>) -> HookAnswer {
    let mut a = HookAnswer::default();
    let out = match ran {
        Ok(o) => o,
        Err(e) => {
            a.problem = Some(format!(
                "{} hook `{}` did not run: {e}",
                event.as_str(),
                def.command
            ));
            return a;
        }
    };
    if out.timed_out {
        a.problem = Some(format!(
            "{} hook `{}` did not answer within {} s and was stopped",
            event.as_str(),
            def.command,
            def.time_limit().as_secs()
        ));
        return a;
    }
    match out.code {
        Some(0) => {}
        Some(2) => {
            let reason = out.stderr.trim();
            a.block = Some(if reason.is_empty() {
                format!("blocked by the {} hook `{}`", event.as_str(), def.command)
            } else {
                reason.to_owned()
            });
            if event == HookEvent::PreToolUse {
                a.permission = a.block.clone().map(|r| (Verdict::Deny, r));
            }
            return a;
        }
        other => {
            let how = other.map_or_else(
                || "was ended by a signal".to_owned(),
                |c| format!("exited with {c}"),
            );
            let err = out.stderr.trim();
            a.problem = Some(format!(
                "{} hook `{}` {how}{}",
                event.as_str(),
                def.command,
                if err.is_empty() {
                    String::new()
                } else {
                    format!(": {err}")
                }
            ));
            return a;
        }
    }
    let text = out.stdout.trim();
    let Ok(Value::Object(json)) = serde_json::from_str::<Value>(text) else {
        if matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart)
            && !text.is_empty()
        {
            a.context = Some(text.to_owned());
        }
        return a;
    };
    let reason = json
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match json.get("decision").and_then(Value::as_str) {
        Some("block") => {
            a.block = Some(if reason.is_empty() {
                format!("blocked by the {} hook `{}`", event.as_str(), def.command)
            } else {
                reason.clone()
            });
            if event == HookEvent::PreToolUse {
                a.permission = a.block.clone().map(|r| (Verdict::Deny, r));
            }
        }
        // The older form of `PreToolUse`'s answer.
        Some("approve") if event == HookEvent::PreToolUse => {
            a.permission = Some((Verdict::Allow, reason.clone()));
        }
        _ => {}
    }
    if json.get("continue").and_then(Value::as_bool) == Some(false) && a.block.is_none() {
        let why = json
            .get("stopReason")
            .and_then(Value::as_str)
            .unwrap_or(&reason);
        a.block = Some(if why.is_empty() {
            format!("stopped by the {} hook `{}`", event.as_str(), def.command)
        } else {
            why.to_owned()
        });
    }
    if let Some(specific) = json.get("hookSpecificOutput") {
        if event == HookEvent::PreToolUse
            && let Some(d) = specific.get("permissionDecision").and_then(Value::as_str)
        {
            let why = specific
                .get("permissionDecisionReason")
                .and_then(Value::as_str)
                .unwrap_or(&reason)
                .to_owned();
            let verdict = match d {
                "allow" => Some(Verdict::Allow),
                "ask" => Some(Verdict::Ask),
                "deny" => Some(Verdict::Deny),
                _ => None,
            };
            match verdict {
                Some(v) => a.permission = Some((v, why)),
                None => {
                    a.problem = Some(format!(
                        "PreToolUse hook `{}` answered permissionDecision {d:?} (allow, ask or deny)",
                        def.command
                    ));
                }
            }
        }
        if let Some(c) = specific.get("additionalContext").and_then(Value::as_str)
            && !c.trim().is_empty()
        {
            a.context = Some(c.trim().to_owned());
        }
    }
    a
}

/// The strongest of the `PreToolUse` answers (deny over ask over allow), with its reason.
pub fn strongest(answers: &[HookAnswer]) -> Option<(Verdict, String)> {
    answers
        .iter()
        .filter_map(|a| a.permission.clone())
        .max_by_key(|(v, _)| *v)
}

/// A `PreToolUse` verdict combined with the engine's decision `base`. `auto_allows` says
/// whether the engine would run the call in auto mode (so the only question is the mode's);
/// `question` makes the question for a call the engine allows and the hook wants asked.
pub fn combine(
    base: Decision,
    verdict: Option<&(Verdict, String)>,
    auto_allows: impl FnOnce() -> bool,
    question: impl FnOnce() -> PermissionQuestion,
) -> Decision {
    let Some((verdict, reason)) = verdict else {
        return base;
    };
    let because = |what: &str| {
        if reason.trim().is_empty() {
            format!("a PreToolUse hook {what}")
        } else {
            format!("a PreToolUse hook {what}: {}", reason.trim())
        }
    };
    match (base, verdict) {
        // What the floor, a rule or the mode refuses stays refused, whatever a hook says.
        (d @ Decision::Deny { .. }, _) => d,
        (_, Verdict::Deny) => Decision::Deny {
            reason: if reason.trim().is_empty() {
                "a PreToolUse hook refused it".to_owned()
            } else {
                reason.trim().to_owned()
            },
        },
        (Decision::Allow, Verdict::Ask) => {
            let mut q = question();
            q.reason = Some(because("asks"));
            // "always" would save a rule the hook is not bound by: not offered.
            q.pattern = None;
            Decision::Ask(q)
        }
        (Decision::Ask(mut q), Verdict::Ask) => {
            q.reason = Some(because("asks"));
            Decision::Ask(q)
        }
        (Decision::Ask(q), Verdict::Allow) => {
            if auto_allows() {
                Decision::Allow
            } else {
                Decision::Ask(q)
            }
        }
        (d, Verdict::Allow) => d,
    }
}

/// The `PreToolUse` verdicts of the calls of the step being planned, by call id: written by the
/// driver before the loop decides, read by [`Gated`].
pub(crate) type Verdicts = Arc<Mutex<HashMap<String, (Verdict, String)>>>;

/// A session's permissions with its `PreToolUse` hooks' verdicts combined in ([`combine`]).
pub(crate) struct Gated {
    /// The session's permissions with its world's preconditions.
    pub inner: crate::perm::Checked,
    /// The verdicts of the step's calls.
    pub verdicts: Verdicts,
}

impl Permissions for Gated {
    fn decide(&self, call: &ToolCall) -> Decision {
        let base = self.inner.decide(call);
        let verdict = self
            .verdicts
            .lock()
            .ok()
            .and_then(|v| v.get(&call.id).cloned());
        let perms = &self.inner.perms;
        combine(
            base,
            verdict.as_ref(),
            || {
                perms
                    .decide_in(Mode::Auto, &call.name, &call.arguments)
                    .action
                    == harness_permission::Action::Allow
            },
            || perms.question(call, None),
        )
    }

    fn check(&self, call: &ToolCall, earlier: &[ToolCall]) -> Option<String> {
        self.inner.check(call, earlier)
    }
}

/// The hooks of a session, and what runs them.
#[derive(Clone)]
pub struct Hooks {
    defs: Vec<(HookDef, regex::Regex)>,
    runner: Arc<dyn HookRunner>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field(
                "defs",
                &self.defs.iter().map(|(d, _)| d).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// A matcher as the regular expression it is: matched whole, case-insensitively; empty or `*`
/// matches everything.
fn matcher(m: &str) -> Result<regex::Regex, Error> {
    let m = m.trim();
    let pattern = if m.is_empty() || m == "*" {
        ".*".to_owned()
    } else {
        format!("(?i)^(?:{m})$")
    };
    regex::Regex::new(&pattern).map_err(|e| {
        hook_error(format!(
            "the matcher {m:?} is not a regular expression: {e}"
        ))
    })
}

/// A fingerprint of hook definitions (SHA-256 of their JSON, hex): what trusting a project's
/// hooks remembers, so that a changed hook is asked about again.
pub fn fingerprint(defs: &[HookDef]) -> String {
    use sha2::Digest as _;
    let text = serde_json::to_string(defs).unwrap_or_default();
    let digest = sha2::Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The payload's `permission_mode`, in Claude Code's words.
pub fn permission_mode(mode: Mode) -> &'static str {
    match mode {
        Mode::Manual => "default",
        Mode::Edit => "acceptEdits",
        Mode::Auto => "bypassPermissions",
        Mode::Plan => "plan",
    }
}

impl Hooks {
    /// The hooks `defs`, run by `runner`; a matcher that is not a regular expression is an
    /// error naming it.
    pub fn new(defs: Vec<HookDef>, runner: Arc<dyn HookRunner>) -> Result<Hooks, Error> {
        let defs = defs
            .into_iter()
            .map(|d| matcher(&d.matcher).map(|m| (d, m)))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Hooks { defs, runner })
    }

    /// Whether any hook runs on `event`.
    pub fn on(&self, event: HookEvent) -> bool {
        self.defs.iter().any(|(d, _)| d.event == event)
    }

    /// The hooks of `event` that match `tool` (every hook of an event without a tool).
    pub fn matching(&self, event: HookEvent, tool: Option<&str>) -> Vec<&HookDef> {
        self.defs
            .iter()
            .filter(|(d, m)| d.event == event && tool.is_none_or(|t| m.is_match(t)))
            .map(|(d, _)| d)
            .collect()
    }

    /// Runs the hooks of `event` matching `tool`, side by side, each with `payload` on stdin:
    /// their answers, in the order they are configured.
    pub async fn fire(
        &self,
        event: HookEvent,
        tool: Option<&str>,
        payload: &Value,
    ) -> Vec<HookAnswer> {
        let stdin = payload.to_string().into_bytes();
        let runs = self.matching(event, tool).into_iter().map(|def| {
            let stdin = stdin.clone();
            async move {
                let ran = self.runner.run(&def.command, stdin, def.time_limit()).await;
                answer(event, def, ran)
            }
        });
        futures_util::future::join_all(runs).await
    }
}

/// The payload every hook gets, with the event's own fields added by the caller.
pub fn payload(event: HookEvent, session_id: &str, cwd: &str, mode: Mode) -> Value {
    json!({
        "session_id": session_id,
        "cwd": cwd,
        "hook_event_name": event.as_str(),
        "permission_mode": permission_mode(mode),
    })
}
