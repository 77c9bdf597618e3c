//! What a front end and a session say to each other: [`Op`]s in (the core's ops and the front
//! end's answers to what the session asked), [`Event`]s out (the core's event stream and what a
//! front end draws besides: edits, questions, files to show, output as it comes). Both are
//! serde-tagged enums (`{"type": "..."}`): a core event is written exactly as harness-core writes
//! it, the others as `{"type": "edit" | "question" | "show" | "tool_output" | "shell_asked" |
//! "shell_ended", ...}`, so a server
//! stores and forwards them with no JSON of its own.
//!
//! The session's answers with a value (its jobs, a rewind, a compaction, a mode change) are the
//! [`crate::Session`]'s async methods; inside the crate they travel as [`Ctl`]s with a reply
//! channel.

use harness_core::protocol::{Answer, Mode, Origin, PermissionQuestion, TurnEnd};
use harness_loop::transcript::Entry;
use serde::{Deserialize, Serialize};

pub use harness_core::protocol::Event as CoreEvent;

/// What a session tells its front end.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// An event of the core stream.
    Core(CoreEvent),
    /// A file a call changed: its text before and after (for clients that draw diffs).
    Edit {
        /// The call.
        call_id: String,
        /// The file's real path.
        path: String,
        /// Its text before (empty for a new file).
        before: String,
        /// Its text after.
        after: String,
    },
    /// The model asks the person (the `question` tool); answer with [`Op::Reply`].
    Question {
        /// The call.
        call_id: String,
        /// The question.
        question: String,
        /// Answers to pick from (the person may write their own).
        options: Vec<String>,
    },
    /// A `show` call's file for the person's viewer (only where `display` holds); answer with
    /// [`Op::Reply`]: `Some` when it opened, `None` when the viewer is gone. Its `content` is
    /// not written out (a viewer reads the file by its path).
    Show {
        /// The call.
        call_id: String,
        /// The file's real path.
        path: String,
        /// A title (the file's name).
        title: String,
        /// `markdown`, `code`, `text` or `html` (`spec/acp.md` §11).
        kind: String,
        /// For `code`: the language, by the file's extension.
        language: Option<String>,
        /// The line to scroll to.
        line: Option<u64>,
        /// The file's text.
        content: String,
    },
    /// A piece of a running command's output (shown as it comes; the result has it whole).
    ToolOutput {
        /// The call.
        call_id: String,
        /// The new output.
        text: String,
    },
    /// A rule asks before the person's own command ([`Op::Shell`]) runs: answer with
    /// [`Op::Answer`] (`once` runs it; nothing is remembered).
    ShellAsked {
        /// The command's call.
        call_id: String,
        /// The question (no pattern: "always" is not offered).
        question: PermissionQuestion,
    },
    /// The person's own command ([`Op::Shell`]) ended.
    ShellEnded {
        /// The command's call (empty when it was refused before it had one).
        call_id: String,
        /// The command.
        command: String,
        /// How it ended.
        end: ShellEnd,
    },
}

/// How the person's own command ([`Op::Shell`]) ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ShellEnd {
    /// It ran: its exit code (-1 when a signal ended it) and its output (stderr with stdout).
    Ran {
        /// The exit code.
        code: i32,
        /// What it wrote.
        output: String,
    },
    /// A rule denied it.
    Refused {
        /// Why.
        reason: String,
    },
    /// The person said no when asked (or nobody answered).
    Declined,
    /// The person stopped it while it ran.
    Stopped,
}

/// The front end's own events as they are written.
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Own {
    Edit {
        call_id: String,
        path: String,
        before: String,
        after: String,
    },
    Question {
        call_id: String,
        question: String,
        options: Vec<String>,
    },
    Show {
        call_id: String,
        path: String,
        title: String,
        kind: String,
        language: Option<String>,
        line: Option<u64>,
        #[serde(skip_serializing, default)]
        content: String,
    },
    ToolOutput {
        call_id: String,
        text: String,
    },
    ShellAsked {
        call_id: String,
        question: PermissionQuestion,
    },
    ShellEnded {
        call_id: String,
        command: String,
        end: ShellEnd,
    },
}

