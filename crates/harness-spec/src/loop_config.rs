//! `spec/loop.json` as typed, checked settings: how one prompt runs.

use std::collections::BTreeMap;

use crate::{Project, Spec};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The whole of `loop.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopConfig {
    /// The step backstop.
    pub steps: Steps,
    /// Budgets per project.
    pub budgets: Budgets,
    /// The wrap-up step.
    pub wrap_up: WrapUp,
    /// Nudges.
    pub nudges: Nudges,
    /// Answers of calls that are not run, and the nudges' turn-end messages.
    pub calls: CallTexts,
    /// Parallel tool calls.
    pub parallel: Parallel,
    /// Requests a model server takes at once.
    pub capacity: CapacityConfig,
    /// Background jobs.
    pub jobs: JobsConfig,
    /// Context hygiene.
    pub context: ContextConfig,
}

/// `steps`: the backstop that holds whatever the budgets say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Steps {
    /// Most model requests in one prompt.
    pub backstop: u32,
    /// The closing notice at the backstop (`{steps}`).
    pub backstop_text: String,
}

/// `budgets`: one per project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budgets {
    /// The terminal agent's.
    pub cli: Budget,
    /// The web UI's.
    pub llembas: Budget,
}

impl Budgets {
    /// The budget of `project`.
    pub fn of(&self, project: Project) -> Budget {
        match project {
            Project::Cli => self.cli,
            Project::Llembas => self.llembas,
        }
    }
}

/// What one prompt may use before the wrap-up step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// Model requests.
    pub steps: u32,
    /// Tokens (prompt + completion).
    pub tokens: u64,
}

/// `wrap_up`: the last step when a budget ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WrapUp {
    /// Always `withdrawn`.
    pub tools: String,
    /// Always `none`.
    pub tool_choice: String,
    /// The role of the summary request.
    pub role: String,
    /// The summary request (`{budget}`).
    pub text: String,
    /// `{budget}` for the step budget.
    pub steps_budget_name: String,
    /// `{budget}` for the token budget.
    pub tokens_budget_name: String,
}

/// `nudges`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Nudges {
    /// An answer with no text and no call.
    pub empty_answer: EmptyAnswer,
    /// The same call again and again.
    pub repeated_call: RepeatedCall,
    /// A text answer while the plan has open tasks.
    pub text_only_mid_task: TextOnlyMidTask,
}

/// `nudges.empty_answer`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmptyAnswer {
    /// Nudged retries before the turn ends.
    pub retries: u32,
    /// Whether a nudged retry counts against the step budget.
    pub counts_as_step: bool,
    /// The nudge.
    pub text: String,
}

/// `nudges.repeated_call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatedCall {
    /// The n-th identical call in a row is not run.
    pub threshold: u32,
    /// The n-th identical call in a row ends the turn.
    pub end_after: u32,
    /// The result given instead (`{count}`, `{tool}`, `{ref}`).
    pub text: String,
}

/// `nudges.text_only_mid_task`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextOnlyMidTask {
    /// Nudges per prompt (and once per plan state: the same open tasks are not nudged again).
    pub max_per_prompt: u32,
    /// The nudge (`{open}`, `{tasks}`).
    pub text: String,
    /// What the person is told when the nudge is sent (`{open}`).
    pub notice: String,
}

/// `calls`: answers a call gets when it is not run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallTexts {
    /// A tool that does not exist (`{tool}`).
    pub unknown_tool: String,
    /// Refused by the permission rules (`{reason}`).
    pub denied: String,
    /// Declined by the person.
    pub declined: String,
    /// Declined by the person, who said something (`{feedback}`).
    pub declined_feedback: String,
    /// The prompt was cancelled before the call ran.
    pub cancelled: String,
    /// On resume: the call had started when the session's process ended.
    pub interrupted: String,
    /// Said to the model after a turn the person stopped.
    pub stopped_turn: String,
    /// The front end gave no result for a call it was asked to run.
    pub no_result: String,
    /// The turn ends after empty answers (`{count}`).
    pub empty_turn_end: String,
    /// The turn ends after answers whose calls could not be run (`{count}`).
    pub unrunnable_turn_end: String,
    /// The turn ends after repeated calls (`{count}`).
    pub repeated_turn_end: String,
    /// A command the person ran themselves (`!cmd` in the terminal), sent before their next
    /// prompt (`{command}`, `{code}`, `{output}`).
    pub person_shell: String,
    /// A file the person named with `@path` in a prompt, attached after it (`{path}`,
    /// `{content}`).
    pub person_mention: String,
    /// The person undid the last turn's file changes (`/undo`), said before their next prompt
    /// (`{files}`).
    pub person_undo: String,
}

