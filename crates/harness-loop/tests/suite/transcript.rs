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
