//! The shared vocabulary: what goes into a run and what comes out of it.
//!
//! Every front end (the CLI's terminal, the web server, the ACP link) is a consumer of the
//! [`Event`] stream and a producer of `harness-agent`'s ops (`harness_agent::Op`, one door to a
//! session); none reaches into the loop's internals. The
//! classification enums of the spec ([`Risk`], [`Scope`], [`Sessions`], [`Requirement`],
//! [`Confirm`], [`Block`], [`Project`]) are re-exported here so that one `use
//! harness_core::protocol::*` gives a crate the whole vocabulary.
//!
//! On the wire every enum here is a tagged serde enum with `snake_case` names: an [`Event`] is
//! `{"type": "text_delta", "text": "..."}`, a turn's end is
//! `{"type": "turn_ended", "reason": {"kind": "budget", "limit": "steps"}}`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use harness_spec::{Block, Confirm, Project, Requirement, Risk, Scope, Sessions};

use crate::error::{Error, Result};
use crate::plan::Plan;

/// A permission mode: what the person lets the agent do without asking.
///
/// `manual` asks for writes and executes, `edit` allows writes inside the workspace, `auto`
/// allows what the floor and `confirm: always` leave, `plan` allows reads and the plan tools
/// only. The former name `unrestricted` is read as `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Ask before every write and every execute.
    Manual,
    /// Allow writes inside the workspace; ask before executes.
    Edit,
    /// Allow everything the floor and `confirm: always` leave (`unrestricted` is read as this).
    #[serde(alias = "unrestricted")]
    Auto,
    /// Read and plan only; `plan_submit` is the approval that leaves it.
    Plan,
}

impl Mode {
    /// The four modes in the order the spec lists them.
    pub const ALL: [Mode; 4] = [Mode::Manual, Mode::Edit, Mode::Auto, Mode::Plan];

    /// The mode's name as the spec spells it (`manual`, `edit`, `auto`, `plan`).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Manual => "manual",
            Mode::Edit => "edit",
            Mode::Auto => "auto",
            Mode::Plan => "plan",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = Error;

    /// Parses a mode name; `unrestricted` is read as `auto`. Case and surrounding blanks are
    /// not forgiven: a name is spelled as the spec spells it.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "manual" => Ok(Mode::Manual),
            "edit" => Ok(Mode::Edit),
            "auto" | "unrestricted" => Ok(Mode::Auto),
            "plan" => Ok(Mode::Plan),
            other => Err(Error::UnknownMode(other.to_owned())),
        }
    }
}

/// The kind of a session, which decides the tools' `sessions` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionKind {
    /// A conversation on the server, working in the server's file system.
    Chat,
    /// A session on a device (the CLI's own, or an agent chat run on a linked device), working
    /// on that machine's disk.
    Agent,
}

impl SessionKind {
    /// Both kinds.
    pub const ALL: [SessionKind; 2] = [SessionKind::Chat, SessionKind::Agent];

    /// The kind's name (`chat`, `agent`).
    pub fn as_str(self) -> &'static str {
        match self {
            SessionKind::Chat => "chat",
            SessionKind::Agent => "agent",
        }
    }

    /// Whether a tool whose `sessions` field is `sessions` is offered in a session of this kind.
    pub fn admits(self, sessions: Sessions) -> bool {
        matches!(
            (self, sessions),
            (_, Sessions::Both)
                | (SessionKind::Chat, Sessions::Chat)
                | (SessionKind::Agent, Sessions::Agent)
        )
    }
}

impl fmt::Display for SessionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SessionKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "chat" => Ok(SessionKind::Chat),
            "agent" => Ok(SessionKind::Agent),
            other => Err(Error::UnknownSessionKind(other.to_owned())),
        }
    }
}

/// One tool call as the harness holds it: our id, the tool's name as the model called it, and
/// the parsed arguments (always a JSON value, never a string of JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id. The harness owns ids: a server's id is remapped, a missing one is given.
    pub id: String,
    /// The tool name the model used (which may be an alias until it is resolved).
    pub name: String,
    /// The parsed arguments.
    pub arguments: Value,
}

/// The id of a stored tool result, as the model sees it: `#` and lowercase letters or digits
/// (`#a3f2`). `recall` takes it; an elided output names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ResultId(String);

impl ResultId {
    /// Checks and wraps an id such as `#a3f2`.
    pub fn new(id: impl Into<String>) -> Result<Self> {
        let id = id.into();
        let body = id.strip_prefix('#').unwrap_or("");
        if body.is_empty()
            || !body
                .chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
        {
            return Err(Error::InvalidResultId(id));
        }
        Ok(ResultId(id))
    }

    /// The id with its `#`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ResultId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for ResultId {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        ResultId::new(s)
    }
}

impl TryFrom<String> for ResultId {
    type Error = Error;

    fn try_from(s: String) -> Result<Self> {
        ResultId::new(s)
    }
}

impl From<ResultId> for String {
    fn from(id: ResultId) -> String {
        id.0
    }
}

