//! Jobs: background work owned by a session (`loop.json` `jobs`).
//!
//! A job is a command run in the background (bash `background: true`, or a command still
//! running at its timeout, which is no longer killed) or a subagent run in the background. One
//! id sequence per session (1, 2, 3, ...). [`Jobs`] decides; the front ends run the processes
//! and tell it what happened ([`Jobs::output`], [`Jobs::end`]). A job that ends leaves a marked
//! wake-up message ([`Jobs::take_wakes`]) that the session puts before its next step, or turns
//! into a turn of its own marked `machine`.

use std::collections::BTreeMap;

use harness_core::protocol::{JobEnd, JobKind};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::{LoopConfig, fill};

/// The state of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Still running.
    Running,
    /// Ended by itself, successfully (exit code 0, or a subagent's final reply).
    Done,
    /// Ended by itself, unsuccessfully (a non-zero exit code, a subagent's error).
    Failed,
    /// Ended by `job_stop` (or the session's end).
    Stopped,
}

impl JobState {
    /// The state's name as `loop.json` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Failed => "failed",
            JobState::Stopped => "stopped",
        }
    }
}

/// The kind's name as `loop.json` spells it.
pub fn kind_name(kind: JobKind) -> &'static str {
    match kind {
        JobKind::Command => "command",
        JobKind::Subagent => "subagent",
    }
}

fn end_state(end: &JobEnd) -> JobState {
    match end {
        JobEnd::Done { exit_code } if exit_code.is_none_or(|c| c == 0) => JobState::Done,
        JobEnd::Done { .. } | JobEnd::Failed { .. } => JobState::Failed,
        JobEnd::Stopped => JobState::Stopped,
        _ => JobState::Failed,
    }
}

/// One job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Its id in the session's sequence.
    pub id: u32,
    /// Command or subagent.
    pub kind: JobKind,
    /// A one-line title (the command, the subagent's task).
    pub title: String,
    /// Its state.
    pub state: JobState,
    /// The output kept (the newest `output_kept_chars` characters).
    pub output: String,
    /// Characters dropped from the front of `output`.
    pub dropped_chars: usize,
    /// Messages for a running subagent, read at its next step.
    pub inbox: Vec<String>,
}

/// What a job tool call comes to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum JobDecision {
    /// Answer the call with this text; nothing else to do.
    Answer {
        /// The result.
        text: String,
        /// Whether it is an error.
        is_error: bool,
    },
    /// Stop the running job `id` (the front end ends it and then reports [`JobEnd::Stopped`]).
    Stop {
        /// The job.
        id: u32,
        /// The result.
        text: String,
    },
    /// Deliver `message` to the running subagent `id` at its next step.
    Deliver {
        /// The job.
        id: u32,
        /// The message.
        message: String,
        /// The result.
        text: String,
    },
    /// Start the ended subagent `id` again with its context and `message`.
    Restart {
        /// The job.
        id: u32,
        /// The message.
        message: String,
        /// The result.
        text: String,
    },
    /// Start a new job `id` in the background (the front end starts the work).
    Start {
        /// The job.
        id: u32,
        /// The result.
        text: String,
    },
}

impl JobDecision {
    /// The text the call answers.
    pub fn text(&self) -> &str {
        match self {
            JobDecision::Answer { text, .. }
            | JobDecision::Stop { text, .. }
            | JobDecision::Deliver { text, .. }
            | JobDecision::Restart { text, .. }
            | JobDecision::Start { text, .. } => text,
        }
    }

    /// Whether the answer is an error.
    pub fn is_error(&self) -> bool {
        matches!(self, JobDecision::Answer { is_error: true, .. })
    }
}

/// What happens to a foreground command still running at its timeout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Overrun {
    /// It goes on as job `id`; the call answers `text`.
    Continue {
        /// The job.
        id: u32,
        /// The result.
        text: String,
    },
    /// Too many jobs run already: kill it; the call answers `text`.
    Kill {
        /// The result.
        text: String,
    },
}

/// A session's jobs.
#[derive(Debug, Clone)]
pub struct Jobs {
    cfg: LoopConfig,
    next: u32,
    jobs: BTreeMap<u32, Job>,
    wakes: Vec<String>,
}

