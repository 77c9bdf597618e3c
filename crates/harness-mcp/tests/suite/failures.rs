//! Servers that fail: one that cannot be run, one that exits, one that writes garbage, one that
//! hangs. Each is a notice naming it, within the start limit; the others still start.

use std::time::Duration;

use harness_mcp::{Limits, Mcp, ServerConfig, Transport};

fn sh(name: &str, script: &str) -> ServerConfig {
    ServerConfig::new(name, Transport::stdio("sh", ["-c", script]))
}

#[tokio::test]
async fn servers_that_fail_are_notices_and_never_hang_the_start() {
    let limits = Limits {
        start: Duration::from_secs(3),
        ..Limits::default()
    };
    let mut configs = vec![
        ServerConfig::new(
            "missing",
            Transport::stdio("/nonexistent/mcp-server", Vec::<String>::new()),
        ),
        sh("exits", "echo 'cannot open the database' >&2; exit 3"),
        sh(
            "garbage",
            "echo 'this is not JSON-RPC'; echo '{\"jsonrpc\": 7}'; sleep 60",
        ),
        sh("hangs", "sleep 60"),
    ];
    let real = super::everything_config("everything");
    configs.extend(real.clone());
    let (mcp, notices) = Mcp::start(&configs, limits).await;
    let names: Vec<&str> = mcp.servers().iter().map(|s| s.name()).collect();
    assert_eq!(
        names,
        if real.is_some() {
            vec!["everything"]
        } else {
            vec![]
        }
    );
    let notices: Vec<&String> = notices
        .iter()
        .filter(|n| !n.contains("is not offered"))
        .collect();
    insta::assert_snapshot!(
        notices
            .iter()
            .map(|n| n.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}
