//! `/undo`: the files the person's last turn changed put back, the same in every front end.
//! Each file goes back to its text before the turn's first change of it (a file the turn made
//! is removed); a file changed since the turn's last change of it is left as it is and said.
//! The files are reached through the front end's [`UndoFiles`].

/// The files a front end's undo reads and writes (by the paths of its `Event::Edit`s).
pub trait UndoFiles {
    /// A file's text now (`None`: it cannot be read, or is gone).
    fn read(&self, path: &str) -> Option<String>;
    /// Writes a file's text back.
    fn write(&self, path: &str, text: &str) -> Result<(), crate::SeamError>;
    /// Removes a file the turn made.
    fn remove(&self, path: &str) -> Result<(), crate::SeamError>;
}

/// What an undo did: the files put back, and what to tell the person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undone {
    /// The files put back (or removed), in the order they were first changed.
    pub restored: Vec<String>,
    /// The lines for the person.
    pub said: String,
}

impl Undone {
    /// What the model is told with the next prompt (loop.json `calls.person_undo`), when a
    /// file was put back.
    pub fn for_model(&self) -> Option<String> {
        if self.restored.is_empty() {
            return None;
        }
        let cfg = harness_loop::config::LoopConfig::embedded().ok()?;
        Some(
            cfg.calls
                .person_undo
                .replace("{files}", &self.restored.join(", ")),
        )
    }
}

/// Puts back the files a turn changed (`changes` in order: path, text before, text after).
pub fn undo(changes: &[(String, String, String)], files: &dyn UndoFiles) -> Undone {
    if changes.is_empty() {
        return Undone {
            restored: Vec::new(),
            said: "nothing to undo: the last turn changed no file with the file tools".into(),
        };
    }
    // Per file: the text before its first change and after its last.
    let mut per_file: Vec<(&str, &str, &str)> = Vec::new();
    for (path, before, after) in changes {
        match per_file.iter_mut().find(|f| f.0 == path) {
            Some(f) => f.2 = after,
            None => per_file.push((path, before, after)),
        }
    }
    let mut restored = Vec::new();
    let mut said =
        vec!["undid the last turn's file changes (a command's changes are not undone):".to_owned()];
    for (path, before, after) in per_file {
        if files.read(path).unwrap_or_default() != after {
            said.push(format!("  {path}: changed since the turn, left as it is"));
            continue;
        }
        let done = if before.is_empty() {
            files.remove(path).map(|()| "removed (the turn made it)")
        } else {
            files.write(path, before).map(|()| "put back")
        };
        match done {
            Ok(how) => {
                said.push(format!("  {path}: {how}"));
                restored.push(path.to_owned());
            }
            Err(e) => said.push(format!("  {path}: not put back: {e}")),
        }
    }
    Undone {
        restored,
        said: said.join("\n"),
    }
}
