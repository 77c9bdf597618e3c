//! Forge mounts (issue 32): an admin mounts a git repository into the server's tree at a path
//! (`PUT /api/admin/mounts/PATH`): any git URL (a path on the server, `http(s)`), the branch
//! to check out, a forge kind (`none`, `forgejo`, `gitea`) with its API base, and the NAME of
//! the variable of the server's environment holding the token. The server clones it there on
//! its blocking pool (one lock per mount, [`crate::git::lock`]); every view lists it as
//! `name/ [mount]` and never shows its `.git`. Users reach it through their grants as any
//! path: `ro` to read, `stage` to change (changes are staged), `commit` to commit and push.
//!
//! The token is read from the environment at fetch and push time only: it is never stored,
//! shown, logged, or given to a model.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::App;
use crate::auth::{Authed, Body, require_admin};
use crate::db::Db;
use crate::error::{Error, Result};
use crate::git;

/// The settings key of the mounts (a JSON list of [`Mount`]).
const KEY: &str = "forge_mounts";

/// Which forge's API a mount's repository has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForgeKind {
    /// A plain git remote: `commit`, `branch` and `tag` only.
    #[default]
    None,
    /// Forgejo (`/api/v1`, Gitea's API).
    Forgejo,
    /// Gitea.
    Gitea,
}

impl ForgeKind {
    /// Its name in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            ForgeKind::None => "none",
            ForgeKind::Forgejo => "forgejo",
            ForgeKind::Gitea => "gitea",
        }
    }
}

/// One mount as the admin configured it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    /// Where it is in the tree (`/repos/site`).
    pub path: String,
    /// The remote (a path on the server, `file://`, `http(s)://`); never with a credential.
    pub url: String,
    /// The branch checked out (`None`: the remote's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The branch every chat's commits are pushed to (`None`: `llembas/CHAT`, one per chat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_branch: Option<String>,
    /// The forge's kind.
    #[serde(default)]
    pub forge: ForgeKind,
    /// The forge's address (`https://forge.example`); its API is `API/api/v1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// The repository on the forge (`OWNER/NAME`; default: the URL's last two segments).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// The variable of the server's environment holding the token (read at fetch and push
    /// time, sent as basic auth's password to git and as `Authorization: token` to the API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
}

impl Mount {
    /// The remote as git reaches it now, with the token read from the environment this moment.
    pub fn remote(&self) -> git::Remote {
        git::Remote {
            url: self.url.clone(),
            token: self.token(),
        }
    }

    /// The token, read from the environment now.
    pub fn token(&self) -> Option<String> {
        self.token_env
            .as_deref()
            .and_then(|v| std::env::var(v).ok())
            .filter(|t| !t.is_empty())
    }

    /// `OWNER/NAME` on the forge.
    pub fn forge_repo(&self) -> Option<String> {
        if let Some(r) = &self.repo {
            return Some(r.clone());
        }
        let trimmed = self.url.trim_end_matches('/');
        let trimmed = trimmed.strip_suffix(".git").unwrap_or(trimmed);
        let mut parts = trimmed.rsplit(['/', ':']);
        let name = parts.next()?;
        let owner = parts.next()?;
        (!name.is_empty() && !owner.is_empty()).then(|| format!("{owner}/{name}"))
    }

    /// As the admin's list shows it: the token's variable by name, never its value.
    pub fn shown(&self, tree: &std::path::Path) -> Value {
        let dir = dir_of(tree, &self.path);
        let state = state(&dir);
        json!({
            "path": self.path,
            "url": self.url,
            "branch": self.branch,
            "work_branch": self.work_branch,
            "forge": self.forge.as_str(),
            "api": self.api,
            "repo": self.forge_repo(),
            "token_env": self.token_env,
            "state": state.0,
            "head": state.1,
            "checked_out": state.2,
        })
    }
}

