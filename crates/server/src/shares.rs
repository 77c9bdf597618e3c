//! A chat written out by its owner (issue 34): exported as Markdown or JSON, and shared as a
//! read-only link the owner can end.
//!
//! - `GET /api/chats/{id}/export?format=markdown|json` → the chat as a download, written by
//!   `harness_agent::export` as the terminal's `/export` writes a session (Markdown: the
//!   conversation with each call's result folded; JSON: the transcript with the session's
//!   metadata).
//! - `POST /api/chats/{id}/share` → 201 `{"url": "/shared/TOKEN", "created"}`: a copy of the
//!   conversation as it is now, tool results left out (a reader sees what was said and which
//!   tools ran, never what they read: files and outputs the reader could not otherwise see).
//!   The token (256 random bits) is shown this once; only its hash is kept. Sharing again makes
//!   a new link and ends the old one. `DELETE /api/chats/{id}/share` ends it (404 from then on);
//!   `GET /api/chats/{id}/share` says whether the chat is shared and since when.
//! - `GET /api/shared/{token}` → `{"title", "by", "created", "markdown"}`, with no sign-in: the
//!   page at `/shared/TOKEN` draws it, marked as a shared copy.
//!
//! A chat that runs on a linked device keeps its transcript on the device: it is exported
//! there (`/export` in `llembas`), and answers 409 here.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::App;
use crate::auth::{Authed, User};
use crate::db::{now, random_token, token_hash};
use crate::error::{Error, Result};

/// The routes of this module.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/chats/{id}/export", get(export))
        .route(
            "/api/chats/{id}/share",
            get(shared_since).post(share).delete(unshare),
        )
        .route("/api/shared/{token}", get(read_shared))
}

/// The chat's metadata and transcript, for its owner; a device chat's is on its device.
async fn transcript(
    app: &App,
    user: &User,
    id: &str,
) -> Result<(harness_agent::Meta, Vec<harness_loop::transcript::Entry>)> {
    let row = crate::chats::chat_row(&app.pool, user, id).await?;
    if crate::device_chats::of(app, id).await?.is_some() {
        return Err(Error::Conflict(format!(
            "the chat {id} runs on a linked device, which keeps its transcript: export it there (/export in llembas)"
        )));
    }
    let mut meta = crate::store::find_meta(&app.pool, &app.transcripts, user.id, id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("no chat {id}")))?;
    if meta.title.trim().is_empty() {
        meta.title = row.title;
    }
    let entries = crate::store::load_entries(&app.pool, &app.transcripts, user.id, id).await?;
    Ok((meta, entries))
}

#[derive(Deserialize)]
struct ExportQuery {
    #[serde(default)]
    format: Option<String>,
}

/// `GET /api/chats/{id}/export?format=markdown|json`.
async fn export(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<String>,
    Query(q): Query<ExportQuery>,
) -> Result<Response> {
    let (meta, entries) = transcript(&app, &user, &id).await?;
    let (body, kind, ext) = match q.format.as_deref().unwrap_or("markdown") {
        "markdown" | "md" => (
            harness_agent::export::markdown(&meta, &entries),
            "text/markdown; charset=utf-8",
            "md",
        ),
        "json" => (
            harness_agent::export::json(&meta, &entries),
            "application/json",
            "json",
        ),
        other => {
            return Err(Error::BadRequest(format!(
                "no export format {other:?}: markdown or json"
            )));
        }
    };
    let mut response = ([(header::CONTENT_TYPE, kind)], body).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_DISPOSITION,
        crate::pages::files::disposition("attachment", &format!("{}.{ext}", file_name(&meta)))?,
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// A download's name: the chat's title, or its id.
fn file_name(meta: &harness_agent::Meta) -> String {
    let title: String = meta
        .title
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' {
                c
            } else {
                ' '
            }
        })
        .collect();
    let words: Vec<&str> = title.split_whitespace().take(8).collect();
    if words.is_empty() {
        format!("chat-{}", meta.id)
    } else {
        words.join("-")
    }
}

/// `POST /api/chats/{id}/share`.
async fn share(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<String>,
) -> Result<Response> {
    let (meta, entries) = transcript(&app, &user, &id).await?;
    let markdown = harness_agent::export::markdown_without_results(&meta, &entries);
    let token = random_token()?;
    let created = now();
    let mut tx = crate::db::begin_write(&app.pool).await?;
    sqlx::query("DELETE FROM shares WHERE chat_id = $1 AND user_id = $2")
        .bind(&id)
        .bind(user.id)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO shares (token_hash, chat_id, user_id, created, title, markdown) VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(token_hash(&token))
    .bind(&id)
    .bind(user.id)
    .bind(created)
    .bind(&meta.title)
    .bind(&markdown)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    let body = json!({"url": format!("/shared/{token}"), "created": created});
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// `GET /api/chats/{id}/share`: `{"shared": CREATED}` or `{"shared": null}`.
async fn shared_since(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    crate::chats::chat_row(&app.pool, &user, &id).await?;
    let created: Option<i64> =
        sqlx::query_scalar("SELECT created FROM shares WHERE chat_id = $1 AND user_id = $2")
            .bind(&id)
            .bind(user.id)
            .fetch_optional(&app.pool)
            .await?;
    Ok(Json(json!({ "shared": created })))
}

/// `DELETE /api/chats/{id}/share`.
async fn unshare(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    crate::chats::chat_row(&app.pool, &user, &id).await?;
    let done = sqlx::query("DELETE FROM shares WHERE chat_id = $1 AND user_id = $2")
        .bind(&id)
        .bind(user.id)
        .execute(&app.pool)
        .await?;
    if done.rows_affected() == 0 {
        return Err(Error::NotFound(format!("the chat {id} is not shared")));
    }
    Ok(Json(json!({ "shared": null })))
}

/// `GET /api/shared/{token}`: no sign-in; an unknown or ended link is 404.
async fn read_shared(State(app): State<Arc<App>>, Path(token): Path<String>) -> Result<Response> {
    let row: Option<(String, i64, String, String)> = sqlx::query_as(
        "SELECT u.username, s.created, s.title, s.markdown FROM shares s JOIN users u ON u.id = s.user_id WHERE s.token_hash = $1",
    )
    .bind(token_hash(&token))
    .fetch_optional(&app.pool)
    .await?;
    let (by, created, title, markdown) = row.ok_or_else(|| {
        Error::NotFound("no such shared chat: the link is wrong or its owner ended it".into())
    })?;
    let body = json!({"title": title, "by": by, "created": created, "markdown": markdown});
    let mut response = Json(body).into_response();
    let h = response.headers_mut();
    // Ended by its owner means gone at once: nothing keeps a copy.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        "x-robots-tag",
        HeaderValue::from_static("noindex, nofollow"),
    );
    Ok(response)
}
