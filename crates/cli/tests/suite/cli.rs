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

/// A server that answers every request 401, as one refusing the key does.
async fn refusing_server() -> String {
    let app = axum::Router::new().fallback(|| async {
        (
            axum::http::StatusCode::UNAUTHORIZED,
            r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#,
        )
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}/v1")
}

/// A run that fails before the model did anything (a refused key, a server that is down)
/// keeps no session, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_runs_keep_no_session() {
    let refusing = refusing_server().await;
    for url in [refusing.as_str(), "http://127.0.0.1:9/v1"] {
        let sb = Sandbox::new();
        let run = sb.run(url, &["-p", "hello"], "").await;
        assert_eq!(run.code, 1, "{run:?}");
        assert!(sb.sessions().is_empty(), "{url}: {:?}", sb.sessions());
        assert!(run.stderr.contains("not kept"), "{run:?}");
    }
}

/// With no model named, the hint fits the failure: not "pass --model" for a server that is
/// down or refuses the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hints_fit_the_failure() {
    let refusing = refusing_server().await;
    for (url, hint) in [
        (refusing.as_str(), "the API key was refused"),
        ("http://127.0.0.1:9/v1", "is the server running?"),
    ] {
        let sb = Sandbox::new();
        let mut c = sb.command(url, &["-p", "hello"]);
        c.env_remove("OPENAI_MODEL");
        let out = c.output().await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(hint), "{url}: {stderr}");
        assert!(!stderr.contains("pass --model"), "{url}: {stderr}");
    }
}
