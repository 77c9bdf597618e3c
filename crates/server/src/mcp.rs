//! MCP servers for users' chats (issue 33): an admin adds a server — a streamable HTTP endpoint,
//! or a program the server runs as a child of the chat's session — and says which users' chats
//! get its tools (everyone, or named users). A chat's session starts the servers of its user,
//! offers their tools as `mcp__SERVER__TOOL` under the chat's rules (`harness_mcp::WithMcp`), and
//! ends them with the session.
//!
//! No credential is stored or shown: an HTTP server's bearer token is read from a variable of
//! the server's environment named by `bearer_token_env`, where `{user}` stands for the chat's
//! user (`MCP_GH_{user}` is `MCP_GH_ALICE` for alice: a token per user), and a child's `env`
//! values are shown back by name only.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::routing::{get, put};
use axum::{Json, Router};
use harness_agent::ToolWorld;
use harness_mcp::{ServerConfig, Transport};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::App;
use crate::auth::{Authed, Body, User, require_admin};
use crate::db::Db;
use crate::error::{Error, Result};

/// The settings key of the MCP servers (a JSON list of [`Entry`]).
const KEY: &str = "mcp_servers";

/// Longest server name: it is the middle of every tool name the model sees.
const NAME_CHARS: usize = 32;

/// One MCP server as the admin configured it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Entry {
    /// Its name (`mcp__NAME__TOOL`).
    pub name: String,
    /// The program of a server run as a child of each chat session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables set for it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The URL of a streamable HTTP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The variable of the server's environment holding the bearer token (`{user}`: the chat's
    /// user's name as [`variable_part`] writes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_env: Option<String>,
    /// `false` keeps it configured but started for no chat.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// `false` sends its tools whole on every request instead of behind `load_tools`.
    #[serde(default = "yes")]
    pub defer: bool,
    /// The users whose chats get it (ids); `None`: everyone's.
    #[serde(default)]
    pub users: Option<Vec<i64>>,
}

fn yes() -> bool {
    true
}

impl Entry {
    /// The server a chat of `username` starts.
    fn config(&self, username: &str) -> Result<ServerConfig> {
        let transport = Transport::configured(
            &self.name,
            self.command.clone(),
            self.args.clone(),
            self.env.clone(),
            self.url.clone(),
            self.bearer_token_env
                .as_ref()
                .map(|v| v.replace("{user}", &variable_part(username))),
        )
        .map_err(|e| Error::BadRequest(e.to_string()))?;
        let mut config = ServerConfig::new(&self.name, transport);
        config.defer = self.defer;
        Ok(config)
    }

    /// Whether the chats of user `id` get it.
    fn serves(&self, id: i64) -> bool {
        self.enabled && self.users.as_ref().is_none_or(|u| u.contains(&id))
    }

    /// As the admin's list shows it: the variables' names, never their values.
    fn shown(&self, names: &BTreeMap<i64, String>) -> Value {
        let mut v = json!({
            "name": self.name,
            "transport": if self.url.is_some() { "http" } else { "stdio" },
            "enabled": self.enabled,
            "defer": self.defer,
            "users": self.users.as_ref().map(|ids| ids
                .iter()
                .filter_map(|id| names.get(id).cloned())
                .collect::<Vec<_>>()),
        });
        if let Some(c) = &self.command {
            v["command"] = json!(c);
            v["args"] = json!(self.args);
            v["env"] = json!(self.env.keys().collect::<Vec<_>>());
        }
        if let Some(u) = &self.url {
            v["url"] = json!(u);
            v["bearer_token_env"] = json!(self.bearer_token_env);
        }
        v
    }
}

/// `name` (a username: lowercase letters, digits, `-`, `_`, `.`) as the part of a variable's
/// name: letters upper-cased, digits kept, every other character `_` and its two hex digits
/// (`ana.b` → `ANA_2EB`, `ana_b` → `ANA_5FB`), so two users never name the same variable.
fn variable_part(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_uppercase());
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("_{b:02X}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::variable_part;

    #[test]
    fn users_never_share_a_token_variable() {
        let names = [
            "ana", "ana.b", "ana_b", "ana-b", "anab", "ana_2eb", "a", "a_5f",
        ];
        let parts: Vec<String> = names.iter().map(|n| variable_part(n)).collect();
        assert_eq!(parts[1], "ANA_2EB");
        assert_eq!(parts[2], "ANA_5FB");
        for (i, a) in parts.iter().enumerate() {
            for (j, b) in parts.iter().enumerate() {
                assert!(
                    i == j || a != b,
                    "{} and {} both read {a}",
                    names[i],
                    names[j]
                );
            }
        }
    }
}

/// The routes of this module.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/admin/mcp", get(list))
        .route("/api/admin/mcp/{name}", put(set).delete(remove))
        .route("/api/mcp", get(mine))
}

async fn stored(pool: &Db) -> Result<Vec<Entry>> {
    crate::settings::read_list(pool, KEY).await
}

/// Changes the stored servers with `change` in one write transaction; answers what it answers.
async fn update<T>(pool: &Db, change: impl FnOnce(&mut Vec<Entry>) -> Result<T>) -> Result<T> {
    crate::settings::update_list(pool, KEY, change).await
}

async fn usernames(pool: &Db) -> Result<BTreeMap<i64, String>> {
    let rows: Vec<(i64, String)> = sqlx::query_as("SELECT id, username FROM users")
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().collect())
}

