//! The interactive terminal: a prompt with line editing and history (rustyline), the answer
//! streamed as it comes, reasoning dimmed and folded, each tool call drawn by its block, a
//! spinner with the elapsed time while the model or a tool works, questions with the exact
//! command, the reason and the "always" pattern, Ctrl-C to cancel the running step (twice to
//! leave), Shift-Tab to cycle the mode, and the slash commands.

pub mod keys;
mod person;
mod reader;
mod term;

use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Result;
use harness_core::protocol::{Event as CoreEvent, Mode, Origin};
use tokio::sync::mpsc;

use crate::render::view::View;
use crate::render::{self, Style, paint};
use crate::session::SessionParts;
use crate::settings::Settings;
use harness_agent::slash::{HELP, Line, next_mode, parse_line, parse_line_in};
use harness_agent::{Event, Events, Op, Query, Session, Spawned};
use reader::{Read, Reader, start_reader};
use term::{Spinner, TypeAhead};

/// Draws an output on stdout.
fn show(view: &mut View, out: &Event) {
    let text = view.render(out);
    if !text.is_empty() {
        let mut stdout = std::io::stdout();
        let _ = write!(stdout, "{text}");
        let _ = stdout.flush();
    }
}

/// The terminal's width in columns, when stdout is one.
fn width() -> Option<usize> {
    render::width_of(&std::io::stdout())
}

