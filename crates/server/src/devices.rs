//! Linked devices: pairing a `llembas link` with a person (RFC 8628's device authorization
//! grant, on our own endpoints), the person's device list, and revocation. The link itself (the
//! WebSocket a device dials, ACP over it) is the `link` module.
//!
//! - `POST /api/device/code` `{"name"?}` (no sign-in; the CLI asks): a secret `device_code`, a
//!   short `user_code` (`XXXX-XXXX` from an alphabet without look-alikes), the page to confirm
//!   it on (`verification_uri`, `verification_uri_complete`), `expires_in` and `interval`.
//! - `POST /api/device/token` `{"device_code"}` (the CLI polls): 400 `{"error":
//!   "authorization_pending" | "slow_down" | "expired_token" | "access_denied" |
//!   "invalid_grant"}` until the person approves, then `{"access_token", "token_type": "Bearer",
//!   "device_id", "name"}` once: 256 random bits, only their SHA-256 kept.
//! - `POST /api/devices/confirm` `{"user_code", "name"}` and `POST /api/devices/deny`
//!   `{"user_code"}` (signed in, from the page): the person approves (naming the device) or
//!   refuses.
//! - `GET /api/devices`: the person's devices, each with `online`, `last_seen` and the `limits`
//!   it last announced; `DELETE /api/devices/{id}`: revoked at once, its live link closed.
//!
//! A request carrying an `Origin` header is refused (403) on the two CLI routes: a browser page
//! has no business asking for a device code.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::App;
use crate::auth::{Authed, Body};
use crate::db::{now, random_id, random_token, token_hash};
use crate::error::{Error, Result};

/// How long a pairing waits for the person, in seconds (RFC 8628's `expires_in`).
pub const PAIRING_SECONDS: i64 = 600;
/// How often the CLI may poll at first, in seconds (RFC 8628's `interval`); `slow_down` adds
/// [`SLOW_DOWN_SECONDS`].
pub const POLL_SECONDS: i64 = 5;
/// What `slow_down` adds to the interval, in seconds (RFC 8628 §3.5).
pub const SLOW_DOWN_SECONDS: i64 = 5;
/// The user code's alphabet: consonants without look-alikes (RFC 8628 §6.1).
const USER_CODE_ALPHABET: &[u8] = b"BCDFGHJKLMNPQRSTVWXZ";
/// The prefix of a device token.
pub const TOKEN_PREFIX: &str = "lld_";
/// The longest device name, in characters.
const MAX_NAME_CHARS: usize = 64;
/// The page a person confirms a code on.
pub const CONFIRM_PAGE: &str = "/devices";

/// The routes of this module.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/device/code", post(device_code))
        .route("/api/device/token", post(device_token))
        .route("/api/devices", get(list))
        .route("/api/devices/confirm", post(confirm))
        .route("/api/devices/deny", post(deny))
        .route("/api/devices/{id}", delete(revoke))
}

/// 403 for a request that carries an `Origin` (a browser's): the device routes are the CLI's.
pub fn refuse_origin(headers: &HeaderMap) -> Result<()> {
    if headers.contains_key(header::ORIGIN) {
        return Err(Error::Forbidden(
            "a device's request must not carry an Origin header (a browser page cannot pair or link a device)".into(),
        ));
    }
    Ok(())
}

/// A fresh user code, `XXXX-XXXX`.
fn user_code() -> Result<String> {
    let mut buf = [0u8; 8];
    getrandom::fill(&mut buf).map_err(|e| Error::Random(e.to_string()))?;
    let mut code = String::with_capacity(9);
    for (i, b) in buf.iter().enumerate() {
        if i == 4 {
            code.push('-');
        }
        let n = usize::from(*b) % USER_CODE_ALPHABET.len();
        code.push(char::from(USER_CODE_ALPHABET[n]));
    }
    Ok(code)
}

