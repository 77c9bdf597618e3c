//! The session's one API: events written as the JSON a server stores and a page reads (the
//! core's as harness-core writes them, the front end's own as `{"type": ...}`), read back the
//! same; a mode change answered; the typed queries.

use std::sync::Arc;

use harness_agent::{
    CoreEvent, Event, MemoryStore, Op, Reply, ScriptedModel, SessionBuilder, ShellEnd,
};
use harness_core::protocol::{Answer, Level, Mode};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

#[test]
fn events_are_written_as_the_page_reads_them_and_read_back() {
    let show = Event::Show {
        call_id: "c3".into(),
        path: "/work/notes.md".into(),
        title: "notes.md".into(),
        kind: "markdown".into(),
        language: None,
        line: Some(4),
        content: "# Notes\n".into(),
    };
    let cases = [
        (
            Event::Core(CoreEvent::Notice {
                level: Level::Info,
                text: "hi".into(),
            }),
            json!({"type": "notice", "level": "info", "text": "hi"}),
        ),
        (
            Event::Edit {
                call_id: "c1".into(),
                path: "/work/a.txt".into(),
                before: "a".into(),
                after: "b".into(),
            },
            json!({"type": "edit", "call_id": "c1", "path": "/work/a.txt", "before": "a", "after": "b"}),
        ),
        (
            Event::Question {
                call_id: "c2".into(),
                question: "Which?".into(),
                options: vec!["one".into(), "two".into()],
            },
            json!({"type": "question", "call_id": "c2", "question": "Which?", "options": ["one", "two"]}),
        ),
        // The file's text is not written: a viewer reads the file by its path.
        (
            show.clone(),
            json!({"type": "show", "call_id": "c3", "path": "/work/notes.md", "title": "notes.md",
                   "kind": "markdown", "language": null, "line": 4}),
        ),
        (
            Event::ToolOutput {
                call_id: "c4".into(),
                text: "12%\n".into(),
            },
            json!({"type": "tool_output", "call_id": "c4", "text": "12%\n"}),
        ),
        // A subagent's call, under the task that runs it.
        (
            Event::Core(CoreEvent::SubagentCall {
                task_call_id: Some("c5".into()),
                job_id: None,
                call: serde_json::from_value(
                    json!({"id": "s1", "name": "grep", "arguments": {"pattern": "503"}}),
                )
                .unwrap(),
                block: harness_core::protocol::Block::Read,
                status: harness_core::protocol::SubagentCallStatus::Failed {
                    reason: "no such directory".into(),
                },
            }),
            json!({"type": "subagent_call", "task_call_id": "c5",
                   "call": {"id": "s1", "name": "grep", "arguments": {"pattern": "503"}},
                   "block": "read", "status": "failed", "reason": "no such directory"}),
        ),
    ];
    for (event, written) in cases {
        assert_eq!(serde_json::to_value(&event).unwrap(), written);
        let read: Event = serde_json::from_value(written).unwrap();
        match (&read, &event) {
            (Event::Show { content, .. }, Event::Show { .. }) => assert!(content.is_empty()),
            _ => assert_eq!(read, event),
        }
    }
}

#[test]
fn ops_are_written_tagged() {
    let cases = [
        (Op::Cancel, json!({"type": "cancel"})),
        (
            Op::Reply {
                call_id: "c1".into(),
                text: Some("yes".into()),
            },
            json!({"type": "reply", "call_id": "c1", "text": "yes"}),
        ),
        (
            Op::Answer {
                call_id: "c2".into(),
                answer: Answer::Once,
            },
            json!({"type": "answer", "call_id": "c2", "answer": {"answer": "once"}}),
        ),
        (
            Op::SetMode { mode: Mode::Plan },
            json!({"type": "set_mode", "mode": "plan"}),
        ),
    ];
    for (op, written) in cases {
        assert_eq!(serde_json::to_value(&op).unwrap(), written);
        assert_eq!(serde_json::from_value::<Op>(written).unwrap(), op);
    }
}

