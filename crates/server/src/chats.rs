//! Chats on the shared runtime: one `harness-agent` session per chat (project `llembas`, kind
//! `chat`), driven in a task of the server; a run is one prompt, started by a request and going
//! on without it. Every event is stored with the chat's next sequence number and sent to the
//! user's open streams (the event log's lock keeps the stored order and the sent order one).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::db::Db;
use harness_agent::{CapacityGate, Ctl, Out, SessionBuilder};
use harness_core::protocol::{Answer, Event, Mode, Op, Origin, SessionKind, TurnEnd};
use harness_spec::Project;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::App;
use crate::auth::User;
use crate::db::{now, random_id};
use crate::error::{Error, Result};
use crate::store::{SqlStore, find_meta, load_entries};
use crate::world::{ChatWorld, grants_text, user_grants, user_view};

/// How many events a slow stream may fall behind before it reads the rest from the database.
const BROADCAST_CAPACITY: usize = 4096;

mod hub;
pub use hub::Hub;

/// The model endpoint chats use, configured as the CLI's ([`harness_model::settings`]).
fn model_settings(app: &App) -> Result<&harness_model::settings::ModelSettings> {
    app.model.as_ref().ok_or_else(|| {
        Error::Model(format!(
            "{} the file --config names",
            harness_model::settings::NO_MODEL
        ))
    })
}

/// One stored event as streams send it.
#[derive(Debug, Clone, Serialize)]
pub struct Stored {
    /// Its place in its user's stream (the SSE id).
    pub id: i64,
    /// Whose.
    #[serde(skip)]
    pub user_id: i64,
    /// The chat.
    pub chat: String,
    /// The run it belongs to.
    pub run: Option<String>,
    /// Its number in the chat.
    pub seq: i64,
    /// The event.
    pub event: Value,
}

/// The user's events after `after`, in order, at most `limit`.
pub async fn events_after(pool: &Db, user_id: i64, after: i64, limit: i64) -> Result<Vec<Stored>> {
    let rows: Vec<(i64, String, Option<String>, i64, String)> = sqlx::query_as(
        "SELECT id, chat_id, run_id, seq, data FROM events WHERE user_id = $1 AND id > $2 ORDER BY id LIMIT $3",
    )
    .bind(user_id)
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.into_iter().map(|r| stored_row(user_id, r)).collect()
}

fn stored_row(
    user_id: i64,
    (id, chat, run, seq, data): (i64, String, Option<String>, i64, String),
) -> Result<Stored> {
    Ok(Stored {
        id,
        user_id,
        chat,
        run,
        seq,
        event: serde_json::from_str(&data)
            .map_err(|e| Error::Stored(format!("event {id}: {e}")))?,
    })
}

/// A chat's events, in order.
pub async fn chat_events(pool: &Db, user_id: i64, chat: &str) -> Result<Vec<Stored>> {
    let rows: Vec<(i64, String, Option<String>, i64, String)> = sqlx::query_as(
        "SELECT id, chat_id, run_id, seq, data FROM events WHERE user_id = $1 AND chat_id = $2 ORDER BY seq",
    )
    .bind(user_id)
    .bind(chat)
    .fetch_all(pool)
    .await?;
    rows.into_iter().map(|r| stored_row(user_id, r)).collect()
}

/// A chat whose session runs in this process.
pub struct Live {
    ctl: mpsc::UnboundedSender<Ctl>,
    /// The run going on, if any.
    run: Arc<Mutex<Option<String>>>,
    /// Whether it was built holding `display` and `page` (a page of the chat was open).
    page: bool,
}

/// The chats running in this process.
#[derive(Default)]
pub struct Chats {
    live: Mutex<HashMap<String, Arc<Live>>>,
    /// Woken whenever a run here ends.
    ended: tokio::sync::Notify,
}