/// A mount's working tree on disk.
pub fn dir_of(tree: &std::path::Path, path: &str) -> std::path::PathBuf {
    let p = harness_fs::VPath::parse(path);
    let mut dir = tree.to_path_buf();
    for c in p.components() {
        dir.push(c);
    }
    dir
}

/// What the Files page says of the mount at `path`: the branch its working tree is on, HEAD's
/// commit (short) and how many paths are staged and not committed. Blocks (git reads).
pub fn summary(tree: &std::path::Path, path: &str) -> Value {
    let dir = dir_of(tree, path);
    match git::open(&dir) {
        Ok(repo) => {
            let head = git::head_sha(&repo).unwrap_or_default();
            json!({
                "branch": git::head_branch(&repo),
                "head": head.get(..12).unwrap_or(&head),
                "staged": git::staged(&dir).map(|s| s.len()).unwrap_or(0),
            })
        }
        Err(_) => json!({"state": "missing"}),
    }
}

/// What the working tree at `dir` is: (`cloned` or `missing`, HEAD's commit, HEAD's branch).
fn state(dir: &std::path::Path) -> (&'static str, String, Option<String>) {
    match git::open(dir) {
        Ok(repo) => (
            "cloned",
            git::head_sha(&repo).unwrap_or_default(),
            git::head_branch(&repo),
        ),
        Err(_) => ("missing", String::new(), None),
    }
}

/// The routes of this module.
pub fn routes() -> Router<Arc<App>> {
    Router::new().route("/api/admin/mounts", get(list)).route(
        "/api/admin/mounts/{*path}",
        get(show).put(set).post(fetch).delete(remove),
    )
}

/// The mounts configured.
pub async fn stored(pool: &Db) -> Result<Vec<Mount>> {
    crate::settings::read_list(pool, KEY).await
}

/// Changes the stored mounts with `change` in one write transaction.
async fn update<T>(pool: &Db, change: impl FnOnce(&mut Vec<Mount>) -> Result<T>) -> Result<T> {
    crate::settings::update_list(pool, KEY, change).await
}

/// `GET /api/admin/mounts`.
async fn list(State(app): State<Arc<App>>, Authed(user): Authed) -> Result<Json<Value>> {
    require_admin(&user)?;
    let mounts: Vec<Value> = stored(&app.pool)
        .await?
        .iter()
        .map(|m| m.shown(&app.tree))
        .collect();
    Ok(Json(json!({ "mounts": mounts })))
}

/// `GET /api/admin/mounts/PATH`.
async fn show(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(path): Path<String>,
) -> Result<Json<Value>> {
    require_admin(&user)?;
    let mount = mount_at(&app.pool, &path).await?;
    Ok(Json(mount.shown(&app.tree)))
}

/// The mount at `raw` (a path as the admin's URL gives it), or 404.
async fn mount_at(pool: &Db, raw: &str) -> Result<Mount> {
    let path = checked_path(raw)?;
    stored(pool)
        .await?
        .into_iter()
        .find(|m| m.path == path)
        .ok_or_else(|| Error::NotFound(format!("no mount at {path}")))
}

/// What `PUT /api/admin/mounts/PATH` takes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Set {
    url: String,
    #[serde(default)]
    branch: Option<String>,
    #[serde(default)]
    work_branch: Option<String>,
    #[serde(default)]
    forge: ForgeKind,
    #[serde(default)]
    api: Option<String>,
    #[serde(default)]
    repo: Option<String>,
    #[serde(default)]
    token_env: Option<String>,
}

