//! Subagents the person defined: read from the project's and the user's agent directories,
//! offered to `task`, limited to their tools, listed by `/agents`.

use harness_test_support::ScriptedServer;
use serde_json::json;

use super::terminal::spawn_in;
use super::*;

/// A project agent (Claude Code's directory) allowed only `Read, Grep`.
const READER: &str = "---
name: reader
description: Reads files and reports what they say
tools: Read, Grep
---
READER-TEXT: you only read; never change a file.
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_agent_gets_its_text_and_only_its_tools() {
    let sb = Sandbox::new();
    sb.write(".claude/agents/reader.md", READER);
    sb.write("notes.txt", "remember the milk\n");
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "task",
            json!({"agent": "reader", "prompt": "Write out.txt, then read notes.txt."}),
        ),
        tool_call(
            "s1",
            "write",
            json!({"path": "out.txt", "content": "written"}),
        ),
        tool_call("s2", "read", json!({"path": "notes.txt"})),
        text(&["I cannot write; notes.txt says remember the milk."]),
        text(&["The reader could only read."]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(
            &server.base_url(),
            &["--mode", "auto", "-p", "have the reader do it"],
            "",
        )
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "The reader could only read.\n");
    assert!(
        !sb.project.path().join("out.txt").exists(),
        "the reader wrote out.txt"
    );
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 5);
    // The subagent's own session: its text after the subagent block, only its tools.
    let child = &bodies[1];
    let system = messages(child)[0]["content"].as_str().unwrap().to_owned();
    let block = system.find("# You are a subagent").expect("the block");
    let text_at = system.find("READER-TEXT: you only read").expect("its text");
    assert!(block < text_at, "{system}");
    let tools: Vec<&str> = child["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"read") && tools.contains(&"grep"),
        "{tools:?}"
    );
    for t in ["write", "edit", "bash", "task", "glob"] {
        assert!(!tools.contains(&t), "{t} offered to the reader: {tools:?}");
    }
    // Its write was refused as a tool it was not given; its read ran.
    let r = tool_results(&bodies[2]);
    assert!(
        r[0].contains("Unknown tool: write. Call one of the tools you were given."),
        "{r:?}"
    );
    let r = tool_results(&bodies[3]);
    assert!(r.last().unwrap().contains("remember the milk"), "{r:?}");
    // Its reply answered the task.
    let r = tool_results(&bodies[4]);
    assert!(r[0].ends_with("notes.txt says remember the milk."), "{r:?}");
}

/// `/agents` lists the built-in agents and the defined ones with where each comes from; a
/// malformed file is said, naming its path, and the rest still load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_are_listed_with_where_they_come_from() {
    let sb = Sandbox::new();
    sb.write(".claude/agents/reader.md", READER);
    sb.write(".llembas/agents/broken.md", "no front matter here\n");
    std::fs::create_dir_all(sb.home.path().join("agents")).unwrap();
    std::fs::write(
        sb.home.path().join("agents/planner.md"),
        "---\ndescription: Plans big changes\nmodel: sonnet\n---\nPlan.\n",
    )
    .unwrap();
    let server = ScriptedServer::start(vec![]).await.unwrap();
    let root = sb.root();
    let url = server.base_url();
    let home = sb.home.path().to_path_buf();
    let screen = tokio::task::spawn_blocking(move || {
        let mut s = spawn_in(&root, &home, &url, &["--mode", "auto"]);
        s.expect("auto ›");
        s.send_line("/agents");
        s.expect("planner");
        s.expect("auto ›");
        s.send_line("/quit");
        s.expect("saved (llembas --resume ");
        s.render()
    })
    .await
    .unwrap();
    let root = sb.root().display().to_string();
    let home = sb.home.path().display().to_string();
    for line in [
        format!("llembas: {root}/.llembas/agents/broken.md: no `description`"),
        format!("llembas: {home}/agents/planner.md: model `sonnet` is not a model known here"),
        "explore          reads and searches only".to_owned(),
        "general          has your tools".to_owned(),
        format!(
            "reader           Reads files and reports what they say (project: {root}/.claude/agents/reader.md; tools: read, grep)"
        ),
        format!("planner          Plans big changes (user: {home}/agents/planner.md)"),
    ] {
        assert!(screen.contains(&line), "{line}\n{screen}");
    }
}

/// An editor's session (`llembas acp`) has the project's agents too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editors_session_starts_a_project_agent() {
    use agent_client_protocol::v1::schema::{
        ContentBlock, NewSessionRequest, PromptRequest, TextContent,
    };
    let sb = Sandbox::new();
    sb.write(".claude/agents/reader.md", READER);
    let server = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "task",
            json!({"agent": "reader", "prompt": "Say what you are."}),
        ),
        text(&["A reader."]),
        text(&["It is a reader."]),
    ])
    .await
    .unwrap();
    let root = sb.root();
    let _ = super::acp::plain_client(&sb, &server.base_url(), async move |cx| {
        let s = cx
            .send_request(NewSessionRequest::new(root))
            .block_task()
            .await?;
        cx.send_request(PromptRequest::new(
            s.session_id,
            vec![ContentBlock::Text(TextContent::new("ask the reader"))],
        ))
        .block_task()
        .await?;
        Ok(())
    })
    .await;
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 3);
    let system = messages(&bodies[1])[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains("READER-TEXT"), "{system}");
    let r = tool_results(&bodies[2]);
    assert!(r[0].ends_with("A reader."), "{r:?}");
}
