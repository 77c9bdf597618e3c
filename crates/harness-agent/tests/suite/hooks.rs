//! Hooks: answers read as Claude Code writes them, matchers, Claude Code's settings, how a
//! `PreToolUse` verdict combines with the engine's decision, and sessions whose hooks are real
//! `sh` commands.

use std::sync::Arc;
use std::time::Duration;

use harness_agent::hooks::{
    HookDef, HookEvent, HookOutput, HookRunner, Hooks, Verdict, answer, combine,
    from_claude_settings,
};
use harness_agent::{BoxFuture, MemoryStore, Reply, ScriptedModel, SeamError, SessionBuilder};
use harness_core::protocol::{Mode, PermissionQuestion};
use harness_loop::session::Decision;
use harness_spec::Risk;
use serde_json::json;

use super::*;

/// Runs hooks with `sh -c`, as a front end does (no timeout: these hooks end).
struct Sh;

impl HookRunner for Sh {
    fn run<'a>(
        &'a self,
        command: &'a str,
        stdin: Vec<u8>,
        _timeout: Duration,
    ) -> BoxFuture<'a, Result<HookOutput, SeamError>> {
        let command = command.to_owned();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                use std::io::Write as _;
                let mut child = std::process::Command::new("sh")
                    .arg("-c")
                    .arg(&command)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|e| SeamError::command(&command, e))?;
                let _ = child.stdin.take().unwrap().write_all(&stdin);
                let out = child
                    .wait_with_output()
                    .map_err(|e| SeamError::command(&command, e))?;
                Ok(HookOutput {
                    code: out.status.code(),
                    stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                    stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                    timed_out: false,
                })
            })
            .await
            .unwrap()
        })
    }
}

fn def(event: HookEvent, matcher: &str, command: &str) -> HookDef {
    HookDef {
        event,
        matcher: matcher.into(),
        command: command.into(),
        timeout: None,
    }
}

fn out(code: i32, stdout: &str, stderr: &str) -> Result<HookOutput, SeamError> {
    Ok(HookOutput {
        code: Some(code),
        stdout: stdout.into(),
        stderr: stderr.into(),
        timed_out: false,
    })
}

fn question(reason: &str) -> PermissionQuestion {
    PermissionQuestion {
        tool: "bash".into(),
        risk: Risk::Execute,
        subject: "make".into(),
        pattern: Some("make *".into()),
        reason: Some(reason.into()),
        change: None,
    }
}

#[test]
fn answers_are_read_as_claude_code_writes_them() {
    let pre = def(HookEvent::PreToolUse, "Bash", "check");
    let a = answer(HookEvent::PreToolUse, &pre, out(2, "", "not on main\n"));
    assert_eq!(a.permission, Some((Verdict::Deny, "not on main".into())));
    let json = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"review"}}"#;
    let a = answer(HookEvent::PreToolUse, &pre, out(0, json, ""));
    assert_eq!(a.permission, Some((Verdict::Ask, "review".into())));
    let a = answer(
        HookEvent::PreToolUse,
        &pre,
        out(0, r#"{"decision":"approve","reason":"fine"}"#, ""),
    );
    assert_eq!(a.permission, Some((Verdict::Allow, "fine".into())));
    // Another exit code changes nothing and is said.
    let a = answer(HookEvent::PreToolUse, &pre, out(1, "", "oops"));
    assert_eq!(a.permission, None);
    assert!(a.problem.unwrap().contains("exited with 1: oops"));
    // A timed-out hook allows nothing.
    let timed = Ok(HookOutput {
        timed_out: true,
        ..HookOutput::default()
    });
    let a = answer(HookEvent::PreToolUse, &pre, timed);
    assert_eq!(a.permission, None);
    assert!(a.problem.unwrap().contains("within 60 s"));
    // Plain stdout is context where the event takes it.
    let prompt = def(HookEvent::UserPromptSubmit, "", "ctx");
    let a = answer(
        HookEvent::UserPromptSubmit,
        &prompt,
        out(0, "be brief\n", ""),
    );
    assert_eq!(a.context.as_deref(), Some("be brief"));
    let post = def(HookEvent::PostToolUse, "", "lint");
    let a = answer(
        HookEvent::PostToolUse,
        &post,
        out(0, r#"{"decision":"block","reason":"lint failed"}"#, ""),
    );
    assert_eq!(a.block.as_deref(), Some("lint failed"));
    assert_eq!(a.permission, None);
}

#[test]
fn matchers_are_whole_regular_expressions_without_case() {
    let hooks = Hooks::new(
        vec![
            def(HookEvent::PreToolUse, "Bash|Edit|Write", "a"),
            def(HookEvent::PreToolUse, "", "b"),
            def(HookEvent::PreToolUse, "*", "c"),
            def(HookEvent::PreToolUse, "Read", "d"),
            def(HookEvent::Stop, "", "e"),
        ],
        Arc::new(Sh),
    )
    .unwrap();
    let names = |tool: &str| -> Vec<String> {
        hooks
            .matching(HookEvent::PreToolUse, Some(tool))
            .iter()
            .map(|d| d.command.clone())
            .collect()
    };
    assert_eq!(names("bash"), ["a", "b", "c"]);
    assert_eq!(names("write"), ["a", "b", "c"]);
    assert_eq!(names("read"), ["b", "c", "d"]);
    assert_eq!(names("read_many"), ["b", "c"]);
    assert!(Hooks::new(vec![def(HookEvent::Stop, "(", "x")], Arc::new(Sh)).is_err());
}

#[test]
fn claude_code_settings_give_their_hooks() {
    let text = json!({"permissions": {}, "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh", "timeout": 30}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "make check"}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}]
    }})
    .to_string();
    let (defs, unknown) = from_claude_settings(&text).unwrap();
    assert_eq!(unknown, ["Notification"]);
    assert_eq!(
        defs,
        [
            HookDef {
                event: HookEvent::PreToolUse,
                matcher: "Bash".into(),
                command: "./guard.sh".into(),
                timeout: Some(30),
            },
            def(HookEvent::Stop, "", "make check"),
        ]
    );
    assert!(from_claude_settings("{}").unwrap().0.is_empty());
}

