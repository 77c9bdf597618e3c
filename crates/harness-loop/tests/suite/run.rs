use harness_core::protocol::{Answer, JobEnd, Origin, PermissionQuestion, Risk, ToolCall, TurnEnd};
use harness_loop::config::{Budget, LoopConfig};
use harness_loop::session::{
    Action, AllowAll, Decision, Input, Message, ModelOutput, Permissions, Session, SessionSetup,
    ToolOutcome, ToolTraits,
};
use harness_spec::Project;
use pretty_assertions::assert_eq;
use serde_json::json;

fn traits(name: &str) -> Option<ToolTraits> {
    let (risk, exclusive) = match name {
        "read" | "grep" | "list" | "recall" | "job_list" | "job_output" => (Risk::Read, false),
        "plan_write" => (Risk::Write, true),
        "edit" => (Risk::Write, false),
        "bash" | "task" | "job_stop" | "job_send" => (Risk::Execute, false),
        _ => return None,
    };
    Some(ToolTraits { risk, exclusive })
}

fn session_with(budget: Option<Budget>, permissions: Box<dyn Permissions>) -> Session {
    Session::new(SessionSetup {
        config: LoopConfig::embedded().unwrap(),
        project: Project::Cli,
        budget,
        id: "test".into(),
        catalog: Box::new(traits),
        permissions,
        subagent: false,
        hygiene: true,
    })
}

fn session() -> Session {
    session_with(None, Box::new(AllowAll))
}

fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args,
    }
}

fn calls_of(actions: &[Action]) -> Vec<(Vec<String>, bool)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::RunTools { calls, parallel } => {
                Some((calls.iter().map(|c| c.id.clone()).collect(), *parallel))
            }
            _ => None,
        })
        .collect()
}

fn request(actions: &[Action]) -> Option<&harness_loop::session::ModelRequest> {
    actions.iter().find_map(|a| match a {
        Action::CallModel(r) => Some(r),
        _ => None,
    })
}

fn end(actions: &[Action]) -> Option<&TurnEnd> {
    actions.iter().find_map(|a| match a {
        Action::EndTurn(r) => Some(r),
        _ => None,
    })
}

fn model(calls: Vec<ToolCall>) -> Input {
    Input::Model(ModelOutput {
        tool_calls: calls,
        ..ModelOutput::default()
    })
}

fn text(t: &str) -> Input {
    Input::Model(ModelOutput {
        text: t.into(),
        ..ModelOutput::default()
    })
}

#[test]
fn reads_run_side_by_side_and_exclusive_alone_results_in_call_order() {
    let mut s = session();
    s.handle(Input::Prompt { text: "go".into() }).unwrap();
    let a = s
        .handle(model(vec![
            call("1", "read", json!({"path": "/a"})),
            call("2", "grep", json!({"pattern": "x"})),
            call("3", "plan_write", json!({})),
            call("4", "read", json!({"path": "/b"})),
            call("5", "edit", json!({"path": "/b"})),
        ]))
        .unwrap();
    assert_eq!(
        calls_of(&a),
        vec![(vec!["1".to_string(), "2".to_string()], true)]
    );
    // Results come in any order; they are matched by id.
    let a = s
        .handle(Input::ToolResults(vec![
            ToolOutcome::ok("2", "g"),
            ToolOutcome::ok("1", "r"),
        ]))
        .unwrap();
    assert_eq!(calls_of(&a), vec![(vec!["3".to_string()], false)]);
    let a = s
        .handle(Input::ToolResults(vec![ToolOutcome::ok("3", "p")]))
        .unwrap();
    assert_eq!(calls_of(&a), vec![(vec!["4".to_string()], false)]);
    let a = s
        .handle(Input::ToolResults(vec![ToolOutcome::ok("4", "b")]))
        .unwrap();
    assert_eq!(calls_of(&a), vec![(vec!["5".to_string()], false)]);
    let a = s
        .handle(Input::ToolResults(vec![ToolOutcome::ok("5", "e")]))
        .unwrap();
    let req = request(&a).unwrap();
    let ids: Vec<&str> = req
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ids, ["1", "2", "3", "4", "5"]);
}

