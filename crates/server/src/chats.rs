//! Chats on the shared runtime: one `harness-agent` session per chat (project `llembas`, kind
//! `chat`), driven in a task of the server; a run is one prompt, started by a request and going
//! on without it. Every event is stored with the chat's next sequence number and sent to the
//! user's open streams (the event log's lock keeps the stored order and the sent order one).

use std::sync::{Arc, Mutex};

use crate::db::{Db, Stmt};
use harness_agent::{CapacityGate, CoreEvent, Event, Op, SessionBuilder, Spawned, WeakSession};
use harness_core::protocol::{Answer, Mode, Origin, SessionKind, TurnEnd};
use harness_spec::Project;
use serde::Serialize;
use serde_json::{Value, json};

use crate::App;
use crate::auth::User;
use crate::db::{now, random_id};
use crate::error::{Error, Result};
use crate::store::{SqlStore, find_meta, load_entries};
use crate::world::{ChatWorld, grants_text, user_grants, user_view};

/// How many events a slow stream may fall behind before it reads the rest from the database.
const BROADCAST_CAPACITY: usize = 4096;

mod cut;
mod halt;
mod hub;
mod live;
mod replay;
mod shared;
pub use crate::page::record_ask;
pub use halt::halt_user;
pub use hub::{Hub, flush};
pub use live::{Chats, Live, drop_idle_later, drop_when_unseen};
use live::{Claim, current, made_of};
pub use replay::start as stream_start;
pub use replay::{REPLAY_MAX, Start, newest_event};
pub use shared::{Act, answer_ask, keep_leases, lease_end, listen, publish_revoked};

/// The model endpoint chats use, configured as the CLI's ([`harness_model::settings`]).
fn model_settings(app: &App) -> Result<&harness_model::settings::ModelSettings> {
    app.model.as_ref().ok_or_else(|| {
        Error::Model(format!(
            "{} the file --config names",
            harness_model::settings::NO_MODEL
        ))
    })
}

