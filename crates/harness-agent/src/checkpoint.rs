//! Checkpoints: the code as it was before each turn, to go back to (`/rewind N code`, `/undo`),
//! the same in every front end. A front end feeds [`Checkpoints`] the session's events (each
//! turn's start, its file tools' [`Event::Edit`]s, its end) and, where it can snapshot the
//! project, a snapshot before each prompt and at each turn's end through its [`Snapshots`];
//! the changes commands made are then the files that differ between a turn's two snapshots.
//!
//! Restoring the code to before turn N puts every file changed in turn N or later back as it
//! was before its first change at or after turn N (a file the agent made is removed); a file
//! changed since the agent's last change of it (by the person) is left as it is and said. The
//! files are read and written through the front end's [`CheckpointFiles`]; nothing here does
//! I/O of its own. [`Checkpoints`] is serde, so a front end keeps it with its session.

use harness_core::protocol::{Origin, TurnEnd};
use harness_loop::transcript::Entry;
use serde::{Deserialize, Serialize};

use crate::{CoreEvent, Event, SeamError};

/// The files a front end's checkpoints read and write, by the real paths of its
/// [`Event::Edit`]s and of its [`Snapshots`].
pub trait CheckpointFiles {
    /// A file's bytes now (`None`: it cannot be read, or is gone).
    fn read(&self, path: &str) -> Option<Vec<u8>>;
    /// Writes a file's bytes back (making its directory when it is gone).
    fn write(&self, path: &str, bytes: &[u8]) -> Result<(), SeamError>;
    /// Removes a file the agent made.
    fn remove(&self, path: &str) -> Result<(), SeamError>;
}

/// Snapshots of the project's files, kept apart from the person's own (a front end's shadow
/// repository): what lets a checkpoint cover the changes commands made.
pub trait Snapshots {
    /// Records the project's files as they are now; the snapshot's id.
    fn take(&self) -> Result<String, SeamError>;
    /// The files (real paths) that differ between two snapshots.
    fn changed(&self, from: &str, to: &str) -> Result<Vec<String>, SeamError>;
    /// A file's bytes in a snapshot: `None` when it was not there; an error when they were not
    /// kept (a file over the snapshots' size cap), with the reason the person reads.
    fn read(&self, snapshot: &str, path: &str) -> Result<Option<Vec<u8>>, SeamError>;
}

/// What `/rewind N` puts back: the code, the conversation, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Restore {
    /// The files only.
    Code,
    /// The conversation only (the session's rewind).
    Chat,
    /// Both: the conversation first (a turn compacted away is refused before any file
    /// changes), then the files.
    Both,
}

impl Restore {
    /// `code`, `chat` or `both`.
    pub fn parse(word: &str) -> Option<Restore> {
        match word {
            "code" => Some(Restore::Code),
            "chat" => Some(Restore::Chat),
            "both" => Some(Restore::Both),
            _ => None,
        }
    }

    /// Whether the files are put back.
    pub fn code(self) -> bool {
        matches!(self, Restore::Code | Restore::Both)
    }

    /// Whether the conversation is rewound.
    pub fn chat(self) -> bool {
        matches!(self, Restore::Chat | Restore::Both)
    }
}

/// What the person is asked when `/rewind N` did not say what to restore.
pub const RESTORE_QUESTION: &str =
    "restore what? code, chat or both (Enter: both; anything else: nothing)";

/// What is said after the conversation went back to before turn `turn`.
pub fn chat_rewound(turn: u32) -> String {
    format!("rewound: turn {turn} and those after it are gone from what the model sees")
}

/// The session's turns, as checkpoints to go back to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoints {
    /// Every turn in the order it ran, those rewound away from the conversation too.
    turns: Vec<Turn>,
    /// The last snapshot taken (the next turn's "before").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last: Option<String>,
    /// The text the person's next prompt is listed by (as they typed it).
    #[serde(skip)]
    next_prompt: Option<String>,
}

/// One turn's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Turn {
    /// Its number as `/rewind` counts it.
    number: u32,
    /// Its prompt's first line.
    prompt: String,
    /// The file tools' changes (path, before, after), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    edits: Vec<(String, String, String)>,
    /// The snapshot before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    before: Option<String>,
    /// The snapshot at its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    after: Option<String>,
    /// The files that differ between the two snapshots.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    changed: Vec<String>,
    /// It ended.
    #[serde(default)]
    ended: bool,
    /// It was rewound away from the conversation.
    #[serde(default)]
    gone: bool,
    /// Its changes were put back.
    #[serde(default)]
    restored: bool,
}

