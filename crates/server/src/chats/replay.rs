//! Where an event stream starts: a stream replays only what its `Last-Event-ID` (or `?after=`)
//! asks for, and at most [`REPLAY_MAX`] events of it. A stream that asks for nothing starts at
//! the user's newest event (their history is read with the chat, `GET /api/chats/{id}`); one
//! that asks for more than the bound is told to reload instead (a `stream_reset` event) and
//! starts at the newest.

use crate::App;
use crate::error::Result;

/// The most stored events a stream replays when it opens.
pub const REPLAY_MAX: i64 = 1_000;

/// Where a stream starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Start {
    /// The stream sends the user's events after this id.
    pub after: i64,
    /// The stream asked for more than [`REPLAY_MAX`] events: it says so first (`stream_reset`).
    pub reset: bool,
}

/// The id of the user's newest stored event (0: none), once every event given is stored.
pub async fn newest_event(app: &App, user_id: i64) -> Result<i64> {
    app.hub.flush().await;
    let newest: Option<i64> = sqlx::query_scalar("SELECT MAX(id) FROM events WHERE user_id = $1")
        .bind(user_id)
        .fetch_one(&app.pool)
        .await?;
    Ok(newest.unwrap_or(0))
}

/// Where a stream of `user_id` that asked for the events after `asked` starts.
pub async fn start(app: &App, user_id: i64, asked: Option<i64>) -> Result<Start> {
    let newest = newest_event(app, user_id).await?;
    let Some(after) = asked.filter(|a| *a < newest) else {
        return Ok(Start {
            after: asked.unwrap_or(newest).max(0),
            reset: false,
        });
    };
    // The (REPLAY_MAX + 1)th newest event after the one asked for: there are more than the bound.
    let beyond: Option<i64> = sqlx::query_scalar(
        "SELECT id FROM events WHERE user_id = $1 AND id > $2 ORDER BY id DESC LIMIT 1 OFFSET $3",
    )
    .bind(user_id)
    .bind(after)
    .bind(REPLAY_MAX)
    .fetch_optional(&app.pool)
    .await?;
    Ok(match beyond {
        Some(_) => Start {
            after: newest,
            reset: true,
        },
        None => Start {
            after,
            reset: false,
        },
    })
}
