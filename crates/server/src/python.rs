//! The tools that need a chat's page: a chat's world ([`PageWorld`]) is the server's world
//! ([`crate::world::ChatWorld`]) plus `python`, which runs in the chat's open page (Pyodide in a
//! sandboxed iframe, `ui/app.js`).
//!
//! `python` is an `execute` call as any other: the mode decides whether the person is asked,
//! and the question shows the code and the files it will save. Before it is asked, the call's
//! `files` must be readable text and each `save` path either new or read at its current
//! version (a `files` entry counts as read). Once approved it is put to the page as a `python`
//! event on the stream (`{"type": "python", "call_id", "ask", "code", "files", "save",
//! "timeout", "cwd"}`, paths as the view names them); the page fetches `files` through the view
//! API, runs the code and answers `POST /api/python/{ask}` with `{"stdout", "stderr", "result",
//! "error", "saved": {PATH: BASE64}, "duration_ms"}`. The server keeps only the paths the call
//! listed in `save`, through the chat's own write path (the view's levels, read before
//! replaced, one atomic write): whatever else the page or the code claims is refused. With no
//! page of the chat open the call answers the spec's `unavailable` text, word for word; so
//! does a call whose page goes before it answers.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, Weak};

use base64::Engine;
use harness_agent::{BoxFuture, CallContext, Ran, RegisteredTool, ShownFile, ToolWorld};
use harness_core::offer::{OfferContext, Offering};
use harness_core::protocol::{Mode, SessionKind, ToolCall};
use harness_loop::session::ToolOutcome;
use harness_spec::{Project, Spec};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::App;
use crate::page::{Answerer, AskKind};
use crate::world::ChatWorld;

/// The Pyodide version the runner loads (npm `pyodide`; its files are served by the pages'
/// `pyodide` module).
pub const PYODIDE_VERSION: &str = "314.0.7";

/// Where the Pyodide files of a data directory are.
pub fn pyodide_dir(data: &std::path::Path) -> std::path::PathBuf {
    data.join("pyodide").join(PYODIDE_VERSION)
}

/// Whether the data directory holds the Pyodide files the runner loads first.
pub fn pyodide_installed(data: &std::path::Path) -> bool {
    pyodide_dir(data).join("pyodide.mjs").is_file()
}

/// The tool's name.
const PYTHON: &str = "python";

/// What `python`'s `{{python_packages}}` says: the npm distribution holds the standard library
/// only.
const PACKAGES: &str = "only Python's standard library can be imported.";

/// What a chat's world knows of its page.
#[derive(Clone)]
pub struct PageLink {
    app: Weak<App>,
    user_id: i64,
    chat: Arc<OnceLock<String>>,
    /// Whether a page of the chat was open when the session was built.
    page: bool,
}

impl PageLink {
    /// The link of `user_id`'s chat `chat` (`None`: not made yet, see [`PageLink::set_chat`]).
    pub fn new(app: &Arc<App>, user_id: i64, chat: Option<&str>, page: bool) -> PageLink {
        let cell = OnceLock::new();
        if let Some(c) = chat {
            let _ = cell.set(c.to_owned());
        }
        PageLink {
            app: Arc::downgrade(app),
            user_id,
            chat: Arc::new(cell),
            page,
        }
    }

    /// The chat's id, once the session made it.
    pub fn set_chat(&self, chat: &str) {
        let _ = self.chat.set(chat.to_owned());
    }

    /// Where the chat's id is kept once the session made it (the forge verbs' branch).
    pub fn chat_cell(&self) -> Arc<OnceLock<String>> {
        self.chat.clone()
    }
}

/// The spec's `python` tool as offered where `page` holds: its filled description and
/// parameters.
fn python_tool() -> Option<RegisteredTool> {
    let spec = Spec::embedded();
    let mut cx = OfferContext::new(Project::Llembas, SessionKind::Chat, Mode::Auto);
    cx.holds.page = true;
    cx.holds.display = true;
    cx.values
        .insert("python_packages".to_owned(), PACKAGES.to_owned());
    cx.values.extend(harness_agent::runtime_values());
    let offering = Offering::new(spec, cx).ok()?;
    let t = offering.tools.iter().find(|t| t.name == PYTHON)?;
    Some(RegisteredTool {
        name: t.name.clone(),
        description: t.description.clone(),
        parameters: t.parameters.clone(),
        risk: t.tool.risk,
        exclusive: t.tool.exclusive,
        deferred: false,
    })
}

/// The spec's `unavailable` text of `python`, word for word.
pub fn unavailable() -> String {
    let spec = Spec::embedded();
    spec.tool(PYTHON)
        .and_then(|t| harness_core::offer::unavailable(t, &harness_core::offer::Holds::default()))
        .unwrap_or("Python cannot run now.")
        .to_owned()
}

