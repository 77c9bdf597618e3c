//! The slash commands a person types into a front end (`/mode plan`, `/recall #id`, `!git
//! status`): how a line reads, and the list `/help` shows. One reading for every front end —
//! the terminal runs them all; ACP runs those that mean something there.

use harness_core::protocol::Mode;

/// The slash commands and what they do (for `/help`).
pub const HELP: &str = "\
/mode [manual|edit|auto|plan]  show or change the mode (Shift-Tab cycles it)
/model [NAME]                   the model and endpoint, or switch to another model
/plan                           the plan, as a card
/jobs                           the session's background jobs
/agents                         the subagents `task` can start, and where each is defined
/compact                        summarise the conversation to free context
/recall #id                     show a stored tool result whole
/rewind [N [code|chat|both]]    list checkpoints (Esc Esc too), or go back to before turn N
/new                            start a new session
/resume [N|ID]                  go on with another session of this directory (a list to pick from)
/status                         model, endpoint, mode, tokens, context, session
/undo                           put back the files of the last turn that changed any
/export [FILE]                  write the conversation to FILE (.json: its entries as JSON; else Markdown)
@PATH (in a prompt)             attach a file's content (Tab completes the path)
!COMMAND                        run a command (the model's permission rules); sent with your next prompt
/help                           this list
/quit                           leave (Ctrl-D too)";

/// The mode after `mode` in the cycle a front end steps through (the terminal's Shift-Tab):
/// manual, edit, auto, plan, and round again.
pub fn next_mode(mode: Mode) -> Mode {
    match mode {
        Mode::Manual => Mode::Edit,
        Mode::Edit => Mode::Auto,
        Mode::Auto => Mode::Plan,
        Mode::Plan => Mode::Manual,
    }
}

/// What the person typed, read as a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A prompt for the model.
    Prompt(String),
    /// `/mode` with an optional mode.
    Mode(Option<Mode>),
    /// `/model [NAME]`.
    Model(Option<String>),
    /// `/plan`.
    Plan,
    /// `/jobs`.
    Jobs,
    /// `/agents`.
    Agents,
    /// `/compact`.
    Compact,
    /// `/recall #id`.
    Recall(String),
    /// `/rewind [N [code|chat|both]]` (turn 0: list the checkpoints).
    Rewind {
        /// The turn to go back to before (0: none given).
        turn: u32,
        /// What to restore, when said.
        what: Option<crate::checkpoint::Restore>,
    },
    /// `/new`.
    New,
    /// `/resume [N|ID]`.
    Resume(Option<String>),
    /// `/status`.
    Status,
    /// `/undo`.
    Undo,
    /// `/export [FILE]`.
    Export(Option<String>),
    /// `/help`.
    Help,
    /// `!command`: a shell command the person runs.
    Shell(String),
    /// `/quit`.
    Quit,
    /// A prompt command the person added (`/name ARGS`, the `custom` module's).
    Custom {
        /// Its name.
        name: String,
        /// What follows the name.
        args: String,
    },
    /// Nothing to do.
    Empty,
    /// A command that is not one, with the line to show.
    Unknown(String),
}

/// The prompt commands of a session as the parser asks about them (the session's
/// `custom::Commands`; `()` for none).
pub trait CommandNames {
    /// Whether there is a prompt command named `name`.
    fn has(&self, name: &str) -> bool;
}

impl CommandNames for () {
    fn has(&self, _name: &str) -> bool {
        false
    }
}

/// Reads a line of the prompt.
pub fn parse_line(line: &str) -> Line {
    parse_line_in(line, &())
}

/// Reads a line of the prompt of a session with the prompt commands `commands`.
pub fn parse_line_in(line: &str, commands: &impl CommandNames) -> Line {
    let t = line.trim();
    if t.is_empty() {
        return Line::Empty;
    }
    if let Some(command) = t.strip_prefix('!') {
        return match command.trim() {
            "" => Line::Unknown("! needs a command, such as !git status".into()),
            c => Line::Shell(c.to_owned()),
        };
    }
    let Some(cmd) = t.strip_prefix('/') else {
        return Line::Prompt(line.trim_end().to_owned());
    };
    let mut words = cmd.split_whitespace();
    let name = words.next().unwrap_or("");
    let arg = words.next();
    match name {
        "mode" => match arg {
            None => Line::Mode(None),
            Some(m) => match m.parse::<Mode>() {
                Ok(m) => Line::Mode(Some(m)),
                Err(_) => Line::Unknown(format!(
                    "unknown mode {m:?}: use manual, edit, auto or plan"
                )),
            },
        },
        "model" => Line::Model(arg.map(str::to_owned)),
        "plan" => Line::Plan,
        "jobs" => Line::Jobs,
        "agents" => Line::Agents,
        "compact" => Line::Compact,
        "recall" => match arg {
            Some(id) => Line::Recall(if id.starts_with('#') {
                id.to_owned()
            } else {
                format!("#{id}")
            }),
            None => Line::Unknown("/recall needs a result id, such as #a3f2".into()),
        },
        "rewind" => match (arg.map(str::parse::<u32>), words.next()) {
            (None, _) => Line::Rewind {
                turn: 0,
                what: None,
            },
            (Some(Ok(turn)), None) => Line::Rewind { turn, what: None },
            (Some(Ok(turn)), Some(w)) => match crate::checkpoint::Restore::parse(w) {
                Some(what) => Line::Rewind {
                    turn,
                    what: Some(what),
                },
                None => Line::Unknown(format!(
                    "/rewind {turn} takes code, chat or both, not {w:?}"
                )),
            },
            (Some(Err(_)), _) => Line::Unknown("/rewind takes a turn number".into()),
        },
        "new" => Line::New,
        "resume" => Line::Resume(arg.map(str::to_owned)),
        "status" => Line::Status,
        "undo" => Line::Undo,
        "export" => Line::Export(arg.map(str::to_owned)),
        "help" | "?" => Line::Help,
        "quit" | "exit" | "q" => Line::Quit,
        other if commands.has(other) => Line::Custom {
            name: other.to_owned(),
            args: cmd.trim_start()[name.len()..].trim().to_owned(),
        },
        other => Line::Unknown(format!("unknown command /{other}: /help lists them")),
    }
}

/// The slash commands Tab completes.
pub const COMMANDS: &[&str] = &[
    "agents", "compact", "export", "help", "jobs", "mode", "model", "new", "plan", "quit",
    "recall", "resume", "rewind", "status", "undo",
];
