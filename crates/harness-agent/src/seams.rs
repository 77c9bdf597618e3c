//! The seams between the runtime and the world it runs in, each a trait: the model link
//! ([`ModelLink`]), the tool world ([`ToolWorld`]), the session store ([`SessionStore`]) and the
//! job spawner ([`JobSpawner`], whose commands are [`Process`]es). The front end is the other
//! seam: it holds the ends of the session's channels ([`crate::Op`]s in, [`crate::Event`]s out).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use harness_core::prompt::InstructionFile;
use harness_core::protocol::ToolCall;
use harness_loop::session::ToolOutcome;
use harness_loop::transcript::Entry;
use harness_model::{
    CancellationToken, ChatRequest, Completion, ModelClient, ModelInfo, ModelOverrides, StreamEvent,
};
use harness_spec::Risk;
use serde_json::Value;

use crate::error::SeamError;

/// A boxed future that may move between threads.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The model link: one streamed chat request at a time, and what is known of the model.
pub trait ModelLink: Send + Sync {
    /// What the harness knows of the model (its window, output limit, whether it calls tools).
    fn model(&self) -> &ModelInfo;

    /// Where it is, for the person: `NAME at URL, context N, output M`.
    fn describe(&self) -> String {
        describe(self.model(), None)
    }

    /// Sends `request`, handing each streamed piece to `on_event`, until the answer is whole,
    /// it fails, or `cancel` fires.
    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        cancel: &'a CancellationToken,
        on_event: &'a mut (dyn FnMut(&StreamEvent) + Send),
    ) -> BoxFuture<'a, Result<Completion, harness_model::Error>>;

    /// The server it talks to, as capacity counts servers (one set of slots each).
    fn server(&self) -> String {
        self.model().name.clone()
    }

    /// The same link to another model (`/model NAME`).
    fn with_model(&self, name: &str) -> Result<Arc<dyn ModelLink>, SeamError>;
}

/// `NAME[ at URL], context N, output M`, as much as is known.
fn describe(m: &ModelInfo, at: Option<&str>) -> String {
    let mut s = m.name.clone();
    if let Some(url) = at {
        s.push_str(&format!(" at {url}"));
    }
    if let Some(c) = m.context {
        s.push_str(&format!(", context {c}"));
    }
    if let Some(o) = m.output {
        s.push_str(&format!(", output {o}"));
    }
    s
}

impl ModelLink for ModelClient {
    fn model(&self) -> &ModelInfo {
        ModelClient::model(self)
    }

    fn describe(&self) -> String {
        describe(ModelClient::model(self), Some(&self.endpoint().base_url))
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
        cancel: &'a CancellationToken,
        on_event: &'a mut (dyn FnMut(&StreamEvent) + Send),
    ) -> BoxFuture<'a, Result<Completion, harness_model::Error>> {
        Box::pin(ModelClient::stream(self, request, cancel, on_event))
    }

    fn server(&self) -> String {
        self.endpoint().base_url.clone()
    }

    fn with_model(&self, name: &str) -> Result<Arc<dyn ModelLink>, SeamError> {
        let overrides = ModelOverrides {
            capacity: ModelClient::model(self).capacity,
            ..ModelOverrides::default()
        };
        let catalogue =
            harness_model::Catalogue::embedded().map_err(|e| SeamError::model(name, e))?;
        let info = ModelInfo::resolve(catalogue, name, &overrides);
        ModelClient::new(self.endpoint().clone(), info)
            .map(|c| Arc::new(c) as Arc<dyn ModelLink>)
            .map_err(|e| SeamError::model(name, e))
    }
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
}

impl Exit {
    /// The exit code, where there is one.
    pub fn code(self) -> Option<i32> {
        match self {
            Exit::Code(c) => Some(c),
            Exit::Signal(_) => None,
        }
    }
}

