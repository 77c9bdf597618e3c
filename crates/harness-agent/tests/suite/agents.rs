//! Subagents the person defines: definitions read as Claude Code writes them (tools by its
//! names or a list, a missing description, a built-in's name, an unknown tool or model), the
//! `task` tool listing them, and a subagent of one limited to its tools, with its text.

use std::sync::Arc;

use harness_agent::agents::{AgentSource, Agents, parse};
use harness_agent::{CoreEvent, Event, MemoryStore, Reply, ScriptedModel, SessionBuilder, Spawned};
use harness_core::protocol::{Mode, TurnEnd};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

const REVIEWER: &str = "---
name: code-reviewer
description: Reviews a change for bugs and style; use it after writing code.
tools: Read, Grep, Glob, Bash
model: inherit
---
You are a senior reviewer. Say REVIEWED at the end.
";

const SEARCHER: &str = "---
description: \"Searches the web and the docs\"
tools:
  - WebFetch
  - read
  - mcp__docs__search
model: qwen3-coder-30b
---

Search first, then answer.
";

#[test]
fn definitions_read_as_claude_code_writes_them() {
    let (def, said) = parse(
        "/p/.claude/agents/reviewer.md",
        REVIEWER,
        AgentSource::Project,
    )
    .expect("a Claude Code file");
    assert_eq!(def.name, "code-reviewer");
    assert_eq!(
        def.description,
        "Reviews a change for bugs and style; use it after writing code."
    );
    assert_eq!(
        def.tools.as_deref(),
        Some(&["read", "grep", "glob", "bash"].map(String::from)[..])
    );
    assert_eq!(def.model, None, "inherit: the session's model");
    assert_eq!(
        def.text,
        "You are a senior reviewer. Say REVIEWED at the end."
    );
    assert!(said.is_empty(), "{said:?}");

    // The file's stem names it; the tools come as a YAML list.
    let (def, said) = parse("/u/agents/searcher.md", SEARCHER, AgentSource::User).unwrap();
    assert_eq!(def.name, "searcher");
    assert_eq!(def.description, "Searches the web and the docs");
    assert_eq!(
        def.tools.as_deref(),
        Some(&["web_fetch", "read", "mcp__docs__search"].map(String::from)[..])
    );
    assert_eq!(def.model.as_deref(), Some("qwen3-coder-30b"));
    assert_eq!(def.text, "Search first, then answer.");
    assert!(said.is_empty(), "{said:?}");
    // Without `tools`: the parent's (all but task).
    let (def, _) = parse(
        "/p/a/plain.md",
        "---\ndescription: Does it\n---\nText.",
        AgentSource::Project,
    )
    .unwrap();
    assert_eq!(def.tools, None);
    assert!(def.allows("write") && def.allows("bash") && !def.allows("task"));
}

#[test]
fn what_is_wrong_with_a_definition_is_said_naming_its_file() {
    // No description: left out, the path named.
    let why = parse(
        "/p/.llembas/agents/vague.md",
        "---\nname: vague\ntools: Read\n---\nDo things.\n",
        AgentSource::Project,
    )
    .unwrap_err();
    assert!(
        why.starts_with("/p/.llembas/agents/vague.md: no `description`"),
        "{why}"
    );
    // No front matter at all is no description either.
    assert!(parse("/p/x.md", "Just text.", AgentSource::Project).is_err());
    // A name that cannot be typed.
    let why = parse(
        "/p/bad.md",
        "---\nname: two words\ndescription: d\n---\n",
        AgentSource::Project,
    )
    .unwrap_err();
    assert!(why.contains("\"two words\""), "{why}");

    // Unknown tools said once and left out; task is never given; Claude's model alias that
    // names no known model falls back to the session's.
    let (def, said) = parse(
        "/p/odd.md",
        "---\ndescription: d\ntools: Read, Frobnicate, Task, frobnicate, Frobnicate\nmodel: sonnet\n---\nT",
        AgentSource::Project,
    )
    .unwrap();
    assert_eq!(def.tools.as_deref(), Some(&["read".to_owned()][..]));
    assert_eq!(def.model, None);
    assert_eq!(
        said,
        [
            "/p/odd.md: a subagent cannot start subagents of its own, so `Task` is left out",
            "/p/odd.md: no tool is called `Frobnicate`, `frobnicate`; left out of the agent's tools",
            "/p/odd.md: model `sonnet` is not a model known here; agent `odd` runs on the session's model",
        ]
    );
}

