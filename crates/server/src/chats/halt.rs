//! An account that can no longer sign in (disabled, or sent back to `pending`) runs nothing:
//! each of its runs going on, here or in another process of the database, is cancelled at once
//! as a stop is (its model request and tools end, every open call gets its result) and marked
//! `interrupted`.

use std::sync::Arc;

use super::live::current;
use super::{Act, carry_out, shared};
use crate::App;
use crate::error::Result;

/// Cancels every run of `user_id` going on; answers how many there were. Each is marked
/// `interrupted` when its turn has ended.
pub async fn halt_user(app: &Arc<App>, user_id: i64) -> Result<usize> {
    app.hub.flush().await;
    let runs: Vec<(String, String)> =
        sqlx::query_as("SELECT id, chat_id FROM runs WHERE user_id = $1 AND status = 'running'")
            .bind(user_id)
            .fetch_all(&app.pool)
            .await?;
    for (run, chat) in &runs {
        let act = Act::Stop {
            chat: chat.clone(),
            run: run.clone(),
            interrupted: true,
        };
        let here = app
            .chats
            .get(chat)
            .is_some_and(|l| current(&l.run).as_deref() == Some(run.as_str()));
        if here {
            carry_out(app, &act)?;
        } else {
            // Another process of the database runs it (on SQLite: it has just ended).
            shared::publish(app, &act).await?;
        }
    }
    Ok(runs.len())
}
