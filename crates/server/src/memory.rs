//! A user's memory and its HTTP API (`spec/acp.md` §12): the records a chat's `memory` tool
//! keeps (one file per user, `DATA/memory/ID.json`, harness-fs's format; LLeMbas keeps one store,
//! `memory`), read and changed over `GET|POST /api/lembas/v1/memory` with a bearer token scoped
//! to one chat of the user (`POST /api/chats/{id}/memory-token` makes one; only its hash is kept,
//! and it ends with its chat). Changes are the tool's own rules and refusals (harness-fs).

use std::path::Path as FsPath;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use harness_fs::memory::{Memory, MemoryFile, Target};
use serde_json::{Value, json};

use crate::App;
use crate::auth::{Authed, Raw};
use crate::db::{now, random_token, token_hash};
use crate::error::{Error, Result};

/// The base path of the instance API a session is handed (`api.url`).
pub const API_BASE: &str = "/api/lembas/v1";

/// The prefix of a chat-scoped token.
const TOKEN_PREFIX: &str = "lsk_s_";

pub use crate::world::memory_path as path;

/// The routes of this module.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/chats/{id}/memory-token", post(new_token))
        .route(
            &format!("{API_BASE}/memory"),
            get(read_memory).post(change_memory),
        )
}

async fn new_token(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    headers: HeaderMap,
    Path(chat): Path<String>,
) -> Result<Response> {
    crate::chats::chat_row(&app.pool, &user, &chat).await?;
    let token = chat_token(&app, &chat, user.id, None).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"url": api_url(&app, &headers), "token": token})),
    )
        .into_response())
}

/// A new bearer token for the memory API scoped to `chat` of the user `user_id`, handed to the
/// linked `device` or to the person (`None`). Only its hash is kept; it ends with its chat, with
/// [`revoke_token`], or with its device ([`end_device_tokens`]).
pub async fn chat_token(
    app: &App,
    chat: &str,
    user_id: i64,
    device: Option<&str>,
) -> Result<String> {
    let token = new_chat_token()?;
    keep_token(app, &token, chat, user_id, device).await?;
    Ok(token)
}

/// A token's text, not yet valid: [`keep_token`] makes it so (for a chat that is not stored yet).
pub fn new_chat_token() -> Result<String> {
    Ok(format!("{TOKEN_PREFIX}{}", random_token()?))
}

/// Makes `token` valid for `chat` of the user `user_id` (handed to `device`, or the person's).
pub async fn keep_token(
    app: &App,
    token: &str,
    chat: &str,
    user_id: i64,
    device: Option<&str>,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO chat_tokens (token_hash, chat_id, user_id, created, device_id) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(token_hash(token))
    .bind(chat)
    .bind(user_id)
    .bind(now())
    .bind(device)
    .execute(&app.pool)
    .await?;
    Ok(())
}

/// Ends the tokens handed to `device` (`None`: to every device); answers how many.
pub async fn end_device_tokens(app: &App, device: Option<&str>) -> Result<u64> {
    let done = match device {
        Some(d) => {
            sqlx::query("DELETE FROM chat_tokens WHERE device_id = $1")
                .bind(d)
                .execute(&app.pool)
                .await?
        }
        None => {
            sqlx::query("DELETE FROM chat_tokens WHERE device_id IS NOT NULL")
                .execute(&app.pool)
                .await?
        }
    };
    Ok(done.rows_affected())
}

/// Ends a token [`chat_token`] made.
pub async fn revoke_token(app: &App, token: &str) -> Result<()> {
    sqlx::query("DELETE FROM chat_tokens WHERE token_hash = $1")
        .bind(token_hash(token))
        .execute(&app.pool)
        .await?;
    Ok(())
}

/// The instance API's URL as the client of `headers` reached this server.
pub fn api_url(app: &App, headers: &HeaderMap) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("127.0.0.1");
    let scheme = if app.secure_cookie { "https" } else { "http" };
    format!("{scheme}://{host}{API_BASE}")
}

/// The user a chat-scoped bearer token speaks for (401 for any other credential).
async fn token_user(app: &App, headers: &HeaderMap) -> Result<i64> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim().to_owned())
        .filter(|t| t.starts_with(TOKEN_PREFIX))
        .ok_or_else(|| Error::Unauthorized("the memory API takes a chat's bearer token".into()))?;
    let user: Option<i64> = sqlx::query_scalar(
        "SELECT t.user_id FROM chat_tokens t JOIN users u ON u.id = t.user_id WHERE t.token_hash = $1 AND u.disabled = 0 AND u.role != 'pending'",
    )
    .bind(token_hash(&token))
    .fetch_optional(&app.pool)
    .await?;
    user.ok_or_else(|| Error::Unauthorized("the chat's token is not valid (any more)".into()))
}

fn load(file: &FsPath) -> Result<Memory> {
    Ok(MemoryFile::new(file).read()?.0)
}

/// The state as the API answers it (harness-agent's, which the clients read).
fn state(m: &Memory) -> Value {
    harness_agent::memory_api::State::of(m, Target::Memory).to_json()
}

async fn read_memory(State(app): State<Arc<App>>, headers: HeaderMap) -> Result<Json<Value>> {
    let user = token_user(&app, &headers).await?;
    let file = path(&app.data, user);
    let m = tokio::task::spawn_blocking(move || load(&file))
        .await
        .map_err(|e| Error::Stored(format!("reading memory failed: {e}")))??;
    Ok(Json(state(&m)))
}

async fn change_memory(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Raw,
) -> Result<Response> {
    let user = token_user(&app, &headers).await?;
    let body: Value = serde_json::from_slice(&body.0)
        .map_err(|e| Error::BadRequest(format!("the body is not JSON: {e}")))?;
    let Some(changes) = body.get("changes").and_then(Value::as_array) else {
        return Err(Error::BadRequest(
            "give the changes: {\"changes\": [{\"action\": \"add\", \"text\": \"…\"}]}".into(),
        ));
    };
    if body.as_object().is_some_and(|o| o.len() > 1) {
        return Err(Error::BadRequest("give the changes alone".into()));
    }
    // One store: a change's target is dropped, as the tool does.
    let changes: Vec<Value> = changes
        .iter()
        .map(|c| {
            let mut c = c.clone();
            if let Some(o) = c.as_object_mut() {
                o.remove("target");
            }
            c
        })
        .collect();
    let args = json!({"changes": changes});
    let file = MemoryFile::new(path(&app.data, user));
    // Written whole, unless the file changed since it was read (the chat's tool wrote
    // meanwhile): then nothing is written and the call is refused (harness-fs's MemoryFile).
    let answer = tokio::task::spawn_blocking(move || {
        file.update(|m| match m.apply(&args) {
            Ok(_) => Ok(Ok(state(m))),
            Err(e) => Ok(Err(e.to_string())),
        })
    })
    .await
    .map_err(|e| Error::Stored(format!("changing memory failed: {e}")))?;
    let answer = match answer {
        Err(e @ harness_fs::Error::MemoryChanged { .. }) => Err(e.to_string()),
        other => other?,
    };
    match answer {
        Ok(state) => Ok(Json(state).into_response()),
        Err(text) => Err(Error::Conflict(text)),
    }
}