/// The front end's own events as they are written, borrowed.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OwnRef<'a> {
    Edit {
        call_id: &'a str,
        path: &'a str,
        before: &'a str,
        after: &'a str,
    },
    Question {
        call_id: &'a str,
        question: &'a str,
        options: &'a [String],
    },
    Show {
        call_id: &'a str,
        path: &'a str,
        title: &'a str,
        kind: &'a str,
        language: &'a Option<String>,
        line: &'a Option<u64>,
    },
    ToolOutput {
        call_id: &'a str,
        text: &'a str,
    },
    ShellAsked {
        call_id: &'a str,
        question: &'a PermissionQuestion,
    },
    ShellEnded {
        call_id: &'a str,
        command: &'a str,
        end: &'a ShellEnd,
    },
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let own = match self {
            Event::Core(e) => return e.serialize(s),
            Event::Edit {
                call_id,
                path,
                before,
                after,
            } => OwnRef::Edit {
                call_id,
                path,
                before,
                after,
            },
            Event::Question {
                call_id,
                question,
                options,
            } => OwnRef::Question {
                call_id,
                question,
                options,
            },
            Event::Show {
                call_id,
                path,
                title,
                kind,
                language,
                line,
                ..
            } => OwnRef::Show {
                call_id,
                path,
                title,
                kind,
                language,
                line,
            },
            Event::ToolOutput { call_id, text } => OwnRef::ToolOutput { call_id, text },
            Event::ShellAsked { call_id, question } => OwnRef::ShellAsked { call_id, question },
            Event::ShellEnded {
                call_id,
                command,
                end,
            } => OwnRef::ShellEnded {
                call_id,
                command,
                end,
            },
        };
        own.serialize(s)
    }
}

/// An event as it is read: the front end's own, else the core's.
#[derive(Deserialize)]
#[serde(untagged)]
enum Wire {
    Own(Own),
    Core(CoreEvent),
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Event, D::Error> {
        Ok(match Wire::deserialize(d)? {
            Wire::Core(e) => Event::Core(e),
            Wire::Own(Own::Edit {
                call_id,
                path,
                before,
                after,
            }) => Event::Edit {
                call_id,
                path,
                before,
                after,
            },
            Wire::Own(Own::Question {
                call_id,
                question,
                options,
            }) => Event::Question {
                call_id,
                question,
                options,
            },
            Wire::Own(Own::Show {
                call_id,
                path,
                title,
                kind,
                language,
                line,
                content,
            }) => Event::Show {
                call_id,
                path,
                title,
                kind,
                language,
                line,
                content,
            },
            Wire::Own(Own::ToolOutput { call_id, text }) => Event::ToolOutput { call_id, text },
            Wire::Own(Own::ShellAsked { call_id, question }) => {
                Event::ShellAsked { call_id, question }
            }
            Wire::Own(Own::ShellEnded {
                call_id,
                command,
                end,
            }) => Event::ShellEnded {
                call_id,
                command,
                end,
            },
        })
    }
}

impl From<CoreEvent> for Event {
    fn from(e: CoreEvent) -> Event {
        Event::Core(e)
    }
}

/// What a front end submits to a session ([`crate::Session::submit`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Op {
    /// A user turn (queued while another runs).
    Prompt {
        /// Its text.
        text: String,
        /// Who wrote it.
        #[serde(default)]
        origin: Origin,
        /// Images that go with it, as `data:` or `https:` URLs (taken where the model's
        /// metadata says it reads images; otherwise left out, and the person told).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<String>,
    },
    /// The answer to a [`CoreEvent::ToolCallAsked`].
    Answer {
        /// The call answered.
        call_id: String,
        /// The answer.
        answer: Answer,
    },
    /// The person's answer to an [`Event::Question`] or [`Event::Show`] (`None`: nobody
    /// answered, or the viewer is gone).
    Reply {
        /// The call answered.
        call_id: String,
        /// The answer.
        #[serde(default)]
        text: Option<String>,
    },
    /// Change the permission mode (its [`CoreEvent::ModeChanged`] follows;
    /// [`crate::Session::set_mode`] waits for it).
    SetMode {
        /// The new mode.
        mode: Mode,
    },
    /// Stop the running turn (or compaction).
    Cancel,
    /// A message for this session from the one that owns it as a job (`job_send`).
    Message {
        /// Its text.
        text: String,
    },
    /// The person's own command (a terminal's `!command`): run in the session's directory under
    /// the rules a model's `bash` call meets — refused by a deny ([`Event::ShellEnded`] says
    /// why), asked once when a rule asks ([`Event::ShellAsked`]; nothing is remembered) — and
    /// its end told as [`Event::ShellEnded`]; [`Op::Cancel`] stops it. Only an idle session
    /// runs it.
    Shell {
        /// The command line.
        command: String,
    },
}

