//! What the model is sent, as snapshots: the wrap-up request, a job's wake-up, a stub, a capped
//! output, the compaction text.

use harness_core::protocol::{JobEnd, Risk, ToolCall};
use harness_loop::config::{Budget, LoopConfig};
use harness_loop::context::ReadInfo;
use harness_loop::session::{
    Action, AllowAll, Input, Message, ModelOutput, Session, SessionSetup, ToolOutcome, ToolTraits,
};
use harness_spec::Project;
use serde_json::json;

fn session(budget: Option<Budget>) -> Session {
    Session::new(SessionSetup {
        config: LoopConfig::embedded().unwrap(),
        project: Project::Cli,
        budget,
        id: "snapshots".into(),
        catalog: Box::new(|name: &str| {
            let risk = if name == "bash" {
                Risk::Execute
            } else {
                Risk::Read
            };
            Some(ToolTraits {
                risk,
                exclusive: false,
            })
        }),
        permissions: Box::new(AllowAll),
        subagent: false,
        hygiene: true,
    })
}

fn render(messages: &[Message]) -> String {
    messages
        .iter()
        .map(|m| match m {
            Message::System { text } => format!("system:\n{text}"),
            Message::User { text, origin, .. } => format!("user ({origin:?}):\n{text}"),
            Message::Assistant {
                text, tool_calls, ..
            } => {
                let calls: Vec<String> = tool_calls
                    .iter()
                    .map(|c| format!("  call {} {}", c.name, c.arguments))
                    .collect();
                format!("assistant:\n{text}{}", calls.join("\n"))
            }
            Message::Tool { call_id, text } => format!("tool {call_id}:\n{text}"),
        })
        .collect::<Vec<_>>()
        .join("\n---\n")
}

fn last_request(actions: &[Action]) -> &[Message] {
    actions
        .iter()
        .find_map(|a| match a {
            Action::CallModel(r) => Some(&r.messages[..]),
            _ => None,
        })
        .unwrap()
}

fn read_outcome(id: &str, first: u64, last: u64) -> ToolOutcome {
    let text: String = (first..=last)
        .map(|n| format!("{n:>6}\tfn f{n}() {{}}\n"))
        .collect();
    ToolOutcome {
        read: Some(ReadInfo {
            path: "/p/src/lib.rs".into(),
            first,
            last,
            hash: "sha256:9f86d081884c7d659a2feaa0c55ad015".into(),
        }),
        ..ToolOutcome::ok(id, text)
    }
}

#[test]
fn what_the_model_sees() {
    let mut s = session(Some(Budget {
        steps: 4,
        tokens: u64::MAX,
    }));
    s.handle(Input::Prompt {
        text: "Tidy lib.rs".into(),
    })
    .unwrap();
    let call = |id: &str, name: &str, args: serde_json::Value| ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args,
    };
    s.handle(Input::Model(ModelOutput {
        tool_calls: vec![call("c1", "read", json!({"path": "src/lib.rs"}))],
        ..ModelOutput::default()
    }))
    .unwrap();
    s.handle(Input::ToolResults(vec![read_outcome("c1", 1, 5)]))
        .unwrap();
    s.handle(Input::Model(ModelOutput {
        tool_calls: vec![
            call(
                "c2",
                "read",
                json!({"path": "src/lib.rs", "offset": 2, "limit": 3}),
            ),
            call(
                "c3",
                "bash",
                json!({"command": "cargo test", "background": true}),
            ),
        ],
        ..ModelOutput::default()
    }))
    .unwrap();
    s.handle(Input::ToolResults(vec![read_outcome("c2", 2, 4)]))
        .unwrap();
    s.handle(Input::JobOutput {
        id: 1,
        text: "running 3 tests\ntest a ... ok\ntest result: ok\n".into(),
    })
    .unwrap();
    s.handle(Input::JobEnded {
        id: 1,
        end: JobEnd::Done { exit_code: Some(0) },
        final_reply: None,
    })
    .unwrap();
    let long: String = (1..=405).map(|n| format!("warning {n}\n")).collect();
    s.handle(Input::Model(ModelOutput {
        tool_calls: vec![call("c4", "bash", json!({"command": "cargo clippy"}))],
        ..ModelOutput::default()
    }))
    .unwrap();
    s.handle(Input::ToolResults(vec![ToolOutcome::ok("c4", long)]))
        .unwrap();
    let actions = s
        .handle(Input::Model(ModelOutput {
            tool_calls: vec![call("c5", "read", json!({"path": "src/lib.rs"}))],
            ..ModelOutput::default()
        }))
        .unwrap();
    let actions = if actions.iter().any(|a| matches!(a, Action::RunTools { .. })) {
        s.handle(Input::ToolResults(vec![read_outcome("c5", 1, 5)]))
            .unwrap()
    } else {
        actions
    };
    insta::assert_snapshot!("wrap_up_request", render(last_request(&actions)));
    s.handle(Input::Model(ModelOutput {
        text: "Done: tidied.".into(),
        ..ModelOutput::default()
    }))
    .unwrap();
    let text = s
        .compact("Summary: lib.rs tidied; clippy warnings remain.")
        .unwrap();
    insta::assert_snapshot!("compaction", text);
}
