//! Checkpoints over a front end's files and snapshots: the code back to before turn N (each
//! file as it was before its first change at or after N, a file the agent made removed, a file
//! changed since left as it is and said), `/undo` as the last turn that changed files, the
//! conversation's rewinds renumbering the list, and the commands' changes a snapshot sees.

use std::collections::BTreeMap;
use std::sync::Mutex;

use harness_agent::checkpoint::{CheckpointFiles, Checkpoints, Restore, Snapshots};
use harness_agent::{CoreEvent, Event, SeamError};
use harness_core::protocol::{Origin, TurnEnd};
use pretty_assertions::assert_eq;

/// Files in a map; writing `/p/locked` fails.
#[derive(Default)]
struct Files(Mutex<BTreeMap<String, Vec<u8>>>);

impl Files {
    fn set(&self, path: &str, text: &str) {
        self.0
            .lock()
            .unwrap()
            .insert(path.into(), text.as_bytes().to_vec());
    }
    fn remove_now(&self, path: &str) {
        self.0.lock().unwrap().remove(path);
    }
    fn text(&self, path: &str) -> Option<String> {
        self.0
            .lock()
            .unwrap()
            .get(path)
            .map(|b| String::from_utf8(b.clone()).unwrap())
    }
}

impl CheckpointFiles for Files {
    fn read(&self, path: &str) -> Option<Vec<u8>> {
        self.0.lock().unwrap().get(path).cloned()
    }
    fn write(&self, path: &str, bytes: &[u8]) -> Result<(), SeamError> {
        if path == "/p/locked" {
            return Err(SeamError::file(path, "Permission denied"));
        }
        self.0.lock().unwrap().insert(path.into(), bytes.to_vec());
        Ok(())
    }
    fn remove(&self, path: &str) -> Result<(), SeamError> {
        self.0
            .lock()
            .unwrap()
            .remove(path)
            .map(|_| ())
            .ok_or(SeamError::file(path, "gone"))
    }
}

/// Snapshots of [`Files`] kept whole; `/p/big` is over their cap.
struct Snaps<'a> {
    files: &'a Files,
    taken: Mutex<Vec<BTreeMap<String, Vec<u8>>>>,
}

impl<'a> Snaps<'a> {
    fn of(files: &'a Files) -> Snaps<'a> {
        Snaps {
            files,
            taken: Mutex::new(Vec::new()),
        }
    }
    fn at(&self, id: &str) -> BTreeMap<String, Vec<u8>> {
        self.taken.lock().unwrap()[id.parse::<usize>().unwrap()].clone()
    }
}

impl Snapshots for Snaps<'_> {
    fn take(&self) -> Result<String, SeamError> {
        let mut taken = self.taken.lock().unwrap();
        taken.push(self.files.0.lock().unwrap().clone());
        Ok((taken.len() - 1).to_string())
    }
    fn changed(&self, from: &str, to: &str) -> Result<Vec<String>, SeamError> {
        let (a, b) = (self.at(from), self.at(to));
        let mut paths: Vec<String> = a.keys().chain(b.keys()).cloned().collect();
        paths.sort();
        paths.dedup();
        Ok(paths.into_iter().filter(|p| a.get(p) != b.get(p)).collect())
    }
    fn read(&self, snapshot: &str, path: &str) -> Result<Option<Vec<u8>>, SeamError> {
        if path == "/p/big" {
            return Err(SeamError::file(path, "over the snapshots' 4 MiB cap"));
        }
        Ok(self.at(snapshot).get(path).cloned())
    }
}

fn prompt(cp: &mut Checkpoints, text: &str) {
    cp.observe(&Event::Core(CoreEvent::UserInput {
        text: text.into(),
        origin: Origin::Person,
    }));
}

/// A file tool's change, made on `files` and seen by the checkpoints.
fn edit(cp: &mut Checkpoints, files: &Files, path: &str, before: &str, after: &str) {
    files.set(path, after);
    cp.observe(&Event::Edit {
        call_id: "c".into(),
        path: path.into(),
        before: before.into(),
        after: after.into(),
    });
}

fn end(cp: &mut Checkpoints) {
    cp.observe(&Event::Core(CoreEvent::TurnEnded {
        reason: TurnEnd::Finished,
    }));
}

