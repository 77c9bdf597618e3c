//! `llembas -p`: one prompt without the terminal UI. The answer goes to stdout (or the event
//! stream as JSON lines with `--output json`), tool activity to stderr; a question is answered
//! from stdin when the prompt did not come from there, else refused with a note. The exit code
//! says whether the turn finished.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "`-p`: the answer on stdout, tool activity on stderr"
)]

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::process::ExitCode;

use anyhow::Result;
use harness_agent::oneshot::{Totals, head, succeeded};
use harness_agent::typed::{NO_ALWAYS, parse_answer, question_reply};
use harness_core::protocol::{Answer, Event as CoreEvent, PermissionQuestion};
use tokio::sync::mpsc;

use crate::args::OutputFormat;
use crate::render;
use crate::session::SessionParts;
use harness_agent::{Event, Op, Spawned};

/// Where questions are answered in a one-shot run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answers {
    /// Lines of stdin (`y`, `a`/`always`, `n` or `n: what to do instead`).
    Stdin,
    /// Nobody: every question is answered no, with a note on stderr.
    Nobody,
}

/// The prompt of a one-shot run.
#[derive(Debug, Clone)]
pub struct Prompt {
    /// Its text.
    pub text: String,
    /// Its images (`--image`), as `data:` URLs.
    pub images: Vec<String>,
}

/// Runs one prompt to its end.
pub async fn run(
    price: Option<harness_spec::Cost>,
    parts: SessionParts,
    prompt: Prompt,
    output: OutputFormat,
    answers: Answers,
    job_wait: Option<u64>,
) -> Result<ExitCode> {
    // A new session that failed before anything happened (a refused key, a server that is
    // down) is not kept.
    let fresh = parts
        .resume
        .is_none()
        .then(|| parts.store.dir(&parts.meta.id));
    let wait = match job_wait {
        Some(w) => w,
        None => {
            harness_loop::config::LoopConfig::embedded()?
                .jobs
                .limits
                .oneshot_wait_seconds
        }
    };
    let Spawned {
        session,
        events: mut out_rx,
        run: mut task,
    } = parts
        .into_builder()
        .answers_questions(answers == Answers::Stdin)
        .one_shot(Some(std::time::Duration::from_secs(wait)))
        .prompt_with_images(prompt.text, prompt.images)
        .spawn()?;
    let id = session.id().to_owned();
    let model = session.model_name().to_owned();
    let mut stdout = std::io::stdout().lock();
    let mut printer = Printer::new(output);
    let mut interrupts = 0u32;
    let mut totals = Totals::new();
    totals.set_price(price);
    if output == OutputFormat::Json {
        // The stream opens with the session it belongs to.
        writeln!(stdout, "{}", head(&id, &model, fresh.is_none()))?;
        stdout.flush()?;
    }
    let mut stdin_lines = (answers == Answers::Stdin).then(|| {
        let (tx, rx) = mpsc::unbounded_channel::<Option<String>>();
        std::thread::spawn(move || {
            let stdin = std::io::stdin();
            for line in stdin.lock().lines() {
                if tx.send(line.ok()).is_err() {
                    return;
                }
            }
            let _ = tx.send(None);
        });
        rx
    });
    // One listener for the whole run: a Ctrl-C that comes while output is being drawn is kept
    // for the next turn of the loop, never lost between two listeners.
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut stopped_for_signal = false;
    let result = loop {
        tokio::select! {
            () = crate::process::ending_notice(), if !stopped_for_signal => {
                // The signal's handler ends the commands and the process: the run stops here,
                // its call recorded as interrupted, instead of taking its next step.
                stopped_for_signal = true;
                session.submit(Op::Cancel);
            }
            out = out_rx.recv() => {
                let Some(out) = out else { continue };
                totals.note(&out);
                if let Event::Question { call_id, options, .. } = &out {
                    printer.emit(&mut stdout, &out)?;
                    let reply = match (answers, stdin_lines.as_mut()) {
                        (Answers::Stdin, Some(rx)) => rx.recv().await.flatten().map(|l| question_reply(&l, options)),
                        _ => None,
                    };
                    session.submit(Op::Reply { call_id: call_id.clone(), text: reply });
                    continue;
                }
                if let Event::Core(CoreEvent::ToolCallAsked { call_id, question }) = &out {
                    printer.emit(&mut stdout, &out)?;
                    let answer = ask(question, answers, stdin_lines.as_mut()).await;
                    session.submit(Op::Answer { call_id: call_id.clone(), answer });
                    continue;
                }
                printer.emit(&mut stdout, &out)?;
            }
            _ = sigint.recv() => {
                interrupts += 1;
                if interrupts > 1 {
                    eprintln!("\nllembas: interrupted");
                    return Ok(ExitCode::from(130));
                }
                eprintln!("\nllembas: cancelling (Ctrl-C again to quit)");
                session.submit(Op::Cancel);
            }
            r = &mut task => break r,
        }
    };
    while let Some(out) = out_rx.try_recv() {
        totals.note(&out);
        printer.emit(&mut stdout, &out)?;
    }
    printer.finish(&mut stdout)?;
    let ended = result.map_err(|e| anyhow::anyhow!("the session failed: {e}"))?;
    ended.result?;
    drop(session);
    let last = ended.last_end;
    let kept = totals.kept(fresh.is_some(), last.as_ref());
    let session = match fresh {
        Some(dir) if !kept => {
            let _ = std::fs::remove_dir_all(&dir);
            "not kept: nothing happened".to_owned()
        }
        _ => format!("session {id}"),
    };
    if output == OutputFormat::Json {
        let result = totals.result(&id, kept, last.as_ref());
        writeln!(stdout, "{result}")?;
        stdout.flush()?;
    }
    Ok(match last {
        _ if succeeded(last.as_ref()) => {
            eprintln!("llembas: session {id} (llembas --resume {id})");
            ExitCode::SUCCESS
        }
        Some(end) => {
            eprintln!("llembas: {} ({session})", render::turn_end_line(&end));
            ExitCode::FAILURE
        }
        None => {
            eprintln!("llembas: the prompt did not run ({session})");
            ExitCode::FAILURE
        }
    })
}

