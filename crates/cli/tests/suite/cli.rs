//! The command line without a model: version, configuration errors, subcommands.

use super::*;

#[tokio::test]
async fn no_model_configured_is_one_line() {
    let sb = Sandbox::new();
    let mut c = sb.command("", &["-p", "hello"]);
    c.env_remove("OPENAI_BASE_URL");
    let out = c.output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("llembas: no model configured: set OPENAI_BASE_URL"),
        "{stderr}"
    );
}

#[tokio::test]
async fn unreachable_model_is_one_line() {
    let sb = Sandbox::new();
    let run = sb.run("http://127.0.0.1:9/v1", &["-p", "hello"], "").await;
    assert_eq!(run.code, 1, "{run:?}");
    let last = run.stderr.lines().last().unwrap();
    assert!(last.starts_with("llembas: error: "), "{run:?}");
    assert!(!run.stderr.contains("panicked"), "{run:?}");
}

#[tokio::test]
async fn permission_check_prints_decision() {
    let sb = Sandbox::new();
    let out = sb
        .command(
            "",
            &[
                "permission",
                "check",
                "--mode",
                "manual",
                "--",
                "git",
                "commit",
                "-m",
                "x",
            ],
        )
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.starts_with("decision: ask\n"), "{stdout}");
    assert!(stdout.contains("always: git commit *"), "{stdout}");
}

/// `llembas … | true`: stdout is a pipe nobody reads; the run ends quietly, not with a panic.
#[tokio::test]
async fn closed_pipe_is_a_normal_end() {
    let sb = Sandbox::new();
    for args in [
        &["sessions", "--all"][..],
        &["spec", "tool", "bash"],
        &["spec", "hash"],
        &["permission", "check", "--", "ls"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut c = sb.command("", args);
        c.stdout(writer);
        // Not `output()`: it would pipe stdout again.
        let out = c.spawn().unwrap().wait_with_output().await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