#[test]
fn the_code_goes_back_to_before_turn_n_over_several_turns() {
    let files = Files::default();
    files.set("/p/a", "a1");
    files.set("/p/b", "b1");
    let mut cp = Checkpoints::new();
    prompt(&mut cp, "first\nmore lines");
    edit(&mut cp, &files, "/p/a", "a1", "a2");
    edit(&mut cp, &files, "/p/new", "", "made");
    end(&mut cp);
    prompt(&mut cp, "second");
    edit(&mut cp, &files, "/p/a", "a2", "a3");
    edit(&mut cp, &files, "/p/b", "b1", "b2");
    end(&mut cp);
    prompt(&mut cp, "third, no files");
    end(&mut cp);
    let list = cp.list();
    assert_eq!(list.len(), 3);
    assert_eq!(list[0].prompt, "first");
    assert_eq!(list[0].files, ["/p/a", "/p/new"]);
    assert_eq!(list[1].files, ["/p/a", "/p/b"]);
    assert!(!list[0].commands);

    let done = cp.restore(2, &files, None).unwrap();
    assert_eq!(
        done.said,
        "restored the code to before turn 2:\n  /p/a: put back\n  /p/b: put back\n  \
         (what commands changed in turn 2, 3 is not covered: only the file tools' edits were put back)"
    );
    assert_eq!(files.text("/p/a").as_deref(), Some("a2"));
    assert_eq!(files.text("/p/b").as_deref(), Some("b1"));
    // Further back: turn 1's changes only (turn 2's are back already).
    let done = cp.restore(1, &files, None).unwrap();
    assert_eq!(done.restored, ["/p/a", "/p/new"]);
    assert!(done.said.contains("/p/new: removed (the agent made it)"));
    assert_eq!(files.text("/p/a").as_deref(), Some("a1"));
    assert_eq!(files.text("/p/new"), None);
    assert_eq!(
        done.for_model().unwrap(),
        "[the person undid the file changes of the last turn: /p/a, /p/new are back as they were before it]"
    );
    assert_eq!(
        cp.restore(4, &files, None).unwrap_err(),
        "no turn 4: the session has 3 turns (/rewind lists them)"
    );
}

#[test]
fn a_file_changed_by_hand_is_left_and_said() {
    let files = Files::default();
    let mut cp = Checkpoints::new();
    prompt(&mut cp, "change them");
    edit(&mut cp, &files, "/p/mine", "m1", "m2");
    edit(&mut cp, &files, "/p/locked", "l1", "l2");
    edit(&mut cp, &files, "/p/x", "x1", "x2");
    end(&mut cp);
    files.set("/p/mine", "the person's");
    let done = cp.restore(1, &files, None).unwrap();
    assert_eq!(
        done.said,
        "restored the code to before turn 1:\n  /p/mine: changed since turn 1, left as it is\n  \
         /p/locked: not put back: Permission denied\n  /p/x: put back\n  \
         (what commands changed in turn 1 is not covered: only the file tools' edits were put back)"
    );
    assert_eq!(done.restored, ["/p/x"]);
    assert_eq!(files.text("/p/mine").as_deref(), Some("the person's"));
}

#[test]
fn undo_is_the_last_turn_that_changed_files() {
    let files = Files::default();
    let mut cp = Checkpoints::new();
    prompt(&mut cp, "one");
    edit(&mut cp, &files, "/p/a", "a0", "a1");
    end(&mut cp);
    prompt(&mut cp, "two");
    edit(&mut cp, &files, "/p/a", "a1", "a2");
    end(&mut cp);
    prompt(&mut cp, "three: only talk");
    end(&mut cp);
    let done = cp.undo(&files, None);
    assert!(
        done.said
            .starts_with("undid the changes of turn 2:\n  /p/a: put back")
    );
    assert_eq!(files.text("/p/a").as_deref(), Some("a1"));
    let done = cp.undo(&files, None);
    assert!(done.said.starts_with("undid the changes of turn 1:"));
    assert_eq!(files.text("/p/a").as_deref(), Some("a0"));
    let done = cp.undo(&files, None);
    assert_eq!(
        done.said,
        "nothing to undo: no turn changed a file since the last undo"
    );
    assert_eq!(done.for_model(), None);
    assert!(cp.list()[1].restored);
}

#[test]
fn commands_changes_come_back_from_the_snapshots() {
    let files = Files::default();
    files.set("/p/tracked", "t1");
    files.set("/p/gone", "g1");
    files.set("/p/hand", "h1");
    let snaps = Snaps::of(&files);
    let mut cp = Checkpoints::new();
    cp.snapshot(&snaps).unwrap();
    prompt(&mut cp, "edit with a tool");
    edit(&mut cp, &files, "/p/tracked", "t1", "t2");
    end(&mut cp);
    cp.snapshot(&snaps).unwrap();
    cp.next_prompt("run the generator");
    cp.snapshot(&snaps).unwrap();
    prompt(&mut cp, "[the person ran ...]\nrun the generator");
    // A command: makes a file, changes two, removes one; the tool's file changes again.
    files.set("/p/made", "m");
    files.set("/p/tracked", "t3");
    files.set("/p/hand", "h2");
    files.set("/p/big", "huge");
    files.remove_now("/p/gone");
    end(&mut cp);
    cp.snapshot(&snaps).unwrap();
    // The person changes one by hand afterwards.
    files.set("/p/hand", "the person's");
    let list = cp.list();
    assert_eq!(list[1].prompt, "run the generator");
    assert!(list[1].commands);
    assert_eq!(
        list[1].files,
        ["/p/big", "/p/gone", "/p/hand", "/p/made", "/p/tracked"]
    );
    let done = cp.restore(1, &files, Some(&snaps)).unwrap();
    assert_eq!(
        done.said,
        "restored the code to before turn 1:\n  /p/tracked: put back\n  \
         /p/big: not put back: over the snapshots' 4 MiB cap\n  /p/gone: put back\n  \
         /p/hand: changed since turn 2, left as it is\n  /p/made: removed (the agent made it)"
    );
    assert_eq!(files.text("/p/tracked").as_deref(), Some("t1"));
    assert_eq!(files.text("/p/gone").as_deref(), Some("g1"));
    assert_eq!(files.text("/p/made"), None);
    assert_eq!(files.text("/p/hand").as_deref(), Some("the person's"));
}

