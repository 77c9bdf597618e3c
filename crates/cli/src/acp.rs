//! `llembas acp`: the agent over stdio, with the official `agent-client-protocol` crate.
//!
//! Each ACP session is a [`Driver`] of its own; its [`Out`]s become `session/update`
//! notifications (and `session/request_permission` requests for questions), the client's
//! requests become [`Op`]s. The agent runs its own tools on its disk and reports them, with
//! `_meta.lembas` as `spec/acp.md` gives it.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate,
    CancelNotification, ContentBlock, ContentChunk, CurrentModeUpdate, Diff, Implementation,
    InitializeRequest, InitializeResponse, LoadSessionRequest, LoadSessionResponse, Meta,
    NewSessionRequest, NewSessionResponse, PermissionOption, PermissionOptionKind, Plan as AcpPlan,
    PlanEntry, PlanEntryPriority, PlanEntryStatus, PromptRequest, PromptResponse,
    RequestPermissionOutcome, RequestPermissionRequest, SessionConfigOption,
    SessionConfigOptionCategory, SessionConfigOptionValue, SessionConfigSelectOption, SessionMode,
    SessionModeState, SessionNotification, SessionUpdate, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse, StopReason,
    TextContent, ToolCall as AcpCall, ToolCallContent, ToolCallLocation, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, ToolKind, UnstructuredCommandInput,
};
use agent_client_protocol::{
    Agent, Client, JsonRpcNotification, JsonRpcRequest, JsonRpcResponse, Lines,
};
use anyhow::Result;
use harness_core::protocol::{Answer, Block, Event, Mode, Op, Origin, Risk};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::settings::Settings;
use harness_agent::{Ctl, Driver, Out};

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

type Responder<T> = agent_client_protocol::v1::Responder<T>;

/// The codes and texts of `spec/acp.md` §4 *Errors*.
fn lembas_error(code: i32, message: String, short: &str) -> agent_client_protocol::Error {
    agent_client_protocol::Error::new(code, message).data(json!({ "lembas": short }))
}

/// One open session.
struct Open {
    ops: mpsc::UnboundedSender<Ctl>,
    pending: Arc<Mutex<Option<Responder<PromptResponse>>>>,
    cwd: PathBuf,
    model: String,
    /// The session's model link, to check a model asked for (`session/set_config_option`).
    client: harness_model::ModelClient,
    chat: Option<String>,
    mode: Arc<Mutex<Mode>>,
    running: Arc<Mutex<bool>>,
    jobs: Arc<Mutex<std::collections::BTreeMap<u32, Value>>>,
}

struct State {
    settings: Settings,
    instance: String,
    agreed: Mutex<Vec<String>>,
    /// The spec version the client said in `initialize` (`_meta.lembas.spec`).
    client_spec: Mutex<String>,
    sessions: Mutex<HashMap<String, Open>>,
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

    fn agreed(&self, cap: &str) -> bool {
        self.agreed
            .lock()
            .map(|a| a.iter().any(|c| c == cap))
            .unwrap_or(false)
    }

    fn roots(&self) -> Vec<PathBuf> {
        dirs::home_dir().into_iter().collect()
    }

    fn models(&self) -> Vec<String> {
        match &self.settings.model {
            Ok(m) => m.model.iter().cloned().collect(),
            Err(_) => Vec::new(),
        }
    }

    fn limits(&self) -> Value {
        json!({
            "roots": self.roots(),
            "models": self.models(),
            "max_sessions": Value::Null,
        })
    }
}

/// `path` with `.` and `..` applied, lexically.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

fn inside_roots(path: &Path, roots: &[PathBuf]) -> bool {
    let p = lexical(path);
    roots.iter().any(|r| p.starts_with(lexical(r)))
}

fn mode_state(mode: Mode) -> SessionModeState {
    let modes = Mode::ALL
        .iter()
        .map(|m| {
            let name = match m {
                Mode::Manual => "Manual",
                Mode::Edit => "Edit",
                Mode::Auto => "Auto",
                Mode::Plan => "Plan",
            };
            SessionMode::new(m.as_str(), name)
        })
        .collect();
    SessionModeState::new(mode.as_str(), modes)
}

fn meta(v: Value) -> Meta {
    let mut m = Meta::new();
    m.insert("lembas".into(), v);
    m
}

fn text_block(text: impl Into<String>) -> ContentBlock {
    ContentBlock::Text(TextContent::new(text.into()))
}

fn kind_of(block: Block, risk: Option<Risk>) -> ToolKind {
    match block {
        Block::Shell => ToolKind::Execute,
        Block::Edit => ToolKind::Edit,
        Block::Read => ToolKind::Read,
        Block::Search => ToolKind::Search,
        Block::Web => ToolKind::Fetch,
        Block::Plan => ToolKind::Think,
        _ => match risk {
            Some(Risk::Read) => ToolKind::Read,
            Some(Risk::Write) => ToolKind::Edit,
            Some(Risk::Execute) => ToolKind::Execute,
            _ => ToolKind::Other,
        },
    }
}

/// `_lembas/status`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/status", response = LembasResult)]
struct StatusRequest {}

/// `_lembas/limits`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/limits", response = LembasResult)]
struct LimitsRequest {}

/// `_lembas/dir`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/dir", response = LembasResult)]
struct DirRequest {
    path: PathBuf,
}

/// `_lembas/rewind`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/rewind", response = LembasResult)]
struct RewindRequest {
    #[serde(rename = "sessionId")]
    session_id: String,
    turns: u32,
}

/// Any `_lembas` result, as JSON.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcResponse)]
#[serde(transparent)]
struct LembasResult(Value);

/// A `_lembas` notification with JSON params (device → client).
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcNotification)]
#[notification(method = "_lembas/job")]
struct JobNotification(Value);

/// `_lembas/job_note`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcNotification)]
#[notification(method = "_lembas/job_note")]
struct JobNoteNotification(Value);

/// `_lembas/prompt`: a machine turn the device began.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcNotification)]
#[notification(method = "_lembas/prompt")]
struct MachinePrompt(Value);

/// `_lembas/prompt_end`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcNotification)]
#[notification(method = "_lembas/prompt_end")]
struct MachinePromptEnd(Value);

/// `_lembas/show` (device → client): a file for the person's viewer.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/show", response = LembasResult)]
struct ShowRequest(Value);

/// `_lembas/jobs`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/jobs", response = LembasResult)]
struct JobsRequest {
    #[serde(rename = "sessionId")]
    session_id: String,
}

