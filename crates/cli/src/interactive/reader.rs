//! The line editor (rustyline) in a thread of its own: Tab completion of slash commands and
//! `@paths`, Shift-Tab to cycle the mode, printing above the prompt while a line is read.

use std::io::Write as _;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use rustyline::error::ReadlineError;
use rustyline::history::DefaultHistory;
use rustyline::{
    Cmd, ConditionalEventHandler, Editor, EventContext, EventHandler, KeyCode, KeyEvent, Modifiers,
    RepeatCount,
};
use tokio::sync::mpsc;

use harness_agent::slash::COMMANDS;

/// Tab: a slash command's name (and `/mode`'s modes), or the path after an `@` (files and
/// directories under the session's directory).
struct Completion {
    root: std::path::PathBuf,
    /// The session's own commands (the person's prompt commands), set as a session starts.
    custom: Arc<Mutex<Vec<String>>>,
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
            let custom = self.custom.lock().map(|c| c.clone()).unwrap_or_default();
            let hits = COMMANDS
                .iter()
                .map(|c| c.to_string())
                .chain(custom)
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

/// Esc Esc at an empty prompt: the checkpoints' list (`/rewind`), as an accepted line.
/// rustyline reads an Esc as the start of a sequence and waits for the next key: Esc Esc
/// reaches here as one Esc (Esc and another key, as that key with Alt).
/// Only at the idle prompt (its flag), not at a question's.
struct Checkpoints {
    asked: Arc<Mutex<bool>>,
    idle: Arc<std::sync::atomic::AtomicBool>,
}

impl ConditionalEventHandler for Checkpoints {
    fn handle(
        &self,
        _evt: &rustyline::Event,
        _n: RepeatCount,
        _positive: bool,
        ctx: &EventContext,
    ) -> Option<Cmd> {
        if !ctx.line().is_empty() || !self.idle.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        if let Ok(mut asked) = self.asked.lock() {
            *asked = true;
        }
        Some(Cmd::AcceptLine)
    }
}

/// Enter after a `\` at the cursor: the line goes on on a new line, as in a shell (the `\` is
/// taken out when the line is read).
struct BackslashNewline;

impl ConditionalEventHandler for BackslashNewline {
    fn handle(
        &self,
        _evt: &rustyline::Event,
        _n: RepeatCount,
        _positive: bool,
        ctx: &EventContext,
    ) -> Option<Cmd> {
        ctx.line()[..ctx.pos()]
            .ends_with('\\')
            .then_some(Cmd::Newline)
    }
}

pub(super) enum Read {
    Line(String),
    Cycle(String),
    Interrupted,
    Eof,
}

/// The line editor in a thread of its own (it blocks).
pub(super) struct Reader {
    pub(super) requests: std::sync::mpsc::Sender<(String, String)>,
    pub(super) lines: mpsc::UnboundedReceiver<Read>,
    /// Prints above the prompt while a line is being read.
    printer: Option<Box<dyn rustyline::ExternalPrinter + Send>>,
    /// The names Tab completes beside the built-in commands.
    custom: Arc<Mutex<Vec<String>>>,
    /// Whether the line read is the idle prompt's (where Esc Esc lists the checkpoints).
    idle: Arc<std::sync::atomic::AtomicBool>,
}

pub(super) fn start_reader(history: std::path::PathBuf, root: &std::path::Path) -> Result<Reader> {
    let (req_tx, req_rx) = std::sync::mpsc::channel::<(String, String)>();
    let (line_tx, line_rx) = mpsc::unbounded_channel();
    let config = rustyline::Config::builder()
        .completion_type(rustyline::CompletionType::List)
        .build();
    let mut editor: Editor<Completion, DefaultHistory> = Editor::with_config(config)?;
    let custom = Arc::new(Mutex::new(Vec::new()));
    editor.set_helper(Some(Completion {
        root: root.to_path_buf(),
        custom: custom.clone(),
    }));
    let cycled = Arc::new(Mutex::new(None));
    editor.bind_sequence(
        KeyEvent(KeyCode::BackTab, Modifiers::NONE),
        EventHandler::Conditional(Box::new(CycleMode(cycled.clone()))),
    );
    let listed = Arc::new(Mutex::new(false));
    let idle = Arc::new(std::sync::atomic::AtomicBool::new(false));
    editor.bind_sequence(
        KeyEvent(KeyCode::Esc, Modifiers::NONE),
        EventHandler::Conditional(Box::new(Checkpoints {
            asked: listed.clone(),
            idle: idle.clone(),
        })),
    );
    // A prompt holds a newline: Alt-Enter, Ctrl-J, or `\` before Enter.
    editor.bind_sequence(
        KeyEvent(KeyCode::Enter, Modifiers::ALT),
        EventHandler::Simple(Cmd::Newline),
    );
    editor.bind_sequence(KeyEvent::ctrl('J'), EventHandler::Simple(Cmd::Newline));
    editor.bind_sequence(
        KeyEvent(KeyCode::Enter, Modifiers::NONE),
        EventHandler::Conditional(Box::new(BackslashNewline)),
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
            let list = listed
                .lock()
                .map(|mut l| std::mem::take(&mut *l))
                .unwrap_or(false);
            let read = match r {
                Ok(_) if cycle.is_some() => Read::Cycle(cycle.unwrap_or_default()),
                Ok(_) if list => Read::Line("/rewind".into()),
                Ok(line) => {
                    // A `\` that continued the line is not part of it.
                    let line = line.replace("\\\n", "\n");
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
        idle,
        custom,
        requests: req_tx,
        lines: line_rx,
        printer,
    })
}

impl Reader {
    /// The session's own command names, for Tab to complete beside the built-in ones.
    pub(super) fn set_commands(&self, names: Vec<String>) {
        if let Ok(mut c) = self.custom.lock() {
            *c = names;
        }
    }

    /// Prints while a line is being read (above the prompt when the terminal allows).
    pub(super) fn print(&mut self, text: String) {
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

    /// Marks the next line read as the idle prompt's.
    pub(super) fn at_idle(&self) {
        self.idle.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Reads a line for a question (not the idle prompt).
    pub(super) async fn read(&mut self, prompt: &str, initial: &str) -> Read {
        self.idle.store(false, std::sync::atomic::Ordering::SeqCst);
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
