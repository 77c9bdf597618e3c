//! A session's state machine: the run of each prompt.
//!
//! [`Session::handle`] takes one [`Input`] and answers with the [`Action`]s to take, in order.
//! The driver (a front end) performs them — calls the model, runs tools, asks the person,
//! starts and stops jobs — and feeds what came back as the next input. Nothing here blocks,
//! sleeps, or touches a process, the network or a disk.

use std::collections::VecDeque;

use harness_core::protocol::{
    Answer, Event, JobEnd, JobKind, Origin, PermissionQuestion, Risk, ToolCall, ToolResult,
    TurnEnd, Usage,
};
use harness_spec::{Project, Spec};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::{Budget, LoopConfig, fill};
use crate::context::{Context, Insert, InsertKind, ReadInfo, canonical_args};
use crate::error::{Error, Result};
use crate::jobs::{JobDecision, Jobs};
use crate::transcript::Entry;

/// The tools the loop answers itself, whatever world a session runs in: `recall`, `report`
/// (a subagent's) and the job tools. The products offer them where the spec offers them.
pub const LOOP_ANSWERS: &[&str] = &[
    "recall",
    "report",
    "job_list",
    "job_output",
    "job_stop",
    "job_send",
];

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

pub use crate::message::Message;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    Model,
    Asking,
    Tools,
}

#[derive(Debug, Clone)]
struct TurnState {
    requests: u32,
    counted_steps: u32,
    tokens: u64,
    empty_in_row: u32,
    /// A note for the model that waits for the current calls' results.
    note: Option<String>,
    text_nudges: u32,
    wrap_up: Option<String>,
}

#[derive(Debug, Clone)]
enum Slot {
    Waiting,
    Done(Insert),
    Recall(Value),
}

#[derive(Debug, Clone, Default)]
struct Pending {
    calls: Vec<ToolCall>,
    slots: Vec<Option<Slot>>,
    questions: VecDeque<(usize, PermissionQuestion)>,
    asking: Option<usize>,
    allowed: Vec<usize>,
    batches: VecDeque<(Vec<usize>, bool)>,
    running: Vec<usize>,
    end_after: Option<TurnEnd>,
}

/// One session: its history, context hygiene, jobs, and the run of its current prompt.
pub struct Session {
    cfg: LoopConfig,
    budget: Budget,
    catalog: Box<dyn ToolCatalog>,
    permissions: Box<dyn Permissions>,
    context: Context,
    jobs: Jobs,
    history: Vec<Message>,
    /// Images waiting for the person's next prompt.
    images: Vec<String>,
    turn_starts: Vec<usize>,
    compacted_through: u32,
    phase: Phase,
    turn: Option<TurnState>,
    pending: Pending,
    last_call: Option<(String, u32, String)>,
    open_tasks: Vec<String>,
    /// The open tasks the last text-only nudge was for: the same plan state is not nudged
    /// again (a later prompt's text answer does not cost a hidden call each time).
    nudged_plan: Option<Vec<String>>,
    subagent: bool,
    inbox: Vec<String>,
    log: Vec<Entry>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("phase", &self.phase)
            .field("turns", &self.turn_starts.len())
            .field("history", &self.history.len())
            .finish_non_exhaustive()
    }
}

/// How a session is set up.
pub struct SessionSetup {
    /// `loop.json`.
    pub config: LoopConfig,
    /// Whose budgets apply.
    pub project: Project,
    /// A budget other than the project's (the person's setting); the backstop holds anyway.
    pub budget: Option<Budget>,
    /// The session's id (salts result ids).
    pub id: String,
    /// Tools.
    pub catalog: Box<dyn ToolCatalog>,
    /// Permission decisions.
    pub permissions: Box<dyn Permissions>,
    /// Whether this session is a subagent (it has `report`).
    pub subagent: bool,
    /// Whether context hygiene is on (off only to measure it).
    pub hygiene: bool,
}

impl Session {
    /// A new, idle session.
    pub fn new(setup: SessionSetup) -> Session {
        let budget = setup
            .budget
            .unwrap_or_else(|| setup.config.budgets.of(setup.project));
        let mut context = Context::new(setup.config.context.clone(), setup.id);
        if !setup.hygiene {
            context = context.without_hygiene();
        }
        Session {
            jobs: Jobs::new(setup.config.clone()),
            cfg: setup.config,
            budget,
            catalog: setup.catalog,
            permissions: setup.permissions,
            context,
            history: Vec::new(),
            images: Vec::new(),
            turn_starts: Vec::new(),
            compacted_through: 0,
            phase: Phase::Idle,
            turn: None,
            pending: Pending::default(),
            last_call: None,
            open_tasks: Vec::new(),
            nudged_plan: None,
            subagent: setup.subagent,
            inbox: Vec::new(),
            log: Vec::new(),
        }
    }