/// `_lembas/job/output`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/job/output", response = LembasResult)]
struct JobOutputRequest {
    #[serde(rename = "sessionId")]
    session_id: String,
    #[serde(rename = "jobId")]
    job_id: String,
    #[serde(default)]
    offset: usize,
}

/// `_lembas/job/stop`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/job/stop", response = LembasResult)]
struct JobStopRequest {
    #[serde(rename = "sessionId")]
    session_id: String,
    #[serde(rename = "jobId")]
    job_id: String,
}

/// `_lembas/job/send`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/job/send", response = LembasResult)]
struct JobSendRequest {
    #[serde(rename = "sessionId")]
    session_id: String,
    #[serde(rename = "jobId")]
    job_id: String,
    text: String,
}

/// `_lembas/job/transcript`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_lembas/job/transcript", response = LembasResult)]
struct JobTranscriptRequest {
    #[serde(rename = "sessionId")]
    session_id: String,
    #[serde(rename = "jobId")]
    job_id: String,
}

type JobTable = Arc<Mutex<std::collections::BTreeMap<u32, Value>>>;

/// The job object of `spec/acp.md` §10 for `job`: the one the events built, or one made from
/// the loop's record (a job of a resumed session).
fn job_object(table: &JobTable, job: &harness_loop::jobs::Job) -> Value {
    table
        .lock()
        .ok()
        .and_then(|t| t.get(&job.id).cloned())
        .unwrap_or_else(|| {
            json!({
                "id": job.id.to_string(),
                "kind": harness_loop::jobs::kind_name(job.kind),
                "state": job.state.as_str(),
                "title": job.title,
            })
        })
}

/// The session's control channel and job table, for a `_lembas/job/…` call.
fn job_session(
    state: &State,
    session: &str,
) -> Result<(mpsc::UnboundedSender<Ctl>, JobTable), agent_client_protocol::Error> {
    if !state.agreed("jobs") {
        return Err(agent_client_protocol::Error::method_not_found());
    }
    state
        .sessions
        .lock()
        .ok()
        .and_then(|s| s.get(session).map(|o| (o.ops.clone(), o.jobs.clone())))
        .ok_or_else(|| unknown_session(session))
}

/// `_lembas/job/send`: the person's `job_send`.
async fn job_send(
    state: &State,
    req: JobSendRequest,
    cx: &ConnectionTo<Client>,
) -> Result<Value, agent_client_protocol::Error> {
    let (ops, table) = job_session(state, &req.session_id)?;
    let id = req
        .job_id
        .parse::<u32>()
        .map_err(|_| unknown_job(&req.job_id))?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let req_text = req.text.clone();
    let _ = ops.send(Ctl::SendJob(id, req.text, tx));
    let queued = match rx.await {
        Ok(Some(Ok(queued))) => queued,
        Ok(Some(Err(text))) => return Err(agent_client_protocol::Error::new(-32602, text)),
        _ => return Err(unknown_job(&req.job_id)),
    };
    let mut job = table
        .lock()
        .ok()
        .and_then(|t| t.get(&id).cloned())
        .unwrap_or_else(|| json!({"id": req.job_id}));
    if !queued {
        // Started again: running once more, and the client hears so.
        if let Some(o) = job.as_object_mut() {
            o.remove("ended");
            o.remove("exit_code");
            o.insert("state".into(), json!("running"));
        }
        if let Ok(mut t) = table.lock() {
            t.insert(id, job.clone());
        }
        let _ = cx.send_notification(JobNotification(json!({
            "sessionId": req.session_id, "job": job,
        })));
    }
    let _ = cx.send_notification(JobNoteNotification(json!({
        "sessionId": req.session_id, "jobId": req.job_id,
        "note": if queued { "sent" } else { "restarted" }, "text": req_text,
    })));
    let delivered = if queued { "queued" } else { "restarted" };
    Ok(json!({"job": job, "delivered": delivered}))
}

/// `_lembas/job/transcript`: a subagent's conversation as `session/update` objects; a
/// command's kept output as one `agent_message_chunk`.
async fn job_transcript(
    state: &State,
    req: JobTranscriptRequest,
) -> Result<Value, agent_client_protocol::Error> {
    let (ops, table) = job_session(state, &req.session_id)?;
    let id = req
        .job_id
        .parse::<u32>()
        .map_err(|_| unknown_job(&req.job_id))?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let _ = ops.send(Ctl::JobTranscript(id, tx));
    let Ok(Some((job, entries))) = rx.await else {
        return Err(unknown_job(&req.job_id));
    };
    let updates = match (job.kind, entries) {
        (harness_core::protocol::JobKind::Subagent, Some(entries)) => {
            let cwd = state
                .sessions
                .lock()
                .ok()
                .and_then(|s| s.get(&req.session_id).map(|o| o.cwd.clone()))
                .unwrap_or_default();
            replay_updates(&entries, &cwd)
        }
        _ if job.output.is_empty() => Vec::new(),
        _ => vec![SessionUpdate::AgentMessageChunk(ContentChunk::new(
            text_block(job.output.clone()),
        ))],
    };
    let updates: Vec<Value> = updates
        .iter()
        .filter_map(|u| serde_json::to_value(u).ok())
        .collect();
    Ok(json!({"job": job_object(&table, &job), "updates": updates}))
}

fn unknown_job(id: &str) -> agent_client_protocol::Error {
    lembas_error(
        -32045,
        format!("No job {id} in this session."),
        "unknown_job",
    )
}

/// `_lembas/plan_state` (device → client).
#[derive(Debug, Clone, Serialize, Deserialize, JsonRpcNotification)]
#[notification(method = "_lembas/plan_state")]
struct PlanStateNotification {
    #[serde(rename = "sessionId")]
    session_id: String,
    plan: Value,
}

/// Runs the agent on stdin/stdout until the client closes it.
pub fn run(settings: Settings) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let instance = format!(
        "llembas-{}",
        dirs::home_dir()
            .map(|h| crate::store::short_hash(&h.display().to_string()))
            .unwrap_or_default()
    );
    let state = Arc::new(State {
        settings,
        instance,
        agreed: Mutex::new(Vec::new()),
        client_spec: Mutex::new(String::new()),
        lembas_client: Mutex::new(false),
        sessions: Mutex::new(HashMap::new()),
    });
    runtime.block_on(async {
        crate::process::end_on_signals();
        serve(state).await
    })?;
    Ok(ExitCode::SUCCESS)
}

