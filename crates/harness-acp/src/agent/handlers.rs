//! The requests answered at once from the agent's state: `initialize`, cancel, the mode, the
//! session list, and the `_lembas` requests (status, limits, jobs, rewind, dir).

use std::path::Path;

use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, Implementation, InitializeRequest, InitializeResponse,
    ListSessionsRequest, ListSessionsResponse, PromptCapabilities, SessionCapabilities,
    SessionInfo, SessionListCapabilities, SetSessionModeRequest, SetSessionModeResponse,
};
use harness_agent::Op;
use harness_core::protocol::Mode;
use serde_json::{Value, json};

use super::{CAPABILITIES, LEMBAS_PROTOCOL, Responder, State};
use crate::ext::{
    JobOutputRequest, JobStopRequest, JobsRequest, LembasResult, RewindRequest, lembas_error,
    unknown_job, unknown_session,
};
use crate::jobs::job_session;
use crate::map::{inside_roots, meta};

/// What a handler answers: whether the answer was sent.
type Answered = Result<(), agent_client_protocol::Error>;

pub(super) fn initialize(state: &State, req: InitializeRequest) -> InitializeResponse {
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

/// `session/cancel`: the session's turn is cancelled.
pub(super) fn cancel(state: &State, n: &CancelNotification) -> Answered {
    if let Ok(sessions) = state.sessions.lock()
        && let Some(open) = sessions.get(&n.session_id.to_string())
    {
        open.ops.submit(Op::Cancel);
    }
    Ok(())
}

/// `session/set_mode`.
pub(super) fn set_mode(
    state: &State,
    req: SetSessionModeRequest,
    responder: Responder<SetSessionModeResponse>,
) -> Answered {
    let mode = match req.mode_id.to_string().parse::<Mode>() {
        Ok(m) => m,
        Err(_) => {
            return responder.respond_with_error(agent_client_protocol::Error::invalid_params());
        }
    };
    let sent = state.sessions.lock().ok().and_then(|s| {
        s.get(&req.session_id.to_string())
            .map(|o| o.ops.submit(Op::SetMode { mode }))
    });
    match sent {
        Some(true) => responder.respond(SetSessionModeResponse::new()),
        _ => responder.respond_with_error(unknown_session(&req.session_id.to_string())),
    }
}

/// `_lembas/jobs` (capability `jobs`): every job of the session.
pub(super) fn jobs(
    state: &State,
    req: &JobsRequest,
    responder: Responder<LembasResult>,
) -> Answered {
    if !state.agreed("jobs") {
        return responder.respond_with_error(agent_client_protocol::Error::method_not_found());
    }
    let jobs = state.sessions.lock().ok().and_then(|s| {
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
}

/// `_lembas/job/output`: a job's output from an offset.
pub(super) async fn job_output(
    state: &State,
    req: JobOutputRequest,
    responder: Responder<LembasResult>,
) -> Answered {
    let (ops, table) = match job_session(state, &req.session_id) {
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
}

/// `_lembas/job/stop`.
pub(super) async fn job_stop(
    state: &State,
    req: JobStopRequest,
    responder: Responder<LembasResult>,
) -> Answered {
    let (ops, table) = match job_session(state, &req.session_id) {
        Ok(found) => found,
        Err(e) => return responder.respond_with_error(e),
    };
    let Ok(id) = req.job_id.parse::<u32>() else {
        return responder.respond_with_error(unknown_job(&req.job_id));
    };
    match ops.stop_job(id).await {
        Ok(Ok(())) | Ok(Err(_)) if table.lock().map(|t| t.contains_key(&id)).unwrap_or(false) => {
            let job = table
                .lock()
                .ok()
                .and_then(|t| t.get(&id).cloned())
                .unwrap_or(Value::Null);
            responder.respond(LembasResult(json!({"job": job})))
        }
        _ => responder.respond_with_error(unknown_job(&req.job_id)),
    }
}

/// `_lembas/rewind` (capability `rewind`): keeps the session's first turns.
pub(super) async fn rewind(
    state: &State,
    req: RewindRequest,
    responder: Responder<LembasResult>,
) -> Answered {
    if !state.agreed("rewind") {
        return responder.respond_with_error(agent_client_protocol::Error::method_not_found());
    }
    let ops = state
        .sessions
        .lock()
        .ok()
        .and_then(|s| s.get(&req.session_id).map(|o| o.ops.clone()));
    let Some(ops) = ops else {
        return responder.respond_with_error(unknown_session(&req.session_id));
    };
    match ops.keep(req.turns).await {
        Ok(Ok(turns)) => responder.respond(LembasResult(json!({"turns": turns}))),
        Ok(Err(why)) => responder
            .respond_with_error(agent_client_protocol::Error::invalid_params().data(json!(why))),
        Err(_) => responder.respond_with_error(unknown_session(&req.session_id)),
    }
}

/// `session/list`: the saved sessions (of `cwd` when given), newest first, in one page; a
/// LLeMbas instance's only those inside the roots.
pub(super) fn list_sessions(
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
        .map_err(|e| agent_client_protocol::Error::internal_error().data(json!(e.to_string())))?;
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

pub(super) fn status(state: &State) -> Value {
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

pub(super) fn dir(state: &State, path: &Path) -> Result<Value, agent_client_protocol::Error> {
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
        .map_err(|e| agent_client_protocol::Error::invalid_params().data(json!(e.to_string())))?
        .into_iter()
        .map(|e| json!({"name": e.name, "git": e.git}))
        .collect();
    entries.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Ok(json!({"path": path, "entries": entries}))
}