/// Runs the interactive terminal.
pub async fn run(mut settings: Settings, parts: SessionParts) -> Result<ExitCode> {
    let history = settings.dirs.data.join("history");
    if let Some(d) = history.parent() {
        let _ = std::fs::create_dir_all(d);
    }
    let mut reader = start_reader(history, parts.exec.root())?;
    let color = render::color_on_stdout();
    let mut parts = Some(parts);
    loop {
        let Some(p) = parts.take() else {
            break;
        };
        match session_loop(&settings, p, &mut reader, color).await? {
            Next::Quit => break,
            Next::New(mode) => {
                // A new session goes on in the mode the person chose.
                settings.mode = mode;
                parts = Some(crate::session::build(&settings, None).await?);
            }
            Next::Resume(id) => {
                parts = Some(crate::session::build(&settings, Some(&id)).await?);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

enum Next {
    Quit,
    /// A new session, in this mode.
    New(Mode),
    /// Go on with this saved session.
    Resume(String),
}

async fn session_loop(
    settings: &Settings,
    parts: SessionParts,
    reader: &mut Reader,
    color: bool,
) -> Result<Next> {
    let endpoint = parts.client.endpoint().base_url.clone();
    // To check a `/model NAME` against what the server serves.
    let lister = parts.client.clone();
    let window = parts.client.model().input.or(parts.client.model().context);
    let saved_mode = parts.meta.mode;
    let started_in = parts.meta.cwd.clone();
    let root = parts.exec.root().to_path_buf();
    // The session's own rules (a clone shares its mode and approvals), for `!command`.
    let perms = parts.perms.clone();
    // The person's prompt commands, and the MCP servers for theirs.
    let mcp = parts.mcp.clone();
    let commands = crate::custom::load(&root, &settings.dirs.config_file, mcp.as_deref());
    reader.set_commands(commands.iter().map(|c| c.name.clone()).collect());
    // What the person ran with `!`, for the model with the next prompt.
    let mut ran: Vec<String> = Vec::new();
    // The file changes of the person's last turn (path, before, after), for `/undo`.
    let mut changes: Vec<(String, String, String)> = Vec::new();
    let mut builder = parts.into_builder().answers_questions(true);
    // What the resumed session said, drawn again.
    let replay = builder
        .resumed()
        .map(|entries| render::replay(entries, color));
    let resumed = replay.is_some();
    let mut mode = settings.mode;
    // A resumed session goes on in the mode it was left in.
    let mut restored = "";
    if let (true, Some(saved)) = (resumed, saved_mode)
        && saved != mode
    {
        builder = builder.saved_mode(saved);
        mode = saved;
        restored = " (restored)";
    }
    let Spawned {
        session,
        events: mut out_rx,
        run: mut task,
    } = builder.spawn()?;
    if !restored.is_empty() {
        // Said in the head line, not again as a change.
        out_rx.drain();
    }
    let id = session.id().to_owned();
    let model = session.model_name().to_owned();
    // The session's end when it stopped on its own (a store it cannot write: a full disk), and
    // what it said; the person is told at once, and again at each prompt.
    let mut stopped = None;
    let mut stopped_text = String::new();
    println!(
        "{} {} · {} · mode {}{restored} · /help for commands",
        paint("llembas", Style::Bold, color),
        env!("CARGO_PKG_VERSION"),
        model,
        mode
    );
    println!("{}", paint(&format!("session {id}"), Style::Dim, color));
    if let Some(replay) = &replay {
        print!("{replay}");
        if !same_dir(&started_in, &root) {
            println!(
                "{} this session was started in {}; it goes on here, in {} (its paths may not be here: `llembas -C {} --resume {id}` works there)",
                paint("!", Style::Yellow, color),
                started_in.display(),
                root.display(),
                started_in.display()
            );
        }
    }
    let spinner = Spinner::new(std::io::stderr().is_terminal(), render::color_on_stderr());
    let mut view = View::new(color, width());
    view.set_price(settings.price(&model));
    let mut initial = String::new();
    // Lines typed (ended with Enter) while a turn ran: sent in order, as the prompt would.
    let mut typed_lines = std::collections::VecDeque::new();
    // Esc pressed while a turn runs.
    let (esc_tx, mut esc_rx) = mpsc::unbounded_channel();
    // The last Ctrl-C, busy or idle: a second one soon after leaves.
    let mut last_interrupt: Option<Instant> = None;
    // One listener for the whole session, so a Ctrl-C between a turn's end and the next
    // prompt is not lost.
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let next = 'outer: loop {
        // Idle: read a line.
        // The context used, once the server said it.
        let mut used = match (view.last_input(), window) {
            (Some(n), Some(w)) if w > 0 => format!(" · {}%", n * 100 / w),
            _ => String::new(),
        };
        // What the session cost, once a request had a price.
        if let Some(cost) = view.cost().filter(|c| *c > 0.0) {
            used.push_str(&format!(" · {}", render::view::usd(cost)));
        }
        let prompt = format!("{} ", paint(&format!("{mode}{used} ›"), Style::Cyan, color));
        let read = if let Some(line) = typed_lines.pop_front() {
            println!("{prompt}{line}");
            Read::Line(line)
        } else {
            if reader
                .requests
                .send((prompt.clone(), initial.clone()))
                .is_err()
            {
                break Next::Quit;
            }
            initial.clear();
            // While the person types, a job's end may start a turn of its own: show it above the
            // prompt, whole lines at a time.
            let mut pending = String::new();
            view.set_live(false);
            loop {
                tokio::select! {
                    r = reader.lines.recv() => break r.unwrap_or(Read::Eof),
                    done = &mut task, if stopped.is_none() => {
                        stopped_text = stop_text(&done, color);
                        reader.print(stopped_text.clone());
                        stopped = Some(done);
                    }
                    _ = sigint.recv() => {
                        // Sent before the prompt took the terminal: counts for the next one.
                        last_interrupt = Some(Instant::now());
                    }
                    out = out_rx.recv(), if stopped.is_none() => {
                        // The events end with the session's run: it stopped on its own.
                        let Some(out) = out else {
                            let done = (&mut task).await;
                            stopped_text = stop_text(&done, color);
                            reader.print(stopped_text.clone());
                            stopped = Some(done);
                            continue;
                        };
                        if let Event::Core(CoreEvent::ModeChanged { mode: m }) = &out {
                            mode = *m;
                        }
                        pending.push_str(&view.render(&out));
                        if matches!(out, Event::Core(CoreEvent::TurnEnded { .. })) {
                            view.line_ended();
                            let text = std::mem::take(&mut pending);
                            reader.print(text.trim_end_matches('\n').to_owned());
                        } else if let Some(cut) = pending.rfind('\n') {
                            let rest = pending.split_off(cut + 1);
                            let text = std::mem::replace(&mut pending, rest);
                            reader.print(text.trim_end_matches('\n').to_owned());
                        }
                    }
                }
            }
        };
        let line = match read {
            Read::Line(l) => l,
            Read::Cycle(l) => {
                mode = next_mode(mode);
                mode = change_mode(&session, &mut out_rx, &mut view, &spinner, mode).await;
                initial = l;
                continue;
            }
            Read::Interrupted => {
                if again(&mut last_interrupt) {
                    break Next::Quit;
                }
                println!("{}", paint(LEAVE_HINT, Style::Dim, color));
                continue;
            }
            Read::Eof => break Next::Quit,
        };
        let text = match parse_line_in(&line, &commands) {
            Line::Empty => continue,
            Line::Quit => break Next::Quit,
            Line::New => break Next::New(mode),
            Line::Resume(pick) => {
                match pick_session(pick, settings, &root, &id, reader, color).await {
                    Picked::Quit => break Next::Quit,
                    Picked::Stay => {}
                    Picked::Other(other) => break Next::Resume(other),
                }
                continue;
            }
            Line::Status => {
                println!("{}", view.status(&id, &model, &endpoint, mode, window));
                continue;
            }
            Line::Undo => {
                let undone = harness_agent::undo::undo(&std::mem::take(&mut changes), &HostFiles);
                println!("{}", undone.said);
                ran.extend(undone.for_model());
                continue;
            }
            Line::Export(file) => {
                println!("{}", export(settings, &session, &root, file.as_deref()));
                continue;
            }
            Line::Help => {
                println!("{HELP}");
                print!("{}", commands.help());
                continue;
            }
            Line::Shell(command) => {
                match person::run_command(&command, &perms, reader, &root, &mut sigint, color).await
                {
                    person::Ran::Output(code, output) => {
                        print!("{}", shell_shown(&output, code, color));
                        ran.push(harness_agent::person::shell(&command, code, &output));
                    }
                    person::Ran::NotRun => {}
                    person::Ran::Quit => break Next::Quit,
                }
                continue;
            }
            Line::Custom { name, args } => {
                let expanded = person::expand(
                    &commands,
                    mcp.as_deref(),
                    &name,
                    &args,
                    &perms,
                    reader,
                    &root,
                    &mut sigint,
                    color,
                )
                .await;
                match expanded {
                    Ok(text) => text,
                    Err(true) => break Next::Quit,
                    Err(false) => continue,
                }
            }
            Line::Unknown(msg) => {
                println!("{msg}");
                continue;
            }
            Line::Mode(None) => {
                println!("mode: {mode}");
                continue;
            }
            Line::Mode(Some(m)) => {
                mode = change_mode(&session, &mut out_rx, &mut view, &spinner, m).await;
                continue;
            }
            Line::Compact => {
                spinner.start("compacting");
                let answer = session.compact().await;
                spinner.stop();
                if let Ok(answer) = answer {
                    println!("{answer}");
                }
                continue;
            }
            Line::Model(Some(name))
                if !lister
                    .serves(&name, &harness_model::CancellationToken::new())
                    .await
                    .unwrap_or(true) =>
            {
                let list = lister
                    .list_models(&harness_model::CancellationToken::new())
                    .await
                    .unwrap_or_default();
                println!(
                    "{endpoint} does not serve {name:?} (it serves {}): the model is not changed",
                    list.join(", ")
                );
                continue;
            }
            Line::Model(_) | Line::Plan | Line::Jobs | Line::Recall(_) | Line::Rewind(_) => {
                let q = match parse_line(&line) {
                    Line::Model(name) => Query::Model(name),
                    Line::Plan => Query::Plan,
                    Line::Jobs => Query::Jobs,
                    Line::Recall(id) => Query::Recall(id),
                    Line::Rewind(n) => Query::Rewind(n),
                    _ => continue,
                };
                let paged = matches!(q, Query::Recall(_));
                let switched = match &q {
                    Query::Model(Some(name)) => Some(name.clone()),
                    _ => None,
                };
                let plan = matches!(q, Query::Plan);
                let Ok(answer) = session.query(q).await else {
                    continue;
                };
                // The new model's requests are counted at its price.
                if let Some(name) = switched
                    && answer == format!("model: {name}")
                {
                    view.set_price(settings.price(&name));
                }
                if plan && answer != NO_PLAN {
                    print!("{}", render::text_card(&answer, color));
                } else if paged {
                    if !page(&answer, reader, color).await {
                        break Next::Quit;
                    }
                } else {
                    println!("{answer}");
                }
                continue;
            }
            Line::Prompt(p) => p,
        };
        let (text, images) = prompt_with_attachments(text, &mut ran, &root, color);
        if stopped.is_some() {
            println!("{stopped_text}");
            continue;
        }
        session.submit(Op::Prompt {
            text,
            origin: Origin::Person,
            images,
        });
        // Busy: show what happens until the turn ends; what is typed meanwhile is not echoed
        // into the answer, and waits for the next prompt.
        while esc_rx.try_recv().is_ok() {}
        let mut typing = TypeAhead::start(esc_tx.clone());
        let mut ours = false;
        view.set_live(true);
        changes.clear();
        spinner.start("thinking");
        loop {
            tokio::select! {
                done = &mut task, if stopped.is_none() => {
                    spinner.stop();
                    // What it sent before it stopped.
                    while let Some(out) = out_rx.try_recv() {
                        show(&mut view, &out);
                    }
                    print!("{}", view.close_line());
                    stopped_text = stop_text(&done, color);
                    println!("{stopped_text}");
                    stopped = Some(done);
                    break;
                }
                out = out_rx.recv() => {
                    // The events end with the session's run: it stopped on its own.
                    let Some(out) = out else {
                        if stopped.is_some() {
                            break 'outer Next::Quit;
                        }
                        let done = (&mut task).await;
                        spinner.stop();
                        print!("{}", view.close_line());
                        stopped_text = stop_text(&done, color);
                        println!("{stopped_text}");
                        stopped = Some(done);
                        break;
                    };
                    if let Event::Core(CoreEvent::ToolCallAsked { call_id, question }) = &out {
                        spinner.stop();
                        show(&mut view, &out);
                        let always = question.pattern.is_some();
                        let keys = harness_agent::typed::answer_keys(question);
                        typing.pause();
                        let (answer, stop) = loop {
                            match reader.read(&paint(&format!("allow? {keys} "), Style::Yellow, color), "").await {
                                Read::Line(l) => match harness_agent::typed::parse_answer(&l, always) {
                                    Some(a) => break (a, false),
                                    None => println!("{}", harness_agent::typed::NO_ALWAYS),
                                },
                                Read::Eof => break 'outer Next::Quit,
                                // Ctrl-C stops the turn, as it does while the turn runs.
                                Read::Interrupted => break (harness_core::protocol::Answer::Deny { feedback: None }, true),
                                Read::Cycle(_) => break (harness_core::protocol::Answer::Deny { feedback: None }, false),
                            }
                        };
                        if stop {
                            last_interrupt = Some(Instant::now());
                            eprintln!("{}", paint("cancelling… (Ctrl-C again to leave)", Style::Yellow, color));
                            session.submit(Op::Cancel);
                        }
                        session.submit(Op::Answer { call_id: call_id.clone(), answer });
                        typing.resume();
                        spinner.start("working");
                        continue;
                    }
                    if let Event::Question { call_id, options, .. } = &out {
                        spinner.stop();
                        show(&mut view, &out);
                        typing.pause();
                        let reply = match reader.read(&paint("answer › ", Style::Yellow, color), "").await {
                            Read::Line(l) => Some(harness_agent::typed::question_reply(&l, options)),
                            Read::Eof => break 'outer Next::Quit,
                            _ => None,
                        };
                        session.submit(Op::Reply { call_id: call_id.clone(), text: reply });
                        typing.resume();
                        spinner.start("thinking");
                        continue;
                    }
                    if let Event::Core(CoreEvent::ModeChanged { mode: m }) = &out {
                        mode = *m;
                    }
                    if matches!(&out, Event::Core(CoreEvent::UserInput { origin: Origin::Person, .. })) {
                        ours = true;
                    }
                    if let Event::Edit { path, before, after, .. } = &out {
                        changes.push((path.clone(), before.clone(), after.clone()));
                    }
                    let ended = ours && matches!(&out, Event::Core(CoreEvent::TurnEnded { .. }));
                    spinner.stop();
                    show(&mut view, &out);
                    if ended {
                        break;
                    }
                    if let Some(label) = waiting_label(&out) {
                        spinner.start(&label);
                    } else if let Some(now) = view.following(&out) {
                        spinner.follow(&now);
                    }
                }
                _ = sigint.recv() => {
                    spinner.stop();
                    if again(&mut last_interrupt) {
                        break 'outer Next::Quit;
                    }
                    print!("{}", view.close_line());
                    let _ = std::io::stdout().flush();
                    eprintln!("{}", paint("cancelling… (Ctrl-C again to leave)", Style::Yellow, color));
                    session.submit(Op::Cancel);
                }
                Some(()) = esc_rx.recv() => {
                    spinner.stop();
                    print!("{}", view.close_line());
                    let _ = std::io::stdout().flush();
                    eprintln!("{}", paint("cancelling… (Esc)", Style::Yellow, color));
                    session.submit(Op::Cancel);
                }
            }
        }
        // What was typed meanwhile goes to the next prompt.
        let typed = typing.finish();
        typed_lines.extend(typed.lines);
        initial = typed.rest;
    };
    spinner.stop();
    drop(session);
    let said = stopped.is_some();
    let done = match stopped {
        Some(done) => done,
        None => task.await,
    };
    if let Ok(ended) = done {
        // An error the person was shown is not said again.
        if !said {
            ended.result?;
        }
    }
    let saved = if said {
        format!("session {id}: saved up to the error (llembas --resume {id})")
    } else {
        format!("session {id} saved (llembas --resume {id})")
    };
    println!("{}", paint(&saved, Style::Dim, color));
    Ok(next)
}

/// What `/resume` chose.
enum Picked {
    /// The input ended.
    Quit,
    /// Nothing else (said why).
    Stay,
    /// Go on with this session.
    Other(String),
}

/// `/resume [N|ID]`: the session picked by its number in the list of this directory's saved
/// sessions (listed and asked for when none was given) or by its id.
async fn pick_session(
    pick: Option<String>,
    settings: &Settings,
    root: &std::path::Path,
    id: &str,
    reader: &mut Reader,
    color: bool,
) -> Picked {
    let store = crate::store::Store::new(settings.dirs.sessions());
    let list: Vec<harness_agent::Meta> = store
        .list(Some(root))
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.id != id)
        .take(RESUME_LIST)
        .collect();
    let pick = match pick {
        Some(p) => p,
        None if list.is_empty() => {
            println!("no other saved session in {}", root.display());
            return Picked::Stay;
        }
        None => {
            println!("{}", sessions_list(&list));
            let asked = paint(
                "resume which? (a number; Enter stays) › ",
                Style::Yellow,
                color,
            );
            match reader.read(&asked, "").await {
                Read::Line(l) if !l.trim().is_empty() => l.trim().to_owned(),
                Read::Eof => return Picked::Quit,
                _ => return Picked::Stay,
            }
        }
    };
    let chosen = match pick.parse::<usize>() {
        Ok(n) => match n.checked_sub(1).and_then(|i| list.get(i)) {
            Some(m) => Ok(m.id.clone()),
            None => Err(format!("no session numbered {n}: /resume lists them")),
        },
        Err(_) => store
            .find(&pick, root)
            .map(|m| m.id)
            .map_err(|e| e.to_string()),
    };
    match chosen {
        Ok(other) if other == id => println!("this is session {id} already"),
        Ok(other) => return Picked::Other(other),
        Err(e) => println!("{e}"),
    }
    Picked::Stay
}

/// A prompt as it is sent: what the person ran with `!` since the last one first, then the
/// prompt, then the text files it names with `@path`; and the images it names. Each attachment
/// is said on the screen.
fn prompt_with_attachments(
    text: String,
    ran: &mut Vec<String>,
    root: &std::path::Path,
    color: bool,
) -> (String, Vec<String>) {
    let mut text = text;
    for (attached, line) in mentions(&text.clone(), root) {
        println!("{}", paint(&line, Style::Dim, color));
        text.push_str("\n\n");
        text.push_str(&attached);
    }
    if !ran.is_empty() {
        let mut before = std::mem::take(ran).join("\n\n");
        before.push_str("\n\n");
        before.push_str(&text);
        text = before;
    }
    let mut images = Vec::new();
    for path in harness_agent::person::mentioned_paths(&text) {
        if harness_agent::person::image_type(&path).is_none() {
            continue;
        }
        let Ok(bytes) = std::fs::read(root.join(&path)) else {
            continue;
        };
        if let Some(url) = harness_agent::person::image_url(&path, &bytes) {
            let line = format!(
                "  attached image {path} ({} KB)",
                bytes.len().div_ceil(1024)
            );
            println!("{}", paint(&line, Style::Dim, color));
            images.push(url);
        }
    }
    (text, images)
}

/// Runs a command the person typed after `!` in `root` (stdout and stderr together, no
/// stdin); its exit code and output, `None` when Ctrl-C stopped it.
/// Writes the session to `file` (relative to `root`; `llembas-ID.md` there by default): JSON
/// for a `.json` name, else Markdown. What to tell the person.
fn export(
    settings: &Settings,
    session: &Session,
    root: &std::path::Path,
    file: Option<&str>,
) -> String {
    let store = crate::store::Store::new(settings.dirs.sessions());
    let (meta, entries) = match (store.find(session.id(), root), session.saved()) {
        (Ok(meta), Ok(entries)) => (meta, entries),
        (Err(e), _) => return format!("not exported: {e}"),
        (_, Err(e)) => return format!("not exported: {e}"),
    };
    let path =
        root.join(file.map_or_else(|| format!("llembas-{}.md", session.id()), str::to_owned));
    let json = path.extension().is_some_and(|e| e == "json");
    let text = if json {
        harness_agent::export::json(&meta, &entries)
    } else {
        harness_agent::export::markdown(&meta, &entries)
    };
    if let Some(dir) = path.parent()
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        return format!("not exported: cannot make {}: {e}", dir.display());
    }
    match harness_fs::write_atomic(&path, text.as_bytes()) {
        Ok(()) => format!("exported to {}", path.display()),
        Err(e) => format!("not exported: {e}"),
    }
}

async fn run_shell(
    command: &str,
    root: &std::path::Path,
    sigint: &mut tokio::signal::unix::Signal,
) -> Option<(i32, String)> {
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(format!("exec 2>&1\n{command}"))
        .current_dir(root)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let child = match child {
        Ok(c) => c,
        Err(e) => return Some((127, format!("cannot run sh: {e}"))),
    };
    tokio::select! {
        out = child.wait_with_output() => Some(match out {
            Ok(o) => (
                o.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&o.stdout).into_owned(),
            ),
            Err(e) => (-1, e.to_string()),
        }),
        _ = sigint.recv() => None,
    }
}