/// The result of one tool call, as it is put into the context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The [`ToolCall::id`] this answers.
    pub call_id: String,
    /// The stored result's id (`#a3f2`).
    pub result_id: ResultId,
    /// The text the model is sent: [`label`](Self::label) on a line of its own, then the body.
    pub content: String,
    /// The line naming the stored result for the model (`[#a3f2]`), empty when results go in
    /// unlabelled; a person is shown [`body`](Self::body) instead.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label: String,
    /// Whether the call failed (a refusal, an error, a malformed call).
    pub is_error: bool,
}

impl ToolResult {
    /// The result as a person reads it: the text without the label the model is told.
    pub fn body(&self) -> &str {
        if self.label.is_empty() {
            return &self.content;
        }
        match self.content.strip_prefix(self.label.as_str()) {
            Some(rest) => rest.strip_prefix('\n').unwrap_or(rest),
            None => &self.content,
        }
    }
}

/// Who a user turn comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// The person typed it.
    #[default]
    Person,
    /// The harness wrote it: a job that ended woke the session (a turn marked `machine`).
    Machine,
}

/// A question put to the person before a call runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionQuestion {
    /// The tool's canonical name.
    pub tool: String,
    /// The tool's risk class.
    pub risk: Risk,
    /// What the call does, exactly as it would run: the command, the path, the URL.
    pub subject: String,
    /// The pattern an "always" answer would save (`git status *`), absent when "always" is not
    /// offered (`confirm: always`, or nothing sensible to remember).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Why it is asked, when there is more to say than the mode (a read outside the workspace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The change a file-changing call would make, so that it is not approved blind: a unified
    /// diff of the file as it is now (`--- /dev/null` for a new one), or the patch it applies.
    /// Absent when it cannot be foreseen (the tool then refuses the call and says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<String>,
}

/// The person's answer to a [`PermissionQuestion`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Answer {
    /// Run this call, and ask again next time.
    Once,
    /// Run this call and save the question's pattern as an allow rule.
    Always,
    /// Do not run it; the optional feedback is passed on to the model.
    Deny {
        /// What the person said instead.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        feedback: Option<String>,
    },
}

/// What kind of background work a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    /// A command run in the background (bash `background: true`, or past its timeout).
    Command,
    /// A subagent run in the background (task `background: true`).
    Subagent,
}

/// Where a subagent's call is (see [`Event::SubagentCall`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum SubagentCallStatus {
    /// It is about to run.
    Started,
    /// It ran.
    Done,
    /// It failed or was refused: the first line of what the subagent was told.
    Failed {
        /// That line, cut to 200 characters.
        reason: String,
    },
}

/// What became of a message for a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobDelivery {
    /// Queued for the running subagent.
    Sent,
    /// The ended subagent was started again with it.
    Restarted,
    /// It reached nobody: the subagent was gone.
    Dropped,
}

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
#[non_exhaustive]
pub enum JobEnd {
    /// It finished by itself; a command carries its exit code.
    Done {
        /// The command's exit code (none for a subagent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
    },
    /// It failed (a subagent's error, a command killed by a signal).
    Failed {
        /// What went wrong.
        message: String,
    },
    /// It was stopped (`job_stop`, or the session ended).
    Stopped,
}

/// Why a turn ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TurnEnd {
    /// The model answered without calling a tool.
    Finished,
    /// The person (or the client) cancelled it.
    Cancelled,
    /// A budget ran out (`steps`, `tokens`, `time`, ...), after the wrap-up.
    Budget {
        /// Which budget, as `loop.json` names it.
        limit: String,
    },
    /// The plan was submitted in plan mode and the turn waits for the person's approval.
    PlanSubmitted,
    /// The model's context was full and compaction could not make room.
    ContextOverflow,
    /// Something failed that the loop could not recover from.
    Error {
        /// The error, one line, as shown to the person.
        message: String,
    },
    /// The model link failed: its server could not be reached, or kept failing past the link's
    /// retries (an ACP prompt answers `-32042`, `spec/acp.md` §5).
    ModelUnavailable {
        /// The link's error, one line, as shown to the person.
        message: String,
    },
}

/// How loud a notice is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// For the curious (a retry, a capacity wait).
    Info,
    /// Something the person should know (a quirk coped with, a budget nearly spent).
    Warning,
}

/// Token counts of one model answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens sent (the prompt).
    pub input_tokens: u64,
    /// Tokens generated.
    pub output_tokens: u64,
}

