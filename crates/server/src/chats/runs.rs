//! A chat's runs: a message starts one, a stop or the server's shutdown cancels it, an approval
//! answers what it waits for.

use std::sync::Arc;

use harness_agent::Op;
use harness_core::protocol::{Answer, Mode, Origin};
use serde_json::json;

use super::build::live;
use super::live::{Claim, current};
use super::pump::end_run;
use super::rows::{busy, chat_row, row_for_run};
use super::{Act, shared};
use crate::App;
use crate::auth::User;
use crate::db::{Stmt, now, random_id};
use crate::error::{Error, Result};

/// Sends a message to the user's chat `id`, with the images of the user's view `images` names:
/// a new run, answered by its id. With `back`, the message replaces an earlier one: the chat
/// goes back to before it first ([`super::rewind`]).
pub async fn send(
    app: &Arc<App>,
    user: &User,
    id: &str,
    text: &str,
    images: &[String],
    back: Option<Back<'_>>,
) -> Result<String> {
    if text.trim().is_empty() {
        return Err(Error::BadRequest("the message is empty".into()));
    }
    app.refuse_when_stopping()?;
    let chat = row_for_run(app, user, id).await?;
    let images = crate::images::read(app, user, images).await?;
    crate::images::check_vision(super::build::model_link(app, &chat.model)?.model(), &images)?;
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
    if let Some(b) = back
        && let Err(e) = super::rewind::back(app, user, id, &live, (b.run, &run_id), b.code).await
    {
        release(&live);
        return Err(e);
    }
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
        release(&live);
        // One running run a chat (`runs_one_running`): another process runs this one.
        if let sqlx::Error::Database(d) = &e
            && d.is_unique_violation()
        {
            return Err(busy(id, None));
        }
        return Err(e.into());
    }
    app.hub
        .append(user.id, id, Some(&run_id), run_started(&run_id, &images))
        .await?;
    let sent = live.ctl.submit(Op::Prompt {
        text: text.to_owned(),
        origin: Origin::Person,
        images: images.iter().map(crate::images::Image::data_url).collect(),
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

/// An earlier message of the person a new one replaces: its run, and whether the files the
/// chat changed from it on are put back.
#[derive(Debug, Clone, Copy)]
pub struct Back<'a> {
    /// The run of the message replaced.
    pub run: &'a str,
    /// Whether the files go back too.
    pub code: bool,
}

/// Frees the chat's run slot a message took and did not start a run in.
fn release(live: &super::Live) {
    *live
        .run
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
}

/// A run's `run_started` event: its id, and the images its message carries (by their paths in
/// the person's view, where the page shows them from).
pub fn run_started(run: &str, images: &[crate::images::Image]) -> serde_json::Value {
    let mut e = json!({"type": "run_started", "run": run});
    if !images.is_empty() {
        e["images"] = json!(images.iter().map(|i| i.path.as_str()).collect::<Vec<_>>());
    }
    e
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