/// `PUT /api/admin/mounts/PATH`: mounts the repository there (cloned now, when the path holds
/// nothing yet) or changes a mount's configuration.
async fn set(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(path): Path<String>,
    Body(body): Body<Set>,
) -> Result<Json<Value>> {
    require_admin(&user)?;
    let path = checked_path(&path)?;
    check_url(&body.url)?;
    if let Some(v) = &body.token_env {
        check_variable(v, &app.forge_token_prefix)?;
    }
    if let Some(api) = &body.api {
        match url::Url::parse(api) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => {}
            _ => {
                return Err(Error::BadRequest(format!(
                    "a mount's api is the forge's http or https address: {api:?}"
                )));
            }
        }
    }
    if body.forge != ForgeKind::None && body.api.is_none() {
        return Err(Error::BadRequest(format!(
            "a {} mount needs api, the forge's address (https://forge.example)",
            body.forge.as_str()
        )));
    }
    let mount = Mount {
        path: path.clone(),
        url: body.url,
        branch: body.branch.filter(|b| !b.is_empty()),
        work_branch: body.work_branch.filter(|b| !b.is_empty()),
        forge: body.forge,
        api: body.api.map(|a| a.trim_end_matches('/').to_owned()),
        repo: body.repo.filter(|r| !r.is_empty()),
        token_env: body.token_env.filter(|v| !v.is_empty()),
    };
    if mount.forge != ForgeKind::None && mount.forge_repo().is_none() {
        return Err(Error::BadRequest(
            "the repository on the forge is not in the URL: give repo (OWNER/NAME)".into(),
        ));
    }
    let others = stored(&app.pool).await?;
    for m in &others {
        let (a, b) = (
            harness_fs::VPath::parse(&m.path),
            harness_fs::VPath::parse(&path),
        );
        if m.path != path && (a.starts_with(&b) || b.starts_with(&a)) {
            return Err(Error::Conflict(format!(
                "{path} and the mount {} are one inside the other",
                m.path
            )));
        }
    }
    let dir = dir_of(&app.tree, &path);
    if git::open(&dir).is_err() {
        let empty = match std::fs::read_dir(&dir) {
            Ok(mut entries) => entries.next().is_none(),
            Err(_) => !dir.exists(),
        };
        if !empty {
            return Err(Error::Conflict(format!(
                "{path} holds files already: a repository is mounted at a new or empty directory"
            )));
        }
        let remote = mount.remote();
        let branch = mount.branch.clone();
        git::on_mount(dir.clone(), move |cloning| {
            let done = git::clone(&remote, &cloning, branch.as_deref());
            if done.is_err() {
                let _ = std::fs::remove_dir_all(&cloning);
            }
            done
        })
        .await
        .map_err(Error::BadRequest)?;
    }
    let shown = mount.shown(&app.tree);
    update(&app.pool, move |mounts| {
        match mounts.iter_mut().find(|m| m.path == path) {
            Some(m) => *m = mount,
            None => mounts.push(mount),
        }
        Ok(())
    })
    .await?;
    Ok(Json(shown))
}

/// `POST /api/admin/mounts/PATH`: fetches the remote now, and moves the mount's branch forward
/// to the remote's when nothing is changed in its working tree (with changes it stays; the
/// answer's `behind` says by how much). The chats' verbs fetch on their own before they read
/// or write the remote's branches.
async fn fetch(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(path): Path<String>,
) -> Result<Json<Value>> {
    require_admin(&user)?;
    let mount = mount_at(&app.pool, &path).await?;
    let dir = dir_of(&app.tree, &mount.path);
    let remote = mount.remote();
    let fetched = git::on_mount(dir, move |dir| git::fetch_forward(&dir, &remote))
        .await
        .map_err(Error::Unavailable)?;
    let mut shown = mount.shown(&app.tree);
    shown["fetched"] = json!({"moved": fetched.moved, "behind": fetched.behind});
    Ok(Json(shown))
}

/// `DELETE /api/admin/mounts/PATH`: the mount ends; its working tree stays in the tree as a
/// plain directory (its `.git` with it: an admin removes it by hand).
async fn remove(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(path): Path<String>,
) -> Result<Json<Value>> {
    require_admin(&user)?;
    let path = checked_path(&path)?;
    update(&app.pool, |mounts| {
        let before = mounts.len();
        mounts.retain(|m| m.path != path);
        if mounts.len() == before {
            return Err(Error::NotFound(format!("no mount at {path}")));
        }
        Ok(())
    })
    .await?;
    Ok(Json(json!({ "removed": path })))
}

