//! How events read in a terminal or a pipe: one short line per tool call drawn by its `block`
//! (shell, edit with its diff, read, search, web, task; plan as a card; hidden not at all),
//! results folded to a few lines, questions with the exact command, the reason and the "always"
//! pattern. Colour only on a terminal and never with `NO_COLOR`.

use std::io::IsTerminal;

use harness_core::plan::Plan;
use harness_core::protocol::{
    Answer, Block, Event as CoreEvent, JobEnd, Level, PermissionQuestion, SubagentCallStatus,
};

use harness_agent::Event;
use harness_agent::title::call_title;

pub mod fold;
pub mod markdown;
pub mod view;

/// Whether stderr gets colour.
pub fn color_on_stderr() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stderr().is_terminal()
}

/// The width of a terminal in columns (`None`: not a terminal, or it does not say).
pub fn width_of(fd: &(impl std::os::fd::AsFd + IsTerminal)) -> Option<usize> {
    if !fd.is_terminal() {
        return None;
    }
    rustix::termios::tcgetwinsize(fd)
        .ok()
        .map(|w| usize::from(w.ws_col))
        .filter(|w| *w > 0)
}

/// Whether stdout gets colour.
pub fn color_on_stdout() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal()
}

/// SGR styles.
#[derive(Debug, Clone, Copy)]
pub enum Style {
    /// Dim (reasoning, folded output).
    Dim,
    /// Bold (titles).
    Bold,
    /// Red (errors, removed lines).
    Red,
    /// Green (added lines, success).
    Green,
    /// Yellow (questions, warnings).
    Yellow,
    /// Cyan (tool names).
    Cyan,
}