#[test]
fn step_budget_ends_with_a_wrap_up_without_tools() {
    let mut s = session_with(
        Some(Budget {
            steps: 2,
            tokens: u64::MAX,
        }),
        Box::new(AllowAll),
    );
    s.handle(Input::Prompt { text: "go".into() }).unwrap();
    s.handle(model(vec![call("1", "read", json!({"path": "/a"}))]))
        .unwrap();
    let a = s
        .handle(Input::ToolResults(vec![ToolOutcome::ok("1", "x")]))
        .unwrap();
    assert!(request(&a).unwrap().tools);
    s.handle(model(vec![call("2", "read", json!({"path": "/b"}))]))
        .unwrap();
    let a = s
        .handle(Input::ToolResults(vec![ToolOutcome::ok("2", "y")]))
        .unwrap();
    let req = request(&a).unwrap();
    assert!(req.wrap_up && !req.tools);
    match req.messages.last().unwrap() {
        Message::User { text, origin, .. } => {
            assert!(text.starts_with("[budget reached: step]"), "{text}");
            assert_eq!(*origin, Origin::Machine);
        }
        other => panic!("{other:?}"),
    }
    // Calls on the wrap-up step are not run.
    let a = s
        .handle(model(vec![call("3", "read", json!({"path": "/c"}))]))
        .unwrap();
    assert!(calls_of(&a).is_empty());
    assert_eq!(
        end(&a),
        Some(&TurnEnd::Budget {
            limit: "steps".into()
        })
    );
}

