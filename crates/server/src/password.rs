//! Passwords after an account is made: a signed-in user changes their own (the current one
//! asked for, throttled as a sign-in; their other sign-in sessions end), and an admin sets a
//! user's anew (every session and token of that user ends). The command line's
//! `llembas-server user password` does what the admin's route does.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::HeaderMap;
use axum::routing::post;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::App;
use crate::auth::{self, Authed, Body, cookie_token, require_admin, username_of};
use crate::db::token_hash;
use crate::error::{Error, Result};

/// The routes of this module.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/auth/password", post(change))
        .route("/api/admin/users/{id}/password", post(reset))
}

#[derive(Deserialize)]
struct Change {
    current: String,
    new: String,
}

/// `POST /api/auth/password {"current", "new"}`: the user's own password changed; their other
/// sign-in sessions end (this one stays). A wrong `current` is 403, and counts as a failed
/// sign-in of this address for this account.
async fn change(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Body(body): Body<Change>,
) -> Result<Json<Value>> {
    let ip = Some(peer.ip());
    app.limiter.check(&user.username, ip)?;
    auth::check_new_password(&body.new)?;
    if !auth::password_matches(&app.pool, user.id, &body.current).await? {
        app.limiter.failed(&user.username, ip);
        return Err(Error::Forbidden(
            "the current password is wrong: the password was not changed".into(),
        ));
    }
    auth::set_password(&app.pool, user.id, &body.new).await?;
    let this = cookie_token(&headers).map(|t| token_hash(&t));
    let ended = sqlx::query("DELETE FROM sessions WHERE user_id = $1 AND token_hash <> $2")
        .bind(user.id)
        .bind(this.unwrap_or_default())
        .execute(&app.pool)
        .await?
        .rows_affected();
    // The streams those sessions opened end now (this one's stay).
    crate::streams::revoked(&app, user.id).await;
    Ok(Json(json!({"changed": true, "sessions_ended": ended})))
}

#[derive(Deserialize)]
struct Reset {
    password: String,
}

/// `POST /api/admin/users/{id}/password {"password"}`: an admin sets another user's password;
/// that user's sessions, API tokens and chats' memory tokens end (409 on one's own account: the
/// admin changes theirs as any user does).
async fn reset(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<i64>,
    Body(body): Body<Reset>,
) -> Result<Json<Value>> {
    require_admin(&user)?;
    let name = username_of(&app.pool, id).await?;
    if id == user.id {
        return Err(Error::Conflict(
            "an admin changes their own password with POST /api/auth/password (the current one asked for)".into(),
        ));
    }
    auth::reset_password(&app.pool, id, &body.password).await?;
    crate::streams::revoked(&app, id).await;
    Ok(Json(json!({"id": id, "username": name, "reset": true})))
}