impl Turn {
    /// Whether the changes commands made in it are known (a snapshot before and after).
    fn covered(&self) -> bool {
        self.before.is_some() && self.after.is_some()
    }

    /// The files it changed, in the order first changed.
    fn files(&self) -> Vec<String> {
        let mut files: Vec<String> = Vec::new();
        for path in self.edits.iter().map(|e| &e.0).chain(&self.changed) {
            if !files.contains(path) {
                files.push(path.clone());
            }
        }
        files
    }
}

/// A checkpoint as a front end lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The turn, as `/rewind` counts it.
    pub turn: u32,
    /// The prompt's first line.
    pub prompt: String,
    /// The files the turn changed (with the file tools, and by commands where covered).
    pub files: Vec<String>,
    /// Whether the changes commands made in the turn are covered.
    pub commands: bool,
    /// Whether its changes were put back already.
    pub restored: bool,
}

/// What a restore did: the files put back, and what to tell the person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The files put back (or removed), in the order they were first changed.
    pub restored: Vec<String>,
    /// What happened to each file changed (`path: put back`, `path: changed since the turn,
    /// left as it is`, ...), for a front end that tells it its own way.
    pub files: Vec<String>,
    /// The lines for the person.
    pub said: String,
}

impl Restored {
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

/// Where a file's text at one end of a change is.
enum Side {
    /// Not there (a file the agent made, before its first change).
    Absent,
    /// A file tool's text.
    Text(String),
    /// In a snapshot.
    Snap(String),
}

/// A file's change over the turns restored: before its first change, after its last.
struct FileChange {
    path: String,
    first: Side,
    last: Side,
    /// The turn of its last change.
    turn: u32,
}

impl Checkpoints {
    /// No turns yet.
    pub fn new() -> Checkpoints {
        Checkpoints::default()
    }

    /// A resumed session's turns from its transcript (their prompts; no files: a front end
    /// that kept its checkpoints loads those instead).
    pub fn from_transcript(entries: &[Entry]) -> Checkpoints {
        let mut c = Checkpoints::new();
        for e in entries {
            match e {
                Entry::TurnStarted { text, .. } => {
                    c.start(text);
                    if let Some(t) = c.turns.last_mut() {
                        t.ended = true;
                    }
                }
                Entry::Rewound { turn } => c.rewound(*turn),
                _ => {}
            }
        }
        c
    }

    /// Checkpoints a front end kept, brought in step with the session's transcript: a crash
    /// between the transcript's append and the checkpoints' save leaves them turns behind, and
    /// those turns are added as the transcript has them (without their files); kept ones that
    /// disagree with it otherwise give way to the transcript's turns alone.
    pub fn in_step(self, entries: &[Entry]) -> Checkpoints {
        let told = Checkpoints::from_transcript(entries);
        let (mine, theirs) = (self.live().count(), told.live().count());
        if mine == theirs {
            return self;
        }
        if mine > theirs {
            return told;
        }
        let mut kept = self;
        kept.turns.extend(told.live().skip(mine).cloned());
        kept.last = None;
        kept
    }

    /// The text the person's next prompt is listed by (the prompt as typed, without what a
    /// front end attaches to it).
    pub fn next_prompt(&mut self, text: &str) {
        self.next_prompt = Some(text.to_owned());
    }

    /// Notes an event of the session: a turn's start, a file tool's change, a turn's end.
    pub fn observe(&mut self, event: &Event) {
        match event {
            Event::Core(CoreEvent::UserInput { text, origin }) => {
                let text = match origin {
                    Origin::Person => self.next_prompt.take().unwrap_or_else(|| text.clone()),
                    _ => text.clone(),
                };
                self.start(&text);
            }
            Event::Edit {
                path,
                before,
                after,
                ..
            } => {
                if let Some(t) = self.turns.last_mut() {
                    t.edits.push((path.clone(), before.clone(), after.clone()));
                }
            }
            Event::Core(CoreEvent::TurnEnded {
                reason: TurnEnd::Error { message },
            }) if message.starts_with(crate::hooks::PROMPT_BLOCKED)
                && self.turns.last().is_some_and(|t| !t.ended) =>
            {
                // A prompt a hook blocked: told, but no turn of the session.
                self.turns.pop();
            }
            Event::Core(CoreEvent::TurnEnded { .. }) => {
                if let Some(t) = self.turns.last_mut() {
                    t.ended = true;
                }
            }
            _ => {}
        }
    }