/// One event of a run, in the order it happens. Front ends render these and nothing else.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// A user turn was taken into the session.
    UserInput {
        /// The text of the turn.
        text: String,
        /// Who wrote it.
        #[serde(default)]
        origin: Origin,
    },
    /// A step began: the model is being asked.
    StepStarted {
        /// The step's number in this turn, from 1.
        step: u32,
    },
    /// A piece of the model's visible answer.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// A piece of the model's reasoning.
    ReasoningDelta {
        /// The new reasoning text.
        text: String,
    },
    /// The model's answer of this step is complete.
    ModelAnswered {
        /// Token counts, when the server said them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// A tool call was parsed and is about to be decided on and run.
    ToolCallStarted {
        /// The call, its name already resolved from any alias.
        call: ToolCall,
        /// How a UI draws it (`plan` is not drawn: the plan card refreshes).
        block: Block,
        /// What the call said it is for (its `purpose` argument, taken out of `call`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        purpose: Option<String>,
    },
    /// The call needs the person's answer before it runs.
    ToolCallAsked {
        /// The call asked about.
        call_id: String,
        /// What is asked.
        question: PermissionQuestion,
    },
    /// The person answered.
    ToolCallAnswered {
        /// The call answered.
        call_id: String,
        /// The answer.
        answer: Answer,
    },
    /// The call ran (or was refused) and its result is in the context.
    ToolCallFinished {
        /// The result as the model sees it.
        result: ToolResult,
    },
    /// The plan changed (written, updated, submitted) or was removed (`None`).
    PlanChanged {
        /// The plan now.
        plan: Option<Plan>,
    },
    /// The permission mode changed (by the person, or by an approved `plan_submit`).
    ModeChanged {
        /// The mode now.
        mode: Mode,
    },
    /// A job began in the background.
    JobStarted {
        /// The job's id, one sequence per session.
        job_id: String,
        /// Command or subagent.
        kind: JobKind,
        /// A one-line title (the command, the subagent's task).
        title: String,
    },
    /// A job said something worth showing while it runs (a subagent's `report`).
    JobNote {
        /// The job's id.
        job_id: String,
        /// The note.
        text: String,
    },
    /// A message for a job (the model's `job_send`, or the person's) was handed to its running
    /// subagent, started an ended one again, or could not reach it.
    JobMessage {
        /// The job's id.
        job_id: String,
        /// The message.
        text: String,
        /// What became of it.
        delivery: JobDelivery,
    },
    /// A job ended.
    JobEnded {
        /// The job's id.
        job_id: String,
        /// How it ended.
        end: JobEnd,
    },
    /// A call a subagent made, for the person to follow what it does (the subagent's context
    /// is its own: none of this is in this session's). Told when it starts and when it ends.
    SubagentCall {
        /// The `task` call it runs under, when it runs in the foreground.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_call_id: Option<String>,
        /// The job's id, when it runs in the background.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        job_id: Option<String>,
        /// The subagent's call, its name resolved.
        call: ToolCall,
        /// How a UI draws it.
        block: Block,
        /// Started, done or failed.
        #[serde(flatten)]
        status: SubagentCallStatus,
    },
    /// The context was compacted.
    Compacted {
        /// Tokens in the context before.
        before_tokens: u64,
        /// Tokens after.
        after_tokens: u64,
    },
    /// Something worth telling the person that is not part of the conversation.
    Notice {
        /// How loud.
        level: Level,
        /// The text.
        text: String,
    },
    /// The turn is over; nothing more comes until the next input.
    TurnEnded {
        /// Why.
        reason: TurnEnd,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unrestricted_is_auto() {
        assert_eq!("unrestricted".parse::<Mode>().unwrap(), Mode::Auto);
        let m: Mode = serde_json::from_value(json!("unrestricted")).unwrap();
        assert_eq!(m, Mode::Auto);
        assert_eq!(serde_json::to_value(Mode::Auto).unwrap(), json!("auto"));
        assert!("Auto".parse::<Mode>().is_err());
    }

    #[test]
    fn result_ids() {
        assert!(ResultId::new("#a3f2").is_ok());
        assert!(ResultId::new("a3f2").is_err());
        assert!(ResultId::new("#").is_err());
        assert!(ResultId::new("#A3").is_err());
        let e = serde_json::from_value::<ResultId>(json!("x")).unwrap_err();
        assert!(e.to_string().contains("result id"));
    }

    #[test]
    fn events_are_tagged() {
        let e = Event::TurnEnded {
            reason: TurnEnd::Budget {
                limit: "steps".into(),
            },
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v,
            json!({"type": "turn_ended", "reason": {"kind": "budget", "limit": "steps"}})
        );
        assert_eq!(serde_json::from_value::<Event>(v).unwrap(), e);
        let a = Event::ToolCallAnswered {
            call_id: "c1".into(),
            answer: Answer::Deny { feedback: None },
        };
        let v = serde_json::to_value(&a).unwrap();
        assert_eq!(
            v,
            json!({"type": "tool_call_answered", "call_id": "c1", "answer": {"answer": "deny"}})
        );
    }

    #[test]
    fn session_kinds_admit() {
        assert!(SessionKind::Chat.admits(Sessions::Both));
        assert!(SessionKind::Chat.admits(Sessions::Chat));
        assert!(!SessionKind::Chat.admits(Sessions::Agent));
        assert!(!SessionKind::Agent.admits(Sessions::Chat));
    }
}
