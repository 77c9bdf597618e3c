//! Accounts beyond sign-in: a user's sign-in sessions (listed, revoked), sign-ups (off unless
//! the server was started with `--allow-signups`; an account made so is `pending` until an admin
//! approves it; throttled per address; a taken name answered as a free one), and the admin's
//! routes: users (list, add, role, disable; passwords and deletion have modules of their own,
//! `password` and `removal`), each user's grants (the view levels of `spec/filesystem.md`, never in
//! another user's home), and the models users may use. An admin manages accounts; no admin route
//! reads a user's chats, files or memory.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, patch, post};
use harness_fs::{Level, VPath};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::App;
use crate::auth::{
    self, Authed, Body, Role, check_origin, cookie_token, require_admin, username_of,
};
use crate::db::token_hash;
use crate::error::{Error, Result};
use crate::settings::{ALLOWED_MODELS, allowed_models};
use crate::world;

/// The routes of this module.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/auth/sessions", get(list_sessions))
        .route("/api/auth/sessions/{id}", delete(revoke_session))
        .route("/api/auth/signup", post(signup))
        .route("/api/admin/users", get(list_users).post(add_user))
        .route("/api/admin/users/{id}", patch(change_user))
        .route(
            "/api/admin/users/{id}/grants",
            get(get_grants).put(put_grants),
        )
        .route("/api/admin/models", get(get_models).put(put_models))
        .route("/api/admin/search/rebuild", post(rebuild_search))
}

/// `POST /api/admin/search/rebuild`: the search index of the tree built anew in the
/// background, every file cut and embedded again (202; 403 for a user who is not an admin).
async fn rebuild_search(State(app): State<Arc<App>>, Authed(user): Authed) -> Result<Response> {
    require_admin(&user)?;
    app.search.rebuild(app.backend.clone());
    Ok((StatusCode::ACCEPTED, Json(json!({"rebuilding": true}))).into_response())
}

async fn list_sessions(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    headers: HeaderMap,
) -> Result<Json<Value>> {
    let current = cookie_token(&headers).map(|t| token_hash(&t));
    let rows: Vec<(String, String, i64, i64, i64, String)> = sqlx::query_as(
        "SELECT id, token_hash, created, last_seen, expires, user_agent FROM sessions WHERE user_id = $1 AND expires > $2 ORDER BY last_seen DESC, id",
    )
    .bind(user.id)
    .bind(crate::db::now())
    .fetch_all(&app.pool)
    .await?;
    let list: Vec<Value> = rows
        .into_iter()
        .map(|(id, hash, created, last_seen, expires, agent)| {
            json!({
                "id": id,
                "created": created,
                "last_seen": last_seen,
                "expires": expires,
                "user_agent": agent,
                "current": current.as_deref() == Some(hash.as_str()),
            })
        })
        .collect();
    Ok(Json(json!(list)))
}

async fn revoke_session(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    let done = sqlx::query("DELETE FROM sessions WHERE id = $1 AND user_id = $2")
        .bind(&id)
        .bind(user.id)
        .execute(&app.pool)
        .await?;
    if done.rows_affected() == 0 {
        return Err(Error::NotFound(format!("no sign-in session {id}")));
    }
    crate::streams::revoked(&app, user.id).await;
    Ok(Json(json!({"revoked": id})))
}

#[derive(Deserialize)]
struct NewAccount {
    username: String,
    password: String,
    #[serde(default)]
    role: Option<String>,
}

/// Makes an account with the default grants and its home directory.
async fn make_account(app: &App, username: &str, password: &str, role: Role) -> Result<i64> {
    let id = auth::create_user(&app.pool, username, password, role).await?;
    world::give_default_grants(&app.pool, &app.tree, id, username).await?;
    Ok(id)
}

