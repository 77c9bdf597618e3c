//! Agent chats on a linked device (`spec/acp.md` §5): the chat runs on the device's disk, in a
//! directory it shares, driven over its link with ACP; the page sees it as any chat.
//!
//! - `POST /api/chats` with `{"device", "dir"}` opens one: `dir` must lie within the roots the
//!   device announced (`[]`: remote work is off, refused with that said), the device must be
//!   online, and its `session/new` (the chat's model and mode in `_meta.lembas`) must succeed.
//!   The chat's rows are a chat's like any other (`chats`, `agent_sessions` for the title,
//!   `runs`, `events`, `approvals`); `device_chats` says where it runs.
//! - A message is `session/prompt` on the device's session (reopened with `session/load` on a
//!   newer link); the device's `session/update`s become the events a local run stores and
//!   streams ([`crate::chats::Hub::append`]), its `session/request_permission` an approval the
//!   page answers (`POST /api/approvals/{id}`), answered back as the ACP outcome. Stop is
//!   `session/cancel`.
//! - The device offline: a message is refused (409, said plainly; nothing is queued). A link
//!   that drops while a prompt runs ends the run `interrupted`, and the chat says the device
//!   went offline.
//! - Only the device's owner sees or drives its chats: another user's chat, run, approval or
//!   device is "not found" (404).

use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, ImageContent, LoadSessionRequest, Meta, NewSessionRequest,
    PromptRequest, RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionNotification, SetSessionModeRequest, TextContent,
};
use harness_core::protocol::Mode;
use serde_json::{Value, json};

use crate::App;
use crate::auth::User;
use crate::db::{Stmt, now, random_id};
use crate::device_links::Live;
use crate::error::{Error, Result};

mod asks;
mod updates;

pub use asks::{approve, permission};
pub use updates::{text_of, update};

type Responder = agent_client_protocol::v1::Responder<RequestPermissionResponse>;

/// How long a prompt whose link failed waits for the link to be seen down before it ends as
/// failed (a link that is still up answered with an error of its own).
const LINK_DOWN_WAIT: Duration = Duration::from_secs(10);

/// The device chats' state in this process: sessions open on links, runs going on, approvals
/// the devices wait for.
#[derive(Default)]
pub struct DeviceChats {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The device session of each chat, on the link it was opened on.
    sessions: HashMap<String, Opened>,
    /// The runs going on, by chat.
    runs: HashMap<String, Running>,
    /// What the devices wait for the person's answer to, by approval id.
    asks: HashMap<String, Asked>,
    /// The jobs whose start the chats were told of, as (chat, job id).
    jobs: HashSet<(String, String)>,
}

#[derive(Clone)]
struct Opened {
    device: String,
    generation: u64,
    session: String,
    /// The memory API's token handed to the session, ended with the link.
    token: Option<String>,
}

struct Running {
    run: String,
    user_id: i64,
    at: Opened,
    /// The device's id of the machine turn this run is (`_lembas/prompt`); `None` for the
    /// person's.
    machine: Option<String>,
}

struct Asked {
    chat: String,
    run: String,
    call_id: String,
    always: bool,
    responder: Responder,
}

impl DeviceChats {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The chat whose run goes on in the device's session, and that run.
    fn running_in(&self, device: &str, session: &str) -> Option<(String, String, i64)> {
        self.lock()
            .runs
            .iter()
            .find(|(_, r)| r.at.device == device && r.at.session == session)
            .map(|(c, r)| (c.clone(), r.run.clone(), r.user_id))
    }

    /// Takes the chat's run `run` out (its end is said once, by whoever takes it).
    fn take(&self, chat: &str, run: &str) -> Option<Running> {
        let mut inner = self.lock();
        if inner.runs.get(chat).is_some_and(|r| r.run == run) {
            let taken = inner.runs.remove(chat);
            // The device's pending questions of the run go with it (a dropped responder is a
            // refusal to a device still listening).
            inner.asks.retain(|_, a| a.run != run);
            return taken;
        }
        None
    }

    /// The run going on in the chat, if any.
    pub fn run_of(&self, chat: &str) -> Option<String> {
        self.lock().runs.get(chat).map(|r| r.run.clone())
    }

