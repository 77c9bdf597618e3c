//! How many model requests the server's chats make at once, and in what order they wait.
//!
//! The model server's slots in a process: the admin's figure (`PUT /api/admin/capacity`), else
//! the endpoint's `capacity` of the `--config` file, else [`DEFAULT_SLOTS`] — llama-server's
//! default number of parallel slots. When every slot is taken, the requests wait in line, and
//! a free slot goes to the user holding the fewest slots, among equals to the one served
//! longest ago, and within a user first come, first served: one user's burst of chats cannot
//! keep another user's one question waiting behind all of it.
//!
//! - `GET /api/admin/capacity` → `{"slots", "set", "default"}`: the slots in use, the admin's
//!   figure (`null`: none), the figure without it.
//! - `PUT /api/admin/capacity {"slots": N | null}` → as `GET` (400 outside 1 to
//!   [`MAX_SLOTS`]; 403 for a user who is not an admin).

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::App;
use crate::auth::{Authed, Body, require_admin};
use crate::error::{Error, Result};

/// Model requests at once when neither the admin nor the endpoint says: llama-server's default
/// (`--parallel`, 4 slots).
pub const DEFAULT_SLOTS: u32 = 4;

/// The largest figure an admin may set.
pub const MAX_SLOTS: u32 = 256;

/// The settings key of the admin's figure.
const KEY: &str = "model_slots";

/// The routes of this module.
pub fn routes() -> Router<Arc<App>> {
    Router::new().route("/api/admin/capacity", get(get_slots).put(put_slots))
}

/// The figure without the admin's: the endpoint's `capacity`, else [`DEFAULT_SLOTS`].
fn default_slots(app: &App) -> u32 {
    app.model
        .as_ref()
        .and_then(|m| m.capacity)
        .unwrap_or(DEFAULT_SLOTS)
}

/// The admin's figure, if one is set.
async fn set_slots(app: &App) -> Result<Option<u32>> {
    let stored: Option<String> = sqlx::query_scalar("SELECT value FROM settings WHERE key = $1")
        .bind(KEY)
        .fetch_optional(&app.pool)
        .await?;
    stored
        .map(|v| {
            v.parse::<u32>()
                .map_err(|e| Error::Stored(format!("the setting {KEY} {v:?}: {e}")))
        })
        .transpose()
}

/// Gives the model server of a new model link its slots.
pub fn fix(app: &App, link: &dyn harness_agent::ModelLink) {
    let slots = app.slots.load(std::sync::atomic::Ordering::SeqCst);
    app.capacity.fix_slots(&link.server(), Some(slots));
}

/// Puts the requests of the chat `chat` of `user_id` in that user's line.
pub fn line_up(app: &App, chat: &str, user_id: i64) {
    app.capacity.set_group(chat, Some(&user_id.to_string()));
}

/// Reads the admin's figure again and gives it to the model servers known here (another process
/// of the database may have changed it).
pub async fn refresh(app: &App) -> Result<u32> {
    let slots = set_slots(app).await?.unwrap_or_else(|| default_slots(app));
    app.slots.store(slots, std::sync::atomic::Ordering::SeqCst);
    let links: Vec<_> = app
        .links
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .values()
        .cloned()
        .collect();
    for link in links {
        app.capacity.fix_slots(
            &harness_agent::ModelLink::server(link.as_ref()),
            Some(slots),
        );
    }
    Ok(slots)
}

async fn answer(app: &App) -> Result<Json<Value>> {
    Ok(Json(json!({
        "slots": app.slots.load(std::sync::atomic::Ordering::SeqCst),
        "set": set_slots(app).await?,
        "default": default_slots(app),
    })))
}

async fn get_slots(State(app): State<Arc<App>>, Authed(user): Authed) -> Result<Json<Value>> {
    require_admin(&user)?;
    answer(&app).await
}

#[derive(Deserialize)]
struct Slots {
    slots: Option<u32>,
}

async fn put_slots(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Body(body): Body<Slots>,
) -> Result<Json<Value>> {
    require_admin(&user)?;
    match body.slots {
        None => {
            sqlx::query("DELETE FROM settings WHERE key = $1")
                .bind(KEY)
                .execute(&app.pool)
                .await?;
        }
        Some(n) if !(1..=MAX_SLOTS).contains(&n) => {
            return Err(Error::BadRequest(format!(
                "{n} slots: give 1 to {MAX_SLOTS} model requests at once (or null for the default)"
            )));
        }
        Some(n) => {
            sqlx::query(
                "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            )
            .bind(KEY)
            .bind(n.to_string())
            .execute(&app.pool)
            .await?;
        }
    }
    refresh(&app).await?;
    answer(&app).await
}
