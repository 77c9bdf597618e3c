//! The real everything server over stdio and streamable HTTP: its tools as offered, calls and
//! how their results read, a call past its limit, a server killed under a session, and no
//! orphan once the servers are dropped.

use std::time::Duration;

use harness_mcp::{Limits, Mcp, ServerConfig, Transport};
use harness_model::CancellationToken;
use serde_json::json;

use super::*;

#[tokio::test]
async fn its_tools_are_offered_by_prefixed_name_with_risk_from_annotations_and_deferred() {
    let Some(config) = everything_config("everything") else {
        return;
    };
    let (mcp, notices) = Mcp::start(&[config], Limits::default()).await;
    let offered: Vec<String> = mcp
        .tools()
        .iter()
        .map(|t| format!("{} {:?} deferred={}", t.name, t.risk, t.deferred))
        .collect();
    insta::assert_snapshot!(offered.join("\n") + "\n--- notices\n" + &notices.join("\n"));
}

#[tokio::test]
async fn calls_answer_text_images_as_notices_and_errors() {
    let Some(mcp) = start_everything(Limits::default()).await else {
        return;
    };
    let cancel = CancellationToken::new();
    let table = [
        (
            "mcp__everything__echo",
            json!({"message": "hi there"}),
            "Echo: hi there",
            false,
        ),
        (
            "mcp__everything__get-sum",
            json!({"a": 2, "b": 40}),
            "42",
            false,
        ),
        (
            "mcp__everything__get-tiny-image",
            json!({}),
            "[an image (image/png, about",
            false,
        ),
        ("mcp__everything__get-sum", json!({"a": "two"}), "", true),
        (
            "mcp__everything__nothing",
            json!({}),
            "there is no MCP tool `mcp__everything__nothing`",
            true,
        ),
    ];
    for (tool, args, want, error) in table {
        let (text, is_error) = mcp.call(tool, &args, &cancel).await;
        assert!(text.contains(want), "{tool} {args}: {text}");
        assert_eq!(is_error, error, "{tool} {args}: {text}");
    }
}

#[tokio::test]
async fn a_call_past_its_limit_is_an_error_and_the_server_still_answers() {
    let limits = Limits {
        call: Duration::from_secs(1),
        ..Limits::default()
    };
    let Some(mcp) = start_everything(limits).await else {
        return;
    };
    let cancel = CancellationToken::new();
    let (text, error) = mcp
        .call(
            "mcp__everything__trigger-long-running-operation",
            &json!({"duration": 30, "steps": 2}),
            &cancel,
        )
        .await;
    assert!(error);
    assert_eq!(
        text,
        "the MCP server `everything` did not answer within 1 s; the call was abandoned"
    );
    let (text, error) = mcp
        .call(
            "mcp__everything__echo",
            &json!({"message": "still here"}),
            &cancel,
        )
        .await;
    assert_eq!((text.as_str(), error), ("Echo: still here", false));
}

#[tokio::test]
async fn a_cancelled_call_ends_at_once() {
    let Some(mcp) = start_everything(Limits::default()).await else {
        return;
    };
    let cancel = CancellationToken::new();
    cancel.cancel();
    let (text, error) = mcp
        .call(
            "mcp__everything__trigger-long-running-operation",
            &json!({"duration": 30, "steps": 2}),
            &cancel,
        )
        .await;
    assert_eq!((text.as_str(), error), ("cancelled", true));
}

fn alive(pid: i32) -> bool {
    // A zombie has been killed; only its parent's wait is left.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

async fn until(what: impl Fn() -> bool) -> bool {
    for _ in 0..100 {
        if what() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn a_killed_server_is_reported_and_its_tools_answer_an_error() {
    let Some(mcp) = start_everything(Limits::default()).await else {
        return;
    };
    let pid = mcp.servers()[0].pid().unwrap();
    std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .status()
        .unwrap();
    assert!(until(|| !alive(pid)).await, "kill did not end {pid}");
    let (text, error) = mcp
        .call(
            "mcp__everything__echo",
            &json!({"message": "hi"}),
            &CancellationToken::new(),
        )
        .await;
    assert!(error);
    assert!(
        text.starts_with("the MCP server `everything` is not running any more"),
        "{text}"
    );
}

#[tokio::test]
async fn dropping_the_servers_ends_the_child_and_its_group() {
    let Some(mcp) = start_everything(Limits::default()).await else {
        return;
    };
    let pid = mcp.servers()[0].pid().unwrap();
    assert!(alive(pid));
    drop(mcp);
    assert!(
        until(|| !alive(pid)).await,
        "the server {pid} outlived its session"
    );
}

/// A free port on loopback.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn over_streamable_http_its_tools_are_called_and_a_missing_token_is_a_notice() {
    let Some(bin) = everything() else {
        return;
    };
    let port = free_port();
    let mut server = tokio::process::Command::new(&bin)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let up = until(|| std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()).await;
    assert!(up, "the HTTP server did not listen on {port}");
    let url = format!("http://127.0.0.1:{port}/mcp");
    let configs = [
        ServerConfig::new(
            "web",
            Transport::Http {
                url: url.clone(),
                bearer_token_env: None,
                headers: Vec::new(),
            },
        ),
        ServerConfig::new(
            "locked",
            Transport::Http {
                url,
                bearer_token_env: Some("LLEMBAS_TEST_NO_SUCH_TOKEN".into()),
                headers: Vec::new(),
            },
        ),
    ];
    let (mcp, notices) = Mcp::start(&configs, Limits::default()).await;
    assert_eq!(
        notices,
        [
            "the MCP server `locked` needs the variable LLEMBAS_TEST_NO_SUCH_TOKEN (its bearer token), which is not set"
        ]
    );
    let (text, error) = mcp
        .call(
            "mcp__web__echo",
            &json!({"message": "over http"}),
            &CancellationToken::new(),
        )
        .await;
    assert_eq!((text.as_str(), error), ("Echo: over http", false));
    drop(mcp);
    server.kill().await.unwrap();
}
