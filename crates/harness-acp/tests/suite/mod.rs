//! Helpers: a host whose sessions run a scripted model in a world of one tool, and a client
//! that talks to the agent over an in-memory duplex stream.

mod content;
mod map;
mod model;
mod replay;
mod session;
mod wire;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use harness_acp::{AgentInfo, DirEntry, Error, Host, OpenRequest, Opened};
use harness_agent::{
    BoxFuture, CallContext, CapacityGate, MemoryStore, Ran, RegisteredTool, Reply, ScriptedModel,
    SessionBuilder, SessionPermissions, SessionStore as _, ShownFile, ToolWorld,
};
use harness_core::protocol::{Mode, SessionKind, ToolCall};
use harness_loop::session::ToolOutcome;
use harness_spec::{Project, Risk};
use serde_json::json;

/// How many pieces of 1,000 bytes `countdown` streams.
pub const COUNTDOWN_PIECES: usize = 100;

/// A world with tools of its own: `launch`, an execute (so manual mode asks).
pub struct Rocket;

impl ToolWorld for Rocket {
    fn runs(&self, _name: &str) -> bool {
        false
    }

    fn registered(&self) -> Vec<RegisteredTool> {
        vec![
            RegisteredTool {
                name: "launch".into(),
                description: "Launches the rocket.".into(),
                parameters: json!({"type": "object", "properties": {}}),
                risk: Risk::Execute,
                exclusive: true,
                deferred: false,
            },
            RegisteredTool {
                name: "countdown".into(),
                description: "Counts down aloud.".into(),
                parameters: json!({"type": "object", "properties": {}}),
                risk: Risk::Execute,
                exclusive: true,
                deferred: false,
            },
        ]
    }

    fn call<'a>(&'a self, call: &'a ToolCall, cx: CallContext) -> BoxFuture<'a, Ran> {
        Box::pin(async move {
            if call.name == "countdown" {
                // COUNTDOWN_PIECES pieces of output as a command streams them.
                for n in (0..COUNTDOWN_PIECES).rev() {
                    (cx.output)(format!("{n:>999}\n"));
                }
                return Ran::Done(ToolOutcome::ok(&call.id, "zero"));
            }
            Ran::Done(ToolOutcome::ok(&call.id, "lift-off"))
        })
    }

    fn read_for_show(&self, path: &str) -> Result<ShownFile, harness_agent::SeamError> {
        Err(harness_agent::SeamError::file(
            path,
            format!("{path}: No such file or directory"),
        ))
    }

    fn place(&self) -> String {
        "/work".into()
    }
}

/// A host whose every session answers from `script`, in memory; its notices are kept.
pub struct TestHost {
    pub script: Vec<Reply>,
    pub notices: Mutex<Vec<String>>,
    /// The memory API of each session opened.
    pub memory_apis: Mutex<Vec<Option<harness_agent::memory_api::Api>>>,
    /// Where its sessions are kept (a saved one is loaded from here).
    pub store: Arc<MemoryStore>,
    /// Whether its model reads images.
    pub vision: std::sync::atomic::AtomicBool,
    /// The model of each session opened, to read what it was sent.
    pub models: Mutex<Vec<ScriptedModel>>,
    /// The person's prompt commands its sessions get.
    pub commands: Mutex<harness_agent::custom::Commands>,
}

impl TestHost {
    pub fn new(script: Vec<Reply>) -> Arc<TestHost> {
        Arc::new(TestHost {
            script,
            notices: Mutex::new(Vec::new()),
            memory_apis: Mutex::new(Vec::new()),
            store: Arc::default(),
            vision: Default::default(),
            commands: Default::default(),
            models: Mutex::new(Vec::new()),
        })
    }

    fn setup(&self, request: &OpenRequest) -> Result<Opened, Error> {
        let mut scripted = ScriptedModel::new(self.script.clone());
        if self.vision.load(std::sync::atomic::Ordering::Relaxed) {
            scripted = scripted.with_vision();
        }
        self.models.lock().unwrap().push(scripted.clone());
        let model = Arc::new(scripted);
        let world = Arc::new(Rocket);
        let store = self.store.clone();
        let mode = request.mode.unwrap_or(Mode::Manual);
        let engine = harness_agent::perm::engine().map_err(|e| Error::Open(e.to_string()))?;
        let perms = SessionPermissions::new(engine, mode, &world.place(), "/home/ana", Vec::new());
        let mut session = SessionBuilder::new(model, world)
            .model_name("scripted")
            .permissions(perms)
            .store(store.clone())
            .capacity(Arc::new(CapacityGate::new()?))
            .project(Project::Cli)
            .kind(SessionKind::Agent)
            .product_version("0.0.0");
        if let Some(id) = &request.resume {
            let meta = store
                .find(id)
                .map_err(|_| Error::NoSavedSession(id.clone()))?;
            let entries = store.load(id).map_err(|e| Error::Open(e.to_string()))?;
            session = session.resume(meta, entries);
        }
        Ok(Opened {
            session,
            mode,
            models: None,
            memory_entries: None,
            mcp_notices: Vec::new(),
            commands: self.commands.lock().unwrap().clone(),
        })
    }
}

