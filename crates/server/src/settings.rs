//! A user's settings, and the models a user may pick: the personality preset their chats'
//! sessions are built with (one of `spec/prompts/personality/`), and the mode and model a new
//! chat takes when it names none. Stored per user (`user_settings`); a user reads and changes
//! their own only.
//!
//! - `GET /api/settings` → `{"personality", "mode", "model", "personalities": [{"name",
//!   "title"}], "modes", "models"}` (`model` null: the server's default).
//! - `PUT /api/settings` `{"personality"?, "mode"?, "model"?}` (a null or empty model: the
//!   server's default) → as `GET`; 400 for an unknown preset or mode, 403 for a model the
//!   server does not let users use.
//! - `GET /api/models` → `{"models", "default"}`: the models the user may choose for a chat
//!   (those an admin allowed, else the configured one), and the one a new chat takes.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::routing::get;
use harness_core::protocol::Mode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::App;
use crate::auth::{Authed, Body, User};
use crate::db::Db;
use crate::error::{Error, Result};

/// The prompt index's folder of personality presets.
const PRESETS: &str = "personality/";

/// The settings key of the models users may use (a JSON list), which an admin sets.
pub(crate) const ALLOWED_MODELS: &str = "allowed_models";

/// A user's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserSettings {
    /// The personality preset's name.
    pub personality: String,
    /// The mode of a new chat.
    pub mode: Mode,
    /// The model of a new chat (`None`: the server's default).
    pub model: Option<String>,
}

impl Default for UserSettings {
    fn default() -> Self {
        UserSettings {
            personality: "default".into(),
            mode: Mode::Manual,
            model: None,
        }
    }
}

/// The personality presets of the spec: (name, title), in the prompt index's order.
pub fn personalities() -> Vec<(String, String)> {
    harness_spec::Spec::embedded()
        .prompt_index()
        .fragments
        .iter()
        .filter_map(|(path, entry)| {
            let name = path.strip_prefix(PRESETS)?.strip_suffix(".md")?;
            Some((
                name.to_owned(),
                entry.title.clone().unwrap_or_else(|| name.to_owned()),
            ))
        })
        .collect()
}

/// The settings of user `user_id` (the defaults when they set none).
pub async fn of(pool: &Db, user_id: i64) -> Result<UserSettings> {
    let row: Option<(String, String, String)> =
        sqlx::query_as("SELECT personality, mode, model FROM user_settings WHERE user_id = $1")
            .bind(user_id)
            .fetch_optional(pool)
            .await?;
    let Some((personality, mode, model)) = row else {
        return Ok(UserSettings::default());
    };
    Ok(UserSettings {
        personality,
        mode: mode.parse::<Mode>().unwrap_or(Mode::Manual),
        model: (!model.is_empty()).then_some(model),
    })
}

/// The personality preset a session of user `user_id` is built with.
pub async fn personality(pool: &Db, user_id: i64) -> Result<Option<String>> {
    let p = of(pool, user_id).await?.personality;
    Ok((p != "default").then_some(p))
}

/// The models an admin let users use (`None`: only the one the server is configured with).
pub async fn allowed_models(pool: &Db) -> Result<Option<Vec<String>>> {
    let stored: Option<String> = sqlx::query_scalar("SELECT value FROM settings WHERE key = $1")
        .bind(ALLOWED_MODELS)
        .fetch_optional(pool)
        .await?;
    stored
        .map(|v| {
            serde_json::from_str(&v)
                .map_err(|e| Error::Stored(format!("the setting {ALLOWED_MODELS}: {e}")))
        })
        .transpose()
}

/// The model a new chat uses: the one asked for (or, unasked, the configured one when users may
/// use it, else the first they may), refused when users may not use it.
pub async fn model_for(pool: &Db, asked: Option<&str>, configured: &str) -> Result<String> {
    let allowed = allowed_models(pool)
        .await?
        .unwrap_or_else(|| vec![configured.to_owned()]);
    let chosen = match asked {
        Some(m) => m.to_owned(),
        None if allowed.iter().any(|m| m == configured) => configured.to_owned(),
        None => allowed
            .first()
            .cloned()
            .unwrap_or_else(|| configured.to_owned()),
    };
    if !allowed.contains(&chosen) {
        return Err(Error::Forbidden(format!(
            "the model {chosen} is not one this server lets you use: use {}",
            allowed.join(", ")
        )));
    }
    Ok(chosen)
}

/// The model the server is configured with (asking the server which when it names none).
async fn configured_model(app: &App) -> Result<String> {
    let settings = app.model.as_ref().ok_or_else(|| {
        Error::Model(format!(
            "{} the file --config names",
            harness_model::settings::NO_MODEL
        ))
    })?;
    settings
        .model_id(&harness_model::CancellationToken::new())
        .await
        .map_err(|e| Error::Model(e.to_string()))
}

/// The models users may use: those an admin allowed, else the configured one.
pub async fn allowed(app: &App) -> Result<Vec<String>> {
    match allowed_models(&app.pool).await? {
        Some(list) => Ok(list),
        None => Ok(vec![configured_model(app).await?]),
    }
}