#[test]
fn empty_answers_are_nudged_then_end_the_turn() {
    let mut s = session();
    s.handle(Input::Prompt { text: "go".into() }).unwrap();
    let cfg = LoopConfig::embedded().unwrap();
    for _ in 0..cfg.nudges.empty_answer.retries {
        let a = s.handle(text("  ")).unwrap();
        let req = request(&a).unwrap();
        assert!(
            matches!(req.messages.last(), Some(Message::User { text, .. }) if text.starts_with("[empty answer]"))
        );
    }
    let a = s.handle(text("")).unwrap();
    let ends = |a: &[Action]| match end(a) {
        Some(TurnEnd::Error { message }) => message.clone(),
        other => panic!("{other:?}"),
    };
    // Answers that held only calls which could not be run end the turn saying so, not as
    // empty answers.
    let mut cut = session();
    cut.handle(Input::Prompt { text: "go".into() }).unwrap();
    let broken = || {
        Input::Model(ModelOutput {
            note: Some("Your call of write was not run: the arguments were cut off.".into()),
            ..ModelOutput::default()
        })
    };
    for _ in 0..cfg.nudges.empty_answer.retries {
        cut.handle(broken()).unwrap();
    }
    let b = cut.handle(broken()).unwrap();
    insta::assert_snapshot!(format!("empty: {}\ncut: {}", ends(&a), ends(&b)), @r"
    empty: The model gave 3 empty answers in a row.
    cut: The model gave 3 answers in a row whose tool calls could not be run (cut off, or not valid), and no text.
    ");
}

#[test]
fn repeated_identical_calls_are_not_run_again() {
    let mut s = session();
    s.handle(Input::Prompt { text: "go".into() }).unwrap();
    for i in 1..=2 {
        let a = s
            .handle(model(vec![call(
                &i.to_string(),
                "grep",
                json!({"pattern": "x"}),
            )]))
            .unwrap();
        assert_eq!(calls_of(&a).len(), 1);
        s.handle(Input::ToolResults(vec![ToolOutcome::ok(
            i.to_string(),
            format!("out {i}"),
        )]))
        .unwrap();
    }
    let a = s
        .handle(model(vec![call("3", "grep", json!({"pattern": "x"}))]))
        .unwrap();
    assert!(
        calls_of(&a).is_empty(),
        "the third identical call is not run"
    );
    let req = request(&a).unwrap();
    let Some(Message::Tool { text, .. }) = req.messages.last() else {
        panic!()
    };
    assert!(
        text.contains("[repeated call] This is call number 3 of grep"),
        "{text}"
    );
    let second = s.context().results()[1].id.to_string();
    assert!(
        text.contains(&second),
        "names the last result {second}: {text}"
    );
    s.handle(model(vec![call("4", "grep", json!({"pattern": "x"}))]))
        .unwrap();
    let a = s
        .handle(model(vec![call("5", "grep", json!({"pattern": "x"}))]))
        .unwrap();
    assert!(matches!(end(&a), Some(TurnEnd::Error { .. })));
}

#[test]
fn text_only_with_open_plan_is_nudged_once() {
    let mut s = session();
    s.set_open_tasks(vec!["fix parser".into(), "add test".into()]);
    s.handle(Input::Prompt { text: "go".into() }).unwrap();
    let a = s.handle(text("I will now fix it.")).unwrap();
    let req = request(&a).unwrap();
    let Some(Message::User { text: t, .. }) = req.messages.last() else {
        panic!()
    };
    assert!(t.contains("2 open task(s): fix parser; add test"), "{t}");
    let a = s.handle(text("Blocked: no access.")).unwrap();
    assert_eq!(end(&a), Some(&TurnEnd::Finished));
}

/// An open plan is nudged once per plan state, and the person is told: a later prompt answered
/// in text while the same tasks are open ends without a hidden request; a changed plan can be
/// nudged again.
#[test]
fn an_open_plan_is_nudged_once_per_plan_state() {
    let nudged = |a: &[Action]| {
        a.iter().any(|a| {
            matches!(a, Action::Emit(harness_core::protocol::Event::Notice { text, .. })
                if text.contains("2 open task(s)"))
        }) && request(a).is_some()
    };
    let mut s = session();
    s.set_open_tasks(vec!["fix parser".into(), "add test".into()]);
    s.handle(Input::Prompt { text: "go".into() }).unwrap();
    let a = s.handle(text("I will now fix it.")).unwrap();
    assert!(nudged(&a), "{a:?}");
    let a = s.handle(text("Blocked: no access.")).unwrap();
    assert_eq!(end(&a), Some(&TurnEnd::Finished));
    // The next prompt, the plan unchanged: no nudge.
    s.handle(Input::Prompt {
        text: "thanks".into(),
    })
    .unwrap();
    let a = s.handle(text("You are welcome.")).unwrap();
    assert_eq!(end(&a), Some(&TurnEnd::Finished), "{a:?}");
    // The plan moved on: its new state is nudged.
    s.set_open_tasks(vec!["add test".into(), "update docs".into()]);
    s.handle(Input::Prompt {
        text: "more".into(),
    })
    .unwrap();
    let a = s.handle(text("Noted.")).unwrap();
    assert!(nudged(&a), "{a:?}");
}

struct AskEdits;
impl Permissions for AskEdits {
    fn decide(&self, call: &ToolCall) -> Decision {
        match call.name.as_str() {
            "edit" => Decision::Ask(PermissionQuestion {
                tool: "edit".into(),
                risk: Risk::Write,
                subject: "/a".into(),
                pattern: None,
                reason: None,
                change: None,
            }),
            "bash" => Decision::Deny {
                reason: "rm -rf / is refused in every mode".into(),
            },
            _ => Decision::Allow,
        }
    }
}

#[test]
fn permissions_ask_and_deny() {
    let mut s = session_with(None, Box::new(AskEdits));
    s.handle(Input::Prompt { text: "go".into() }).unwrap();
    let a = s
        .handle(model(vec![
            call("1", "bash", json!({"command": "rm -rf /"})),
            call("2", "edit", json!({"path": "/a"})),
        ]))
        .unwrap();
    assert!(
        a.iter()
            .any(|a| matches!(a, Action::Ask { call_id, .. } if call_id == "2"))
    );
    let a = s
        .handle(Input::Answer {
            call_id: "2".into(),
            answer: Answer::Deny {
                feedback: Some("not now".into()),
            },
        })
        .unwrap();
    let req = request(&a).unwrap();
    let texts: Vec<&str> = req
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        texts[0].ends_with("Not run: rm -rf / is refused in every mode"),
        "{}",
        texts[0]
    );
    assert!(texts[1].ends_with("Not run: the person declined this call and said: not now"));
}

