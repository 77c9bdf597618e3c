//! Checkpoints at the terminal with real git: turn 1 edits a file with a file tool, turn 2 runs
//! a command that makes and changes files; `/rewind` lists the turns, `/rewind 1 code` puts
//! everything back from the session's shadow repository, leaves a file the person changed by
//! hand since, and the person's own repository (status, branches, index, log, config, hooks)
//! is as it was.

use expectrl::Expect as _;
use harness_test_support::ScriptedServer;
use serde_json::json;

use super::terminal::spawn_in;
use super::*;

/// Runs git in `dir` without the machine's or the person's config (and without taking the
/// index's optional lock, so reading changes nothing).
fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What the person's repository is: status, branches and refs, log, the index's bytes, config,
/// hooks.
fn repo_state(dir: &Path) -> Vec<String> {
    let dot = dir.join(".git");
    let mut hooks: Vec<String> = std::fs::read_dir(dot.join("hooks"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    hooks.sort();
    vec![
        git(dir, &["status", "--porcelain=v1", "--branch", "--ignored"]),
        git(dir, &["for-each-ref"]),
        git(dir, &["log", "--all", "--format=%H %s"]),
        format!("{:?}", std::fs::read(dot.join("index")).unwrap()),
        std::fs::read_to_string(dot.join("config")).unwrap(),
        hooks.join(","),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_code_puts_back_file_tool_and_command_changes_with_real_git() {
    let sb = Sandbox::new();
    let root = sb.root();
    sb.write(".gitignore", "*.log\n");
    sb.write("tracked.txt", "one\n");
    sb.write("hand.txt", "hand\n");
    git(&root, &["init", "-q", "-b", "main"]);
    git(&root, &["add", "."]);
    git(&root, &["commit", "-q", "-m", "first"]);
    // Not committed: one file untracked, one ignored.
    sb.write("notes.txt", "notes\n");
    sb.write("build.log", "log one\n");
    let before = repo_state(&root);

    let server = ScriptedServer::start(vec![
        tool_call("c0", "read", json!({"path": "tracked.txt"})),
        tool_call(
            "c1",
            "edit",
            json!({"path": "tracked.txt", "old_string": "one", "new_string": "two"}),
        ),
        text(&["Edited."]),
        tool_call(
            "c2",
            "bash",
            json!({"command": "mkdir -p gen && echo made > gen/out.txt && echo more >> notes.txt && echo changed > hand.txt && echo log two > build.log && rm tracked.txt"}),
        ),
        text(&["Ran."]),
    ])
    .await
    .unwrap();
    let url = server.base_url();
    let home = sb.home.path().to_path_buf();
    let dir = root.clone();
    let screen = tokio::task::spawn_blocking(move || {
        let mut s = spawn_in(&dir, &home, &url, &["--mode", "auto"]);
        s.expect("auto ›");
        s.send_line("edit the tracked file");
        s.expect("Edited.");
        s.expect("auto ›");
        s.send_line("run the generator");
        s.expect("Ran.");
        s.expect("auto ›");
        // The person changes one of the command's files by hand.
        std::fs::write(dir.join("hand.txt"), "the person's\n").unwrap();
        s.send_line("/rewind");
        s.expect("run the generator");
        s.expect("auto ›");
        let listed = s.render();
        s.send_line("/rewind 1 code");
        s.expect("restored the code to before turn 1");
        s.expect("auto ›");
        // Esc Esc at the empty prompt lists them again, now restored.
        s.session.send("\x1b\x1b").unwrap();
        s.expect("code restored");
        s.expect("auto ›");
        s.send_line("/quit");
        s.expect("saved (llembas --resume ");
        (listed, s.render())
    })
    .await
    .unwrap();
    let (listed, after) = screen;
    let list: Vec<&str> = listed
        .lines()
        .skip_while(|l| !l.starts_with("checkpoints ("))
        .take_while(|l| !l.starts_with("auto ›"))
        .collect();
    insta::assert_snapshot!(list.join("\n"));
    let root_s = root.display().to_string();
    let said: Vec<String> = after
        .lines()
        .skip_while(|l| !l.contains("/rewind 1 code"))
        .skip(1)
        .take_while(|l| !l.starts_with("auto ›"))
        .map(|l| l.replace(&root_s, "[project]"))
        .collect();
    assert_eq!(
        said,
        [
            "restored the code to before turn 1:",
            "  [project]/tracked.txt: put back",
            "  [project]/gen/out.txt: removed (the agent made it)",
            "  [project]/hand.txt: changed since turn 2, left as it is",
            "  [project]/notes.txt: put back",
        ],
        "{after}"
    );
    assert_eq!(sb.read("tracked.txt"), "one\n");
    assert_eq!(sb.read("notes.txt"), "notes\n");
    assert_eq!(sb.read("hand.txt"), "the person's\n");
    assert!(!root.join("gen/out.txt").exists());
    // The ignored file is not in the snapshots: the command's change stays.
    assert_eq!(sb.read("build.log"), "log two\n");
    // The person's repository: the same status (hand.txt aside), refs, log, index, config.
    let now = repo_state(&root);
    assert_eq!(now[1..], before[1..]);
    assert_eq!(
        now[0],
        before[0].replace("?? notes.txt", " M hand.txt\n?? notes.txt")
    );
}

/// Outside a git repository the checkpoints hold the file tools' edits (and say commands'
/// changes are not covered); they survive `--resume`, and `/rewind N` asks what to restore
/// (Enter: both): the file is put back and the turn leaves the conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_survive_resume_and_rewind_asks_what_to_restore() {
    let sb = Sandbox::new();
    sb.write("a.txt", "alpha\n");
    let server = ScriptedServer::start(vec![
        tool_call("c0", "read", json!({"path": "a.txt"})),
        tool_call(
            "c1",
            "edit",
            json!({"path": "a.txt", "old_string": "alpha", "new_string": "beta"}),
        ),
        text(&["Edited."]),
    ])
    .await
    .unwrap();
    let root = sb.root();
    let url = server.base_url();
    let home = sb.home.path().to_path_buf();
    let screen = tokio::task::spawn_blocking(move || {
        let mut s = spawn_in(&root, &home, &url, &["--mode", "auto"]);
        s.expect("auto ›");
        s.send_line("change a");
        s.expect("Edited.");
        s.expect("auto ›");
        s.send_line("/quit");
        s.expect("saved (llembas --resume ");
        let mut r = spawn_in(&root, &home, &url, &["--resume"]);
        r.expect("edit ›");
        r.send_line("/rewind");
        r.expect("only the file tools' edits are put back)");
        r.expect("edit ›");
        r.send_line("/rewind 1");
        r.expect("restore what?");
        r.send_line("");
        r.expect("rewound: turn 1");
        r.expect("edit ›");
        r.send_line("/rewind");
        r.expect("nothing to rewind");
        r.expect("edit ›");
        r.send_line("/quit");
        r.expect("saved (llembas --resume ");
        r.render()
    })
    .await
    .unwrap();
    assert_eq!(sb.read("a.txt"), "alpha\n", "{screen}");
    let root_s = sb.root().display().to_string();
    let shown = screen.replace(&root_s, "[project]");
    assert!(
        shown.contains(
            "   1  change a                                          1 file · commands' changes not covered\n\
             (commands' changes are not covered here: not a git repository; only the file tools' edits are put back)"
        ),
        "{shown}"
    );
    assert!(
        shown.contains("restored the code to before turn 1:\n  [project]/a.txt: put back"),
        "{shown}"
    );
    let rewound = sb
        .transcript()
        .iter()
        .any(|e| e["type"] == "rewound" && e["turn"] == 1);
    assert!(rewound, "the transcript has the rewind");
}

/// A restore runs with the person's rights, outside the sandbox: a symbolic link a command
/// planted where a directory was must not lead it to write elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_writes_nothing_through_a_link_a_command_planted() {
    let sb = Sandbox::new();
    let root = sb.root();
    let outside = tempfile::tempdir().unwrap();
    sb.write("keys/readme.txt", "keys\n");
    git(&root, &["init", "-q", "-b", "main"]);
    git(&root, &["add", "."]);
    git(&root, &["commit", "-q", "-m", "first"]);
    let link = format!(
        "mv keys keys.old && ln -s {} keys",
        outside.path().display()
    );
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "write",
            json!({"path": "keys/authorized_keys", "content": "ssh-ed25519 AAAA attacker\n"}),
        ),
        text(&["Wrote."]),
        tool_call("c2", "bash", json!({"command": link})),
        text(&["Moved."]),
    ])
    .await
    .unwrap();
    let url = server.base_url();
    let home = sb.home.path().to_path_buf();
    let dir = root.clone();
    let after = tokio::task::spawn_blocking(move || {
        let mut s = spawn_in(&dir, &home, &url, &["--mode", "auto"]);
        s.expect("auto ›");
        s.send_line("write the key");
        s.expect("Wrote.");
        s.expect("auto ›");
        s.send_line("move the keys");
        s.expect("Moved.");
        s.expect("auto ›");
        s.send_line("/rewind 2 code");
        s.expect("restored the code to before turn 2");
        s.expect("auto ›");
        s.send_line("/quit");
        s.expect("saved (llembas --resume ");
        s.render()
    })
    .await
    .unwrap();
    assert!(
        !outside.path().join("authorized_keys").exists(),
        "written through the link: {after}"
    );
    assert!(
        std::fs::read_dir(outside.path()).unwrap().next().is_none(),
        "{after}"
    );
    assert!(
        after.contains("/keys is a symbolic link now, not followed"),
        "said: {after}"
    );
}
