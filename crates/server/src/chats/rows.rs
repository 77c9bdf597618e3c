//! The chats' rows: read one, listed, and whether a chat is busy.

use serde::Serialize;

use super::hub;
use crate::App;
use crate::auth::User;
use crate::db::Db;
use crate::error::{Error, Result};

/// The refusal of a message to a chat that runs already (`run`, when it is known).
pub(super) fn busy(chat: &str, run: Option<&str>) -> Error {
    let run = run.map_or_else(|| "a run".to_owned(), |r| format!("run {r}"));
    Error::Conflict(format!(
        "the chat {chat} is busy with {run}: stop it or wait for its end"
    ))
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
pub(super) async fn row_for_run(app: &App, user: &User, id: &str) -> Result<ChatRow> {
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