#[test]
fn built_in_agents_win_then_the_project_then_the_user() {
    let mut agents = Agents::default();
    agents.add_file(
        "/p/.claude/agents/explore.md",
        "---\ndescription: mine\n---\nx",
        AgentSource::Project,
    );
    agents.add_file(
        "/p/.claude/agents/reviewer.md",
        REVIEWER,
        AgentSource::Project,
    );
    agents.add_file(
        "/u/agents/reviewer.md",
        "---\nname: code-reviewer\ndescription: the user's\n---\nx",
        AgentSource::User,
    );
    agents.add_file("/u/agents/vague.md", "no front matter", AgentSource::User);
    assert_eq!(agents.names(), ["explore", "general", "code-reviewer"]);
    let kept = agents.get("code-reviewer").unwrap();
    assert_eq!(kept.source, AgentSource::Project);
    assert!(agents.get("explore").is_none());
    assert!(agents.knows("explore") && agents.knows("code-reviewer") && !agents.knows("x"));
    let notices = agents.take_notices();
    assert_eq!(notices.len(), 2, "{notices:?}");
    assert_eq!(
        notices[0],
        "/p/.claude/agents/explore.md: `explore` is a built-in agent; this definition is ignored"
    );
    assert!(notices[1].starts_with("/u/agents/vague.md: no `description`"));
    // `/agents`: each with where it comes from.
    let listing = agents.listing(harness_spec::Project::Cli);
    let lines: Vec<&str> = listing.lines().collect();
    assert_eq!(lines.len(), 3, "{listing}");
    assert!(lines[0].starts_with("explore ") && lines[0].ends_with("(built-in)"));
    assert!(
        lines[2]
            .ends_with("(project: /p/.claude/agents/reviewer.md; tools: read, grep, glob, bash)"),
        "{listing}"
    );
}

fn two_agents() -> Agents {
    let mut agents = Agents::default();
    agents.add_file(
        "/p/.claude/agents/reviewer.md",
        REVIEWER,
        AgentSource::Project,
    );
    agents.add_file("/u/agents/searcher.md", SEARCHER, AgentSource::User);
    agents
}

/// Runs the session to its end: what it said.
async fn run(builder: SessionBuilder) -> Vec<Event> {
    let Spawned {
        session: _session,
        mut events,
        run,
    } = builder.one_shot(None).spawn().unwrap();
    let mut outs = Vec::new();
    while let Some(o) = events.recv().await {
        outs.push(o);
    }
    run.finished().await.unwrap().result.unwrap();
    outs
}