    /// Whether a device chat's run goes on in this process.
    pub fn any_running(&self) -> bool {
        !self.lock().runs.is_empty()
    }

    /// The chat whose session `session` is open on the device's link.
    pub fn chat_in(&self, device: &str, session: &str) -> Option<String> {
        self.lock()
            .sessions
            .iter()
            .find(|(_, o)| o.device == device && o.session == session)
            .map(|(c, _)| c.clone())
    }

    /// The chat's open device session and the link generation it is open on.
    pub fn opened(&self, chat: &str) -> Option<(String, u64)> {
        self.lock()
            .sessions
            .get(chat)
            .map(|o| (o.session.clone(), o.generation))
    }

    /// Whether the chat hears of its job `id` for the first time (then it is told it started).
    pub fn job_seen(&self, chat: &str, id: &str) -> bool {
        self.lock().jobs.insert((chat.to_owned(), id.to_owned()))
    }

    /// The chat's run that is the device's machine turn `prompt`.
    pub fn machine_run(&self, chat: &str, prompt: &str) -> Option<String> {
        self.lock()
            .runs
            .get(chat)
            .filter(|r| r.machine.as_deref() == Some(prompt))
            .map(|r| r.run.clone())
    }
}

/// Where a device chat runs.
#[derive(Debug, Clone)]
pub struct Row {
    /// The device.
    pub device: String,
    /// The directory on the device's disk.
    pub cwd: String,
    /// The device's session id, once one was opened.
    pub session: Option<String>,
}

/// Where the chat runs, when it is a device chat.
pub async fn of(app: &App, chat: &str) -> Result<Option<Row>> {
    let row: Option<(String, String, Option<String>)> =
        sqlx::query_as("SELECT device_id, cwd, session FROM device_chats WHERE chat_id = $1")
            .bind(chat)
            .fetch_optional(&app.pool)
            .await?;
    Ok(row.map(|(device, cwd, session)| Row {
        device,
        cwd,
        session,
    }))
}

/// The user's device `id`: its name (another user's is "not found").
async fn device_name(app: &App, user: &User, id: &str) -> Result<String> {
    let name: Option<String> =
        sqlx::query_scalar("SELECT name FROM devices WHERE id = $1 AND user_id = $2")
            .bind(id)
            .bind(user.id)
            .fetch_optional(&app.pool)
            .await?;
    name.ok_or_else(|| Error::NotFound(format!("no device {id}")))
}

/// The device's live link, or the refusal that says it is offline.
fn online(app: &App, id: &str, name: &str) -> Result<Live> {
    app.device_links.live(id).ok_or_else(|| {
        Error::Conflict(format!(
            "the device {name:?} is offline: start `llembas link` on it, then send again (nothing was queued)"
        ))
    })
}

/// A path with `.` and `..` applied, lexically; `None` when it is not absolute.
fn lexical(path: &str) -> Option<PathBuf> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return None;
    }
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Some(out)
}

/// `dir` checked against the roots the device announced: the directory to open, lexical.
fn within_roots(name: &str, limits: &Value, dir: &str) -> Result<String> {
    let roots: Vec<&str> = limits
        .get("roots")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if roots.is_empty() {
        return Err(Error::Conflict(format!(
            "remote work is off on the device {name:?}: it shares no directory, so no chat can run on it (run `llembas link` there with --root DIR)"
        )));
    }
    let wanted = lexical(dir).ok_or_else(|| {
        Error::BadRequest(format!("{dir:?} is not an absolute path on the device"))
    })?;
    let inside = roots
        .iter()
        .filter_map(|r| lexical(r))
        .any(|r| wanted.starts_with(&r));
    if !inside {
        return Err(Error::BadRequest(format!(
            "{} is not under a directory the device {name:?} shares: {}",
            wanted.display(),
            roots.join(", ")
        )));
    }
    Ok(wanted.display().to_string())
}

