//! Hooks (`[[hooks]]` in the config file, a project's `.llembas/hooks.toml` and
//! `.claude/settings.json`): real `sh` hooks around `-p` runs against the scripted model.

use harness_test_support::ScriptedServer;
use serde_json::{Value, json};

use super::*;

impl Sandbox {
    /// The config file with these `[[hooks]]` tables (`event`, `matcher`, `command`).
    fn hooks(&self, hooks: &[(&str, &str, &str)]) {
        self.hooks_timed(
            &hooks
                .iter()
                .map(|(e, m, c)| (*e, *m, *c, None))
                .collect::<Vec<_>>(),
        );
    }

    fn hooks_timed(&self, hooks: &[(&str, &str, &str, Option<u64>)]) {
        let mut toml = String::new();
        for (event, matcher, command, timeout) in hooks {
            toml.push_str(&format!(
                "[[hooks]]\nevent = {event:?}\nmatcher = {matcher:?}\ncommand = {command:?}\n"
            ));
            if let Some(t) = timeout {
                toml.push_str(&format!("timeout = {t}\n"));
            }
        }
        std::fs::write(self.home.path().join("config.toml"), toml).unwrap();
    }

    /// A file of the home directory (where the hooks leave what they saw).
    fn home_file(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.home.path().join(name)).ok()
    }

    fn at_home(&self, name: &str) -> String {
        self.home.path().join(name).display().to_string()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_tool_use_deny_reaches_the_model_and_the_file_is_not_written() {
    let sb = Sandbox::new();
    let seen = sb.at_home("pre.json");
    let answer = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no files named out.txt"}}"#;
    sb.hooks(&[(
        "PreToolUse",
        "Edit|Write",
        &format!("cat > '{seen}'; echo '{answer}'"),
    )]);
    let server = ScriptedServer::start(vec![
        tool_call("c1", "write", json!({"path": "out.txt", "content": "x\n"})),
        text(&["ok"]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(
            &server.base_url(),
            &["--mode", "auto", "-p", "write it"],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!sb.project.path().join("out.txt").exists());
    let r = tool_results(&server.bodies()[1]);
    assert!(r[0].contains("no files named out.txt"), "{r:?}");
    let payload: Value = serde_json::from_str(&sb.home_file("pre.json").unwrap()).unwrap();
    assert_eq!(payload["hook_event_name"], "PreToolUse");
    assert_eq!(payload["tool_name"], "write");
    assert_eq!(payload["tool_input"]["path"], "out.txt");
    assert_eq!(payload["permission_mode"], "bypassPermissions");
    assert_eq!(payload["cwd"], sb.root().display().to_string());
    assert!(
        payload["session_id"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hooks_allow_skips_the_modes_question_but_not_the_floor() {
    let sb = Sandbox::new();
    let allow =
        r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}"#;
    sb.hooks(&[("PreToolUse", "Bash", &format!("echo '{allow}'"))]);
    let server = ScriptedServer::start(vec![
        tool_call("c1", "bash", json!({"command": "touch allowed-file"})),
        tool_call("c2", "bash", json!({"command": "rm -rf ~"})),
        text(&["ok"]),
    ])
    .await
    .unwrap();
    // Manual mode asks before commands; nobody answers (stdin is empty).
    let run = sb
        .run(&server.base_url(), &["--mode", "manual", "-p", "go"], "")
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(sb.project.path().join("allowed-file").exists(), "{run:?}");
    assert!(sb.home.path().exists());
    let r = tool_results(&server.bodies()[2]);
    assert!(r.last().unwrap().contains("refused by the floor"), "{r:?}");
    assert!(!run.stderr.contains("not run: touch"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hooks_ask_puts_the_question_where_the_mode_would_run_the_call() {
    let sb = Sandbox::new();
    let ask = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"touching files is reviewed"}}"#;
    sb.hooks(&[("PreToolUse", "bash", &format!("echo '{ask}'"))]);
    let server = ScriptedServer::start(vec![
        tool_call("c1", "bash", json!({"command": "touch asked-file"})),
        tool_call("c2", "bash", json!({"command": "touch second-file"})),
        text(&["ok"]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(
            &server.base_url(),
            &["--mode", "auto", "-p", "go"],
            "n\ny\n",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!sb.project.path().join("asked-file").exists(), "{run:?}");
    assert!(sb.project.path().join("second-file").exists(), "{run:?}");
    assert!(
        run.stderr.contains("touching files is reviewed"),
        "{}",
        run.stderr
    );
    // With nobody to ask (the prompt on stdin), it is refused as every question is.
    let sb = Sandbox::new();
    sb.hooks(&[("PreToolUse", "bash", &format!("echo '{ask}'"))]);
    let server = ScriptedServer::start(vec![
        tool_call("c1", "bash", json!({"command": "touch asked-file"})),
        text(&["ok"]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(&server.base_url(), &["--mode", "auto", "-p", "-"], "go")
        .await;
    assert!(!sb.project.path().join("asked-file").exists(), "{run:?}");
    assert!(run.stderr.contains("nobody to ask"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_tool_use_feedback_is_added_to_the_result() {
    let sb = Sandbox::new();
    let seen = sb.at_home("post.json");
    sb.hooks(&[(
        "PostToolUse",
        "*",
        &format!(
            r#"cat > '{seen}'; echo '{{"decision":"block","reason":"the linter failed: fix it"}}'"#
        ),
    )]);
    let server = ScriptedServer::start(vec![
        tool_call("c1", "bash", json!({"command": "echo hello-from-bash"})),
        text(&["ok"]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(&server.base_url(), &["--mode", "auto", "-p", "go"], "")
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let r = tool_results(&server.bodies()[1]);
    assert!(r[0].contains("hello-from-bash"), "{r:?}");
    assert!(r[0].contains("the linter failed: fix it"), "{r:?}");
    let payload: Value = serde_json::from_str(&sb.home_file("post.json").unwrap()).unwrap();
    assert_eq!(payload["hook_event_name"], "PostToolUse");
    assert!(
        payload["tool_response"]
            .as_str()
            .unwrap()
            .contains("hello-from-bash")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_prompt_submit_blocks_or_adds_context() {
    let sb = Sandbox::new();
    sb.hooks(&[(
        "UserPromptSubmit",
        "",
        "grep -q secret && { echo 'no secrets in prompts' >&2; exit 2; }; echo 'The build is green.'",
    )]);
    let server = ScriptedServer::start(vec![text(&["ok"])]).await.unwrap();
    let run = sb
        .run(&server.base_url(), &["-p", "here is my secret"], "")
        .await;
    assert_ne!(run.code, 0, "{run:?}");
    assert!(
        run.stderr.contains("no secrets in prompts"),
        "{}",
        run.stderr
    );
    assert!(server.bodies().is_empty());

    let run = sb.run(&server.base_url(), &["-p", "say hi"], "").await;
    assert_eq!(run.code, 0, "{run:?}");
    let m = messages(&server.bodies()[0]);
    let user = m[1]["content"].as_str().unwrap();
    assert!(user.starts_with("say hi"), "{user}");
    assert!(user.contains("The build is green."), "{user}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_hook_sends_the_model_on_at_most_three_times() {
    let sb = Sandbox::new();
    let seen = sb.at_home("stops.jsonl");
    sb.hooks(&[(
        "Stop",
        "",
        &format!(
            r#"cat >> '{seen}'; echo >> '{seen}'; echo '{{"decision":"block","reason":"run the tests"}}'"#
        ),
    )]);
    let server = ScriptedServer::start(vec![
        text(&["one"]),
        text(&["two"]),
        text(&["three"]),
        text(&["four"]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(&server.base_url(), &["--output", "json", "-p", "go"], "")
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 4, "{run:?}");
    // One turn for the front end, however often the hook sent the model on.
    let ended = run
        .stdout
        .lines()
        .filter(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| v["type"] == "turn_ended"))
        .count();
    assert_eq!(ended, 1, "{}", run.stdout);
    let m = messages(&bodies[1]);
    assert_eq!(
        m.last().unwrap()["content"],
        "Stop hook feedback: run the tests"
    );
    let stops: Vec<Value> = sb
        .home_file("stops.jsonl")
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(stops.len(), 4);
    assert_eq!(stops[0]["stop_hook_active"], false);
    assert_eq!(stops[1]["stop_hook_active"], true);
    assert!(run.stdout.contains("the turn ends here"), "{}", run.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_start_context_goes_with_the_first_prompt() {
    let sb = Sandbox::new();
    sb.hooks(&[
        (
            "SessionStart",
            "",
            r#"echo '{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"The release is on Friday."}}'"#,
        ),
        // Claude Code's variable names the project; the model's key is not handed over.
        (
            "SessionStart",
            "",
            r#"echo "project=$CLAUDE_PROJECT_DIR key=${OPENAI_API_KEY:-none}""#,
        ),
    ]);
    let server = ScriptedServer::start(vec![text(&["ok"])]).await.unwrap();
    let mut command = sb.command(&server.base_url(), &["-p", "plan"]);
    command.env("OPENAI_API_KEY", "sk-not-for-hooks");
    let out = command.output().await.unwrap();
    assert!(out.status.success(), "{out:?}");
    let m = messages(&server.bodies()[0]);
    let user = m[1]["content"].as_str().unwrap();
    assert!(user.starts_with("plan\n\n"), "{user}");
    assert!(user.contains("The release is on Friday."), "{user}");
    assert!(
        user.contains(&format!("project={} key=none", sb.root().display())),
        "{user}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_terminal_asks_before_a_projects_hooks_run_and_again_when_they_change() {
    use expectrl::Expect as _;
    let sb = Sandbox::new();
    let hooks = |file: &str| {
        format!(
            "[[hooks]]\nevent = \"UserPromptSubmit\"\ncommand = \"touch '{}'\"\n",
            sb.at_home(file)
        )
    };
    sb.write(".llembas/hooks.toml", &hooks("ran"));
    let server = ScriptedServer::start(vec![text(&["Hi."]), text(&["Hi again."])])
        .await
        .unwrap();
    let (root, home, url) = (sb.root(), sb.home.path().to_path_buf(), server.base_url());
    let talk = move |answer: &'static str, reply: &'static str| {
        let (root, home, url) = (root.clone(), home.clone(), url.clone());
        tokio::task::spawn_blocking(move || {
            let mut s = terminal_session(&root, &home, &url, "manual");
            s.expect("UserPromptSubmit: touch").unwrap();
            s.expect("[y/N]").unwrap();
            s.send(format!("{answer}\r")).unwrap();
            s.expect("manual ›").unwrap();
            s.send("hello\r").unwrap();
            s.expect(reply).unwrap();
            s.expect("manual ›").unwrap();
            s.send("/quit\r").unwrap();
            s.expect("saved").unwrap();
        })
    };
    talk("y", "Hi.").await.unwrap();
    assert!(
        std::fs::read_to_string(sb.home.path().join("data/trusted-hooks.json"))
            .unwrap()
            .contains(&sb.root().display().to_string())
    );
    assert!(std::path::Path::new(&sb.at_home("ran")).exists());
    // Changed: asked again; a no keeps it from running.
    sb.write(".llembas/hooks.toml", &hooks("ran-changed"));
    talk("n", "Hi again.").await.unwrap();
    assert!(!std::path::Path::new(&sb.at_home("ran-changed")).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_hook_is_killed_at_its_timeout_and_said() {
    let sb = Sandbox::new();
    sb.hooks_timed(&[(
        "PreToolUse",
        "bash",
        "sleep 600 & echo $! > sleep.pid; wait",
        Some(1),
    )]);
    // The call runs after its hook was stopped (auto mode's decision stands) and looks for the
    // hook's `sleep` while llembas still runs: gone, or a zombie nobody reaped yet.
    let look = "p=$(cat sleep.pid); if [ -e /proc/$p ] && \
                [ \"$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)\" != Z ]; \
                then echo sleep-runs; else echo sleep-gone; fi";
    let server = ScriptedServer::start(vec![
        tool_call("c1", "bash", json!({"command": look})),
        text(&["ok"]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(&server.base_url(), &["--mode", "auto", "-p", "go"], "")
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stderr.contains("did not answer within 1 s"),
        "{}",
        run.stderr
    );
    let r = tool_results(&server.bodies()[1]);
    assert!(r[0].contains("sleep-gone"), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_hook_leaves_running_ends_with_it() {
    let sb = Sandbox::new();
    // The hook answers at once, a `sleep` left behind with its output elsewhere.
    sb.hooks_timed(&[(
        "PreToolUse",
        "bash",
        "sleep 600 >/dev/null 2>&1 & echo $! > sleep.pid; exit 0",
        Some(30),
    )]);
    let look = "p=$(cat sleep.pid); if [ -e /proc/$p ] && \
                [ \"$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)\" != Z ]; \
                then echo sleep-runs; else echo sleep-gone; fi";
    let server = ScriptedServer::start(vec![
        tool_call("c1", "bash", json!({"command": look})),
        text(&["ok"]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(&server.base_url(), &["--mode", "auto", "-p", "go"], "")
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let r = tool_results(&server.bodies()[1]);
    assert!(r[0].contains("sleep-gone"), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn project_hooks_run_only_once_trusted_and_a_change_asks_again() {
    let sb = Sandbox::new();
    let marker = sb.at_home("ran");
    let hooks = |file: &str| {
        format!(
            "[[hooks]]\nevent = \"UserPromptSubmit\"\ncommand = \"touch '{}'\"\n",
            sb.at_home(file)
        )
    };
    sb.write(".llembas/hooks.toml", &hooks("ran"));
    let server = ScriptedServer::start((0..4).map(|_| text(&["ok"])).collect())
        .await
        .unwrap();
    let run = sb.run(&server.base_url(), &["-p", "go"], "").await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!std::path::Path::new(&marker).exists());
    assert!(run.stderr.contains("not trusted yet"), "{}", run.stderr);
    assert!(
        run.stderr.contains("--trust-project-hooks"),
        "{}",
        run.stderr
    );

    let run = sb
        .run(
            &server.base_url(),
            &["--trust-project-hooks", "-p", "go"],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(std::path::Path::new(&marker).exists());
    std::fs::remove_file(&marker).unwrap();
    // Remembered.
    let run = sb.run(&server.base_url(), &["-p", "go"], "").await;
    assert!(std::path::Path::new(&marker).exists(), "{run:?}");
    // A changed hook is not the one trusted.
    sb.write(".llembas/hooks.toml", &hooks("ran-changed"));
    let run = sb.run(&server.base_url(), &["-p", "go"], "").await;
    assert!(!std::path::Path::new(&sb.at_home("ran-changed")).exists());
    assert!(run.stderr.contains("not trusted yet"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_settings_hooks_work() {
    let sb = Sandbox::new();
    sb.write(
        ".claude/settings.json",
        &json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
            "command": "echo 'commands are reviewed first' >&2; exit 2", "timeout": 30}]}]}})
        .to_string(),
    );
    let server = ScriptedServer::start(vec![
        tool_call("c1", "bash", json!({"command": "touch made"})),
        text(&["ok"]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(
            &server.base_url(),
            &["--trust-project-hooks", "--mode", "auto", "-p", "go"],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!sb.project.path().join("made").exists());
    let r = tool_results(&server.bodies()[1]);
    assert!(r[0].contains("commands are reviewed first"), "{r:?}");
}

#[test]
fn the_trust_question_names_each_hook() {
    let hooks = llembas_cli::hooks::ProjectHooks {
        root: "/home/me/project".into(),
        defs: vec![
            harness_agent::hooks::HookDef {
                event: harness_agent::hooks::HookEvent::PreToolUse,
                matcher: "Bash".into(),
                command: "./check.sh".into(),
                timeout: Some(30),
            },
            harness_agent::hooks::HookDef {
                event: harness_agent::hooks::HookEvent::Stop,
                matcher: String::new(),
                command: "cargo test -q".into(),
                timeout: None,
            },
        ],
        notes: Vec::new(),
    };
    insta::assert_snapshot!(llembas_cli::hooks::trust_question(&hooks));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_prompt_gives_the_terminal_its_prompt_back() {
    let sb = Sandbox::new();
    sb.hooks(&[(
        "UserPromptSubmit",
        "",
        "echo 'prompts wait until the freeze ends' >&2; exit 2",
    )]);
    let server = ScriptedServer::start(vec![]).await.unwrap();
    let (root, home, url) = (sb.root(), sb.home.path().to_path_buf(), server.base_url());
    tokio::task::spawn_blocking(move || {
        let mut s = super::terminal::Screen {
            session: terminal_session(&root, &home, &url, "manual"),
            bytes: Vec::new(),
        };
        s.expect("manual ›");
        s.send_line("ship it");
        s.expect("prompts wait until the freeze ends");
        s.expect("manual ›");
        s.send_line("/quit");
    })
    .await
    .unwrap();
    assert!(server.bodies().is_empty());
}