/// `text` in `style` when `color`.
pub fn paint(text: &str, style: Style, color: bool) -> String {
    if !color {
        return text.to_owned();
    }
    let code = match style {
        Style::Dim => "2",
        Style::Bold => "1",
        Style::Red => "31",
        Style::Green => "32",
        Style::Yellow => "33",
        Style::Cyan => "36",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// How many lines of a running command's output are shown as they come before the rest is
/// folded.
const FOLD_LINES: usize = 6;

/// A result folded: its first and last lines, each cut to `cap` columns.
fn fold(text: &str, color: bool, cap: usize) -> String {
    let mut out = String::new();
    for l in fold::head_and_tail(text, cap) {
        let line = match l {
            Ok(l) => format!("  │ {l}"),
            Err(n) => format!("  │ … {n} more line{}", if n == 1 { "" } else { "s" }),
        };
        out.push_str(&paint(&line, Style::Dim, color));
        out.push('\n');
    }
    out
}

fn diff_lines(diff: &str, color: bool, cap: usize) -> String {
    coloured_lines(
        diff,
        |l| l.starts_with("+++") || l.starts_with("---"),
        color,
        cap,
    )
}

/// A diff's or a patch's lines, indented, coloured: a header line (`is_header`) bold, added
/// green, removed red, hunk heads cyan; each cut to `cap` columns.
fn coloured_lines(text: &str, is_header: impl Fn(&str) -> bool, color: bool, cap: usize) -> String {
    let mut out = String::new();
    for l in text.lines() {
        let l = &*fold::cut_line(l, cap);
        let styled = if is_header(l) {
            paint(l, Style::Bold, color)
        } else if l.starts_with('+') {
            paint(l, Style::Green, color)
        } else if l.starts_with('-') {
            paint(l, Style::Red, color)
        } else if l.starts_with("@@") {
            paint(l, Style::Cyan, color)
        } else {
            l.to_owned()
        };
        out.push_str("  ");
        out.push_str(&styled);
        out.push('\n');
    }
    out
}

/// What a call says it is for (the spec's `purpose` argument), when it says.
fn purpose_of(args: &serde_json::Value) -> Option<String> {
    let name = harness_core::offer::purpose_arg(harness_spec::Spec::embedded())
        .map(|p| p.name)
        .unwrap_or_else(|_| "purpose".into());
    first_line(args.get(&name)?.as_str()?)
}

/// A purpose's first line, when it says something.
fn first_line(p: &str) -> Option<String> {
    let p = p.trim();
    (!p.is_empty()).then(|| p.lines().next().unwrap_or(p).to_owned())
}

/// A plan as a card.
pub fn plan_card(plan: &Plan, color: bool) -> String {
    text_card(&plan.render(), color)
}

/// A plan's Markdown (as `/plan` gives it) as a card: each line behind a bar, the Markdown
/// drawn where colour is on; headings and task boxes read as words where it is off.
pub fn text_card(md: &str, color: bool) -> String {
    let mut out = String::new();
    let text = if color {
        markdown::render(md)
    } else {
        md.lines()
            .map(|l| {
                let l = l.trim_start_matches('#').trim_start();
                let l = ["[done] ", "[doing] ", "[todo] ", "[dropped] "]
                    .iter()
                    .zip(["✓ ", "▸ ", "○ ", "– "])
                    .find_map(|(k, v)| {
                        l.strip_prefix("- ")
                            .and_then(|t| t.strip_prefix(k))
                            .map(|t| format!("{v}{t}"))
                    })
                    .unwrap_or_else(|| l.to_owned());
                format!("{l}\n")
            })
            .collect()
    };
    for l in text.lines() {
        out.push_str(&format!("  {} {l}", paint("▌", Style::Cyan, color)));
        out.push('\n');
    }
    out
}

/// A question as the person reads it.
pub fn question(q: &PermissionQuestion, color: bool) -> String {
    question_with(q, None, color)
}

/// A question with the change it would make drawn under its subject.
fn question_with(q: &PermissionQuestion, diff: Option<&str>, color: bool) -> String {
    let mut out = format!(
        "{} {} wants to run:\n    {}\n",
        paint("?", Style::Yellow, color),
        q.tool,
        paint(&q.subject, Style::Bold, color)
    );
    if let Some(d) = diff {
        out.push_str(d);
    }
    if let Some(r) = &q.reason {
        out.push_str(&format!("  because: {r}\n"));
    }
    match &q.pattern {
        Some(p) => out.push_str(&format!(
            "  [y]es  [a]lways allow `{}`  [n]o (add a note for the model after n:)\n",
            p.replace('\n', "`, `")
        )),
        None => out.push_str("  [y]es  [n]o (add a note for the model after n:)\n"),
    }
    out
}

pub use harness_agent::turn_end_text as turn_end_line;

/// What the person has been shown of each call, so a result is drawn from typed events: a
/// command streamed as it ran shows its last line only; an edit shows the diff of its
/// [`Event::Edit`] (a new file headed `--- /dev/null`), not the model's result text; a plan
/// call's receipt, a read's content, a question's answer and a command that became a job are
/// not repeated (the card, the call line, the answer and the job lines say it); the stored
/// result's id is the model's, not shown.
#[derive(Debug, Default)]
pub struct Streamed {
    /// The window's columns, when known.
    width: Option<usize>,
    /// Calls whose output came as they ran, as it was shown.
    streamed: std::collections::HashMap<String, fold::Running>,
    /// Calls started: their tool, block and command (for a job's title).
    calls: std::collections::HashMap<String, (String, Block, String)>,
    /// Calls whose result is not drawn.
    quiet: std::collections::HashSet<String>,
    /// Calls the person declined.
    declined: std::collections::HashSet<String>,
    /// Calls whose question showed their diff (not drawn again once they ran).
    previewed: std::collections::HashSet<String>,
}

impl Streamed {
    /// For a window `width` columns wide (`None`: not known).
    pub fn new(width: Option<usize>) -> Streamed {
        Streamed {
            width,
            ..Streamed::default()
        }
    }

    fn cap(&self) -> usize {
        fold::line_cap(self.width)
    }

    /// The line a call's running output is at, past the lines shown (to follow it while the
    /// command runs).
    pub fn running_now(&self, call_id: &str) -> Option<&str> {
        self.streamed.get(call_id)?.now()
    }

    /// Notes what an output says; `Some(text)` when it is drawn here instead of by
    /// [`activity`] (`Some(None)`: not at all).
    pub fn fold(&mut self, out: &Event, color: bool) -> Option<Option<String>> {
        match out {
            // A running command's output: its first lines, each cut to the window; the last
            // ones kept for its end, the rest folded (counted).
            Event::ToolOutput { call_id, text } => {
                let cap = self.cap();
                let running = self.streamed.entry(call_id.clone()).or_default();
                let out = running.push(text, FOLD_LINES, cap);
                Some((!out.is_empty()).then(|| paint(&out, Style::Dim, color)))
            }
            Event::Edit {
                call_id,
                path,
                before,
                after,
            } => {
                self.quiet.insert(call_id.clone());
                if self.previewed.remove(call_id) {
                    return Some(None);
                }
                Some(Some(fold_diff(&edit_diff(
                    path,
                    before,
                    after,
                    color,
                    self.cap(),
                ))))
            }
            Event::Core(CoreEvent::ToolCallStarted { call, block, .. }) => {
                let command = call
                    .arguments
                    .get("command")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                self.calls
                    .insert(call.id.clone(), (call.name.clone(), *block, command));
                if matches!(block, Block::Plan | Block::Read | Block::Hidden)
                    || call.name == "question"
                {
                    self.quiet.insert(call.id.clone());
                }
                // The question tool is drawn by its question.
                (call.name == "question").then_some(None)
            }
            // A declined call's result is the model's note; "declined" was said.
            Event::Core(CoreEvent::ToolCallAnswered {
                call_id,
                answer: Answer::Deny { .. },
            }) => {
                self.declined.insert(call_id.clone());
                None
            }
            Event::Core(CoreEvent::JobStarted { title, .. }) => {
                let became = self
                    .calls
                    .iter()
                    .filter(|(_, (_, block, command))| *block == Block::Shell && command == title)
                    .map(|(id, _)| id.clone())
                    .collect::<Vec<_>>();
                self.quiet.extend(became);
                None
            }
            // A change is asked with its diff: approved seen, not blind.
            Event::Core(CoreEvent::ToolCallAsked {
                call_id,
                question: q,
            }) => {
                let change = q.change.as_deref()?;
                let cap = self.cap();
                let diff = fold_diff(&if q.tool == "apply_patch" {
                    patch_lines(change, color, cap)
                } else {
                    diff_lines(change, color, cap)
                });
                self.previewed.insert(call_id.clone());
                Some(Some(question_with(q, Some(&diff), color)))
            }
            Event::Core(CoreEvent::ToolCallFinished { result }) => {
                self.calls.remove(&result.call_id);
                let cap = self.cap();
                let running = self.streamed.remove(&result.call_id).map(|mut r| {
                    let open = r.line_open();
                    let (tail, folded) = r.finish();
                    (open, tail, folded)
                });
                let streamed = running.is_some();
                // The running output's last lines (the error at its end), after a mark where
                // lines were left out.
                let (tail, folded) = match running {
                    Some((open, tail, folded)) => {
                        let mut drawn = String::new();
                        if open {
                            drawn.push('\n');
                        }
                        if folded > 0 {
                            drawn.push_str(&paint("  …", Style::Dim, color));
                            drawn.push('\n');
                        }
                        for l in &tail {
                            drawn.push_str(&paint(l, Style::Dim, color));
                            drawn.push('\n');
                        }
                        (drawn, Some(folded))
                    }
                    None => (String::new(), None),
                };
                let more = match folded {
                    Some(n) if n > 0 => format!(
                        " · {n} more line{} folded (/recall {} shows it whole)",
                        if n == 1 { "" } else { "s" },
                        result.result_id
                    ),
                    _ => String::new(),
                };
                let quiet = self.quiet.remove(&result.call_id);
                let content = result.body();
                if self.declined.remove(&result.call_id) {
                    return Some(None);
                }
                let last = fold::cut_line(content.lines().last().unwrap_or_default(), cap);
                if result.is_error {
                    let text = if streamed {
                        format!("  └ {last}{more}\n")
                    } else {
                        fold(content, false, cap)
                    };
                    return Some(Some(format!("{tail}{}", paint(&text, Style::Red, color))));
                }
                if quiet {
                    return Some(None);
                }
                if streamed {
                    return Some(Some(format!(
                        "{tail}{}\n",
                        paint(&format!("  └ {last}{more}"), Style::Dim, color)
                    )));
                }
                Some(Some(fold(content, color, cap)))
            }
            // A wake-up's text is the model's; the job's end was drawn from its event.
            Event::Core(CoreEvent::UserInput {
                origin: harness_core::protocol::Origin::Machine,
                ..
            }) => Some(None),
            _ => None,
        }
    }
}

/// Lines of a change's diff shown in its question before the rest is folded.
const QUESTION_DIFF_LINES: usize = 20;

/// A patch's lines coloured as a diff.
fn patch_lines(patch: &str, color: bool, cap: usize) -> String {
    coloured_lines(patch, |l| l.starts_with("***"), color, cap)
}

/// A drawn diff cut to [`QUESTION_DIFF_LINES`], the rest said as a count.
fn fold_diff(drawn: &str) -> String {
    let lines: Vec<&str> = drawn.lines().collect();
    if lines.len() <= QUESTION_DIFF_LINES {
        return drawn.to_owned();
    }
    let mut out: String = lines[..QUESTION_DIFF_LINES]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    out.push_str(&format!(
        "  … {} more lines of the diff\n",
        lines.len() - QUESTION_DIFF_LINES
    ));
    out
}

/// An edit's diff as the person reads it: `--- /dev/null` for a new file.
/// Each line cut to `cap` columns.
pub fn edit_diff(path: &str, before: &str, after: &str, color: bool, cap: usize) -> String {
    diff_lines(
        &harness_agent::preview::diff(path, before, after),
        color,
        cap,
    )
}

/// What a non-text output looks like on stderr (`None`: nothing to show).
pub fn activity(out: &Event, color: bool) -> Option<String> {
    match out {
        Event::ToolOutput { text, .. } => Some(paint(text, Style::Dim, color)),
        Event::Edit { .. }
        | Event::Show { .. }
        | Event::ShellAsked { .. }
        | Event::ShellEnded { .. } => None,
        Event::Question {
            question, options, ..
        } => {
            let mut s = format!("{} {question}\n", paint("?", Style::Yellow, color));
            for (i, o) in options.iter().enumerate() {
                s.push_str(&format!("  {}. {o}\n", i + 1));
            }
            Some(s)
        }
        Event::Core(e) => event(e, color),
    }
}

fn event(e: &CoreEvent, color: bool) -> Option<String> {
    Some(match e {
        CoreEvent::ReasoningDelta { text } => paint(text, Style::Dim, color),
        CoreEvent::ToolCallStarted {
            call,
            block,
            purpose,
        } => {
            if matches!(block, Block::Hidden | Block::Plan) {
                return None;
            }
            let purpose = purpose
                .as_deref()
                .and_then(first_line)
                .or_else(|| purpose_of(&call.arguments))
                .map(|p| paint(&format!("  · {p}"), Style::Dim, color))
                .unwrap_or_default();
            format!(
                "{} {}{purpose}\n",
                paint("●", Style::Cyan, color),
                call_title(&call.name, *block, &call.arguments)
            )
        }
        CoreEvent::ToolCallAsked { question: q, .. } => question(q, color),
        CoreEvent::ToolCallAnswered { answer, .. } => match answer {
            Answer::Once => "  allowed once\n".into(),
            Answer::Always => "  allowed always\n".into(),
            _ => "  declined\n".into(),
        },
        CoreEvent::ToolCallFinished { result } => {
            if result.is_error {
                paint(
                    &fold(&result.content, false, fold::line_cap(None)),
                    Style::Red,
                    color,
                )
            } else {
                fold(&result.content, color, fold::line_cap(None))
            }
        }
        CoreEvent::SubagentCall {
            job_id,
            call,
            block,
            status,
            ..
        } => subagent_call(job_id.as_deref(), call, *block, status, color)?,
        CoreEvent::PlanChanged { plan: Some(plan) } => plan_card(plan, color),
        CoreEvent::ModeChanged { mode } => format!("mode: {mode}\n"),
        CoreEvent::JobStarted { job_id, title, .. } => format!("job {job_id} started: {title}\n"),
        CoreEvent::JobNote { job_id, text } => format!("job {job_id}: {text}\n"),
        CoreEvent::JobEnded { job_id, end } => match end {
            JobEnd::Done { exit_code } => format!(
                "job {job_id} ended (exit code {})\n",
                exit_code
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "-".into())
            ),
            JobEnd::Failed { message } => format!("job {job_id} failed: {message}\n"),
            _ => format!("job {job_id} stopped\n"),
        },
        CoreEvent::Compacted {
            before_tokens,
            after_tokens,
        } => {
            format!("context compacted: {before_tokens} → {after_tokens} tokens\n")
        }
        CoreEvent::Notice { level, text } => match level {
            Level::Warning => format!("{} {text}\n", paint("!", Style::Yellow, color)),
            _ => paint(&format!("{text}\n"), Style::Dim, color),
        },
        CoreEvent::UserInput { .. } => return None,
        _ => return None,
    })
}

/// A subagent's call, under the `task` line that runs it (or named by its job): one line when
/// it starts, and one more only when it fails (its first line). Hidden and plan calls are not
/// drawn, as the session's own are not.
fn subagent_call(
    job_id: Option<&str>,
    call: &harness_core::protocol::ToolCall,
    block: Block,
    status: &SubagentCallStatus,
    color: bool,
) -> Option<String> {
    if matches!(block, Block::Hidden | Block::Plan) {
        return None;
    }
    let by = job_id.map(|id| format!("job {id}: ")).unwrap_or_default();
    let title = call_title(&call.name, block, &call.arguments);
    match status {
        SubagentCallStatus::Started => {
            Some(paint(&format!("  ↳ {by}{title}\n"), Style::Dim, color))
        }
        SubagentCallStatus::Done => None,
        SubagentCallStatus::Failed { reason } => Some(paint(
            &format!("  ↳ {by}{title} failed: {reason}\n"),
            Style::Red,
            color,
        )),
    }
}

/// Lines of a replayed answer shown before the rest is folded.
const REPLAY_LINES: usize = 8;

/// A resumed session's conversation as the person saw it, folded: each prompt, each call's
/// line, each answer to its first lines (Markdown where colour is on); results are not drawn
/// again (`/recall` shows one whole).
pub fn replay(entries: &[harness_loop::transcript::Entry], color: bool) -> String {
    use harness_loop::transcript::Entry;
    let spec = harness_spec::Spec::embedded();
    let mut out = String::new();
    let mut turns = 0u32;
    for e in entries {
        match e {
            Entry::TurnStarted {
                text,
                origin: harness_core::protocol::Origin::Person,
                ..
            } => {
                turns += 1;
                let first = text.lines().next().unwrap_or_default();
                let more = if text.lines().nth(1).is_some() {
                    " …"
                } else {
                    ""
                };
                out.push_str(&format!(
                    "{} {first}{more}\n",
                    paint("›", Style::Cyan, color)
                ));
            }
            Entry::Assistant {
                text, tool_calls, ..
            } => {
                let text = text.trim();
                if !text.is_empty() {
                    let drawn = if color {
                        markdown::render(text)
                    } else {
                        format!("{text}\n")
                    };
                    let lines: Vec<&str> = drawn.lines().collect();
                    for l in lines.iter().take(REPLAY_LINES) {
                        out.push_str(l);
                        out.push('\n');
                    }
                    if lines.len() > REPLAY_LINES {
                        out.push_str(&paint(
                            &format!("  … {} more lines", lines.len() - REPLAY_LINES),
                            Style::Dim,
                            color,
                        ));
                        out.push('\n');
                    }
                }
                for call in tool_calls {
                    let block = spec
                        .tool(&call.name)
                        .map(|t| t.block)
                        .unwrap_or(Block::Tool);
                    if matches!(block, Block::Hidden | Block::Plan) {
                        continue;
                    }
                    let purpose = purpose_of(&call.arguments)
                        .map(|p| paint(&format!("  · {p}"), Style::Dim, color))
                        .unwrap_or_default();
                    let mut args = call.arguments.clone();
                    if let (Some(m), Ok(p)) =
                        (args.as_object_mut(), harness_core::offer::purpose_arg(spec))
                    {
                        m.remove(&p.name);
                    }
                    out.push_str(&format!(
                        "{} {}{purpose}\n",
                        paint("●", Style::Cyan, color),
                        call_title(&call.name, block, &args)
                    ));
                }
            }
            Entry::Rewound { turn } => out.push_str(&paint(
                &format!("(rewound to before turn {turn})\n"),
                Style::Dim,
                color,
            )),
            Entry::Compacted { .. } => out.push_str(&paint(
                "(the conversation was compacted here)\n",
                Style::Dim,
                color,
            )),
            _ => {}
        }
    }
    if turns == 0 {
        return String::new();
    }
    let head = paint(
        &format!(
            "── the conversation so far ({turns} prompt{}) ──",
            if turns == 1 { "" } else { "s" }
        ),
        Style::Dim,
        color,
    );
    format!("{head}\n{out}{}\n", paint("──", Style::Dim, color))
}