/// A `!command`'s output as the person reads it: its first lines, the rest counted.
fn shell_shown(output: &str, code: i32, color: bool) -> String {
    let lines: Vec<&str> = output.lines().collect();
    let mut s = String::new();
    for l in lines.iter().take(SHELL_SHOWN_LINES) {
        s.push_str(l);
        s.push('\n');
    }
    let more = lines.len().saturating_sub(SHELL_SHOWN_LINES);
    let tail = if more > 0 {
        format!(
            " · {more} more line{} (sent whole)",
            if more == 1 { "" } else { "s" }
        )
    } else {
        String::new()
    };
    s.push_str(&paint(
        &format!("  └ exit code {code}{tail}"),
        Style::Dim,
        color,
    ));
    s.push('\n');
    s
}

/// Lines of a `!command`'s output shown on the screen.
const SHELL_SHOWN_LINES: usize = 20;

/// The files a prompt names with `@path` (under the session's directory, or absolute) that
/// exist and read as text: each as the model is told of it (loop.json
/// `calls.person_mention`, capped as a result is), and a line for the person.
fn mentions(prompt: &str, root: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for path in harness_agent::person::mentioned_paths(prompt) {
        let full = root.join(&path);
        if !full.is_file() {
            continue;
        }
        let Ok(content) = std::fs::read_to_string(&full) else {
            continue;
        };
        let lines = content.lines().count();
        out.push((
            harness_agent::person::mention(&path, &content),
            format!(
                "  attached {path} ({lines} line{})",
                if lines == 1 { "" } else { "s" }
            ),
        ));
    }
    out
}