async fn serve(state: Arc<State>) -> Result<()> {
    let s1 = state.clone();
    let s2 = state.clone();
    let s3 = state.clone();
    let s4 = state.clone();
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
        .name("llembas")
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
                    let _ = open.ops.send(Ctl::Op(Op::Cancel));
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
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
                        .map(|o| o.ops.send(Ctl::Op(Op::SetMode { mode })).is_ok())
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
                let (tx, rx) = tokio::sync::oneshot::channel();
                let _ = ops.send(Ctl::JobOutput(id, req.offset, tx));
                match rx.await {
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
                let (tx, rx) = tokio::sync::oneshot::channel();
                let _ = ops.send(Ctl::StopJob(id, tx));
                match rx.await {
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
                let (tx, rx) = tokio::sync::oneshot::channel();
                let _ = ops.send(Ctl::Keep(req.turns, tx));
                match rx.await {
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
        .connect_to(stdio_lines())
        .await
        .map_err(|e| anyhow::anyhow!("the ACP connection failed: {e}"))
}

/// The longest line `llembas acp` takes from stdin, in bytes: the device link's frame cap
/// (`spec/acp.md` §1, 16 MiB; no spec data file holds a number for the wire). A longer line is
/// read through and dropped, never held whole, and answered with a parse error.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
/// How much of a bad line a parse error shows (lossily decoded), in bytes.
const BAD_LINE_PREFIX_BYTES: usize = 200;

/// stdin and stdout as the crate's line transport, with stdin split into lines here rather than
/// by the crate: a blank line is skipped; a line that is not UTF-8, not JSON or over
/// [`MAX_LINE_BYTES`] reaches the crate as a short stand-in (see [`stand_in`]) that it answers
/// with a parse error (`-32700`, `id: null`) and goes on — never the whole line echoed back, and
/// never the end of the connection.
fn stdio_lines() -> Lines<
    impl futures_util::Sink<String, Error = std::io::Error> + Send + 'static,
    impl futures_util::Stream<Item = std::io::Result<String>> + Send + 'static,
> {
    use tokio::io::AsyncWriteExt as _;
    let reader = tokio::io::BufReader::new(tokio::io::stdin());
    let incoming = futures_util::stream::unfold(Some(reader), async |reader| {
        let mut reader = reader?;
        loop {
            match next_line(&mut reader).await {
                Ok(None) => return None,
                Ok(Some(WireLine::Blank)) => continue,
                Ok(Some(WireLine::Text(line))) => return Some((Ok(line), Some(reader))),
                Err(e) => return Some((Err(e), None)),
            }
        }
    });
    let outgoing =
        futures_util::sink::unfold(tokio::io::stdout(), async |mut out, line: String| {
            let mut bytes = line.into_bytes();
            bytes.push(b'\n');
            out.write_all(&bytes).await?;
            out.flush().await?;
            Ok::<_, std::io::Error>(out)
        });
    Lines::new(Box::pin(outgoing), Box::pin(incoming))
}

/// One line of stdin as the crate is to see it.
#[derive(Debug, PartialEq)]
enum WireLine {
    /// Nothing but white space: no message, no answer.
    Blank,
    /// A JSON line, or the stand-in for a bad one.
    Text(String),
}

/// The next line of `input` (without its `\n` or `\r\n`), `None` at the end. At most
/// [`MAX_LINE_BYTES`] of a line are kept; past that only its length is counted.
async fn next_line(
    input: &mut (impl tokio::io::AsyncBufRead + Unpin),
) -> std::io::Result<Option<WireLine>> {
    use tokio::io::AsyncBufReadExt as _;
    let mut kept: Vec<u8> = Vec::new();
    let mut len = 0usize;
    let mut ended = false;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            break;
        }
        let (chunk, used) = match memchr_newline(buf) {
            Some(i) => (&buf[..i], i + 1),
            None => (buf, buf.len()),
        };
        let room = (MAX_LINE_BYTES + 1).saturating_sub(kept.len());
        kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
        len += chunk.len();
        let done = used > chunk.len();
        input.consume(used);
        if done {
            ended = true;
            break;
        }
    }
    if !ended && len == 0 {
        return Ok(None);
    }
    if kept.last() == Some(&b'\r') && len <= MAX_LINE_BYTES {
        kept.pop();
        len -= 1;
    }
    Ok(Some(judge_line(kept, len)))
}

fn memchr_newline(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

/// What the crate is given for a line of `len` bytes whose first bytes are `kept`.
fn judge_line(kept: Vec<u8>, len: usize) -> WireLine {
    if len > MAX_LINE_BYTES {
        return WireLine::Text(stand_in(
            &kept,
            len,
            &format!("over the limit of {MAX_LINE_BYTES} bytes"),
        ));
    }
    match String::from_utf8(kept) {
        Err(e) => WireLine::Text(stand_in(e.as_bytes(), len, "not UTF-8")),
        Ok(text) if text.trim().is_empty() => WireLine::Blank,
        Ok(text) => match serde_json::from_str::<serde::de::IgnoredAny>(&text) {
            Ok(_) => WireLine::Text(text),
            Err(_) => WireLine::Text(stand_in(text.as_bytes(), len, "not JSON")),
        },
    }
}

/// The short text that stands for a bad line: its length, why, and its first
/// [`BAD_LINE_PREFIX_BYTES`] bytes, lossily decoded. It starts with `#`, which no JSON text
/// does, so the crate answers it with a parse error whose `data.line` is this text.
fn stand_in(bytes: &[u8], len: usize, why: &str) -> String {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(BAD_LINE_PREFIX_BYTES)]);
    format!("# a line of {len} bytes, {why}; it began: {head}")
}

fn unknown_session(id: &str) -> agent_client_protocol::Error {
    lembas_error(
        -32044,
        format!("No session {id} on this device."),
        "unknown_session",
    )
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
    let caps = AgentCapabilities::new().load_session(true).meta(meta(json!({
        "protocol": LEMBAS_PROTOCOL,
        "spec": harness_spec::Spec::embedded().version().to_string(),
        "capabilities": CAPABILITIES,
        "instance": {"id": state.instance, "name": "llembas", "version": env!("CARGO_PKG_VERSION")},
        "limits": state.limits(),
    })));
    InitializeResponse::new(req.protocol_version)
        .agent_capabilities(caps)
        .agent_info(Implementation::new("llembas", env!("CARGO_PKG_VERSION")).title("LLeMbas CLI"))
}

