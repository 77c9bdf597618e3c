//! What the chat list needs besides the core API: rename and delete a chat. Both authorise
//! through the signed-in user (another user's chat is "no such chat") and refuse a chat whose
//! run is going on.
//!
//! - `PATCH /api/chats/{id}` `{"title"}` → `{"id", "title"}`; 400 for an empty or over-long
//!   title, 404, 409 while a run goes on.
//! - `DELETE /api/chats/{id}` → `{"deleted": id}`; 404, 409 while a run goes on. Its
//!   transcript, events, runs and approvals go with it.
//! - `POST /api/chats/{id}/mode` `{"mode": "manual|edit|auto|plan"}` → `{"id", "mode"}`; 400
//!   for another mode, 404. A session running switches at once (a `mode_changed` event).
//! - `POST /api/chats/{id}/model` `{"model"}` → `{"id", "model", "window"}`; 400 for an empty name, 403
//!   for a model the server does not let users use, 404, 409 while a run goes on. The chat's
//!   next message runs on it.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::{patch, post};
use harness_core::protocol::Mode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::App;
use crate::auth::{Authed, Body};
use crate::chats::{chat_row, set_mode, set_model};
use crate::error::{Error, Result};

/// The longest title, in characters (as long as a title the first message gives).
const MAX_TITLE_CHARS: usize = 80;

/// The routes.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/chats/{id}", patch(rename).delete(delete))
        .route("/api/chats/{id}/mode", post(mode))
        .route("/api/chats/{id}/model", post(model))
}

#[derive(Deserialize)]
struct ModeBody {
    mode: String,
}

async fn mode(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<String>,
    Body(body): Body<ModeBody>,
) -> Result<Json<Value>> {
    let mode = body
        .mode
        .parse::<Mode>()
        .map_err(|e| Error::BadRequest(e.to_string()))?;
    set_mode(&app, &user, &id, mode).await?;
    crate::device_chats::set_mode(&app, &id, mode).await?;
    Ok(Json(json!({"id": id, "mode": mode.as_str()})))
}

#[derive(Deserialize)]
struct ModelBody {
    model: String,
}

async fn model(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<String>,
    Body(body): Body<ModelBody>,
) -> Result<Json<Value>> {
    let model = body.model.trim();
    if model.is_empty() {
        return Err(Error::BadRequest("name the model".into()));
    }
    set_model(&app, &user, &id, model).await?;
    let window = crate::history::window(app.model.as_ref(), model)?;
    Ok(Json(json!({"id": id, "model": model, "window": window})))
}

#[derive(Deserialize)]
struct Rename {
    title: String,
}

async fn rename(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<String>,
    Body(body): Body<Rename>,
) -> Result<Json<Value>> {
    let title = body.title.trim();
    if title.is_empty() {
        return Err(Error::BadRequest("the title is empty".into()));
    }
    if title.chars().count() > MAX_TITLE_CHARS || title.contains('\n') {
        return Err(Error::BadRequest(format!(
            "the title must be one line of at most {MAX_TITLE_CHARS} characters"
        )));
    }
    let row = chat_row(&app.pool, &user, &id).await?;
    if let Some(run) = row.running {
        return Err(Error::Conflict(format!(
            "the chat {id} is busy with run {run}: rename it after its end"
        )));
    }
    sqlx::query("UPDATE agent_sessions SET title = $1 WHERE id = $2 AND user_id = $3")
        .bind(title)
        .bind(&id)
        .bind(user.id)
        .execute(&app.pool)
        .await?;
    Ok(Json(json!({"id": id, "title": title})))
}

async fn delete(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    let row = chat_row(&app.pool, &user, &id).await?;
    if let Some(run) = row.running {
        return Err(Error::Conflict(format!(
            "the chat {id} is busy with run {run}: stop it before deleting the chat"
        )));
    }
    // The chat's row, runs, events and approvals go with its session (ON DELETE CASCADE).
    sqlx::query("DELETE FROM agent_sessions WHERE id = $1 AND user_id = $2")
        .bind(&id)
        .bind(user.id)
        .execute(&app.pool)
        .await?;
    // Nothing of it stays in memory: its session (idle: no run goes on) and its numbers.
    app.chats.drop_idle(&id, false);
    app.hub.forget_chat(&id);
    Ok(Json(json!({"deleted": id})))
}