/// `parallel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Parallel {
    /// Whether calls may run side by side at all.
    pub enabled: bool,
    /// Risk classes that may run side by side.
    pub risks: Vec<String>,
    /// Whether an `exclusive` tool always runs alone.
    pub exclusive_alone: bool,
    /// Most calls in one batch.
    pub max_batch: usize,
    /// Always `call_order`.
    pub results: String,
}

/// `capacity`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityConfig {
    /// Requests a server takes at once unless its endpoint says otherwise.
    pub default_concurrent_requests: u32,
    /// Whether running subagents hold a slot of their server.
    pub subagents_count: bool,
}

/// `jobs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobsConfig {
    /// Always `session`.
    pub id_sequence: String,
    /// `command`, `subagent`.
    pub kinds: Vec<String>,
    /// `running`, `done`, `failed`, `stopped`.
    pub states: Vec<String>,
    /// The marked messages.
    pub marks: JobMarks,
    /// Answers of the job tools.
    pub texts: BTreeMap<String, String>,
    /// Error answers of the job tools.
    pub errors: BTreeMap<String, String>,
    /// Limits.
    pub limits: JobLimits,
}

/// `jobs.marks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobMarks {
    /// A finished job's wake-up message.
    pub finished: String,
    /// A subagent's report.
    pub report: String,
    /// A message from the owning session, as a running subagent receives it (`{text}`).
    pub message: String,
    /// The mark of a turn a job started.
    pub machine: String,
}

/// `jobs.limits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobLimits {
    /// Jobs running at once in one session.
    pub max_running: usize,
    /// Output characters kept per job.
    pub output_kept_chars: usize,
    /// A running command's first output characters held in memory (beside the last
    /// `output_kept_chars`); the rest goes to a spill file.
    pub output_head_chars: usize,
    /// Bytes a command's spill file holds at most.
    pub spill_max_bytes: u64,
    /// Output characters waiting to be shown to the person at most.
    pub stream_chars: usize,
    /// Seconds a one-shot run waits for its background jobs after its turn ended.
    pub oneshot_wait_seconds: u64,
    /// Last lines of a command's output in its wake-up message.
    pub wake_tail_lines: usize,
}

/// `context`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextConfig {
    /// Result ids.
    pub result_id: ResultIdConfig,
    /// Stub texts.
    pub stubs: StubTexts,
    /// The output cap.
    pub cap: Cap,
    /// Command output whose middle repeats, folded.
    pub repeats: Repeats,
    /// `recall`.
    pub recall: RecallConfig,
    /// Edit diffs.
    pub diff: DiffConfig,
    /// The compaction table of reads.
    pub compaction: CompactionConfig,
    /// Which tools' results are deduplicated, and how.
    pub dedupe_tools: DedupeTools,
    /// What is kept of the model's own long words.
    pub kept: Kept,
}

/// `context.kept`: the model's long texts and arguments as the conversation keeps them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kept {
    /// Characters a text may have before it is cut.
    pub max_chars: usize,
    /// Its first characters kept.
    pub head_chars: usize,
    /// Its last characters kept.
    pub tail_chars: usize,
    /// The line between (`{n}`).
    pub elision: String,
}

impl Kept {
    /// `text` as it is kept: whole up to `max_chars`, else its head, the elision, its tail.
    pub fn text(&self, text: String) -> String {
        let n = text.chars().count();
        if n <= self.max_chars {
            return text;
        }
        let head: String = text.chars().take(self.head_chars).collect();
        let tail: String = text
            .chars()
            .skip(n.saturating_sub(self.tail_chars))
            .collect();
        let left = n - head.chars().count() - tail.chars().count();
        let elision = self.elision.replace("{n}", &left.to_string());
        format!("{head}\n{elision}\n{tail}")
    }