#[test]
fn job_wakes_at_next_step_or_as_a_machine_turn() {
    let mut s = session();
    s.handle(Input::Prompt { text: "go".into() }).unwrap();
    let a = s
        .handle(model(vec![call(
            "1",
            "bash",
            json!({"command": "make", "background": true}),
        )]))
        .unwrap();
    assert!(
        a.iter()
            .any(|a| matches!(a, Action::StartJob { id: 1, .. }))
    );
    // The job ends while the model is thinking: the wake-up goes before the next step.
    s.handle(model(vec![call("2", "read", json!({"path": "/a"}))]))
        .unwrap();
    let none = s
        .handle(Input::JobEnded {
            id: 1,
            end: JobEnd::Done { exit_code: Some(0) },
            final_reply: None,
        })
        .unwrap();
    assert!(request(&none).is_none());
    let a = s
        .handle(Input::ToolResults(vec![ToolOutcome::ok("2", "x")]))
        .unwrap();
    let Some(Message::User {
        text: t, origin, ..
    }) = request(&a).unwrap().messages.last()
    else {
        panic!()
    };
    assert!(
        t.starts_with("<job id=\"1\" kind=\"command\" state=\"done\">"),
        "{t}"
    );
    assert_eq!(*origin, Origin::Machine);
    s.handle(text("done")).unwrap();
    // Idle: a job end starts a machine turn of its own.
    s.handle(Input::Prompt {
        text: "again".into(),
    })
    .unwrap();
    s.handle(model(vec![call(
        "3",
        "task",
        json!({"prompt": "look", "background": true}),
    )]))
    .unwrap();
    s.handle(text("started")).unwrap();
    assert!(!s.busy());
    let a = s
        .handle(Input::JobEnded {
            id: 2,
            end: JobEnd::Done { exit_code: None },
            final_reply: Some("found it".into()),
        })
        .unwrap();
    assert!(a.iter().any(|a| matches!(
        a,
        Action::Emit(harness_core::protocol::Event::UserInput {
            origin: Origin::Machine,
            ..
        })
    )));
    let Some(Message::User { text: t, .. }) = request(&a).unwrap().messages.last() else {
        panic!()
    };
    assert!(
        t.contains("state=\"done\"") && t.contains("found it"),
        "{t}"
    );
}