/// `POST /api/auth/signup`: a `pending` account. Throttled per address ([`auth::PER_SIGNUP`]);
/// a name already taken is answered as a new one is (201, the same body, after the same
/// password hash), so a sign-up tells no one which names exist — the common practice (OWASP's
/// authentication cheat sheet) where no e-mail can tell the person instead.
async fn signup(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    method: Method,
    headers: HeaderMap,
    Body(body): Body<NewAccount>,
) -> Result<Response> {
    check_origin(&method, &headers)?;
    if !app.allow_signups {
        return Err(Error::Forbidden(
            "sign-ups are off on this server: ask an admin for an account".into(),
        ));
    }
    if body.role.is_some() {
        return Err(Error::BadRequest(
            "a sign-up cannot choose its role: an admin approves it".into(),
        ));
    }
    app.limiter.signup(Some(peer.ip()))?;
    match make_account(&app, &body.username, &body.password, Role::Pending).await {
        Ok(_) | Err(Error::Conflict(_)) => {}
        Err(e) => return Err(e),
    }
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "username": body.username,
            "role": "pending",
            "message": "if this name was free, the account now waits for an admin's approval",
        })),
    )
        .into_response())
}

async fn list_users(State(app): State<Arc<App>>, Authed(user): Authed) -> Result<Json<Value>> {
    require_admin(&user)?;
    let rows: Vec<(i64, String, String, i64, i64)> =
        sqlx::query_as("SELECT id, username, role, disabled, created FROM users ORDER BY id")
            .fetch_all(&app.pool)
            .await?;
    let list: Vec<Value> = rows
        .into_iter()
        .map(|(id, username, role, disabled, created)| {
            json!({"id": id, "username": username, "role": role, "disabled": disabled != 0, "created": created})
        })
        .collect();
    Ok(Json(json!(list)))
}

fn role_named(name: &str) -> Result<Role> {
    Role::parse(name).map_err(|_| {
        Error::BadRequest(format!("unknown role {name:?}: use admin, user or pending"))
    })
}

async fn add_user(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Body(body): Body<NewAccount>,
) -> Result<Response> {
    require_admin(&user)?;
    let role = role_named(body.role.as_deref().unwrap_or("user"))?;
    let id = make_account(&app, &body.username, &body.password, role).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"id": id, "username": body.username, "role": role.as_str()})),
    )
        .into_response())
}

#[derive(Deserialize)]
struct Change {
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    disabled: Option<bool>,
}

async fn change_user(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<i64>,
    Body(body): Body<Change>,
) -> Result<Json<Value>> {
    require_admin(&user)?;
    let name = username_of(&app.pool, id).await?;
    if id == user.id {
        return Err(Error::Conflict(
            "an admin cannot change their own role or disable themselves: another admin can".into(),
        ));
    }
    let role = body.role.as_deref().map(role_named).transpose()?;
    if let Some(role) = role {
        sqlx::query("UPDATE users SET role = $1 WHERE id = $2")
            .bind(role.as_str())
            .bind(id)
            .execute(&app.pool)
            .await?;
    }
    if let Some(disabled) = body.disabled {
        sqlx::query("UPDATE users SET disabled = $1 WHERE id = $2")
            .bind(i64::from(disabled))
            .bind(id)
            .execute(&app.pool)
            .await?;
        if disabled {
            // Signed out everywhere at once; its tokens are refused while it is disabled.
            sqlx::query("DELETE FROM sessions WHERE user_id = $1")
                .bind(id)
                .execute(&app.pool)
                .await?;
        }
    }
    let (role, disabled): (String, i64) =
        sqlx::query_as("SELECT role, disabled FROM users WHERE id = $1")
            .bind(id)
            .fetch_one(&app.pool)
            .await?;
    // Its streams check their sign-ins again (a disabled or pending account's end), and an
    // account that can no longer sign in runs nothing.
    crate::streams::revoked(&app, id).await;
    if disabled != 0 || role == Role::Pending.as_str() {
        crate::chats::halt_user(&app, id).await?;
    }
    Ok(Json(
        json!({"id": id, "username": name, "role": role, "disabled": disabled != 0}),
    ))
}