    /// A session put back from its transcript (the products reopen sessions this way): the
    /// history, the result store with its read and listing tables (compactions and rewinds
    /// replayed, so stubs still point only at what the model sees), the job table and the turn
    /// count. A turn the crash cut short is closed: its calls without results get the
    /// `cancelled` answer and the turn ends as cancelled — entries that [`Session::take_log`]
    /// then returns, for the driver to append.
    pub fn resume(setup: SessionSetup, entries: &[Entry]) -> Session {
        let mut s = Session::new(setup);
        let mut open_turn = false;
        let mut started: Vec<String> = Vec::new();
        for e in entries {
            match e {
                Entry::TurnStarted {
                    turn,
                    text,
                    origin,
                    images,
                } => {
                    s.turn_starts.push(s.history.len());
                    s.context.begin_turn(*turn);
                    s.history.push(Message::User {
                        text: text.clone(),
                        origin: *origin,
                        images: images.clone(),
                    });
                    open_turn = true;
                }
                Entry::User { text, origin } => {
                    s.history.push(Message::user_from(text.clone(), *origin))
                }
                Entry::Assistant {
                    text,
                    reasoning,
                    tool_calls,
                } => s.history.push(Message::Assistant {
                    text: text.clone(),
                    reasoning: reasoning.clone(),
                    tool_calls: tool_calls.clone(),
                }),
                Entry::ToolResult {
                    call_id,
                    tool,
                    result_id,
                    output,
                    text,
                    kind,
                    args,
                    read,
                } => {
                    s.context.restore(crate::context::Restored {
                        id: result_id.clone(),
                        tool: tool.clone(),
                        args: args.clone(),
                        output: output.clone(),
                        kind: kind.clone(),
                        read: read.clone(),
                    });
                    s.history.push(Message::Tool {
                        call_id: call_id.clone(),
                        text: text.clone(),
                    });
                }
                Entry::JobStarted { id, kind, title } => s.jobs.restore(*id, *kind, title),
                Entry::JobEnded { id, end } => s.jobs.restore_end(*id, end),
                Entry::TurnEnded { .. } => open_turn = false,
                Entry::Compacted { text } => {
                    s.context.compact();
                    s.history = vec![Message::user_from(text.clone(), Origin::Machine)];
                    s.compacted_through = s.turns();
                    s.turn_starts.fill(0);
                }
                Entry::Rewound { turn } => {
                    let k = (*turn as usize).saturating_sub(1);
                    if let Some(&at) = s.turn_starts.get(k) {
                        s.history.truncate(at);
                        s.turn_starts.truncate(k);
                        s.context.rewind(*turn);
                    }
                }
                Entry::CallsStarted { call_ids } => started.extend(call_ids.iter().cloned()),
            }
        }
        if open_turn {
            s.close_cut_turn(&started);
        }
        s
    }

    /// Pairs every call of the last assistant message that has no result with the `cancelled`
    /// answer (`interrupted` for one that had started running), and ends the turn as cancelled.
    fn close_cut_turn(&mut self, started: &[String]) {
        let answered: Vec<String> = self
            .history
            .iter()
            .filter_map(|m| match m {
                Message::Tool { call_id, .. } => Some(call_id.clone()),
                _ => None,
            })
            .collect();
        let last_calls = self.history.iter().rev().find_map(|m| match m {
            Message::Assistant { tool_calls, .. } => Some(tool_calls.clone()),
            _ => None,
        });
        for call in last_calls.unwrap_or_default() {
            if answered.contains(&call.id) {
                continue;
            }
            let missing = if started.contains(&call.id) {
                self.cfg.calls.interrupted.clone()
            } else {
                self.cfg.calls.cancelled.clone()
            };
            let (inserted, read) = self.insert_slot(&call, None, &missing);
            self.record_result(&call, inserted, read);
        }
        self.log.push(Entry::TurnEnded {
            reason: TurnEnd::Cancelled,
        });
    }

    /// The history the model sees now.
    pub fn history(&self) -> &[Message] {
        &self.history
    }

    /// The context hygiene state (result store, recall).
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The context hygiene state, to insert results the driver makes itself.
    pub fn context_mut(&mut self) -> &mut Context {
        &mut self.context
    }

    /// The session's jobs.
    pub fn jobs(&self) -> &Jobs {
        &self.jobs
    }

    /// The session's jobs, for decisions the driver asks for directly ([`Jobs::overrun`]).
    pub fn jobs_mut(&mut self) -> &mut Jobs {
        &mut self.jobs
    }

    /// Turns taken so far.
    pub fn turns(&self) -> u32 {
        self.turn_starts.len() as u32
    }

    /// Images to go with the next prompt of the person (`data:` or `https:` URLs).
    pub fn attach_images(&mut self, images: Vec<String>) {
        self.images.extend(images);
    }

    /// A call of the batch being handled (asked about, running), by its id.
    pub fn pending_call(&self, call_id: &str) -> Option<&ToolCall> {
        self.pending.calls.iter().find(|c| c.id == call_id)
    }

    /// Whether a prompt is running.
    pub fn busy(&self) -> bool {
        self.phase != Phase::Idle
    }

    /// The plan's open tasks (titles), for the text-only nudge; the driver sets them whenever
    /// the plan changes.
    pub fn set_open_tasks(&mut self, tasks: Vec<String>) {
        self.open_tasks = tasks;
    }

    /// Takes the transcript entries recorded since the last call.
    pub fn take_log(&mut self) -> Vec<Entry> {
        std::mem::take(&mut self.log)
    }