/// The model link of `model`, one for every chat of it in this process: one HTTP client (its
/// connections and root certificates loaded once), not one a chat.
fn model_link(app: &App, model: &str) -> Result<Arc<harness_model::ModelClient>> {
    let mut links = app
        .links
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(l) = links.get(model) {
        return Ok(l.clone());
    }
    let link = Arc::new(
        model_settings(app)?
            .link(model)
            .map_err(|e| Error::Model(e.to_string()))?,
    );
    crate::slots::fix(app, link.as_ref());
    links.insert(model.to_owned(), link.clone());
    Ok(link)
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

/// The user's events with ids from `first` to `last`, in order.
async fn events_between(pool: &Db, user_id: i64, first: i64, last: i64) -> Result<Vec<Stored>> {
    let rows: Vec<(i64, String, Option<String>, i64, String)> = sqlx::query_as(
        "SELECT id, chat_id, run_id, seq, data FROM events WHERE user_id = $1 AND id >= $2 AND id <= $3 ORDER BY id",
    )
    .bind(user_id)
    .bind(first)
    .bind(last)
    .fetch_all(pool)
    .await?;
    rows.into_iter().map(|r| stored_row(user_id, r)).collect()
}

/// The refusal of a message to a chat that runs already (`run`, when it is known).
fn busy(chat: &str, run: Option<&str>) -> Error {
    let run = run.map_or_else(|| "a run".to_owned(), |r| format!("run {r}"));
    Error::Conflict(format!(
        "the chat {chat} is busy with {run}: stop it or wait for its end"
    ))
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
    /// The personality preset its user's sessions are built with (`None`: the default), read
    /// with the row.
    #[serde(skip)]
    pub personality: Option<String>,
}

/// The user's chat `id` (no other user's: theirs is "no such chat").
pub async fn chat_row(pool: &Db, user: &User, id: &str) -> Result<ChatRow> {
    // Whether it runs is read from rows the event log may still hold.
    hub::flush(pool).await;
    row_of(pool, user, id, true).await
}

/// The user's chat `id` for a new run. On SQLite this process alone runs chats, and its own
/// state says what runs: no wait for the event log to store the runs' rows (200 messages sent
/// at once each waited for a commit of their own). On PostgreSQL the rows say it.
async fn row_for_run(app: &App, user: &User, id: &str) -> Result<ChatRow> {
    if app.hub.shared() {
        return chat_row(&app.pool, user, id).await;
    }
    let mut row = row_of(&app.pool, user, id, false).await?;
    row.running = app.chats.run_of(id);
    Ok(row)
}

/// The user's chat `id` as stored; `runs`: with the run going on, from the runs' rows.
async fn row_of(pool: &Db, user: &User, id: &str, runs: bool) -> Result<ChatRow> {
    type Row = (String, String, String, String, i64, i64, Option<String>);
    let row: Option<Row> = sqlx::query_as(
        "SELECT c.id, s.title, c.mode, c.model, c.created, s.updated, u.personality FROM chats c JOIN agent_sessions s ON s.id = c.id LEFT JOIN user_settings u ON u.user_id = c.user_id WHERE c.id = $1 AND c.user_id = $2",
    )
    .bind(id)
    .bind(user.id)
    .fetch_optional(pool)
    .await?;
    let (id, title, mode, model, created, updated, personality) =
        row.ok_or_else(|| Error::NotFound(format!("no chat {id}")))?;
    let running: Option<String> = if runs {
        sqlx::query_scalar(
            "SELECT id FROM runs WHERE chat_id = $1 AND status = 'running' ORDER BY created DESC LIMIT 1",
        )
        .bind(&id)
        .fetch_optional(pool)
        .await?
    } else {
        None
    };
    Ok(ChatRow {
        id,
        title,
        mode,
        model,
        created,
        updated,
        running,
        personality: personality.filter(|p| p != "default"),
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
    hub::flush(pool).await;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        out.push(row_of(pool, user, &id, true).await?);
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
    narrower: &[(String, harness_fs::Level)],
) -> Result<SessionBuilder> {
    let world = chat_world(app, user, page, narrower).await?;
    let world = crate::mcp::with_servers(app, user, Arc::new(world)).await?;
    let link = model_link(app, model)?;
    Ok(SessionBuilder::new(link, world)
        .store(Arc::new(SqlStore::new(
            app.pool.clone(),
            app.transcripts.clone(),
            user.id,
        )))
        .project(Project::Llembas)
        .kind(SessionKind::Chat)
        .mode(mode)
        .personality(crate::settings::personality(&app.pool, user.id).await?)
        .capacity(app.capacity.clone())
        .product_version(env!("CARGO_PKG_VERSION")))
}

/// The world a chat of `user` works in: their view made narrower by the chat's grants, the file
/// tools, memory and skills, search, and the tools of its page.
pub async fn chat_world(
    app: &Arc<App>,
    user: &User,
    page: crate::python::PageLink,
    narrower: &[(String, harness_fs::Level)],
) -> Result<crate::python::PageWorld> {
    let view = user_view(&app.pool, &app.backend, user.id, &user.username).await?;
    let view = crate::world::narrowed(view, narrower);
    let granted = user_grants(&app.pool, user.id, &user.username).await?;
    let grants = grants_text(
        &view,
        &crate::world::effective_grants(&view, &granted, narrower),
    );
    let forge = crate::verbs::ChatForge::new(
        crate::mounts::stored(&app.pool).await?,
        app.tree.clone(),
        &user.username,
        page.chat_cell(),
    );
    let world = ChatWorld::new(
        view,
        grants,
        crate::world::memory_path(&app.data, user.id),
        app.data.join("skills").join(user.id.to_string()),
    )
    .with_search(app.search.clone())
    .with_forge(forge);
    Ok(crate::python::PageWorld::new(world, page))
}

/// Creates a chat for `user`; answers its id.
pub async fn create(
    app: &Arc<App>,
    user: &User,
    mode: Mode,
    model: Option<&str>,
    narrower: &[(String, harness_fs::Level)],
) -> Result<String> {
    app.refuse_when_stopping()?;
    let configured = model_settings(app)?
        .model_id(&harness_model::CancellationToken::new())
        .await
        .map_err(|e| Error::Model(e.to_string()))?;
    let chosen = crate::admin::model_for(&app.pool, model, &configured).await?;
    // No page shows a chat before it exists.
    let link = crate::python::PageLink::new(app, user.id, None, false);
    let built = spawn(
        builder(app, user, mode, &chosen, link.clone(), narrower).await?,
        false,
    )?;
    let id = built.session.id().to_owned();
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
    for (path, level) in narrower {
        sqlx::query("INSERT INTO chat_grants (chat_id, path, level) VALUES ($1, $2, $3)")
            .bind(&id)
            .bind(path)
            .bind(level.as_str())
            .execute(&app.pool)
            .await?;
    }
    let made = made_of(
        &chosen,
        crate::settings::personality(&app.pool, user.id)
            .await?
            .as_deref(),
    );
    app.hub.new_chat(&id);
    drive(app, user.id, &id, built, false, made);
    // Kept for its first message a while; then built again when it is needed.
    drop_idle_later(app, &id);
    Ok(id)
}

/// The chat's live session, resumed from its transcript when it is not running here. An idle
/// session built when a page of the chat was open and now none is (or the other way round) is
/// built again, so what it offers follows what holds (`display`, `page`).
async fn live(app: &Arc<App>, user: &User, chat: &ChatRow) -> Result<Arc<Live>> {
    let page = app.pages.attached(&chat.id);
    let made = made_of(&chat.model, chat.personality.as_deref());
    if let Some(l) = app.chats.get(&chat.id)
        && current(&l.run).is_none()
        && ran_elsewhere(app, &chat.id, l.built).await?
    {
        // Another process ran the chat since this idle session was built: its history is behind.
        app.chats.remove(&chat.id, &l);
    }
    if let Some(l) = app.chats.get(&chat.id) {
        if (l.page == page && l.made == made) || current(&l.run).is_some() {
            return Ok(l);
        }
        // Dropping the last handle of its channel ends the idle session.
        app.chats.remove(&chat.id, &l);
    }
    let meta = find_meta(&app.pool, &app.transcripts, user.id, &chat.id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("no chat {}", chat.id)))?;
    let entries = load_entries(&app.pool, &app.transcripts, user.id, &chat.id).await?;
    let mode = chat.mode.parse::<Mode>().unwrap_or(Mode::Manual);
    let link = crate::python::PageLink::new(app, user.id, Some(&chat.id), page);
    let narrower = crate::world::chat_grants(&app.pool, &chat.id).await?;
    let built = spawn(
        builder(app, user, mode, &chat.model, link, &narrower)
            .await?
            .resume(meta, entries),
        page,
    )?;
    Ok(drive(app, user.id, &chat.id, built, page, made))
}

/// Whether another process of the database began a run of `chat` since `since` (seconds; a run
/// begun in the same second counts, so a session is rather built again than left behind).
async fn ran_elsewhere(app: &App, chat: &str, since: i64) -> Result<bool> {
    if !app.hub.shared() {
        return Ok(false);
    }
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM runs WHERE chat_id = $1 AND created >= $2 AND owner IS NOT NULL AND owner != $3",
    )
    .bind(chat)
    .bind(since)
    .bind(&app.instance)
    .fetch_one(&app.pool)
    .await?;
    Ok(n > 0)
}

/// Starts a chat's session: its front end answers `question`s (the page, whenever one opens);
/// `page`: it has the page's viewer (`display`).
fn spawn(builder: SessionBuilder, page: bool) -> Result<Spawned> {
    Ok(builder
        .answers_questions(true)
        .holds_display(page)
        .spawn()?)
}

/// Keeps a spawned session as the chat's live one and pumps its events into the log.
fn drive(
    app: &Arc<App>,
    user_id: i64,
    chat: &str,
    built: Spawned,
    page: bool,
    made: String,
) -> Arc<Live> {
    let Spawned {
        session: ctl,
        events: mut out,
        run: task,
    } = built;
    let weak_ctl = ctl.downgrade();
    let live = Arc::new(Live {
        ctl,
        run: Arc::new(Mutex::new(None)),
        page,
        built: now(),
        made,
        begun: std::sync::atomic::AtomicU64::new(0),
    });
    app.chats.insert(chat, live.clone());
    crate::slots::line_up(app, chat, user_id);
    let chat_id = chat.to_owned();
    let (app2, run2, chat2) = (app.clone(), live.run.clone(), chat_id.clone());
    let live2 = Arc::downgrade(&live);
    tokio::spawn(async move {
        let ended = task.finished().await.and_then(|ended| ended.result);
        if let Err(e) = ended {
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

/// A run's status after its turn ended this way.
fn status_of(end: &TurnEnd) -> &'static str {
    match end {
        TurnEnd::Finished | TurnEnd::PlanSubmitted => "finished",
        TurnEnd::Cancelled => "stopped",
        TurnEnd::Error { .. } | TurnEnd::ModelUnavailable { .. } => "failed",
        _ => "ended",
    }
}

async fn pump(
    app: &Arc<App>,
    user_id: i64,
    chat: &str,
    run: &Mutex<Option<String>>,
    ctl: &WeakSession,
    o: Event,
) -> Result<()> {
    let run_id = current(run);
    if waits_for_person(&o) {
        // What the person is asked about is in the transcript before the page shows it: a crash
        // while the question waits closes the call with a result, not a turn without it.
        app.transcripts.flush().await;
    }
    // What a page is asked to answer (on a shared database recorded before the page hears of it).
    let mut asked = None;
    let mut value = serde_json::to_value(&o).map_err(|e| Error::Stored(e.to_string()))?;
    let ask = match &o {
        Event::Question { call_id, .. } => {
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
            asked = ask.clone().map(|id| (id, crate::page::AskKind::Question));
            Some(ask)
        }
        Event::Show { call_id, .. } => {
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
                    ctl.submit(Op::Reply {
                        call_id: call_id.clone(),
                        text: None,
                    });
                    None
                }
                None => None,
            };
            asked = ask.clone().map(|id| (id, crate::page::AskKind::Show));
            Some(ask)
        }
        _ => None,
    };
    // What the page answers a question or a show with (`POST /api/questions/{ask}`).
    if let (Some(ask), Some(obj)) = (ask, value.as_object_mut()) {
        obj.insert("ask".into(), json!(ask));
    }
    if let Some((id, kind)) = asked {
        record_ask(app, &id, user_id, chat, run_id.as_deref(), kind).await?;
    }
    if let Event::Core(CoreEvent::ToolCallAsked { call_id, .. }) = &o {
        let id = random_id()?;
        crate::db::execute(
            &app.pool,
            sqlx::query(
                "INSERT INTO approvals (id, user_id, chat_id, run_id, call_id) VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(&id)
            .bind(user_id)
            .bind(chat)
            .bind(&run_id)
            .bind(call_id),
        )
        .await?;
        if let Some(obj) = value.as_object_mut() {
            obj.insert("approval".into(), Value::String(id));
        }
    }
    app.hub
        .append(user_id, chat, run_id.as_deref(), value)
        .await?;
    if let (Event::Core(CoreEvent::TurnEnded { reason }), Some(r)) = (&o, &run_id) {
        // A run the server's shutdown cancelled, or whose account can no longer sign in, was
        // interrupted, not stopped by its user.
        let halted = app.chats.take_interrupted(r);
        let status = if (app.is_stopping() || halted) && matches!(reason, TurnEnd::Cancelled) {
            "interrupted"
        } else {
            status_of(reason)
        };
        let ended = end_run(app, user_id, chat, r, status).await;
        *run.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        app.pages.forget(chat);
        app.chats.ended.notify_waiters();
        drop_idle_later(app, chat);
        ended?;
    }
    Ok(())
}

/// Whether the run waits on a person after this (a permission, a question, the viewer).
fn waits_for_person(o: &Event) -> bool {
    matches!(
        o,
        Event::Core(CoreEvent::ToolCallAsked { .. }) | Event::Question { .. } | Event::Show { .. }
    )
}

/// Marks a run ended and says so on the stream.
pub(crate) async fn end_run(
    app: &App,
    user_id: i64,
    chat: &str,
    run: &str,
    status: &str,
) -> Result<()> {
    write(
        app,
        Stmt::new("UPDATE runs SET status = $1, ended = $2 WHERE id = $3 AND status = 'running'")
            .text(Some(status))
            .int(now())
            .text(Some(run)),
    )
    .await?;
    let said = say_ended(app, user_id, chat, run, status).await;
    // Nothing waits for them now; a row left behind only takes room (an answer to it is refused,
    // its run having ended).
    if let Err(e) = shared::forget_asks(app, run).await {
        eprintln!("llembas-server: forgetting the asks of the run {run}: {e}");
    }
    said
}

/// Runs a statement that writes the runs' rows: on SQLite in order with the events, a moment
/// later ([`Hub::write_later`]: the only process, whose own state says what runs); on
/// PostgreSQL at once, for the other processes.
pub(crate) async fn write(app: &App, stmt: Stmt) -> Result<()> {
    if app.hub.shared() {
        crate::db::execute(&app.pool, stmt.query()).await?;
        Ok(())
    } else {
        app.hub.write_later(stmt)
    }
}

/// Says on the chat's stream that a run ended.
async fn say_ended(app: &App, user_id: i64, chat: &str, run: &str, status: &str) -> Result<()> {
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
    let chat = row_for_run(app, user, id).await?;
    if let Some(r) = &chat.running {
        // Before a session is built: one built beside a run of another process would read
        // its transcript half-written.
        return Err(busy(id, Some(r)));
    }
    let run_id = random_id()?;
    let mut tries = 0;
    let live = loop {
        let live = live(app, user, &chat).await?;
        match app.chats.claim(id, &live, &run_id) {
            Claim::Taken => break live,
            Claim::Busy(r) => return Err(busy(id, Some(&r))),
            // Dropped as idle meanwhile: built again.
            Claim::Gone if tries < 3 => tries += 1,
            Claim::Gone => return Err(Error::Conflict(format!("the chat {id} is busy"))),
        }
    };
    let started = Stmt::new(
        "INSERT INTO runs (id, chat_id, user_id, status, created, owner, lease_until) VALUES ($1, $2, $3, 'running', $4, $5, $6)",
    )
    .text(Some(&run_id))
    .text(Some(id))
    .int(user.id)
    .int(now())
    .text(Some(&app.instance))
    .int(shared::lease_end(app));
    // On SQLite the chat's session (its run slot, taken above) is the one guard, and the row
    // is stored with the run's first event; on PostgreSQL the row is the guard across
    // processes (`runs_one_running`), written at once.
    let started = if app.hub.shared() {
        crate::db::execute(&app.pool, started.query())
            .await
            .map(drop)
    } else {
        app.hub
            .write_later(started)
            .map_err(|e| sqlx::Error::Protocol(e.to_string()))
    };
    if let Err(e) = started {
        *live
            .run
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        // One running run a chat (`runs_one_running`): another process runs this one.
        if let sqlx::Error::Database(d) = &e
            && d.is_unique_violation()
        {
            return Err(busy(id, None));
        }
        return Err(e.into());
    }
    app.hub
        .append(
            user.id,
            id,
            Some(&run_id),
            json!({"type": "run_started", "run": run_id}),
        )
        .await?;
    let sent = live.ctl.submit(Op::Prompt {
        text: text.to_owned(),
        origin: Origin::Person,
        images: Vec::new(),
    });
    if !sent {
        end_run(app, user.id, id, &run_id, "failed").await?;
        return Err(Error::Conflict(format!("the chat {id} has stopped")));
    }
    if app.is_stopping() {
        // The shutdown began after the check above: it may have missed this run.
        live.ctl.submit(Op::Cancel);
    }
    Ok(run_id)
}

/// At shutdown: cancels every run going on here, waits for each to end (its tools' calls get
/// their results, its turn is closed in the transcript) and marks it interrupted.
pub async fn interrupt_all(app: &Arc<App>) -> Result<Vec<String>> {
    let mut cancelled = Vec::new();
    for l in app.chats.all() {
        if let Some(r) = current(&l.run) {
            l.ctl.submit(Op::Cancel);
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
    app.hub.flush().await;
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
    app.hub.flush().await;
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
    let act = Act::Stop {
        chat: chat.clone(),
        run: id.to_owned(),
        interrupted: false,
    };
    match app.chats.get(&chat) {
        Some(l) if current(&l.run).as_deref() == Some(id) => {
            carry_out(app, &act)?;
            Ok("stopping".into())
        }
        // Another process of the database runs it.
        _ if app.hub.shared() => {
            shared::publish(app, &act).await?;
            Ok("stopping".into())
        }
        _ => Err(Error::Conflict(format!("the run {id} has ended"))),
    }
}

/// Carries out a person's act on a chat whose session is live here (else there is nothing to
/// do: the process that runs it does it).
pub fn carry_out(app: &App, act: &Act) -> Result<()> {
    let Some(live) = app.chats.get(act.chat()) else {
        return Ok(());
    };
    let ctl = match act {
        Act::Stop {
            run, interrupted, ..
        } => {
            if current(&live.run).as_deref() != Some(run.as_str()) {
                return Ok(());
            }
            if *interrupted {
                app.chats.interrupt(run);
            }
            Op::Cancel
        }
        Act::Answer {
            call_id,
            answer,
            note,
            ..
        } => Op::Answer {
            call_id: call_id.clone(),
            answer: answer_of(answer, note.clone())?,
        },
        // Read from the database first: `shared::take_reply`.
        Act::Reply { .. } => return Ok(()),
        Act::Mode { mode, .. } => Op::SetMode {
            mode: mode
                .parse::<Mode>()
                .map_err(|e| Error::BadRequest(e.to_string()))?,
        },
    };
    if live.ctl.submit(ctl) {
        Ok(())
    } else {
        Err(Error::Conflict(format!(
            "the chat {} has stopped",
            act.chat()
        )))
    }
}

/// A permission answer as the API spells it.
fn answer_of(answer: &str, note: Option<String>) -> Result<Answer> {
    match answer {
        "yes" => Ok(Answer::Once),
        "always" => Ok(Answer::Always),
        "no" => Ok(Answer::Deny { feedback: note }),
        other => Err(Error::BadRequest(format!(
            "unknown answer {other:?}: use yes, always or no"
        ))),
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
    answer_of(answer, None)?;
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
    let here = app.chats.get(&chat).is_some();
    let elsewhere = !here && app.hub.shared() && asked_by_a_running_run(app, id).await?;
    if !here && !elsewhere {
        return Err(Error::Conflict(format!(
            "the run the approval {id} belongs to has ended"
        )));
    }
    let done = sqlx::query("UPDATE approvals SET answered = 1 WHERE id = $1 AND answered = 0")
        .bind(id)
        .execute(&app.pool)
        .await?;
    if done.rows_affected() == 0 {
        return Err(Error::Conflict(format!(
            "the approval {id} was answered already"
        )));
    }
    let act = Act::Answer {
        chat,
        call_id,
        answer: answer.to_owned(),
        note,
    };
    if here {
        carry_out(app, &act)
            .map_err(|_| Error::Conflict(format!("the run the approval {id} belongs to has ended")))
    } else {
        shared::publish(app, &act).await
    }
}

/// Whether the run that asked approval `id` is running (in some process of the database).
async fn asked_by_a_running_run(app: &App, id: &str) -> Result<bool> {
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM approvals a JOIN runs r ON r.id = a.run_id WHERE a.id = $1 AND r.status = 'running'",
    )
    .bind(id)
    .fetch_one(&app.pool)
    .await?;
    Ok(n > 0)
}

/// Runs a dead process left "running" are marked interrupted, said on their chats' streams, and
/// their transcripts closed (every call gets its result) by resuming each once. On SQLite (one
/// process) that is every run still "running" at start; on PostgreSQL, the runs whose lease ran
/// out (their process stopped renewing it), looked for at start and then every third of a lease.
/// Answers how many this process took over.
pub async fn recover(app: &Arc<App>) -> Result<usize> {
    const RUNNING: &str = "SELECT r.id, r.chat_id, r.user_id, u.username FROM runs r JOIN users u ON u.id = r.user_id WHERE r.status = 'running'";
    let rows: Vec<(String, String, i64, String)> = if app.hub.shared() {
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "{RUNNING} AND (r.lease_until IS NULL OR r.lease_until < $1)"
        )))
        .bind(now())
        .fetch_all(&app.pool)
        .await?
    } else {
        sqlx::query_as(RUNNING).fetch_all(&app.pool).await?
    };
    let mut n = 0;
    for (run, chat, user_id, username) in rows {
        // Taken with the lease's condition again: of two processes looking, one takes it.
        let taken = sqlx::query(
            "UPDATE runs SET status = 'interrupted', ended = $1 WHERE id = $2 AND status = 'running' AND (lease_until IS NULL OR lease_until < $1 OR $3 = 0)",
        )
        .bind(now())
        .bind(&run)
        .bind(i64::from(app.hub.shared()))
        .execute(&app.pool)
        .await?;
        if taken.rows_affected() == 0 {
            continue;
        }
        n += 1;
        let user = User {
            id: user_id,
            username,
            role: crate::auth::Role::User,
        };
        // The transcript is closed before the end is said: a page told of it reads it whole.
        if let Err(e) = close_transcript(app, &user, &chat, &run).await {
            eprintln!("llembas-server: chat {chat}: closing the interrupted turn: {e}");
        }
        say_ended(app, user_id, &chat, &run, "interrupted").await?;
    }
    Ok(n)
}

/// Resumes a chat whose run `run` a dead process cut short once: what the person saw of the
/// answer being streamed is kept as the model's ([`cut`]), resuming closes the turn (every call
/// gets its result), running until idle writes that down.
async fn close_transcript(app: &Arc<App>, user: &User, chat: &str, run: &str) -> Result<()> {
    let row = chat_row(&app.pool, user, chat).await?;
    let Some(meta) = find_meta(&app.pool, &app.transcripts, user.id, chat).await? else {
        return Ok(());
    };
    let mut entries = load_entries(&app.pool, &app.transcripts, user.id, chat).await?;
    let shown = cut::shown_answer(&app.pool, chat, run).await?;
    if let Some(kept) = cut::kept_answer(&entries, &shown) {
        let store = SqlStore::new(app.pool.clone(), app.transcripts.clone(), user.id);
        harness_agent::SessionStore::append(&store, chat, std::slice::from_ref(&kept))
            .map_err(Error::Stored)?;
        entries.push(kept);
    }
    let mode = row.mode.parse::<Mode>().unwrap_or(Mode::Manual);
    let link = crate::python::PageLink::new(app, user.id, Some(chat), false);
    let narrower = crate::world::chat_grants(&app.pool, chat).await?;
    let spawned = builder(app, user, mode, &row.model, link, &narrower)
        .await?
        .resume(meta, entries)
        .one_shot(None)
        .spawn()?;
    spawned.run.finished().await?.result?;
    Ok(())
}

/// The shared capacity gate of the process's chats.
pub fn capacity() -> Result<Arc<CapacityGate>> {
    Ok(Arc::new(CapacityGate::new()?))
}

/// Changes the model of the user's chat `id` (one the server lets users use); refused while a
/// run goes on. Its idle session is built again for the next message ([`Live::made`]).
pub async fn set_model(app: &Arc<App>, user: &User, id: &str, model: &str) -> Result<()> {
    let row = chat_row(&app.pool, user, id).await?;
    if let Some(run) = row.running {
        return Err(Error::Conflict(format!(
            "the chat {id} is busy with run {run}: change its model after its end"
        )));
    }
    let configured = model_settings(app)?
        .model_id(&harness_model::CancellationToken::new())
        .await
        .map_err(|e| Error::Model(e.to_string()))?;
    let chosen = crate::admin::model_for(&app.pool, Some(model), &configured).await?;
    sqlx::query("UPDATE chats SET model = $1 WHERE id = $2 AND user_id = $3")
        .bind(&chosen)
        .bind(id)
        .bind(user.id)
        .execute(&app.pool)
        .await?;
    Ok(())
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
    let act = Act::Mode {
        chat: id.to_owned(),
        mode: mode.as_str().to_owned(),
    };
    // A session here switches at once; on a shared database, one in another process too.
    let _ = carry_out(app, &act);
    shared::publish(app, &act).await
}