impl Chats {
    fn get(&self, id: &str) -> Option<Arc<Live>> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    fn insert(&self, id: &str, live: Arc<Live>) {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id.to_owned(), live);
    }

    /// Removes the chat's session `live` (not another one built since in its place).
    fn remove(&self, id: &str, live: &Arc<Live>) {
        let mut map = self
            .live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.get(id).is_some_and(|l| Arc::ptr_eq(l, live)) {
            map.remove(id);
        }
    }

    /// The run going on in `chat` here, if any.
    pub fn run_of(&self, chat: &str) -> Option<String> {
        self.get(chat).and_then(|l| current(&l.run))
    }

    fn all(&self) -> Vec<Arc<Live>> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// The ids of the runs going on.
    pub fn running(&self) -> Vec<String> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .filter_map(|l| l.run.lock().ok().and_then(|r| r.clone()))
            .collect()
    }
}

/// A chat's row.
#[derive(Debug, Clone, Serialize)]
pub struct ChatRow {
    /// Its id.
    pub id: String,
    /// The first line of its first message.
    pub title: String,
    /// Its permission mode.
    pub mode: String,
    /// Its model.
    pub model: String,
    /// When it was made.
    pub created: i64,
    /// When it last changed.
    pub updated: i64,
    /// The run going on, if any.
    pub running: Option<String>,
}

/// The user's chat `id` (no other user's: theirs is "no such chat").
pub async fn chat_row(pool: &Db, user: &User, id: &str) -> Result<ChatRow> {
    let row: Option<(String, String, String, String, i64, i64)> = sqlx::query_as(
        "SELECT c.id, s.title, c.mode, c.model, c.created, s.updated FROM chats c JOIN agent_sessions s ON s.id = c.id WHERE c.id = $1 AND c.user_id = $2",
    )
    .bind(id)
    .bind(user.id)
    .fetch_optional(pool)
    .await?;
    let (id, title, mode, model, created, updated) =
        row.ok_or_else(|| Error::NotFound(format!("no chat {id}")))?;
    let running: Option<String> = sqlx::query_scalar(
        "SELECT id FROM runs WHERE chat_id = $1 AND status = 'running' ORDER BY created DESC LIMIT 1",
    )
    .bind(&id)
    .fetch_optional(pool)
    .await?;
    Ok(ChatRow {
        id,
        title,
        mode,
        model,
        created,
        updated,
        running,
    })
}

/// The user's chats, newest first.
pub async fn list(pool: &Db, user: &User) -> Result<Vec<ChatRow>> {
    let ids: Vec<String> = sqlx::query_scalar(
        "SELECT c.id FROM chats c JOIN agent_sessions s ON s.id = c.id WHERE c.user_id = $1 ORDER BY s.updated DESC, c.id DESC",
    )
    .bind(user.id)
    .fetch_all(pool)
    .await?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        out.push(chat_row(pool, user, &id).await?);
    }
    Ok(out)
}

/// What a session of the chat is built from, for a new chat or one resumed. `page`: a page of
/// the chat is open (the session holds `display` and `page`: `show` and `python` are offered).
async fn builder(
    app: &Arc<App>,
    user: &User,
    mode: Mode,
    model: &str,
    page: crate::python::PageLink,
) -> Result<SessionBuilder> {
    let view = user_view(&app.pool, &app.backend, user.id, &user.username).await?;
    let grants = grants_text(&view, &user_grants(&app.pool, user.id).await?);
    let world = ChatWorld::new(
        view,
        grants,
        crate::memory::path(&app.data, user.id),
        app.data.join("skills").join(user.id.to_string()),
    )
    .with_search(app.search.clone());
    let world = crate::python::PageWorld::new(world, page);
    let link = model_settings(app)?
        .link(model)
        .map_err(|e| Error::Model(e.to_string()))?;
    Ok(SessionBuilder::new(Arc::new(link), Arc::new(world))
        .store(Arc::new(SqlStore::new(app.pool.clone(), user.id)))
        .project(Project::Llembas)
        .kind(SessionKind::Chat)
        .mode(mode)
        .capacity(app.capacity.clone())
        .product_version(env!("CARGO_PKG_VERSION")))
}

