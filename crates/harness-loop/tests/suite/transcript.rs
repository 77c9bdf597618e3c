use harness_core::protocol::Origin;
use harness_core::protocol::{Risk, ToolCall};
use harness_loop::config::LoopConfig;
use harness_loop::session::{
    AllowAll, Input, ModelOutput, Session, SessionSetup, ToolOutcome, ToolTraits,
};
use harness_loop::transcript::{Entry, TranscriptWriter, read, replay};
use harness_spec::Project;
use serde_json::json;

fn session() -> Session {
    Session::new(SessionSetup {
        config: LoopConfig::embedded().unwrap(),
        project: Project::Llembas,
        budget: None,
        id: "t".into(),
        catalog: Box::new(|_: &str| {
            Some(ToolTraits {
                risk: Risk::Read,
                exclusive: false,
            })
        }),
        permissions: Box::new(AllowAll),
        subagent: false,
        hygiene: true,
    })
}

fn scripted() -> (Session, Vec<u8>) {
    let mut s = session();
    let mut w = TranscriptWriter::new(Vec::new());
    s.handle(Input::Prompt {
        text: "list it".into(),
    })
    .unwrap();
    s.handle(Input::Model(ModelOutput {
        tool_calls: vec![ToolCall {
            id: "c1".into(),
            name: "list".into(),
            arguments: json!({"path": "/"}),
        }],
        ..ModelOutput::default()
    }))
    .unwrap();
    s.handle(Input::ToolResults(vec![ToolOutcome::ok("c1", "a\nb")]))
        .unwrap();
    s.handle(Input::Model(ModelOutput {
        text: "two files".into(),
        ..ModelOutput::default()
    }))
    .unwrap();
    s.handle(Input::Prompt {
        text: "again".into(),
    })
    .unwrap();
    s.handle(Input::Model(ModelOutput {
        text: "still two".into(),
        ..ModelOutput::default()
    }))
    .unwrap();
    w.append_all(&s.take_log()).unwrap();
    (s, w.into_inner())
}

#[test]
fn replay_rebuilds_the_history() {
    let (s, bytes) = scripted();
    let loaded = read(&bytes[..]).unwrap();
    assert_eq!(loaded.torn_tail, None);
    assert_eq!(replay(&loaded.entries), s.history());
}

#[test]
fn a_crash_mid_write_keeps_every_complete_event() {
    let (_, bytes) = scripted();
    let full = read(&bytes[..]).unwrap().entries;
    // Cut the log at every byte: what is read is always a prefix of the events, all of them
    // complete, and the torn part is reported.
    for cut in 0..bytes.len() {
        let loaded = read(&bytes[..cut]).unwrap();
        let n = loaded.entries.len();
        assert_eq!(&full[..n], &loaded.entries[..], "cut at {cut}");
        let complete_lines = bytes[..cut].iter().filter(|&&b| b == b'\n').count();
        assert_eq!(n, complete_lines, "cut at {cut}");
        assert_eq!(
            loaded.torn_tail.is_some(),
            cut > 0 && bytes[cut - 1] != b'\n'
        );
        // Cut to the valid length and append: the log reads whole again.
        let mut resumed = bytes[..loaded.valid_bytes as usize].to_vec();
        let mut w = TranscriptWriter::new(&mut resumed);
        w.append(&Entry::Rewound { turn: 1 }).unwrap();
        let again = read(&resumed[..]).unwrap();
        assert_eq!(again.entries.len(), n + 1, "cut at {cut}");
        assert_eq!(again.torn_tail, None);
    }
}

#[test]
fn damage_in_the_middle_is_an_error_naming_the_line() {
    let (_, bytes) = scripted();
    let mut text = String::from_utf8(bytes).unwrap();
    text.insert_str(0, "{not json\n");
    let e = read(text.as_bytes()).unwrap_err();
    assert!(e.to_string().starts_with("transcript line 1:"), "{e}");
}

#[test]
fn rewind_is_an_entry_and_replays() {
    let (mut s, mut bytes) = scripted();
    s.rewind(2).unwrap();
    let log = s.take_log();
    assert_eq!(log, vec![Entry::Rewound { turn: 2 }]);
    let mut w = TranscriptWriter::new(Vec::new());
    w.append_all(&log).unwrap();
    bytes.extend(w.into_inner());
    let history = replay(&read(&bytes[..]).unwrap().entries);
    assert_eq!(history, s.history());
    assert_eq!(history.len(), 4);
    assert!(matches!(
        &history[0],
        harness_loop::session::Message::User {
            origin: Origin::Person,
            ..
        }
    ));
}

fn read_of(id: &str, path: &str) -> ToolOutcome {
    ToolOutcome {
        read: Some(harness_loop::context::ReadInfo {
            path: path.into(),
            first: 1,
            last: 2,
            hash: "h".into(),
        }),
        ..ToolOutcome::ok(id, "1\ta\n2\tb")
    }
}

fn calls(list: &[(&str, &str, serde_json::Value)]) -> Input {
    Input::Model(ModelOutput {
        tool_calls: list
            .iter()
            .map(|(id, name, args)| ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: args.clone(),
            })
            .collect(),
        ..ModelOutput::default()
    })
}