/// The servers a chat of `user` starts.
pub async fn for_user(pool: &Db, user: &User) -> Result<Vec<ServerConfig>> {
    stored(pool)
        .await?
        .iter()
        .filter(|e| e.serves(user.id))
        .map(|e| e.config(&user.username))
        .collect()
}

/// `world` with the tools of the MCP servers `user`'s chats get, started now and ended with
/// the session holding the world. A server that does not start is left out, and what starting
/// said goes to the server's log (the chat's model simply does not see its tools).
pub async fn with_servers(
    app: &App,
    user: &User,
    world: Arc<dyn ToolWorld>,
) -> Result<Arc<dyn ToolWorld>> {
    let servers = for_user(&app.pool, user).await?;
    if servers.is_empty() {
        return Ok(world);
    }
    let (mcp, notices) = harness_mcp::Mcp::start(&servers, harness_mcp::Limits::default()).await;
    for n in notices {
        tracing::warn!("MCP for user {}: {n}", user.id);
    }
    Ok(Arc::new(harness_mcp::WithMcp::new(world, Arc::new(mcp))))
}

/// `GET /api/admin/mcp`: every server, as configured (variables by name only).
async fn list(State(app): State<Arc<App>>, Authed(user): Authed) -> Result<Json<Value>> {
    require_admin(&user)?;
    let names = usernames(&app.pool).await?;
    let servers: Vec<Value> = stored(&app.pool)
        .await?
        .iter()
        .map(|e| e.shown(&names))
        .collect();
    Ok(Json(json!({ "servers": servers })))
}

/// What `PUT /api/admin/mcp/{name}` takes: a server's configuration, its users by name.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Set {
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    bearer_token_env: Option<String>,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default = "yes")]
    defer: bool,
    /// Usernames; absent or null: everyone.
    #[serde(default)]
    users: Option<Vec<String>>,
}

/// `PUT /api/admin/mcp/{name}`: adds the server or replaces its configuration.
async fn set(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(name): Path<String>,
    Body(body): Body<Set>,
) -> Result<Json<Value>> {
    require_admin(&user)?;
    check_name(&name)?;
    let names = usernames(&app.pool).await?;
    let users = match body.users {
        None => None,
        Some(wanted) => Some(
            wanted
                .iter()
                .map(|w| {
                    names
                        .iter()
                        .find(|(_, n)| *n == w)
                        .map(|(id, _)| *id)
                        .ok_or_else(|| Error::BadRequest(format!("no user {w:?}")))
                })
                .collect::<Result<Vec<i64>>>()?,
        ),
    };
    if let Some(url) = &body.url {
        check_url(url)?;
    }
    if let Some(var) = &body.bearer_token_env {
        check_variable(var)?;
    }
    let entry = Entry {
        name: name.clone(),
        command: body.command.filter(|c| !c.trim().is_empty()),
        args: body.args,
        env: body.env,
        url: body.url,
        bearer_token_env: body.bearer_token_env,
        enabled: body.enabled,
        defer: body.defer,
        users,
    };
    // Refused as a chat would meet it.
    entry.config(&user.username)?;
    let shown = entry.shown(&names);
    update(&app.pool, move |entries| {
        match entries.iter_mut().find(|e| e.name == name) {
            Some(e) => *e = entry,
            None => entries.push(entry),
        }
        Ok(())
    })
    .await?;
    Ok(Json(shown))
}

/// `DELETE /api/admin/mcp/{name}`.
async fn remove(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(name): Path<String>,
) -> Result<Json<Value>> {
    require_admin(&user)?;
    update(&app.pool, |entries| {
        let before = entries.len();
        entries.retain(|e| e.name != name);
        if entries.len() == before {
            return Err(Error::NotFound(format!("no MCP server {name:?}")));
        }
        Ok(())
    })
    .await?;
    Ok(Json(json!({ "removed": name })))
}

/// `GET /api/mcp`: the servers the signed-in user's chats get (name and transport).
async fn mine(State(app): State<Arc<App>>, Authed(user): Authed) -> Result<Json<Value>> {
    let servers: Vec<Value> = stored(&app.pool)
        .await?
        .iter()
        .filter(|e| e.serves(user.id))
        .map(|e| json!({"name": e.name, "transport": if e.url.is_some() { "http" } else { "stdio" }}))
        .collect();
    Ok(Json(json!({ "servers": servers })))
}

fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.chars().count() <= NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && !name.contains("__");
    if ok {
        Ok(())
    } else {
        Err(Error::BadRequest(format!(
            "an MCP server's name is 1 to {NAME_CHARS} of A-Z a-z 0-9 - _ (no `__`): {name:?}"
        )))
    }
}

fn check_url(url: &str) -> Result<()> {
    match url::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(()),
        _ => Err(Error::BadRequest(format!(
            "an MCP server's url is an http or https URL: {url:?}"
        ))),
    }
}

fn check_variable(var: &str) -> Result<()> {
    let bare = var.replace("{user}", "U");
    if !bare.is_empty()
        && bare.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !bare.starts_with(|c: char| c.is_ascii_digit())
    {
        Ok(())
    } else {
        Err(Error::BadRequest(format!(
            "bearer_token_env names a variable (A-Z 0-9 _, `{{user}}` for the user's name), not a token: {var:?}"
        )))
    }
}