/// A running (or ended) command of the session: a background job, or a foreground command
/// that outlived its timeout.
pub trait Process: Send + Sync {
    /// What it wrote so far, as it is held (a process that holds only part of a long output
    /// says what it left out).
    fn output(&self) -> String;
    /// Characters written so far, and the output after the `from`th character as far as it is
    /// held: how a watcher follows a job. By default from [`Process::output`] whole.
    fn output_since(&self, from: u64) -> (u64, String) {
        let all = self.output();
        let skip = usize::try_from(from).unwrap_or(usize::MAX);
        (all.chars().count() as u64, all.chars().skip(skip).collect())
    }
    /// Waits until it ends or `timeout` passes (`None`: still running).
    fn wait_for(&self, timeout: Duration) -> BoxFuture<'_, Option<Exit>>;
    /// Stops it (and everything it started).
    fn stop(&self) -> BoxFuture<'_, Exit>;
}

/// Starts commands as background jobs (`bash` with `background: true`).
pub trait JobSpawner: Send + Sync {
    /// Starts `command` in the session's directory.
    fn spawn(&self, command: &str) -> Result<Arc<dyn Process>, SeamError>;
    /// Starts `command` the person approved when asked (a spawner may run it outside its OS
    /// sandbox). By default as [`JobSpawner::spawn`].
    fn spawn_approved(&self, command: &str) -> Result<Arc<dyn Process>, SeamError> {
        self.spawn(command)
    }
}

/// What running one call gave.
pub enum Ran {
    /// A finished result.
    Done(ToolOutcome),
    /// A foreground command still running at its timeout: the loop decides whether it goes on
    /// as a job.
    Overran {
        /// The call.
        call_id: String,
        /// Its title (the command's first line).
        title: String,
        /// The timeout that passed.
        seconds: u64,
        /// The process.
        running: Arc<dyn Process>,
    },
}

/// Where a call's output goes as it comes (a command's lines); the result holds it whole.
pub type OutputSink = Arc<dyn Fn(String) + Send + Sync>;

/// What a call gets besides its arguments.
#[derive(Clone)]
pub struct CallContext {
    /// Fires when the person cancels the step.
    pub cancel: CancellationToken,
    /// Output shown as it comes; everything sent here reaches the front end before the
    /// call's result.
    pub output: OutputSink,
    /// The person approved this very call when asked: a world may run it with fewer limits
    /// (outside its OS sandbox), as they saw it.
    pub approved: bool,
}

/// A tool an embedder adds to the session's catalogue: offered beside the spec's tools, decided
/// by the permission engine by its risk class, run by its world.
#[derive(Debug, Clone, PartialEq)]
pub struct RegisteredTool {
    /// Its name (not a spec tool's).
    pub name: String,
    /// What the model reads.
    pub description: String,
    /// Its arguments as JSON Schema.
    pub parameters: Value,
    /// Its risk class.
    pub risk: Risk,
    /// Whether it must run alone.
    pub exclusive: bool,
    /// Offered by one line under `load_tools` (the first line of its description) until the
    /// model loads or calls it, instead of sent whole on every request (a server's many tools).
    pub deferred: bool,
}

impl RegisteredTool {
    /// The line `load_tools` lists it by while it is deferred: its description's first line,
    /// cut at 120 characters.
    pub fn summary(&self) -> String {
        let first = self.description.lines().next().unwrap_or("").trim();
        if first.chars().count() > 120 {
            let cut: String = first.chars().take(119).collect();
            format!("{cut}…")
        } else {
            first.to_owned()
        }
    }
}

/// A file `show` puts before the person, read through the session's view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownFile {
    /// The path as the person knows it.
    pub path: String,
    /// Its text.
    pub content: String,
}

/// The tools a session can run and the place they run in: the agent's disk and processes for
/// the CLI, a view over the server's tree for a chat, an embedder's own.
pub trait ToolWorld: Send + Sync {
    /// Whether this world runs the spec tool `name` (canonical). The runtime offers a spec tool
    /// only where its world runs it, the loop answers it, or the runtime does (`question`,
    /// `show`, `task`, `session_search`, the plan tools).
    fn runs(&self, name: &str) -> bool;