#[test]
fn a_session_resumes_from_its_transcript() {
    let mut s = session();
    let mut log = Vec::new();
    s.handle(Input::Prompt { text: "one".into() }).unwrap();
    s.handle(calls(&[("c1", "read", json!({"path": "/old"}))]))
        .unwrap();
    s.handle(Input::ToolResults(vec![read_of("c1", "/old")]))
        .unwrap();
    s.handle(calls(&[(
        "c2",
        "bash",
        json!({"command": "make", "background": true}),
    )]))
    .unwrap();
    s.handle(Input::Model(ModelOutput {
        text: "ok".into(),
        ..ModelOutput::default()
    }))
    .unwrap();
    s.compact("summary").unwrap();
    s.handle(Input::Prompt { text: "two".into() }).unwrap();
    s.handle(calls(&[("c3", "read", json!({"path": "/new"}))]))
        .unwrap();
    s.handle(Input::ToolResults(vec![read_of("c3", "/new")]))
        .unwrap();
    // The process dies while two calls run.
    s.handle(calls(&[
        ("c4", "list", json!({"path": "/"})),
        ("c5", "grep", json!({"pattern": "x"})),
    ]))
    .unwrap();
    log.extend(s.take_log());
    let new_read_id = s.context().results()[2].id.clone();

    let mut r = Session::resume(
        SessionSetup {
            config: LoopConfig::embedded().unwrap(),
            project: Project::Llembas,
            budget: None,
            id: "t".into(),
            catalog: Box::new(|_: &str| {
                Some(ToolTraits {
                    risk: Risk::Read,
                    exclusive: false,
                })
            }),
            permissions: Box::new(AllowAll),
            subagent: false,
            hygiene: true,
        },
        &log,
    );
    // The cut turn is closed: both calls had started, so both are answered `interrupted`
    // (not "not run"), and the turn ended.
    let repair = r.take_log();
    assert_eq!(repair.len(), 3, "{repair:?}");
    assert!(matches!(repair.last(), Some(Entry::TurnEnded { .. })));
    let interrupted = LoopConfig::embedded().unwrap().calls.interrupted.clone();
    for e in &repair[..2] {
        assert!(
            matches!(e, Entry::ToolResult { output, .. } if *output == interrupted),
            "{e:?}"
        );
    }
    log.extend(repair);
    assert_eq!(replay(&log), r.history());
    assert!(!r.busy());
    assert_eq!(r.turns(), 2);

    r.handle(Input::Prompt {
        text: "three".into(),
    })
    .unwrap();
    r.handle(calls(&[
        ("c6", "read", json!({"path": "/new"})),
        ("c7", "read", json!({"path": "/old"})),
        ("c8", "bash", json!({"command": "make", "background": true})),
    ]))
    .unwrap();
    r.handle(Input::ToolResults(vec![
        read_of("c6", "/new"),
        read_of("c7", "/old"),
    ]))
    .unwrap();
    let results = r.context().results();
    let n = results.len();
    // /new was read after the compaction and is still in view: a stub to the same id.
    assert!(matches!(
        &results[n - 3].kind,
        harness_loop::context::InsertKind::Stub { of, .. } if *of == new_read_id
    ));
    // /old was read before the compaction: whole again.
    assert_eq!(results[n - 2].kind, harness_loop::context::InsertKind::Full);
    // Job ids go on after the recorded ones.
    assert!(r.jobs().get(2).is_some(), "the new job is job 2");
    // Every result of the first life is still recallable.
    for id in log.iter().filter_map(|e| match e {
        Entry::ToolResult { result_id, .. } => Some(result_id.clone()),
        _ => None,
    }) {
        assert!(r.context().stored(id.as_str()).is_some(), "{id}");
    }
}

#[test]
fn a_call_that_never_started_is_answered_not_run_on_resume() {
    let log = vec![
        Entry::TurnStarted {
            turn: 1,
            text: "go".into(),
            origin: Origin::Person,
            images: Vec::new(),
        },
        Entry::Assistant {
            text: String::new(),
            reasoning: String::new(),
            tool_calls: vec![
                ToolCall {
                    id: "ran".into(),
                    name: "bash".into(),
                    arguments: json!({"command": "make"}),
                },
                ToolCall {
                    id: "waited".into(),
                    name: "bash".into(),
                    arguments: json!({"command": "make install"}),
                },
            ],
        },
        Entry::CallsStarted {
            call_ids: vec!["ran".into()],
        },
    ];
    let mut r = Session::resume(
        SessionSetup {
            config: LoopConfig::embedded().unwrap(),
            project: Project::Cli,
            budget: None,
            id: "t".into(),
            catalog: Box::new(|_: &str| None),
            permissions: Box::new(AllowAll),
            subagent: false,
            hygiene: true,
        },
        &log,
    );
    let cfg = LoopConfig::embedded().unwrap();
    let outputs: Vec<(String, String)> = r
        .take_log()
        .into_iter()
        .filter_map(|e| match e {
            Entry::ToolResult {
                call_id, output, ..
            } => Some((call_id, output)),
            _ => None,
        })
        .collect();
    assert_eq!(
        outputs,
        vec![
            ("ran".to_owned(), cfg.calls.interrupted.clone()),
            ("waited".to_owned(), cfg.calls.cancelled.clone()),
        ]
    );
}
