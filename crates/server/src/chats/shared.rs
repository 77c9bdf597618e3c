//! Several server processes on one PostgreSQL database: each run belongs to the process that
//! runs it (a lease in its `runs` row, renewed while it runs, taken over as interrupted once it
//! runs out), and what one process must tell the others goes by PostgreSQL's `LISTEN/NOTIFY`:
//! the events it stored (so a page connected to another process sees them) and the person's
//! acts on a chat another process runs (stop, an approval's answer, a page's answer, a mode).
//! Nothing else runs beside the database. What a run waits for from a page of its chat (a
//! `question`'s answer, `show`, `python`) has a row in the `asks` table, which takes the first
//! answer whichever process it reaches (see [`crate::page`]).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::postgres::PgListener;

use super::hub::EVENTS_CHANNEL;
use crate::App;
use crate::db::now;
use crate::error::{Error, Result};
use crate::page::{AskKind, Settled};
use crate::streams::REVOKED_CHANNEL;

/// The channel of the person's acts on chats: [`Act`] as JSON.
pub const ACTS_CHANNEL: &str = "llembas_acts";

/// A person's act on a chat, for the process whose session of the chat is live.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "act", rename_all = "snake_case")]
pub enum Act {
    /// Stop a run.
    Stop {
        /// The chat.
        chat: String,
        /// The run.
        run: String,
        /// Marked `interrupted`, not `stopped`: its account can no longer sign in.
        #[serde(default)]
        interrupted: bool,
    },
    /// Answer a permission question.
    Answer {
        /// The chat.
        chat: String,
        /// The call asked about.
        call_id: String,
        /// `yes`, `always` or `no`.
        answer: String,
        /// What the person said with a `no`.
        note: Option<String>,
    },
    /// A page answered an ask of the chat's run: the answer is in the ask's row of `asks`
    /// (a notice holds at most 8,000 bytes; a `python` run's result may be longer).
    Reply {
        /// The chat.
        chat: String,
        /// The ask.
        ask: String,
    },
    /// The chat's mode changed.
    Mode {
        /// The chat.
        chat: String,
        /// The mode's name.
        mode: String,
    },
}

impl Act {
    /// The chat it is for.
    pub fn chat(&self) -> &str {
        match self {
            Act::Stop { chat, .. }
            | Act::Answer { chat, .. }
            | Act::Reply { chat, .. }
            | Act::Mode { chat, .. } => chat,
        }
    }
}

/// Tells every process of the database of `act` (the one whose session of its chat is live
/// carries it out). On SQLite there is no other process: nothing is sent.
pub async fn publish(app: &App, act: &Act) -> Result<()> {
    if !app.hub.shared() {
        return Ok(());
    }
    let text = serde_json::to_string(act).map_err(|e| Error::Stored(e.to_string()))?;
    // `INSTANCE ACT`: this process carries out its own acts itself, not once more on its notice.
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(ACTS_CHANNEL)
        .bind(format!("{} {text}", app.instance))
        .execute(&app.pool)
        .await?;
    Ok(())
}

/// Follows the other processes' notices on the database at `url` until the server closes: their
/// events to this process's streams, the acts on chats live here to their sessions. A lost
/// connection is made again (the streams read what they missed from the database at their next
/// wake-up).
pub async fn listen(app: Arc<App>, url: String) -> Result<()> {
    let mut listener = PgListener::connect(&url)
        .await
        .map_err(|e| Error::Database(format!("{}: {e}", crate::db::shown_url(&url))))?;
    listener
        .listen_all([EVENTS_CHANNEL, ACTS_CHANNEL, REVOKED_CHANNEL])
        .await?;
    settle_asks(&app);
    let mut closed = app.closed.subscribe();
    tokio::spawn(async move {
        loop {
            let got = tokio::select! {
                got = listener.recv() => got,
                _ = closed.wait_for(|c| *c) => return,
            };
            let notice = match got {
                Ok(n) => n,
                Err(e) => {
                    tracing::error!("database notices: {e}");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    continue;
                }
            };
            let result = match notice.channel() {
                EVENTS_CHANNEL => events_notice(&app, notice.payload()).await,
                REVOKED_CHANNEL => revoked_notice(&app, notice.payload()),
                _ => acts_notice(&app, notice.payload()).await,
            };
            if let Err(e) = result {
                tracing::error!("database notices: {e}");
            }
        }
    });
    Ok(())
}