#[test]
fn a_hooks_verdict_never_lets_through_what_is_refused_or_asked_in_every_mode() {
    let deny = || Decision::Deny {
        reason: "refused by the floor".into(),
    };
    let allow = (Verdict::Allow, String::new());
    // The floor's (or a rule's) refusal stands whatever the hook says.
    for v in [Verdict::Allow, Verdict::Ask, Verdict::Deny] {
        let d = combine(deny(), Some(&(v, "x".into())), || true, || question("q"));
        assert_eq!(d, deny());
    }
    // Allow skips the mode's question only (what auto mode would run)...
    let d = combine(
        Decision::Ask(question("manual mode asks")),
        Some(&allow),
        || true,
        || question("q"),
    );
    assert_eq!(d, Decision::Allow);
    // ...not one asked in every mode.
    let d = combine(
        Decision::Ask(question("asked in every mode")),
        Some(&allow),
        || false,
        || question("q"),
    );
    assert_eq!(d, Decision::Ask(question("asked in every mode")));
    // Deny refuses with the hook's reason; ask asks where the mode would run it.
    let d = combine(
        Decision::Allow,
        Some(&(Verdict::Deny, "not on main".into())),
        || true,
        || question("q"),
    );
    assert_eq!(
        d,
        Decision::Deny {
            reason: "not on main".into()
        }
    );
    let Decision::Ask(q) = combine(
        Decision::Allow,
        Some(&(Verdict::Ask, "review".into())),
        || true,
        || question("q"),
    ) else {
        panic!("a hook's ask asks");
    };
    assert_eq!(q.reason.as_deref(), Some("a PreToolUse hook asks: review"));
    assert_eq!(q.pattern, None);
    // No verdict: the engine's decision.
    assert_eq!(
        combine(Decision::Allow, None, || true, || question("q")),
        Decision::Allow
    );
}

fn hooked(model: &ScriptedModel, world: Arc<TestWorld>, defs: Vec<HookDef>) -> SessionBuilder {
    SessionBuilder::new(Arc::new(model.clone()), world)
        .store(Arc::new(MemoryStore::default()))
        .hooks(Arc::new(Hooks::new(defs, Arc::new(Sh)).unwrap()))
}

#[tokio::test]
async fn a_pre_tool_use_deny_is_the_calls_answer_and_an_allow_skips_manual_modes_question() {
    // Deny: auto mode would run it; the model reads the hook's reason.
    let model = ScriptedModel::new([Reply::call("launch", json!({})), Reply::text("ok")]);
    let world = TestWorld::new();
    let built = hooked(
        &model,
        world.clone(),
        vec![def(
            HookEvent::PreToolUse,
            "launch",
            "echo 'no launches today' >&2; exit 2",
        )],
    )
    .mode(Mode::Auto)
    .prompt("Launch it.");
    let mut spawned = built.one_shot(None).spawn().unwrap();
    while spawned.events.recv().await.is_some() {}
    spawned.run.finished().await.unwrap().result.unwrap();
    assert!(world.calls.lock().unwrap().is_empty());
    let sent = serde_json::to_string(&model.requests()[1].messages).unwrap();
    assert!(sent.contains("no launches today"), "{sent}");

    // Allow: manual mode's question is not put, and the call runs.
    let model = ScriptedModel::new([Reply::call("launch", json!({})), Reply::text("ok")]);
    let world = TestWorld::new();
    let allow = r#"{"hookSpecificOutput":{"permissionDecision":"allow"}}"#;
    let built = hooked(
        &model,
        world.clone(),
        vec![def(
            HookEvent::PreToolUse,
            "LAUNCH",
            &format!("echo '{allow}'"),
        )],
    )
    .mode(Mode::Manual)
    .prompt("Launch it.");
    let mut spawned = built.one_shot(None).spawn().unwrap();
    let mut outs = Vec::new();
    while let Some(o) = spawned.events.recv().await {
        // Were it asked, nobody would allow it.
        if let Event::Core(CoreEvent::ToolCallAsked { call_id, .. }) = &o {
            spawned.session.submit(harness_agent::Op::Answer {
                call_id: call_id.clone(),
                answer: harness_core::protocol::Answer::Deny { feedback: None },
            });
        }
        outs.push(o);
    }
    spawned.run.finished().await.unwrap().result.unwrap();
    assert!(
        !events(&outs)
            .iter()
            .any(|e| matches!(e, CoreEvent::ToolCallAsked { .. }))
    );
    assert_eq!(*world.calls.lock().unwrap(), ["launch"]);
}