/// A chat's world: the server's, plus the tools that run in its page.
pub struct PageWorld {
    inner: ChatWorld,
    link: PageLink,
}

impl PageWorld {
    /// `inner` with `python` (offered when the link's page was open).
    pub fn new(inner: ChatWorld, link: PageLink) -> PageWorld {
        PageWorld { inner, link }
    }

    /// Why Python cannot run now (no page of the chat open, no Pyodide files), if it cannot.
    fn cannot_run(&self) -> Option<String> {
        let (Some(app), Some(chat)) = (self.link.app.upgrade(), self.link.chat.get()) else {
            return Some(unavailable());
        };
        if !app.pages.attached(chat) {
            return Some(unavailable());
        }
        if !pyodide_installed(&app.data) {
            return Some(format!(
                "Python cannot run here: this server has no Pyodide files ({} is missing). \
                 The server's README says how to add them with one command.",
                pyodide_dir(&app.data).join("pyodide.mjs").display()
            ));
        }
        None
    }

    async fn python(&self, call: &ToolCall, cx: &CallContext) -> ToolOutcome {
        if let Some(why) = self.cannot_run() {
            return ToolOutcome::error(&call.id, why);
        }
        let (Some(app), Some(chat)) = (self.link.app.upgrade(), self.link.chat.get()) else {
            return ToolOutcome::error(&call.id, unavailable());
        };
        let args = match Args::of(call, &self.inner) {
            Ok(a) => a,
            Err(e) => return ToolOutcome::error(&call.id, e),
        };
        // The files the code reads, recorded as read: the run may then replace them.
        for path in &args.files {
            if let Err(e) = self.inner.read_for_program(path) {
                return ToolOutcome::error(&call.id, e);
            }
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let ask = match app.pages.ask(
            self.link.user_id,
            chat,
            &call.id,
            AskKind::Python,
            Answerer::Tool(tx),
        ) {
            Ok(id) => id,
            Err(e) => return ToolOutcome::error(&call.id, e.to_string()),
        };
        let run = app.chats.run_of(chat);
        let recorded = crate::page::record_ask(
            &app,
            &ask,
            self.link.user_id,
            chat,
            run.as_deref(),
            AskKind::Python,
        )
        .await;
        if let Err(e) = recorded {
            return ToolOutcome::error(&call.id, e.to_string());
        }
        let event = json!({
            "type": "python",
            "call_id": call.id,
            "ask": ask,
            "code": args.code,
            "files": args.files,
            "save": args.save,
            "timeout": call.arguments.get("timeout").and_then(Value::as_u64),
            "cwd": self.inner.place(),
        });
        if let Err(e) = app
            .hub
            .append(self.link.user_id, chat, run.as_deref(), event)
            .await
        {
            return ToolOutcome::error(&call.id, e.to_string());
        }
        let answered = tokio::select! {
            got = rx => got.ok().flatten(),
            () = cx.cancel.cancelled() => return ToolOutcome::error(&call.id, ""),
        };
        let Some(v) = answered else {
            return ToolOutcome::error(&call.id, unavailable());
        };
        let r: RunResult = match serde_json::from_value(v) {
            Ok(r) => r,
            Err(e) => {
                return ToolOutcome::error(
                    &call.id,
                    format!("the page's answer is not valid: {e}"),
                );
            }
        };
        let kept = self.keep(&args.save, &r.saved, app.max_file_bytes).await;
        result_text(&call.id, &r, &kept)
    }

    /// Keeps what the run saved: only the paths the call listed, each through the chat's write
    /// path; a listed path the run did not write, or one it was refused, is said not saved.
    async fn keep(&self, listed: &[String], saved: &BTreeMap<String, String>, max: usize) -> Kept {
        let mut kept = Kept::default();
        for (path, encoded) in saved {
            let p = self.inner.resolve(path);
            if !listed.contains(&p) {
                kept.unsaved
                    .push((p, "not in the call's `save` list".to_owned()));
                continue;
            }
            let bytes = match base64::engine::general_purpose::STANDARD.decode(encoded) {
                Ok(b) => b,
                Err(e) => {
                    kept.unsaved
                        .push((p, format!("the page sent it garbled ({e})")));
                    continue;
                }
            };
            if bytes.len() > max {
                let n = bytes.len();
                kept.unsaved
                    .push((p, format!("{n} bytes, over the server's limit of {max}")));
                continue;
            }
            match self.inner.save_for_program(&p, &bytes).await {
                Ok(()) => kept.written.push((p, bytes.len())),
                Err(e) => kept.unsaved.push((p, e)),
            }
        }
        for p in listed {
            let sent = saved.keys().any(|s| self.inner.resolve(s) == *p);
            if !sent {
                kept.unsaved
                    .push((p.clone(), "the code did not write it".to_owned()));
            }
        }
        kept
    }

    /// Why a `python` call cannot run, checked before the person is asked: a page to run it,
    /// its arguments, each of its `files` readable text, each `save` path new or read at its
    /// current version.
    fn check_python(&self, call: &ToolCall) -> Option<String> {
        if let Some(why) = self.cannot_run() {
            return Some(why);
        }
        let args = match Args::of(call, &self.inner) {
            Ok(a) => a,
            Err(e) => return Some(e),
        };
        for path in &args.files {
            if let Err(e) = self.inner.read_for_show(path) {
                return Some(e.to_string());
            }
        }
        args.save
            .iter()
            .filter(|p| !args.files.contains(p))
            .find_map(|p| self.inner.check_program_save(p).err())
    }
}

/// A `python` call's arguments, its paths as the view names them.
struct Args {
    code: String,
    files: Vec<String>,
    save: Vec<String>,
}

impl Args {
    fn of(call: &ToolCall, world: &ChatWorld) -> Result<Args, String> {
        let a = &call.arguments;
        let code = match a.get("code") {
            Some(Value::String(c)) => c.clone(),
            Some(_) => return Err("python: `code` must be a string".to_owned()),
            None => return Err("python: `code` is missing".to_owned()),
        };
        let paths = |key: &str| -> Result<Vec<String>, String> {
            match a.get(key) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Array(list)) => list
                    .iter()
                    .map(|v| {
                        v.as_str().map(|p| world.resolve(p)).ok_or_else(|| {
                            format!("python: `{key}` must be a list of paths (got {v})")
                        })
                    })
                    .collect(),
                Some(v) => Err(format!("python: `{key}` must be a list of paths (got {v})")),
            }
        };
        Ok(Args {
            code,
            files: paths("files")?,
            save: paths("save")?,
        })
    }
}