/// What a new chat of `user` takes when the request names no mode or model: the user's
/// defaults (a default model the server no longer allows is left out: the server's is used).
pub async fn new_chat(
    app: &App,
    user: &User,
    mode: Option<Mode>,
    model: Option<String>,
) -> Result<(Mode, Option<String>)> {
    let mine = of(&app.pool, user.id).await?;
    let mode = mode.unwrap_or(mine.mode);
    let model = match model {
        Some(m) => Some(m),
        None => match mine.model {
            Some(m) if allowed(app).await?.contains(&m) => Some(m),
            _ => None,
        },
    };
    Ok((mode, model))
}

/// The routes.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/settings", get(get_settings).put(put_settings))
        .route("/api/models", get(models))
}

async fn settings_json(app: &App, user: &User) -> Result<Value> {
    let s = of(&app.pool, user.id).await?;
    let presets: Vec<Value> = personalities()
        .into_iter()
        .map(|(name, title)| json!({"name": name, "title": title}))
        .collect();
    Ok(json!({
        "personality": s.personality,
        "mode": s.mode.as_str(),
        "model": s.model,
        "personalities": presets,
        "modes": Mode::ALL.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
        "models": allowed(app).await?,
    }))
}

async fn get_settings(State(app): State<Arc<App>>, Authed(user): Authed) -> Result<Json<Value>> {
    Ok(Json(settings_json(&app, &user).await?))
}

#[derive(Deserialize)]
struct Change {
    #[serde(default)]
    personality: Option<String>,
    #[serde(default)]
    mode: Option<String>,
    /// Absent: unchanged; null or "": the server's default.
    #[serde(default, with = "double_option")]
    model: Option<Option<String>>,
}

/// A field that tells "absent" from "null".
mod double_option {
    use serde::{Deserialize, Deserializer};

    /// A present field: `Some`, holding `None` for a null.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Option<String>>, D::Error> {
        Option::<String>::deserialize(d).map(Some)
    }
}

async fn put_settings(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Body(body): Body<Change>,
) -> Result<Json<Value>> {
    let mut s = of(&app.pool, user.id).await?;
    if let Some(p) = body.personality {
        if !personalities().iter().any(|(name, _)| *name == p) {
            let names: Vec<String> = personalities().into_iter().map(|(n, _)| n).collect();
            return Err(Error::BadRequest(format!(
                "unknown personality preset {p:?}: use {}",
                names.join(", ")
            )));
        }
        s.personality = p;
    }
    if let Some(m) = body.mode {
        s.mode = m
            .parse::<Mode>()
            .map_err(|e| Error::BadRequest(e.to_string()))?;
    }
    if let Some(m) = body.model {
        s.model = m.filter(|m| !m.trim().is_empty());
        if let Some(m) = &s.model {
            let allowed = allowed(&app).await?;
            if !allowed.contains(m) {
                return Err(Error::Forbidden(format!(
                    "the model {m} is not one this server lets you use: use {}",
                    allowed.join(", ")
                )));
            }
        }
    }
    sqlx::query(
        "INSERT INTO user_settings (user_id, personality, mode, model) VALUES ($1, $2, $3, $4) ON CONFLICT (user_id) DO UPDATE SET personality = excluded.personality, mode = excluded.mode, model = excluded.model",
    )
    .bind(user.id)
    .bind(&s.personality)
    .bind(s.mode.as_str())
    .bind(s.model.clone().unwrap_or_default())
    .execute(&app.pool)
    .await?;
    Ok(Json(settings_json(&app, &user).await?))
}

async fn models(State(app): State<Arc<App>>, Authed(user): Authed) -> Result<Json<Value>> {
    let models = allowed(&app).await?;
    let (_, mine) = new_chat(&app, &user, Some(Mode::Manual), None).await?;
    let default = match mine {
        Some(m) => m,
        None => model_for(&app.pool, None, &configured_model(&app).await?).await?,
    };
    Ok(Json(json!({"models": models, "default": default})))
}

/// A JSON list an admin keeps under `key` in the settings table (the MCP servers, the mounts):
/// empty when never set.
pub async fn read_list<T: serde::de::DeserializeOwned>(pool: &Db, key: &str) -> Result<Vec<T>> {
    let v: Option<String> = sqlx::query_scalar(READ_SETTING)
        .bind(key)
        .fetch_optional(pool)
        .await?;
    parse_list(key, v)
}

fn parse_list<T: serde::de::DeserializeOwned>(key: &str, v: Option<String>) -> Result<Vec<T>> {
    match v {
        None => Ok(Vec::new()),
        Some(v) => {
            serde_json::from_str(&v).map_err(|e| Error::Stored(format!("the setting {key}: {e}")))
        }
    }
}

/// Changes the list under `key` with `change` in one write transaction; answers what it answers
/// (an error changes nothing).
pub async fn update_list<T, A>(
    pool: &Db,
    key: &str,
    change: impl FnOnce(&mut Vec<T>) -> Result<A>,
) -> Result<A>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let mut tx = crate::db::begin_write(pool).await?;
    let v: Option<String> = sqlx::query_scalar(READ_SETTING)
        .bind(key)
        .fetch_optional(&mut *tx)
        .await?;
    let mut list = parse_list(key, v)?;
    let answer = change(&mut list)?;
    sqlx::query(
        "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    )
    .bind(key)
    .bind(json!(list).to_string())
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(answer)
}

const READ_SETTING: &str = "SELECT value FROM settings WHERE key = $1";