impl Jobs {
    /// No jobs yet.
    pub fn new(cfg: LoopConfig) -> Jobs {
        Jobs {
            cfg,
            next: 0,
            jobs: BTreeMap::new(),
            wakes: Vec::new(),
        }
    }

    /// The job `id`.
    pub fn get(&self, id: u32) -> Option<&Job> {
        self.jobs.get(&id)
    }

    /// Every job, by id.
    pub fn all(&self) -> impl Iterator<Item = &Job> {
        self.jobs.values()
    }

    /// Jobs running now.
    pub fn running(&self) -> usize {
        self.jobs
            .values()
            .filter(|j| j.state == JobState::Running)
            .count()
    }

    /// Running subagents (they hold capacity of their model server).
    pub fn running_subagents(&self) -> usize {
        self.jobs
            .values()
            .filter(|j| j.state == JobState::Running && j.kind == JobKind::Subagent)
            .count()
    }

    fn max(&self) -> usize {
        self.cfg.jobs.limits.max_running
    }

    fn too_many(&self) -> String {
        fill(
            self.cfg.job_error("too_many"),
            &[("max", &self.max().to_string())],
        )
    }

    fn add(&mut self, kind: JobKind, title: &str) -> u32 {
        self.next += 1;
        let id = self.next;
        self.jobs.insert(
            id,
            Job {
                id,
                kind,
                title: title.to_string(),
                state: JobState::Running,
                output: String::new(),
                dropped_chars: 0,
                inbox: Vec::new(),
            },
        );
        id
    }

    /// Puts back a job a transcript recorded (resuming a session): the id sequence goes on
    /// after it. It is running until [`Jobs::restore_end`] says otherwise.
    pub fn restore(&mut self, id: u32, kind: JobKind, title: &str) {
        self.next = self.next.max(id);
        self.jobs.insert(
            id,
            Job {
                id,
                kind,
                title: title.to_string(),
                state: JobState::Running,
                output: String::new(),
                dropped_chars: 0,
                inbox: Vec::new(),
            },
        );
    }

    /// Puts back how a recorded job ended, without waking anyone (the wake-up was delivered
    /// before).
    pub fn restore_end(&mut self, id: u32, end: &JobEnd) {
        if let Some(job) = self.jobs.get_mut(&id) {
            job.state = end_state(end);
        }
    }

    /// Starts a background job (bash or task with `background: true`), or refuses when the
    /// session has `max_running` jobs running.
    pub fn start(&mut self, kind: JobKind, title: &str) -> JobDecision {
        if self.running() >= self.max() {
            return JobDecision::Answer {
                text: self.too_many(),
                is_error: true,
            };
        }
        let id = self.add(kind, title);
        let text = fill(
            self.cfg.job_text("started"),
            &[
                ("id", &id.to_string()),
                ("kind", kind_name(kind)),
                ("title", title),
            ],
        );
        JobDecision::Start { id, text }
    }

    /// A foreground command is still running at its timeout of `seconds`: it goes on as a job,
    /// unless `max_running` jobs run already, when it is killed.
    pub fn overrun(&mut self, title: &str, seconds: u64, output_so_far: &str) -> Overrun {
        if self.running() >= self.max() {
            return Overrun::Kill {
                text: fill(
                    self.cfg.job_text("overrun_killed"),
                    &[
                        ("seconds", &seconds.to_string()),
                        ("max", &self.max().to_string()),
                    ],
                ),
            };
        }
        let id = self.add(JobKind::Command, title);
        self.output(id, output_so_far);
        Overrun::Continue {
            id,
            text: fill(
                self.cfg.job_text("overrun"),
                &[("seconds", &seconds.to_string()), ("id", &id.to_string())],
            ),
        }
    }

    /// Output of a running job; the oldest characters go past `output_kept_chars`.
    pub fn output(&mut self, id: u32, text: &str) {
        let keep = self.cfg.jobs.limits.output_kept_chars;
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        job.output.push_str(text);
        let chars = job.output.chars().count();
        if chars > keep {
            let drop = chars - keep;
            let cut = job
                .output
                .char_indices()
                .nth(drop)
                .map(|(i, _)| i)
                .unwrap_or(job.output.len());
            job.output.drain(..cut);
            job.dropped_chars += drop;
        }
    }

