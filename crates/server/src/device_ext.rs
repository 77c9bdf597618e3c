//! What a device chat has beyond plain ACP: the `_lembas` capabilities this server agrees to
//! with a linked device (`spec/acp.md` §2, §8, §10, §11, §12), so a chat on a device shows what
//! a chat on the server shows.
//!
//! - `plan_state`: the plan arrives whole (`_lembas/plan_state`) and becomes the chat's plan
//!   card; a session reopened with `session/load` gets the chat's plan back.
//! - `jobs`: `_lembas/job` and `_lembas/job_note` become the jobs panel's events; a machine
//!   turn the device begins when a job ends (`_lembas/prompt` … `_lembas/prompt_end`) is a run of
//!   the chat whose input is the job's, not the person's; the person's job verbs
//!   (`GET /api/chats/{id}/jobs`, `…/jobs/{job}/output`, `POST …/jobs/{job}/stop`,
//!   `…/jobs/{job}/send`) go to the device.
//! - `show`: the device sends a file's content (`_lembas/show`): the page's viewer shows it and
//!   answers whether it opened; with no page open the answer is `{"shown": false}` at once.
//! - `memory`: a session gets the memory API's URL and a bearer token scoped to its chat
//!   (`api` in `session/new` / `session/load`), ended when the link goes down.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use harness_acp::ext::{
    JobNoteNotification, JobNotification, JobOutputRequest, JobSendRequest, JobStopRequest,
    JobTranscriptRequest, JobsRequest, LembasResult, MachinePrompt, MachinePromptEnd,
    PlanStateNotification, ShowRequest,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::App;
use crate::auth::{Authed, Raw};
use crate::error::{Error, Result};
use crate::page::{Answerer, AskKind};

/// The `_lembas` capabilities this server speaks with a device (`initialize`).
pub const CAPABILITIES: &[&str] = &["plan_state", "jobs", "show", "memory"];

/// The routes of this module.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/chats/{id}/jobs", get(jobs))
        .route("/api/chats/{id}/jobs/{job}/output", get(job_output))
        .route("/api/chats/{id}/jobs/{job}/transcript", get(job_transcript))
        .route("/api/chats/{id}/jobs/{job}/stop", post(job_stop))
        .route("/api/chats/{id}/jobs/{job}/send", post(job_send))
}

/// The chat a device's session belongs to, and the chat's owner.
async fn chat_of(app: &App, device: &str, session: &str) -> Option<(String, i64)> {
    let chat = app.device_chats.chat_in(device, session)?;
    let owner: Option<i64> = sqlx::query_scalar("SELECT user_id FROM chats WHERE id = $1")
        .bind(&chat)
        .fetch_optional(&app.pool)
        .await
        .ok()
        .flatten();
    owner.map(|o| (chat, o))
}

async fn append(app: &App, user_id: i64, chat: &str, event: Value) {
    let run = app.device_chats.run_of(chat);
    if let Err(e) = app.hub.append(user_id, chat, run.as_deref(), event).await {
        log(chat, &e);
    }
}

fn log(chat: &str, e: &Error) {
    tracing::error!("chat {chat}: {e}");
}

/// `_lembas/plan_state`: the chat's plan card, when the plan changed (a `session/load` sends
/// back the plan the chat already shows).
pub async fn plan_state(app: &App, device: &str, n: PlanStateNotification) {
    let Some((chat, user_id)) = chat_of(app, device, &n.session_id).await else {
        return;
    };
    let now = crate::history::latest_plan(&app.pool, user_id, &chat)
        .await
        .ok()
        .flatten()
        .unwrap_or(Value::Null);
    if now == n.plan {
        return;
    }
    append(
        app,
        user_id,
        &chat,
        json!({"type": "plan_changed", "plan": n.plan}),
    )
    .await;
}