/// The mount's path as the view names it; never `/`, never in a user's home.
fn checked_path(raw: &str) -> Result<String> {
    let p = harness_fs::VPath::parse(&format!("/{}", raw.trim_start_matches('/')));
    if p.is_root() {
        return Err(Error::BadRequest(
            "a mount is never the whole tree (/)".into(),
        ));
    }
    for c in p.components() {
        if !harness_fs::is_portable_name(c) || c.starts_with('.') {
            return Err(Error::BadRequest(format!(
                "{p}: a mount's path is made of portable names, none starting with a dot"
            )));
        }
    }
    let mut parts = p.components();
    if parts.next() == Some("home") && parts.next().is_some() {
        return Err(Error::BadRequest(format!(
            "{p} is in a user's home: mount repositories in a shared area such as /repos"
        )));
    }
    Ok(p.as_str().to_owned())
}

fn check_url(url: &str) -> Result<()> {
    let ok = match url::Url::parse(url) {
        Ok(u) => matches!(u.scheme(), "http" | "https" | "file") && u.password().is_none(),
        Err(_) => url.starts_with('/'),
    };
    if ok {
        Ok(())
    } else {
        Err(Error::BadRequest(format!(
            "a mount's url is a path on the server, file://, http:// or https://, without a password (name the token's variable in token_env): {}",
            redacted(url)
        )))
    }
}

/// `url` with any password left out (what an error may repeat).
fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_owned(),
    }
}

/// A token's variable: a name (never a token), and one the server's operator let mounts use
/// (its `--forge-token-prefix`): the server sends its value to the remote, so no other variable
/// of its environment may be named.
fn check_variable(var: &str, prefix: &str) -> Result<()> {
    if var.is_empty()
        || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        || var.starts_with(|c: char| c.is_ascii_digit())
    {
        return Err(Error::BadRequest(format!(
            "token_env names a variable of the server's environment (A-Z 0-9 _), not a token: {:?}",
            "…"
        )));
    }
    if !var.starts_with(prefix) {
        return Err(Error::BadRequest(format!(
            "token_env {var} does not start with {prefix}: a mount's token is read from a variable named {prefix}… (the server's --forge-token-prefix), so no other variable of the server's environment is ever sent to a remote"
        )));
    }
    Ok(())
}

/// The mounts a view marks, by path.
pub async fn paths(pool: &Db) -> Result<Vec<String>> {
    Ok(stored(pool).await?.into_iter().map(|m| m.path).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forge_repository_is_named_by_the_urls_last_two_segments() {
        let m = |url: &str| Mount {
            path: "/repos/x".into(),
            url: url.into(),
            branch: None,
            work_branch: None,
            forge: ForgeKind::Forgejo,
            api: None,
            repo: None,
            token_env: None,
        };
        assert_eq!(
            m("https://forge.example/ana/site.git")
                .forge_repo()
                .as_deref(),
            Some("ana/site")
        );
        assert_eq!(
            m("https://forge.example/ana/site/").forge_repo().as_deref(),
            Some("ana/site")
        );
        assert!(checked_path("home/ana/repo").is_err());
        assert!(checked_path("/").is_err());
        assert_eq!(checked_path("repos/site").unwrap(), "/repos/site");
        assert!(check_url("https://u:secret@forge.example/a/b").is_err());
        assert!(check_variable("ghp_abc123 secret", "").is_err());
        // Only the variables the operator's prefix names.
        assert!(check_variable("LLEMBAS_FORGE_SITE", crate::FORGE_TOKEN_PREFIX).is_ok());
        assert!(check_variable("OPENAI_API_KEY", crate::FORGE_TOKEN_PREFIX).is_err());
    }
}