fn grants_json(grants: &[(String, Level)]) -> Value {
    json!(
        grants
            .iter()
            .map(|(p, l)| json!({"path": p, "level": l.as_str()}))
            .collect::<Vec<_>>()
    )
}

async fn get_grants(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<i64>,
) -> Result<Json<Value>> {
    require_admin(&user)?;
    let name = username_of(&app.pool, id).await?;
    let grants = world::user_grants(&app.pool, id, &name).await?;
    Ok(Json(json!({"user": id, "grants": grants_json(&grants)})))
}

/// A grant as the API spells it.
#[derive(Deserialize)]
pub struct Grant {
    path: String,
    level: String,
}

/// Grants as the API sends them, checked: absolute paths (made plain), known levels, no path
/// twice.
pub fn checked_grants(grants: &[Grant]) -> Result<Vec<(String, Level)>> {
    let mut checked = Vec::with_capacity(grants.len());
    for g in grants {
        if !g.path.starts_with('/') {
            return Err(Error::BadRequest(format!(
                "a grant's path is absolute (/home/NAME): {:?} is not",
                g.path
            )));
        }
        let path = VPath::parse(&g.path).to_string();
        let level = Level::parse(&g.level).map_err(|_| {
            Error::BadRequest(format!(
                "unknown level {:?} for {path}: use none, ro, stage or commit",
                g.level
            ))
        })?;
        if checked.iter().any(|(p, _): &(String, Level)| *p == path) {
            return Err(Error::BadRequest(format!("{path} is granted twice")));
        }
        checked.push((path, level));
    }
    Ok(checked)
}

/// Grants are for the user's own home and shared areas: a path in another user's home is
/// refused (403), whoever it is for — the admin themselves included.
fn refuse_others_homes(grants: &[(String, Level)], username: &str) -> Result<()> {
    for (path, _) in grants {
        if let Some(owner) = world::others_home(path, username) {
            return Err(Error::Forbidden(format!(
                "{path} is in {owner}'s home: no one is granted another user's home, an admin included; grant a shared area such as /shared instead"
            )));
        }
    }
    Ok(())
}

#[derive(Deserialize)]
struct Grants {
    grants: Vec<Grant>,
}

async fn put_grants(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<i64>,
    Body(body): Body<Grants>,
) -> Result<Json<Value>> {
    require_admin(&user)?;
    let name = username_of(&app.pool, id).await?;
    let checked = checked_grants(&body.grants)?;
    refuse_others_homes(&checked, &name)?;
    let mut tx = crate::db::begin_write(&app.pool).await?;
    sqlx::query("DELETE FROM grants WHERE user_id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    for (path, level) in &checked {
        sqlx::query("INSERT INTO grants (user_id, path, level) VALUES ($1, $2, $3)")
            .bind(id)
            .bind(path)
            .bind(level.as_str())
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    let grants = world::user_grants(&app.pool, id, &name).await?;
    Ok(Json(json!({"user": id, "grants": grants_json(&grants)})))
}

async fn get_models(State(app): State<Arc<App>>, Authed(user): Authed) -> Result<Json<Value>> {
    require_admin(&user)?;
    Ok(Json(json!({"allowed": allowed_models(&app.pool).await?})))
}

#[derive(Deserialize)]
struct Models {
    allowed: Option<Vec<String>>,
}

async fn put_models(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Body(body): Body<Models>,
) -> Result<Json<Value>> {
    require_admin(&user)?;
    match &body.allowed {
        None => {
            sqlx::query("DELETE FROM settings WHERE key = $1")
                .bind(ALLOWED_MODELS)
                .execute(&app.pool)
                .await?;
        }
        Some(list) => {
            if list.is_empty() || list.iter().any(|m| m.trim().is_empty()) {
                return Err(Error::BadRequest(
                    "name at least one model (or send null for the configured one)".into(),
                ));
            }
            sqlx::query(
                "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            )
            .bind(ALLOWED_MODELS)
            .bind(json!(list).to_string())
            .execute(&app.pool)
            .await?;
        }
    }
    Ok(Json(json!({"allowed": body.allowed})))
}
