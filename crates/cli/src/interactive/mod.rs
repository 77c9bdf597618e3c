//! The interactive terminal: a prompt with line editing and history (rustyline), the answer
//! streamed as it comes, reasoning dimmed and folded, each tool call drawn by its block, a
//! spinner with the elapsed time while the model or a tool works, questions with the exact
//! command, the reason and the "always" pattern, Ctrl-C to cancel the running step (twice to
//! leave), Shift-Tab to cycle the mode, and the slash commands.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "the terminal: what the person reads is printed"
)]

mod checkpoints;
pub mod keys;
mod person;
mod reader;
mod session_loop;
mod term;

use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Result;
use harness_core::protocol::{Event as CoreEvent, Mode};

use crate::render::view::View;
use crate::render::{self, Style, paint};
use crate::session::SessionParts;
use crate::settings::Settings;
use harness_agent::{Event, Session};
use reader::{Read, Reader, start_reader};
use session_loop::SessionLoop;

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
        let next = SessionLoop::start(&settings, p, &mut reader, color)?
            .run()
            .await?;
        match next {
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

/// The checkpoints' files: this machine's, by their real paths. A restore runs with the
/// person's rights, outside the sandbox, so it neither reads, writes nor removes through a
/// symbolic link (one a command planted where a file or a directory was would lead it
/// elsewhere): such a file is not put back, and said.
struct HostFiles;

/// The symbolic link at `path` or among its directories, if there is one.
fn link_in_the_way(path: &std::path::Path) -> Option<&std::path::Path> {
    path.ancestors()
        .find(|a| std::fs::symlink_metadata(a).is_ok_and(|m| m.file_type().is_symlink()))
}

/// Refuses `path` when a symbolic link is in the way.
fn no_link(path: &str) -> Result<&std::path::Path, harness_agent::SeamError> {
    let p = std::path::Path::new(path);
    match link_in_the_way(p) {
        Some(link) => Err(harness_agent::SeamError::file(
            path,
            format!("{} is a symbolic link now, not followed", link.display()),
        )),
        None => Ok(p),
    }
}

impl harness_agent::checkpoint::CheckpointFiles for HostFiles {
    fn read(&self, path: &str) -> Option<Vec<u8>> {
        std::fs::read(no_link(path).ok()?).ok()
    }

    fn write(&self, path: &str, bytes: &[u8]) -> Result<(), harness_agent::SeamError> {
        let p = no_link(path)?;
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir).map_err(|e| harness_agent::SeamError::file(path, e))?;
        }
        harness_fs::write_atomic(p, bytes).map_err(|e| harness_agent::SeamError::file(path, e))
    }

    fn remove(&self, path: &str) -> Result<(), harness_agent::SeamError> {
        std::fs::remove_file(no_link(path)?).map_err(|e| harness_agent::SeamError::file(path, e))
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