/// A user code as typed (lower case, spaces, without its dash) in its stored form.
pub fn normal_code(typed: &str) -> String {
    let letters: String = typed
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_uppercase())
        .collect();
    if letters.len() == 8 {
        format!("{}-{}", &letters[..4], &letters[4..])
    } else {
        letters
    }
}

/// A device name as given, checked.
fn device_name(name: &str) -> Result<String> {
    let name = name.trim();
    if name.is_empty() {
        return Err(Error::BadRequest("a device needs a name".into()));
    }
    if name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(Error::BadRequest(format!(
            "the device name {name:?} is not valid: at most {MAX_NAME_CHARS} characters, no control characters"
        )));
    }
    Ok(name.to_owned())
}

/// This server's base URL as the request reached it.
fn base_url(app: &App, headers: &HeaderMap) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("127.0.0.1");
    let scheme = if app.secure_cookie { "https" } else { "http" };
    format!("{scheme}://{host}")
}

#[derive(Deserialize, Default)]
struct CodeAsk {
    /// The name the CLI suggests (its host name); the person may change it.
    #[serde(default)]
    name: Option<String>,
}

async fn device_code(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: crate::auth::Raw,
) -> Result<Response> {
    refuse_origin(&headers)?;
    app.refuse_when_stopping()?;
    let ask: CodeAsk = body.json_or_default()?;
    let suggested = ask.name.as_deref().map(device_name).transpose()?;
    let device_code = random_token()?;
    let t = now();
    // Old pairings nobody finished go as new ones come.
    sqlx::query("DELETE FROM device_codes WHERE expires < $1")
        .bind(t)
        .execute(&app.pool)
        .await?;
    let mut code = user_code()?;
    for _ in 0..4 {
        let taken: Option<String> =
            sqlx::query_scalar("SELECT user_code FROM device_codes WHERE user_code = $1")
                .bind(&code)
                .fetch_optional(&app.pool)
                .await?;
        if taken.is_none() {
            break;
        }
        code = user_code()?;
    }
    sqlx::query(
        "INSERT INTO device_codes (code_hash, user_code, created, expires, poll_every, last_poll, state, name) VALUES ($1, $2, $3, $4, $5, 0, 'pending', $6)",
    )
    .bind(token_hash(&device_code))
    .bind(&code)
    .bind(t)
    .bind(t + PAIRING_SECONDS)
    .bind(POLL_SECONDS)
    .bind(suggested)
    .execute(&app.pool)
    .await?;
    let page = format!("{}{CONFIRM_PAGE}", base_url(&app, &headers));
    Ok((
        StatusCode::OK,
        Json(json!({
            "device_code": device_code,
            "user_code": code,
            "verification_uri": page,
            "verification_uri_complete": format!("{page}?code={code}"),
            "expires_in": PAIRING_SECONDS,
            "interval": POLL_SECONDS,
        })),
    )
        .into_response())
}

#[derive(Deserialize)]
struct Poll {
    device_code: String,
}

/// An RFC 8628 error answer (400).
fn grant_error(error: &str, extra: Value) -> Response {
    let mut body = json!({"error": error});
    if let (Some(b), Value::Object(e)) = (body.as_object_mut(), extra) {
        b.extend(e);
    }
    (StatusCode::BAD_REQUEST, Json(body)).into_response()
}

