//! A session whose world has the everything server: its tools wait behind `load_tools` on the
//! first request, the model calls one, the answer reaches it, the tool is sent whole after; a
//! tool that is not read-only is asked in edit mode with its arguments.

use std::sync::Arc;

use harness_agent::{
    Event as SessionEvent, MemoryStore, Op, Reply, ScriptedModel, SessionBuilder, Spawned,
};
use harness_core::protocol::{Answer, Event, Mode};
use harness_mcp::{Limits, WithMcp};
use serde_json::json;

use super::*;

/// Runs the session's prompt to its end, answering its questions with `answer`; what it said.
pub(super) async fn run(builder: SessionBuilder, answer: Option<Answer>) -> Vec<SessionEvent> {
    let Spawned {
        session,
        mut events,
        run,
    } = builder.one_shot(None).spawn().unwrap();
    let mut outs = Vec::new();
    while let Some(o) = events.recv().await {
        if let (SessionEvent::Core(Event::ToolCallAsked { call_id, .. }), Some(a)) = (&o, &answer) {
            session.submit(Op::Answer {
                call_id: call_id.clone(),
                answer: a.clone(),
            });
        }
        outs.push(o);
    }
    run.finished().await.unwrap().result.unwrap();
    outs
}

fn build(model: &ScriptedModel, mcp: harness_mcp::Mcp, mode: Mode) -> SessionBuilder {
    let world = Arc::new(WithMcp::new(bare(), Arc::new(mcp)));
    SessionBuilder::new(Arc::new(model.clone()), world)
        .store(Arc::new(MemoryStore::default()))
        .mode(mode)
}

#[tokio::test]
async fn the_model_calls_a_deferred_mcp_tool_and_reads_its_answer() {
    let Some(mcp) = start_everything(Limits::default()).await else {
        return;
    };
    let model = ScriptedModel::new([
        Reply::call(
            "mcp__everything__echo",
            json!({"message": "from the model"}),
        ),
        Reply::text("It echoed."),
    ]);
    let builder = build(&model, mcp, Mode::Manual).prompt("Echo something.");
    run(builder, None).await;
    let requests = model.requests();
    let first = &requests[0];
    let loader = first.tools.iter().find(|t| t.name == "load_tools").unwrap();
    assert!(
        loader
            .description
            .contains("- mcp__everything__echo: Echoes back the input string"),
        "{}",
        loader.description
    );
    assert!(!first.tools.iter().any(|t| t.name.starts_with("mcp__")));
    let second = &requests[1];
    assert!(
        second
            .tools
            .iter()
            .any(|t| t.name == "mcp__everything__echo")
    );
    let sent = serde_json::to_string(&second.messages).unwrap();
    assert!(sent.contains("Echo: from the model"), "{sent}");
}

#[tokio::test]
async fn a_tool_that_is_not_read_only_is_asked_with_its_arguments_in_edit_mode() {
    let Some(mcp) = start_everything(Limits::default()).await else {
        return;
    };
    let model = ScriptedModel::new([
        Reply::call("mcp__everything__toggle-simulated-logging", json!({})),
        Reply::text("Asked."),
    ]);
    let builder = build(&model, mcp, Mode::Edit).prompt("Toggle the logging.");
    let outs = run(builder, Some(Answer::Deny { feedback: None })).await;
    let asked = outs
        .iter()
        .find_map(|o| match o {
            SessionEvent::Core(Event::ToolCallAsked { question, .. }) => Some(question.clone()),
            _ => None,
        })
        .expect("edit mode asks before an MCP tool that is not read-only");
    assert_eq!(asked.tool, "mcp__everything__toggle-simulated-logging");
    assert_eq!(asked.pattern.as_deref(), Some("*"));
}
