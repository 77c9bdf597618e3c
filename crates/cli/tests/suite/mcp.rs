//! MCP servers in the terminal agent: `llembas mcp add|list|remove` editing the config file, the
//! project's `.mcp.json` listed but started only when the config file says so, and a one-shot
//! run whose model calls a tool of the real everything server (npm's
//! `@modelcontextprotocol/server-everything`, installed by `cargo xtask test`).

use harness_test_support::ScriptedServer;
use serde_json::json;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_add_list_and_remove_edit_the_config_file() {
    let sb = Sandbox::new();
    std::fs::write(
        sb.home.path().join("config.toml"),
        "# my settings\nmode = \"edit\"\n",
    )
    .unwrap();
    sb.write(
        ".mcp.json",
        r#"{"mcpServers": {"repo-tools": {"command": "npx", "args": ["-y", "repo-tools"]}}}"#,
    );
    let url = "http://127.0.0.1:9/v1";
    let mut said = Vec::new();
    for args in [
        &[
            "mcp",
            "add",
            "web",
            "--url",
            "http://127.0.0.1:9/mcp",
            "--bearer-token-env",
            "WEB_TOKEN",
        ][..],
        &[
            "mcp",
            "add",
            "files",
            "--env",
            "ROOT=/srv",
            "--",
            "mcp-files",
            "--read-only",
        ][..],
        &["mcp", "add", "web", "--url", "http://127.0.0.1:9/other"][..],
        &["mcp", "list"][..],
        &["mcp", "remove", "web"][..],
        &["mcp", "remove", "web"][..],
        &["mcp", "list"][..],
    ] {
        let run = sb.run(url, args, "").await;
        let home = sb.home.path().display().to_string();
        said.push(format!(
            "$ llembas {}\n[{}] {}{}",
            args.join(" "),
            run.code,
            run.stdout.replace(&home, "HOME"),
            run.stderr.replace(&home, "HOME")
        ));
    }
    let config = std::fs::read_to_string(sb.home.path().join("config.toml")).unwrap();
    insta::assert_snapshot!(said.join("\n") + "\n--- config.toml\n" + &config);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_run_offers_and_calls_the_tools_of_a_configured_server() {
    let Some(bin) = harness_test_support::mcp_everything() else {
        return;
    };
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "mcp__everything__echo",
            json!({"message": "from the terminal"}),
        ),
        text(&["It echoed."]),
    ])
    .await
    .unwrap();
    let sb = Sandbox::new();
    let add = sb
        .run(
            &server.base_url(),
            &[
                "mcp",
                "add",
                "everything",
                "--",
                bin.to_str().unwrap(),
                "stdio",
            ],
            "",
        )
        .await;
    assert_eq!(add.code, 0, "{add:?}");
    let run = sb
        .run(&server.base_url(), &["-p", "echo something"], "")
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "It echoed.\n");
    let bodies = server.bodies();
    let tools = bodies[0]["tools"].as_array().unwrap();
    let loader = tools
        .iter()
        .find(|t| t["function"]["name"] == "load_tools")
        .expect("the MCP tools wait behind load_tools");
    assert!(
        loader["function"]["description"]
            .as_str()
            .unwrap()
            .contains("- mcp__everything__echo: "),
        "{loader}"
    );
    assert!(
        !tools
            .iter()
            .any(|t| t["function"]["name"].as_str().unwrap().starts_with("mcp__")),
        "no MCP tool is sent whole on the first request"
    );
    // Through the same context hygiene as every result: its id first.
    let results = tool_results(&bodies[1]);
    assert_eq!(results.len(), 1);
    assert!(
        results[0].starts_with("[#") && results[0].ends_with("]\nEcho: from the terminal"),
        "{results:?}"
    );
}