/// Creates a chat for `user`; answers its id.
pub async fn create(
    app: &Arc<App>,
    user: &User,
    mode: Mode,
    model: Option<&str>,
) -> Result<String> {
    app.refuse_when_stopping()?;
    let configured = model_settings(app)?
        .model_id(&harness_model::CancellationToken::new())
        .await
        .map_err(|e| Error::Model(e.to_string()))?;
    let chosen = crate::admin::model_for(&app.pool, model, &configured).await?;
    // No page shows a chat before it exists.
    let link = crate::python::PageLink::new(app, user.id, None, false);
    let built = builder(app, user, mode, &chosen, link.clone())
        .await?
        .build()?;
    let id = built.driver.id().to_owned();
    link.set_chat(&id);
    sqlx::query(
        "INSERT INTO chats (id, user_id, mode, model, created) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&id)
    .bind(user.id)
    .bind(mode.as_str())
    .bind(&chosen)
    .bind(now())
    .execute(&app.pool)
    .await?;
    drive(app, user.id, &id, built, false);
    Ok(id)
}

/// The chat's live session, resumed from its transcript when it is not running here. An idle
/// session built when a page of the chat was open and now none is (or the other way round) is
/// built again, so what it offers follows what holds (`display`, `page`).
async fn live(app: &Arc<App>, user: &User, chat: &ChatRow) -> Result<Arc<Live>> {
    let page = app.pages.attached(&chat.id);
    if let Some(l) = app.chats.get(&chat.id) {
        if l.page == page || current(&l.run).is_some() {
            return Ok(l);
        }
        // Dropping the last handle of its channel ends the idle session.
        app.chats.remove(&chat.id, &l);
    }
    let meta = find_meta(&app.pool, user.id, &chat.id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("no chat {}", chat.id)))?;
    let entries = load_entries(&app.pool, user.id, &chat.id).await?;
    let mode = chat.mode.parse::<Mode>().unwrap_or(Mode::Manual);
    let link = crate::python::PageLink::new(app, user.id, Some(&chat.id), page);
    let built = builder(app, user, mode, &chat.model, link)
        .await?
        .resume(meta, entries)
        .build()?;
    Ok(drive(app, user.id, &chat.id, built, page))
}

/// Starts driving a built session and pumping its events into the log. Its front end answers
/// `question`s (the page, whenever one opens); `page`: it has the page's viewer (`display`).
fn drive(
    app: &Arc<App>,
    user_id: i64,
    chat: &str,
    built: harness_agent::Built,
    page: bool,
) -> Arc<Live> {
    let harness_agent::Built {
        mut driver,
        ctl,
        mut out,
    } = built;
    driver.answers_questions();
    if page {
        driver.holds_display();
    }
    let weak_ctl = ctl.downgrade();
    let live = Arc::new(Live {
        ctl,
        run: Arc::new(Mutex::new(None)),
        page,
    });
    app.chats.insert(chat, live.clone());
    let chat_id = chat.to_owned();
    let (app2, run2, chat2) = (app.clone(), live.run.clone(), chat_id.clone());
    let live2 = Arc::downgrade(&live);
    tokio::spawn(async move {
        if let Err(e) = driver.run(false).await {
            eprintln!("llembas-server: chat {chat2}: {e}");
            if let Some(l) = live2.upgrade() {
                app2.chats.remove(&chat2, &l);
            }
            let taken = run2
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            if let Some(r) = taken {
                let said = app2
                    .hub
                    .append(
                        user_id,
                        &chat2,
                        Some(&r),
                        json!({"type": "error", "message": e.to_string()}),
                    )
                    .await;
                if let Err(e) = said.and(end_run(&app2, user_id, &chat2, &r, "failed").await) {
                    eprintln!("llembas-server: chat {chat2}: {e}");
                }
                app2.chats.ended.notify_waiters();
            }
        }
        driver.shutdown().await;
    });
    let app = app.clone();
    let run = live.run.clone();
    let live3 = Arc::downgrade(&live);
    tokio::spawn(async move {
        while let Some(o) = out.recv().await {
            if let Err(e) = pump(&app, user_id, &chat_id, &run, &weak_ctl, o).await {
                eprintln!("llembas-server: chat {chat_id}: {e}");
            }
        }
        if let Some(l) = live3.upgrade() {
            app.chats.remove(&chat_id, &l);
        }
    });
    live
}