#[test]
fn cancel_pairs_every_call_with_a_result() {
    let mut s = session();
    s.handle(Input::Prompt { text: "go".into() }).unwrap();
    s.handle(model(vec![
        call("1", "read", json!({"path": "/a"})),
        call("2", "edit", json!({})),
    ]))
    .unwrap();
    let a = s.handle(Input::Cancel).unwrap();
    assert_eq!(end(&a), Some(&TurnEnd::Cancelled));
    let tools: Vec<&str> = s
        .history()
        .iter()
        .filter_map(|m| match m {
            Message::Tool { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(tools.len(), 2);
    assert!(
        tools
            .iter()
            .all(|t| t.ends_with("Not run: the prompt was cancelled."))
    );
}

#[test]
fn rewind_drops_later_turns_and_their_stubs() {
    let mut s = session();
    let read = |s: &mut Session, id: &str| {
        s.handle(model(vec![call(id, "read", json!({"path": "/a"}))]))
            .unwrap();
        let outcome = ToolOutcome {
            read: Some(harness_loop::context::ReadInfo {
                path: "/a".into(),
                first: 1,
                last: 3,
                hash: "h".into(),
            }),
            ..ToolOutcome::ok(id, "1\n2\n3")
        };
        s.handle(Input::ToolResults(vec![outcome])).unwrap();
        s.handle(text("ok")).unwrap();
    };
    s.handle(Input::Prompt { text: "one".into() }).unwrap();
    s.handle(text("hi")).unwrap();
    s.handle(Input::Prompt { text: "two".into() }).unwrap();
    read(&mut s, "1");
    s.rewind(2).unwrap();
    assert_eq!(s.history().len(), 2);
    s.handle(Input::Prompt {
        text: "two again".into(),
    })
    .unwrap();
    read(&mut s, "2");
    let last = s.context().results().last().unwrap();
    assert_eq!(
        last.kind,
        harness_loop::context::InsertKind::Full,
        "no stub to a rewound read"
    );
    assert!(s.rewind(9).is_err());
}

/// A rewind into what a compaction folded is refused naming the compaction and the earliest
/// turn there is to go back to.
#[test]
fn a_rewind_into_a_compaction_names_it() {
    let mut s = session();
    for p in ["one", "two"] {
        s.handle(Input::Prompt { text: p.into() }).unwrap();
        s.handle(text("done")).unwrap();
    }
    s.compact("summary").unwrap();
    s.handle(Input::Prompt {
        text: "three".into(),
    })
    .unwrap();
    s.handle(text("done")).unwrap();
    insta::assert_snapshot!(
        format!("{}\n{}", s.rewind(2).unwrap_err(), s.rewind(7).unwrap_err()),
        @r"
    cannot rewind to turn 2: turns 1 to 2 were compacted into a summary (/compact), so the earliest turn to rewind to is 3
    cannot rewind to turn 7: the session has 3 turn(s)
    "
    );
    assert!(s.rewind(3).is_ok());
}

#[test]
fn calls_that_could_not_be_run_are_said_after_the_results() {
    let note = "Your call of write was not run: the arguments were cut off.";
    // Only a broken call: the note replaces the empty-answer nudge.
    let mut s = session();
    s.handle(Input::Prompt { text: "go".into() }).unwrap();
    let a = s
        .handle(Input::Model(ModelOutput {
            note: Some(note.into()),
            ..ModelOutput::default()
        }))
        .unwrap();
    let req = request(&a).unwrap();
    assert!(
        matches!(req.messages.last(), Some(Message::User { text, origin, .. }) if text == note && *origin == Origin::Machine)
    );
    // A whole call beside it: its result first, then the note, then the next request.
    let a = s
        .handle(Input::Model(ModelOutput {
            tool_calls: vec![call("c1", "read", json!({"path": "a"}))],
            note: Some(note.into()),
            ..ModelOutput::default()
        }))
        .unwrap();
    assert_eq!(calls_of(&a), vec![(vec!["c1".to_owned()], false)]);
    let a = s
        .handle(Input::ToolResults(vec![ToolOutcome::ok("c1", "1\tx")]))
        .unwrap();
    let req = request(&a).unwrap();
    let n = req.messages.len();
    assert!(matches!(&req.messages[n - 2], Message::Tool { call_id, .. } if call_id == "c1"));
    assert!(matches!(&req.messages[n - 1], Message::User { text, .. } if text == note));
}

#[test]
fn long_words_of_the_model_are_kept_capped_once_handled() {
    let kept = LoopConfig::embedded().unwrap().context.kept.clone();
    let big = "x".repeat(1_000_000);
    let mut s = session();
    s.handle(Input::Prompt { text: "go".into() }).unwrap();
    let a = s
        .handle(model(vec![call(
            "c1",
            "edit",
            json!({"path": "/big.txt", "new_string": big}),
        )]))
        .unwrap();
    // The call runs with its whole arguments.
    let ran = a
        .iter()
        .find_map(|a| match a {
            Action::RunTools { calls, .. } => Some(calls[0].clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        ran.arguments["new_string"].as_str().unwrap().len(),
        1_000_000
    );
    let a = s
        .handle(Input::ToolResults(vec![ToolOutcome::error(
            "c1",
            "too large",
        )]))
        .unwrap();
    // The next request carries the capped form only.
    let req = request(&a).unwrap();
    let sent: usize = req.messages.iter().map(Message::chars).sum();
    assert!(sent < kept.max_chars + 1_000, "{sent}");
    let Some(Message::Assistant { tool_calls, .. }) = req.messages.get(1) else {
        panic!("{:?}", req.messages);
    };
    let arg = tool_calls[0].arguments["new_string"].as_str().unwrap();
    assert!(
        arg.contains("[964000 characters not kept in the conversation]"),
        "{}",
        &arg[..100]
    );
    // A long answer, too.
    let a = s.handle(text(&"y".repeat(500_000))).unwrap();
    assert!(matches!(end(&a), Some(TurnEnd::Finished)));
    let last = s.history().last().unwrap();
    assert!(last.chars() < kept.max_chars + 100, "{}", last.chars());
}

#[test]
fn a_finished_call_says_its_label_apart_so_a_person_sees_the_body_alone() {
    let mut s = session();
    s.handle(Input::Prompt { text: "go".into() }).unwrap();
    s.handle(model(vec![call("1", "read", json!({"path": "/a"}))]))
        .unwrap();
    let a = s
        .handle(Input::ToolResults(vec![ToolOutcome::ok(
            "1",
            "line one\nline two",
        )]))
        .unwrap();
    let result = a
        .iter()
        .find_map(|a| match a {
            Action::Emit(harness_core::protocol::Event::ToolCallFinished { result }) => {
                Some(result.clone())
            }
            _ => None,
        })
        .expect("the result is emitted");
    // The model is told the result's id on a line of its own; the person is not.
    assert_eq!(result.label, format!("[{}]", result.result_id));
    assert_eq!(
        result.content,
        format!("{}\nline one\nline two", result.label)
    );
    assert_eq!(result.body(), "line one\nline two");
}

#[test]
fn a_model_link_failure_ends_the_turn_as_its_own_kind() {
    let message = || "cannot reach the model server".to_owned();
    let cases = [
        (false, TurnEnd::ModelUnavailable { message: message() }),
        // A prompt too big for the window is the conversation's, not the link's.
        (true, TurnEnd::Error { message: message() }),
    ];
    for (overflow, want) in cases {
        let mut s = session();
        s.handle(Input::Prompt { text: "go".into() }).unwrap();
        let a = s
            .handle(Input::ModelFailed {
                message: message(),
                overflow,
            })
            .unwrap();
        assert_eq!(end(&a), Some(&want));
    }
}
