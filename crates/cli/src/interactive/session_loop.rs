//! One session at the terminal, from its head line to "saved": the idle prompt (with what the
//! session says meanwhile drawn above it), the person's commands, and a turn's events until it
//! ends (its questions asked, Ctrl-C and Esc cancelling it).

use std::collections::VecDeque;
use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use harness_agent::checkpoint::{RESTORE_QUESTION, Restore, chat_rewound};
use harness_agent::custom::Commands;
use harness_agent::slash::{HELP, Line, next_mode, parse_line, parse_line_in};
use harness_agent::{Ended, Event, Events, Op, Query, Run, Session, Spawned};
use harness_core::protocol::{Answer, Event as CoreEvent, Mode, Origin, PermissionQuestion};
use harness_model::{CancellationToken, ModelClient};
use tokio::signal::unix::{Signal, SignalKind};
use tokio::sync::mpsc;

use super::checkpoints::Kept;
use super::reader::{Read, Reader};
use super::term::{Spinner, TypeAhead};
use super::{
    LEAVE_HINT, NO_PLAN, Next, Picked, again, export, page, person, pick_session,
    prompt_with_attachments, same_dir, shell_shown, show, stop_text, waiting_label, width,
};
use crate::render::view::View;
use crate::render::{self, Style, paint};
use crate::session::SessionParts;
use crate::settings::Settings;

/// What a line at the idle prompt leads to.
enum Step {
    /// Back to the prompt.
    Again,
    /// This session is over.
    Leave(Next),
    /// A prompt for the model.
    Send(String),
}

/// How an event of a running turn leaves the turn.
enum Flow {
    /// It goes on.
    Go,
    /// It ended.
    Ended,
    /// The person left.
    Leave(Next),
}

/// One session at the terminal: the spawned session, what draws it, and what the person did
/// in it so far.
pub(super) struct SessionLoop<'a> {
    settings: &'a Settings,
    reader: &'a mut Reader,
    color: bool,
    /// The server's address, as `/status` and `/model` say it.
    endpoint: String,
    /// To check a `/model NAME` against what the server serves.
    lister: ModelClient,
    /// The model's window, for the share of it the prompt shows.
    window: Option<u64>,
    /// The session's directory.
    root: PathBuf,
    /// What the session said while the person's command ran, drawn at the next idle prompt.
    held: VecDeque<Event>,
    /// The MCP servers, for their prompt commands.
    mcp: Option<Arc<harness_mcp::Mcp>>,
    /// The person's prompt commands.
    commands: Commands,
    /// The subagents the person defined (for `/agents`).
    agents: harness_agent::agents::Agents,
    id: String,
    model: String,
    session: Session,
    events: Events,
    run: Run,
    view: View,
    spinner: Spinner,
    mode: Mode,
    /// What the person ran with `!`, for the model with the next prompt.
    ran: Vec<String>,
    /// The session's turns as checkpoints (`/rewind`, `/undo`).
    kept: Kept,
    /// The session's end when it stopped on its own (a store it cannot write: a full disk);
    /// the person is told at once, and again at each prompt.
    stopped: Option<harness_agent::Result<Ended>>,
    /// What they were told.
    stopped_text: String,
    /// What the next prompt starts with (typed during the last turn, or before a mode cycle).
    initial: String,
    /// Lines typed (ended with Enter) while a turn ran: sent in order, as the prompt would.
    typed_lines: VecDeque<String>,
    /// Esc pressed while a turn runs.
    esc_tx: mpsc::UnboundedSender<()>,
    esc_rx: mpsc::UnboundedReceiver<()>,
    /// The last Ctrl-C, busy or idle: a second one soon after leaves.
    last_interrupt: Option<Instant>,
    /// One listener for the whole session, so a Ctrl-C between a turn's end and the next
    /// prompt is not lost.
    sigint: Signal,
}