    /// Feeds one input; returns what to do, in order.
    pub fn handle(&mut self, input: Input) -> Result<Vec<Action>> {
        match input {
            Input::Prompt { text } => {
                if self.busy() {
                    return Err(self.unexpected("a prompt"));
                }
                Ok(self.start_turn(text, Origin::Person))
            }
            Input::Model(out) => {
                if self.phase != Phase::Model {
                    return Err(self.unexpected("a model answer"));
                }
                Ok(self.on_model(out))
            }
            Input::ModelFailed { message, overflow } => {
                if self.phase != Phase::Model {
                    return Err(self.unexpected("a model failure"));
                }
                Ok(self.end(if overflow {
                    TurnEnd::Error { message }
                } else {
                    TurnEnd::ModelUnavailable { message }
                }))
            }
            Input::Answer { call_id, answer } => {
                if self.phase != Phase::Asking {
                    return Err(self.unexpected("an answer"));
                }
                Ok(self.on_answer(&call_id, answer))
            }
            Input::ToolResults(results) => {
                if self.phase != Phase::Tools {
                    return Err(self.unexpected("tool results"));
                }
                Ok(self.on_results(results))
            }
            Input::JobOutput { id, text } => {
                self.jobs.output(id, &text);
                Ok(Vec::new())
            }
            Input::JobEnded {
                id,
                end,
                final_reply,
            } => {
                let Some(_) = self.jobs.end(id, &end, final_reply.as_deref()) else {
                    return Ok(Vec::new());
                };
                self.log.push(Entry::JobEnded {
                    id,
                    end: end.clone(),
                });
                let mut actions = vec![Action::Emit(Event::JobEnded {
                    job_id: id.to_string(),
                    end,
                })];
                actions.extend(self.wake_if_idle());
                Ok(actions)
            }
            Input::Report { id, text } => {
                if self.jobs.report(id, &text).is_none() {
                    return Ok(Vec::new());
                }
                let mut actions = vec![Action::Emit(Event::JobNote {
                    job_id: id.to_string(),
                    text,
                })];
                actions.extend(self.wake_if_idle());
                Ok(actions)
            }
            Input::Message { text } => {
                let mark = fill(&self.cfg.jobs.marks.message, &[("text", &text)]);
                self.inbox.push(mark);
                Ok(self.wake_if_idle())
            }
            Input::Cancel => Ok(self.cancel(String::new(), Vec::new())),
            Input::Stopped { shown, results } => Ok(self.cancel(shown, results)),
        }
    }

    fn unexpected(&self, event: &str) -> Error {
        Error::Unexpected {
            event: event.into(),
            state: format!("{:?}", self.phase).to_lowercase(),
        }
    }

    fn wake_if_idle(&mut self) -> Vec<Action> {
        if self.busy() || (!self.jobs.has_wakes() && self.inbox.is_empty()) {
            return Vec::new();
        }
        let mut parts = self.jobs.take_wakes();
        parts.append(&mut self.inbox);
        self.start_turn(parts.join("\n\n"), Origin::Machine)
    }

    fn start_turn(&mut self, text: String, origin: Origin) -> Vec<Action> {
        let number = self.turns() + 1;
        self.turn_starts.push(self.history.len());
        self.context.begin_turn(number);
        self.turn = Some(TurnState {
            requests: 0,
            counted_steps: 0,
            tokens: 0,
            empty_in_row: 0,
            note: None,
            text_nudges: 0,
            wrap_up: None,
        });
        self.last_call = None;
        // Images go with what the person wrote, not with a wake-up.
        let images = if origin == Origin::Person {
            std::mem::take(&mut self.images)
        } else {
            Vec::new()
        };
        self.log.push(Entry::TurnStarted {
            turn: number,
            text: text.clone(),
            origin,
            images: images.clone(),
        });
        self.history.push(Message::User {
            text: text.clone(),
            origin,
            images,
        });
        let mut actions = vec![Action::Emit(Event::UserInput { text, origin })];
        actions.extend(self.next_call());
        actions
    }

    fn push_user(&mut self, text: String, origin: Origin) {
        self.log.push(Entry::User {
            text: text.clone(),
            origin,
        });
        self.history.push(Message::user_from(text, origin));
    }

    fn next_call(&mut self) -> Vec<Action> {
        // Wake-ups that came while the prompt ran go in before the next step.
        for wake in self.jobs.take_wakes() {
            self.push_user(wake, Origin::Machine);
        }
        for message in std::mem::take(&mut self.inbox) {
            self.push_user(message, Origin::Machine);
        }
        let Some(turn) = self.turn.as_ref() else {
            return Vec::new();
        };
        if turn.requests >= self.cfg.steps.backstop {
            let text = fill(
                &self.cfg.steps.backstop_text,
                &[("steps", &self.cfg.steps.backstop.to_string())],
            );
            let mut actions = vec![Action::Emit(Event::Notice {
                level: harness_core::protocol::Level::Warning,
                text,
            })];
            actions.extend(self.end(TurnEnd::Budget {
                limit: "backstop".into(),
            }));
            return actions;
        }
        let limit = if turn.wrap_up.is_some() {
            None
        } else if turn.counted_steps >= self.budget.steps {
            Some(("steps", self.cfg.wrap_up.steps_budget_name.clone()))
        } else if turn.tokens >= self.budget.tokens {
            Some(("tokens", self.cfg.wrap_up.tokens_budget_name.clone()))
        } else {
            None
        };
        if let Some((limit, name)) = limit {
            let text = fill(&self.cfg.wrap_up.text, &[("budget", &name)]);
            self.push_user(text, Origin::Machine);
            if let Some(t) = self.turn.as_mut() {
                t.wrap_up = Some(limit.to_string());
            }
        }
        let Some(turn) = self.turn.as_mut() else {
            return Vec::new();
        };
        turn.requests += 1;
        let wrap_up = turn.wrap_up.is_some();
        let step = turn.requests;
        self.phase = Phase::Model;
        vec![
            Action::Emit(Event::StepStarted { step }),
            Action::CallModel(ModelRequest {
                step,
                messages: self.history.clone(),
                tools: !wrap_up,
                wrap_up,
            }),
        ]
    }