/// `INSTANCE USER`: another process changed the user's sign-ins.
fn revoked_notice(app: &App, payload: &str) -> Result<()> {
    let user = payload
        .split_once(' ')
        .filter(|(from, _)| *from != app.instance)
        .map(|(_, user)| user.parse::<i64>())
        .transpose()
        .map_err(|_| Error::Stored(format!("a revocation notice {payload:?}")))?;
    if let Some(user) = user {
        app.streams.pulse(user);
    }
    Ok(())
}

/// `INSTANCE ACT`: a person's act on a chat, carried out here when another process sent it.
async fn acts_notice(app: &App, payload: &str) -> Result<()> {
    let (from, act) = payload
        .split_once(' ')
        .ok_or_else(|| Error::Stored(format!("an act notice {payload:?}")))?;
    if from == app.instance {
        return Ok(());
    }
    let act = serde_json::from_str::<Act>(act)
        .map_err(|e| Error::Stored(format!("an act on a chat: {e}")))?;
    match &act {
        Act::Reply { ask, .. } => take_reply(app, ask).await,
        _ => super::carry_out(app, &act),
    }
}

/// Answers the user's ask `id` of `kind` with what the page sent (`None`: nothing, as a viewer
/// that did not open). Another user's ask, one answered already and one whose run ended are
/// "no such" (404). On a shared database the ask's row takes the first answer, whichever
/// process it reaches, and the process whose run waits for it is told.
pub async fn answer_ask(
    app: &App,
    user_id: i64,
    id: &str,
    kind: AskKind,
    value: Option<Value>,
) -> Result<()> {
    if !app.hub.shared() {
        return app.pages.answer(user_id, id, kind, value);
    }
    let text = serde_json::to_string(&value).map_err(|e| Error::Stored(e.to_string()))?;
    let chat: Option<String> = sqlx::query_scalar(
        "UPDATE asks SET answered = 1, answer = $1 \
         WHERE id = $2 AND user_id = $3 AND kind = $4 AND answered = 0 \
         AND run_id IN (SELECT id FROM runs WHERE status = 'running') RETURNING chat_id",
    )
    .bind(text)
    .bind(id)
    .bind(user_id)
    .bind(kind.name())
    .fetch_optional(&app.pool)
    .await?;
    let Some(chat) = chat else {
        return Err(crate::page::not_waiting(kind, id));
    };
    if app.pages.waits(id) {
        return app.pages.answer(user_id, id, kind, value);
    }
    let reply = Act::Reply {
        chat,
        ask: id.to_owned(),
    };
    publish(app, &reply).await
}

/// Another process took a page's answer to the ask `ask`: if it waits here, the answer is read
/// from its row and given to it.
async fn take_reply(app: &App, ask: &str) -> Result<()> {
    if !app.pages.waits(ask) {
        return Ok(());
    }
    let row: Option<(i64, String, Option<String>)> =
        sqlx::query_as("SELECT user_id, kind, answer FROM asks WHERE id = $1")
            .bind(ask)
            .fetch_optional(&app.pool)
            .await?;
    let Some((user_id, kind, Some(answer))) = row else {
        return Ok(());
    };
    let kind = AskKind::named(&kind)
        .ok_or_else(|| Error::Stored(format!("the ask {ask} has an unknown kind {kind:?}")))?;
    let value: Option<Value> = serde_json::from_str(&answer)
        .map_err(|e| Error::Stored(format!("the answer to the ask {ask}: {e}")))?;
    match app.pages.answer(user_id, ask, kind, value) {
        // Answered here meanwhile, for want of a page.
        Err(Error::NotFound(_)) => Ok(()),
        other => other,
    }
}

/// Marks answered in `asks` what this process answers for want of a page (a `show` or a
/// `python` run once no page of its chat is open), then answers it: a late answer through
/// another process is refused as it is here, from before the run goes on.
fn settle_asks(app: &Arc<App>) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Settled>();
    app.pages.on_settle(tx);
    let pool = app.pool.clone();
    tokio::spawn(async move {
        while let Some(settled) = rx.recv().await {
            let marked = sqlx::query("UPDATE asks SET answered = 1 WHERE id = $1")
                .bind(&settled.id)
                .execute(&pool)
                .await;
            if let Err(e) = marked {
                tracing::warn!("marking the ask {} answered: {e}", settled.id);
            }
            settled.answer();
        }
    });
}

/// Forgets the asks of the run `run`, ended (a late answer finds no row: "no such").
pub async fn forget_asks(app: &App, run: &str) -> Result<()> {
    if !app.hub.shared() {
        return Ok(());
    }
    sqlx::query("DELETE FROM asks WHERE run_id = $1")
        .bind(run)
        .execute(&app.pool)
        .await?;
    Ok(())
}