    /// Tools of the embedder's own, beside the spec's.
    fn registered(&self) -> Vec<RegisteredTool> {
        Vec::new()
    }

    /// Runs one call of a tool it runs.
    fn call<'a>(&'a self, call: &'a ToolCall, cx: CallContext) -> BoxFuture<'a, Ran>;

    /// What `call` would answer without changing anything when one of its own preconditions
    /// already fails (an argument missing, a file not read before it is changed, an edit that
    /// does not apply, a directory where a file must be): checked before the person is asked
    /// about it, so nobody approves a call that cannot run. `None` when it may run (the file
    /// tools: [`crate::FileTools::precheck`]).
    fn precheck(&self, call: &ToolCall) -> Option<String> {
        let _ = call;
        None
    }

    /// What `call` will do, stated for the person's question when its arguments do not say it
    /// all: the facts a `confirm: always` call will use (the commit a merge takes, the commit a
    /// tag marks), which the world keeps so the call runs with exactly those. `None`: the
    /// question's usual subject.
    fn subject<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, Option<String>> {
        let _ = call;
        Box::pin(async { None })
    }

    /// The instruction files that apply, outermost first.
    fn instructions(&self) -> Vec<InstructionFile> {
        Vec::new()
    }

    /// Prompt variables this world knows (`cwd`, `platform`, `shell`, `library_summary`,
    /// `memory_entries`, ...).
    fn values(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    /// Reads a file for `show`, through the session's view and its rules (the same answer as
    /// `read` gives for a path it cannot see).
    fn read_for_show(&self, path: &str) -> Result<ShownFile, SeamError>;

    /// The directory the session works in, as the person knows it.
    fn place(&self) -> String;

    /// A path a call names as the absolute path it acts on: resolved against [`Self::place`]
    /// by the one resolver ([`harness_core::path`]), as the permission engine resolves it.
    fn resolve(&self, path: &str) -> String {
        harness_core::path::resolve(&self.place(), path)
    }
}

/// What is kept about a session besides its transcript.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Meta {
    /// The session's id (sortable by time: `20261129-205912-3fa2`).
    pub id: String,
    /// The directory it worked in.
    pub cwd: std::path::PathBuf,
    /// When it started (seconds since the epoch).
    pub created: u64,
    /// When it last changed.
    pub updated: u64,
    /// The first line of its first prompt.
    #[serde(default)]
    pub title: String,
    /// The model it ran on.
    #[serde(default)]
    pub model: String,
    /// The mode it was last in (restored when it is resumed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<harness_core::protocol::Mode>,
}

/// Where sessions are kept: their transcripts (appended event by event) and metadata.
pub trait SessionStore: Send + Sync {
    /// A new session's metadata (and its place in the store).
    fn create(&self, place: &str, model: &str) -> Result<Meta, SeamError>;
    /// Saves a session's metadata.
    fn save(&self, meta: &Meta) -> Result<(), SeamError>;
    /// Appends entries to a session's transcript.
    fn append(&self, id: &str, entries: &[Entry]) -> Result<(), SeamError>;
    /// A session's transcript, up to its last complete event.
    fn load(&self, id: &str) -> Result<Vec<Entry>, SeamError>;
    /// A session's metadata by id.
    fn find(&self, id: &str) -> Result<Meta, SeamError>;
    /// Whether it answers `session_search` (the tool is offered only then).
    fn searches(&self) -> bool {
        false
    }

    /// `session_search`: the saved sessions' words (leaving out session `skip`), as the tool
    /// answers; `None` from a store that does not search.
    fn search(&self, query: &str, limit: usize, skip: &str) -> Option<String> {
        let _ = (query, limit, skip);
        None
    }
}