/// `_lembas/job`: a job started or changed state, as the jobs panel's `job_started` and
/// `job_ended` (a job first heard of when it has ended gets both).
pub async fn job(app: &App, device: &str, n: JobNotification) {
    let v = n.0;
    let Some(session) = v["sessionId"].as_str() else {
        return;
    };
    let Some((chat, user_id)) = chat_of(app, device, session).await else {
        return;
    };
    let job = &v["job"];
    let Some(id) = job["id"].as_str() else {
        return;
    };
    if app.device_chats.job_seen(&chat, id) {
        append(
            app,
            user_id,
            &chat,
            json!({"type": "job_started", "job_id": id, "kind": job["kind"], "title": job["title"]}),
        )
        .await;
    }
    let end = match job["state"].as_str() {
        Some("done") => match job.get("exit_code").and_then(Value::as_i64) {
            Some(code) => json!({"status": "done", "exit_code": code}),
            None => json!({"status": "done"}),
        },
        Some("failed") => {
            let message = match job.get("exit_code").and_then(Value::as_i64) {
                Some(code) => format!("exit code {code}"),
                None => "the job failed".into(),
            };
            json!({"status": "failed", "message": message})
        }
        Some("stopped") => json!({"status": "stopped"}),
        _ => return,
    };
    append(
        app,
        user_id,
        &chat,
        json!({"type": "job_ended", "job_id": id, "end": end}),
    )
    .await;
}

/// `_lembas/job_note`: news of a job shown in its card (a report as said, the others named).
pub async fn job_note(app: &App, device: &str, n: JobNoteNotification) {
    let v = n.0;
    let (Some(session), Some(id)) = (v["sessionId"].as_str(), v["jobId"].as_str()) else {
        return;
    };
    let Some((chat, user_id)) = chat_of(app, device, session).await else {
        return;
    };
    let said = v["text"].as_str().unwrap_or_default();
    let text = match v["note"].as_str() {
        Some("report") => said.to_owned(),
        Some("sent") => format!("Message delivered: {said}"),
        Some("restarted") => format!("Restarted by a message: {said}"),
        Some("dropped") => format!("Older output dropped. {said}"),
        _ => return,
    };
    append(
        app,
        user_id,
        &chat,
        json!({"type": "job_note", "job_id": id, "text": text.trim_end()}),
    )
    .await;
}

/// `_lembas/prompt`: a machine turn the device began (a job's end woke the session): a run of
/// the chat whose input is the job's.
pub async fn machine_prompt(app: &App, device: &str, n: MachinePrompt) {
    let v = n.0;
    let (Some(session), Some(prompt)) = (v["sessionId"].as_str(), v["prompt"].as_str()) else {
        return;
    };
    let Some((chat, user_id)) = chat_of(app, device, session).await else {
        return;
    };
    let text = crate::device_chats::text_of(&v["content"]);
    let input = json!({"type": "user_input", "text": text, "origin": "machine"});
    if let Err(e) =
        crate::device_chats::begin_machine(app, user_id, &chat, device, session, prompt, input)
            .await
    {
        log(&chat, &e);
    }
}

/// `_lembas/prompt_end`: the machine turn ended, as a person's prompt does.
pub async fn machine_prompt_end(app: &App, device: &str, n: MachinePromptEnd) {
    let v = n.0;
    let (Some(session), Some(prompt)) = (v["sessionId"].as_str(), v["prompt"].as_str()) else {
        return;
    };
    let Some((chat, user_id)) = chat_of(app, device, session).await else {
        return;
    };
    let Some(run) = app.device_chats.machine_run(&chat, prompt) else {
        return;
    };
    let stop = v["stopReason"].as_str().unwrap_or("end_turn");
    crate::device_chats::turn_ended(app, user_id, &chat, &run, stop).await;
}

