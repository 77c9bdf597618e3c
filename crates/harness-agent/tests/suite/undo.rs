//! `/undo` over a front end's files: each file back to its text before the turn, a file the
//! turn made removed, a file changed since left as it is.

use std::collections::BTreeMap;
use std::sync::Mutex;

use harness_agent::undo::{UndoFiles, undo};
use pretty_assertions::assert_eq;

/// Files in a map; writing `locked` fails.
struct Files(Mutex<BTreeMap<String, String>>);

impl UndoFiles for Files {
    fn read(&self, path: &str) -> Option<String> {
        self.0.lock().unwrap().get(path).cloned()
    }
    fn write(&self, path: &str, text: &str) -> Result<(), harness_agent::SeamError> {
        if path == "/p/locked" {
            return Err(harness_agent::SeamError::file(path, "Permission denied"));
        }
        self.0.lock().unwrap().insert(path.into(), text.into());
        Ok(())
    }
    fn remove(&self, path: &str) -> Result<(), harness_agent::SeamError> {
        self.0
            .lock()
            .unwrap()
            .remove(path)
            .map(|_| ())
            .ok_or(harness_agent::SeamError::file(path, "gone"))
    }
}

fn change(path: &str, before: &str, after: &str) -> (String, String, String) {
    (path.into(), before.into(), after.into())
}

#[test]
fn the_last_turns_files_go_back() {
    let files = Files(Mutex::new(BTreeMap::from([
        ("/p/a".to_owned(), "a3".to_owned()),
        ("/p/new".to_owned(), "made".to_owned()),
        ("/p/edited".to_owned(), "the person's".to_owned()),
        ("/p/locked".to_owned(), "l2".to_owned()),
    ])));
    let changes = [
        change("/p/a", "a1", "a2"),
        change("/p/new", "", "made"),
        change("/p/a", "a2", "a3"),
        change("/p/edited", "e1", "e2"),
        change("/p/locked", "l1", "l2"),
    ];
    let done = undo(&changes, &files);
    assert_eq!(
        done.said,
        "undid the last turn's file changes (a command's changes are not undone):\n  \
         /p/a: put back\n  /p/new: removed (the turn made it)\n  \
         /p/edited: changed since the turn, left as it is\n  \
         /p/locked: not put back: Permission denied"
    );
    assert_eq!(done.restored, ["/p/a", "/p/new"]);
    let now = files.0.lock().unwrap().clone();
    assert_eq!(now.get("/p/a").map(String::as_str), Some("a1"));
    assert_eq!(now.get("/p/new"), None);
    assert_eq!(
        now.get("/p/edited").map(String::as_str),
        Some("the person's")
    );
    assert_eq!(
        done.for_model().unwrap(),
        "[the person undid the file changes of the last turn: /p/a, /p/new are back as they were before it]"
    );
}

#[test]
fn nothing_to_undo_is_said() {
    let files = Files(Mutex::new(BTreeMap::new()));
    let done = undo(&[], &files);
    assert_eq!(
        done.said,
        "nothing to undo: the last turn changed no file with the file tools"
    );
    assert!(done.restored.is_empty());
    assert_eq!(done.for_model(), None);
}