    /// The session is resumed in a new process: every job still running is ended as failed
    /// with `jobs.texts.lost` (the process that ran and watched it is gone, so nothing would
    /// ever report its end), each leaving its wake-up. The ends, in id order.
    pub fn end_lost(&mut self) -> Vec<(u32, JobEnd)> {
        let end = JobEnd::Failed {
            message: self.cfg.job_text("lost").to_owned(),
        };
        self.end_running(&end)
    }

    /// Every job still running is ended as `end` (the front end stopped them all), each leaving
    /// its wake-up. The ends, in id order.
    pub fn end_running(&mut self, end: &JobEnd) -> Vec<(u32, JobEnd)> {
        self.running_ids()
            .into_iter()
            .filter_map(|id| self.end(id, end, None).map(|_| (id, end.clone())))
            .collect()
    }

    /// The ids of the jobs still running, in order.
    pub fn running_ids(&self) -> Vec<u32> {
        let mut running: Vec<u32> = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Running)
            .map(|j| j.id)
            .collect();
        running.sort_unstable();
        running
    }

    /// A job ended. For a subagent, `output` is its final reply (a command's output came by
    /// [`Jobs::output`]). Leaves the marked wake-up message, and returns it. A job that had
    /// already ended stays as it was (`None`).
    pub fn end(&mut self, id: u32, end: &JobEnd, final_reply: Option<&str>) -> Option<String> {
        let tail_lines = self.cfg.jobs.limits.wake_tail_lines;
        let job = self.jobs.get_mut(&id)?;
        if job.state != JobState::Running {
            return None;
        }
        if let Some(reply) = final_reply {
            job.output.push_str(reply);
        }
        job.state = end_state(end);
        let id_s = id.to_string();
        let body = match (end, job.kind) {
            (JobEnd::Stopped, _) => self.cfg.job_text("stopped_body").to_string(),
            (JobEnd::Failed { message }, JobKind::Subagent) => fill(
                self.cfg.job_text("subagent_failed_body"),
                &[("error", message)],
            ),
            (_, JobKind::Subagent) => final_reply.unwrap_or_default().to_string(),
            (end, JobKind::Command) => {
                let code = match end {
                    JobEnd::Done { exit_code } => exit_code.map(|c| c.to_string()),
                    JobEnd::Failed { message } => Some(message.clone()),
                    _ => None,
                }
                .unwrap_or_else(|| "?".into());
                let lines: Vec<&str> = job.output.lines().collect();
                if lines.is_empty() {
                    fill(
                        self.cfg.job_text("bash_body_empty"),
                        &[("code", &code), ("id", &id_s)],
                    )
                } else {
                    let tail = &lines[lines.len().saturating_sub(tail_lines)..];
                    fill(
                        self.cfg.job_text("bash_body"),
                        &[
                            ("code", &code),
                            ("lines", &tail.len().to_string()),
                            ("tail", &tail.join("\n")),
                            ("id", &id_s),
                        ],
                    )
                }
            }
        };
        let text = fill(
            &self.cfg.jobs.marks.finished,
            &[
                ("id", &id_s),
                ("kind", kind_name(job.kind)),
                ("state", job.state.as_str()),
                ("title", &job.title),
                ("body", &body),
            ],
        );
        self.wakes.push(text.clone());
        Some(text)
    }

    /// A running subagent `id` reported `text` (its `report` tool): the marked message that
    /// wakes this session, and the answer its `report` call gets.
    pub fn report(&mut self, id: u32, text: &str) -> Option<String> {
        let job = self.jobs.get(&id)?;
        if job.kind != JobKind::Subagent || job.state != JobState::Running {
            return None;
        }
        let mark = fill(
            &self.cfg.jobs.marks.report,
            &[("id", &id.to_string()), ("text", text)],
        );
        self.wakes.push(mark.clone());
        Some(self.cfg.job_text("report_delivered").to_string())
    }

    /// Whether wake-up messages are waiting.
    pub fn has_wakes(&self) -> bool {
        !self.wakes.is_empty()
    }

    /// The wake-up messages waiting, oldest first, taken.
    pub fn take_wakes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.wakes)
    }

    /// Takes the messages waiting for the subagent `id`.
    pub fn take_inbox(&mut self, id: u32) -> Vec<String> {
        self.jobs
            .get_mut(&id)
            .map(|j| std::mem::take(&mut j.inbox))
            .unwrap_or_default()
    }

    fn error(&self, key: &str, vars: &[(&str, &str)]) -> JobDecision {
        JobDecision::Answer {
            text: fill(self.cfg.job_error(key), vars),
            is_error: true,
        }
    }

    fn lookup(&self, args: &Value) -> Result<u32, JobDecision> {
        let raw = args.get("id");
        let id = match raw {
            Some(Value::Number(n)) => n.as_u64().map(|n| n as u32),
            Some(Value::String(s)) => s
                .trim()
                .trim_start_matches("job")
                .trim()
                .parse::<u32>()
                .ok(),
            _ => None,
        };
        let shown = match raw {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => String::new(),
        };
        match id.filter(|id| self.jobs.contains_key(id)) {
            Some(id) => Ok(id),
            None => Err(self.error("unknown", &[("id", &shown)])),
        }
    }

    /// Decides a job tool call (`job_list`, `job_output`, `job_stop`, `job_send`).
    /// `report` is decided by the session (only a subagent has it). `None` for another tool.
    pub fn tool(&mut self, name: &str, args: &Value) -> Option<JobDecision> {
        let decision = match name {
            "job_list" => {
                if self.jobs.is_empty() {
                    JobDecision::Answer {
                        text: self.cfg.job_text("list_empty").to_string(),
                        is_error: false,
                    }
                } else {
                    let rows: Vec<String> = self
                        .jobs
                        .values()
                        .map(|j| {
                            fill(
                                self.cfg.job_text("list_row"),
                                &[
                                    ("id", &j.id.to_string()),
                                    ("kind", kind_name(j.kind)),
                                    ("state", j.state.as_str()),
                                    ("title", &j.title),
                                ],
                            )
                        })
                        .collect();
                    JobDecision::Answer {
                        text: rows.join("\n"),
                        is_error: false,
                    }
                }
            }
            "job_output" => match self.lookup(args) {
                Err(e) => e,
                Ok(id) => {
                    let j = &self.jobs[&id];
                    let mut parts = vec![fill(
                        self.cfg.job_text("output_header"),
                        &[
                            ("id", &id.to_string()),
                            ("kind", kind_name(j.kind)),
                            ("state", j.state.as_str()),
                            ("title", &j.title),
                        ],
                    )];
                    if j.dropped_chars > 0 {
                        parts.push(fill(
                            self.cfg.job_text("output_dropped"),
                            &[("chars", &j.dropped_chars.to_string())],
                        ));
                    }
                    if j.output.is_empty() {
                        parts.push(self.cfg.job_text("output_none").to_string());
                    } else {
                        parts.push(j.output.clone());
                    }
                    JobDecision::Answer {
                        text: parts.join("\n"),
                        is_error: false,
                    }
                }
            },
            "job_stop" => match self.lookup(args) {
                Err(e) => e,
                Ok(id) => {
                    let state = self.jobs[&id].state;
                    if state == JobState::Running {
                        JobDecision::Stop {
                            id,
                            text: fill(self.cfg.job_text("stop_sent"), &[("id", &id.to_string())]),
                        }
                    } else {
                        self.error(
                            "not_running",
                            &[("id", &id.to_string()), ("state", state.as_str())],
                        )
                    }
                }
            },
            "job_send" => match self.lookup(args) {
                Err(e) => e,
                Ok(id) => {
                    let message = args
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    let id_s = id.to_string();
                    let (kind, state) = (self.jobs[&id].kind, self.jobs[&id].state);
                    if kind == JobKind::Command {
                        self.error("send_to_bash", &[("id", &id_s)])
                    } else if state == JobState::Running {
                        if let Some(j) = self.jobs.get_mut(&id) {
                            j.inbox.push(message.clone());
                        }
                        JobDecision::Deliver {
                            id,
                            message,
                            text: fill(self.cfg.job_text("send_delivered"), &[("id", &id_s)]),
                        }
                    } else if self.running() >= self.max() {
                        JobDecision::Answer {
                            text: self.too_many(),
                            is_error: true,
                        }
                    } else {
                        if let Some(j) = self.jobs.get_mut(&id) {
                            j.state = JobState::Running;
                        }
                        JobDecision::Restart {
                            id,
                            message,
                            text: fill(self.cfg.job_text("send_restarted"), &[("id", &id_s)]),
                        }
                    }
                }
            },
            _ => return None,
        };
        Some(decision)
    }
}
