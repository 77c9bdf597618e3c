//! The agent: `initialize`, sessions opened and loaded through the [`Host`], prompts, modes,
//! the model choice, cancel, and the `_lembas` requests, each answered as `spec/acp.md` says.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AvailableCommandsUpdate, CancelNotification, ContentChunk,
    CurrentModeUpdate, Implementation, InitializeRequest, InitializeResponse, ListSessionsRequest,
    ListSessionsResponse, LoadSessionRequest, LoadSessionResponse, Meta, NewSessionRequest,
    NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse, SessionCapabilities,
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigOptionValue,
    SessionConfigSelectOption, SessionInfo, SessionListCapabilities, SessionNotification,
    SessionUpdate, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
    SetSessionModeRequest, SetSessionModeResponse, StopReason,
};
use agent_client_protocol::{Agent, Client, ConnectTo};
use harness_agent::{Op, Session, Spawned};
use harness_core::protocol::{Mode, Origin};
use serde_json::{Value, json};

use crate::Error;
use crate::commands::{available_commands, person_command, slash_command};
use crate::ext::{
    DirRequest, JobOutputRequest, JobSendRequest, JobStopRequest, JobTranscriptRequest,
    JobsRequest, LembasResult, LimitsRequest, RewindRequest, StatusRequest, lembas_error,
    unknown_job, unknown_session,
};
use crate::host::{AgentInfo, Host, ModelChoice, OpenRequest};
use crate::jobs::{JobTable, job_object, job_send, job_session, job_transcript};
use crate::map::{inside_roots, meta, mode_state, prompt_input, replay_updates, text_block};
use crate::pump::Pump;
use harness_agent::custom::Commands;

/// The `_lembas` protocol this agent speaks.
const LEMBAS_PROTOCOL: u64 = 2;
/// The capability strings this agent implements (`spec/acp.md` §2).
const CAPABILITIES: &[&str] = &[
    "context",
    "library",
    "prototypes",
    "plan_state",
    "rewind",
    "jobs",
    "show",
    "memory",
];

/// The end a request is answered on.
pub(crate) type Responder<T> = agent_client_protocol::v1::Responder<T>;

/// One open session.
pub(crate) struct Open {
    pub(crate) ops: Session,
    pending: Arc<Mutex<Option<Responder<PromptResponse>>>>,
    pub(crate) cwd: PathBuf,
    model: String,
    /// The models the session may switch to (`session/set_config_option`).
    models: Option<Arc<dyn ModelChoice>>,
    chat: Option<String>,
    mode: Arc<Mutex<Mode>>,
    running: Arc<Mutex<bool>>,
    pub(crate) jobs: JobTable,
    /// The person's prompt commands.
    commands: Commands,
}

/// The agent's state: who it is, what the client agreed, its open sessions.
pub(crate) struct State {
    host: Arc<dyn Host>,
    info: AgentInfo,
    agreed: Mutex<Vec<String>>,
    /// The spec version the client said in `initialize` (`_meta.lembas.spec`).
    client_spec: Mutex<String>,
    pub(crate) sessions: Mutex<HashMap<String, Open>>,
    /// Whether the client spoke `_lembas` in `initialize` (an instance over the device link):
    /// its sessions keep to the roots. A plain editor on stdio opens any absolute directory.
    lembas_client: Mutex<bool>,
}

