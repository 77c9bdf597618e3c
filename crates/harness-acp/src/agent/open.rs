//! Sessions opened (`session/new`) and loaded (`session/load`): where they may be, what the
//! client hands over in `_meta.lembas`, the session spawned with it, its pump started and what
//! the client is told first.

use std::path::Path;
use std::sync::{Arc, Mutex};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AvailableCommandsUpdate, LoadSessionRequest, LoadSessionResponse, Meta, NewSessionRequest,
    NewSessionResponse, SessionNotification, SessionUpdate,
};
use harness_agent::{Session, SessionBuilder, Spawned};
use harness_core::plan::{Plan, PlanState};
use harness_core::protocol::Mode;
use serde_json::{Value, json};

use super::model::config_options;
use super::{Open, State};
use crate::Error;
use crate::commands::available_commands;
use crate::ext::lembas_error;
use crate::host::OpenRequest;
use crate::jobs::{JobTable, job_object};
use crate::map::{inside_roots, meta, mode_state, replay_updates};
use crate::pump::Pump;

pub(super) async fn new_session(
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

pub(super) async fn load_session(
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

/// What opening a session answers: its id, its mode, the `_meta` of the answer, and what
/// starting its MCP servers said.
type Opening = (String, Mode, Meta, Vec<String>);

/// Opens (or, with `resume`, loads) a session in `cwd` with what the client handed over in
/// `req_meta`, and starts pumping its events to the client.
async fn open_session(
    state: &Arc<State>,
    cwd: &Path,
    req_meta: Option<&Meta>,
    resume: Option<String>,
    mcp_servers: Vec<harness_mcp::ServerConfig>,
    cx: ConnectionTo<Client>,
) -> Result<Opening, agent_client_protocol::Error> {
    admit(state, cwd, resume.is_none())?;
    let handed = handed(state, req_meta)?;
    let opened = state
        .host
        .open(OpenRequest {
            cwd: cwd.to_path_buf(),
            resume,
            mode: handed.mode,
            personality: handed.personality,
            scope: handed.scope.clone(),
            memory_api: handed.memory_api,
            mcp_servers,
        })
        .await
        .map_err(|e| e.to_acp())?;
    let said = opened.mcp_notices.clone();
    let model = opened.session.shown_model();
    // Capability `plan_state`: the chat's plan, handed back whole (`spec/acp.md` §8).
    let client_plan = match handed.lembas.get("plan_state") {
        Some(p) if state.agreed("plan_state") => Some(
            serde_json::from_value::<Option<Plan>>(p.clone()).map_err(|e| {
                agent_client_protocol::Error::invalid_params()
                    .data(json!({"lembas": "invalid_plan_state", "message": e.to_string()}))
            })?,
        ),
        _ => None,
    };
    let plan: Arc<Mutex<PlanState>> = Arc::default();
    if let Some(w) = &handed.wanted
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
    let builder = opened
        .session
        .holds_display(state.agreed("show"))
        .plan(plan.clone());
    let mut builder = handed_over(state, &handed.lembas, builder)?;
    if let Some(entries) = opened.memory_entries {
        builder = builder.memory_entries(entries);
    }
    let spawned = builder.spawn().map_err(|e| Error::Agent(e).to_acp())?;
    // The client's plan over the one the transcript's plan calls left.
    if let Some(p) = client_plan
        && let Ok(mut held) = plan.lock()
    {
        held.plan = p;
    }
    let parts = Parts {
        cwd,
        model: model.clone(),
        models: opened.models,
        mode: opened.mode,
        commands: opened.commands,
        chat: handed
            .lembas
            .get("chat")
            .and_then(Value::as_str)
            .map(str::to_owned),
        scope: handed.scope,
    };
    let id = start(state, spawned, parts, saved, &plan, cx).await?;
    let spec = harness_spec::Spec::embedded().version().to_string();
    let m = meta(json!({
        "instance": {"id": state.info.instance, "session": id, "model": model, "spec": spec}
    }));
    Ok((id, opened.mode, m, said))
}

/// Refuses a session where it may not be: `cwd` not absolute; for a LLeMbas client, remote work
/// off, `cwd` outside the roots, or (a `new` session) the most sessions open already.
fn admit(state: &State, cwd: &Path, new: bool) -> Result<(), agent_client_protocol::Error> {
    if !cwd.is_absolute() {
        return Err(
            agent_client_protocol::Error::invalid_params().data(json!(format!(
                "cwd must be an absolute path: {}",
                cwd.display()
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
    if lembas_client && !inside_roots(cwd, &roots) {
        return Err(lembas_error(
            -32041,
            format!(
                "Outside the shared directories: {} is not under a root of this device.",
                cwd.display()
            ),
            "outside_roots",
        ));
    }
    if let Some(max) = state.host.max_sessions().filter(|_| lembas_client && new) {
        let open = state.sessions.lock().map(|s| s.len()).unwrap_or(0);
        if open >= max {
            return Err(lembas_error(
                -32043,
                format!("Too many sessions: this device holds {max} at once."),
                "too_many_sessions",
            ));
        }
    }
    Ok(())
}

/// What the client handed over in `_meta.lembas` that the host opens the session with.
struct Handed {
    /// `_meta.lembas` whole (`Null` when absent).
    lembas: Value,
    mode: Option<Mode>,
    personality: Option<String>,
    /// The model the client wants (`model.id`).
    wanted: Option<String>,
    scope: Option<Value>,
    /// Capability `memory`: the records are the client instance's, over its API.
    memory_api: Option<harness_agent::memory_api::Api>,
}

/// Reads what the client handed over; a mode or a scope it cannot be is refused (-32602).
fn handed(state: &State, req_meta: Option<&Meta>) -> Result<Handed, agent_client_protocol::Error> {
    let lembas = req_meta
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
    let memory_api = state
        .agreed("memory")
        .then(|| {
            lembas
                .get("api")
                .and_then(harness_agent::memory_api::Api::from_meta)
        })
        .flatten();
    Ok(Handed {
        lembas,
        mode,
        personality,
        wanted,
        scope,
        memory_api,
    })
}

/// The session `builder` with what the client handed over under the capabilities it agreed:
/// `context`, `library` (an instance older than 3.0.0), `prototypes`.
fn handed_over(
    state: &State,
    lembas: &Value,
    mut builder: SessionBuilder,
) -> Result<SessionBuilder, agent_client_protocol::Error> {
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
    Ok(builder)
}

/// What an open session is kept with, besides its handle.
struct Parts<'a> {
    cwd: &'a Path,
    model: String,
    models: Option<Arc<dyn crate::host::ModelChoice>>,
    mode: Mode,
    commands: harness_agent::custom::Commands,
    chat: Option<String>,
    scope: Option<Value>,
}

/// Keeps the spawned session as open, starts its pump, and tells the client first what a
/// reopened session held (`saved`: the transcript before resuming), its plan and its commands.
/// Answers its id.
async fn start(
    state: &Arc<State>,
    spawned: Spawned,
    parts: Parts<'_>,
    saved: Option<Vec<harness_loop::transcript::Entry>>,
    plan: &Arc<Mutex<PlanState>>,
    cx: ConnectionTo<Client>,
) -> Result<String, agent_client_protocol::Error> {
    let Spawned {
        session,
        events,
        run,
    } = spawned;
    let resumed = saved.is_some();
    // Replayed as resuming left it: a call cut off mid-run has its result.
    let replay = match saved {
        Some(saved) => replay_updates(
            &session.saved().unwrap_or(saved),
            parts.cwd,
            state.agreed("jobs"),
        ),
        None => Vec::new(),
    };
    let jobs = reopened_jobs(&session).await?;
    let id = session.id().to_owned();
    let advertised = available_commands(&parts.commands);
    let open = Open {
        ops: session.clone(),
        pending: Arc::new(Mutex::new(None)),
        cwd: parts.cwd.to_path_buf(),
        model: parts.model,
        models: parts.models,
        chat: parts.chat,
        mode: Arc::new(Mutex::new(parts.mode)),
        running: Arc::new(Mutex::new(false)),
        jobs,
        commands: parts.commands,
    };
    let pump = Pump {
        session: id.clone(),
        cx: cx.clone(),
        ops: session,
        pending: open.pending.clone(),
        mode: open.mode.clone(),
        running: open.running.clone(),
        plan_state: state.agreed("plan_state"),
        jobs_cap: state.agreed("jobs"),
        jobs: open.jobs.clone(),
        machine: Arc::new(Mutex::new(None)),
        scope: parts.scope,
        cwd: parts.cwd.to_path_buf(),
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
        let _ = cx.send_notification(SessionNotification::new(id.clone(), update));
    }
    // With `plan_state`, the plan follows a replay.
    if resumed && state.agreed("plan_state") {
        let held = plan.lock().ok().and_then(|p| p.plan.clone());
        let _ = cx.send_notification(crate::ext::PlanStateNotification {
            session_id: id.clone(),
            plan: serde_json::to_value(held).unwrap_or(Value::Null),
        });
    }
    let _ = cx.send_notification(SessionNotification::new(
        id.clone(),
        SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(advertised)),
    ));
    Ok(id)
}

/// A reopened session's jobs, as its transcript left them (lost ones ended).
async fn reopened_jobs(session: &Session) -> Result<JobTable, agent_client_protocol::Error> {
    let jobs: JobTable = Arc::default();
    let listed = session.jobs().await.map_err(|e| Error::Agent(e).to_acp())?;
    if let Ok(mut t) = jobs.lock() {
        for job in listed {
            let object = job_object(&Arc::default(), &job);
            t.insert(job.id, object);
        }
    }
    Ok(jobs)
}
