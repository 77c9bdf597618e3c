//! The terminal's checkpoints: the core's [`Checkpoints`] fed with the session's events, a
//! snapshot of the project in the session's shadow repository (when it is in a git
//! repository) at the start, before each prompt and at each turn's end, and kept beside the
//! transcript (`checkpoints.json`) so they survive `/resume`.

use std::path::{Path, PathBuf};

use harness_agent::checkpoint::{Checkpoints, Restored, Snapshots};
use harness_agent::{CoreEvent, Event};
use harness_loop::transcript::Entry;

use super::HostFiles;
use crate::shadow::Shadow;

/// The session's checkpoints and where they are kept.
pub(super) struct Kept {
    checkpoints: Checkpoints,
    /// The shadow repository, or why commands' changes are not covered.
    shadow: Result<Shadow, String>,
    /// `checkpoints.json` in the session's directory.
    file: PathBuf,
    /// A snapshot failed: said once.
    warned: bool,
}

impl Kept {
    /// The checkpoints of the session kept in `session_dir` for the project in `root`: those
    /// saved, else a resumed session's turns rebuilt from its transcript (their files not
    /// known); a first snapshot is taken.
    pub(super) fn open(session_dir: &Path, root: &Path, resumed: Option<&[Entry]>) -> Kept {
        let file = session_dir.join("checkpoints.json");
        let saved = std::fs::read_to_string(&file)
            .ok()
            .and_then(|t| serde_json::from_str::<Checkpoints>(&t).ok());
        let checkpoints = match (saved, resumed) {
            (Some(c), Some(entries)) => c.in_step(entries),
            (Some(c), None) => c,
            (None, Some(entries)) => Checkpoints::from_transcript(entries),
            (None, None) => Checkpoints::new(),
        };
        let shadow = Shadow::open(root, &session_dir.join("shadow.git"));
        let mut kept = Kept {
            checkpoints,
            shadow,
            file,
            warned: false,
        };
        kept.snapshot();
        kept
    }

    /// Notes an event; at a turn's end, a snapshot is taken and the checkpoints are saved.
    pub(super) fn observe(&mut self, event: &Event) {
        self.checkpoints.observe(event);
        if matches!(event, Event::Core(CoreEvent::TurnEnded { .. })) {
            self.snapshot();
            self.save();
        }
    }

    /// Before the person's prompt is sent: its text as typed, and a snapshot.
    pub(super) fn before_prompt(&mut self, typed: &str) {
        self.checkpoints.next_prompt(typed);
        self.snapshot();
    }

    fn snapshot(&mut self) {
        let Ok(shadow) = &self.shadow else {
            return;
        };
        if let Err(e) = self.checkpoints.snapshot(shadow)
            && !std::mem::replace(&mut self.warned, true)
        {
            eprintln!(
                "llembas: a checkpoint's snapshot failed (commands' changes are not covered): {e}"
            );
        }
    }

    fn save(&self) {
        let Ok(text) = serde_json::to_string(&self.checkpoints) else {
            return;
        };
        if let Err(e) = harness_fs::write_atomic(&self.file, text.as_bytes()) {
            eprintln!("llembas: the checkpoints were not saved: {e}");
        }
    }

    /// The list as the person reads it (and why commands' changes are not covered, when
    /// they are not).
    pub(super) fn list(&self) -> String {
        let mut text = self.checkpoints.list_text();
        if let Err(why) = &self.shadow
            && !self.checkpoints.list().is_empty()
        {
            text.push_str(&format!(
                "\n(commands' changes are not covered here: {why}; only the file tools' edits are put back)"
            ));
        }
        text
    }

    /// Whether `turn` is a turn to go back to.
    pub(super) fn check(&self, turn: u32) -> Result<(), String> {
        self.checkpoints.check(turn)
    }

    /// `/undo`.
    pub(super) fn undo(&mut self) -> Restored {
        let shadow = self.shadow.clone();
        let snaps = shadow.as_ref().ok().map(|s| s as &dyn Snapshots);
        let done = self.checkpoints.undo(&HostFiles, snaps);
        self.after_restore();
        done
    }

    /// The code back to before `turn`.
    pub(super) fn restore(&mut self, turn: u32) -> Result<Restored, String> {
        let shadow = self.shadow.clone();
        let snaps = shadow.as_ref().ok().map(|s| s as &dyn Snapshots);
        let done = self.checkpoints.restore(turn, &HostFiles, snaps);
        self.after_restore();
        done
    }

    fn after_restore(&mut self) {
        self.snapshot();
        self.save();
    }

    /// The conversation went back to before `turn`.
    pub(super) fn rewound(&mut self, turn: u32) {
        self.checkpoints.rewound(turn);
        self.save();
    }
}
