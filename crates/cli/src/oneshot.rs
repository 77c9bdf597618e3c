//! `llembas -p`: one prompt without the terminal UI. The answer goes to stdout (or the event
//! stream as JSON lines with `--output json`), tool activity to stderr; a question is answered
//! from stdin when the prompt did not come from there, else refused with a note. The exit code
//! says whether the turn finished.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::process::ExitCode;

use anyhow::Result;
use harness_agent::oneshot::{Totals, head, succeeded};
use harness_agent::typed::{NO_ALWAYS, parse_answer, question_reply};
use harness_core::protocol::{Answer, Event, Op, PermissionQuestion};
use tokio::sync::mpsc;

use crate::args::OutputFormat;
use crate::render;
use crate::session::SessionParts;
use harness_agent::{Ctl, Driver, Out};

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
    parts: SessionParts,
    prompt: Prompt,
    output: OutputFormat,
    answers: Answers,
    job_wait: Option<u64>,
) -> Result<ExitCode> {
    let (out_tx, mut out_rx) = mpsc::unbounded_channel();
    let (op_tx, op_rx) = mpsc::unbounded_channel();
    // A new session that failed before anything happened (a refused key, a server that is
    // down) is not kept.
    let fresh = parts
        .resume
        .is_none()
        .then(|| parts.store.dir(&parts.meta.id));
    let (setup, resume) = parts.into_setup();
    let mut driver = Driver::new(setup, resume.as_deref(), out_tx, op_rx)?;
    if answers == Answers::Stdin {
        driver.answers_questions();
    }
    let wait = match job_wait {
        Some(w) => w,
        None => {
            harness_loop::config::LoopConfig::embedded()?
                .jobs
                .limits
                .oneshot_wait_seconds
        }
    };
    driver.wait_for_jobs_at_most(std::time::Duration::from_secs(wait));
    let id = driver.id().to_owned();
    let model = driver.model_name().to_owned();
    driver.queue_prompt_with(prompt.text, prompt.images);
    let mut task = tokio::spawn(async move {
        let r = driver.run(true).await;
        (driver, r)
    });
    let color = render::color_on_stderr();
    let mut stdout = std::io::stdout().lock();
    let mut line_open = false;
    let mut streamed = render::Streamed::default();
    // The answer drawn as Markdown on a terminal with colour; piped, as the model wrote it.
    let mut md = (output == OutputFormat::Text && render::color_on_stdout())
        .then(render::markdown::Markdown::new);
    let mut interrupts = 0u32;
    let mut totals = Totals::new();
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
                let _ = op_tx.send(Ctl::Op(Op::Cancel));
            }
            out = out_rx.recv() => {
                let Some(out) = out else { continue };
                totals.note(&out);
                if let Out::Question { call_id, options, .. } = &out {
                    emit(&mut stdout, &out, output, color, &mut line_open, &mut streamed, &mut md)?;
                    let reply = match (answers, stdin_lines.as_mut()) {
                        (Answers::Stdin, Some(rx)) => rx.recv().await.flatten().map(|l| question_reply(&l, options)),
                        _ => None,
                    };
                    let _ = op_tx.send(Ctl::Reply(call_id.clone(), reply));
                    continue;
                }
                if let Out::Event(Event::ToolCallAsked { call_id, question }) = &out {
                    emit(&mut stdout, &out, output, color, &mut line_open, &mut streamed, &mut md)?;
                    let answer = ask(question, answers, stdin_lines.as_mut()).await;
                    let _ = op_tx.send(Ctl::Op(Op::Answer { call_id: call_id.clone(), answer }));
                    continue;
                }
                emit(&mut stdout, &out, output, color, &mut line_open, &mut streamed, &mut md)?;
            }
            _ = sigint.recv() => {
                interrupts += 1;
                if interrupts > 1 {
                    eprintln!("\nllembas: interrupted");
                    return Ok(ExitCode::from(130));
                }
                eprintln!("\nllembas: cancelling (Ctrl-C again to quit)");
                let _ = op_tx.send(Ctl::Op(Op::Cancel));
            }
            r = &mut task => break r,
        }
    };
    while let Ok(out) = out_rx.try_recv() {
        totals.note(&out);
        emit(
            &mut stdout,
            &out,
            output,
            color,
            &mut line_open,
            &mut streamed,
            &mut md,
        )?;
    }
    if let Some(md) = &mut md {
        write!(stdout, "{}", md.finish())?;
    }
    if line_open && output == OutputFormat::Text {
        writeln!(stdout)?;
    }
    stdout.flush()?;
    let (driver, r) = result.map_err(|e| anyhow::anyhow!("the session failed: {e}"))?;
    r?;
    let last = driver.last_end().cloned();
    let kept = totals.kept(fresh.is_some(), last.as_ref());
    let session = match fresh {
        Some(dir) if !kept => {
            drop(driver);
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

fn emit(
    stdout: &mut impl std::io::Write,
    out: &Out,
    format: OutputFormat,
    color: bool,
    line_open: &mut bool,
    streamed: &mut render::Streamed,
    md: &mut Option<render::markdown::Markdown>,
) -> Result<()> {
    // The answer's held Markdown is drawn before anything else is.
    let text_now = matches!(out, Out::Event(Event::TextDelta { .. }));
    if !text_now
        && format == OutputFormat::Text
        && let Some(m) = md
        && m.pending()
        && !matches!(out, Out::Event(Event::ModelAnswered { .. }))
    {
        write!(stdout, "{}", m.finish())?;
        stdout.flush()?;
    }
    match format {
        OutputFormat::Json => {
            if let Out::Event(e) = out {
                serde_json::to_writer(&mut *stdout, e)?;
                writeln!(stdout)?;
                stdout.flush()?;
            }
        }
        OutputFormat::Text => match out {
            Out::Event(Event::TextDelta { text }) => {
                match md {
                    Some(m) => write!(stdout, "{}", m.push(text, true))?,
                    None => {
                        write!(stdout, "{text}")?;
                        *line_open = !text.ends_with('\n');
                    }
                }
                stdout.flush()?;
            }
            Out::Event(Event::StepStarted { .. }) if *line_open => {
                writeln!(stdout)?;
                stdout.flush()?;
                *line_open = false;
            }
            other => {
                let folded = streamed.fold(other, color);
                if let Some(text) = folded.unwrap_or_else(|| render::activity(other, color)) {
                    if *line_open {
                        writeln!(stdout)?;
                        stdout.flush()?;
                        *line_open = false;
                    }
                    eprint!("{text}");
                }
            }
        },
    }
    Ok(())
}