/// `_lembas/show`: the file for the person's viewer, shown by an open page of the chat; the
/// device hears whether it opened (`{"shown": false}` at once with no page open).
pub async fn show(app: Arc<App>, device: String, r: ShowRequest) -> LembasResult {
    let v = r.0;
    let not_shown = LembasResult(json!({"shown": false}));
    let Some(session) = v["sessionId"].as_str() else {
        return not_shown;
    };
    let Some((chat, user_id)) = chat_of(&app, &device, session).await else {
        return not_shown;
    };
    if !app.pages.attached(&chat) {
        return not_shown;
    }
    let Ok(call) = crate::db::random_id() else {
        return not_shown;
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let Ok(ask) = app
        .pages
        .ask(user_id, &chat, &call, AskKind::Show, Answerer::Tool(tx))
    else {
        return not_shown;
    };
    let run = app.device_chats.run_of(&chat);
    if let Err(e) =
        crate::page::record_ask(&app, &ask, user_id, &chat, run.as_deref(), AskKind::Show).await
    {
        log(&chat, &e);
        return not_shown;
    }
    let path = v["path"].as_str().unwrap_or_default();
    let title = v["title"]
        .as_str()
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| path.rsplit('/').next().unwrap_or(path));
    let event = json!({"type": "show", "call_id": call, "ask": ask, "path": path,
        "title": title, "kind": v["kind"], "language": v.get("language"),
        "content": v["content"].as_str().unwrap_or_default(), "device": device});
    append(&app, user_id, &chat, event).await;
    let opened = matches!(rx.await, Ok(Some(_)));
    LembasResult(json!({"shown": opened}))
}

/// The device session of the user's device chat `id`, on its live link.
async fn session_of(
    app: &App,
    user: &crate::auth::User,
    id: &str,
) -> Result<(String, crate::device_links::Live)> {
    crate::chats::chat_row(&app.pool, user, id).await?;
    let Some(row) = crate::device_chats::of(app, id).await? else {
        return Err(Error::NotFound(format!(
            "the chat {id} runs on this server: its jobs are in its events"
        )));
    };
    let opened = app.device_chats.opened(id);
    let live = app
        .device_links
        .live(&row.device)
        .filter(|l| opened.as_ref().is_some_and(|o| o.1 == l.generation))
        .ok_or_else(|| {
            Error::Conflict(format!(
                "the device of chat {id} is offline, or the chat's session is not open on it: send a message once it is linked"
            ))
        })?;
    let session = opened.map(|o| o.0).unwrap_or_default();
    Ok((session, live))
}

/// Asks the device a job verb of the user's device chat `id`: the request `make` builds for the
/// chat's session; its answer, or its error as the API says it.
async fn ask<R>(
    app: &App,
    user: &crate::auth::User,
    id: &str,
    make: impl FnOnce(String) -> R,
) -> Result<Response>
where
    R: agent_client_protocol::JsonRpcRequest<Response = LembasResult>,
{
    let (session_id, live) = session_of(app, user, id).await?;
    match live.agent.send_request(make(session_id)).block_task().await {
        Ok(v) => Ok(Json(v.0).into_response()),
        Err(e) => {
            let text = e.message.clone();
            match i32::from(e.code) {
                -32045 => Err(Error::NotFound(text)),
                -32602 => Err(Error::BadRequest(text)),
                _ => Err(Error::Conflict(format!("the device refused: {text}"))),
            }
        }
    }
}

async fn jobs(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<String>,
) -> Result<Response> {
    ask(&app, &user, &id, |session_id| JobsRequest { session_id }).await
}

#[derive(Deserialize)]
struct Offset {
    #[serde(default)]
    offset: usize,
}

async fn job_output(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path((id, job_id)): Path<(String, String)>,
    Query(q): Query<Offset>,
) -> Result<Response> {
    ask(&app, &user, &id, |session_id| JobOutputRequest {
        session_id,
        job_id,
        offset: q.offset,
    })
    .await
}

async fn job_transcript(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path((id, job_id)): Path<(String, String)>,
) -> Result<Response> {
    ask(&app, &user, &id, |session_id| JobTranscriptRequest {
        session_id,
        job_id,
    })
    .await
}

async fn job_stop(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path((id, job_id)): Path<(String, String)>,
) -> Result<Response> {
    ask(&app, &user, &id, |session_id| JobStopRequest {
        session_id,
        job_id,
    })
    .await
}

#[derive(Deserialize, Default)]
struct Send {
    #[serde(default)]
    text: String,
}

async fn job_send(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path((id, job_id)): Path<(String, String)>,
    body: Raw,
) -> Result<Response> {
    let body = body.json_or_default::<Send>()?;
    if body.text.trim().is_empty() {
        return Err(Error::BadRequest("the message is empty".into()));
    }
    ask(&app, &user, &id, |session_id| JobSendRequest {
        session_id,
        job_id,
        text: body.text,
    })
    .await
}
