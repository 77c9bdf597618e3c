//! What the state machine takes in and answers with, and the seams a driver fills: the tool
//! catalogue, the permission decisions, the model's output, a tool's outcome.

use harness_core::protocol::{
    Answer, Event, JobEnd, JobKind, PermissionQuestion, Risk, ToolCall, TurnEnd, Usage,
};
use harness_spec::Spec;
use serde::{Deserialize, Serialize};

use crate::context::ReadInfo;
use crate::message::Message;

/// What the loop needs to know of a tool to schedule its calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolTraits {
    /// Its risk class.
    pub risk: Risk,
    /// Whether it must run alone.
    pub exclusive: bool,
}

/// Where the loop looks tools up (the spec, or a test's table).
pub trait ToolCatalog: Send + Sync {
    /// The traits of the tool named `name` (canonical name), if it exists.
    fn traits(&self, name: &str) -> Option<ToolTraits>;
}

impl ToolCatalog for Spec {
    fn traits(&self, name: &str) -> Option<ToolTraits> {
        self.tool(name).map(|t| ToolTraits {
            risk: t.risk,
            exclusive: t.exclusive,
        })
    }
}

impl<F> ToolCatalog for F
where
    F: Fn(&str) -> Option<ToolTraits> + Send + Sync,
{
    fn traits(&self, name: &str) -> Option<ToolTraits> {
        self(name)
    }
}

/// A permission decision for one call (the permission engine's answer).
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Run it.
    Allow,
    /// Put this question to the person first.
    Ask(PermissionQuestion),
    /// Do not run it; the model is told why.
    Deny {
        /// Why, one line.
        reason: String,
    },
}

/// Where the loop gets permission decisions (harness-permission, in the products).
pub trait Permissions: Send + Sync {
    /// Decides one call.
    fn decide(&self, call: &ToolCall) -> Decision;

    /// Checks a call the person would be asked about against its own preconditions first
    /// (arguments, a file read before it is changed, an edit that applies, a path that
    /// resolves): the error the call would answer, so that the person is asked only about a call
    /// that would then run; `None` when it may run. `earlier` are the calls before it in the same
    /// step, which run before it and may change what it checks.
    fn check(&self, call: &ToolCall, earlier: &[ToolCall]) -> Option<String> {
        let _ = (call, earlier);
        None
    }
}

/// Allows every call (tests, and sessions whose front end decides elsewhere).
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl Permissions for AllowAll {
    fn decide(&self, _call: &ToolCall) -> Decision {
        Decision::Allow
    }
}

/// The model's answer to one request, as the model link parsed it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ModelOutput {
    /// Visible text.
    #[serde(default)]
    pub text: String,
    /// Reasoning text.
    #[serde(default)]
    pub reasoning: String,
    /// Tool calls, in order, with our ids.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Token counts, when the server said them.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// What the model must be told about this answer's calls that could not be run (arguments
    /// that are not whole JSON: `quirks.json` `request.invalid_call`), sent to it as a machine
    /// message after the answer's results, instead of the empty-answer nudge when nothing else
    /// came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One request to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The step's number in this turn, from 1.
    pub step: u32,
    /// The history, oldest first (the driver puts the system text before it).
    pub messages: Vec<Message>,
    /// Whether tools are offered (not on the wrap-up step: tools withdrawn, `tool_choice: none`).
    pub tools: bool,
    /// Whether this is the wrap-up step.
    pub wrap_up: bool,
}

impl ModelRequest {
    /// Approximate prompt tokens (characters / 4).
    pub fn approx_tokens(&self) -> u64 {
        (self.messages.iter().map(Message::chars).sum::<usize>() / 4) as u64
    }
}

/// An edit's before and after, for its diff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EditInfo {
    /// The file.
    pub path: String,
    /// Its text before.
    pub before: String,
    /// Its text after.
    pub after: String,
}

/// What a tool the front end ran produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolOutcome {
    /// The call it answers.
    pub call_id: String,
    /// The full output.
    pub output: String,
    /// Whether it failed.
    #[serde(default)]
    pub is_error: bool,
    /// For a read: what it read.
    #[serde(default)]
    pub read: Option<ReadInfo>,
    /// For an edit or a write over an existing file: the change, answered with its diff.
    #[serde(default)]
    pub edit: Option<EditInfo>,
}

