//! A run's events into the log: a spawned session kept as the chat's live one, each of its
//! events stored and sent (with the ask or approval a page answers it by), and a run's end said.

use std::sync::{Arc, Mutex};

use harness_agent::{CoreEvent, Event, Op, Spawned, WeakSession};
use harness_core::protocol::TurnEnd;
use serde_json::{Value, json};

use super::live::current;
use super::{Live, drop_idle_later, record_ask, shared};
use crate::App;
use crate::db::{Stmt, now, random_id};
use crate::error::{Error, Result};

/// Keeps a spawned session as the chat's live one and pumps its events into the log.
pub(super) fn drive(
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
            tracing::error!("chat {chat2}: {e}");
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
                    tracing::error!("chat {chat2}: {e}");
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
                tracing::error!("chat {chat_id}: {e}");
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

/// Stores and sends one event of the chat's session (with what a page answers it by), and ends
/// the run when its turn ended.
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
    let mut value = serde_json::to_value(&o).map_err(|e| Error::Stored(e.to_string()))?;
    // What a page is asked to answer (on a shared database recorded before the page hears of it).
    if let Some((ask, kind)) = ask_of(app, user_id, chat, ctl, &o)? {
        // What the page answers a question or a show with (`POST /api/questions/{ask}`).
        if let Some(obj) = value.as_object_mut() {
            obj.insert("ask".into(), json!(ask));
        }
        if let (Some(id), Some(kind)) = (ask, kind) {
            record_ask(app, &id, user_id, chat, run_id.as_deref(), kind).await?;
        }
    }
    if let Event::Core(CoreEvent::ToolCallAsked { call_id, .. }) = &o {
        let id = record_approval(app, user_id, chat, run_id.as_deref(), call_id).await?;
        if let Some(obj) = value.as_object_mut() {
            obj.insert("approval".into(), Value::String(id));
        }
    }
    app.hub
        .append(user_id, chat, run_id.as_deref(), value)
        .await?;
    if let (Event::Core(CoreEvent::TurnEnded { reason }), Some(r)) = (&o, &run_id) {
        turn_ended(app, user_id, chat, run, r, reason).await?;
    }
    Ok(())
}

/// The ask a page answers a `question` or a `show` by: `None` for any other event; for these,
/// the ask's id (`None` when no page can answer it) and its kind when one was made.
type Asked = Option<(Option<String>, Option<crate::page::AskKind>)>;

/// The ask of a `question` (the page answers it, `POST /api/questions/{ask}`, whenever one is
/// open) or of a `show` (the page's viewer opens it and says so, `POST /api/shows/{ask}`; with no
/// page open, the call answers at once that the viewer is gone).
fn ask_of(app: &App, user_id: i64, chat: &str, ctl: &WeakSession, o: &Event) -> Result<Asked> {
    let (call_id, kind) = match o {
        Event::Question { call_id, .. } => (call_id, crate::page::AskKind::Question),
        Event::Show { call_id, .. } => (call_id, crate::page::AskKind::Show),
        _ => return Ok(None),
    };
    let Some(ctl) = ctl.upgrade() else {
        return Ok(Some((None, None)));
    };
    if matches!(kind, crate::page::AskKind::Show) && !app.pages.attached(chat) {
        ctl.submit(Op::Reply {
            call_id: call_id.clone(),
            text: None,
        });
        return Ok(Some((None, None)));
    }
    let ask = app.pages.ask(
        user_id,
        chat,
        call_id,
        kind,
        crate::page::Answerer::Session(ctl),
    )?;
    Ok(Some((Some(ask), Some(kind))))
}

/// Records the approval a permission request of the run waits for (a local chat's, or a device
/// chat's); answers its id.
pub async fn record_approval(
    app: &App,
    user_id: i64,
    chat: &str,
    run_id: Option<&str>,
    call_id: &str,
) -> Result<String> {
    let id = random_id()?;
    crate::db::execute(
        &app.pool,
        sqlx::query(
            "INSERT INTO approvals (id, user_id, chat_id, run_id, call_id) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&id)
        .bind(user_id)
        .bind(chat)
        .bind(run_id)
        .bind(call_id),
    )
    .await?;
    Ok(id)
}

/// The run `r` ended its turn this way: marked so, the chat's run slot freed.
async fn turn_ended(
    app: &Arc<App>,
    user_id: i64,
    chat: &str,
    run: &Mutex<Option<String>>,
    r: &str,
    reason: &TurnEnd,
) -> Result<()> {
    // A run the server's shutdown cancelled, or whose account can no longer sign in, was
    // interrupted, not stopped by its user.
    let halted = app.chats.take_interrupted(r);
    let status = if (app.is_stopping() || halted) && matches!(reason, TurnEnd::Cancelled) {
        "interrupted"
    } else {
        status_of(reason)
    };
    // The slot is freed before the stream says the run ended: a client that sends its next
    // message on seeing `run_ended` finds the chat free (it was refused as busy now and then).
    let ended = end_run_then(app, (user_id, chat, r, status), || {
        *run.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    })
    .await;
    app.pages.forget(chat);
    app.chats.ended.notify_waiters();
    drop_idle_later(app, chat);
    ended
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
    end_run_then(app, (user_id, chat, run, status), || {}).await
}

/// Marks a run ended, then does `freed` (the run's slot made free), then says so on the stream:
/// whoever reads the end finds the row and the slot free.
async fn end_run_then(
    app: &App,
    (user_id, chat, run, status): (i64, &str, &str, &str),
    freed: impl FnOnce(),
) -> Result<()> {
    let marked = write(
        app,
        Stmt::new("UPDATE runs SET status = $1, ended = $2 WHERE id = $3 AND status = 'running'")
            .text(Some(status))
            .int(now())
            .text(Some(run)),
    )
    .await;
    freed();
    marked?;
    let said = say_ended(app, user_id, chat, run, status).await;
    // Nothing waits for them now; a row left behind only takes room (an answer to it is refused,
    // its run having ended).
    if let Err(e) = shared::forget_asks(app, run).await {
        tracing::warn!("forgetting the asks of the run {run}: {e}");
    }
    said
}

/// Runs a statement that writes the runs' rows: on SQLite in order with the events, a moment
/// later ([`super::Hub::write_later`]: the only process, whose own state says what runs); on
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
pub(super) async fn say_ended(
    app: &App,
    user_id: i64,
    chat: &str,
    run: &str,
    status: &str,
) -> Result<()> {
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
