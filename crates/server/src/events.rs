//! The stored events a stream or a page reads back: the user's after an id, between two ids, a
//! chat's in order; each row read made a [`Stored`] by one builder (`stored`).

use serde::Serialize;
use serde_json::Value;

use crate::db::Db;
use crate::error::{Error, Result};

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
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, chat_id, run_id, seq, data FROM events WHERE user_id = $1 AND id > $2 ORDER BY id LIMIT $3",
    )
    .bind(user_id)
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.into_iter().map(|r| stored(user_id, r)).collect()
}

/// The user's events with ids from `first` to `last`, in order.
pub(crate) async fn events_between(
    pool: &Db,
    user_id: i64,
    first: i64,
    last: i64,
) -> Result<Vec<Stored>> {
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, chat_id, run_id, seq, data FROM events WHERE user_id = $1 AND id >= $2 AND id <= $3 ORDER BY id",
    )
    .bind(user_id)
    .bind(first)
    .bind(last)
    .fetch_all(pool)
    .await?;
    rows.into_iter().map(|r| stored(user_id, r)).collect()
}

/// A stored event's row as read: `id, chat_id, run_id, seq, data`.
pub(crate) type Row = (i64, String, Option<String>, i64, String);

/// The event of `user_id` a row holds (its `data` parsed); a machine turn stored before its
/// job marks were (`jobs`, [`crate::marks`]) is given them here.
pub(crate) fn stored(user_id: i64, (id, chat, run, seq, data): Row) -> Result<Stored> {
    let mut event =
        serde_json::from_str(&data).map_err(|e| Error::Stored(format!("event {id}: {e}")))?;
    crate::marks::add_job_marks(&mut event);
    Ok(Stored {
        id,
        user_id,
        chat,
        run,
        seq,
        event,
    })
}

/// A chat's events, in order.
pub async fn chat_events(pool: &Db, user_id: i64, chat: &str) -> Result<Vec<Stored>> {
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, chat_id, run_id, seq, data FROM events WHERE user_id = $1 AND chat_id = $2 ORDER BY seq",
    )
    .bind(user_id)
    .bind(chat)
    .fetch_all(pool)
    .await?;
    rows.into_iter().map(|r| stored(user_id, r)).collect()
}
