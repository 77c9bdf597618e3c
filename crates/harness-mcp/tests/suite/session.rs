//! A session whose world has the everything server: its tools wait behind `load_tools` on the
//! first request, the model calls one, the answer reaches it, the tool is sent whole after; a
//! tool that is not read-only is asked in edit mode with its arguments.

use std::sync::Arc;

use harness_agent::{Built, Ctl, MemoryStore, Out, Reply, ScriptedModel, SessionBuilder};
use harness_core::protocol::{Answer, Event, Mode, Op};
use harness_mcp::{Limits, WithMcp};
use serde_json::json;

use super::*;

async fn run(built: Built, answer: Option<Answer>) -> Vec<Out> {
    let Built {
        mut driver,
        ctl,
        mut out,
    } = built;
    let run = tokio::spawn(async move {
        driver.run(true).await.unwrap();
        driver
    });
    let mut outs = Vec::new();
    let collect = async {
        while let Some(o) = out.recv().await {
            if let (Out::Event(Event::ToolCallAsked { call_id, .. }), Some(a)) = (&o, &answer) {
                ctl.send(Ctl::Op(Op::Answer {
                    call_id: call_id.clone(),
                    answer: a.clone(),
                }))
                .unwrap();
            }
            outs.push(o);
        }
    };
    tokio::select! {
        d = run => drop(d.unwrap()),
        () = collect => unreachable!("the driver holds the sender"),
    };
    while let Ok(o) = out.try_recv() {
        outs.push(o);
    }
    outs
}

fn build(model: &ScriptedModel, mcp: harness_mcp::Mcp, mode: Mode) -> Built {
    let world = Arc::new(WithMcp::new(bare(), Arc::new(mcp)));
    SessionBuilder::new(Arc::new(model.clone()), world)
        .store(Arc::new(MemoryStore::default()))
        .mode(mode)
        .build()
        .unwrap()
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
    let mut built = build(&model, mcp, Mode::Manual);
    built.driver.queue_prompt("Echo something.".into());
    run(built, None).await;
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
    let mut built = build(&model, mcp, Mode::Edit);
    built.driver.queue_prompt("Toggle the logging.".into());
    let outs = run(built, Some(Answer::Deny { feedback: None })).await;
    let asked = outs
        .iter()
        .find_map(|o| match o {
            Out::Event(Event::ToolCallAsked { question, .. }) => Some(question.clone()),
            _ => None,
        })
        .expect("edit mode asks before an MCP tool that is not read-only");
    assert_eq!(asked.tool, "mcp__everything__toggle-simulated-logging");
    assert_eq!(asked.pattern.as_deref(), Some("*"));
}
