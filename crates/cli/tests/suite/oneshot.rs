//! One-shot runs (`-p`) against the scripted model server.

use harness_test_support::{Reply, ScriptedServer};
use serde_json::{Value, json};

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_text_and_saves_the_session() {
    let server = ScriptedServer::start(vec![text(&["Hello", " there."])])
        .await
        .unwrap();
    let sb = Sandbox::new();
    let run = sb.run(&server.base_url(), &["-p", "say hello"], "").await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "Hello there.\n");
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 1);
    let m = messages(&bodies[0]);
    assert_eq!(m[0]["role"], "system");
    assert!(
        m[0]["content"]
            .as_str()
            .unwrap()
            .contains(&sb.root().display().to_string())
    );
    assert_eq!(m[1], json!({"role": "user", "content": "say hello"}));
    assert_eq!(bodies[0]["model"], "scripted");
    let t = sb.transcript();
    assert_eq!(t.first().unwrap()["type"], "turn_started");
    assert_eq!(t.last().unwrap()["type"], "turn_ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_edits_runs_and_plans() {
    let sb = Sandbox::new();
    sb.write("src/lib.rs", "pub fn answer() -> u32 {\n    41\n}\n");
    let root = sb.root();
    let lib = root.join("src/lib.rs").display().to_string();
    let server = ScriptedServer::start(vec![
        calls(&[
            (
                "c1",
                "plan_write",
                json!({"title": "Fix the answer", "phases": [
                {"title": "Work", "tasks": [{"title": "read lib.rs"}, {"title": "fix it"}]}]}),
            ),
            ("c2", "read", json!({"path": "src/lib.rs"})),
        ]),
        tool_call(
            "c3",
            "edit",
            json!({"path": lib, "old_string": "41", "new_string": "42"}),
        ),
        calls(&[
            (
                "c4",
                "plan_update",
                json!({"tasks": [{"id": "t1", "status": "done"}, {"id": "t2", "status": "done"}]}),
            ),
            (
                "c5",
                "bash",
                json!({"command": "grep -c 42 src/lib.rs && echo done-$((6*7))"}),
            ),
        ]),
        text(&["The answer is now 42."]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(
            &server.base_url(),
            &["--mode", "auto", "-p", "make the answer 42"],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "The answer is now 42.\n");
    assert_eq!(
        sb.read("src/lib.rs"),
        "pub fn answer() -> u32 {\n    42\n}\n"
    );

    let bodies = server.bodies();
    assert_eq!(bodies.len(), 4);
    // Step 2 got the plan's answer and the read, numbered, its header naming the file as
    // grep lists it (relative to the working directory).
    let r = tool_results(&bodies[1]);
    assert_eq!(r.len(), 2, "{r:?}");
    assert!(r[0].contains("Plan written: 2 tasks"), "{}", r[0]);
    assert!(r[0].starts_with("[#"), "every result has its id: {}", r[0]);
    assert!(r[1].contains("\nsrc/lib.rs (hash "), "{}", r[1]);
    assert!(r[1].contains("2\t    41"), "{}", r[1]);
    // The plan is in the system text from then on.
    let system = messages(&bodies[1])[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains("Fix the answer"), "{system}");
    // The edit answered with its diff.
    let r = tool_results(&bodies[2]);
    let edit = r.last().unwrap();
    assert!(
        edit.contains("-    41") && edit.contains("+    42"),
        "{edit}"
    );
    // The command ran in the project and its exit code came back.
    let r = tool_results(&bodies[3]);
    let bash = r.last().unwrap();
    assert!(bash.contains("1\ndone-42\nexit code 0"), "{bash}");
    // The assistant's calls went back to the server with our ids, paired with results.
    let m = messages(&bodies[3]);
    let calls: Vec<&Value> = m.iter().filter(|m| m["role"] == "assistant").collect();
    assert_eq!(calls.len(), 3);
    // stderr shows the activity.
    assert!(
        run.stderr.contains("$ grep -c 42 src/lib.rs"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("+    42"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asks_on_stdin_and_passes_the_note_on() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![
        tool_call("c1", "bash", json!({"command": "touch made-by-bash"})),
        tool_call("c2", "bash", json!({"command": "touch second"})),
        text(&["ok"]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(
            &server.base_url(),
            &["--mode", "manual", "-p", "make files"],
            "n: use the write tool\ny\n",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!sb.project.path().join("made-by-bash").exists());
    assert!(sb.project.path().join("second").exists());
    let bodies = server.bodies();
    let r = tool_results(&bodies[1]);
    assert!(
        r.last()
            .unwrap()
            .ends_with("\nNot run: the person declined this call and said: use the write tool"),
        "{r:?}"
    );
    assert!(run.stderr.contains("touch made-by-bash"), "{}", run.stderr);
    assert!(
        run.stderr.contains("[a]lways allow `touch *`"),
        "{}",
        run.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_to_ask_is_no_with_a_note() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![
        tool_call("c1", "bash", json!({"command": "touch nope"})),
        text(&["gave up"]),
    ])
    .await
    .unwrap();
    // The prompt comes on stdin, so nothing is left to answer with.
    let run = sb
        .run(
            &server.base_url(),
            &["--mode", "manual", "-p", "-"],
            "make a file\n",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!sb.project.path().join("nope").exists());
    assert!(
        run.stderr
            .contains("llembas: not run: touch nope (nobody to ask"),
        "{}",
        run.stderr
    );
    assert_eq!(messages(&server.bodies()[0])[1]["content"], "make a file\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_job_wakes_the_session() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "bash",
            json!({"command": "sleep 1; echo built > out.txt; echo finished", "background": true}),
        ),
        text(&["Started the build."]),
        text(&["The build finished."]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(
            &server.base_url(),
            &["--mode", "auto", "-p", "build it"],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(sb.read("out.txt"), "built\n");
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 3, "{bodies:?}");
    let started = tool_results(&bodies[1]);
    assert!(
        started[0].contains("\nStarted job 1 (command)"),
        "{started:?}"
    );
    // The third request is the machine turn the job's end started.
    let m = messages(&bodies[2]);
    let wake = m.last().unwrap()["content"].as_str().unwrap();
    assert!(
        wake.starts_with("<job id=\"1\" kind=\"command\" state=\"done\">"),
        "{wake}"
    );
    assert!(wake.contains("finished"), "{wake}");
    assert_eq!(run.stdout, "Started the build.\nThe build finished.\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_output_streams_the_events() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![tool_call("c1", "list", json!({})), text(&["done"])])
        .await
        .unwrap();
    sb.write("a.txt", "a");
    let run = sb
        .run(&server.base_url(), &["--output", "json", "-p", "look"], "")
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let types: Vec<String> = run
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(types.first().map(String::as_str), Some("session"));
    assert_eq!(types.get(1).map(String::as_str), Some("user_input"));
    assert!(types.contains(&"tool_call_started".to_owned()), "{types:?}");
    assert!(
        types.contains(&"tool_call_finished".to_owned()),
        "{types:?}"
    );
    assert_eq!(types[types.len() - 2], "turn_ended");
    assert_eq!(types.last().map(String::as_str), Some("result"));
}

/// The JSON stream names its session first and ends with the run's totals; text mode names
/// the session on stderr at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_runs_name_their_session_and_totals() {
    let sb = Sandbox::new();
    let root = sb.root();
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "write",
            json!({"path": "made.txt", "content": "made\n"}),
        ),
        text(&["Wrote it."]),
        text(&["Hello."]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(
            &server.base_url(),
            &["--mode", "auto", "--output", "json", "-p", "make a file"],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let id = sb.sessions()[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines[0],
        json!({"type": "session", "session_id": id, "model": "scripted", "resumed": false})
    );
    let mut result = lines.last().unwrap().clone();
    assert!(result["duration_ms"].as_u64().is_some(), "{result}");
    result.as_object_mut().unwrap().remove("duration_ms");
    assert_eq!(
        result,
        json!({
            "type": "result",
            "session_id": id,
            "session_kept": true,
            "exit_reason": {"kind": "finished"},
            "is_error": false,
            "requests": 2,
            "usage": {"input_tokens": 0, "output_tokens": 0},
            "cost_usd": null,
            "files_changed": [root.join("made.txt").display().to_string()],
        })
    );
    // Text mode: the session on stderr, once the answer is out.
    let run = sb
        .run(&server.base_url(), &["--resume", &id, "-p", "hello"], "")
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "Hello.\n");
    assert_eq!(
        run.stderr.lines().last(),
        Some(format!("llembas: session {id} (llembas --resume {id})").as_str()),
        "{run:?}"
    );
}

/// `--allow TOOL:PATTERN` allows matching calls for one run; others are still asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_flag_allows_for_one_run() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![
        calls(&[
            ("c1", "bash", json!({"command": "echo allowed-run"})),
            ("c2", "bash", json!({"command": "touch other.txt"})),
        ]),
        text(&["ok"]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(
            &server.base_url(),
            &["--mode", "manual", "--allow", "bash:echo *", "-p", "go"],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let results = tool_results(&server.bodies()[1]);
    assert!(results[0].contains("allowed-run"), "{results:?}");
    assert!(!sb.project.path().join("other.txt").exists());
    assert!(run.stderr.contains("not run: touch other.txt"), "{run:?}");
    // A rule with no pattern is refused.
    let bad = sb
        .run(&server.base_url(), &["--allow", "bash:", "-p", "go"], "")
        .await;
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(bad.stderr.contains("TOOL:PATTERN"), "{bad:?}");
}

async fn interrupt_when(
    sb: &Sandbox,
    base_url: &str,
    args: &[&str],
    ready: impl Fn() -> bool,
) -> Run {
    let mut child = sb.command(base_url, args).spawn().unwrap();
    drop(child.stdin.take());
    let pid = child.id().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !ready() {
        assert!(std::time::Instant::now() < deadline, "never got ready");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    let out = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("llembas did not stop after Ctrl-C")
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_cancels_a_stalled_answer() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![
        Reply::sse_chunks(&[harness_test_support::chunk(
            json!({"content": "Thinking about"}),
            None,
        )])
        .stalling(),
    ])
    .await
    .unwrap();
    // The stall starts after the first piece: no [DONE] comes.
    let stalled = server.base_url();
    let run = interrupt_when(&sb, &stalled, &["-p", "go"], || {
        server.requests().len() == 1
    })
    .await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("llembas: cancelled (session"),
        "{}",
        run.stderr
    );
    let t = sb.transcript();
    assert_eq!(t.last().unwrap()["reason"]["kind"], "cancelled", "{t:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_a_running_command() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![tool_call(
        "c1",
        "bash",
        json!({"command": "echo started > started.txt; sleep 30; echo late > late.txt"}),
    )])
    .await
    .unwrap();
    let started = sb.project.path().join("started.txt");
    let run = interrupt_when(
        &sb,
        &server.base_url(),
        &["--mode", "auto", "-p", "go"],
        || started.exists(),
    )
    .await;
    assert_eq!(run.code, 1, "{run:?}");
    assert!(!sb.project.path().join("late.txt").exists());
    let t = sb.transcript();
    let result = t.iter().find(|e| e["type"] == "tool_result").unwrap();
    assert_eq!(result["tool"], "bash");
    assert_eq!(t.last().unwrap()["reason"]["kind"], "cancelled", "{t:?}");
    assert_eq!(server.requests().len(), 1, "no step after the cancel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copes_with_a_quirky_server() {
    let sb = Sandbox::new();
    sb.write("notes.txt", "remember the milk\n");
    // `data:` without a space, arguments as an object, finish_reason stop with a call,
    // reasoning inside <think> in the content of the next answer.
    let call = Reply::sse_lines(&[
        r#"data:{"choices":[{"index":0,"delta":{"role":"assistant","content":null}}]}"#,
        "",
        r#"data:{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x","type":"function","function":{"name":"read","arguments":{"path":"notes.txt"}}}]}}]}"#,
        "",
        r#"data:{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        "",
        "data: [DONE]",
        "",
    ]);
    let server = ScriptedServer::start(vec![
        call,
        text(&["<think>the file says", " milk</think>", "Buy milk."]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(&server.base_url(), &["-p", "what do my notes say?"], "")
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout.trim(), "Buy milk.");
    assert!(
        run.stderr.contains("the file says"),
        "reasoning is shown dimmed: {}",
        run.stderr
    );
    let r = tool_results(&server.bodies()[1]);
    assert!(r[0].contains("1\tremember the milk"), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_session_resumes() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![
        calls(&[(
            "c1",
            "plan_write",
            json!({"title": "Long job", "phases": [
                {"title": "Work", "tasks": [{"title": "wait"}]}]}),
        )]),
        tool_call(
            "c2",
            "bash",
            json!({"command": "touch running.txt; sleep 5"}),
        ),
        text(&["Picked up where we were."]),
    ])
    .await
    .unwrap();
    // First run: killed (SIGKILL, no chance to tidy up) while its command runs.
    let mut child = sb
        .command(
            &server.base_url(),
            &["--mode", "auto", "-p", "start the long job"],
        )
        .spawn()
        .unwrap();
    let marker = sb.project.path().join("running.txt");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !marker.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    child.kill().await.unwrap();
    let _ = child.wait().await;
    let before = sb.transcript();
    // The call was written as started before it ran.
    assert_eq!(
        before.last().unwrap()["type"],
        "calls_started",
        "{before:?}"
    );

    // Second run: --resume continues the newest session of this directory.
    let run = sb
        .run(
            &server.base_url(),
            &["--mode", "auto", "--resume", "-p", "go on"],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "Picked up where we were.\n");
    let bodies = server.bodies();
    let m = messages(&bodies[2]);
    let roles: Vec<&str> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "user"
        ],
        "{m:?}"
    );
    assert_eq!(m[1]["content"], "start the long job");
    assert!(
        m[5]["content"]
            .as_str()
            .unwrap()
            .contains("Interrupted: this call was running when the session's process ended"),
        "the call the crash cut short is answered truthfully: {}",
        m[5]
    );
    assert_eq!(m[6]["content"], "go on");
    // The plan came back with the session.
    assert!(m[0]["content"].as_str().unwrap().contains("Long job"));
    // Still one session, its transcript continued.
    let after = sb.transcript();
    assert!(after.len() > before.len());
    assert_eq!(&after[..before.len()], &before[..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_runs_a_read_only_subagent() {
    let sb = Sandbox::new();
    sb.write("src/retry.rs", "fn retry() { /* 503 */ }\n");
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "task",
            json!({"agent": "explore", "prompt": "Find where 503 is retried."}),
        ),
        tool_call("s1", "grep", json!({"pattern": "503"})),
        text(&["In src/retry.rs:1."]),
        text(&["The subagent found it in src/retry.rs."]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(
            &server.base_url(),
            &["--mode", "auto", "-p", "where is 503 retried?"],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "The subagent found it in src/retry.rs.\n");
    // The person saw the subagent's own call, under the task.
    assert!(run.stderr.contains("  ↳ grep 503\n"), "{}", run.stderr);
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 4);
    // The subagent's own session: the explorer's text, only tools that read.
    let child = &bodies[1];
    let m = messages(child);
    assert!(
        m[0]["content"]
            .as_str()
            .unwrap()
            .contains("read-only explorer")
    );
    assert_eq!(m[1]["content"], "Find where 503 is retried.");
    let tools: Vec<&str> = child["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"grep") && tools.contains(&"read"),
        "{tools:?}"
    );
    for t in ["bash", "write", "edit", "task"] {
        assert!(!tools.contains(&t), "{t} offered to explore: {tools:?}");
    }
    let grep = &tool_results(&bodies[2])[0];
    assert!(grep.contains("src/retry.rs\n1: "), "{grep}");
    // Its final reply is the task's result in the main session.
    let r = tool_results(&bodies[3]);
    assert!(r[0].ends_with("\nIn src/retry.rs:1."), "{r:?}");
    assert_eq!(
        sb.sessions().len(),
        2,
        "the subagent's session is saved too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_and_memory_are_kept_for_later_sessions() {
    let sb = Sandbox::new();
    let skill = "---\nname: release\ndescription: How to cut a release.\n---\n\nTag, then push.\n";
    let server = ScriptedServer::start(vec![
        calls(&[
            (
                "c1",
                "skill_manage",
                json!({"action": "create", "name": "release", "content": skill}),
            ),
            (
                "c2",
                "memory",
                json!({"action": "add", "text": "Prefers small commits."}),
            ),
        ]),
        tool_call("c3", "skills_list", json!({})),
        text(&["Saved."]),
        text(&["Hello again."]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(
            &server.base_url(),
            &["--mode", "auto", "-p", "remember"],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let data = sb.home.path().join("data");
    assert_eq!(
        std::fs::read_to_string(data.join("skills/release/SKILL.md")).unwrap(),
        skill
    );
    let r = tool_results(&server.bodies()[2]);
    assert!(
        r.last()
            .unwrap()
            .contains("release — How to cut a release. (user)"),
        "{r:?}"
    );
    // A new session's prompt carries the memory entry.
    let run = sb.run(&server.base_url(), &["-p", "hi"], "").await;
    assert_eq!(run.code, 0, "{run:?}");
    let system = messages(&server.bodies()[3])[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains("Prefers small commits."), "{system}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instruction_files_stack_from_the_repository_top() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.project.path().join(".git")).unwrap();
    sb.write("AGENTS.md", "Top rule: run cargo fmt.\n");
    sb.write("crates/api/CLAUDE.md", "Api rule: no unwrap.\n");
    sb.write("crates/CLAUDE.md", "");
    let server = ScriptedServer::start(vec![text(&["ok"])]).await.unwrap();
    let run = sb
        .run(&server.base_url(), &["-C", "crates/api", "-p", "hi"], "")
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let system = messages(&server.bodies()[0])[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let top = system
        .find("Top rule: run cargo fmt.")
        .expect("the top file");
    let api = system
        .find("Api rule: no unwrap.")
        .expect("the nearest file");
    assert!(top < api, "outermost first");
    assert!(system.contains(&sb.root().join("AGENTS.md").display().to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_asks_a_question_answered_on_stdin() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "question",
            json!({"question": "Which language?", "options": ["Rust", "Go"]}),
        ),
        text(&["Rust it is."]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(&server.base_url(), &["-p", "start a project"], "1\n")
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stderr.contains("? Which language?\n  1. Rust\n  2. Go"),
        "{}",
        run.stderr
    );
    let r = tool_results(&server.bodies()[1]);
    assert!(r[0].ends_with("\nRust"), "{r:?}");
    // With the prompt on stdin nobody can answer, so the tool is not offered at all.
    let server = ScriptedServer::start(vec![text(&["ok"])]).await.unwrap();
    let run = sb.run(&server.base_url(), &["-p", "-"], "hi\n").await;
    assert_eq!(run.code, 0, "{run:?}");
    let tools = server.bodies()[0]["tools"].to_string();
    assert!(!tools.contains("\"question\""), "{tools}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_search_finds_earlier_sessions() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![
        text(&["We chose the blue-green deploy."]),
        calls(&[
            ("c1", "session_search", json!({"query": "deploy"})),
            ("c2", "list", json!({})),
        ]),
        text(&["Found it."]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(&server.base_url(), &["-p", "how do we deploy?"], "")
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let run = sb
        .run(&server.base_url(), &["-p", "what did we decide?"], "")
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let r = tool_results(&server.bodies()[2]);
    assert!(
        r[0].contains("model: We chose the blue-green deploy."),
        "{r:?}"
    );
    assert!(r[0].contains("how do we deploy?"), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_work_in_one_directory_at_once() {
    let sb = Sandbox::new();
    sb.write("a.txt", "alpha\n");
    let server = ScriptedServer::start(vec![
        tool_call("c1", "read", json!({"path": "a.txt"})),
        tool_call("c2", "read", json!({"path": "a.txt"})),
        text(&["one"]),
        text(&["two"]),
    ])
    .await
    .unwrap();
    let url = server.base_url();
    let (a, b) = tokio::join!(
        sb.run(&url, &["-p", "first"], ""),
        sb.run(&url, &["-p", "second"], "")
    );
    assert_eq!(a.code, 0, "{a:?}");
    assert_eq!(b.code, 0, "{b:?}");
    let mut said = vec![a.stdout, b.stdout];
    said.sort();
    assert_eq!(said, ["one\n", "two\n"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_of_a_killed_session_end_on_resume() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "bash",
            json!({"command": "touch bg.txt; sleep 30", "background": true}),
        ),
        text(&["Started."]),
        tool_call("c2", "job_list", json!({})),
        text(&["It was lost."]),
    ])
    .await
    .unwrap();
    // First run: it waits for its job, and is killed (SIGKILL) while the job runs.
    let mut child = sb
        .command(&server.base_url(), &["--mode", "auto", "-p", "start it"])
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !(sb.project.path().join("bg.txt").exists() && server.replies_left() == 2) {
        assert!(
            std::time::Instant::now() < deadline,
            "the job never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    child.kill().await.unwrap();
    let _ = child.wait().await;
    let before = sb.transcript();
    assert!(
        before
            .iter()
            .any(|e| e["type"] == "job_started" && e["id"] == 1),
        "{before:?}"
    );
    assert!(!before.iter().any(|e| e["type"] == "job_ended"));

    // Second run: the job whose process is gone is ended, not running for ever.
    let run = sb
        .run(
            &server.base_url(),
            &["--mode", "auto", "--resume", "-p", "what about the job?"],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("job 1"), "{}", run.stderr);
    let bodies = server.bodies();
    let listed = tool_results(&bodies[3]).last().unwrap().clone();
    assert!(listed.contains("1\tcommand\tfailed\t"), "{listed}");
    assert!(!listed.contains("running"), "{listed}");
    // The model heard of the loss with the turn it came back in.
    let m = messages(&bodies[2]);
    assert!(
        m.iter().any(|x| x["role"] == "user"
            && x["content"].as_str().unwrap().contains("state=\"failed\"")
            && x["content"].as_str().unwrap().contains("lost")),
        "{m:?}"
    );
    // The end is recorded: a second resume finds it ended.
    let after = sb.transcript();
    assert!(
        after
            .iter()
            .any(|e| e["type"] == "job_ended" && e["id"] == 1),
        "{after:?}"
    );
}

/// Whether the process `pid` is alive (a zombie left for a parent to reap is not).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|st| {
            st.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().to_owned())
        })
        .is_some_and(|rest| !rest.starts_with('Z') && !rest.starts_with('X'))
}

/// The pid a command wrote into `file` of the project, once it is there.
async fn pid_in(sb: &Sandbox, file: &str) -> i32 {
    let path = sb.project.path().join(file);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if let Ok(t) = std::fs::read_to_string(&path)
            && let Ok(pid) = t.trim().parse()
        {
            return pid;
        }
        assert!(std::time::Instant::now() < deadline, "{file} never came");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A one-shot run whose model starts a long command writing its pid to `file`: the server, the
/// running llembas and the command's pid.
pub(super) async fn long_command(
    sb: &Sandbox,
    file: &str,
    seconds: u32,
) -> (ScriptedServer, tokio::process::Child, i32) {
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "bash",
            json!({"command": format!("echo $$ > {file}; sleep {seconds}; echo late"), "timeout": 600}),
        ),
        text(&["Back again."]),
    ])
    .await
    .unwrap();
    let child = sb
        .command(&server.base_url(), &["--mode", "auto", "-p", "go"])
        .spawn()
        .unwrap();
    let pid = pid_in(sb, file).await;
    (server, child, pid)
}

/// Sends SIGTERM to a llembas process and waits for its end.
pub(super) async fn terminated(child: &mut tokio::process::Child) -> std::process::ExitStatus {
    let me = rustix::process::Pid::from_raw(child.id().unwrap() as i32).unwrap();
    rustix::process::kill_process(me, rustix::process::Signal::TERM).unwrap();
    child.wait().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_process_outlives_its_run() {
    // A command that leaves a process behind answers at once; the run's end ends it.
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "bash",
            json!({"command": "(sleep 41 & echo $! > bg.pid); echo spawned"}),
        ),
        text(&["Done."]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(&server.base_url(), &["--mode", "auto", "-p", "go"], "")
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    let bg = pid_in(&sb, "bg.pid").await;
    assert!(!alive(bg), "the background sleep outlived llembas");

    // SIGTERM: llembas ends its command's processes and exits as the signal says.
    let (_server, mut child, fg) = long_command(&sb, "fg.pid", 42).await;
    assert!(alive(fg));
    let status = terminated(&mut child).await;
    assert_eq!(status.code(), Some(143), "{status:?}");
    assert!(!alive(fg), "the command outlived a SIGTERM of llembas");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_decides_the_exit_even_when_the_run_ends_first() {
    // At SIGTERM the command's shell ends at once, so the run goes on to its end, while a child
    // that ignores SIGTERM holds the handler for its grace period before SIGKILL: llembas still
    // exits as the signal says, and nothing it started is left.
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "bash",
            json!({"command": "(trap '' TERM; echo $BASHPID > stubborn.pid; sleep 44) & echo $$ > sh.pid; sleep 45", "timeout": 600}),
        ),
        text(&["Back again."]),
    ])
    .await
    .unwrap();
    let mut child = sb
        .command(&server.base_url(), &["--mode", "auto", "-p", "go"])
        .spawn()
        .unwrap();
    let shell = pid_in(&sb, "sh.pid").await;
    let stubborn = pid_in(&sb, "stubborn.pid").await;
    let status = terminated(&mut child).await;
    assert_eq!(status.code(), Some(143), "{status:?}");
    assert!(
        !alive(shell),
        "the command's shell outlived a SIGTERM of llembas"
    );
    assert!(
        !alive(stubborn),
        "a child ignoring SIGTERM outlived llembas"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_session_ends_what_a_killed_run_left_and_says_the_call_was_interrupted() {
    let sb = Sandbox::new();
    let (server, mut child, pid) = long_command(&sb, "k.pid", 43).await;
    child.kill().await.unwrap();
    let _ = child.wait().await;
    assert!(
        alive(pid),
        "SIGKILL leaves the command running until a resume"
    );
    let run = sb
        .run(
            &server.base_url(),
            &["--mode", "auto", "--resume", "-p", "again"],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        !alive(pid),
        "the resumed session left the killed run's command running"
    );
    assert!(
        run.stderr
            .contains("ended 2 processes an earlier run of this session left running")
            || run
                .stderr
                .contains("ended 1 process an earlier run of this session left running"),
        "{}",
        run.stderr
    );
    let interrupted = harness_loop::config::LoopConfig::embedded()
        .unwrap()
        .calls
        .interrupted
        .clone();
    let results = tool_results(&server.bodies()[1]);
    assert!(results[0].ends_with(&interrupted), "{results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_run_ends_its_jobs_after_the_wait() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "bash",
            json!({"command": "echo $$ > job.pid; exec sleep 44", "background": true}),
        ),
        text(&["Started the server."]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(
            &server.base_url(),
            &[
                "--mode",
                "auto",
                "--job-wait",
                "1",
                "-p",
                "start the server",
            ],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "Started the server.\n");
    assert!(
        run.stderr.contains("Stopped job 1 (echo $$ > job.pid; exec sleep 44): it was still running 1s after the turn ended"),
        "{}",
        run.stderr
    );
    let pid = pid_in(&sb, "job.pid").await;
    assert!(!alive(pid));
    let t = sb.transcript();
    assert!(
        t.iter()
            .any(|e| e["type"] == "job_ended" && e["id"] == 1 && e["end"]["status"] == "stopped"),
        "{t:?}"
    );
    // The help says the default.
    let help = std::process::Command::new(bin())
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let wait = harness_loop::config::LoopConfig::embedded()
        .unwrap()
        .jobs
        .limits
        .oneshot_wait_seconds;
    assert!(
        help.contains(&format!("oneshot_wait_seconds`, {wait}]")),
        "{help}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_with_cut_arguments_is_said_to_the_model_as_such() {
    let sb = Sandbox::new();
    // The answer is cut at the output limit inside the call's arguments.
    let cut = Reply::sse_chunks(&[
        harness_test_support::chunk(json!({"role": "assistant", "content": null}), None),
        harness_test_support::chunk(
            json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                "function": {"name": "write", "arguments": "{\"path\": \"a.txt\", \"content\": \"hel"}}]}),
            None,
        ),
        harness_test_support::chunk(json!({}), Some("length")),
    ]);
    let server = ScriptedServer::start(vec![
        cut,
        tool_call("c2", "write", json!({"path": "a.txt", "content": "hello"})),
        text(&["Wrote it."]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(
            &server.base_url(),
            &["--mode", "auto", "-p", "write a.txt"],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(sb.read("a.txt"), "hello");
    let bodies = server.bodies();
    let m = messages(&bodies[1]);
    let last = m.last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(
        last.contains("Your call of write was not run: the arguments were cut off")
            && last.ends_with(
                "Send it again with complete JSON arguments; split long content into smaller calls."
            ),
        "{last}"
    );
    assert!(!last.contains("[empty answer]"), "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skill_readers_are_offered_once_there_is_a_skill() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![text(&["Hi."]), text(&["Hi again."])])
        .await
        .unwrap();
    let names = |body: &Value| -> Vec<String> {
        let mut v: Vec<String> = body["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(loader) = body["tools"].as_array().and_then(|t| {
            t.iter()
                .find(|t| t["function"]["name"] == "load_tools")
                .and_then(|t| t["function"]["description"].as_str())
        }) {
            v.extend(
                loader
                    .lines()
                    .filter_map(|l| l.strip_prefix("- "))
                    .filter_map(|l| l.split(':').next())
                    .map(str::to_owned),
            );
        }
        v
    };
    let run = sb.run(&server.base_url(), &["-p", "hello"], "").await;
    assert_eq!(run.code, 0, "{run:?}");
    let first = names(&server.bodies()[0]);
    assert!(
        !first
            .iter()
            .any(|n| n == "skills_list" || n == "skill_view"),
        "{first:?}"
    );
    assert!(first.iter().any(|n| n == "skill_manage"), "{first:?}");
    sb.write(
        ".llembas/skills/deploy/SKILL.md",
        "---\nname: deploy\ndescription: How to deploy.\n---\nRun make deploy.\n",
    );
    let run = sb.run(&server.base_url(), &["-p", "hello"], "").await;
    assert_eq!(run.code, 0, "{run:?}");
    let second = names(&server.bodies()[1]);
    assert!(second.iter().any(|n| n == "skills_list"), "{second:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_is_heard_while_a_command_floods_its_output() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![tool_call(
        "c1",
        "bash",
        json!({"command": "echo started > started.txt; yes", "timeout": 600}),
    )])
    .await
    .unwrap();
    let started = sb.project.path().join("started.txt");
    let run = interrupt_when(
        &sb,
        &server.base_url(),
        &["--mode", "auto", "-p", "go"],
        || started.exists(),
    )
    .await;
    assert_eq!(
        run.code,
        1,
        "{}",
        &run.stderr[run.stderr.len().saturating_sub(300)..]
    );
    let t = sb.transcript();
    let result = t.iter().find(|e| e["type"] == "tool_result").unwrap();
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .ends_with("killed by signal 15"),
        "{result}"
    );
}

/// One session, one process: while a llembas runs a session, a second `--resume` of it is
/// refused, naming the process that holds it, and ends nothing of the first's; once the first
/// is gone the session resumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_runs_in_one_process_at_a_time() {
    let sb = Sandbox::new();
    let (_server, mut first, fg) = long_command(&sb, "fg.pid", 43).await;
    let id = sb.sessions()[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let server = ScriptedServer::start(vec![text(&["Second."]), text(&["Resumed."])])
        .await
        .unwrap();
    let second = sb
        .run(&server.base_url(), &["--resume", &id, "-p", "hi"], "")
        .await;
    assert_ne!(second.code, 0, "{second:?}");
    assert!(
        second.stderr.contains(&format!(
            "session {id} is open in another llembas (process {}): end that one first, or start a new session",
            first.id().unwrap()
        )),
        "{second:?}"
    );
    assert!(
        server.bodies().is_empty(),
        "the second process asked the model"
    );
    assert!(alive(fg), "the second process ended the first's command");
    let status = terminated(&mut first).await;
    assert_eq!(status.code(), Some(143), "{status:?}");
    let again = sb
        .run(&server.base_url(), &["--resume", &id, "-p", "hi"], "")
        .await;
    assert_eq!(again.code, 0, "{again:?}");
    assert!(again.stdout.contains("Second."), "{again:?}");
}

/// After SIGTERM nothing new starts: a command's end lets the run go on while the handler waits
/// out a child that ignores SIGTERM, and the model's next call (a write) is not carried out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_signal_no_new_call_runs() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "bash",
            json!({"command": "(trap '' TERM; echo $BASHPID > stubborn.pid; sleep 46) & echo $$ > sh.pid; sleep 47", "timeout": 600}),
        ),
        tool_call(
            "c2",
            "write",
            json!({"path": "AFTER.txt", "content": "landed after the signal\n"}),
        ),
        tool_call("c3", "bash", json!({"command": "touch AFTER2.txt"})),
        text(&["Done."]),
    ])
    .await
    .unwrap();
    let mut child = sb
        .command(&server.base_url(), &["--mode", "auto", "-p", "go"])
        .spawn()
        .unwrap();
    pid_in(&sb, "sh.pid").await;
    pid_in(&sb, "stubborn.pid").await;
    let status = terminated(&mut child).await;
    assert_eq!(status.code(), Some(143), "{status:?}");
    assert!(!sb.project.path().join("AFTER.txt").exists());
    assert!(!sb.project.path().join("AFTER2.txt").exists());
}

/// Issue 27: a write to an absolute path outside the working directory is asked about by that
/// path and, approved, lands there — not inside the project under the same name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_outside_lands_where_it_was_asked() {
    let sb = Sandbox::new();
    let out = tempfile::tempdir().unwrap();
    let target = std::fs::canonicalize(out.path()).unwrap().join("OUT.txt");
    let t = target.display().to_string();
    let server = ScriptedServer::start(vec![
        tool_call("c1", "write", json!({"path": t, "content": "made\n"})),
        text(&["Written."]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(
            &server.base_url(),
            &["--mode", "edit", "-p", "write it"],
            "y\n",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains(&format!("+++ {t}")), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "made\n");
    let rerooted = sb.root().join(target.strip_prefix("/").unwrap());
    assert!(!rerooted.exists(), "{} was made", rerooted.display());
    let r = tool_results(&server.bodies()[1]);
    // The model reads the change as its diff, of the same path.
    assert!(r.last().unwrap().contains(&format!("+++ b{t}\n")), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_go_with_a_one_shot_prompt() {
    let sb = Sandbox::new();
    // Not real images: the bytes go as they are, base64 in data: URLs.
    sb.write("cat.png", "PNG-bytes");
    sb.write("dog.jpg", "JPG-bytes");
    let server = ScriptedServer::start(vec![text(&["A cat and a dog."])])
        .await
        .unwrap();
    // gpt-4o's metadata says it reads images.
    let args = [
        "--model",
        "gpt-4o",
        "-p",
        "what are these",
        "--image",
        "cat.png",
        "--image",
        "dog.jpg",
    ];
    let run = sb.run(&server.base_url(), &args, "").await;
    assert_eq!(run.code, 0, "{run:?}");
    let body = server.bodies()[0].to_string();
    assert!(
        body.contains("data:image/png;base64,UE5HLWJ5dGVz"),
        "{body}"
    );
    assert!(
        body.contains("data:image/jpeg;base64,SlBHLWJ5dGVz"),
        "{body}"
    );
    // Not an image by its name: refused before any request.
    sb.write("notes.txt", "words");
    let run = sb
        .run(
            &server.base_url(),
            &["-p", "read", "--image", "notes.txt"],
            "",
        )
        .await;
    assert_ne!(run.code, 0, "{run:?}");
    assert!(
        run.stderr
            .contains("--image notes.txt: not an image by its name (png, jpg, jpeg, gif or webp)"),
        "{run:?}"
    );
    assert_eq!(server.bodies().len(), 1);
}