async fn device_token(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Body(poll): Body<Poll>,
) -> Result<Response> {
    refuse_origin(&headers)?;
    let hash = token_hash(&poll.device_code);
    type Row = (i64, i64, i64, String, Option<i64>, Option<String>);
    let row: Option<Row> = sqlx::query_as(
        "SELECT expires, poll_every, last_poll, state, user_id, name FROM device_codes WHERE code_hash = $1",
    )
    .bind(&hash)
    .fetch_optional(&app.pool)
    .await?;
    let Some((expires, every, last_poll, state, user_id, name)) = row else {
        return Ok(grant_error(
            "invalid_grant",
            json!({"error_description": "no such device code: run `llembas link` again"}),
        ));
    };
    let t = now();
    if t >= expires {
        sqlx::query("DELETE FROM device_codes WHERE code_hash = $1")
            .bind(&hash)
            .execute(&app.pool)
            .await?;
        return Ok(grant_error("expired_token", json!({})));
    }
    if state == "denied" {
        sqlx::query("DELETE FROM device_codes WHERE code_hash = $1")
            .bind(&hash)
            .execute(&app.pool)
            .await?;
        return Ok(grant_error("access_denied", json!({})));
    }
    if t - last_poll < every {
        let slower = every + SLOW_DOWN_SECONDS;
        sqlx::query("UPDATE device_codes SET poll_every = $1, last_poll = $2 WHERE code_hash = $3")
            .bind(slower)
            .bind(t)
            .bind(&hash)
            .execute(&app.pool)
            .await?;
        return Ok(grant_error("slow_down", json!({"interval": slower})));
    }
    sqlx::query("UPDATE device_codes SET last_poll = $1 WHERE code_hash = $2")
        .bind(t)
        .bind(&hash)
        .execute(&app.pool)
        .await?;
    let (true, Some(user_id)) = (state == "approved", user_id) else {
        return Ok(grant_error("authorization_pending", json!({})));
    };
    // The code is spent with the token's making: a second poll with it is `invalid_grant`.
    let spent = sqlx::query("DELETE FROM device_codes WHERE code_hash = $1")
        .bind(&hash)
        .execute(&app.pool)
        .await?;
    if spent.rows_affected() == 0 {
        return Ok(grant_error("invalid_grant", json!({})));
    }
    let token = format!("{TOKEN_PREFIX}{}", random_token()?);
    let id = format!("d_{}", random_id()?);
    let name = name.unwrap_or_else(|| "device".into());
    sqlx::query(
        "INSERT INTO devices (id, user_id, name, token_hash, created) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&id)
    .bind(user_id)
    .bind(&name)
    .bind(token_hash(&token))
    .bind(t)
    .execute(&app.pool)
    .await?;
    Ok(Json(json!({
        "access_token": token,
        "token_type": "Bearer",
        "device_id": id,
        "name": name,
    }))
    .into_response())
}

#[derive(Deserialize)]
struct Confirm {
    user_code: String,
    #[serde(default)]
    name: Option<String>,
}

/// The pending pairing of `typed` (404 when there is none, or it expired).
async fn pending(app: &App, typed: &str) -> Result<(String, Option<String>)> {
    let code = normal_code(typed);
    let row: Option<(String, Option<String>)> = sqlx::query_as(
        "SELECT user_code, name FROM device_codes WHERE user_code = $1 AND state = 'pending' AND expires > $2",
    )
    .bind(&code)
    .bind(now())
    .fetch_optional(&app.pool)
    .await?;
    row.ok_or_else(|| {
        Error::NotFound(format!(
            "no device waits with the code {code}: check it, or run `llembas link` again (a code lasts {} minutes)",
            PAIRING_SECONDS / 60
        ))
    })
}

async fn confirm(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Body(c): Body<Confirm>,
) -> Result<Json<Value>> {
    let (code, suggested) = pending(&app, &c.user_code).await?;
    let name = device_name(c.name.as_deref().or(suggested.as_deref()).unwrap_or(""))?;
    sqlx::query(
        "UPDATE device_codes SET state = 'approved', user_id = $1, name = $2 WHERE user_code = $3 AND state = 'pending'",
    )
    .bind(user.id)
    .bind(&name)
    .bind(&code)
    .execute(&app.pool)
    .await?;
    Ok(Json(json!({"user_code": code, "name": name})))
}

async fn deny(
    State(app): State<Arc<App>>,
    Authed(_user): Authed,
    Body(c): Body<Confirm>,
) -> Result<Json<Value>> {
    let (code, _) = pending(&app, &c.user_code).await?;
    sqlx::query("UPDATE device_codes SET state = 'denied' WHERE user_code = $1")
        .bind(&code)
        .execute(&app.pool)
        .await?;
    Ok(Json(json!({"user_code": code, "denied": true})))
}

/// A device as its owner's list shows it.
pub async fn list_for(app: &App, user_id: i64) -> Result<Vec<Value>> {
    type Row = (String, String, i64, Option<i64>, Option<String>);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, name, created, last_seen, limits FROM devices WHERE user_id = $1 ORDER BY created, id",
    )
    .bind(user_id)
    .fetch_all(&app.pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, name, created, last_seen, limits)| {
            let live = app.device_links.live(&id);
            let limits = live
                .as_ref()
                .map(|l| l.limits.clone())
                .or_else(|| limits.and_then(|l| serde_json::from_str(&l).ok()))
                .unwrap_or(Value::Null);
            json!({
                "id": id,
                "name": name,
                "created": created,
                "online": live.is_some(),
                "last_seen": if live.is_some() { Some(now()) } else { last_seen },
                "limits": limits,
            })
        })
        .collect())
}