    fn start(&mut self, text: &str) {
        let number = self.live().count() as u32 + 1;
        self.turns.push(Turn {
            number,
            prompt: text.lines().next().unwrap_or("").trim().to_owned(),
            edits: Vec::new(),
            before: self.last.clone(),
            after: None,
            changed: Vec::new(),
            ended: false,
            gone: false,
            restored: false,
        });
    }

    /// Takes a snapshot of the project now: the "after" of the turn that just ended, and the
    /// "before" of the next one. A front end takes one at the session's start, before each
    /// prompt it sends and at each turn's end.
    pub fn snapshot(&mut self, snaps: &dyn Snapshots) -> Result<(), SeamError> {
        let id = match snaps.take() {
            Ok(id) => id,
            Err(e) => {
                self.last = None;
                return Err(e);
            }
        };
        if let Some(t) = self.turns.last_mut()
            && t.ended
            && t.after.is_none()
            && !t.restored
            && let Some(before) = &t.before
        {
            t.changed = snaps.changed(before, &id)?;
            t.after = Some(id.clone());
        }
        self.last = Some(id);
        Ok(())
    }

    /// The conversation went back to before turn `turn`: it and those after it are gone from
    /// the list (their changes can still be put back by going to an earlier turn).
    pub fn rewound(&mut self, turn: u32) {
        for t in self.turns.iter_mut().filter(|t| !t.gone) {
            if t.number >= turn {
                t.gone = true;
            }
        }
    }

    fn live(&self) -> impl Iterator<Item = &Turn> {
        self.turns.iter().filter(|t| !t.gone)
    }

    /// The turns of the conversation, as checkpoints to go back to.
    pub fn list(&self) -> Vec<Checkpoint> {
        self.live()
            .map(|t| Checkpoint {
                turn: t.number,
                prompt: t.prompt.clone(),
                files: t.files(),
                commands: t.covered(),
                restored: t.restored,
            })
            .collect()
    }

    /// The list as the person reads it.
    pub fn list_text(&self) -> String {
        let list = self.list();
        if list.is_empty() {
            return "no turns yet: nothing to rewind".to_owned();
        }
        let mut out =
            vec!["checkpoints (/rewind N [code|chat|both] goes back to before turn N):".to_owned()];
        for c in &list {
            let n = c.files.len();
            let mut line = format!(
                "{:>4}  {:<48}  {n} file{}",
                c.turn,
                shorten(&c.prompt, 48),
                if n == 1 { "" } else { "s" }
            );
            if c.restored {
                line.push_str(" · code restored");
            } else if !c.commands {
                line.push_str(" · commands' changes not covered");
            }
            out.push(line.trim_end().to_owned());
        }
        out.join("\n")
    }

    /// Whether `turn` is a turn of the conversation; the reason when it is not.
    pub fn check(&self, turn: u32) -> Result<(), String> {
        let have = self.live().count() as u32;
        if turn == 0 || turn > have {
            return Err(format!(
                "no turn {turn}: the session has {have} turn{} (/rewind lists them)",
                if have == 1 { "" } else { "s" }
            ));
        }
        Ok(())
    }

    /// Puts the code back as it was before turn `turn` (see the module's rule); what was done.
    /// Without `snaps`, only the file tools' changes are put back.
    pub fn restore(
        &mut self,
        turn: u32,
        files: &dyn CheckpointFiles,
        snaps: Option<&dyn Snapshots>,
    ) -> Result<Restored, String> {
        self.check(turn)?;
        let Some(at) = self.turns.iter().position(|t| !t.gone && t.number == turn) else {
            return Err(format!("no turn {turn}"));
        };
        Ok(self.restore_from(
            at,
            format!("restored the code to before turn {turn}:"),
            files,
            snaps,
        ))
    }

    /// `/undo`: the code back to before the last turn that changed files (and was not put
    /// back already).
    pub fn undo(&mut self, files: &dyn CheckpointFiles, snaps: Option<&dyn Snapshots>) -> Restored {
        let last = self
            .turns
            .iter()
            .rposition(|t| !t.restored && !t.files().is_empty());
        let Some(at) = last else {
            return Restored {
                restored: Vec::new(),
                files: Vec::new(),
                said: "nothing to undo: no turn changed a file since the last undo".into(),
            };
        };
        let header = format!("undid the changes of turn {}:", self.turns[at].number);
        self.restore_from(at, header, files, snaps)
    }