    /// `value` with each string in it kept as [`Kept::text`] keeps it.
    pub fn value(&self, value: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match value {
            Value::String(s) if s.chars().count() > self.max_chars => {
                Value::String(self.text(s.clone()))
            }
            Value::Array(items) => Value::Array(items.iter().map(|v| self.value(v)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.value(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// `context.result_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultIdConfig {
    /// `#`.
    pub prefix: String,
    /// 4.
    pub hex_digits: usize,
    /// The line heading each inserted result (`{ref}`).
    pub label: String,
}

/// `context.stubs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StubTexts {
    /// Same path and lines, same hash.
    pub unchanged_read: String,
    /// Lines inside an earlier read, same hash.
    pub range_inside: String,
    /// Same listing or search, same answer.
    pub same_result: String,
}

/// `context.cap`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cap {
    /// Lines before the cap applies.
    pub max_lines: usize,
    /// Characters before the cap applies.
    pub max_chars: usize,
    /// Head lines kept.
    pub head_lines: usize,
    /// Tail lines kept.
    pub tail_lines: usize,
    /// Head characters kept.
    pub head_chars: usize,
    /// Tail characters kept.
    pub tail_chars: usize,
    /// The elision line (`{n}`, `{ref}`).
    pub elision: String,
}

/// `context.repeats`: a command's output whose middle repeats the shapes of its head (a test
/// run's failures, a build's warnings) keeps its head and tail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Repeats {
    /// The tools whose results are folded.
    pub tools: Vec<String>,
    /// Characters a result has before its repeats are folded.
    pub min_chars: usize,
    /// Head lines kept.
    pub head_lines: usize,
    /// Tail lines kept.
    pub tail_lines: usize,
    /// The share (percent) of the middle's lines whose shape was seen before, at least.
    pub min_repeated_percent: usize,
    /// The elision line (`{n}`, `{ref}`).
    pub elision: String,
}

/// `context.recall`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecallConfig {
    /// Lines per recall.
    pub window_lines: usize,
    /// Heading (`{ref}`, `{tool}`, `{first}`, `{last}`, `{total}`).
    pub header: String,
    /// Pointer to the next window (`{ref}`, `{next}`).
    pub more: String,
    /// An unknown id (`{ref}`).
    pub unknown: String,
}

/// `context.diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffConfig {
    /// Context lines around each change.
    pub context_lines: usize,
}

/// `context.compaction`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactionConfig {
    /// The user message asking the model (no tools offered) for the summary.
    pub request: String,
    /// How the summary heads the compacted history (`{summary}`).
    pub summary: String,
    /// A request past this share (percent) of the model's context window is compacted first.
    pub near_full_percent: u8,
    /// The line before the table.
    pub table_heading: String,
    /// The table's header row.
    pub table_header: String,
    /// One row (`{path}`, `{first}`, `{last}`, `{hash}`, `{ref}`).
    pub table_row: String,
    /// Hash characters shown.
    pub hash_chars: usize,
}

/// `context.dedupe_tools`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DedupeTools {
    /// Tools whose results are reads (path, lines, hash).
    pub read: Vec<String>,
    /// Tools whose identical answers to identical arguments are stubs.
    pub same_result: Vec<String>,
}

impl LoopConfig {
    /// `loop.json` of the embedded spec.
    pub fn embedded() -> Result<LoopConfig> {
        Ok(Spec::embedded().loop_config().clone())
    }

    /// `loop.json` of `spec`, checked for the rules a schema cannot state.
    pub fn from_spec(spec: &Spec) -> Result<LoopConfig> {
        Ok(spec.loop_config().clone())
    }

    /// Reads a parsed `loop.json`, checked.
    pub fn from_value(value: &serde_json::Value) -> Result<LoopConfig> {
        let config = LoopConfig::deserialize(value).map_err(|source| Error::Shape {
            file: "loop.json".into(),
            source,
        })?;
        config.check()?;
        Ok(config)
    }

    /// Reads a `loop.json` text (for tests and tools that hold one outside a spec).
    pub fn from_json(text: &str) -> Result<LoopConfig> {
        let config: LoopConfig = serde_json::from_str(text).map_err(|source| Error::Shape {
            file: "loop.json".into(),
            source,
        })?;
        config.check()?;
        Ok(config)
    }

    /// The rules of `loop.json` a schema cannot state; the same check the build runs
    /// ([`crate::validate::check_loop`]).
    fn check(&self) -> Result<()> {
        let value = serde_json::to_value(self).map_err(|source| Error::Shape {
            file: "loop.json".into(),
            source,
        })?;
        let mut problems = Vec::new();
        crate::validate::check_loop(&value, &mut problems);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Invalid(problems))
        }
    }

    /// A text of `jobs.texts` by key (empty if the spec lacks it, which the schema forbids).
    pub fn job_text(&self, key: &str) -> &str {
        self.jobs.texts.get(key).map(String::as_str).unwrap_or("")
    }

    /// A text of `jobs.errors` by key.
    pub fn job_error(&self, key: &str) -> &str {
        self.jobs.errors.get(key).map(String::as_str).unwrap_or("")
    }
}