#[test]
fn the_conversations_rewind_renumbers_and_earlier_restores_still_cover_it() {
    let files = Files::default();
    let mut cp = Checkpoints::new();
    prompt(&mut cp, "one");
    edit(&mut cp, &files, "/p/a", "a0", "a1");
    end(&mut cp);
    prompt(&mut cp, "two");
    edit(&mut cp, &files, "/p/b", "", "b");
    end(&mut cp);
    // `/rewind 2 chat`: turn 2 leaves the conversation, its file stays.
    assert!(Restore::Chat.chat() && !Restore::Chat.code());
    assert!(Restore::Both.chat() && Restore::Both.code());
    assert_eq!(Restore::parse("code"), Some(Restore::Code));
    cp.rewound(2);
    assert_eq!(files.text("/p/b").as_deref(), Some("b"));
    prompt(&mut cp, "two again");
    end(&mut cp);
    let list: Vec<(u32, String)> = cp.list().into_iter().map(|c| (c.turn, c.prompt)).collect();
    assert_eq!(list, [(1, "one".into()), (2, "two again".into())]);
    // Kept with the session and read back as it was.
    let saved = serde_json::to_string(&cp).unwrap();
    let mut cp: Checkpoints = serde_json::from_str(&saved).unwrap();
    // Before turn 1: the rewound turn's file goes too.
    let done = cp.restore(1, &files, None).unwrap();
    assert_eq!(done.restored, ["/p/a", "/p/b"]);
    assert_eq!(files.text("/p/b"), None);
    assert_eq!(
        cp.list_text(),
        "checkpoints (/rewind N [code|chat|both] goes back to before turn N):\n   \
         1  one                                               1 file · code restored\n   \
         2  two again                                         0 files · code restored"
    );
}

#[test]
fn a_resumed_session_lists_its_turns_from_the_transcript() {
    use harness_loop::transcript::Entry;
    let started = |turn: u32, text: &str| Entry::TurnStarted {
        turn,
        text: text.into(),
        origin: Origin::Person,
        images: Vec::new(),
    };
    let entries = [
        started(1, "one"),
        started(2, "two"),
        Entry::Rewound { turn: 2 },
        started(2, "two again"),
    ];
    let cp = Checkpoints::from_transcript(&entries);
    let list: Vec<(u32, String, bool)> = cp
        .list()
        .into_iter()
        .map(|c| (c.turn, c.prompt, c.commands))
        .collect();
    assert_eq!(
        list,
        [(1, "one".into(), false), (2, "two again".into(), false)]
    );
    assert_eq!(
        Checkpoints::new().list_text(),
        "no turns yet: nothing to rewind"
    );
}

#[test]
fn a_prompt_a_hook_blocked_is_no_turn() {
    let files = Files::default();
    let mut cp = Checkpoints::new();
    prompt(&mut cp, "one");
    edit(&mut cp, &files, "/p/a", "", "a1");
    end(&mut cp);
    // Told with its end, as the runner tells it; the session counts no turn for it.
    prompt(&mut cp, "blocked");
    cp.observe(&Event::Core(CoreEvent::TurnEnded {
        reason: TurnEnd::Error {
            message: format!("{}: not now", harness_agent::hooks::PROMPT_BLOCKED),
        },
    }));
    prompt(&mut cp, "two");
    end(&mut cp);
    let listed: Vec<(u32, String)> = cp.list().into_iter().map(|c| (c.turn, c.prompt)).collect();
    assert_eq!(listed, [(1, "one".to_owned()), (2, "two".to_owned())]);
}

#[test]
fn kept_checkpoints_a_crash_left_behind_are_brought_in_step_with_the_transcript() {
    use harness_loop::transcript::Entry;
    let started = |turn: u32, text: &str| Entry::TurnStarted {
        turn,
        text: text.into(),
        origin: Origin::Person,
        images: Vec::new(),
    };
    let files = Files::default();
    let mut kept = Checkpoints::new();
    prompt(&mut kept, "one");
    edit(&mut kept, &files, "/p/a", "", "a1");
    end(&mut kept);
    // The transcript has a second turn the checkpoints were not saved with.
    let entries = [started(1, "one"), started(2, "two")];
    let cp = kept.clone().in_step(&entries);
    let list: Vec<(u32, String, usize)> = cp
        .list()
        .into_iter()
        .map(|c| (c.turn, c.prompt, c.files.len()))
        .collect();
    assert_eq!(list, [(1, "one".into(), 1), (2, "two".into(), 0)]);
    // In step already: kept as they are; ahead of it (a rewind not saved): the transcript's.
    assert_eq!(kept.clone().in_step(&entries[..1]), kept);
    let rewound = [started(1, "one"), Entry::Rewound { turn: 1 }];
    assert!(kept.in_step(&rewound).list().is_empty());
}