async fn new_session(
    state: &Arc<State>,
    req: NewSessionRequest,
    cx: ConnectionTo<Client>,
) -> Result<NewSessionResponse, agent_client_protocol::Error> {
    let (id, mode, mut meta) = open_session(state, &req.cwd, req.meta.as_ref(), None, cx).await?;
    if !req.mcp_servers.is_empty() {
        // Until MCP lands, said rather than silently dropped.
        let notice = format!(
            "MCP servers are not supported yet: the {} given {} ignored.",
            req.mcp_servers.len(),
            if req.mcp_servers.len() == 1 {
                "was"
            } else {
                "were"
            }
        );
        eprintln!("llembas acp: {notice}");
        if let Some(l) = meta.get_mut("lembas").and_then(Value::as_object_mut) {
            l.insert(
                "mcp_servers".into(),
                json!({"ignored": req.mcp_servers.len(), "notice": notice}),
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
    let (id, mode, meta) = open_session(state, &req.cwd, req.meta.as_ref(), Some(id), cx).await?;
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
        .map(|o| (o.client.clone(), o.model.clone()))?;
    let mut models = client
        .list_models(&harness_model::CancellationToken::new())
        .await
        .unwrap_or_default();
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
        .and_then(|s| s.get(&id).map(|o| (o.client.clone(), o.ops.clone())))
        .ok_or_else(|| unknown_session(&id))?;
    let token = harness_model::CancellationToken::new();
    if !client.serves(&wanted, &token).await.unwrap_or(true) {
        return Err(lembas_error(
            -32042,
            format!(
                "Model unavailable: this device cannot run {wanted}; the session keeps its model."
            ),
            "model_unavailable",
        ));
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    let _ = ops.send(Ctl::Query(
        harness_agent::Query::Model(Some(wanted.clone())),
        tx,
    ));
    let answer = rx.await.unwrap_or_default();
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

/// The conversation of saved events as `session/update`s, in order (ACP's `session/load`).
fn replay_updates(entries: &[harness_loop::transcript::Entry], cwd: &Path) -> Vec<SessionUpdate> {
    use harness_loop::transcript::Entry;
    let spec = harness_spec::Spec::embedded();
    let mut out = Vec::new();
    let mut edits = std::collections::HashSet::new();
    for e in entries {
        match e {
            Entry::TurnStarted { text, origin, .. } | Entry::User { text, origin } => {
                let mut chunk = ContentChunk::new(text_block(text.clone()));
                if *origin == Origin::Machine {
                    chunk = chunk.meta(meta(json!({"machine": true})));
                }
                out.push(SessionUpdate::UserMessageChunk(chunk));
            }
            Entry::Assistant {
                text,
                reasoning,
                tool_calls,
            } => {
                if !reasoning.is_empty() {
                    out.push(SessionUpdate::AgentThoughtChunk(ContentChunk::new(
                        text_block(reasoning.clone()),
                    )));
                }
                if !text.is_empty() {
                    out.push(SessionUpdate::AgentMessageChunk(ContentChunk::new(
                        text_block(text.clone()),
                    )));
                }
                for call in tool_calls {
                    let tool = spec.tool(&call.name);
                    let block = tool.map(|t| t.block).unwrap_or(Block::Tool);
                    let risk = tool.map(|t| t.risk);
                    let title = crate::render::call_title(&call.name, block, &call.arguments);
                    if block == Block::Edit {
                        edits.insert(call.id.clone());
                    }
                    let mut c = AcpCall::new(call.id.clone(), title)
                        .kind(kind_of(block, risk))
                        .status(ToolCallStatus::Pending)
                        .raw_input(call.arguments.clone())
                        .meta(meta(
                            json!({"tool": call.name, "block": block, "risk": risk}),
                        ));
                    if let Some(l) = call_locations(&call.arguments, cwd) {
                        c = c.locations(l);
                    }
                    out.push(SessionUpdate::ToolCall(c));
                }
            }
            Entry::ToolResult {
                call_id,
                tool,
                result_id,
                text,
                kind,
                ..
            } => {
                let status = if *kind == harness_loop::context::InsertKind::Error {
                    ToolCallStatus::Failed
                } else {
                    ToolCallStatus::Completed
                };
                // An edit is replayed with its diffs, as it was shown when it ran.
                let diffs = if edits.contains(call_id) && status == ToolCallStatus::Completed {
                    diffs_in(text, cwd)
                } else {
                    Vec::new()
                };
                let content = if diffs.is_empty() {
                    vec![ToolCallContent::from(text_block(text.clone()))]
                } else {
                    diffs.into_iter().map(ToolCallContent::from).collect()
                };
                out.push(SessionUpdate::ToolCallUpdate(
                    ToolCallUpdate::new(
                        call_id.clone(),
                        ToolCallUpdateFields::new().status(status).content(content),
                    )
                    .meta(meta(json!({"tool": tool, "result": result_id}))),
                ));
            }
            _ => {}
        }
    }
    out
}

/// The per-file diffs of an edit's saved result (its unified diff: `+++ b<path>` and hunks),
/// each as the lines around the change before and after; the transcript keeps no whole file.
fn diffs_in(text: &str, cwd: &Path) -> Vec<Diff> {
    let mut out = Vec::new();
    let mut current: Option<(PathBuf, String, String)> = None;
    let mut in_hunk = false;
    for line in text.lines() {
        if let Some(path) = line.strip_prefix("+++ ") {
            if let Some((p, old, new)) = current.take() {
                out.push(Diff::new(p, new).old_text(old));
            }
            let path = path
                .strip_prefix('b')
                .filter(|p| p.starts_with('/'))
                .unwrap_or(path);
            let p = Path::new(path.trim());
            current = Some((
                if p.is_absolute() {
                    p.to_path_buf()
                } else {
                    cwd.join(p)
                },
                String::new(),
                String::new(),
            ));
            in_hunk = false;
            continue;
        }
        let Some((_, old, new)) = current.as_mut() else {
            continue;
        };
        if line.starts_with("@@") {
            in_hunk = true;
        } else if !in_hunk || line.starts_with("--- ") {
            in_hunk = false;
        } else if let Some(l) = line.strip_prefix('+') {
            new.push_str(l);
            new.push('\n');
        } else if let Some(l) = line.strip_prefix('-') {
            old.push_str(l);
            old.push('\n');
        } else {
            let l = line.strip_prefix(' ').unwrap_or(line);
            for side in [&mut *old, &mut *new] {
                side.push_str(l);
                side.push('\n');
            }
        }
    }
    if let Some((p, old, new)) = current {
        out.push(Diff::new(p, new).old_text(old));
    }
    out
}

async fn open_session(
    state: &Arc<State>,
    cwd: &Path,
    req_meta: Option<&Meta>,
    resume: Option<String>,
    cx: ConnectionTo<Client>,
) -> Result<(String, Mode, Meta), agent_client_protocol::Error> {
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
    let lembas = req
        .meta
        .as_ref()
        .and_then(|m| m.get("lembas"))
        .cloned()
        .unwrap_or(Value::Null);
    let mut settings = state.settings.clone();
    settings.cwd = req.cwd.clone();
    let store = crate::store::Store::new(settings.dirs.sessions());
    if let Some(id) = &resume {
        if !store.dir(id).join("meta.json").exists() {
            return Err(agent_client_protocol::Error::new(
                -32002,
                format!("Resource not found: no saved session {id}"),
            ));
        }
        // The mode the session last had (kept in its metadata by the runtime).
        if let Some(m) = store.find(id, &settings.cwd).ok().and_then(|m| m.mode) {
            settings.mode = m;
        }
    }
    if let Some(m) = lembas.get("mode").and_then(Value::as_str) {
        settings.mode = m
            .parse()
            .map_err(|_| agent_client_protocol::Error::invalid_params().data(json!({"mode": m})))?;
    }
    if let Some(p) = lembas.get("personality").and_then(Value::as_str) {
        settings.personality = Some(p.to_owned());
    }
    let wanted = lembas
        .get("model")
        .and_then(|m| m.get("id"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let scope = harness_core::library::scope_from_meta(&lembas).map_err(|e| {
        agent_client_protocol::Error::invalid_params()
            .data(json!({"lembas": "invalid_scope", "message": e.to_string()}))
    })?;
    let mut parts = crate::session::build(&settings, resume.as_deref())
        .await
        .map_err(|e| {
            agent_client_protocol::Error::internal_error().data(json!(format!("{e:#}")))
        })?;
    // Capability `memory`: the records are the client instance's, over its HTTP API.
    let memory_api = state
        .agreed("memory")
        .then(|| {
            lembas
                .get("api")
                .and_then(crate::memory_api::Api::from_meta)
        })
        .flatten();
    parts.exec.personal.scope = scope.clone();
    if let Some(api) = &memory_api {
        parts.exec.personal.memory = None;
        parts.exec.memory_api = Some(api.clone());
    }
    let model = parts.model_name.clone();
    if let Some(w) = &wanted
        && !harness_model::settings::same_model(w, &model)
    {
        return Err(lembas_error(
            -32042,
            format!("Model unavailable: this device cannot run {w}; the session was not opened."),
            "model_unavailable",
        ));
    }
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let (op_tx, op_rx) = mpsc::unbounded_channel();
    let replay = parts
        .resume
        .as_deref()
        .map(|e| replay_updates(e, &req.cwd))
        .unwrap_or_default();
    let client = parts.client.clone();
    let (setup, resume) = parts.into_setup();
    let mut driver = Driver::new(setup, resume.as_deref(), out_tx, op_rx).map_err(|e| {
        agent_client_protocol::Error::internal_error().data(json!(format!("{e:#}")))
    })?;
    if state.agreed("context")
        && let Some(text) = lembas.get("context").and_then(Value::as_str)
    {
        driver.set_client_context(text);
    }
    if state.agreed("show") {
        driver.holds_display();
    }
    // What an instance older than 3.0.0 hands over (a 3.0.0 one sends neither).
    if state.agreed("library")
        && let Some(summary) = lembas
            .get("library")
            .and_then(|l| l.get("summary"))
            .and_then(Value::as_str)
    {
        driver.set_library_summary(summary);
    }
    if state.agreed("prototypes")
        && let Some(list) = lembas.get("prototypes")
    {
        let prototypes = serde_json::from_value(list.clone()).map_err(|e| {
            agent_client_protocol::Error::invalid_params()
                .data(json!({"lembas": "invalid_prototypes", "message": e.to_string()}))
        })?;
        driver.set_prototypes(harness_core::prompt::PrototypeHandoff {
            instance: state.client_spec(),
            prototypes,
        });
    }
    if let Some(api) = &memory_api {
        driver.set_memory_entries(crate::memory_api::entries(api).await);
    }
    // A reopened session's jobs, as its transcript left them (lost ones ended).
    let jobs: JobTable = Arc::default();
    if let Ok(mut t) = jobs.lock() {
        for job in driver.jobs() {
            let object = job_object(&Arc::default(), &job);
            t.insert(job.id, object);
        }
    }
    let id = driver.id().to_owned();
    let open = Open {
        ops: op_tx.clone(),
        pending: Arc::new(Mutex::new(None)),
        cwd: req.cwd.clone(),
        model: model.clone(),
        client: client.clone(),
        chat: lembas
            .get("chat")
            .and_then(Value::as_str)
            .map(str::to_owned),
        mode: Arc::new(Mutex::new(settings.mode)),
        running: Arc::new(Mutex::new(false)),
        jobs,
    };
    let pump_cx = cx.clone();
    let pump = Pump {
        session: id.clone(),
        cx,
        ops: op_tx,
        pending: open.pending.clone(),
        mode: open.mode.clone(),
        running: open.running.clone(),
        plan_state: state.agreed("plan_state"),
        jobs_cap: state.agreed("jobs"),
        jobs: open.jobs.clone(),
        machine: Arc::new(Mutex::new(None)),
        scope,
        cwd: req.cwd.clone(),
    };
    if let Ok(mut s) = state.sessions.lock() {
        s.insert(id.clone(), open);
    }
    tokio::spawn(async move {
        if let Err(e) = driver.run(false).await {
            eprintln!("llembas acp: session {}: {e:#}", driver.id());
        }
    });
    tokio::spawn(pump.run(out_rx));
    for update in replay {
        let _ = pump_cx.send_notification(SessionNotification::new(id.clone(), update));
    }
    let _ = pump_cx.send_notification(SessionNotification::new(
        id.clone(),
        SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(available_commands())),
    ));
    let spec = harness_spec::Spec::embedded().version().to_string();
    let m = meta(json!({
        "instance": {"id": state.instance, "session": id, "model": model, "spec": spec}
    }));
    Ok((id, settings.mode, m))
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
    let mut text = String::new();
    for block in &req.prompt {
        match block {
            ContentBlock::Text(t) => text.push_str(&t.text),
            ContentBlock::ResourceLink(l) => {
                text.push_str(&format!("\n[{}]({})\n", l.name, l.uri));
            }
            _ => {}
        }
    }
    // A slash command the session advertised: done here, not sent to the model.
    let mode = open.mode.lock().map(|m| *m).unwrap_or(Mode::Manual);
    if let Some(command) = slash_command(&text, mode) {
        let ops = open.ops.clone();
        let session = req.session_id.clone();
        drop(sessions);
        let _ = cx.clone().spawn(async move {
            let said = match command {
                Err(line) => Some(line),
                Ok(Ok(mode)) => {
                    let _ = ops.send(Ctl::Op(Op::SetMode { mode }));
                    None
                }
                Ok(Err(query)) => {
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    let _ = ops.send(Ctl::Query(query, tx));
                    rx.await.ok()
                }
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
    let _ = open.ops.send(Ctl::Op(Op::Prompt {
        text,
        origin: Origin::Person,
        images: Vec::new(),
    }));
    Ok(())
}

/// A prompt that is one of [`ACP_COMMANDS`]: a mode to set, a query to answer, or the line
/// to say (a bad argument); `None` for anything else (it goes to the model).
#[allow(clippy::type_complexity)]
fn slash_command(
    text: &str,
    mode: Mode,
) -> Option<Result<Result<Mode, harness_agent::Query>, String>> {
    use crate::interactive::{Line, parse_line};
    let name = text.trim().strip_prefix('/')?.split_whitespace().next()?;
    if !ACP_COMMANDS.contains(&name) {
        return None;
    }
    Some(match parse_line(text) {
        Line::Mode(Some(m)) => Ok(Ok(m)),
        Line::Mode(None) => Err(format!("mode: {mode}")),
        Line::Plan => Ok(Err(harness_agent::Query::Plan)),
        Line::Jobs => Ok(Err(harness_agent::Query::Jobs)),
        Line::Compact => Ok(Err(harness_agent::Query::Compact)),
        Line::Recall(id) => Ok(Err(harness_agent::Query::Recall(id))),
        Line::Unknown(line) => Err(line),
        _ => return None,
    })
}

fn status(state: &State) -> Value {
    let sessions: Vec<Value> = state
        .sessions
        .lock()
        .map(|s| {
            let mut v: Vec<Value> = s
                .iter()
                .map(|(id, o)| {
                    let running = o.running.lock().map(|r| *r).unwrap_or(false);
                    json!({
                        "sessionId": id,
                        "chat": o.chat,
                        "cwd": o.cwd,
                        "model": o.model,
                        "mode": o.mode.lock().map(|m| m.as_str()).unwrap_or("manual"),
                        "state": if running { "running" } else { "idle" },
                    })
                })
                .collect();
            v.sort_by(|a, b| a["sessionId"].as_str().cmp(&b["sessionId"].as_str()));
            v
        })
        .unwrap_or_default();
    json!({"instance": state.instance, "sessions": sessions})
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
    let mut entries: Vec<Value> = std::fs::read_dir(path)
        .map_err(|e| agent_client_protocol::Error::invalid_params().data(json!(e.to_string())))?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            Some(json!({"name": name, "git": e.path().join(".git").exists()}))
        })
        .collect();
    entries.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Ok(json!({"path": path, "entries": entries}))
}

/// Carries one session's outputs to the client.
struct Pump {
    session: String,
    cx: ConnectionTo<Client>,
    ops: mpsc::UnboundedSender<Ctl>,
    pending: Arc<Mutex<Option<Responder<PromptResponse>>>>,
    mode: Arc<Mutex<Mode>>,
    running: Arc<Mutex<bool>>,
    plan_state: bool,
    jobs_cap: bool,
    jobs: Arc<Mutex<std::collections::BTreeMap<u32, Value>>>,
    machine: Arc<Mutex<Option<String>>>,
    scope: Option<Value>,
    /// The session's directory, for a call's relative path.
    cwd: PathBuf,
}

/// What the Pump keeps of a call while it runs.
struct CallSeen {
    name: String,
    block: Block,
    title: String,
    arguments: Value,
    /// The diffs of the files it changed.
    diffs: Vec<Diff>,
    /// Its output so far, as it came.
    output: String,
}

/// The slash commands a prompt may be (`/mode plan`), as `available_commands_update` says them.
fn available_commands() -> Vec<AvailableCommand> {
    ACP_COMMANDS
        .iter()
        .filter_map(|name| {
            let line = crate::interactive::HELP.lines().find(|l| {
                l.strip_prefix('/')
                    .and_then(|l| l.split_whitespace().next())
                    == Some(name)
            })?;
            let (usage, description) = line.split_once("  ")?;
            let mut c = AvailableCommand::new(*name, description.trim());
            if let Some((_, arg)) = usage.trim().split_once(' ') {
                c = c.input(AvailableCommandInput::Unstructured(
                    UnstructuredCommandInput::new(arg.trim()),
                ));
            }
            Some(c)
        })
        .collect()
}

/// The terminal's slash commands that mean something over ACP.
const ACP_COMMANDS: &[&str] = &["mode", "plan", "jobs", "compact", "recall"];

/// The location a call works on, from its `path` (relative to the session's directory).
fn call_locations(args: &Value, cwd: &Path) -> Option<Vec<ToolCallLocation>> {
    let path = args.get("path").and_then(Value::as_str)?;
    if path.is_empty() {
        return None;
    }
    let p = Path::new(path);
    let full = if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    };
    Some(vec![ToolCallLocation::new(lexical(&full))])
}

static MACHINE_TURNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Now as `2026-11-29T20:14:03Z`.
fn iso_now() -> String {
    let t = crate::store::now();
    let day = crate::store::format_time(t);
    format!("{}T{}:{:02}Z", &day[..10], &day[11..], t % 60)
}

impl Pump {
    fn job_changed(&self, job_id: &str, object: Value) {
        if let (Ok(id), Ok(mut t)) = (job_id.parse::<u32>(), self.jobs.lock()) {
            t.insert(id, object.clone());
        }
        if self.jobs_cap {
            let _ = self.cx.send_notification(JobNotification(json!({
                "sessionId": self.session, "job": object,
            })));
        }
    }

    fn update(&self, update: SessionUpdate) {
        let _ = self
            .cx
            .send_notification(SessionNotification::new(self.session.clone(), update));
    }

    async fn run(self, mut rx: mpsc::UnboundedReceiver<Out>) {
        let mut calls: HashMap<String, CallSeen> = HashMap::new();
        while let Some(out) = rx.recv().await {
            match out {
                Out::ToolOutput { call_id, text } => {
                    // A running command: in progress, its output so far.
                    if let Some(c) = calls.get_mut(&call_id) {
                        c.output.push_str(&text);
                        let fields = ToolCallUpdateFields::new()
                            .status(ToolCallStatus::InProgress)
                            .content(vec![ToolCallContent::from(text_block(c.output.clone()))]);
                        self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                            call_id, fields,
                        )));
                    }
                }
                // Not offered over ACP; should one come, nobody answers it.
                Out::Question { call_id, .. } => {
                    let _ = self.ops.send(Ctl::Reply(call_id, None));
                }
                Out::Show {
                    call_id,
                    path,
                    title,
                    kind,
                    language,
                    line,
                    content,
                } => {
                    let mut params = json!({
                        "sessionId": self.session, "path": path, "title": title,
                        "kind": kind, "content": content,
                    });
                    if let Some(l) = language {
                        params["language"] = json!(l);
                    }
                    if let Some(l) = line {
                        params["line"] = json!(l);
                    }
                    let cx = self.cx.clone();
                    let ops = self.ops.clone();
                    let _ = self.cx.spawn(async move {
                        // `{"shown": false}`, an error or a dropped link: the viewer is gone.
                        let shown = match cx.send_request(ShowRequest(params)).block_task().await {
                            Ok(r) => r.0.get("shown").and_then(Value::as_bool) == Some(true),
                            Err(_) => false,
                        };
                        let _ = ops.send(Ctl::Reply(call_id, shown.then(String::new)));
                        Ok(())
                    });
                }
                Out::Edit {
                    call_id,
                    path,
                    before,
                    after,
                } => {
                    let diff = Diff::new(PathBuf::from(path), after).old_text(before);
                    let seen = calls.entry(call_id.clone()).or_insert_with(|| CallSeen {
                        name: String::new(),
                        block: Block::Edit,
                        title: String::new(),
                        arguments: Value::Null,
                        diffs: Vec::new(),
                        output: String::new(),
                    });
                    seen.diffs.push(diff);
                    let content: Vec<ToolCallContent> = seen
                        .diffs
                        .iter()
                        .cloned()
                        .map(ToolCallContent::from)
                        .collect();
                    self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                        call_id,
                        ToolCallUpdateFields::new().content(content),
                    )));
                }
                Out::Event(e) => self.event(e, &mut calls),
            }
        }
    }

    fn event(&self, e: Event, calls: &mut HashMap<String, CallSeen>) {
        match e {
            Event::UserInput { text, origin } => {
                if let Ok(mut r) = self.running.lock() {
                    *r = true;
                }
                let prompted = self.pending.lock().map(|p| p.is_some()).unwrap_or(false);
                if origin == Origin::Machine && !prompted {
                    // A machine turn: announced, then streamed like any prompt.
                    if self.jobs_cap {
                        let n =
                            MACHINE_TURNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                        let pid = format!("m_{n}");
                        if let Ok(mut m) = self.machine.lock() {
                            *m = Some(pid.clone());
                        }
                        let _ = self.cx.send_notification(MachinePrompt(json!({
                            "sessionId": self.session, "prompt": pid, "machine": true,
                            "content": [{"type": "text", "text": text}],
                        })));
                    }
                } else if origin == Origin::Machine {
                    let chunk =
                        ContentChunk::new(text_block(text)).meta(meta(json!({"machine": true})));
                    self.update(SessionUpdate::UserMessageChunk(chunk));
                }
            }
            Event::TextDelta { text } => self.update(SessionUpdate::AgentMessageChunk(
                ContentChunk::new(text_block(text)),
            )),
            Event::ReasoningDelta { text } => self.update(SessionUpdate::AgentThoughtChunk(
                ContentChunk::new(text_block(text)),
            )),
            Event::ToolCallStarted { call, block, .. } => {
                let tool = harness_spec::Spec::embedded().tool(&call.name);
                let risk = tool.map(|t| t.risk);
                let title = crate::render::call_title(&call.name, block, &call.arguments);
                calls.insert(
                    call.id.clone(),
                    CallSeen {
                        name: call.name.clone(),
                        block,
                        title: title.clone(),
                        arguments: call.arguments.clone(),
                        diffs: Vec::new(),
                        output: String::new(),
                    },
                );
                let mut lembas = json!({"tool": call.name, "block": block});
                if let Some(r) = risk {
                    lembas["risk"] = json!(r);
                }
                let scoped = harness_core::library::scope_call(
                    &call.name,
                    &call.arguments,
                    self.scope.as_ref(),
                );
                if let Some(s) = scoped.scope {
                    lembas["scope"] = s;
                }
                let mut c = AcpCall::new(call.id.clone(), title)
                    .kind(kind_of(block, risk))
                    .status(ToolCallStatus::Pending)
                    .raw_input(call.arguments.clone())
                    .meta(meta(lembas));
                if let Some(l) = call_locations(&call.arguments, &self.cwd) {
                    c = c.locations(l);
                }
                self.update(SessionUpdate::ToolCall(c));
            }
            Event::ToolCallAsked { call_id, question } => {
                let mut options = vec![PermissionOption::new(
                    "once",
                    "Allow once",
                    PermissionOptionKind::AllowOnce,
                )];
                if let Some(p) = &question.pattern {
                    options.push(PermissionOption::new(
                        "always",
                        format!("Always allow {}", p.replace('\n', ", ")),
                        PermissionOptionKind::AllowAlways,
                    ));
                }
                options.push(PermissionOption::new(
                    "no",
                    "Refuse",
                    PermissionOptionKind::RejectOnce,
                ));
                let seen = calls.get(&call_id);
                let block = seen.map(|c| c.block).unwrap_or(Block::Tool);
                let mut lembas = json!({
                    "tool": question.tool,
                    "risk": question.risk,
                    "mode": self.mode.lock().map(|m| m.as_str()).unwrap_or("manual"),
                });
                match &question.pattern {
                    Some(p) => lembas["always"] = json!(p),
                    None => lembas["confirm"] = json!("always"),
                }
                lembas["subject"] = json!(question.subject);
                if let Some(r) = &question.reason {
                    lembas["reason"] = json!(r);
                }
                if let Some(c) = &question.change {
                    lembas["change"] = json!(c);
                }
                // The call as the client drew it: its title and its input.
                let mut fields = ToolCallUpdateFields::new()
                    .title(
                        seen.map(|c| c.title.clone())
                            .unwrap_or_else(|| question.subject.clone()),
                    )
                    .kind(kind_of(block, Some(question.risk)))
                    .status(ToolCallStatus::Pending);
                if let Some(c) = seen {
                    fields = fields.raw_input(c.arguments.clone());
                    if let Some(l) = call_locations(&c.arguments, &self.cwd) {
                        fields = fields.locations(l);
                    }
                }
                let request = RequestPermissionRequest::new(
                    self.session.clone(),
                    ToolCallUpdate::new(call_id.clone(), fields),
                    options,
                )
                .meta(meta(lembas));
                let cx = self.cx.clone();
                let ops = self.ops.clone();
                let _ = self.cx.spawn(async move {
                    let answer = match cx.send_request(request).block_task().await {
                        Ok(r) => match r.outcome {
                            RequestPermissionOutcome::Selected(s) => {
                                match s.option_id.to_string().as_str() {
                                    "once" => Answer::Once,
                                    "always" => Answer::Always,
                                    _ => Answer::Deny { feedback: None },
                                }
                            }
                            _ => Answer::Deny { feedback: None },
                        },
                        Err(_) => Answer::Deny { feedback: None },
                    };
                    let _ = ops.send(Ctl::Op(Op::Answer { call_id, answer }));
                    Ok(())
                });
            }
            Event::ToolCallAnswered { call_id, answer } => {
                if matches!(answer, Answer::Once | Answer::Always) {
                    self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                        call_id,
                        ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
                    )));
                }
            }
            Event::ToolCallFinished { result } => {
                let status = if result.is_error {
                    ToolCallStatus::Failed
                } else {
                    ToolCallStatus::Completed
                };
                let seen = calls.remove(&result.call_id);
                // An edit keeps its diffs as its content; anything else shows its result.
                let content = match &seen {
                    Some(c) if !c.diffs.is_empty() && !result.is_error => {
                        c.diffs.iter().cloned().map(ToolCallContent::from).collect()
                    }
                    // The result id is in the meta; the text is the result's own.
                    _ => vec![ToolCallContent::from(text_block(result.body()))],
                };
                let fields = ToolCallUpdateFields::new().status(status).content(content);
                let mut lembas = json!({"result": result.result_id});
                if let Some(c) = &seen {
                    lembas["tool"] = json!(c.name);
                    lembas["block"] = json!(c.block);
                }
                self.update(SessionUpdate::ToolCallUpdate(
                    ToolCallUpdate::new(result.call_id.clone(), fields).meta(meta(lembas)),
                ));
            }
            Event::PlanChanged { plan } => {
                if self.plan_state {
                    let _ = self.cx.send_notification(PlanStateNotification {
                        session_id: self.session.clone(),
                        plan: serde_json::to_value(&plan).unwrap_or(Value::Null),
                    });
                } else {
                    let mut entries = Vec::new();
                    if let Some(p) = &plan {
                        let v = serde_json::to_value(p).unwrap_or(Value::Null);
                        for ph in v["phases"].as_array().into_iter().flatten() {
                            for t in ph["tasks"].as_array().into_iter().flatten() {
                                let status = match t["status"].as_str() {
                                    Some("doing") => PlanEntryStatus::InProgress,
                                    Some("done") | Some("dropped") => PlanEntryStatus::Completed,
                                    _ => PlanEntryStatus::Pending,
                                };
                                entries.push(PlanEntry::new(
                                    t["title"].as_str().unwrap_or_default(),
                                    PlanEntryPriority::Medium,
                                    status,
                                ));
                            }
                        }
                    }
                    self.update(SessionUpdate::Plan(AcpPlan::new(entries)));
                }
            }
            Event::ModeChanged { mode } => {
                if let Ok(mut m) = self.mode.lock() {
                    *m = mode;
                }
                self.update(SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
                    mode.as_str(),
                )));
            }
            Event::Notice { text, .. } => eprintln!("llembas acp: {text}"),
            Event::JobStarted {
                job_id,
                kind,
                title,
            } => {
                let object = json!({
                    "id": job_id, "kind": kind, "state": "running", "title": title,
                    "started": iso_now(),
                });
                self.job_changed(&job_id, object);
            }
            Event::JobEnded { job_id, end } => {
                let mut object = self
                    .jobs
                    .lock()
                    .ok()
                    .and_then(|t| {
                        job_id
                            .parse::<u32>()
                            .ok()
                            .and_then(|id| t.get(&id).cloned())
                    })
                    .unwrap_or_else(|| json!({"id": job_id}));
                let state = match &end {
                    harness_core::protocol::JobEnd::Done { exit_code }
                        if exit_code.is_none_or(|c| c == 0) =>
                    {
                        "done"
                    }
                    harness_core::protocol::JobEnd::Stopped => "stopped",
                    _ => "failed",
                };
                object["state"] = json!(state);
                object["ended"] = json!(iso_now());
                if let harness_core::protocol::JobEnd::Done { exit_code: Some(c) } = end {
                    object["exit_code"] = json!(c);
                }
                self.job_changed(&job_id, object);
            }
            Event::JobNote { job_id, text } if self.jobs_cap => {
                let _ = self.cx.send_notification(JobNoteNotification(json!({
                    "sessionId": self.session, "jobId": job_id, "note": "report", "text": text,
                })));
            }
            Event::TurnEnded { reason } => {
                if let Ok(mut r) = self.running.lock() {
                    *r = false;
                }
                let responder = self.pending.lock().ok().and_then(|mut p| p.take());
                if responder.is_none()
                    && let Some(pid) = self.machine.lock().ok().and_then(|mut m| m.take())
                {
                    let stop = harness_agent::stop_reason(&reason).unwrap_or("refusal");
                    let _ = self.cx.send_notification(MachinePromptEnd(json!({
                        "sessionId": self.session, "prompt": pid, "stopReason": stop,
                    })));
                }
                if let Some(responder) = responder {
                    let _ = match harness_agent::stop_reason(&reason) {
                        Ok(stop) => responder.respond(PromptResponse::new(acp_stop(stop))),
                        Err(message) => responder.respond_with_error(
                            agent_client_protocol::Error::internal_error().data(json!(message)),
                        ),
                    };
                }
            }
            _ => {}
        }
    }
}

/// The ACP type of a stop reason harness-agent named.
fn acp_stop(stop: &str) -> StopReason {
    match stop {
        "cancelled" => StopReason::Cancelled,
        "max_tokens" => StopReason::MaxTokens,
        "max_turn_requests" => StopReason::MaxTurnRequests,
        _ => StopReason::EndTurn,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_lexical() {
        let roots = vec![PathBuf::from("/home/ana/src")];
        assert!(inside_roots(Path::new("/home/ana/src/api"), &roots));
        assert!(inside_roots(Path::new("/home/ana/src"), &roots));
        assert!(!inside_roots(Path::new("/home/ana/src/../notes"), &roots));
        assert!(!inside_roots(Path::new("/home/ana/srcx"), &roots));
    }
}