    fn end(&mut self, reason: TurnEnd) -> Vec<Action> {
        self.phase = Phase::Idle;
        self.turn = None;
        self.pending = Pending::default();
        self.log.push(Entry::TurnEnded {
            reason: reason.clone(),
        });
        let mut actions = vec![
            Action::Emit(Event::TurnEnded {
                reason: reason.clone(),
            }),
            Action::EndTurn(reason),
        ];
        // A job that ended during the turn, after its last step, gets a turn of its own.
        actions.extend(self.wake_if_idle());
        actions
    }

    fn on_model(&mut self, out: ModelOutput) -> Vec<Action> {
        let estimate = (self.history.iter().map(Message::chars).sum::<usize>() / 4) as u64;
        let used = out
            .usage
            .map(|u| u.input_tokens + u.output_tokens)
            .unwrap_or(estimate + (out.text.len() + out.reasoning.len()) as u64 / 4);
        let empty = out.text.trim().is_empty() && out.tool_calls.is_empty();
        let counts = !empty || self.cfg.nudges.empty_answer.counts_as_step;
        let note = out.note.filter(|n| !n.trim().is_empty());
        let Some(turn) = self.turn.as_mut() else {
            return Vec::new();
        };
        turn.tokens += used;
        if counts {
            turn.counted_steps += 1;
        }
        if let Some(limit) = turn.wrap_up.clone() {
            // The wrap-up answer: text only; calls, if any, are not run.
            self.push_assistant(out.text, out.reasoning, Vec::new());
            return self.end(TurnEnd::Budget { limit });
        }
        if empty {
            turn.empty_in_row += 1;
            let count = turn.empty_in_row;
            let unrunnable = note.is_some();
            if count <= self.cfg.nudges.empty_answer.retries {
                // Calls that could not be run are said as such, not as an empty answer.
                let text = note.unwrap_or_else(|| self.cfg.nudges.empty_answer.text.clone());
                self.push_user(text, Origin::Machine);
                return self.next_call();
            }
            // Answers whose calls could not be run were not empty: the end says what happened.
            let end = if unrunnable {
                &self.cfg.calls.unrunnable_turn_end
            } else {
                &self.cfg.calls.empty_turn_end
            };
            let message = fill(end, &[("count", &count.to_string())]);
            return self.end(TurnEnd::Error { message });
        }
        turn.empty_in_row = 0;
        if out.tool_calls.is_empty()
            && let Some(note) = note
        {
            // Text, and a call that could not be run: the model is told and goes on.
            self.push_assistant(out.text, out.reasoning, Vec::new());
            self.push_user(note, Origin::Machine);
            return self.next_call();
        }
        turn.note = note;
        if out.tool_calls.is_empty() {
            let open = self.open_tasks.len();
            let nudge = open > 0
                && turn.text_nudges < self.cfg.nudges.text_only_mid_task.max_per_prompt
                && self.nudged_plan.as_ref() != Some(&self.open_tasks);
            self.push_assistant(out.text, out.reasoning, Vec::new());
            if nudge {
                if let Some(t) = self.turn.as_mut() {
                    t.text_nudges += 1;
                }
                self.nudged_plan = Some(self.open_tasks.clone());
                // Said to the person too: the next answer is the model's reply to the nudge.
                let mut actions = vec![Action::Emit(Event::Notice {
                    level: harness_core::protocol::Level::Info,
                    text: fill(
                        &self.cfg.nudges.text_only_mid_task.notice,
                        &[("open", &open.to_string())],
                    ),
                })];
                let text = fill(
                    &self.cfg.nudges.text_only_mid_task.text,
                    &[
                        ("open", &open.to_string()),
                        ("tasks", &self.open_tasks.join("; ")),
                    ],
                );
                self.push_user(text, Origin::Machine);
                actions.extend(self.next_call());
                return actions;
            }
            return self.end(TurnEnd::Finished);
        }
        let calls = out.tool_calls.clone();
        self.push_assistant(out.text, out.reasoning, out.tool_calls);
        self.plan_calls(calls)
    }