/// A reply channel of a [`Ctl`].
pub(crate) type Reply<T> = tokio::sync::oneshot::Sender<T>;

/// What a [`crate::Session`] sends its driver: an op, or a question answered on its channel.
#[derive(Debug)]
pub(crate) enum Ctl {
    /// An op.
    Op(Op),
    /// A mode change, answered with the mode the session is in after it.
    SetMode(Mode, Reply<Mode>),
    /// A terminal's question, answered with a text to show.
    Query(Query, Reply<String>),
    /// A job as the loop keeps it, with its output from `offset` (characters).
    JobOutput(u32, usize, Reply<Option<(harness_loop::jobs::Job, String)>>),
    /// Stop a job, as `job_stop` would (its end comes as the usual events).
    StopJob(u32, Reply<std::result::Result<(), String>>),
    /// The person's `job_send`: the same rules as the model's call.
    SendJob(
        u32,
        String,
        Reply<Option<std::result::Result<bool, String>>>,
    ),
    /// A job and, for a subagent, the saved conversation it ran.
    JobTranscript(
        u32,
        Reply<Option<(harness_loop::jobs::Job, Option<Vec<Entry>>)>>,
    ),
    /// Keep this many turns and drop the rest from what the model sees.
    Keep(u32, Reply<std::result::Result<u32, String>>),
    /// The session's jobs as the loop keeps them.
    Jobs(Reply<Vec<harness_loop::jobs::Job>>),
}

/// The terminal's own questions, each answered with a text to show
/// ([`crate::Session::query`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Query {
    /// The session's jobs (as `job_list` answers).
    Jobs,
    /// The plan, as a card.
    Plan,
    /// A stored result, whole.
    Recall(String),
    /// Go back to before turn `n` (1-based); 0 lists the turns.
    Rewind(u32),
    /// The model and endpoint; with a name, switch to that model on the same endpoint.
    Model(Option<String>),
    /// Compact the conversation: the model writes a summary that replaces it (idle only).
    Compact,
}

/// The reason a turn ended, as one line (a subagent's failure, a terminal's last line).
pub fn turn_end_text(end: &TurnEnd) -> String {
    match end {
        TurnEnd::Finished => "finished".into(),
        TurnEnd::Cancelled => "cancelled".into(),
        TurnEnd::Budget { limit } => format!("stopped: the {limit} budget ran out"),
        TurnEnd::PlanSubmitted => "the plan waits for approval".into(),
        TurnEnd::ContextOverflow => "stopped: the model's context is full".into(),
        TurnEnd::Error { message } | TurnEnd::ModelUnavailable { message } => {
            format!("error: {message}")
        }
        other => format!("ended: {other:?}"),
    }
}

/// The ACP `stopReason` of a turn's end (`spec/acp.md`): `end_turn`, `cancelled`,
/// `max_tokens` (the token budget or a full context window) or `max_turn_requests` (another
/// budget); a turn that ended in an error has none, and the prompt fails with its message.
pub fn stop_reason(end: &TurnEnd) -> Result<&'static str, String> {
    match end {
        TurnEnd::Finished | TurnEnd::PlanSubmitted => Ok("end_turn"),
        TurnEnd::Cancelled => Ok("cancelled"),
        TurnEnd::Budget { limit } if limit == "tokens" => Ok("max_tokens"),
        TurnEnd::Budget { .. } => Ok("max_turn_requests"),
        TurnEnd::ContextOverflow => Ok("max_tokens"),
        TurnEnd::Error { message } | TurnEnd::ModelUnavailable { message } => Err(message.clone()),
        other => Err(turn_end_text(other)),
    }
}