impl<'a> SessionLoop<'a> {
    /// Spawns the session from its parts and draws its head line (and a resumed session's
    /// past).
    pub(super) fn start(
        settings: &'a Settings,
        parts: SessionParts,
        reader: &'a mut Reader,
        color: bool,
    ) -> Result<SessionLoop<'a>> {
        let endpoint = parts.client.endpoint().base_url.clone();
        let lister = parts.client.clone();
        let window = parts.client.model().input.or(parts.client.model().context);
        let saved_mode = parts.meta.mode;
        let started_in = parts.meta.cwd.clone();
        let root = parts.exec.root().to_path_buf();
        let mcp = parts.mcp.clone();
        let commands = crate::custom::load(&root, &settings.dirs.config_file, mcp.as_deref());
        reader.set_commands(commands.iter().map(|c| c.name.clone()).collect());
        let agents = parts.agents.clone();
        let session_dir = crate::store::Store::new(settings.dirs.sessions()).dir(&parts.meta.id);
        let mut builder = parts.into_builder().answers_questions(true);
        let kept = Kept::open(&session_dir, &root, builder.resumed());
        // What the resumed session said, drawn again.
        let replay = builder
            .resumed()
            .map(|entries| render::replay(entries, color));
        let mut mode = settings.mode;
        // A resumed session goes on in the mode it was left in.
        let mut restored = "";
        if let (true, Some(saved)) = (replay.is_some(), saved_mode)
            && saved != mode
        {
            builder = builder.saved_mode(saved);
            mode = saved;
            restored = " (restored)";
        }
        let Spawned {
            session,
            mut events,
            run,
        } = builder.spawn()?;
        if !restored.is_empty() {
            // Said in the head line, not again as a change.
            events.drain();
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
        let mut view = View::new(color, width());
        view.set_price(settings.price(&model));
        let (esc_tx, esc_rx) = mpsc::unbounded_channel();
        let sigint = tokio::signal::unix::signal(SignalKind::interrupt())?;
        Ok(SessionLoop {
            settings,
            reader,
            color,
            endpoint,
            lister,
            window,
            root,
            held: VecDeque::new(),
            mcp,
            commands,
            agents,
            id,
            model,
            session,
            events,
            run,
            view,
            spinner,
            mode,
            ran: Vec::new(),
            kept,
            stopped: None,
            stopped_text: String::new(),
            initial: String::new(),
            typed_lines: VecDeque::new(),
            esc_tx,
            esc_rx,
            last_interrupt: None,
            sigint,
        })
    }

    /// Prompts, commands and turns until the person leaves or asks for another session; then
    /// the session ends and is saved.
    pub(super) async fn run(mut self) -> Result<Next> {
        let next = loop {
            let read = self.read_idle().await;
            let step = match read {
                Read::Line(line) => self.command(line).await,
                Read::Cycle(rest) => {
                    self.change_mode(next_mode(self.mode)).await;
                    self.initial = rest;
                    Step::Again
                }
                Read::Interrupted => {
                    if again(&mut self.last_interrupt) {
                        Step::Leave(Next::Quit)
                    } else {
                        println!("{}", paint(LEAVE_HINT, Style::Dim, self.color));
                        Step::Again
                    }
                }
                Read::Eof => Step::Leave(Next::Quit),
            };
            match step {
                Step::Again => {}
                Step::Leave(next) => break next,
                Step::Send(text) => {
                    if let Some(next) = self.turn(text).await {
                        break next;
                    }
                }
            }
        };
        self.finish(next).await
    }