/// What `session/new` and `session/load` carry: the chat, its model and its mode; its plan
/// (`plan_state`) and the memory API with a token for the chat (`memory`).
fn lembas_meta(
    chat: &str,
    model: &str,
    mode: &str,
    plan: Option<Value>,
    api: Option<Value>,
) -> Meta {
    let mut v = json!({"chat": chat, "model": {"id": model, "effort": null}, "mode": mode});
    if let Some(p) = plan {
        v["plan_state"] = p;
    }
    if let Some(a) = api {
        v["api"] = a;
    }
    let mut m = Meta::new();
    m.insert("lembas".into(), v);
    m
}

/// What `api` (capability `memory`) says to a session on the link `live` with `token`.
fn api_of(live: &Live, token: &str) -> Value {
    json!({"url": live.api_url, "token": token})
}

/// A device's ACP error as the API says it: its own text, refused.
fn refused(e: &agent_client_protocol::Error) -> Error {
    let mut text = e.message.clone();
    if let Some(d) = e.data.as_ref().and_then(Value::as_str) {
        text = format!("{text}: {d}");
    }
    match i32::from(e.code) {
        -32041 => Error::BadRequest(text),
        _ => Error::Conflict(format!("the device refused: {text}")),
    }
}

/// Opens a chat of `user` on their device `device`, in `dir` on its disk; answers its id.
pub async fn create(
    app: &Arc<App>,
    user: &User,
    device: &str,
    dir: &str,
    mode: Mode,
    model: Option<String>,
) -> Result<String> {
    app.refuse_when_stopping()?;
    let name = device_name(app, user, device).await?;
    let live = online(app, device, &name)?;
    let cwd = within_roots(&name, &live.limits, dir)?;
    let models: Vec<String> = live
        .limits
        .get("models")
        .and_then(Value::as_array)
        .map(|m| {
            m.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    // The chat's model: the one asked for (the device refuses one it cannot run), else the
    // device's first.
    let model = model
        .or_else(|| models.first().cloned())
        .ok_or_else(|| Error::Conflict(format!("the device {name:?} announces no model")))?;
    let id = random_id()?;
    // The memory API's token, valid once the chat is stored.
    let token = crate::memory::new_chat_token()?;
    let api = api_of(&live, &token);
    let opened = live
        .agent
        .send_request(
            NewSessionRequest::new(PathBuf::from(&cwd)).meta(lembas_meta(
                &id,
                &model,
                mode.as_str(),
                None,
                Some(api),
            )),
        )
        .block_task()
        .await;
    let opened = opened.map_err(|e| refused(&e))?;
    let session = opened.session_id.to_string();
    let t = now();
    sqlx::query(
        "INSERT INTO agent_sessions (id, user_id, cwd, created, updated, title, model) VALUES ($1, $2, $3, $4, $4, '', $5)",
    )
    .bind(&id)
    .bind(user.id)
    .bind(&cwd)
    .bind(t)
    .bind(&model)
    .execute(&app.pool)
    .await?;
    sqlx::query(
        "INSERT INTO chats (id, user_id, mode, model, created) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&id)
    .bind(user.id)
    .bind(mode.as_str())
    .bind(&model)
    .bind(t)
    .execute(&app.pool)
    .await?;
    sqlx::query(
        "INSERT INTO device_chats (chat_id, device_id, cwd, session) VALUES ($1, $2, $3, $4)",
    )
    .bind(&id)
    .bind(device)
    .bind(&cwd)
    .bind(&session)
    .execute(&app.pool)
    .await?;
    crate::memory::keep_token(app, &token, &id, user.id, Some(device)).await?;
    app.hub.new_chat(&id);
    app.device_chats.lock().sessions.insert(
        id.clone(),
        Opened {
            device: device.to_owned(),
            generation: live.generation,
            session,
            token: Some(token),
        },
    );
    Ok(id)
}

/// What the page shows of a device chat: the device, whether it is online, the directory.
pub async fn describe(app: &App, user: &User, chat: &str) -> Result<Option<Value>> {
    let Some(row) = of(app, chat).await? else {
        return Ok(None);
    };
    let name = device_name(app, user, &row.device)
        .await
        .unwrap_or_else(|_| "a removed device".into());
    Ok(Some(json!({
        "id": row.device,
        "name": name,
        "online": app.device_links.live(&row.device).is_some(),
        "cwd": row.cwd,
    })))
}

/// The chat's session on the device's live link: the one opened on it, else the stored one
/// reopened (`session/load`), else a new one.
async fn session_on(
    app: &App,
    chat: &str,
    row: &Row,
    live: &Live,
    model: &str,
    mode: &str,
) -> Result<Opened> {
    let known = app.device_chats.lock().sessions.get(chat).cloned();
    if let Some(o) = known
        && o.generation == live.generation
        && o.device == row.device
    {
        return Ok(o);
    }
    let user_id = live.user_id;
    let plan = crate::history::latest_plan(&app.pool, user_id, chat).await?;
    let token = crate::memory::chat_token(app, chat, user_id, Some(&row.device)).await?;
    let api = api_of(live, &token);
    let meta = lembas_meta(chat, model, mode, plan, Some(api));
    let opened = open_or_load(app, chat, row, live, meta).await;
    let session = match opened {
        Ok(s) => s,
        Err(e) => {
            crate::memory::revoke_token(app, &token).await?;
            return Err(e);
        }
    };
    let o = Opened {
        device: row.device.clone(),
        generation: live.generation,
        session,
        token: Some(token),
    };
    app.device_chats
        .lock()
        .sessions
        .insert(chat.to_owned(), o.clone());
    Ok(o)
}

/// The chat's stored session reopened on the link (`session/load`), else a new one: its id.
async fn open_or_load(app: &App, chat: &str, row: &Row, live: &Live, meta: Meta) -> Result<String> {
    let mut session = None;
    if let Some(s) = &row.session {
        let loaded = live
            .agent
            .send_request(
                LoadSessionRequest::new(s.clone(), PathBuf::from(&row.cwd)).meta(meta.clone()),
            )
            .block_task()
            .await;
        match loaded {
            Ok(_) => session = Some(s.clone()),
            Err(e) if matches!(i32::from(e.code), -32042..=-32040) => return Err(refused(&e)),
            // The device no longer holds it: a new one (the chat's events stay in the page).
            Err(_) => {}
        }
    }
    let session = match session {
        Some(s) => s,
        None => {
            let opened = live
                .agent
                .send_request(NewSessionRequest::new(PathBuf::from(&row.cwd)).meta(meta))
                .block_task()
                .await
                .map_err(|e| refused(&e))?;
            let s = opened.session_id.to_string();
            sqlx::query("UPDATE device_chats SET session = $1 WHERE chat_id = $2")
                .bind(&s)
                .bind(chat)
                .execute(&app.pool)
                .await?;
            s
        }
    };
    Ok(session)
}

/// Sends a message to the user's device chat: a new run on the device, answered by its id.
pub async fn send(
    app: &Arc<App>,
    user: &User,
    chat: &str,
    row: &Row,
    text: &str,
    images: &[String],
) -> Result<String> {
    if text.trim().is_empty() {
        return Err(Error::BadRequest("the message is empty".into()));
    }
    app.refuse_when_stopping()?;
    let c = crate::chats::chat_row(&app.pool, user, chat).await?;
    // The device's agent sends them only to a model that reads images, as a local session does.
    let images = crate::images::read(app, user, images).await?;
    if let Some(r) = app.device_chats.run_of(chat) {
        return Err(Error::Conflict(format!(
            "the chat {chat} is busy with run {r}: stop it or wait for its end"
        )));
    }
    let name = device_name(app, user, &row.device).await?;
    let live = online(app, &row.device, &name)?;
    let at = session_on(app, chat, row, &live, &c.model, &c.mode).await?;
    let input = json!({"type": "user_input", "text": text, "origin": "person"});
    let run = begin(app, user.id, chat, &at, (None, &images), input).await?;
    // The title as a local chat's: the first line with words, at most 80 characters.
    let title: String = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .chars()
        .take(80)
        .collect();
    // The run has begun: a title not stored is said, not a send refused with a run left busy.
    if let Err(e) = sqlx::query(
        "UPDATE agent_sessions SET updated = $1, title = CASE WHEN title = '' THEN $2 ELSE title END WHERE id = $3",
    )
    .bind(now())
    .bind(&title)
    .bind(chat)
    .execute(&app.pool)
    .await
    {
        tracing::error!("chat {chat}: storing its title: {e}");
    }
    let mut blocks = vec![ContentBlock::Text(TextContent::new(text))];
    blocks.extend(
        images
            .iter()
            .map(|i| ContentBlock::Image(ImageContent::new(i.base64(), i.mime))),
    );
    let prompt = PromptRequest::new(at.session.clone(), blocks);
    let (app2, chat2, run2, agent) = (app.clone(), chat.to_owned(), run.clone(), live.agent);
    let user_id = user.id;
    tokio::spawn(async move {
        let answer = agent.send_request(prompt).block_task().await;
        prompted(&app2, user_id, &chat2, &run2, &at, answer).await;
    });
    Ok(run)
}

/// Starts a run of the chat in its device session `at` (refused while one goes on): its row,
/// `run_started`, then `input`, the prompt as the chat shows it. Answers the run's id.
async fn begin(
    app: &App,
    user_id: i64,
    chat: &str,
    at: &Opened,
    (machine, images): (Option<String>, &[crate::images::Image]),
    input: Value,
) -> Result<String> {
    let run = random_id()?;
    {
        let mut inner = app.device_chats.lock();
        if let Some(r) = inner.runs.get(chat) {
            return Err(Error::Conflict(format!(
                "the chat {chat} is busy with run {}: stop it or wait for its end",
                r.run
            )));
        }
        inner.runs.insert(
            chat.to_owned(),
            Running {
                run: run.clone(),
                user_id,
                at: at.clone(),
                machine,
            },
        );
    }
    let row = crate::chats::write(
        app,
        Stmt::new(
            "INSERT INTO runs (id, chat_id, user_id, status, created, owner, lease_until) VALUES ($1, $2, $3, 'running', $4, $5, $6)",
        )
        .text(Some(&run))
        .text(Some(chat))
        .int(user_id)
        .int(now())
        .text(Some(&app.instance))
        .int(crate::chats::lease_end(app)),
    )
    .await;
    if let Err(e) = row {
        app.device_chats.take(chat, &run);
        return Err(e);
    }
    let said = async {
        app.hub
            .append(
                user_id,
                chat,
                Some(&run),
                crate::chats::run_started(&run, images),
            )
            .await?;
        app.hub.append(user_id, chat, Some(&run), input).await
    };
    if let Err(e) = said.await {
        end(app, user_id, chat, &run, "failed", None).await;
        return Err(e);
    }
    Ok(run)
}

/// A machine turn the device began in its session (`_lembas/prompt`): a run of the chat.
pub async fn begin_machine(
    app: &App,
    user_id: i64,
    chat: &str,
    device: &str,
    session: &str,
    prompt: &str,
    input: Value,
) -> Result<()> {
    let at = app
        .device_chats
        .lock()
        .sessions
        .get(chat)
        .filter(|o| o.device == device && o.session == session)
        .cloned();
    let Some(at) = at else {
        return Ok(());
    };
    begin(
        app,
        user_id,
        chat,
        &at,
        (Some(prompt.to_owned()), &[]),
        input,
    )
    .await?;
    Ok(())
}

/// The turn of the run ended with the device's stop reason (`end_turn`, `cancelled`, …).
pub async fn turn_ended(app: &App, user_id: i64, chat: &str, run: &str, stop: &str) {
    let (reason, status) = match stop {
        "end_turn" => (json!({"kind": "finished"}), "finished"),
        "cancelled" => (json!({"kind": "cancelled"}), "stopped"),
        other => (
            json!({"kind": "error", "message": format!("The device ended the turn: {other}")}),
            "ended",
        ),
    };
    if app.device_chats.run_of(chat).as_deref() == Some(run) {
        let said = app
            .hub
            .append(
                user_id,
                chat,
                Some(run),
                json!({"type": "turn_ended", "reason": reason}),
            )
            .await;
        if let Err(e) = said {
            tracing::error!("chat {chat}: {e}");
        }
    }
    end(app, user_id, chat, run, status, None).await;
}

/// A prompt's answer: the run ends by its stop reason, or failed with the device's error; a
/// link that went down leaves the end to [`link_down`].
async fn prompted(
    app: &Arc<App>,
    user_id: i64,
    chat: &str,
    run: &str,
    at: &Opened,
    answer: std::result::Result<
        agent_client_protocol::v1::schema::PromptResponse,
        agent_client_protocol::Error,
    >,
) {
    match answer {
        Ok(r) => {
            let stop = serde_json::to_value(r.stop_reason).unwrap_or(Value::Null);
            turn_ended(app, user_id, chat, run, stop.as_str().unwrap_or("?")).await;
        }
        Err(e) => {
            // The link's end comes with the error of every request it left unanswered: wait to
            // see it down, and let [`link_down`] say so.
            let mut watch = app.device_links.watch();
            let down = |app: &App| {
                app.device_links
                    .live(&at.device)
                    .is_none_or(|l| l.generation != at.generation)
            };
            let waited = tokio::time::timeout(LINK_DOWN_WAIT, async {
                while !down(app) {
                    if watch.changed().await.is_err() {
                        break;
                    }
                }
            })
            .await;
            if waited.is_ok() && down(app) {
                link_down(app, &at.device, at.generation).await;
                return;
            }
            let mut message = e.message.clone();
            if let Some(d) = e.data.as_ref().and_then(Value::as_str) {
                message = format!("{message}: {d}");
            }
            let text = format!("The device answered with an error: {message}");
            if app.device_chats.take(chat, run).is_some() {
                cancel_on_device(app, at);
                finish(
                    app,
                    user_id,
                    chat,
                    run,
                    "failed",
                    Some(json!({"type": "error", "message": text})),
                )
                .await;
            }
        }
    }
}

/// Ends the chat's run `run` once (whoever takes it says it): `before`, then `run_ended`.
async fn end(app: &App, user_id: i64, chat: &str, run: &str, status: &str, before: Option<Value>) {
    if app.device_chats.take(chat, run).is_none() {
        return;
    }
    finish(app, user_id, chat, run, status, before).await;
}

/// Says the end of a run taken out of the runs going on: `before`, then `run_ended`.
async fn finish(
    app: &App,
    user_id: i64,
    chat: &str,
    run: &str,
    status: &str,
    before: Option<Value>,
) {
    if let Some(e) = before
        && let Err(e) = app.hub.append(user_id, chat, Some(run), e).await
    {
        tracing::error!("chat {chat}: {e}");
    }
    if let Err(e) = crate::chats::end_run(app, user_id, chat, run, status).await {
        tracing::error!("chat {chat}: {e}");
    }
}

/// Cancels the device's turn in the session `at` (`session/cancel`) when its link is still the
/// one it was opened on: the run it belonged to has ended here, and no turn of the device's
/// goes on with no run on the server.
fn cancel_on_device(app: &App, at: &Opened) {
    let live = app
        .device_links
        .live(&at.device)
        .filter(|l| l.generation == at.generation);
    if let Some(live) = live
        && let Err(e) = live
            .agent
            .send_notification(CancelNotification::new(at.session.clone()))
    {
        tracing::warn!("device {}: cancelling its turn: {e}", at.device);
    }
}

/// The renewal of the leases found runs of this process taken over by another (`held`: the
/// runs it still holds): the device chats' among them are dropped here, unsaid (the process
/// that took them over said their end), and their turns cancelled on the devices.
pub async fn lease_lost(app: &App, held: &HashSet<String>) -> Result<()> {
    let runs: Vec<(String, String)> = app
        .device_chats
        .lock()
        .runs
        .iter()
        .filter(|(_, r)| !held.contains(&r.run))
        .map(|(c, r)| (c.clone(), r.run.clone()))
        .collect();
    for (chat, run) in runs {
        let row: Option<(Option<String>, String)> =
            sqlx::query_as("SELECT owner, status FROM runs WHERE id = $1")
                .bind(&run)
                .fetch_optional(&app.pool)
                .await?;
        let taken = row.is_some_and(|(owner, status)| {
            status != "running" || owner.as_deref() != Some(app.instance.as_str())
        });
        if taken && let Some(r) = app.device_chats.take(&chat, &run) {
            tracing::warn!("chat {chat}: its run {run} was taken over; cancelled on the device");
            cancel_on_device(app, &r.at);
        }
    }
    Ok(())
}

/// The server's shutdown: every device chat's run is cancelled on its device and ended
/// interrupted. Answers how many.
pub async fn interrupt_all(app: &App) -> usize {
    let runs: Vec<(String, String)> = app
        .device_chats
        .lock()
        .runs
        .iter()
        .map(|(c, r)| (c.clone(), r.run.clone()))
        .collect();
    let mut ended = 0;
    for (chat, run) in runs {
        if let Some(r) = app.device_chats.take(&chat, &run) {
            cancel_on_device(app, &r.at);
            finish(app, r.user_id, &chat, &run, "interrupted", None).await;
            ended += 1;
        }
    }
    ended
}

/// The device's link `generation` went down: its runs are interrupted, each chat told the
/// device went offline; its sessions are reopened on the next link.
pub async fn link_down(app: &App, device: &str, generation: u64) {
    let (cut, tokens): (Vec<(String, String, i64)>, Vec<String>) = {
        let mut inner = app.device_chats.lock();
        let mut tokens = Vec::new();
        inner.sessions.retain(|_, o| {
            let gone = o.device == device && o.generation == generation;
            if gone {
                tokens.extend(o.token.clone());
            }
            !gone
        });
        let cut = inner
            .runs
            .iter()
            .filter(|(_, r)| r.at.device == device && r.at.generation == generation)
            .map(|(c, r)| (c.clone(), r.run.clone(), r.user_id))
            .collect();
        (cut, tokens)
    };
    // The sessions are closed: their memory tokens end with them.
    for t in tokens {
        if let Err(e) = crate::memory::revoke_token(app, &t).await {
            tracing::error!("device {device}: {e}");
        }
    }
    for (chat, run, user_id) in cut {
        let said = json!({"type": "notice", "level": "warning", "device_offline": true,
            "text": "The device went offline: this run was interrupted. Send again once it is linked."});
        end(app, user_id, &chat, &run, "interrupted", Some(said)).await;
    }
}

/// Stops the user's run `run` when it is a device chat's (`session/cancel`); `None` when it is
/// not one.
pub async fn stop(app: &App, user: &User, run: &str) -> Result<Option<String>> {
    let found = {
        let inner = app.device_chats.lock();
        inner
            .runs
            .iter()
            .find(|(_, r)| r.run == run)
            .map(|(_, r)| (r.user_id, r.at.clone()))
    };
    let Some((user_id, at)) = found else {
        return Ok(None);
    };
    if user_id != user.id {
        return Err(Error::NotFound(format!("no run {run}")));
    }
    let live = app
        .device_links
        .live(&at.device)
        .filter(|l| l.generation == at.generation);
    if let Some(live) = live {
        // The device's pending questions of the run are refused (ACP: cancelled), then the
        // prompt answers `cancelled`.
        let asks: Vec<Asked> = {
            let mut inner = app.device_chats.lock();
            let ids: Vec<String> = inner
                .asks
                .iter()
                .filter(|(_, a)| a.run == run)
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| inner.asks.remove(id)).collect()
        };
        for a in asks {
            let _ = a.responder.respond(RequestPermissionResponse::new(
                RequestPermissionOutcome::Cancelled,
            ));
        }
        live.agent
            .send_notification(CancelNotification::new(at.session.clone()))
            .map_err(|e| Error::Conflict(format!("the device's link failed: {e}")))?;
    } else {
        link_down(app, &at.device, at.generation).await;
    }
    Ok(Some("stopping".into()))
}

/// The chat's mode changed in the page: a session of it open on the device's live link
/// switches too (`session/set_mode`); one opened later starts in it.
pub async fn set_mode(app: &App, chat: &str, mode: Mode) -> Result<()> {
    let Some(o) = app.device_chats.lock().sessions.get(chat).cloned() else {
        return Ok(());
    };
    let Some(live) = app
        .device_links
        .live(&o.device)
        .filter(|l| l.generation == o.generation)
    else {
        return Ok(());
    };
    live.agent
        .send_request(SetSessionModeRequest::new(o.session, mode.as_str()))
        .block_task()
        .await
        .map_err(|e| refused(&e))?;
    Ok(())
}