#[tokio::test]
async fn a_mode_change_is_answered_after_its_event_and_queries_are_typed() {
    let model = ScriptedModel::new([Reply::text("Hello.")]);
    let mut spawned = SessionBuilder::new(Arc::new(model), TestWorld::new())
        .store(Arc::new(MemoryStore::default()))
        .mode(Mode::Auto)
        .spawn()
        .unwrap();
    let session = spawned.session.clone();
    assert_eq!(session.set_mode(Mode::Plan).await.unwrap(), Mode::Plan);
    // The change was said before it was answered: no waiting on the stream for it.
    assert_eq!(
        spawned.events.drain(),
        [Event::Core(CoreEvent::ModeChanged { mode: Mode::Plan })]
    );
    assert!(session.submit(Op::Prompt {
        text: "Hi.".into(),
        origin: Default::default(),
        images: Vec::new(),
    }));
    while let Some(e) = spawned.events.recv().await {
        if matches!(e, Event::Core(CoreEvent::TurnEnded { .. })) {
            break;
        }
    }
    assert!(session.jobs().await.unwrap().is_empty());
    assert_eq!(session.job_output(9, 0).await.unwrap(), None);
    assert_eq!(
        session.keep(5).await.unwrap(),
        Err("the session has 1 turns, not 5".to_owned())
    );
    assert_eq!(session.keep(1).await.unwrap(), Ok(1));
    // The last handle's drop ends the session; a weak one does not hold it.
    let weak = session.downgrade();
    drop(session);
    drop(spawned.session);
    let ended = spawned.run.finished().await.unwrap();
    ended.result.unwrap();
    assert!(weak.upgrade().is_none());
    assert!(matches!(
        ended.last_end,
        Some(harness_core::protocol::TurnEnd::Finished)
    ));
}

/// The person's own command is the session's to run: by the rules a model's `bash` call meets
/// (allowed, asked once with no "always", refused by a deny), through its job spawner, its end
/// told as an event.
#[tokio::test]
async fn the_persons_command_is_an_op_the_session_runs_under_its_rules() {
    let model = ScriptedModel::new([]);
    let mut spawned = SessionBuilder::new(Arc::new(model), TestWorld::new())
        .store(Arc::new(MemoryStore::default()))
        .jobs(Arc::new(QuickJobs))
        .mode(Mode::Edit)
        .spawn()
        .unwrap();
    let session = spawned.session.clone();
    let mut next = async || {
        loop {
            let e = spawned.events.recv().await.unwrap();
            if matches!(e, Event::ShellAsked { .. } | Event::ShellEnded { .. }) {
                return e;
            }
        }
    };
    // A read runs at once.
    session.submit(Op::Shell {
        command: "ls".into(),
    });
    let Event::ShellEnded { command, end, .. } = next().await else {
        panic!("not an end");
    };
    assert_eq!(command, "ls");
    assert_eq!(
        end,
        ShellEnd::Ran {
            code: 0,
            output: "ls\n".into()
        }
    );
    // A rule asks: once, without "always"; a no leaves it unrun.
    for (answer, ran) in [
        (Answer::Deny { feedback: None }, false),
        (Answer::Once, true),
    ] {
        session.submit(Op::Shell {
            command: "echo hi; exit 3".into(),
        });
        let Event::ShellAsked { call_id, question } = next().await else {
            panic!("not asked");
        };
        assert_eq!((question.tool.as_str(), question.pattern), ("bash", None));
        session.submit(Op::Answer { call_id, answer });
        let Event::ShellEnded { end, .. } = next().await else {
            panic!("not an end");
        };
        assert_eq!(matches!(end, ShellEnd::Ran { .. }), ran, "{end:?}");
        if !ran {
            assert_eq!(end, ShellEnd::Declined);
        }
    }
    // A deny refuses it, saying why.
    session.submit(Op::Shell {
        command: "rm -rf /".into(),
    });
    let Event::ShellEnded { end, .. } = next().await else {
        panic!("not an end");
    };
    assert!(matches!(end, ShellEnd::Refused { .. }), "{end:?}");
    // Written as the other own events are.
    let written = serde_json::to_value(Event::ShellEnded {
        call_id: "person-1".into(),
        command: "ls".into(),
        end: ShellEnd::Stopped,
    })
    .unwrap();
    assert_eq!(
        written,
        json!({"type": "shell_ended", "call_id": "person-1", "command": "ls",
               "end": {"kind": "stopped"}})
    );
    assert_eq!(
        serde_json::to_value(Op::Shell {
            command: "ls".into()
        })
        .unwrap(),
        json!({"type": "shell", "command": "ls"})
    );
}