    /// Ends the session (said when it stopped with an error the person was not shown) and
    /// says where it is saved.
    async fn finish(self, next: Next) -> Result<Next> {
        let SessionLoop {
            session,
            run,
            stopped,
            spinner,
            id,
            color,
            ..
        } = self;
        spinner.stop();
        drop(session);
        let said = stopped.is_some();
        let done = match stopped {
            Some(done) => done,
            None => run.await,
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

    // ----- the idle prompt -----

    /// The prompt's text: the mode, the share of the window used and the cost so far.
    fn prompt(&self) -> String {
        // The context used, once the server said it.
        let mut used = match (self.view.last_input(), self.window) {
            (Some(n), Some(w)) if w > 0 => format!(" · {}%", n * 100 / w),
            _ => String::new(),
        };
        // What the session cost, once a request had a price.
        if let Some(cost) = self.view.cost().filter(|c| *c > 0.0) {
            used.push_str(&format!(" · {}", render::view::usd(cost)));
        }
        format!(
            "{} ",
            paint(&format!("{}{used} ›", self.mode), Style::Cyan, self.color)
        )
    }

    /// What the person does at the idle prompt: a line typed during the last turn, else what
    /// the reader gets, with what the session says meanwhile drawn above the prompt.
    async fn read_idle(&mut self) -> Read {
        let prompt = self.prompt();
        if let Some(line) = self.typed_lines.pop_front() {
            println!("{prompt}{line}");
            return Read::Line(line);
        }
        let initial = std::mem::take(&mut self.initial);
        self.reader.at_idle();
        if self.reader.requests.send((prompt, initial)).is_err() {
            return Read::Eof;
        }
        // While the person types, a job's end may start a turn of its own: show it above the
        // prompt, whole lines at a time.
        let mut pending = String::new();
        self.view.set_live(false);
        while let Some(out) = self.held.pop_front() {
            self.idle_event(&out, &mut pending);
        }
        loop {
            tokio::select! {
                r = self.reader.lines.recv() => return r.unwrap_or(Read::Eof),
                done = &mut self.run, if self.stopped.is_none() => {
                    let text = self.stopped_with(done);
                    self.reader.print(text);
                }
                _ = self.sigint.recv() => {
                    // Sent before the prompt took the terminal: counts for the next one.
                    self.last_interrupt = Some(Instant::now());
                }
                out = self.events.recv(), if self.stopped.is_none() => match out {
                    Some(out) => self.idle_event(&out, &mut pending),
                    // The events end with the session's run: it stopped on its own.
                    None => {
                        let done = (&mut self.run).await;
                        let text = self.stopped_with(done);
                        self.reader.print(text);
                    }
                },
            }
        }
    }

    /// Draws an event that came while idle above the prompt, whole lines at a time (`pending`
    /// holds the rest).
    fn idle_event(&mut self, out: &Event, pending: &mut String) {
        self.kept.observe(out);
        if let Event::Core(CoreEvent::ModeChanged { mode }) = out {
            self.mode = *mode;
        }
        pending.push_str(&self.view.render(out));
        if matches!(out, Event::Core(CoreEvent::TurnEnded { .. })) {
            self.view.line_ended();
            let text = std::mem::take(pending);
            self.reader.print(text.trim_end_matches('\n').to_owned());
        } else if let Some(cut) = pending.rfind('\n') {
            let rest = pending.split_off(cut + 1);
            let text = std::mem::replace(pending, rest);
            self.reader.print(text.trim_end_matches('\n').to_owned());
        }
    }

    /// Notes that the session stopped on its own; what the person is told.
    fn stopped_with(&mut self, done: harness_agent::Result<Ended>) -> String {
        self.stopped_text = stop_text(&done, self.color);
        self.stopped = Some(done);
        self.stopped_text.clone()
    }

    // ----- the person's commands -----

    /// A line typed at the prompt: a command done here, or the prompt to send.
    async fn command(&mut self, line: String) -> Step {
        match parse_line_in(&line, &self.commands) {
            Line::Empty => Step::Again,
            Line::Quit => Step::Leave(Next::Quit),
            Line::New => Step::Leave(Next::New(self.mode)),
            Line::Resume(pick) => {
                let picked = pick_session(
                    pick,
                    self.settings,
                    &self.root,
                    &self.id,
                    self.reader,
                    self.color,
                )
                .await;
                match picked {
                    Picked::Quit => Step::Leave(Next::Quit),
                    Picked::Stay => Step::Again,
                    Picked::Other(other) => Step::Leave(Next::Resume(other)),
                }
            }
            Line::Status => {
                let status = self.view.status(
                    &self.id,
                    &self.model,
                    &self.endpoint,
                    self.mode,
                    self.window,
                );
                println!("{status}");
                Step::Again
            }
            Line::Undo => {
                let undone = self.kept.undo();
                println!("{}", undone.said);
                self.ran.extend(undone.for_model());
                Step::Again
            }
            Line::Export(file) => {
                let said = export(self.settings, &self.session, &self.root, file.as_deref());
                println!("{said}");
                Step::Again
            }
            Line::Help => {
                println!("{HELP}");
                print!("{}", self.commands.help());
                Step::Again
            }
            Line::Agents => {
                print!("{}", self.agents.listing(harness_spec::Project::Cli));
                Step::Again
            }
            Line::Shell(command) => self.shell(&command).await,
            Line::Custom { name, args } => self.custom(&name, &args).await,
            Line::Unknown(msg) => {
                println!("{msg}");
                Step::Again
            }
            Line::Mode(None) => {
                println!("mode: {}", self.mode);
                Step::Again
            }
            Line::Mode(Some(m)) => {
                self.change_mode(m).await;
                Step::Again
            }
            Line::Compact => {
                self.spinner.start("compacting");
                let answer = self.session.compact().await;
                self.spinner.stop();
                if let Ok(answer) = answer {
                    println!("{answer}");
                }
                Step::Again
            }
            Line::Model(Some(name)) if !self.serves(&name).await => Step::Again,
            Line::Model(_) | Line::Plan | Line::Jobs | Line::Recall(_) => self.query(&line).await,
            Line::Rewind { turn: 0, .. } => {
                println!("{}", self.kept.list());
                Step::Again
            }
            Line::Rewind { turn, what } => self.rewind(turn, what).await,
            Line::Prompt(p) => Step::Send(p),
        }
    }

    /// `/rewind N [code|chat|both]`: what to restore asked when not said; the code first,
    /// then the conversation.
    async fn rewind(&mut self, turn: u32, what: Option<Restore>) -> Step {
        if let Err(e) = self.kept.check(turn) {
            println!("{e}");
            return Step::Again;
        }
        let what = match what {
            Some(w) => w,
            None => {
                let asked = paint(&format!("{RESTORE_QUESTION} › "), Style::Yellow, self.color);
                let read = self.reader.read(&asked, "").await;
                let word = match &read {
                    Read::Line(l) => l.trim(),
                    Read::Eof => return Step::Leave(Next::Quit),
                    _ => "-",
                };
                match word {
                    "" => Restore::Both,
                    w => match Restore::parse(w) {
                        Some(w) => w,
                        None => {
                            println!("nothing restored");
                            return Step::Again;
                        }
                    },
                }
            }
        };
        // The conversation first: a turn compacted away is refused before any file changes.
        if what.chat() {
            let kept = match self.session.keep(turn - 1).await {
                Ok(kept) => kept.map(drop),
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = kept {
                println!("{e}");
                return Step::Again;
            }
        }
        if what.code() {
            match self.kept.restore(turn) {
                Ok(done) => {
                    println!("{}", done.said);
                    // The model is told unless its conversation went back too.
                    if !what.chat() {
                        self.ran.extend(done.for_model());
                    }
                }
                Err(e) => println!("{e}"),
            }
        }
        if what.chat() {
            self.kept.rewound(turn);
            println!("{}", chat_rewound(turn));
        }
        Step::Again
    }

    /// `!command`: run by the session as the person's own, its output shown and kept for the
    /// model.
    async fn shell(&mut self, command: &str) -> Step {
        match self.run_own(command).await {
            person::Ran::Output(code, output) => {
                print!("{}", shell_shown(&output, code, self.color));
                self.ran
                    .push(harness_agent::person::shell(command, code, &output));
                Step::Again
            }
            person::Ran::NotRun => Step::Again,
            person::Ran::Quit => Step::Leave(Next::Quit),
        }
    }

    /// Has the session run the person's `command` ([`Op::Shell`]): its question asked at the
    /// prompt, a Ctrl-C stops it. What else the session says meanwhile is drawn at the next
    /// idle prompt, as it came.
    async fn run_own(&mut self, command: &str) -> person::Ran {
        self.session.submit(Op::Shell {
            command: command.to_owned(),
        });
        loop {
            tokio::select! {
                out = self.events.recv() => match out {
                    Some(Event::ShellAsked { call_id, question }) => {
                        let answer = person::ask(&question, self.reader, self.color).await;
                        let left = answer.is_none();
                        self.session.submit(Op::Answer {
                            call_id,
                            answer: answer.unwrap_or(Answer::Deny { feedback: None }),
                        });
                        if left {
                            return person::Ran::Quit;
                        }
                    }
                    Some(Event::ShellEnded { end, .. }) => return person::ended(end, self.color),
                    Some(other) => self.held.push_back(other),
                    None => return person::Ran::NotRun,
                },
                _ = self.sigint.recv() => {
                    self.session.submit(Op::Cancel);
                }
            }
        }
    }

    /// A prompt command of the person's or an MCP server's: the prompt it expands to, its
    /// ``!`command` `` spans run by the session and replaced by their output.
    async fn custom(&mut self, name: &str, args: &str) -> Step {
        let expanded =
            person::expand(&self.commands, self.mcp.as_deref(), name, args, self.color).await;
        let Some(text) = expanded else {
            return Step::Again;
        };
        let mut outputs = Vec::new();
        for c in harness_agent::custom::inline_commands(&text) {
            println!("{}", paint(&format!("! {c}"), Style::Dim, self.color));
            match self.run_own(&c).await {
                person::Ran::Output(_, output) => outputs.push(output),
                person::Ran::NotRun => return Step::Again,
                person::Ran::Quit => return Step::Leave(Next::Quit),
            }
        }
        Step::Send(harness_agent::custom::replace_inline(&text, &outputs))
    }

    /// Whether the server serves model `name`; when it does not, the person is told what it
    /// serves. A server that cannot say counts as serving it.
    async fn serves(&self, name: &str) -> bool {
        let token = CancellationToken::new();
        if self.lister.serves(name, &token).await.unwrap_or(true) {
            return true;
        }
        let list = self
            .lister
            .list_models(&CancellationToken::new())
            .await
            .unwrap_or_default();
        println!(
            "{} does not serve {name:?} (it serves {}): the model is not changed",
            self.endpoint,
            list.join(", ")
        );
        false
    }

    /// `/model`, `/plan`, `/jobs` and `/recall`: asked of the session, its answer
    /// shown (a plan as a card, a recalled text a page at a time).
    async fn query(&mut self, line: &str) -> Step {
        let q = match parse_line(line) {
            Line::Model(name) => Query::Model(name),
            Line::Plan => Query::Plan,
            Line::Jobs => Query::Jobs,
            Line::Recall(id) => Query::Recall(id),
            _ => return Step::Again,
        };
        let paged = matches!(q, Query::Recall(_));
        let switched = match &q {
            Query::Model(Some(name)) => Some(name.clone()),
            _ => None,
        };
        let plan = matches!(q, Query::Plan);
        let Ok(answer) = self.session.query(q).await else {
            return Step::Again;
        };
        // The new model's requests are counted at its price.
        if let Some(name) = switched
            && answer == format!("model: {name}")
        {
            self.view.set_price(self.settings.price(&name));
        }
        if plan && answer != NO_PLAN {
            print!("{}", render::text_card(&answer, self.color));
        } else if paged {
            if !page(&answer, self.reader, self.color).await {
                return Step::Leave(Next::Quit);
            }
        } else {
            println!("{answer}");
        }
        Step::Again
    }

    /// Asks the session for a mode change; the mode is the one it is in after it (the one
    /// asked for when the session has gone), with what it said meanwhile drawn.
    async fn change_mode(&mut self, asked: Mode) {
        self.mode = self.session.set_mode(asked).await.unwrap_or(asked);
        self.spinner.stop();
        for out in self.events.drain() {
            show(&mut self.view, &out);
        }
    }

    // ----- a turn -----

    /// Sends a prompt (with what it attaches) and shows its turn until it ends; what is typed
    /// meanwhile is not echoed into the answer, and waits for the next prompt. `Some` when the
    /// session is over.
    async fn turn(&mut self, text: String) -> Option<Next> {
        self.kept.before_prompt(&text);
        let (text, images) = prompt_with_attachments(text, &mut self.ran, &self.root, self.color);
        if self.stopped.is_some() {
            println!("{}", self.stopped_text);
            return None;
        }
        self.session.submit(Op::Prompt {
            text,
            origin: Origin::Person,
            images,
        });
        while self.esc_rx.try_recv().is_ok() {}
        let mut typing = TypeAhead::start(self.esc_tx.clone());
        self.view.set_live(true);
        self.spinner.start("thinking");
        if let Some(next) = self.busy(&mut typing).await {
            return Some(next);
        }
        // What was typed meanwhile goes to the next prompt.
        let typed = typing.finish();
        self.typed_lines.extend(typed.lines);
        self.initial = typed.rest;
        None
    }

    /// The running turn's events, Ctrl-C and Esc, until the turn ends or the session stops.
    async fn busy(&mut self, typing: &mut TypeAhead) -> Option<Next> {
        // Whether the person's prompt has started the turn (a job's wake-up may run first).
        let mut ours = false;
        loop {
            tokio::select! {
                done = &mut self.run, if self.stopped.is_none() => {
                    self.spinner.stop();
                    // What it sent before it stopped.
                    while let Some(out) = self.events.try_recv() {
                        show(&mut self.view, &out);
                    }
                    print!("{}", self.view.close_line());
                    let text = self.stopped_with(done);
                    println!("{text}");
                    return None;
                }
                out = self.events.recv() => {
                    // The events end with the session's run: it stopped on its own.
                    let Some(out) = out else {
                        if self.stopped.is_some() {
                            return Some(Next::Quit);
                        }
                        let done = (&mut self.run).await;
                        self.spinner.stop();
                        print!("{}", self.view.close_line());
                        let text = self.stopped_with(done);
                        println!("{text}");
                        return None;
                    };
                    match self.turn_event(out, typing, &mut ours).await {
                        Flow::Go => {}
                        Flow::Ended => return None,
                        Flow::Leave(next) => return Some(next),
                    }
                }
                _ = self.sigint.recv() => {
                    self.spinner.stop();
                    if again(&mut self.last_interrupt) {
                        return Some(Next::Quit);
                    }
                    self.cancel("cancelling… (Ctrl-C again to leave)");
                }
                Some(()) = self.esc_rx.recv() => {
                    self.spinner.stop();
                    self.cancel("cancelling… (Esc)");
                }
            }
        }
    }

    /// Cancels the running step, saying so under what was drawn.
    fn cancel(&mut self, said: &str) {
        print!("{}", self.view.close_line());
        let _ = std::io::stdout().flush();
        eprintln!("{}", paint(said, Style::Yellow, self.color));
        self.session.submit(Op::Cancel);
    }

    /// One event of the running turn: drawn, its question asked, the spinner told what is
    /// awaited next.
    async fn turn_event(&mut self, out: Event, typing: &mut TypeAhead, ours: &mut bool) -> Flow {
        if let Event::Core(CoreEvent::ToolCallAsked { call_id, question }) = &out {
            self.spinner.stop();
            show(&mut self.view, &out);
            typing.pause();
            let Some((answer, stop)) = self.approval(question).await else {
                return Flow::Leave(Next::Quit);
            };
            if stop {
                self.last_interrupt = Some(Instant::now());
                eprintln!(
                    "{}",
                    paint(
                        "cancelling… (Ctrl-C again to leave)",
                        Style::Yellow,
                        self.color
                    )
                );
                self.session.submit(Op::Cancel);
            }
            self.session.submit(Op::Answer {
                call_id: call_id.clone(),
                answer,
            });
            typing.resume();
            self.spinner.start("working");
            return Flow::Go;
        }
        if let Event::Question {
            call_id, options, ..
        } = &out
        {
            self.spinner.stop();
            show(&mut self.view, &out);
            typing.pause();
            let prompt = paint("answer › ", Style::Yellow, self.color);
            let reply = match self.reader.read(&prompt, "").await {
                Read::Line(l) => Some(harness_agent::typed::question_reply(&l, options)),
                Read::Eof => return Flow::Leave(Next::Quit),
                _ => None,
            };
            self.session.submit(Op::Reply {
                call_id: call_id.clone(),
                text: reply,
            });
            typing.resume();
            self.spinner.start("thinking");
            return Flow::Go;
        }
        if let Event::Core(CoreEvent::ModeChanged { mode }) = &out {
            self.mode = *mode;
        }
        if matches!(
            &out,
            Event::Core(CoreEvent::UserInput {
                origin: Origin::Person,
                ..
            })
        ) {
            *ours = true;
        }
        self.kept.observe(&out);
        let ended = *ours && matches!(&out, Event::Core(CoreEvent::TurnEnded { .. }));
        self.spinner.stop();
        show(&mut self.view, &out);
        if ended {
            return Flow::Ended;
        }
        if let Some(label) = waiting_label(&out) {
            self.spinner.start(&label);
        } else if let Some(now) = self.view.following(&out) {
            self.spinner.follow(&now);
        }
        Flow::Go
    }

    /// Asks the person about a call: their answer, and whether they pressed Ctrl-C (which
    /// denies it and stops the turn). `None` when the input ended.
    async fn approval(&mut self, question: &PermissionQuestion) -> Option<(Answer, bool)> {
        let always = question.pattern.is_some();
        let keys = harness_agent::typed::answer_keys(question);
        let prompt = paint(&format!("allow? {keys} "), Style::Yellow, self.color);
        loop {
            match self.reader.read(&prompt, "").await {
                Read::Line(l) => match harness_agent::typed::parse_answer(&l, always) {
                    Some(a) => return Some((a, false)),
                    None => println!("{}", harness_agent::typed::NO_ALWAYS),
                },
                Read::Eof => return None,
                // Ctrl-C stops the turn, as it does while the turn runs.
                Read::Interrupted => return Some((Answer::Deny { feedback: None }, true)),
                Read::Cycle(_) => return Some((Answer::Deny { feedback: None }, false)),
            }
        }
    }
}
