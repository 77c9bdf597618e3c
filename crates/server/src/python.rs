//! The tools that need a chat's page: a chat's world ([`PageWorld`]) is the server's world
//! ([`crate::world::ChatWorld`]) plus `python`, which runs in the chat's open page (Pyodide in a
//! sandboxed iframe, `ui/app.js`).
//!
//! A `python` call is put to the page as a `python` event on the stream (`{"type": "python",
//! "call_id", "ask", "code", "files", "save", "timeout"}`); the page fetches `files` through the
//! view API, runs the code, writes `save` back through the files API (so the view's levels
//! apply) and answers `POST /api/python/{ask}` with `{"stdout", "stderr", "result", "error",
//! "written": [{"path", "bytes"}], "unsaved": [{"path", "error"}], "duration_ms"}`. With no page
//! of the chat open the call answers the spec's `unavailable` text, word for word; so does a call
//! whose page goes before it answers.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, Weak};

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

    async fn python(&self, call: &ToolCall, cx: &CallContext) -> ToolOutcome {
        let (Some(app), Some(chat)) = (self.link.app.upgrade(), self.link.chat.get()) else {
            return ToolOutcome::error(&call.id, unavailable());
        };
        if !app.pages.attached(chat) {
            return ToolOutcome::error(&call.id, unavailable());
        }
        if !crate::pages::pyodide::installed(&app.data) {
            return ToolOutcome::error(
                &call.id,
                format!(
                    "Python cannot run here: this server has no Pyodide files ({} is missing). \
                     The server's README says how to add them with one command.",
                    crate::pages::pyodide::dir(&app.data)
                        .join("pyodide.mjs")
                        .display()
                ),
            );
        }
        let a = &call.arguments;
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
        let recorded = crate::chats::record_ask(
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
            "code": a.get("code").and_then(Value::as_str).unwrap_or_default(),
            "files": a.get("files").cloned().unwrap_or_else(|| json!([])),
            "save": a.get("save").cloned().unwrap_or_else(|| json!([])),
            "timeout": a.get("timeout").and_then(Value::as_u64),
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
        match answered {
            Some(v) => result_text(&call.id, v),
            None => ToolOutcome::error(&call.id, unavailable()),
        }
    }
}

/// What the page says a run did.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct RunResult {
    stdout: String,
    stderr: String,
    result: Option<String>,
    error: Option<String>,
    written: Vec<Written>,
    unsaved: Vec<Unsaved>,
    duration_ms: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Written {
    path: String,
    bytes: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Unsaved {
    path: String,
    error: String,
}

/// The call's result from the page's answer: what it printed, its last value, the files kept,
/// how long it took, and its error.
fn result_text(call_id: &str, v: Value) -> ToolOutcome {
    let r: RunResult = match serde_json::from_value(v) {
        Ok(r) => r,
        Err(e) => {
            return ToolOutcome::error(call_id, format!("the page's answer is not valid: {e}"));
        }
    };
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
    for w in &r.written {
        parts.push(format!("Saved {} ({} bytes)", w.path, w.bytes));
    }
    for u in &r.unsaved {
        parts.push(format!("Not saved {}: {}", u.path, u.error));
    }
    if let Some(e) = &r.error {
        parts.push(e.trim_end_matches('\n').to_owned());
    }
    parts.push(format!("({:.1} s)", r.duration_ms as f64 / 1000.0));
    let text = parts.join("\n");
    if r.error.is_some() || !r.unsaved.is_empty() {
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

    fn instructions(&self) -> Vec<harness_core::prompt::InstructionFile> {
        self.inner.instructions()
    }

    fn values(&self) -> BTreeMap<String, String> {
        self.inner.values()
    }

    fn read_for_show(&self, path: &str) -> std::result::Result<ShownFile, String> {
        self.inner.read_for_show(path)
    }

    fn place(&self) -> String {
        self.inner.place()
    }
}