impl Host for TestHost {
    fn roots(&self) -> Vec<PathBuf> {
        vec![PathBuf::from("/work")]
    }

    fn models(&self) -> Vec<String> {
        vec!["scripted".into()]
    }

    fn open(&self, request: OpenRequest) -> BoxFuture<'_, Result<Opened, Error>> {
        Box::pin(async move {
            self.memory_apis
                .lock()
                .unwrap()
                .push(request.memory_api.clone());
            self.setup(&request)
        })
    }

    fn dir(&self, _path: &Path) -> Result<Vec<DirEntry>, harness_acp::Error> {
        Ok(vec![DirEntry {
            name: "api".into(),
            git: true,
        }])
    }

    fn notice(&self, text: &str) {
        self.notices.lock().unwrap().push(text.to_owned());
    }
}

pub fn info() -> AgentInfo {
    AgentInfo {
        name: "test-agent".into(),
        title: "The test agent".into(),
        version: "9.9.9".into(),
        instance: "test-1".into(),
    }
}

/// The answer to a prompt, or the error's code, message and data; and the updates seen.
pub type Prompted = (
    Result<agent_client_protocol::v1::schema::PromptResponse, (i32, String, serde_json::Value)>,
    Vec<agent_client_protocol::v1::schema::SessionUpdate>,
);

/// A client's `initialize` with the `_lembas` capabilities `caps`.
pub fn initialize(caps: &[String]) -> agent_client_protocol::v1::schema::InitializeRequest {
    use agent_client_protocol::schema::ProtocolVersion;
    use agent_client_protocol::v1::schema::{ClientCapabilities, InitializeRequest};
    InitializeRequest::new(ProtocolVersion::V1).client_capabilities(ClientCapabilities::new().meta(
        map::lembas(json!({"protocol": 2, "spec": "3.1.0", "capabilities": caps})),
    ))
}

/// Waits for a client's `run` and then for the `agent` serving it to end, a minute each.
pub async fn ended<R: std::fmt::Debug, E: std::fmt::Debug>(
    run: impl std::future::Future<Output = Result<(), R>>,
    agent: tokio::task::JoinHandle<Result<(), E>>,
) {
    tokio::time::timeout(std::time::Duration::from_secs(60), run)
        .await
        .expect("the ACP run took over 60 s")
        .unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(60), agent)
        .await
        .expect("the agent did not end")
        .unwrap()
        .unwrap();
}

/// One prompt of `prompt` in a new session of `host` (auto mode, a plain client).
pub async fn prompt_once(
    host: Arc<TestHost>,
    prompt: Vec<agent_client_protocol::v1::schema::ContentBlock>,
) -> Prompted {
    prompt_with(host, &[], json!({"mode": "auto"}), prompt).await
}

/// One prompt of `prompt` in a new session of `host` opened with `_meta.lembas` `lembas`, by a
/// client of the `_lembas` capabilities `caps`.
pub async fn prompt_with(
    host: Arc<TestHost>,
    caps: &[&str],
    lembas: serde_json::Value,
    prompt: Vec<agent_client_protocol::v1::schema::ContentBlock>,
) -> (
    Result<agent_client_protocol::v1::schema::PromptResponse, (i32, String, serde_json::Value)>,
    Vec<agent_client_protocol::v1::schema::SessionUpdate>,
) {
    use agent_client_protocol::v1::schema::{
        NewSessionRequest, PromptRequest, SessionNotification,
    };
    use agent_client_protocol::{ByteStreams, Client};
    use tokio_util::compat::{TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};
    let caps: Vec<String> = caps.iter().map(|c| (*c).to_owned()).collect();
    let (agent_end, client_end) = tokio::io::duplex(64 * 1024);
    let (agent_in, agent_out) = tokio::io::split(agent_end);
    let agent = tokio::spawn(harness_acp::serve_stream(host, info(), agent_in, agent_out));
    let (client_in, client_out) = tokio::io::split(client_end);
    let transport = ByteStreams::new(client_out.compat_write(), client_in.compat());
    let updates: Arc<Mutex<Vec<SessionNotification>>> = Arc::default();
    let u = updates.clone();
    let answer = Arc::new(Mutex::new(None));
    let a = answer.clone();
    let run = Client
        .v1()
        .on_receive_notification(
            async move |n: SessionNotification, _cx| {
                u.lock().unwrap().push(n);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(transport, async move |cx| {
            cx.send_request(initialize(&caps)).block_task().await?;
            let s = cx
                .send_request(NewSessionRequest::new("/work").meta(map::lembas(lembas)))
                .block_task()
                .await?;
            let r = cx
                .send_request(PromptRequest::new(s.session_id, prompt))
                .block_task()
                .await
                .map_err(|e| {
                    (
                        i32::from(e.code),
                        e.message.clone(),
                        e.data.clone().unwrap_or_default(),
                    )
                });
            *a.lock().unwrap() = Some(r);
            Ok(())
        });
    ended(run, agent).await;
    let answer = answer.lock().unwrap().take().unwrap();
    let updates = updates.lock().unwrap();
    (answer, updates.iter().map(|n| n.update.clone()).collect())
}