impl State {
    fn client_spec(&self) -> String {
        self.client_spec
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    pub(crate) fn agreed(&self, cap: &str) -> bool {
        self.agreed
            .lock()
            .map(|a| a.iter().any(|c| c == cap))
            .unwrap_or(false)
    }

    fn roots(&self) -> Vec<PathBuf> {
        self.host.roots()
    }

    fn limits(&self) -> Value {
        json!({
            "roots": self.roots(),
            "models": self.host.models(),
            "max_sessions": self.host.max_sessions(),
        })
    }
}

/// Serves ACP as an agent over `transport` until the client closes it: `host` opens the
/// sessions, `info` says who the agent is.
pub async fn serve(
    host: Arc<dyn Host>,
    info: AgentInfo,
    transport: impl ConnectTo<Agent> + 'static,
) -> Result<(), Error> {
    let name = info.name.clone();
    let state = Arc::new(State {
        host,
        info,
        agreed: Mutex::new(Vec::new()),
        client_spec: Mutex::new(String::new()),
        lembas_client: Mutex::new(false),
        sessions: Mutex::new(HashMap::new()),
    });
    let s1 = state.clone();
    let s2 = state.clone();
    let s3 = state.clone();
    let s4 = state.clone();
    let s4b = state.clone();
    let s5 = state.clone();
    let s6 = state.clone();
    let s7 = state.clone();
    let s8 = state.clone();
    let s9 = state.clone();
    let s10 = state.clone();
    let s11 = state.clone();
    let s12 = state.clone();
    let s13 = state.clone();
    let s14 = state.clone();
    let s15 = state.clone();
    let s16 = state.clone();
    Agent
        .v1()
        .name(name)
        .on_receive_request(
            async move |req: InitializeRequest, responder, _cx| {
                responder.respond(initialize(&s1, req))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: NewSessionRequest, responder, cx| match new_session(&s2, req, cx).await
            {
                Ok(r) => responder.respond(r),
                Err(e) => responder.respond_with_error(e),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: LoadSessionRequest, responder, cx| match load_session(&s9, req, cx)
                .await
            {
                Ok(r) => responder.respond(r),
                Err(e) => responder.respond_with_error(e),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: PromptRequest, responder, cx| prompt(&s3, req, responder, cx),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: CancelNotification, _cx| {
                if let Ok(sessions) = s4.sessions.lock()
                    && let Some(open) = sessions.get(&n.session_id.to_string())
                {
                    open.ops.submit(Op::Cancel);
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |req: ListSessionsRequest, responder, _cx| match list_sessions(&s4b, &req) {
                Ok(r) => responder.respond(r),
                Err(e) => responder.respond_with_error(e),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: SetSessionModeRequest, responder, _cx| {
                let mode = match req.mode_id.to_string().parse::<Mode>() {
                    Ok(m) => m,
                    Err(_) => {
                        return responder
                            .respond_with_error(agent_client_protocol::Error::invalid_params());
                    }
                };
                let sent = s5.sessions.lock().ok().and_then(|s| {
                    s.get(&req.session_id.to_string())
                        .map(|o| o.ops.submit(Op::SetMode { mode }))
                });
                match sent {
                    Some(true) => responder.respond(SetSessionModeResponse::new()),
                    _ => responder.respond_with_error(unknown_session(&req.session_id.to_string())),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: SetSessionConfigOptionRequest, responder, _cx| match set_config_option(
                &s16, req,
            )
            .await
            {
                Ok(r) => responder.respond(r),
                Err(e) => responder.respond_with_error(e),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_req: StatusRequest, responder, _cx| {
                responder.respond(LembasResult(status(&s6)))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_req: LimitsRequest, responder, _cx| {
                responder.respond(LembasResult(s7.limits()))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: JobsRequest, responder, _cx| {
                if !s11.agreed("jobs") {
                    return responder
                        .respond_with_error(agent_client_protocol::Error::method_not_found());
                }
                let jobs = s11.sessions.lock().ok().and_then(|s| {
                    s.get(&req.session_id).map(|o| {
                        o.jobs
                            .lock()
                            .map(|j| j.values().cloned().collect::<Vec<_>>())
                            .unwrap_or_default()
                    })
                });
                match jobs {
                    Some(jobs) => responder.respond(LembasResult(json!({"jobs": jobs}))),
                    None => responder.respond_with_error(unknown_session(&req.session_id)),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: JobOutputRequest, responder, _cx| {
                let (ops, table) = match job_session(&s12, &req.session_id) {
                    Ok(found) => found,
                    Err(e) => return responder.respond_with_error(e),
                };
                let Ok(id) = req.job_id.parse::<u32>() else {
                    return responder.respond_with_error(unknown_job(&req.job_id));
                };
                match ops.job_output(id, req.offset).await {
                    Ok(Some((job, text))) => {
                        let object = table
                            .lock()
                            .ok()
                            .and_then(|t| t.get(&id).cloned())
                            .unwrap_or_else(|| json!({"id": req.job_id, "title": job.title}));
                        let start = req.offset.max(job.dropped_chars);
                        let next = start + text.chars().count();
                        responder.respond(LembasResult(json!({
                            "job": object, "text": text, "offset": start, "next": next,
                            "dropped": job.dropped_chars,
                        })))
                    }
                    _ => responder.respond_with_error(unknown_job(&req.job_id)),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: JobStopRequest, responder, _cx| {
                let (ops, table) = match job_session(&s13, &req.session_id) {
                    Ok(found) => found,
                    Err(e) => return responder.respond_with_error(e),
                };
                let Ok(id) = req.job_id.parse::<u32>() else {
                    return responder.respond_with_error(unknown_job(&req.job_id));
                };
                match ops.stop_job(id).await {
                    Ok(Ok(())) | Ok(Err(_))
                        if table.lock().map(|t| t.contains_key(&id)).unwrap_or(false) =>
                    {
                        let job = table
                            .lock()
                            .ok()
                            .and_then(|t| t.get(&id).cloned())
                            .unwrap_or(Value::Null);
                        responder.respond(LembasResult(json!({"job": job})))
                    }
                    _ => responder.respond_with_error(unknown_job(&req.job_id)),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: JobSendRequest, responder, cx| match job_send(&s14, req, &cx).await {
                Ok(v) => responder.respond(LembasResult(v)),
                Err(e) => responder.respond_with_error(e),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: JobTranscriptRequest, responder, _cx| match job_transcript(&s15, req)
                .await
            {
                Ok(v) => responder.respond(LembasResult(v)),
                Err(e) => responder.respond_with_error(e),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: RewindRequest, responder, _cx| {
                if !s10.agreed("rewind") {
                    return responder
                        .respond_with_error(agent_client_protocol::Error::method_not_found());
                }
                let ops = s10
                    .sessions
                    .lock()
                    .ok()
                    .and_then(|s| s.get(&req.session_id).map(|o| o.ops.clone()));
                let Some(ops) = ops else {
                    return responder.respond_with_error(unknown_session(&req.session_id));
                };
                match ops.keep(req.turns).await {
                    Ok(Ok(turns)) => responder.respond(LembasResult(json!({"turns": turns}))),
                    Ok(Err(why)) => responder.respond_with_error(
                        agent_client_protocol::Error::invalid_params().data(json!(why)),
                    ),
                    Err(_) => responder.respond_with_error(unknown_session(&req.session_id)),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: DirRequest, responder, _cx| match dir(&s8, &req.path) {
                Ok(v) => responder.respond(LembasResult(v)),
                Err(e) => responder.respond_with_error(e),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_to(transport)
        .await
        .map_err(|e| Error::Connection(e.to_string()))
}

fn initialize(state: &State, req: InitializeRequest) -> InitializeResponse {
    let theirs: Vec<String> = req
        .client_capabilities
        .meta
        .as_ref()
        .and_then(|m| m.get("lembas"))
        .and_then(|l| l.get("capabilities"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if let Ok(mut l) = state.lembas_client.lock() {
        *l = req
            .client_capabilities
            .meta
            .as_ref()
            .is_some_and(|m| m.contains_key("lembas"));
    }
    if let Ok(mut spec) = state.client_spec.lock() {
        *spec = req
            .client_capabilities
            .meta
            .as_ref()
            .and_then(|m| m.get("lembas"))
            .and_then(|l| l.get("spec"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
    }
    if let Ok(mut agreed) = state.agreed.lock() {
        *agreed = CAPABILITIES
            .iter()
            .filter(|c| theirs.iter().any(|t| t == *c))
            .map(|c| (*c).to_owned())
            .collect();
    }
    // Images and embedded files are taken (`spec/acp.md` §3); audio is not.
    let prompt = PromptCapabilities::new().image(true).embedded_context(true);
    let caps = AgentCapabilities::new()
        .load_session(true)
        .prompt_capabilities(prompt)
        .session_capabilities(SessionCapabilities::new().list(SessionListCapabilities::new()))
        .meta(meta(json!({
        "protocol": LEMBAS_PROTOCOL,
        "spec": harness_spec::Spec::embedded().version().to_string(),
        "capabilities": CAPABILITIES,
        "instance": {"id": state.info.instance, "name": state.info.name, "version": state.info.version},
        "limits": state.limits(),
    })));
    InitializeResponse::new(req.protocol_version)
        .agent_capabilities(caps)
        .agent_info(
            Implementation::new(state.info.name.clone(), state.info.version.clone())
                .title(state.info.title.clone()),
        )
}

async fn new_session(
    state: &Arc<State>,
    req: NewSessionRequest,
    cx: ConnectionTo<Client>,
) -> Result<NewSessionResponse, agent_client_protocol::Error> {
    let (servers, mut notices) = mcp_servers(&req.mcp_servers);
    let (id, mode, mut meta, said) =
        open_session(state, &req.cwd, req.meta.as_ref(), None, servers, cx).await?;
    notices.extend(said);
    if !req.mcp_servers.is_empty() {
        for n in &notices {
            state.host.notice(n);
        }
        if let Some(l) = meta.get_mut("lembas").and_then(Value::as_object_mut) {
            l.insert(
                "mcp_servers".into(),
                json!({"given": req.mcp_servers.len(), "notices": notices}),
            );
        }
    }
    let options = config_options(state, &id).await;
    Ok(NewSessionResponse::new(id)
        .modes(mode_state(mode))
        .config_options(options)
        .meta(meta))
}

async fn load_session(
    state: &Arc<State>,
    req: LoadSessionRequest,
    cx: ConnectionTo<Client>,
) -> Result<LoadSessionResponse, agent_client_protocol::Error> {
    let id = req.session_id.to_string();
    if let Ok(s) = state.sessions.lock()
        && s.contains_key(&id)
    {
        return Err(agent_client_protocol::Error::invalid_request()
            .data(json!(format!("session {id} is open already"))));
    }
    let (servers, notices) = mcp_servers(&req.mcp_servers);
    let (id, mode, meta, said) =
        open_session(state, &req.cwd, req.meta.as_ref(), Some(id), servers, cx).await?;
    for n in notices.iter().chain(&said) {
        state.host.notice(n);
    }
    Ok(LoadSessionResponse::new()
        .modes(mode_state(mode))
        .config_options(config_options(state, &id).await)
        .meta(meta))
}

/// The config option id of the model choice.
const MODEL_OPTION: &str = "model";

/// A session's config options: the model choice (category `model`), among the models its
/// server serves (the current one when the server lists none).
async fn config_options(state: &State, id: &str) -> Option<Vec<SessionConfigOption>> {
    let (client, current) = state
        .sessions
        .lock()
        .ok()?
        .get(id)
        .map(|o| (o.models.clone(), o.model.clone()))?;
    let mut models = match client {
        Some(c) => c.list().await,
        None => Vec::new(),
    };
    if !models.contains(&current) {
        models.insert(0, current.clone());
    }
    let choices: Vec<SessionConfigSelectOption> = models
        .iter()
        .map(|m| SessionConfigSelectOption::new(m.clone(), m.clone()))
        .collect();
    Some(vec![
        SessionConfigOption::select(MODEL_OPTION, "Model", current, choices)
            .category(SessionConfigOptionCategory::Model),
    ])
}

/// `session/set_config_option`: the model choice. A model the device cannot run (its server
/// does not serve it) is refused with -32042 and the session keeps its model; an unknown
/// option or value shape is -32602; a prompt running, -32600.
async fn set_config_option(
    state: &State,
    req: SetSessionConfigOptionRequest,
) -> Result<SetSessionConfigOptionResponse, agent_client_protocol::Error> {
    let id = req.session_id.to_string();
    if req.config_id.to_string() != MODEL_OPTION {
        return Err(agent_client_protocol::Error::invalid_params()
            .data(json!(format!("no config option {}", req.config_id))));
    }
    let SessionConfigOptionValue::ValueId { value } = &req.value else {
        return Err(agent_client_protocol::Error::invalid_params()
            .data(json!("the model option takes a value id")));
    };
    let wanted = value.to_string();
    let (client, ops) = state
        .sessions
        .lock()
        .ok()
        .and_then(|s| s.get(&id).map(|o| (o.models.clone(), o.ops.clone())))
        .ok_or_else(|| unknown_session(&id))?;
    let serves = match &client {
        Some(c) => c.serves(&wanted).await,
        None => true,
    };
    if !serves {
        return Err(lembas_error(
            -32042,
            format!(
                "Model unavailable: this device cannot run {wanted}; the session keeps its model."
            ),
            "model_unavailable",
        ));
    }
    let answer = ops
        .query(harness_agent::Query::Model(Some(wanted.clone())))
        .await
        .unwrap_or_default();
    if answer != format!("model: {wanted}") {
        return Err(agent_client_protocol::Error::invalid_request().data(json!(answer)));
    }
    if let Ok(mut s) = state.sessions.lock()
        && let Some(o) = s.get_mut(&id)
    {
        o.model = wanted;
    }
    Ok(SetSessionConfigOptionResponse::new(
        config_options(state, &id).await.unwrap_or_default(),
    ))
}

/// The client's `mcpServers` as the MCP client's servers, and a notice for each it cannot reach
/// (SSE and ACP-tunnelled servers are not supported). An HTTP server's headers are sent as given.
fn mcp_servers(
    given: &[agent_client_protocol::v1::schema::McpServer],
) -> (Vec<harness_mcp::ServerConfig>, Vec<String>) {
    use agent_client_protocol::v1::schema::McpServer;
    let mut servers = Vec::new();
    let mut notices = Vec::new();
    for s in given {
        let transport = match s {
            McpServer::Stdio(s) => (
                s.name.clone(),
                harness_mcp::Transport::Stdio {
                    command: s.command.display().to_string(),
                    args: s.args.clone(),
                    env: s
                        .env
                        .iter()
                        .map(|e| (e.name.clone(), e.value.clone()))
                        .collect(),
                    cwd: None,
                },
            ),
            McpServer::Http(s) => (
                s.name.clone(),
                harness_mcp::Transport::Http {
                    url: s.url.clone(),
                    bearer_token_env: None,
                    headers: s
                        .headers
                        .iter()
                        .map(|h| (h.name.clone(), h.value.clone()))
                        .collect(),
                },
            ),
            other => {
                notices.push(format!(
                    "the MCP server {} is not started: only stdio and streamable HTTP servers are supported",
                    serde_json::to_value(other)
                        .ok()
                        .and_then(|v| v.get("name").and_then(Value::as_str).map(str::to_owned))
                        .unwrap_or_default()
                ));
                continue;
            }
        };
        servers.push(harness_mcp::ServerConfig::new(transport.0, transport.1));
    }
    (servers, notices)
}

async fn open_session(
    state: &Arc<State>,
    cwd: &Path,
    req_meta: Option<&Meta>,
    resume: Option<String>,
    mcp_servers: Vec<harness_mcp::ServerConfig>,
    cx: ConnectionTo<Client>,
) -> Result<(String, Mode, Meta, Vec<String>), agent_client_protocol::Error> {
    struct Req<'a> {
        cwd: PathBuf,
        meta: Option<&'a Meta>,
    }
    let req = Req {
        cwd: cwd.to_path_buf(),
        meta: req_meta,
    };
    if !req.cwd.is_absolute() {
        return Err(
            agent_client_protocol::Error::invalid_params().data(json!(format!(
                "cwd must be an absolute path: {}",
                req.cwd.display()
            ))),
        );
    }
    let lembas_client = state.lembas_client.lock().map(|l| *l).unwrap_or(true);
    let roots = state.roots();
    if lembas_client && roots.is_empty() {
        return Err(lembas_error(
            -32040,
            "Remote work is off on this device.".into(),
            "remote_off",
        ));
    }
    if lembas_client && !inside_roots(&req.cwd, &roots) {
        return Err(lembas_error(
            -32041,
            format!(
                "Outside the shared directories: {} is not under a root of this device.",
                req.cwd.display()
            ),
            "outside_roots",
        ));
    }
    if let Some(max) = state
        .host
        .max_sessions()
        .filter(|_| lembas_client && resume.is_none())
    {
        let open = state.sessions.lock().map(|s| s.len()).unwrap_or(0);
        if open >= max {
            return Err(lembas_error(
                -32043,
                format!("Too many sessions: this device holds {max} at once."),
                "too_many_sessions",
            ));
        }
    }
    let lembas = req
        .meta
        .as_ref()
        .and_then(|m| m.get("lembas"))
        .cloned()
        .unwrap_or(Value::Null);
    let mode = match lembas.get("mode").and_then(Value::as_str) {
        Some(m) => Some(m.parse::<Mode>().map_err(|_| {
            agent_client_protocol::Error::invalid_params().data(json!({"mode": m}))
        })?),
        None => None,
    };
    let personality = lembas
        .get("personality")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let wanted = lembas
        .get("model")
        .and_then(|m| m.get("id"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let scope = harness_core::library::scope_from_meta(&lembas).map_err(|e| {
        agent_client_protocol::Error::invalid_params()
            .data(json!({"lembas": "invalid_scope", "message": e.to_string()}))
    })?;
    // Capability `memory`: the records are the client instance's, over its API.
    let memory_api = state
        .agreed("memory")
        .then(|| {
            lembas
                .get("api")
                .and_then(harness_agent::memory_api::Api::from_meta)
        })
        .flatten();
    let opened = state
        .host
        .open(OpenRequest {
            cwd: req.cwd.clone(),
            resume,
            mode,
            personality,
            scope: scope.clone(),
            memory_api,
            mcp_servers,
        })
        .await
        .map_err(|e| e.to_acp())?;
    let said = opened.mcp_notices.clone();
    let model = opened.session.shown_model();
    // Capability `plan_state`: the chat's plan, handed back whole (`spec/acp.md` §8).
    let client_plan = match lembas.get("plan_state") {
        Some(p) if state.agreed("plan_state") => Some(
            serde_json::from_value::<Option<harness_core::plan::Plan>>(p.clone()).map_err(|e| {
                agent_client_protocol::Error::invalid_params()
                    .data(json!({"lembas": "invalid_plan_state", "message": e.to_string()}))
            })?,
        ),
        _ => None,
    };
    let plan: Arc<Mutex<harness_core::plan::PlanState>> = Arc::default();
    if let Some(w) = &wanted
        && !harness_model::settings::same_model(w, &model)
    {
        return Err(lembas_error(
            -32042,
            format!("Model unavailable: this device cannot run {w}; the session was not opened."),
            "model_unavailable",
        ));
    }
    // What the transcript held before resuming closed what it left open.
    let saved = opened.session.resumed().map(<[_]>::to_vec);
    let resumed = saved.is_some();
    let mut builder = opened
        .session
        .holds_display(state.agreed("show"))
        .plan(plan.clone());
    if state.agreed("context")
        && let Some(text) = lembas.get("context").and_then(Value::as_str)
    {
        builder = builder.client_context(text);
    }
    // What an instance older than 3.0.0 hands over (a 3.0.0 one sends neither).
    if state.agreed("library")
        && let Some(summary) = lembas
            .get("library")
            .and_then(|l| l.get("summary"))
            .and_then(Value::as_str)
    {
        builder = builder.library_summary(summary);
    }
    if state.agreed("prototypes")
        && let Some(list) = lembas.get("prototypes")
    {
        let prototypes = serde_json::from_value(list.clone()).map_err(|e| {
            agent_client_protocol::Error::invalid_params()
                .data(json!({"lembas": "invalid_prototypes", "message": e.to_string()}))
        })?;
        builder = builder.prototypes(harness_core::prompt::PrototypeHandoff {
            instance: state.client_spec(),
            prototypes,
        });
    }
    if let Some(entries) = opened.memory_entries {
        builder = builder.memory_entries(entries);
    }
    let Spawned {
        session,
        events,
        run,
    } = builder.spawn().map_err(|e| Error::Agent(e).to_acp())?;
    // The client's plan over the one the transcript's plan calls left.
    if let Some(p) = client_plan
        && let Ok(mut held) = plan.lock()
    {
        held.plan = p;
    }
    // Replayed as resuming left it: a call cut off mid-run has its result.
    let replay = match saved {
        Some(saved) => replay_updates(
            &session.saved().unwrap_or(saved),
            &req.cwd,
            state.agreed("jobs"),
        ),
        None => Vec::new(),
    };
    // A reopened session's jobs, as its transcript left them (lost ones ended).
    let jobs: JobTable = Arc::default();
    let listed = session.jobs().await.map_err(|e| Error::Agent(e).to_acp())?;
    if let Ok(mut t) = jobs.lock() {
        for job in listed {
            let object = job_object(&Arc::default(), &job);
            t.insert(job.id, object);
        }
    }
    let id = session.id().to_owned();
    let advertised = available_commands(&opened.commands);
    let open = Open {
        ops: session.clone(),
        pending: Arc::new(Mutex::new(None)),
        cwd: req.cwd.clone(),
        model: model.clone(),
        models: opened.models,
        chat: lembas
            .get("chat")
            .and_then(Value::as_str)
            .map(str::to_owned),
        mode: Arc::new(Mutex::new(opened.mode)),
        running: Arc::new(Mutex::new(false)),
        jobs,
        commands: opened.commands,
    };
    let pump_cx = cx.clone();
    let pump = Pump {
        session: id.clone(),
        cx,
        ops: session,
        pending: open.pending.clone(),
        mode: open.mode.clone(),
        running: open.running.clone(),
        plan_state: state.agreed("plan_state"),
        jobs_cap: state.agreed("jobs"),
        jobs: open.jobs.clone(),
        machine: Arc::new(Mutex::new(None)),
        scope,
        cwd: req.cwd.clone(),
        host: state.host.clone(),
    };
    if let Ok(mut s) = state.sessions.lock() {
        s.insert(id.clone(), open);
    }
    let host = state.host.clone();
    let session_id = id.clone();
    tokio::spawn(async move {
        match run.finished().await.map(|ended| ended.result) {
            Ok(Ok(())) => {}
            Ok(Err(e)) | Err(e) => host.notice(&format!("session {session_id}: {e}")),
        }
    });
    tokio::spawn(pump.run(events));
    for update in replay {
        let _ = pump_cx.send_notification(SessionNotification::new(id.clone(), update));
    }
    // With `plan_state`, the plan follows a replay.
    if resumed && state.agreed("plan_state") {
        let held = plan.lock().ok().and_then(|p| p.plan.clone());
        let _ = pump_cx.send_notification(crate::ext::PlanStateNotification {
            session_id: id.clone(),
            plan: serde_json::to_value(held).unwrap_or(Value::Null),
        });
    }
    let _ = pump_cx.send_notification(SessionNotification::new(
        id.clone(),
        SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(advertised)),
    ));
    let spec = harness_spec::Spec::embedded().version().to_string();
    let m = meta(json!({
        "instance": {"id": state.info.instance, "session": id, "model": model, "spec": spec}
    }));
    Ok((id, opened.mode, m, said))
}

fn prompt(
    state: &State,
    req: PromptRequest,
    responder: Responder<PromptResponse>,
    cx: ConnectionTo<Client>,
) -> Result<(), agent_client_protocol::Error> {
    let id = req.session_id.to_string();
    let sessions = match state.sessions.lock() {
        Ok(s) => s,
        Err(_) => return responder.respond_with_internal_error("the session table is poisoned"),
    };
    let Some(open) = sessions.get(&id) else {
        return responder.respond_with_error(unknown_session(&id));
    };
    let (mut text, images) = prompt_input(&req.prompt);
    // A slash command the session advertised: done here, not sent to the model.
    let mode = open.mode.lock().map(|m| *m).unwrap_or(Mode::Manual);
    if let Some(command) = slash_command(&text, mode) {
        // `/mode NAME` is told as `current_mode_update` before the prompt is answered (the
        // client did not ask through `session/set_mode`, so it would not know); the pump then
        // leaves the runtime's own news of it out, the mode being already the one it holds.
        if let Ok(Ok(mode)) = &command {
            if let Ok(mut m) = open.mode.lock() {
                *m = *mode;
            }
            let _ = cx.send_notification(SessionNotification::new(
                req.session_id.clone(),
                SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode.as_str())),
            ));
        }
        let ops = open.ops.clone();
        let session = req.session_id.clone();
        drop(sessions);
        let _ = cx.clone().spawn(async move {
            let said = match command {
                Err(line) => Some(line),
                Ok(Ok(mode)) => {
                    ops.submit(Op::SetMode { mode });
                    None
                }
                Ok(Err(query)) => ops.query(query).await.ok(),
            };
            if let Some(text) = said {
                let _ = cx.send_notification(SessionNotification::new(
                    session,
                    SessionUpdate::AgentMessageChunk(ContentChunk::new(text_block(text))),
                ));
            }
            responder.respond(PromptResponse::new(StopReason::EndTurn))
        });
        return Ok(());
    }
    // One of the person's prompt commands: its prompt is what the model gets.
    match person_command(&text, &open.commands) {
        Some(Ok(expanded)) => text = expanded,
        Some(Err(line)) => {
            drop(sessions);
            let _ = cx.send_notification(SessionNotification::new(
                req.session_id.clone(),
                SessionUpdate::AgentMessageChunk(ContentChunk::new(text_block(line))),
            ));
            return responder.respond(PromptResponse::new(StopReason::EndTurn));
        }
        None => {}
    }
    let Ok(mut pending) = open.pending.lock() else {
        return responder.respond_with_internal_error("the session is poisoned");
    };
    if pending.is_some() {
        return responder.respond_with_error(
            agent_client_protocol::Error::invalid_request()
                .data(json!("a prompt is already running in this session")),
        );
    }
    *pending = Some(responder);
    open.ops.submit(Op::Prompt {
        text,
        origin: Origin::Person,
        images,
    });
    Ok(())
}

/// `session/list`: the saved sessions (of `cwd` when given), newest first, in one page; a
/// LLeMbas instance's only those inside the roots.
fn list_sessions(
    state: &State,
    req: &ListSessionsRequest,
) -> Result<ListSessionsResponse, agent_client_protocol::Error> {
    if let Some(cwd) = &req.cwd
        && !cwd.is_absolute()
    {
        return Err(
            agent_client_protocol::Error::invalid_params().data(json!(format!(
                "cwd must be an absolute path: {}",
                cwd.display()
            ))),
        );
    }
    let mut saved = state
        .host
        .sessions(req.cwd.as_deref())
        .map_err(|e| agent_client_protocol::Error::internal_error().data(json!(e)))?;
    if state.lembas_client.lock().map(|l| *l).unwrap_or(true) {
        let roots = state.roots();
        saved.retain(|m| inside_roots(&m.cwd, &roots));
    }
    saved.sort_by(|a, b| b.updated.cmp(&a.updated).then_with(|| b.id.cmp(&a.id)));
    let sessions = saved
        .into_iter()
        .map(|m| {
            let mut info = SessionInfo::new(m.id, m.cwd).updated_at(crate::pump::iso(m.updated));
            if !m.title.is_empty() {
                info = info.title(m.title);
            }
            info
        })
        .collect();
    Ok(ListSessionsResponse::new(sessions))
}

fn status(state: &State) -> Value {
    let jobs = state.agreed("jobs");
    let sessions: Vec<Value> = state
        .sessions
        .lock()
        .map(|s| {
            let mut v: Vec<Value> = s
                .iter()
                .map(|(id, o)| {
                    let running = o.running.lock().map(|r| *r).unwrap_or(false);
                    let mut session = json!({
                        "sessionId": id,
                        "chat": o.chat,
                        "cwd": o.cwd,
                        "model": o.model,
                        "mode": o.mode.lock().map(|m| m.as_str()).unwrap_or("manual"),
                        "state": if running { "running" } else { "idle" },
                    });
                    // Capability `jobs`: every job of the session, running or ended, by id.
                    if jobs {
                        session["jobs"] = o
                            .jobs
                            .lock()
                            .map(|t| t.values().cloned().collect::<Vec<_>>())
                            .unwrap_or_default()
                            .into();
                    }
                    session
                })
                .collect();
            v.sort_by(|a, b| a["sessionId"].as_str().cmp(&b["sessionId"].as_str()));
            v
        })
        .unwrap_or_default();
    json!({"instance": state.info.instance, "sessions": sessions})
}

fn dir(state: &State, path: &Path) -> Result<Value, agent_client_protocol::Error> {
    let roots = state.roots();
    if roots.is_empty() {
        return Err(lembas_error(
            -32040,
            "Remote work is off on this device.".into(),
            "remote_off",
        ));
    }
    if !inside_roots(path, &roots) {
        return Err(lembas_error(
            -32041,
            format!(
                "Outside the shared directories: {} is not under a root of this device.",
                path.display()
            ),
            "outside_roots",
        ));
    }
    let mut entries: Vec<Value> = state
        .host
        .dir(path)
        .map_err(|e| agent_client_protocol::Error::invalid_params().data(json!(e)))?
        .into_iter()
        .map(|e| json!({"name": e.name, "git": e.git}))
        .collect();
    entries.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Ok(json!({"path": path, "entries": entries}))
}

impl crate::jobs::JobSessions for State {
    fn agreed(&self, cap: &str) -> bool {
        State::agreed(self, cap)
    }

    fn job_parts(&self, session: &str) -> Option<(Session, JobTable, PathBuf)> {
        self.sessions.lock().ok().and_then(|s| {
            s.get(session)
                .map(|o| (o.ops.clone(), o.jobs.clone(), o.cwd.clone()))
        })
    }
}
