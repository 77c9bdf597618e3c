//! What a front end and a session say to each other: [`Ctl`]s in (the core's ops and the
//! front end's own questions), [`Out`]s out (the core's event stream and what a front end
//! draws besides: edits, questions, files to show, output as it comes).

use harness_core::protocol::{Event, Op, TurnEnd};
use harness_loop::transcript::Entry;

/// What the driver tells its front end.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    /// An event of the core stream.
    Event(Event),
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
    /// The model asks the person (the `question` tool); answer with [`Ctl::Reply`].
    Question {
        /// The call.
        call_id: String,
        /// The question.
        question: String,
        /// Answers to pick from (the person may write their own).
        options: Vec<String>,
    },
    /// A `show` call's file for the person's viewer (only where `display` holds); answer with
    /// [`Ctl::Reply`]: `Some` when it opened, `None` when the viewer is gone.
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
}

/// What a front end sends the driver: an op of the core vocabulary, or a question of the
/// terminal's own (slash commands) answered with a text to show.
#[derive(Debug)]
pub enum Ctl {
    /// An op.
    Op(Op),
    /// A question, answered on the sender.
    Query(Query, tokio::sync::oneshot::Sender<String>),
    /// A job as the loop keeps it, with its output from `offset` (characters).
    JobOutput(
        u32,
        usize,
        tokio::sync::oneshot::Sender<Option<(harness_loop::jobs::Job, String)>>,
    ),
    /// Stop a job, as `job_stop` would (its end comes as the usual events).
    StopJob(
        u32,
        tokio::sync::oneshot::Sender<std::result::Result<(), String>>,
    ),
    /// A message for this session from the one that owns it as a job (`job_send`).
    Message(String),
    /// The person's `job_send` (ACP `_lembas/job/send`): the same rules as the model's call;
    /// answered `Ok(true)` when the message was queued for a running subagent, `Ok(false)`
    /// when an ended one starts again, `Err` with the tool's error text otherwise (`None` for
    /// an unknown job).
    SendJob(
        u32,
        String,
        tokio::sync::oneshot::Sender<Option<std::result::Result<bool, String>>>,
    ),
    /// A job and, for a subagent, the saved conversation it ran (ACP `_lembas/job/transcript`).
    JobTranscript(
        u32,
        tokio::sync::oneshot::Sender<Option<(harness_loop::jobs::Job, Option<Vec<Entry>>)>>,
    ),
    /// The person's answer to an [`Out::Question`] (`None`: nobody answered).
    Reply(String, Option<String>),
    /// Keep this many turns and drop the rest from what the model sees (ACP `_lembas/rewind`);
    /// refused while a prompt runs or for more turns than the session has.
    Keep(
        u32,
        tokio::sync::oneshot::Sender<std::result::Result<u32, String>>,
    ),
}

/// The terminal's own questions.
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
