//! Helpers: a host whose sessions run a scripted model in a world of one tool, and a client
//! that talks to the agent over an in-memory duplex stream.

mod map;
mod session;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use harness_acp::{AgentInfo, DirEntry, Error, Host, OpenRequest, Opened};
use harness_agent::{
    BoxFuture, CallContext, CapacityGate, DriverSetup, MemoryStore, NoJobs, Ran, RegisteredTool,
    Reply, ScriptedModel, SessionPermissions, SessionStore, ShownFile, ToolWorld,
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

    fn read_for_show(&self, path: &str) -> Result<ShownFile, String> {
        Err(format!("{path}: No such file or directory"))
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
}

impl TestHost {
    pub fn new(script: Vec<Reply>) -> Arc<TestHost> {
        Arc::new(TestHost {
            script,
            notices: Mutex::new(Vec::new()),
            memory_apis: Mutex::new(Vec::new()),
        })
    }

    fn setup(&self, request: &OpenRequest) -> Result<Opened, Error> {
        let model = Arc::new(ScriptedModel::new(self.script.clone()));
        let world = Arc::new(Rocket);
        let store = Arc::new(MemoryStore::default());
        let mode = request.mode.unwrap_or(Mode::Manual);
        let meta = store
            .create(&world.place(), "scripted")
            .map_err(Error::Open)?;
        let engine = harness_agent::perm::engine().map_err(|e| Error::Open(e.to_string()))?;
        let setup = DriverSetup {
            model,
            model_name: "scripted".into(),
            perms: SessionPermissions::new(engine, mode, &world.place(), "/home/ana", Vec::new()),
            world,
            jobs: Arc::new(NoJobs),
            plan: Arc::default(),
            capacity: Arc::new(CapacityGate::new()?),
            personality: None,
            store,
            meta,
            agent: None,
            project: Project::Cli,
            kind: SessionKind::Agent,
            product_version: "0.0.0".into(),
        };
        Ok(Opened {
            setup,
            resume: None,
            mode,
            models: None,
            memory_entries: None,
            mcp_notices: Vec::new(),
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
            match &request.resume {
                Some(id) => Err(Error::NoSavedSession(id.clone())),
                None => self.setup(&request),
            }
        })
    }

    fn dir(&self, _path: &Path) -> Result<Vec<DirEntry>, String> {
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
