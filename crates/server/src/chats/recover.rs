//! Runs a dead process left "running": marked interrupted, their transcripts closed.

use std::sync::Arc;

use harness_core::protocol::Mode;

use super::build::builder;
use super::cut;
use super::pump::say_ended;
use super::rows::chat_row;
use crate::App;
use crate::auth::User;
use crate::db::now;
use crate::error::{Error, Result};
use crate::store::{SqlStore, find_meta, load_entries};

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
            tracing::error!("chat {chat}: closing the interrupted turn: {e}");
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
            .map_err(|e| Error::Stored(e.to_string()))?;
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
