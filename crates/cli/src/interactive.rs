//! The interactive terminal: a prompt with line editing and history (rustyline), the answer
//! streamed as it comes, reasoning dimmed and folded, each tool call drawn by its block, a
//! spinner with the elapsed time while the model or a tool works, questions with the exact
//! command, the reason and the "always" pattern, Ctrl-C to cancel the running step (twice to
//! leave), Shift-Tab to cycle the mode, and the slash commands.

use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use harness_core::protocol::{Event as CoreEvent, Mode, Origin, TurnEnd};
use rustyline::error::ReadlineError;
use rustyline::history::DefaultHistory;
use rustyline::{
    Cmd, ConditionalEventHandler, Editor, EventContext, EventHandler, KeyCode, KeyEvent, Modifiers,
    RepeatCount,
};
use tokio::sync::mpsc;

use crate::render::{self, Style, paint};
use crate::session::SessionParts;
use crate::settings::Settings;
use harness_agent::slash::{COMMANDS, HELP, Line, next_mode, parse_line};
use harness_agent::{Event, Events, Op, Query, Session, Spawned};

/// Tab: a slash command's name (and `/mode`'s modes), or the path after an `@` (files and
/// directories under the session's directory).
struct Completion {
    root: std::path::PathBuf,
}

impl rustyline::completion::Completer for Completion {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let before = &line[..pos];
        let word_start = before.rfind(char::is_whitespace).map_or(0, |i| i + 1);
        let word = &before[word_start..];
        if let Some(name) = before.strip_prefix('/')
            && !name.contains(char::is_whitespace)
        {
            let hits = COMMANDS
                .iter()
                .filter(|c| c.starts_with(name))
                .map(|c| format!("{c} "))
                .collect();
            return Ok((1, hits));
        }
        if let Some(m) = before.strip_prefix("/mode ")
            && !m.contains(char::is_whitespace)
        {
            let hits = ["manual", "edit", "auto", "plan"]
                .iter()
                .filter(|c| c.starts_with(m))
                .map(|c| c.to_string())
                .collect();
            return Ok((6, hits));
        }
        if let Some(partial) = word.strip_prefix('@') {
            let (dir, prefix) = match partial.rfind('/') {
                Some(i) => (&partial[..=i], &partial[i + 1..]),
                None => ("", partial),
            };
            let mut hits: Vec<String> = std::fs::read_dir(self.root.join(dir))
                .map(|entries| {
                    entries
                        .flatten()
                        .filter_map(|e| {
                            let name = e.file_name().to_string_lossy().into_owned();
                            let shown = name.starts_with(prefix)
                                && (prefix.starts_with('.') || !name.starts_with('.'));
                            shown.then(|| {
                                // A directory goes on; a file is done (a blank after it).
                                let end = if e.path().is_dir() { "/" } else { " " };
                                format!("{dir}{name}{end}")
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            hits.sort();
            return Ok((word_start + 1, hits));
        }
        Ok((pos, Vec::new()))
    }
}

impl rustyline::hint::Hinter for Completion {
    type Hint = String;
}
impl rustyline::highlight::Highlighter for Completion {}
impl rustyline::validate::Validator for Completion {}
impl rustyline::Helper for Completion {}

/// Shift-Tab: remember the line, ask for a mode change, end the read. The read ends as an
/// accepted line (marked as a cycle), not an interrupt: rustyline keeps the keys it read past
/// this one only then (its `buffer-redux`), so each press of a burst cycles once.
struct CycleMode(Arc<Mutex<Option<String>>>);

impl ConditionalEventHandler for CycleMode {
    fn handle(
        &self,
        _evt: &rustyline::Event,
        _n: RepeatCount,
        _positive: bool,
        ctx: &EventContext,
    ) -> Option<Cmd> {
        if let Ok(mut l) = self.0.lock() {
            *l = Some(ctx.line().to_owned());
        }
        Some(Cmd::AcceptLine)
    }
}

enum Read {
    Line(String),
    Cycle(String),
    Interrupted,
    Eof,
}

/// The line editor in a thread of its own (it blocks).
struct Reader {
    requests: std::sync::mpsc::Sender<(String, String)>,
    lines: mpsc::UnboundedReceiver<Read>,
    /// Prints above the prompt while a line is being read.
    printer: Option<Box<dyn rustyline::ExternalPrinter + Send>>,
}

fn start_reader(history: std::path::PathBuf, root: &std::path::Path) -> Result<Reader> {
    let (req_tx, req_rx) = std::sync::mpsc::channel::<(String, String)>();
    let (line_tx, line_rx) = mpsc::unbounded_channel();
    let config = rustyline::Config::builder()
        .completion_type(rustyline::CompletionType::List)
        .build();
    let mut editor: Editor<Completion, DefaultHistory> = Editor::with_config(config)?;
    editor.set_helper(Some(Completion {
        root: root.to_path_buf(),
    }));
    let cycled = Arc::new(Mutex::new(None));
    editor.bind_sequence(
        KeyEvent(KeyCode::BackTab, Modifiers::NONE),
        EventHandler::Conditional(Box::new(CycleMode(cycled.clone()))),
    );
    let _ = editor.load_history(&history);
    let printer = editor
        .create_external_printer()
        .ok()
        .map(|p| Box::new(p) as Box<dyn rustyline::ExternalPrinter + Send>);
    std::thread::spawn(move || {
        while let Ok((prompt, initial)) = req_rx.recv() {
            let r = editor.readline_with_initial(&prompt, (&initial, ""));
            let cycle = cycled.lock().ok().and_then(|mut c| c.take());
            let read = match r {
                Ok(_) if cycle.is_some() => Read::Cycle(cycle.unwrap_or_default()),
                Ok(line) => {
                    if !line.trim().is_empty() {
                        let _ = editor.add_history_entry(line.as_str());
                        let _ = editor.save_history(&history);
                    }
                    Read::Line(line)
                }
                Err(ReadlineError::Interrupted) => Read::Interrupted,
                Err(_) => Read::Eof,
            };
            if line_tx.send(read).is_err() {
                return;
            }
        }
    });
    Ok(Reader {
        requests: req_tx,
        lines: line_rx,
        printer,
    })
}

impl Reader {
    /// Prints while a line is being read (above the prompt when the terminal allows).
    fn print(&mut self, text: String) {
        if text.is_empty() {
            return;
        }
        match &mut self.printer {
            Some(p) => {
                let _ = p.print(text);
            }
            None => {
                print!("{text}");
                let _ = std::io::stdout().flush();
            }
        }
    }

    async fn read(&mut self, prompt: &str, initial: &str) -> Read {
        if self
            .requests
            .send((prompt.to_owned(), initial.to_owned()))
            .is_err()
        {
            return Read::Eof;
        }
        self.lines.recv().await.unwrap_or(Read::Eof)
    }
}

/// A spinner with the elapsed time on stderr, while nothing else is being written. Drawing
/// and stopping hold one lock, so a frame is never drawn over output that followed a stop.
#[derive(Clone)]
struct Spinner {
    state: Arc<Mutex<SpinState>>,
    on: bool,
}

#[derive(Default)]
struct SpinState {
    since: Option<(Instant, String)>,
    drawn: bool,
}

impl Spinner {
    fn new(on: bool, color: bool) -> Spinner {
        let s = Spinner {
            state: Arc::new(Mutex::new(SpinState::default())),
            on,
        };
        if on {
            let t = s.clone();
            tokio::spawn(async move {
                const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
                let mut i = 0usize;
                loop {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    let Ok(mut st) = t.state.lock() else { return };
                    if let Some((since, label)) = &st.since {
                        let secs = since.elapsed().as_secs_f32();
                        if secs > 0.3 {
                            i = (i + 1) % FRAMES.len();
                            eprint!(
                                "\r\x1b[K{} {label} {secs:.0}s",
                                paint(FRAMES[i], Style::Cyan, color)
                            );
                            let _ = std::io::stderr().flush();
                            st.drawn = true;
                        }
                    }
                }
            });
        }
        s
    }

    fn start(&self, label: &str) {
        if let Ok(mut st) = self.state.lock() {
            st.since = Some((Instant::now(), label.to_owned()));
        }
    }

    /// Stops and wipes the line (before anything else is written).
    fn stop(&self) {
        if let Ok(mut st) = self.state.lock() {
            st.since = None;
            if self.on && st.drawn {
                eprint!("\r\x1b[K");
                let _ = std::io::stderr().flush();
                st.drawn = false;
            }
        }
    }
}

/// Runs the interactive terminal.
pub async fn run(settings: Settings, parts: SessionParts) -> Result<ExitCode> {
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
            Next::New => {
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
    New,
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
        run: task,
    } = builder.spawn()?;
    if !restored.is_empty() {
        // Said in the head line, not again as a change.
        out_rx.drain();
    }
    let id = session.id().to_owned();
    let model = session.model_name().to_owned();
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
    let mut view = View {
        streamed: render::Streamed::default(),
        color,
        line_open: false,
        reasoning_lines: 0,
        folded: 0,
        requests: 0,
        tokens_in: 0,
        tokens_out: 0,
        last_input: None,
        md: color.then(render::markdown::Markdown::new),
        live: false,
        reasoning_open: false,
    };
    let mut initial = String::new();
    // The last Ctrl-C, busy or idle: a second one soon after leaves.
    let mut last_interrupt: Option<Instant> = None;
    // One listener for the whole session, so a Ctrl-C between a turn's end and the next
    // prompt is not lost.
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let next = 'outer: loop {
        // Idle: read a line.
        // The context used, once the server said it.
        let used = match (view.last_input, window) {
            (Some(n), Some(w)) if w > 0 => format!(" · {}%", n * 100 / w),
            _ => String::new(),
        };
        let prompt = format!("{} ", paint(&format!("{mode}{used} ›"), Style::Cyan, color));
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
        view.live = false;
        let read = loop {
            tokio::select! {
                r = reader.lines.recv() => break r.unwrap_or(Read::Eof),
                _ = sigint.recv() => {
                    // Sent before the prompt took the terminal: counts for the next one.
                    last_interrupt = Some(Instant::now());
                }
                out = out_rx.recv() => {
                    let Some(out) = out else { break Read::Eof };
                    if let Event::Core(CoreEvent::ModeChanged { mode: m }) = &out {
                        mode = *m;
                    }
                    pending.push_str(&view.render(&out));
                    if matches!(out, Event::Core(CoreEvent::TurnEnded { .. })) {
                        view.line_open = false;
                        let text = std::mem::take(&mut pending);
                        reader.print(text.trim_end_matches('\n').to_owned());
                    } else if let Some(cut) = pending.rfind('\n') {
                        let rest = pending.split_off(cut + 1);
                        let text = std::mem::replace(&mut pending, rest);
                        reader.print(text.trim_end_matches('\n').to_owned());
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
        let text = match parse_line(&line) {
            Line::Empty => continue,
            Line::Quit => break Next::Quit,
            Line::New => break Next::New,
            Line::Resume(pick) => {
                let store = crate::store::Store::new(settings.dirs.sessions());
                let list: Vec<harness_agent::Meta> = store
                    .list(Some(&root))
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|m| m.id != id)
                    .take(RESUME_LIST)
                    .collect();
                let pick = match pick {
                    Some(p) => p,
                    None if list.is_empty() => {
                        println!("no other saved session in {}", root.display());
                        continue;
                    }
                    None => {
                        println!("{}", sessions_list(&list));
                        match reader
                            .read(
                                &paint(
                                    "resume which? (a number; Enter stays) › ",
                                    Style::Yellow,
                                    color,
                                ),
                                "",
                            )
                            .await
                        {
                            Read::Line(l) if !l.trim().is_empty() => l.trim().to_owned(),
                            Read::Eof => break Next::Quit,
                            _ => continue,
                        }
                    }
                };
                let chosen = match pick.parse::<usize>() {
                    Ok(n) => match n.checked_sub(1).and_then(|i| list.get(i)) {
                        Some(m) => Ok(m.id.clone()),
                        None => Err(format!("no session numbered {n}: /resume lists them")),
                    },
                    Err(_) => store
                        .find(&pick, &root)
                        .map(|m| m.id)
                        .map_err(|e| e.to_string()),
                };
                match chosen {
                    Ok(other) if other == id => println!("this is session {id} already"),
                    Ok(other) => break Next::Resume(other),
                    Err(e) => println!("{e}"),
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
            Line::Help => {
                println!("{HELP}");
                continue;
            }
            Line::Shell(command) => {
                use harness_loop::session::{Decision, Permissions as _};
                let call = harness_core::protocol::ToolCall {
                    id: "person".into(),
                    name: "bash".into(),
                    arguments: serde_json::json!({ "command": command }),
                };
                match perms.decide(&call) {
                    Decision::Allow => {}
                    Decision::Deny { reason } => {
                        println!("{} not run: {reason}", paint("!", Style::Yellow, color));
                        continue;
                    }
                    Decision::Ask(q) => {
                        let q = harness_core::protocol::PermissionQuestion { pattern: None, ..q };
                        print!("{}", render::question(&q, color));
                        let answer = match reader
                            .read(&paint("allow? [y/n] ", Style::Yellow, color), "")
                            .await
                        {
                            Read::Line(l) => harness_agent::typed::parse_answer(&l, false),
                            Read::Eof => break Next::Quit,
                            _ => None,
                        };
                        if answer != Some(harness_core::protocol::Answer::Once) {
                            println!("  not run");
                            continue;
                        }
                    }
                }
                let Some((code, output)) = run_shell(&command, &root, &mut sigint).await else {
                    println!("{}", paint("  stopped", Style::Yellow, color));
                    continue;
                };
                print!("{}", shell_shown(&output, code, color));
                ran.push(harness_agent::person::shell(&command, code, &output));
                continue;
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
                if let Ok(answer) = session.query(q).await {
                    println!("{answer}");
                }
                continue;
            }
            Line::Prompt(p) => p,
        };
        // The files it names with `@path` go after it.
        let text = {
            let mut text = text;
            for (attached, line) in mentions(&text.clone(), &root) {
                println!("{}", paint(&line, Style::Dim, color));
                text.push_str("\n\n");
                text.push_str(&attached);
            }
            text
        };
        // What the person ran with `!` since the last prompt goes first.
        let text = if ran.is_empty() {
            text
        } else {
            let mut before = std::mem::take(&mut ran).join("\n\n");
            before.push_str("\n\n");
            before.push_str(&text);
            before
        };
        // The images it names with `@path` go with it.
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
        session.submit(Op::Prompt {
            text,
            origin: Origin::Person,
            images,
        });
        // Busy: show what happens until the turn ends; what is typed meanwhile is not echoed
        // into the answer, and waits for the next prompt.
        let _quiet = NoEcho::new();
        let mut ours = false;
        view.live = true;
        changes.clear();
        spinner.start("thinking");
        loop {
            tokio::select! {
                out = out_rx.recv() => {
                    let Some(out) = out else { break 'outer Next::Quit };
                    if let Event::Core(CoreEvent::ToolCallAsked { call_id, question }) = &out {
                        spinner.stop();
                        view.show(&out);
                        let always = question.pattern.is_some();
                        let keys = harness_agent::typed::answer_keys(question);
                        let answer = loop {
                            match reader.read(&paint(&format!("allow? {keys} "), Style::Yellow, color), "").await {
                                Read::Line(l) => match harness_agent::typed::parse_answer(&l, always) {
                                    Some(a) => break a,
                                    None => println!("{}", harness_agent::typed::NO_ALWAYS),
                                },
                                Read::Eof => break 'outer Next::Quit,
                                _ => break harness_core::protocol::Answer::Deny { feedback: None },
                            }
                        };
                        session.submit(Op::Answer { call_id: call_id.clone(), answer });
                        spinner.start("working");
                        continue;
                    }
                    if let Event::Question { call_id, options, .. } = &out {
                        spinner.stop();
                        view.show(&out);
                        let reply = match reader.read(&paint("answer › ", Style::Yellow, color), "").await {
                            Read::Line(l) => Some(harness_agent::typed::question_reply(&l, options)),
                            Read::Eof => break 'outer Next::Quit,
                            _ => None,
                        };
                        session.submit(Op::Reply { call_id: call_id.clone(), text: reply });
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
                    view.show(&out);
                    if ended {
                        break;
                    }
                    if let Some(label) = waiting_label(&out) {
                        spinner.start(&label);
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
            }
        }
    };
    spinner.stop();
    drop(session);
    if let Ok(ended) = task.finished().await {
        ended.result?;
    }
    println!(
        "{}",
        paint(
            &format!("session {id} saved (llembas --resume {id})"),
            Style::Dim,
            color
        )
    );
    Ok(next)
}

/// The terminal without echo while a turn runs (restored when dropped): type-ahead stays in
/// the terminal's input for the next prompt instead of being drawn into the answer.
struct NoEcho(Option<rustix::termios::Termios>);

impl NoEcho {
    fn new() -> NoEcho {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return NoEcho(None);
        }
        let Ok(before) = rustix::termios::tcgetattr(&stdin) else {
            return NoEcho(None);
        };
        let mut quiet = before.clone();
        quiet.local_modes.remove(rustix::termios::LocalModes::ECHO);
        match rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Now, &quiet) {
            Ok(()) => NoEcho(Some(before)),
            Err(_) => NoEcho(None),
        }
    }
}

impl Drop for NoEcho {
    fn drop(&mut self) {
        if let Some(t) = &self.0 {
            let _ = rustix::termios::tcsetattr(
                std::io::stdin(),
                rustix::termios::OptionalActions::Now,
                t,
            );
        }
    }
}

/// Runs a command the person typed after `!` in `root` (stdout and stderr together, no
/// stdin); its exit code and output, `None` when Ctrl-C stopped it.
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
        view.show(&out);
    }
    now
}

/// How outputs are drawn on the terminal.
struct View {
    streamed: render::Streamed,
    color: bool,
    line_open: bool,
    reasoning_lines: usize,
    folded: usize,
    /// Model requests answered this session, and the tokens the server said.
    requests: u64,
    tokens_in: u64,
    tokens_out: u64,
    /// The last request's prompt size (the context in use).
    last_input: Option<u64>,
    /// The answer's Markdown, drawn as it streams (where colour is on; else written as it
    /// came).
    md: Option<render::markdown::Markdown>,
    /// Whether a line not ended yet is shown as it comes (not while the prompt is read: lines
    /// are printed above it whole).
    live: bool,
    /// Whether the open line is reasoning's.
    reasoning_open: bool,
}

/// Reasoning lines shown before the rest is folded.
const REASONING_LINES: usize = 4;

impl View {
    fn show(&mut self, out: &Event) {
        let text = self.render(out);
        if !text.is_empty() {
            let mut stdout = std::io::stdout();
            let _ = write!(stdout, "{text}");
            let _ = stdout.flush();
        }
    }

    /// What an output looks like on the terminal (empty: nothing).
    fn render(&mut self, out: &Event) -> String {
        let mut stdout = String::new();
        match out {
            Event::Core(CoreEvent::TextDelta { text }) => {
                stdout.push_str(&self.fold_note());
                if self.reasoning_open && self.line_open {
                    stdout.push('\n');
                    self.line_open = false;
                }
                self.reasoning_open = false;
                match &mut self.md {
                    Some(md) => stdout.push_str(&md.push(text, self.live)),
                    None => {
                        stdout.push_str(text);
                        self.line_open = !text.ends_with('\n');
                    }
                }
            }
            Event::Core(CoreEvent::ReasoningDelta { text }) => {
                let shown_before = self.reasoning_lines;
                self.reasoning_lines += text.matches('\n').count();
                if shown_before < REASONING_LINES {
                    if let Some(md) = &mut self.md
                        && md.pending()
                    {
                        stdout.push_str(&md.finish());
                    }
                    stdout.push_str(&paint(text, Style::Dim, self.color));
                    self.line_open = !text.ends_with('\n');
                    self.reasoning_open = true;
                } else {
                    self.folded += text
                        .matches('\n')
                        .count()
                        .max(usize::from(self.folded == 0));
                }
            }
            Event::Core(CoreEvent::ModelAnswered { usage }) => {
                self.requests += 1;
                if let Some(u) = usage {
                    self.tokens_in += u.input_tokens;
                    self.tokens_out += u.output_tokens;
                    self.last_input = Some(u.input_tokens);
                }
            }
            Event::Core(CoreEvent::StepStarted { .. }) => {
                // A step's answer starts on a line of its own.
                stdout.push_str(&self.close_line());
                self.reasoning_lines = 0;
                self.folded = 0;
            }
            Event::Core(CoreEvent::TurnEnded { reason }) => {
                stdout.push_str(&self.fold_note());
                stdout.push_str(&self.close_line());
                if *reason != TurnEnd::Finished {
                    stdout.push_str(&paint(
                        &render::turn_end_line(reason),
                        Style::Yellow,
                        self.color,
                    ));
                    stdout.push('\n');
                }
            }
            Event::Core(CoreEvent::UserInput {
                origin: Origin::Person,
                ..
            }) => {}
            other => {
                let folded = self.streamed.fold(other, self.color);
                if let Some(text) = folded.unwrap_or_else(|| render::activity(other, self.color)) {
                    stdout.push_str(&self.fold_note());
                    stdout.push_str(&self.close_line());
                    stdout.push_str(&text);
                    self.line_open = !text.ends_with('\n');
                }
            }
        }
        stdout
    }

    /// `/status`.
    fn status(
        &self,
        id: &str,
        model: &str,
        endpoint: &str,
        mode: Mode,
        window: Option<u64>,
    ) -> String {
        let tokens = if self.tokens_in + self.tokens_out > 0 {
            format!(
                "in {} · out {} this session ({} request{})",
                self.tokens_in,
                self.tokens_out,
                self.requests,
                if self.requests == 1 { "" } else { "s" }
            )
        } else {
            format!("not said by the server ({} requests)", self.requests)
        };
        let context = match (self.last_input, window) {
            (Some(n), Some(w)) if w > 0 => format!("{n} of {w} tokens ({}%)", n * 100 / w),
            (Some(n), _) => format!("{n} tokens (the window is not known)"),
            (None, Some(w)) => format!("a {w}-token window, none said used yet"),
            (None, None) => "not known".to_owned(),
        };
        format!(
            "model     {model}\nendpoint  {endpoint}\nmode      {mode}\ntokens    {tokens}\ncontext   {context}\nsession   {id}"
        )
    }

    fn fold_note(&mut self) -> String {
        if self.folded == 0 {
            return String::new();
        }
        let mut s = self.close_line();
        s.push_str(&paint(
            &format!("  ⋯ {} more lines of reasoning folded", self.folded),
            Style::Dim,
            self.color,
        ));
        s.push('\n');
        self.folded = 0;
        self.reasoning_lines = 0;
        s
    }

    fn close_line(&mut self) -> String {
        if let Some(md) = &mut self.md
            && md.pending()
        {
            return md.finish();
        }
        if self.line_open {
            self.line_open = false;
            "\n".to_owned()
        } else {
            String::new()
        }
    }
}