fn results(outs: &[Event]) -> Vec<harness_core::protocol::ToolResult> {
    events(outs)
        .into_iter()
        .filter_map(|e| match e {
            CoreEvent::ToolCallFinished { result } => Some(result),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn the_task_tool_lists_the_defined_agents_after_the_built_in_ones() {
    let model = ScriptedModel::new([
        Reply::call("load_tools", json!({"names": ["task"]})),
        Reply::text("ok"),
    ]);
    let built = SessionBuilder::new(Arc::new(model.clone()), TestWorld::new())
        .store(Arc::new(MemoryStore::default()))
        .mode(Mode::Auto)
        .agents(two_agents())
        .prompt("which agents?");
    run(built).await;
    let requests = model.requests();
    let task = requests[1]
        .tools
        .iter()
        .find(|t| t.name == "task")
        .expect("task sent whole once loaded");
    insta::assert_snapshot!("task_with_two_defined_agents", task.description);
}

#[tokio::test]
async fn a_defined_agent_runs_with_its_text_and_only_its_tools() {
    let model = ScriptedModel::new([
        Reply::call(
            "task",
            json!({"agent": "code-reviewer", "prompt": "Review the change."}),
        ),
        // Of the two, only bash is in the reviewer's list: `clock` (the world's own tool) is not.
        Reply::call("clock", json!({})),
        Reply::call("bash", json!({"command": "git diff"})),
        Reply::text("Looks right. REVIEWED"),
        Reply::text("The reviewer approved."),
    ]);
    let world = TestWorld::new();
    let built = SessionBuilder::new(Arc::new(model.clone()), world.clone())
        .store(Arc::new(MemoryStore::default()))
        .jobs(Arc::new(QuickJobs))
        .mode(Mode::Auto)
        .agents(two_agents())
        .prompt("Have it reviewed.");
    let outs = run(built).await;
    let requests = model.requests();
    let child = &requests[1];
    let offered: Vec<&str> = child.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(offered.contains(&"bash"), "{offered:?}");
    for not in ["clock", "launch", "task", "write"] {
        assert!(!offered.contains(&not), "{not}: {offered:?}");
    }
    let system = serde_json::to_string(&child.messages).unwrap();
    assert!(system.contains("# You are a subagent"), "{system}");
    assert!(system.contains("You are a senior reviewer."), "{system}");
    // The clock was not given: its call is a call of an unknown tool, not run.
    let said = serde_json::to_string(&requests[2].messages).unwrap();
    assert!(said.contains("Unknown tool: clock"), "{said}");
    assert_eq!(*world.calls.lock().unwrap(), ["bash"]);
    let task = results(&outs)
        .into_iter()
        .find(|r| r.content.contains("REVIEWED"))
        .expect("the reviewer's reply answers the task");
    assert!(!task.is_error, "{task:?}");
}

#[tokio::test]
async fn an_unknown_agent_is_refused_naming_them_all_and_a_defined_one_runs_in_the_background() {
    // One slot: the subagent's requests go first, the main agent's wait (as for a built-in).
    let model = ScriptedModel::new([
        Reply::call("task", json!({"agent": "reviewer", "prompt": "x"})),
        Reply::call(
            "task",
            json!({"agent": "code-reviewer", "prompt": "Review it.", "background": true}),
        ),
        Reply::text("REVIEWED in the background."),
        Reply::text("Waiting for the reviewer."),
        Reply::text("The reviewer is done."),
    ]);
    let built = SessionBuilder::new(Arc::new(model.clone()), TestWorld::new())
        .store(Arc::new(MemoryStore::default()))
        .mode(Mode::Auto)
        .agents(two_agents())
        .prompt("review");
    let outs = run(built).await;
    let results = results(&outs);
    assert!(results[0].is_error);
    assert!(
        results[0].content.ends_with(
            "there is no agent \"reviewer\": use one of explore, general, code-reviewer, searcher"
        ),
        "{}",
        results[0].content
    );
    // The reviewer ran as a job, and its end woke the session with its reply.
    let all = events(&outs);
    assert!(
        all.iter().any(|e| matches!(e, CoreEvent::JobEnded { .. })),
        "{all:?}"
    );
    let requests = model.requests();
    let child = serde_json::to_string(&requests[2].messages).unwrap();
    assert!(child.contains("You are a senior reviewer."), "{child}");
    let woke = serde_json::to_string(&requests.last().unwrap().messages).unwrap();
    assert!(woke.contains("REVIEWED in the background."), "{woke}");
    assert_eq!(
        all.iter().rev().find_map(|e| match e {
            CoreEvent::TurnEnded { reason } => Some(reason.clone()),
            _ => None,
        }),
        Some(TurnEnd::Finished)
    );
}

#[tokio::test]
async fn a_defined_agent_runs_on_the_model_it_names() {
    let model = ScriptedModel::new([
        Reply::call("task", json!({"agent": "searcher", "prompt": "Find it."})),
        Reply::text("Found it."),
        Reply::text("The searcher found it."),
    ]);
    let built = SessionBuilder::new(Arc::new(model.clone()), TestWorld::new())
        .store(Arc::new(MemoryStore::default()))
        .mode(Mode::Auto)
        .agents(two_agents())
        .prompt("search");
    run(built).await;
    let requests = model.requests();
    let parent = serde_json::to_string(&requests[0].messages).unwrap();
    let child = serde_json::to_string(&requests[1].messages).unwrap();
    assert!(child.contains("Search first, then answer."), "{child}");
    assert!(child.contains("qwen3-coder-30b"), "{child}");
    assert!(!parent.contains("qwen3-coder-30b"), "{parent}");
}

#[tokio::test]
async fn the_read_only_explorer_cannot_call_what_it_was_not_given() {
    let model = ScriptedModel::new([
        Reply::call("task", json!({"agent": "explore", "prompt": "Look."})),
        // Neither is offered to explore: a command and the world's own execute.
        Reply::call("bash", json!({"command": "touch made.txt"})),
        Reply::call("launch", json!({})),
        Reply::call("clock", json!({})),
        Reply::text("Only looked."),
        Reply::text("It only looked."),
    ]);
    let world = TestWorld::new();
    let built = SessionBuilder::new(Arc::new(model.clone()), world.clone())
        .store(Arc::new(MemoryStore::default()))
        .jobs(Arc::new(QuickJobs))
        .mode(Mode::Auto)
        .prompt("look around");
    run(built).await;
    let requests = model.requests();
    let offered: Vec<&str> = requests[1].tools.iter().map(|t| t.name.as_str()).collect();
    assert!(offered.contains(&"clock"), "{offered:?}");
    assert!(!offered.contains(&"launch") && !offered.contains(&"bash"));
    for (i, tool) in [(2, "bash"), (3, "launch")] {
        let said = serde_json::to_string(&requests[i].messages).unwrap();
        assert!(said.contains(&format!("Unknown tool: {tool}")), "{said}");
    }
    assert_eq!(*world.calls.lock().unwrap(), ["clock"], "only the read ran");
}