fn current(run: &Mutex<Option<String>>) -> Option<String> {
    run.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// A run's status after its turn ended this way.
fn status_of(end: &TurnEnd) -> &'static str {
    match end {
        TurnEnd::Finished | TurnEnd::PlanSubmitted => "finished",
        TurnEnd::Cancelled => "stopped",
        TurnEnd::Error { .. } => "failed",
        _ => "ended",
    }
}

async fn pump(
    app: &Arc<App>,
    user_id: i64,
    chat: &str,
    run: &Mutex<Option<String>>,
    ctl: &mpsc::WeakUnboundedSender<Ctl>,
    o: Out,
) -> Result<()> {
    let run_id = current(run);
    let mut value = match &o {
        Out::Event(e) => serde_json::to_value(e).map_err(|e| Error::Stored(e.to_string()))?,
        Out::Edit {
            call_id,
            path,
            before,
            after,
        } => {
            json!({"type": "edit", "call_id": call_id, "path": path, "before": before, "after": after})
        }
        Out::Question {
            call_id,
            question,
            options,
        } => {
            // The page answers it (`POST /api/questions/{ask}`), whenever one is open.
            let ask = match ctl.upgrade() {
                Some(ctl) => Some(app.pages.ask(
                    user_id,
                    chat,
                    call_id,
                    crate::page::AskKind::Question,
                    crate::page::Answerer::Session(ctl),
                )?),
                None => None,
            };
            json!({"type": "question", "call_id": call_id, "question": question, "options": options, "ask": ask})
        }
        Out::Show {
            call_id,
            path,
            title,
            kind,
            language,
            line,
            ..
        } => {
            // The page's viewer opens it and says so (`POST /api/shows/{ask}`); with no page
            // open, the call answers that the viewer is gone.
            let ask = match ctl.upgrade() {
                Some(ctl) if app.pages.attached(chat) => Some(app.pages.ask(
                    user_id,
                    chat,
                    call_id,
                    crate::page::AskKind::Show,
                    crate::page::Answerer::Session(ctl),
                )?),
                Some(ctl) => {
                    let _ = ctl.send(Ctl::Reply(call_id.clone(), None));
                    None
                }
                None => None,
            };
            json!({"type": "show", "call_id": call_id, "path": path, "title": title, "kind": kind, "language": language, "line": line, "ask": ask})
        }
        Out::ToolOutput { call_id, text } => {
            json!({"type": "tool_output", "call_id": call_id, "text": text})
        }
    };
    if let Out::Event(Event::ToolCallAsked { call_id, .. }) = &o {
        let id = random_id()?;
        sqlx::query(
            "INSERT INTO approvals (id, user_id, chat_id, run_id, call_id) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&id)
        .bind(user_id)
        .bind(chat)
        .bind(&run_id)
        .bind(call_id)
        .execute(&app.pool)
        .await?;
        if let Some(obj) = value.as_object_mut() {
            obj.insert("approval".into(), Value::String(id));
        }
    }
    app.hub
        .append(user_id, chat, run_id.as_deref(), value)
        .await?;
    if let (Out::Event(Event::TurnEnded { reason }), Some(r)) = (&o, &run_id) {
        // A run the server's shutdown cancelled was interrupted, not stopped by its user.
        let status = if app.is_stopping() && matches!(reason, TurnEnd::Cancelled) {
            "interrupted"
        } else {
            status_of(reason)
        };
        let ended = end_run(app, user_id, chat, r, status).await;
        *run.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        app.pages.forget(chat);
        app.chats.ended.notify_waiters();
        ended?;
    }
    Ok(())
}

/// Marks a run ended and says so on the stream.
async fn end_run(app: &App, user_id: i64, chat: &str, run: &str, status: &str) -> Result<()> {
    sqlx::query("UPDATE runs SET status = $1, ended = $2 WHERE id = $3 AND status = 'running'")
        .bind(status)
        .bind(now())
        .bind(run)
        .execute(&app.pool)
        .await?;
    app.hub
        .append(
            user_id,
            chat,
            Some(run),
            json!({"type": "run_ended", "run": run, "status": status}),
        )
        .await?;
    Ok(())
}

/// Sends a message to the user's chat `id`: a new run, answered by its id.
pub async fn send(app: &Arc<App>, user: &User, id: &str, text: &str) -> Result<String> {
    if text.trim().is_empty() {
        return Err(Error::BadRequest("the message is empty".into()));
    }
    app.refuse_when_stopping()?;
    let chat = chat_row(&app.pool, user, id).await?;
    let live = live(app, user, &chat).await?;
    let run_id = random_id()?;
    {
        let mut slot = live
            .run
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(r) = slot.as_ref() {
            return Err(Error::Conflict(format!(
                "the chat {id} is busy with run {r}: stop it or wait for its end"
            )));
        }
        *slot = Some(run_id.clone());
    }
    sqlx::query("INSERT INTO runs (id, chat_id, user_id, status, created) VALUES ($1, $2, $3, 'running', $4)")
        .bind(&run_id)
        .bind(id)
        .bind(user.id)
        .bind(now())
        .execute(&app.pool)
        .await?;
    app.hub
        .append(
            user.id,
            id,
            Some(&run_id),
            json!({"type": "run_started", "run": run_id}),
        )
        .await?;
    let sent = live.ctl.send(Ctl::Op(Op::Prompt {
        text: text.to_owned(),
        origin: Origin::Person,
        images: Vec::new(),
    }));
    if sent.is_err() {
        end_run(app, user.id, id, &run_id, "failed").await?;
        return Err(Error::Conflict(format!("the chat {id} has stopped")));
    }
    if app.is_stopping() {
        // The shutdown began after the check above: it may have missed this run.
        let _ = live.ctl.send(Ctl::Op(Op::Cancel));
    }
    Ok(run_id)
}

/// At shutdown: cancels every run going on here, waits for each to end (its tools' calls get
/// their results, its turn is closed in the transcript) and marks it interrupted.
pub async fn interrupt_all(app: &Arc<App>) -> Result<Vec<String>> {
    let mut cancelled = Vec::new();
    for l in app.chats.all() {
        if let Some(r) = current(&l.run) {
            let _ = l.ctl.send(Ctl::Op(Op::Cancel));
            cancelled.push(r);
        }
    }
    loop {
        let ended = app.chats.ended.notified();
        tokio::pin!(ended);
        ended.as_mut().enable();
        if app.chats.running().is_empty() {
            break;
        }
        ended.await;
    }
    // A run whose session went before it could say its end is marked here.
    for run in &cancelled {
        let row: Option<(String, i64)> = sqlx::query_as(
            "SELECT chat_id, user_id FROM runs WHERE id = $1 AND status = 'running'",
        )
        .bind(run)
        .fetch_optional(&app.pool)
        .await?;
        if let Some((chat, user_id)) = row {
            end_run(app, user_id, &chat, run, "interrupted").await?;
        }
    }
    Ok(cancelled)
}

/// Stops the user's run `id`.
pub async fn stop(app: &Arc<App>, user: &User, id: &str) -> Result<String> {
    let row: Option<(String, String)> =
        sqlx::query_as("SELECT chat_id, status FROM runs WHERE id = $1 AND user_id = $2")
            .bind(id)
            .bind(user.id)
            .fetch_optional(&app.pool)
            .await?;
    let (chat, status) = row.ok_or_else(|| Error::NotFound(format!("no run {id}")))?;
    if status != "running" {
        return Err(Error::Conflict(format!(
            "the run {id} has ended ({status})"
        )));
    }
    match app.chats.get(&chat) {
        Some(l) if current(&l.run).as_deref() == Some(id) => {
            let _ = l.ctl.send(Ctl::Op(Op::Cancel));
            Ok("stopping".into())
        }
        _ => Err(Error::Conflict(format!("the run {id} has ended"))),
    }
}

/// Answers the user's approval `id`: `yes`, `always` or `no` (with a note for the model).
pub async fn approve(
    app: &Arc<App>,
    user: &User,
    id: &str,
    answer: &str,
    note: Option<String>,
) -> Result<()> {
    let answer = match answer {
        "yes" => Answer::Once,
        "always" => Answer::Always,
        "no" => Answer::Deny { feedback: note },
        other => {
            return Err(Error::BadRequest(format!(
                "unknown answer {other:?}: use yes, always or no"
            )));
        }
    };
    let row: Option<(String, String, i64)> = sqlx::query_as(
        "SELECT chat_id, call_id, answered FROM approvals WHERE id = $1 AND user_id = $2",
    )
    .bind(id)
    .bind(user.id)
    .fetch_optional(&app.pool)
    .await?;
    let (chat, call_id, answered) =
        row.ok_or_else(|| Error::NotFound(format!("no approval {id}")))?;
    if answered != 0 {
        return Err(Error::Conflict(format!(
            "the approval {id} was answered already"
        )));
    }
    let Some(live) = app.chats.get(&chat) else {
        return Err(Error::Conflict(format!(
            "the run the approval {id} belongs to has ended"
        )));
    };
    let done = sqlx::query("UPDATE approvals SET answered = 1 WHERE id = $1 AND answered = 0")
        .bind(id)
        .execute(&app.pool)
        .await?;
    if done.rows_affected() == 0 {
        return Err(Error::Conflict(format!(
            "the approval {id} was answered already"
        )));
    }
    live.ctl
        .send(Ctl::Op(Op::Answer { call_id, answer }))
        .map_err(|_| Error::Conflict(format!("the run the approval {id} belongs to has ended")))
}

/// At start: runs a dead process left "running" are marked interrupted, said on their chats'
/// streams, and their transcripts closed (every call gets its result) by resuming each once.
pub async fn recover(app: &Arc<App>) -> Result<usize> {
    let rows: Vec<(String, String, i64, String, String)> = sqlx::query_as(
        "SELECT r.id, r.chat_id, r.user_id, u.username, u.role FROM runs r JOIN users u ON u.id = r.user_id WHERE r.status = 'running'",
    )
    .fetch_all(&app.pool)
    .await?;
    let n = rows.len();
    for (run, chat, user_id, username, _role) in rows {
        end_run(app, user_id, &chat, &run, "interrupted").await?;
        let user = User {
            id: user_id,
            username,
            role: crate::auth::Role::User,
        };
        let row = chat_row(&app.pool, &user, &chat).await?;
        let Some(meta) = find_meta(&app.pool, user_id, &chat).await? else {
            continue;
        };
        let entries = load_entries(&app.pool, user_id, &chat).await?;
        let mode = row.mode.parse::<Mode>().unwrap_or(Mode::Manual);
        let link = crate::python::PageLink::new(app, user_id, Some(&chat), false);
        let mut built = builder(app, &user, mode, &row.model, link)
            .await?
            .resume(meta, entries)
            .build()?;
        // Resuming closes the turn the crash cut short; running until idle writes that down.
        built.driver.run(true).await?;
    }
    Ok(n)
}

/// The shared capacity gate of the process's chats.
pub fn capacity() -> Result<Arc<CapacityGate>> {
    Ok(Arc::new(CapacityGate::new()?))
}

/// Changes the permission mode of the user's chat `id` (stored for its next resume; a session
/// running here switches at once and says so with a `mode_changed` event).
pub async fn set_mode(app: &Arc<App>, user: &User, id: &str, mode: Mode) -> Result<()> {
    chat_row(&app.pool, user, id).await?;
    sqlx::query("UPDATE chats SET mode = $1 WHERE id = $2 AND user_id = $3")
        .bind(mode.as_str())
        .bind(id)
        .bind(user.id)
        .execute(&app.pool)
        .await?;
    if let Some(l) = app.chats.get(id) {
        let _ = l.ctl.send(Ctl::Op(Op::SetMode { mode }));
    }
    Ok(())
}