    fn restore_from(
        &mut self,
        at: usize,
        header: String,
        files: &dyn CheckpointFiles,
        snaps: Option<&dyn Snapshots>,
    ) -> Restored {
        let mut uncovered = Vec::new();
        let changes = self.changes_from(at, snaps, &mut uncovered);
        let mut restored = Vec::new();
        let mut lines = Vec::new();
        for change in changes {
            match put_back(&change, files, snaps) {
                Ok(Some(how)) => {
                    lines.push(format!("{}: {how}", change.path));
                    restored.push(change.path);
                }
                Ok(None) => {}
                Err(why) => lines.push(format!("{}: {why}", change.path)),
            }
        }
        let mut said = vec![header];
        said.extend(lines.iter().map(|l| format!("  {l}")));
        if lines.is_empty() {
            said.push("  no file to put back".into());
        }
        if !uncovered.is_empty() {
            let turns: Vec<String> = uncovered.iter().map(u32::to_string).collect();
            said.push(format!(
                "  (what commands changed in turn {} is not covered: only the file tools' edits were put back)",
                turns.join(", ")
            ));
        }
        for t in &mut self.turns[at..] {
            t.restored = true;
        }
        // The next turn's "before" is a snapshot taken after this.
        self.last = None;
        Restored {
            restored,
            files: lines,
            said: said.join("\n"),
        }
    }

    /// Each file changed from turn `at` on: where it was before its first change and after
    /// its last, in the order first changed. `uncovered` gets the turns whose commands'
    /// changes are not known.
    fn changes_from(
        &self,
        at: usize,
        snaps: Option<&dyn Snapshots>,
        uncovered: &mut Vec<u32>,
    ) -> Vec<FileChange> {
        let mut out: Vec<FileChange> = Vec::new();
        let mut note = |path: &str, first: Side, last: Side, turn: u32| match out
            .iter_mut()
            .find(|c| c.path == path)
        {
            Some(c) => {
                c.last = last;
                c.turn = turn;
            }
            None => out.push(FileChange {
                path: path.to_owned(),
                first,
                last,
                turn,
            }),
        };
        for t in self.turns[at..].iter().filter(|t| !t.restored) {
            let snapped = match (&t.before, &t.after, snaps) {
                (Some(b), Some(a), Some(s)) => Some((b, a, s)),
                _ => None,
            };
            if snapped.is_none() && !t.gone {
                uncovered.push(t.number);
            }
            if let Some((b, a, _)) = snapped {
                for path in &t.changed {
                    note(path, Side::Snap(b.clone()), Side::Snap(a.clone()), t.number);
                }
            }
            // The file tools' changes the snapshots did not see (files they leave out).
            let mut seen: Vec<&str> = Vec::new();
            for (path, _, _) in &t.edits {
                if seen.contains(&path.as_str()) || t.changed.contains(path) {
                    continue;
                }
                seen.push(path);
                if let Some((_, a, s)) = snapped
                    && matches!(s.read(a, path), Ok(Some(_)))
                {
                    // In the snapshot and unchanged over the turn: a command put it back.
                    continue;
                }
                let first = t.edits.iter().find(|e| &e.0 == path).map(|e| e.1.clone());
                let last = t.edits.iter().rfind(|e| &e.0 == path).map(|e| e.2.clone());
                // An empty "before" is a file the agent made.
                let first = match first.filter(|f| !f.is_empty()) {
                    Some(f) => Side::Text(f),
                    None => Side::Absent,
                };
                note(path, first, Side::Text(last.unwrap_or_default()), t.number);
            }
        }
        out
    }
}

/// Puts one file back: how (`None`: nothing to do), or why it was left.
fn put_back(
    change: &FileChange,
    files: &dyn CheckpointFiles,
    snaps: Option<&dyn Snapshots>,
) -> Result<Option<&'static str>, String> {
    let read = |side: &Side| -> Result<Option<Vec<u8>>, String> {
        match side {
            Side::Absent => Ok(None),
            Side::Text(t) => Ok(Some(t.as_bytes().to_vec())),
            Side::Snap(id) => match snaps {
                Some(s) => s
                    .read(id, &change.path)
                    .map_err(|e| format!("not put back: {e}")),
                None => Err("not put back: no snapshot".to_owned()),
            },
        }
    };
    let last = read(&change.last)?;
    let now = files.read(&change.path);
    if now != last {
        return Err(format!("changed since turn {}, left as it is", change.turn));
    }
    let first = read(&change.first)?;
    if first == now {
        return Ok(None);
    }
    let done = match &first {
        None => files
            .remove(&change.path)
            .map(|()| "removed (the agent made it)"),
        Some(bytes) => files.write(&change.path, bytes).map(|()| "put back"),
    };
    done.map(Some).map_err(|e| format!("not put back: {e}"))
}

/// `text` cut to `width` characters (an ellipsis for the rest).
fn shorten(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(width - 1).collect();
    s.push('…');
    s
}