impl ToolOutcome {
    /// A plain output.
    pub fn ok(call_id: impl Into<String>, output: impl Into<String>) -> ToolOutcome {
        ToolOutcome {
            call_id: call_id.into(),
            output: output.into(),
            is_error: false,
            read: None,
            edit: None,
        }
    }

    /// An answer that is an error or not, as a tool said.
    pub fn answer(
        call_id: impl Into<String>,
        output: impl Into<String>,
        is_error: bool,
    ) -> ToolOutcome {
        ToolOutcome {
            is_error,
            ..ToolOutcome::ok(call_id, output)
        }
    }

    /// An error the model reads as the call's result.
    pub fn error(call_id: impl Into<String>, output: impl Into<String>) -> ToolOutcome {
        ToolOutcome {
            is_error: true,
            ..ToolOutcome::ok(call_id, output)
        }
    }
}

/// What a driver feeds into a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "input", rename_all = "snake_case")]
pub enum Input {
    /// A prompt from the person (or a client).
    Prompt {
        /// Its text.
        text: String,
    },
    /// The model answered.
    Model(ModelOutput),
    /// The model could not be reached or failed after the model link's retries: the turn
    /// ends as [`TurnEnd::ModelUnavailable`], or as an error for a context overflow.
    ModelFailed {
        /// One line for the person.
        message: String,
        /// The model said the prompt did not fit its window (and compaction did not help).
        #[serde(default)]
        overflow: bool,
    },
    /// Results of the batch last asked for (any order; matched by call id).
    ToolResults(Vec<ToolOutcome>),
    /// The person answered a question.
    Answer {
        /// The call asked about.
        call_id: String,
        /// The answer.
        answer: Answer,
    },
    /// Output of a running command job.
    JobOutput {
        /// The job.
        id: u32,
        /// The new output.
        text: String,
    },
    /// A job ended.
    JobEnded {
        /// The job.
        id: u32,
        /// How.
        end: JobEnd,
        /// A subagent's final reply.
        #[serde(default)]
        final_reply: Option<String>,
    },
    /// A subagent job of this session reported (its `report` call).
    Report {
        /// The job.
        id: u32,
        /// What it said.
        text: String,
    },
    /// This session is a running subagent: the session that owns its job sent it a message
    /// (`job_send`). It is read at the next step, or starts a turn marked machine when idle.
    Message {
        /// The message.
        text: String,
    },
    /// Stop the running turn.
    Cancel,
    /// The person stopped the running turn, and this much of it had happened: `shown`, the
    /// answer text they saw of the step being streamed (kept as the model's answer), and
    /// `results`, those of the running calls that had ended (kept as their results; the others
    /// are answered `cancelled`). The model is told the turn was stopped.
    Stopped {
        /// The text of the interrupted answer, as shown.
        #[serde(default)]
        shown: String,
        /// Results of calls that ended before the stop.
        #[serde(default)]
        results: Vec<ToolOutcome>,
    },
}

/// What the driver is to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Send this request to the model and feed back [`Input::Model`] or [`Input::ModelFailed`].
    CallModel(ModelRequest),
    /// Run these calls and feed back [`Input::ToolResults`]; `parallel`: side by side.
    RunTools {
        /// The calls, in call order.
        calls: Vec<ToolCall>,
        /// Whether they may run at once.
        parallel: bool,
    },
    /// Put the question to the person and feed back [`Input::Answer`].
    Ask {
        /// The call.
        call_id: String,
        /// The question.
        question: PermissionQuestion,
    },
    /// Start the call as background job `id` (bash or task with `background: true`).
    StartJob {
        /// The job's id.
        id: u32,
        /// Command or subagent.
        kind: JobKind,
        /// The call to run.
        call: ToolCall,
    },
    /// End the running job `id`, then feed back [`Input::JobEnded`] with `Stopped`.
    StopJob {
        /// The job.
        id: u32,
    },
    /// Give the running subagent `id` this message at its next step.
    DeliverToJob {
        /// The job.
        id: u32,
        /// The message.
        message: String,
    },
    /// Start the ended subagent `id` again with its context and this message.
    RestartJob {
        /// The job.
        id: u32,
        /// The message.
        message: String,
    },
    /// This session is a subagent: pass its report to the session that owns its job.
    ReportToParent {
        /// What it said.
        text: String,
    },
    /// Show this event (front ends render events and nothing else).
    Emit(Event),
    /// The turn is over.
    EndTurn(TurnEnd),
}