async fn ask(
    question: &PermissionQuestion,
    answers: Answers,
    lines: Option<&mut mpsc::UnboundedReceiver<Option<String>>>,
) -> Answer {
    match (answers, lines) {
        (Answers::Stdin, Some(rx)) => loop {
            if std::io::stdin().is_terminal() {
                if question.pattern.is_some() {
                    eprint!(
                        "allow? [y]es / [a]lways / [n]o (a note after n: goes to the model) > "
                    );
                } else {
                    eprint!("allow? [y]es / [n]o (a note after n: goes to the model) > ");
                }
                let _ = std::io::stderr().flush();
            }
            match rx.recv().await.flatten() {
                Some(line) => match parse_answer(&line, question.pattern.is_some()) {
                    Some(answer) => break answer,
                    None => eprintln!("llembas: {NO_ALWAYS}"),
                },
                None => {
                    eprintln!(
                        "llembas: not run: {} (stdin ended before an answer)",
                        question.subject
                    );
                    break Answer::Deny { feedback: None };
                }
            }
        },
        _ => {
            eprintln!(
                "llembas: not run: {} (nobody to ask in this run; --mode auto or a rule in the config file allows it)",
                question.subject
            );
            Answer::Deny { feedback: None }
        }
    }
}

/// How a one-shot run writes what the session says: the answer on stdout (Markdown on a
/// terminal with colour, as the model wrote it when piped), the activity on stderr drawn as
/// the terminal draws it (folded by lines and by stderr's width); with `--output json` the
/// events as JSON lines on stdout.
struct Printer {
    format: OutputFormat,
    color: bool,
    line_open: bool,
    streamed: render::Streamed,
    md: Option<render::markdown::Markdown>,
}

impl Printer {
    fn new(format: OutputFormat) -> Printer {
        let width = render::width_of(&std::io::stderr());
        Printer {
            format,
            color: render::color_on_stderr(),
            line_open: false,
            streamed: render::Streamed::new(width),
            md: (format == OutputFormat::Text && render::color_on_stdout()).then(|| {
                render::markdown::Markdown::with_width(render::width_of(&std::io::stdout()))
            }),
        }
    }

    /// Ends the answer: what Markdown holds is drawn, the open line ended.
    fn finish(&mut self, stdout: &mut impl std::io::Write) -> Result<()> {
        if let Some(md) = &mut self.md {
            write!(stdout, "{}", md.finish())?;
        }
        if self.line_open && self.format == OutputFormat::Text {
            writeln!(stdout)?;
        }
        stdout.flush()?;
        Ok(())
    }

    fn emit(&mut self, stdout: &mut impl std::io::Write, out: &Event) -> Result<()> {
        // The answer's held Markdown is drawn before anything else is.
        let text_now = matches!(out, Event::Core(CoreEvent::TextDelta { .. }));
        if !text_now
            && self.format == OutputFormat::Text
            && let Some(m) = &mut self.md
            && m.pending()
            && !matches!(out, Event::Core(CoreEvent::ModelAnswered { .. }))
        {
            write!(stdout, "{}", m.finish())?;
            stdout.flush()?;
        }
        match self.format {
            OutputFormat::Json => {
                if let Event::Core(e) = out {
                    serde_json::to_writer(&mut *stdout, e)?;
                    writeln!(stdout)?;
                    stdout.flush()?;
                }
            }
            OutputFormat::Text => match out {
                Event::Core(CoreEvent::TextDelta { text }) => {
                    match &mut self.md {
                        Some(m) => write!(stdout, "{}", m.push(text, true))?,
                        None => {
                            write!(stdout, "{text}")?;
                            self.line_open = !text.ends_with('\n');
                        }
                    }
                    stdout.flush()?;
                }
                Event::Core(CoreEvent::StepStarted { .. }) if self.line_open => {
                    writeln!(stdout)?;
                    stdout.flush()?;
                    self.line_open = false;
                }
                other => {
                    let folded = self.streamed.fold(other, self.color);
                    if let Some(text) =
                        folded.unwrap_or_else(|| render::activity(other, self.color))
                    {
                        if self.line_open {
                            writeln!(stdout)?;
                            stdout.flush()?;
                            self.line_open = false;
                        }
                        eprint!("{text}");
                    }
                }
            },
        }
        Ok(())
    }
}