/// What the server kept of a run's files.
#[derive(Debug, Default)]
struct Kept {
    written: Vec<(String, usize)>,
    unsaved: Vec<(String, String)>,
}

/// What the page says a run did.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RunResult {
    stdout: String,
    stderr: String,
    result: Option<String>,
    error: Option<String>,
    /// The files the run wrote, base64: kept only where the call listed them.
    saved: BTreeMap<String, String>,
    duration_ms: u64,
}

/// The call's result from the page's answer and what the server kept: what it printed, its
/// last value, the files kept and not, how long it took, and its error.
fn result_text(call_id: &str, r: &RunResult, kept: &Kept) -> ToolOutcome {
    let mut parts = Vec::new();
    if !r.stdout.is_empty() {
        parts.push(r.stdout.trim_end_matches('\n').to_owned());
    }
    if let Some(value) = &r.result {
        parts.push(format!("Value: {value}"));
    }
    if !r.stderr.is_empty() {
        parts.push(format!("stderr:\n{}", r.stderr.trim_end_matches('\n')));
    }
    for (path, bytes) in &kept.written {
        parts.push(format!("Saved {path} ({bytes} bytes)"));
    }
    for (path, error) in &kept.unsaved {
        parts.push(format!("Not saved {path}: {error}"));
    }
    if let Some(e) = &r.error {
        parts.push(e.trim_end_matches('\n').to_owned());
    }
    parts.push(format!("({:.1} s)", r.duration_ms as f64 / 1000.0));
    let text = parts.join("\n");
    if r.error.is_some() || !kept.unsaved.is_empty() {
        ToolOutcome::error(call_id, text)
    } else {
        ToolOutcome::ok(call_id, text)
    }
}

impl ToolWorld for PageWorld {
    fn runs(&self, name: &str) -> bool {
        name == PYTHON || self.inner.runs(name)
    }

    fn registered(&self) -> Vec<RegisteredTool> {
        let mut tools = self.inner.registered();
        if self.link.page
            && let Some(t) = python_tool()
        {
            tools.push(t);
        }
        tools
    }

    fn call<'a>(&'a self, call: &'a ToolCall, cx: CallContext) -> BoxFuture<'a, Ran> {
        if call.name == PYTHON {
            return Box::pin(async move { Ran::Done(self.python(call, &cx).await) });
        }
        self.inner.call(call, cx)
    }

    fn precheck(&self, call: &ToolCall) -> Option<String> {
        if call.name == PYTHON {
            return self.check_python(call);
        }
        self.inner.precheck(call)
    }

    fn resolve(&self, path: &str) -> String {
        self.inner.resolve(path)
    }

    fn subject<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, Option<String>> {
        self.inner.subject(call)
    }

    fn instructions(&self) -> Vec<harness_core::prompt::InstructionFile> {
        self.inner.instructions()
    }

    fn values(&self) -> BTreeMap<String, String> {
        self.inner.values()
    }

    fn read_for_show(
        &self,
        path: &str,
    ) -> std::result::Result<ShownFile, harness_agent::SeamError> {
        self.inner.read_for_show(path)
    }

    fn place(&self) -> String {
        self.inner.place()
    }
}