/// The undo's files: this machine's, by their real paths.
struct HostFiles;

impl harness_agent::undo::UndoFiles for HostFiles {
    fn read(&self, path: &str) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }

    fn write(&self, path: &str, text: &str) -> Result<(), String> {
        std::fs::write(path, text).map_err(|e| e.to_string())
    }

    fn remove(&self, path: &str) -> Result<(), String> {
        std::fs::remove_file(path).map_err(|e| e.to_string())
    }
}

/// How many sessions `/resume` lists.
const RESUME_LIST: usize = 10;

/// Saved sessions, numbered, newest first: when, the first prompt, the id.
fn sessions_list(list: &[harness_agent::Meta]) -> String {
    list.iter()
        .enumerate()
        .map(|(i, m)| {
            let title = if m.title.is_empty() {
                "(no prompt)"
            } else {
                m.title.as_str()
            };
            format!(
                "{:>2}. {}  {title}  ({})",
                i + 1,
                harness_agent::time::format_time(m.updated),
                m.id
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether two directories are the same one (either spelled as it is).
fn same_dir(a: &std::path::Path, b: &std::path::Path) -> bool {
    a == b
        || match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        }
}

/// What the person is told when the session stopped on its own: its error.
fn stop_text(done: &harness_agent::Result<harness_agent::Ended>, color: bool) -> String {
    let why = match done {
        Ok(harness_agent::Ended { result: Err(e), .. }) => format!("{e:#}"),
        Ok(_) => "it ended".to_owned(),
        Err(e) => format!("it failed: {e}"),
    };
    paint(
        &format!(
            "! the session stopped: {why}. Nothing more can be sent in it: /quit, then `llembas --resume` once the cause is fixed"
        ),
        Style::Red,
        color,
    )
}

/// What `/plan` answers when there is none.
const NO_PLAN: &str = "no plan yet";

/// The terminal's columns and rows, when stdout is one.
fn size() -> Option<(usize, usize)> {
    let stdout = std::io::stdout();
    if !stdout.is_terminal() {
        return None;
    }
    rustix::termios::tcgetwinsize(&stdout)
        .ok()
        .map(|w| (usize::from(w.ws_col), usize::from(w.ws_row)))
        .filter(|(c, r)| *c > 0 && *r > 0)
}

/// Shows a long text a screen at a time (`/recall`): Enter for the next page, anything else
/// stops. `false` when the input ended.
async fn page(text: &str, reader: &mut Reader, color: bool) -> bool {
    let (cols, rows) = size().unwrap_or((render::fold::DEFAULT_WIDTH, 40));
    // A row for the pager's own line.
    let rows = rows.saturating_sub(2).max(3);
    let mut from = 0;
    loop {
        let (shown, next) = render::fold::page(text, from, rows, cols);
        print!("{shown}");
        let _ = std::io::stdout().flush();
        let Some(next) = next else {
            return true;
        };
        let left = text.len() - next;
        let more = paint(
            &format!("── {left} more bytes · Enter: next page · q: stop ── "),
            Style::Dim,
            color,
        );
        match reader.read(&more, "").await {
            Read::Line(l) if l.trim().is_empty() => from = next,
            Read::Eof => return false,
            _ => return true,
        }
    }
}

/// Said at an idle prompt after one Ctrl-C.
const LEAVE_HINT: &str = "(Ctrl-C again to leave, or /quit)";

/// Whether a Ctrl-C follows another one closely enough to leave; notes it either way.
fn again(last: &mut Option<Instant>) -> bool {
    let soon = last.is_some_and(|t| t.elapsed() < Duration::from_secs(2));
    *last = Some(Instant::now());
    soon
}

/// What the spinner says while the next output is awaited.
fn waiting_label(out: &Event) -> Option<String> {
    match out {
        Event::Core(CoreEvent::StepStarted { .. }) => Some("thinking".into()),
        Event::Core(CoreEvent::ToolCallStarted { call, .. }) => {
            Some(format!("running {}", call.name))
        }
        Event::Core(CoreEvent::ToolCallFinished { .. }) => Some("thinking".into()),
        Event::Core(CoreEvent::ToolCallAnswered { .. }) => Some("working".into()),
        _ => None,
    }
}

/// Shows what arrived while idle (a mode change, a job's wake-up).
/// Asks the session for a mode change and answers the mode it is in after it (the one asked
/// for when the session has gone), with what it said meanwhile drawn.
async fn change_mode(
    session: &Session,
    events: &mut Events,
    view: &mut View,
    spinner: &Spinner,
    asked: Mode,
) -> Mode {
    let now = session.set_mode(asked).await.unwrap_or(asked);
    spinner.stop();
    for out in events.drain() {
        show(view, &out);
    }
    now
}