    fn push_assistant(&mut self, text: String, reasoning: String, tool_calls: Vec<ToolCall>) {
        // Handled words are kept in their capped form: a 20 MB `write` runs whole, but is not
        // sent back to the model at every step (`context.kept`).
        let kept = &self.cfg.context.kept;
        let text = kept.text(text);
        let reasoning = kept.text(reasoning);
        let tool_calls: Vec<ToolCall> = tool_calls
            .into_iter()
            .map(|c| ToolCall {
                arguments: kept.value(&c.arguments),
                ..c
            })
            .collect();
        self.log.push(Entry::Assistant {
            text: text.clone(),
            reasoning: reasoning.clone(),
            tool_calls: tool_calls.clone(),
        });
        self.history.push(Message::Assistant {
            text,
            reasoning,
            tool_calls,
        });
    }

    fn plan_calls(&mut self, calls: Vec<ToolCall>) -> Vec<Action> {
        let mut declined = Vec::new();
        let mut p = Pending {
            slots: vec![None; calls.len()],
            ..Pending::default()
        };
        for (i, call) in calls.iter().enumerate() {
            let key = format!("{}\0{}", call.name, canonical_args(&call.arguments));
            let count = match &self.last_call {
                Some((k, n, _)) if *k == key => n + 1,
                _ => 1,
            };
            let last_ref = match &self.last_call {
                Some((k, _, r)) if *k == key => r.clone(),
                _ => String::new(),
            };
            self.last_call = Some((key, count, last_ref.clone()));
            let rc = &self.cfg.nudges.repeated_call;
            if count >= rc.threshold {
                let text = fill(
                    &rc.text,
                    &[
                        ("count", &count.to_string()),
                        ("tool", &call.name),
                        ("ref", &last_ref),
                    ],
                );
                p.slots[i] = Some(Slot::Done(Insert::error(
                    call.name.clone(),
                    call.arguments.clone(),
                    text,
                )));
                if count >= rc.end_after {
                    p.end_after = Some(TurnEnd::Error {
                        message: fill(
                            &self.cfg.calls.repeated_turn_end,
                            &[("count", &count.to_string())],
                        ),
                    });
                }
                continue;
            }
            if self.catalog.traits(&call.name).is_none() {
                let text = fill(&self.cfg.calls.unknown_tool, &[("tool", &call.name)]);
                p.slots[i] = Some(Slot::Done(Insert::error(
                    call.name.clone(),
                    call.arguments.clone(),
                    text,
                )));
                continue;
            }
            let decision = match self.permissions.decide(call) {
                // Asked last: a call that cannot run is answered with why, the person not asked.
                Decision::Ask(question) => match self.permissions.check(call, &calls[..i]) {
                    Some(text) => {
                        p.slots[i] = Some(Slot::Done(Insert::error(
                            call.name.clone(),
                            call.arguments.clone(),
                            text,
                        )));
                        continue;
                    }
                    None => Decision::Ask(question),
                },
                other => other,
            };
            match decision {
                Decision::Allow => p.allowed.push(i),
                Decision::Deny { reason } => {
                    let text = fill(&self.cfg.calls.denied, &[("reason", &reason)]);
                    p.slots[i] = Some(Slot::Done(Insert::error(
                        call.name.clone(),
                        call.arguments.clone(),
                        text,
                    )));
                }
                // Nobody answers a subagent's questions: the call is declined with the
                // spec's text, and the person is told.
                Decision::Ask(question) if self.subagent => {
                    let subject = [("subject", question.subject.as_str())];
                    let text = fill(self.cfg.job_error("subagent_asks"), &subject);
                    declined.push(Action::Emit(Event::Notice {
                        level: harness_core::protocol::Level::Warning,
                        text: fill(self.cfg.job_text("subagent_declined"), &subject),
                    }));
                    p.slots[i] = Some(Slot::Done(Insert::error(
                        call.name.clone(),
                        call.arguments.clone(),
                        text,
                    )));
                }
                Decision::Ask(question) => {
                    p.slots[i] = Some(Slot::Waiting);
                    p.questions.push_back((i, question));
                }
            }
        }
        p.calls = calls;
        self.pending = p;
        declined.extend(self.ask_next());
        declined
    }

    fn ask_next(&mut self) -> Vec<Action> {
        if let Some((i, question)) = self.pending.questions.pop_front() {
            self.pending.asking = Some(i);
            self.phase = Phase::Asking;
            let call_id = self.pending.calls[i].id.clone();
            return vec![
                Action::Emit(Event::ToolCallAsked {
                    call_id: call_id.clone(),
                    question: question.clone(),
                }),
                Action::Ask { call_id, question },
            ];
        }
        self.pending.asking = None;
        self.dispatch()
    }

    fn on_answer(&mut self, call_id: &str, answer: Answer) -> Vec<Action> {
        let Some(i) = self.pending.asking else {
            return Vec::new();
        };
        let call = self.pending.calls[i].clone();
        if call.id != call_id {
            // An answer to another question: ignored, the question stands.
            return Vec::new();
        }
        let mut actions = vec![Action::Emit(Event::ToolCallAnswered {
            call_id: call_id.to_string(),
            answer: answer.clone(),
        })];
        match answer {
            Answer::Deny { feedback } => {
                let text = match feedback.filter(|f| !f.trim().is_empty()) {
                    Some(f) => fill(&self.cfg.calls.declined_feedback, &[("feedback", &f)]),
                    None => self.cfg.calls.declined.clone(),
                };
                self.pending.slots[i] =
                    Some(Slot::Done(Insert::error(call.name, call.arguments, text)));
            }
            _ => {
                self.pending.slots[i] = None;
                self.pending.allowed.push(i);
                self.pending.allowed.sort_unstable();
            }
        }
        actions.extend(self.ask_next());
        actions
    }

