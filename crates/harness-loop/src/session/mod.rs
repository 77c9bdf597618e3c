//! A session's state machine: the run of each prompt.
//!
//! [`Session::handle`] takes one [`Input`] and answers with the [`Action`]s to take, in order.
//! The driver (a front end) performs them — calls the model, runs tools, asks the person,
//! starts and stops jobs — and feeds what came back as the next input. Nothing here blocks,
//! sleeps, or touches a process, the network or a disk.

use std::collections::VecDeque;
mod calls;
mod seams;

use harness_core::protocol::{Event, JobEnd, Origin, PermissionQuestion, ToolCall, TurnEnd};
use harness_spec::Project;
use serde_json::Value;

use crate::config::{Budget, LoopConfig, fill};
use crate::context::{Context, Insert};
use crate::error::{Error, Result};
use crate::jobs::Jobs;
use crate::transcript::Entry;

pub use crate::message::Message;
pub use seams::{
    Action, AllowAll, Decision, EditInfo, Input, ModelOutput, ModelRequest, Permissions,
    ToolCatalog, ToolOutcome, ToolTraits,
};

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