/// `INSTANCE USER FIRST LAST`: another process stored these events of the user.
async fn events_notice(app: &App, payload: &str) -> Result<()> {
    let mut words = payload.split(' ');
    let (Some(from), Some(user), Some(first), Some(last)) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(Error::Stored(format!("an events notice {payload:?}")));
    };
    let parse = |w: &str| {
        w.parse::<i64>()
            .map_err(|_| Error::Stored(format!("an events notice {payload:?}")))
    };
    let (user, first, last) = (parse(user)?, parse(first)?, parse(last)?);
    if from == app.instance || !app.hub.follows(user) {
        return Ok(());
    }
    app.hub
        .deliver(crate::events::events_between(&app.pool, user, first, last).await?);
    Ok(())
}

/// What a renewal also does with the runs this process still holds, given as the server starts
/// (the device chats' runs another process took over are cancelled on their devices).
pub type OnHeld = Arc<
    dyn Fn(
            Arc<App>,
            std::collections::HashSet<String>,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<()>> + Send>>
        + Send
        + Sync,
>;

/// Keeps this process's runs its own: every third of the lease, renews the leases of the runs
/// going on here (a run another process took over meanwhile is cancelled here, and `on_held`
/// hears which it still holds), and, on a shared database, takes over as interrupted the runs
/// whose process stopped renewing them.
pub fn keep_leases(app: Arc<App>, on_held: OnHeld) {
    let every = (app.run_lease / 3).max(std::time::Duration::from_millis(200));
    let mut closed = app.closed.subscribe();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                _ = closed.wait_for(|c| *c) => return,
            }
            if let Err(e) = renew(&app, &on_held).await {
                tracing::error!("renewing the runs' leases: {e}");
            }
            // Another process may have changed the admin's figure of the model's slots.
            if app.hub.shared()
                && let Err(e) = crate::slots::refresh(&app).await
            {
                tracing::warn!("reading the model's slots: {e}");
            }
            if app.hub.shared() && !app.is_stopping() {
                match super::recover(&app).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(
                        "{n} run{} of a process that stopped renewing {} taken over as interrupted",
                        if n == 1 { "" } else { "s" },
                        if n == 1 { "it" } else { "them" },
                    ),
                    Err(e) => tracing::error!("taking over runs: {e}"),
                }
            }
        }
    });
}

/// Whether the run `run` is stored and no longer this process's running run (not: not stored
/// yet, as a run being started is for a moment).
async fn taken_over(app: &App, run: &str) -> Result<bool> {
    let row: Option<(Option<String>, String)> =
        sqlx::query_as("SELECT owner, status FROM runs WHERE id = $1")
            .bind(run)
            .fetch_optional(&app.pool)
            .await?;
    Ok(row.is_some_and(|(owner, status)| {
        status != "running" || owner.as_deref() != Some(app.instance.as_str())
    }))
}

/// The end of a lease taken or renewed now.
pub fn lease_end(app: &App) -> i64 {
    now().saturating_add(i64::try_from(app.run_lease.as_secs()).unwrap_or(i64::MAX))
}

/// Renews the leases of every run going on here at once (one statement, not one a run), then
/// stops those another process took over meanwhile.
async fn renew(app: &Arc<App>, on_held: &OnHeld) -> Result<()> {
    let runs = app.chats.runs();
    // A device chat's run is this process's too: its lease is renewed with the others.
    if runs.is_empty() && !app.device_chats.any_running() {
        return Ok(());
    }
    crate::db::execute(
        &app.pool,
        sqlx::query("UPDATE runs SET lease_until = $1 WHERE owner = $2 AND status = 'running'")
            .bind(lease_end(app))
            .bind(&app.instance),
    )
    .await?;
    let held: std::collections::HashSet<String> =
        sqlx::query_scalar("SELECT id FROM runs WHERE owner = $1 AND status = 'running'")
            .bind(&app.instance)
            .fetch_all(&app.pool)
            .await?
            .into_iter()
            .collect();
    // A device chat's run taken over: cancelled on its device.
    on_held(app.clone(), held.clone()).await?;
    for (chat, run) in runs {
        if !held.contains(&run) && taken_over(app, &run).await? {
            // Another process took it over (this one was away longer than its lease): it must
            // not go on writing beside the one that closed it.
            super::carry_out(
                app,
                &Act::Stop {
                    chat,
                    run,
                    interrupted: false,
                },
            )?;
        }
    }
    Ok(())
}