    /// Calls the loop answers itself (recall, the job tools, report, background starts), then
    /// the batches the front end runs.
    fn dispatch(&mut self) -> Vec<Action> {
        let mut actions = Vec::new();
        let allowed = std::mem::take(&mut self.pending.allowed);
        let mut front: Vec<usize> = Vec::new();
        for i in allowed {
            let call = self.pending.calls[i].clone();
            let background = call
                .arguments
                .get("background")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if call.name == "recall" {
                self.pending.slots[i] = Some(Slot::Recall(call.arguments.clone()));
            } else if call.name == "report" {
                let text = call
                    .arguments
                    .get("message")
                    .or_else(|| call.arguments.get("text"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let insert = if self.subagent {
                    actions.push(Action::ReportToParent { text });
                    Insert::new(
                        "report",
                        call.arguments.clone(),
                        self.cfg.job_text("report_delivered"),
                    )
                } else {
                    Insert::error(
                        "report",
                        call.arguments.clone(),
                        self.cfg.job_error("report_from_main"),
                    )
                };
                self.pending.slots[i] = Some(Slot::Done(insert));
            } else if background && (call.name == "bash" || call.name == "task") {
                let kind = if call.name == "bash" {
                    JobKind::Command
                } else {
                    JobKind::Subagent
                };
                let title = job_title(&call);
                let decision = self.jobs.start(kind, &title);
                if let JobDecision::Start { id, .. } = decision {
                    self.log.push(Entry::JobStarted {
                        id,
                        kind,
                        title: title.clone(),
                    });
                    actions.push(Action::Emit(Event::JobStarted {
                        job_id: id.to_string(),
                        kind,
                        title,
                    }));
                    actions.push(Action::StartJob {
                        id,
                        kind,
                        call: call.clone(),
                    });
                }
                self.pending.slots[i] = Some(Slot::Done(decision_insert(&call, &decision)));
            } else if let Some(decision) = self.jobs.tool(&call.name, &call.arguments) {
                match &decision {
                    JobDecision::Stop { id, .. } => actions.push(Action::StopJob { id: *id }),
                    JobDecision::Deliver { id, message, .. } => {
                        actions.push(Action::DeliverToJob {
                            id: *id,
                            message: message.clone(),
                        })
                    }
                    JobDecision::Restart { id, message, .. } => actions.push(Action::RestartJob {
                        id: *id,
                        message: message.clone(),
                    }),
                    _ => {}
                }
                self.pending.slots[i] = Some(Slot::Done(decision_insert(&call, &decision)));
            } else {
                front.push(i);
            }
        }
        self.pending.batches = self.batches(&front).into();
        actions.extend(self.run_next_batch());
        actions
    }

    fn parallel_safe(&self, call: &ToolCall) -> bool {
        let par = &self.cfg.parallel;
        if !par.enabled {
            return false;
        }
        let Some(t) = self.catalog.traits(&call.name) else {
            return false;
        };
        if t.exclusive && par.exclusive_alone {
            return false;
        }
        par.risks.iter().any(|r| r == t.risk.as_str())
    }

    /// Groups calls in call order: consecutive parallel-safe calls (up to `max_batch`) run side
    /// by side; every other call runs alone.
    fn batches(&self, indices: &[usize]) -> Vec<(Vec<usize>, bool)> {
        let mut out: Vec<(Vec<usize>, bool)> = Vec::new();
        for &i in indices {
            let safe = self.parallel_safe(&self.pending.calls[i]);
            match out.last_mut() {
                Some((group, true)) if safe && group.len() < self.cfg.parallel.max_batch => {
                    group.push(i)
                }
                _ => out.push((vec![i], safe)),
            }
        }
        out.into_iter()
            .map(|(g, safe)| {
                let parallel = safe && g.len() > 1;
                (g, parallel)
            })
            .collect()
    }

    fn run_next_batch(&mut self) -> Vec<Action> {
        if let Some((group, parallel)) = self.pending.batches.pop_front() {
            for &i in &group {
                self.pending.slots[i] = Some(Slot::Waiting);
            }
            self.pending.running = group.clone();
            self.phase = Phase::Tools;
            let calls: Vec<ToolCall> = group
                .iter()
                .map(|&i| self.pending.calls[i].clone())
                .collect();
            self.log.push(Entry::CallsStarted {
                call_ids: calls.iter().map(|c| c.id.clone()).collect(),
            });
            return vec![Action::RunTools { calls, parallel }];
        }
        self.finish_calls()
    }

    fn on_results(&mut self, results: Vec<ToolOutcome>) -> Vec<Action> {
        self.take_results(&results, false);
        self.run_next_batch()
    }

    /// Puts the running calls' results in their slots; a call without one gets `no_result`,
    /// or stays empty when `only_found` (a stop: it is answered `cancelled`).
    fn take_results(&mut self, results: &[ToolOutcome], only_found: bool) {
        let running = std::mem::take(&mut self.pending.running);
        for i in running {
            let call = self.pending.calls[i].clone();
            let outcome = results.iter().find(|r| r.call_id == call.id);
            let insert = match outcome {
                None if only_found => continue,
                None => Insert::error(
                    call.name.clone(),
                    call.arguments.clone(),
                    self.cfg.calls.no_result.clone(),
                ),
                Some(o) => {
                    let output = match &o.edit {
                        Some(e) if !o.is_error => {
                            self.context.edit_diff(&e.path, &e.before, &e.after)
                        }
                        _ => o.output.clone(),
                    };
                    Insert {
                        tool: call.name.clone(),
                        args: self.cfg.context.kept.value(&call.arguments),
                        output,
                        is_error: o.is_error,
                        read: o.read.clone(),
                    }
                }
            };
            self.pending.slots[i] = Some(Slot::Done(insert));
        }
    }

    /// Every call has its result: insert them in call order, then the next step.
    fn finish_calls(&mut self) -> Vec<Action> {
        let mut actions = Vec::new();
        let calls = std::mem::take(&mut self.pending.calls);
        let slots = std::mem::take(&mut self.pending.slots);
        let missing = self.cfg.calls.no_result.clone();
        for (call, slot) in calls.iter().zip(slots) {
            let (inserted, read) = self.insert_slot(call, slot, &missing);
            actions.extend(self.record_result(call, inserted, read));
        }
        if let Some(reason) = self.pending.end_after.take() {
            actions.extend(self.end(reason));
            return actions;
        }
        if let Some(note) = self.turn.as_mut().and_then(|t| t.note.take()) {
            self.push_user(note, Origin::Machine);
        }
        actions.extend(self.next_call());
        actions
    }

    /// Inserts one call's result; a call with none gets `missing` as an error.
    fn insert_slot(
        &mut self,
        call: &ToolCall,
        slot: Option<Slot>,
        missing: &str,
    ) -> (crate::context::Inserted, Option<ReadInfo>) {
        match slot {
            Some(Slot::Recall(args)) => (self.context.recall(args), None),
            Some(Slot::Done(insert)) => {
                let read = insert.read.clone();
                (self.context.insert(insert), read)
            }
            Some(Slot::Waiting) | None => (
                self.context.insert(Insert::error(
                    call.name.clone(),
                    call.arguments.clone(),
                    missing,
                )),
                None,
            ),
        }
    }

    fn record_result(
        &mut self,
        call: &ToolCall,
        inserted: crate::context::Inserted,
        read: Option<ReadInfo>,
    ) -> Vec<Action> {
        // The repeated-call nudge names the last result a run of the same call produced (an
        // error too), never a nudge of its own.
        let this = format!("{}\0{}", call.name, canonical_args(&call.arguments));
        let threshold = self.cfg.nudges.repeated_call.threshold;
        if let Some((key, count, r)) = self.last_call.as_mut()
            && *key == this
            && *count < threshold
        {
            *r = inserted.id.to_string();
        }
        let stored = self.context.stored(inserted.id.as_str());
        self.log.push(Entry::ToolResult {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            result_id: inserted.id.clone(),
            output: stored.map(|s| s.output.clone()).unwrap_or_default(),
            text: inserted.text.clone(),
            kind: inserted.kind.clone(),
            args: self.cfg.context.kept.value(&call.arguments),
            read,
        });
        self.history.push(Message::Tool {
            call_id: call.id.clone(),
            text: inserted.text.clone(),
        });
        let label = inserted
            .text
            .strip_suffix(inserted.body.as_str())
            .map(|l| l.trim_end_matches('\n').to_owned())
            .unwrap_or_default();
        vec![Action::Emit(Event::ToolCallFinished {
            result: ToolResult {
                call_id: call.id.clone(),
                result_id: inserted.id,
                content: inserted.text,
                label,
                is_error: inserted.kind == InsertKind::Error,
            },
        })]
    }

    fn cancel(&mut self, shown: String, results: Vec<ToolOutcome>) -> Vec<Action> {
        if self.phase == Phase::Idle {
            return Vec::new();
        }
        let mut actions = Vec::new();
        if self.phase == Phase::Model && !shown.trim().is_empty() {
            // What the person saw of the answer stays what the model said.
            self.push_assistant(shown, String::new(), Vec::new());
        }
        self.take_results(&results, true);
        if !self.pending.calls.is_empty() {
            let calls = std::mem::take(&mut self.pending.calls);
            let slots = std::mem::take(&mut self.pending.slots);
            let missing = self.cfg.calls.cancelled.clone();
            for (call, slot) in calls.iter().zip(slots) {
                let (inserted, read) = self.insert_slot(call, slot, &missing);
                actions.extend(self.record_result(call, inserted, read));
            }
        }
        // The model is told the turn was stopped, so it neither carries on with it nor takes
        // its request up again as a new one (the person's next prompt says what they want).
        self.push_user(self.cfg.calls.stopped_turn.clone(), Origin::Machine);
        actions.extend(self.end(TurnEnd::Cancelled));
        actions
    }

    /// Rewinds the session to the start of turn `turn` (from 1): that turn and every later one
    /// leave the history; their results stop being stub targets (and stay recallable). Refused
    /// while a prompt runs, or past a compaction.
    pub fn rewind(&mut self, turn: u32) -> Result<()> {
        let turns = self.turns();
        if self.busy() {
            return Err(self.unexpected("a rewind"));
        }
        if turn == 0 || turn > turns {
            return Err(Error::Rewind { turn, turns });
        }
        if turn <= self.compacted_through {
            return Err(Error::RewindCompacted {
                turn,
                through: self.compacted_through,
            });
        }
        let at = self.turn_starts[(turn - 1) as usize];
        self.history.truncate(at);
        self.turn_starts.truncate((turn - 1) as usize);
        self.context.rewind(turn);
        self.log.push(Entry::Rewound { turn });
        Ok(())
    }

    /// The request of the step waiting for the model, built from the history as it is now —
    /// after a compaction (for an answer that said the context overflowed, or a prompt the
    /// driver found too big) the driver sends this one instead. `None` unless the session waits
    /// for the model.
    pub fn request_again(&self) -> Option<ModelRequest> {
        if self.phase != Phase::Model {
            return None;
        }
        let turn = self.turn.as_ref()?;
        Some(ModelRequest {
            step: turn.requests,
            messages: self.history.clone(),
            tools: turn.wrap_up.is_none(),
            wrap_up: turn.wrap_up.is_some(),
        })
    }

    /// The session is resumed in a new process: every job its transcript still shows running
    /// is ended as failed (`jobs.texts.lost`), recorded, and its wake-up waits for the model's
    /// next step. The events to show, in id order.
    pub fn end_lost_jobs(&mut self) -> Vec<Event> {
        let ended = self.jobs.end_lost();
        self.log_job_ends(ended)
    }

    /// Every job still running is recorded as stopped (the runner stopped their processes),
    /// each leaving its wake-up for the next turn. The events to emit.
    pub fn end_running_jobs(&mut self) -> Vec<Event> {
        let ended = self.jobs.end_running(&JobEnd::Stopped);
        self.log_job_ends(ended)
    }

    fn log_job_ends(&mut self, ended: Vec<(u32, JobEnd)>) -> Vec<Event> {
        ended
            .into_iter()
            .map(|(id, end)| {
                self.log.push(Entry::JobEnded {
                    id,
                    end: end.clone(),
                });
                Event::JobEnded {
                    job_id: id.to_string(),
                    end,
                }
            })
            .collect()
    }

    /// The compaction's request (`context.md` §8): the history as it is, then the user message
    /// `context.compaction.request`. Its `tools` is false: none may be called (the driver may
    /// still list them, with `tool_choice: none`, so the prompt's cache holds). `None` when there
    /// is nothing to compact yet, or while calls are being asked about or run.
    pub fn summary_request(&self) -> Option<ModelRequest> {
        if self.history.is_empty() || !matches!(self.phase, Phase::Idle | Phase::Model) {
            return None;
        }
        let mut messages = self.history.clone();
        messages.push(Message::user_from(
            self.cfg.context.compaction.request.clone(),
            Origin::Machine,
        ));
        Some(ModelRequest {
            step: self.turn.as_ref().map_or(0, |t| t.requests),
            messages,
            tools: false,
            wrap_up: false,
        })
    }

    /// Compaction with the model's answer to [`Session::summary_request`]: the answer, trimmed,
    /// in `context.compaction.summary`, followed by the table of reads, becomes the history
    /// (see [`Session::compact`]). An empty answer compacts nothing.
    pub fn compact_with_answer(&mut self, answer: &str) -> Result<String> {
        let answer = answer.trim();
        if answer.is_empty() {
            return Err(Error::NoSummary);
        }
        let text = fill(&self.cfg.context.compaction.summary, &[("summary", answer)]);
        self.compact(&text)
    }

    /// Compaction: the history becomes `summary` followed by the table of reads; the dedupe
    /// tables empty. Returns the text the model now sees. Allowed while idle, and while a step
    /// waits for the model (then send [`Session::request_again`]); refused while calls are being
    /// asked about or run, whose results must follow their calls.
    pub fn compact(&mut self, summary: &str) -> Result<String> {
        if !matches!(self.phase, Phase::Idle | Phase::Model) {
            return Err(self.unexpected("a compaction"));
        }
        let table = self.context.compact();
        let text = if table.is_empty() {
            summary.to_string()
        } else {
            format!("{summary}\n\n{table}")
        };
        self.history = vec![Message::user_from(text.clone(), Origin::Machine)];
        self.compacted_through = self.turns();
        self.turn_starts.fill(0);
        self.log.push(Entry::Compacted { text: text.clone() });
        Ok(text)
    }
}

fn job_title(call: &ToolCall) -> String {
    let a = &call.arguments;
    let raw = a
        .get("description")
        .or_else(|| a.get("command"))
        .or_else(|| a.get("prompt"))
        .and_then(Value::as_str)
        .unwrap_or(&call.name);
    let line = raw.lines().next().unwrap_or_default();
    if line.chars().count() > 80 {
        let cut: String = line.chars().take(79).collect();
        format!("{cut}…")
    } else {
        line.to_string()
    }
}

fn decision_insert(call: &ToolCall, d: &JobDecision) -> Insert {
    if d.is_error() {
        Insert::error(call.name.clone(), call.arguments.clone(), d.text())
    } else {
        Insert::new(call.name.clone(), call.arguments.clone(), d.text())
    }
}
