//! `_lembas/jobs` and `_lembas/job/…` (`spec/acp.md` §10): a session's background jobs as the
//! client sees them, and the person's own job requests.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{ContentChunk, SessionUpdate};
use harness_agent::Session;
use serde_json::{Value, json};

use crate::ext::{
    JobNotification, JobSendRequest, JobTranscriptRequest, unknown_job, unknown_session,
};
use crate::map::{replay_updates, text_block};

/// The job objects of a session, by job id.
pub(crate) type JobTable = Arc<Mutex<std::collections::BTreeMap<u32, Value>>>;

/// The job object of `spec/acp.md` §10 for `job`: the one the events built, or one made from
/// the loop's record (a job of a resumed session).
pub(crate) fn job_object(table: &JobTable, job: &harness_loop::jobs::Job) -> Value {
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

/// What the job requests need of the agent's state: what the client agreed, and an open
/// session's handle, job table and directory.
pub(crate) trait JobSessions {
    /// Whether the client agreed capability `cap`.
    fn agreed(&self, cap: &str) -> bool;
    /// The open session `session`'s handle, job table and directory.
    fn job_parts(&self, session: &str) -> Option<(Session, JobTable, PathBuf)>;
}

impl<T: JobSessions> JobSessions for Arc<T> {
    fn agreed(&self, cap: &str) -> bool {
        (**self).agreed(cap)
    }

    fn job_parts(&self, session: &str) -> Option<(Session, JobTable, PathBuf)> {
        (**self).job_parts(session)
    }
}

/// The session's handle and job table, for a `_lembas/job/…` call.
pub(crate) fn job_session(
    state: &impl JobSessions,
    session: &str,
) -> Result<(Session, JobTable), agent_client_protocol::Error> {
    if !state.agreed("jobs") {
        return Err(agent_client_protocol::Error::method_not_found());
    }
    state
        .job_parts(session)
        .map(|(ops, jobs, _)| (ops, jobs))
        .ok_or_else(|| unknown_session(session))
}

/// `_lembas/job/send`: the person's `job_send`.
pub(crate) async fn job_send(
    state: &impl JobSessions,
    req: JobSendRequest,
    cx: &ConnectionTo<Client>,
) -> Result<Value, agent_client_protocol::Error> {
    let (ops, table) = job_session(state, &req.session_id)?;
    let id = req
        .job_id
        .parse::<u32>()
        .map_err(|_| unknown_job(&req.job_id))?;
    let queued = match ops.send_job(id, req.text).await {
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
    // Its `job_note` (`sent`, `restarted`) comes from the session, as for the model's sends.
    let delivered = if queued { "queued" } else { "restarted" };
    Ok(json!({"job": job, "delivered": delivered}))
}

/// `_lembas/job/transcript`: a subagent's conversation as `session/update` objects; a
/// command's kept output as one `agent_message_chunk`.
pub(crate) async fn job_transcript(
    state: &impl JobSessions,
    req: JobTranscriptRequest,
) -> Result<Value, agent_client_protocol::Error> {
    let (ops, table) = job_session(state, &req.session_id)?;
    let id = req
        .job_id
        .parse::<u32>()
        .map_err(|_| unknown_job(&req.job_id))?;
    let Ok(Some((job, entries))) = ops.job_transcript(id).await else {
        return Err(unknown_job(&req.job_id));
    };
    let updates = match (job.kind, entries) {
        (harness_core::protocol::JobKind::Subagent, Some(entries)) => {
            let cwd = state
                .job_parts(&req.session_id)
                .map(|(_, _, cwd)| cwd)
                .unwrap_or_default();
            replay_updates(&entries, &cwd, true)
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