async fn list(State(app): State<Arc<App>>, Authed(user): Authed) -> Result<Json<Value>> {
    Ok(Json(Value::Array(list_for(&app, user.id).await?)))
}

async fn revoke(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    let done = sqlx::query("DELETE FROM devices WHERE id = $1 AND user_id = $2")
        .bind(&id)
        .bind(user.id)
        .execute(&app.pool)
        .await?;
    if done.rows_affected() == 0 {
        return Err(Error::NotFound(format!("no device {id}")));
    }
    // Its chats' memory tokens end with it, whichever process handed them out.
    crate::memory::end_device_tokens(&app, Some(&id)).await?;
    app.device_links.close(&id);
    Ok(StatusCode::NO_CONTENT)
}

/// The device a link's bearer token names: its id and owner (401 for none).
pub async fn by_token(app: &App, headers: &HeaderMap) -> Result<(String, i64)> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim().to_owned())
        .ok_or_else(|| {
            Error::Unauthorized(
                "the device link takes a device's bearer token: pair it with `llembas link URL`"
                    .into(),
            )
        })?;
    let row: Option<(String, i64, i64)> = sqlx::query_as(
        "SELECT d.id, d.user_id, u.disabled FROM devices d JOIN users u ON u.id = d.user_id WHERE d.token_hash = $1",
    )
    .bind(token_hash(&token))
    .fetch_optional(&app.pool)
    .await?;
    match row {
        Some((id, user, 0)) => Ok((id, user)),
        Some(_) => Err(Error::Forbidden(
            "the account this device is paired with is disabled".into(),
        )),
        None => Err(Error::Unauthorized(
            "this device's token is not valid (revoked, or never paired): pair it again with `llembas link URL`".into(),
        )),
    }
}

/// Notes a device's last contact and the limits it announced.
pub async fn seen(app: &App, id: &str, limits: Option<&Value>) -> Result<()> {
    match limits {
        Some(l) => {
            sqlx::query("UPDATE devices SET last_seen = $1, limits = $2 WHERE id = $3")
                .bind(now())
                .bind(l.to_string())
                .bind(id)
                .execute(&app.pool)
                .await?
        }
        None => {
            sqlx::query("UPDATE devices SET last_seen = $1 WHERE id = $2")
                .bind(now())
                .bind(id)
                .execute(&app.pool)
                .await?
        }
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_codes_are_typed_loosely() {
        assert_eq!(normal_code("bcdf ghjk"), "BCDF-GHJK");
        assert_eq!(normal_code("BCDF-GHJK"), "BCDF-GHJK");
        let c = user_code().unwrap();
        assert_eq!(c.len(), 9);
        assert_eq!(normal_code(&c), c);
    }
}
