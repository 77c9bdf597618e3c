//! What the files page needs besides the files API: a directory of the user's view with the
//! level of each entry (the page marks levels, mounts and read-only entries).
//!
//! - `GET /api/view?path=DIR` (default the user's home) → `{"path", "level", "passage",
//!   "home", "roots": [{"path", "level", "mount", "read_only"}], "entries": [{"name", "kind",
//!   "mount", "read_only", "level", "passage"}], "truncated"}`: `roots` are the places the
//!   user's grants open (the tree's top: `/` and `/home` are passages, not listed); the view's
//!   refusals as the files API gives them (403 `Access denied: …`, 404 `No such file or
//!   directory: …`). A file's entry also says its `size` in bytes.
//! - `GET /api/files/raw?path=FILE[&inline=1]` → the file's bytes as a download (`attachment`),
//!   typed by its name's extension, `nosniff`, sandboxed; `inline=1` shows it in the page only
//!   when it is a raster image (PNG, JPEG, GIF, WebP, AVIF, BMP) — never HTML or SVG.
//! - `DELETE /api/files?path=` → `{"path", "trash"}`: moved to the trash (`rm`, the view's levels).
//! - `POST /api/files/move {"from", "to"}` → `{"from", "to"}`: renamed or moved (`mv`).
//! - `GET /api/trash` → `{"items": [{"id", "path"}]}`: the trash's entries from places the user
//!   may change (a granted place itself, as a home an account's deletion trashed, is left to the
//!   host); `POST /api/trash/{id}/restore` → `{"path"}` (`restore`); `DELETE /api/trash` →
//!   `{"deleted": N}` (the user's entries deleted for good). Another user's entry is 404 `Not in
//!   the trash: ID`.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use harness_fs::{Kind, Level, TrashEntry, VPath, View};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::App;
use crate::auth::{Authed, Body};
use crate::error::{Error, Result};
use crate::paths::PathQuery;
use crate::world::{user_grants, user_view};

/// The routes (`DELETE /api/files` is [`remove`], routed beside the listing in the API).
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/view", get(view))
        .route("/api/files/raw", get(raw))
        .route("/api/files/move", post(move_entry))
        .route("/api/trash", get(trash).delete(empty_trash))
        .route("/api/trash/{id}/restore", post(restore))
}

/// Runs a file operation of the view off the async threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Stored(format!("a file operation failed: {e}")))?
}

/// `Content-Disposition` for `name`: an ASCII fallback and the name itself (RFC 6266).
pub(crate) fn disposition(kind: &str, name: &str) -> Result<HeaderValue> {
    let ascii: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._- ".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let encoded =
        percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC).to_string();
    HeaderValue::from_str(&format!(
        "{kind}; filename=\"{ascii}\"; filename*=UTF-8''{encoded}"
    ))
    .map_err(|e| Error::BadRequest(format!("cannot name {name:?} in a download: {e}")))
}

#[derive(Deserialize)]
struct RawQuery {
    #[serde(default)]
    inline: Option<u8>,
}

async fn raw(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Query(q): Query<PathQuery>,
    Query(how): Query<RawQuery>,
) -> Result<Response> {
    let view = user_view(&app.pool, &app.backend, user.id, &user.username).await?;
    let given = q.required()?;
    let (path, bytes) = blocking(move || {
        let p = view.resolve(&given.on(&view));
        let bytes = view.read_bytes(&p)?;
        Ok((p, bytes))
    })
    .await?;
    let name = path.name().to_owned();
    let (kind, showable) = crate::images::file_type(&name);
    let inline = showable && how.inline == Some(1);
    let mut response = ([(header::CONTENT_TYPE, kind)], bytes).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_DISPOSITION,
        disposition(if inline { "inline" } else { "attachment" }, &name)?,
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// `DELETE /api/files?path=`: the entry moved to the trash through the user's view.
pub async fn remove(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Query(q): Query<PathQuery>,
) -> Result<Json<Value>> {
    let view = user_view(&app.pool, &app.backend, user.id, &user.username).await?;
    let given = q.required()?;
    let v = view.clone();
    let (path, id) = blocking(move || {
        let input = given.on(&v);
        let p = v.resolve(&input);
        Ok((p.to_string(), harness_fs::tools::rm(&v, &input)?))
    })
    .await?;
    crate::verbs::files_changed(&app, &view, std::slice::from_ref(&path)).await;
    Ok(Json(json!({"path": path, "trash": id})))
}

#[derive(Deserialize)]
struct Move {
    from: String,
    to: String,
}

async fn move_entry(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Body(body): Body<Move>,
) -> Result<Json<Value>> {
    let view = user_view(&app.pool, &app.backend, user.id, &user.username).await?;
    let from = PathQuery::of(body.from).required()?;
    let to = PathQuery::of(body.to).required()?;
    let v = view.clone();
    let (from, to) = blocking(move || {
        let input = from.on(&v);
        let src = v.resolve(&input);
        let dst = harness_fs::tools::mv(&v, &input, &to.on(&v))?;
        Ok((src.to_string(), dst.to_string()))
    })
    .await?;
    crate::verbs::files_changed(&app, &view, &[from.clone(), to.clone()]).await;
    Ok(Json(json!({"from": from, "to": to})))
}

/// The user's entries of the trash: from places their view may change, a granted place itself
/// left out (a home an account's deletion trashed is restored on the host, not by a next
/// account of that name).
fn own_trash(view: &View, grants: &[(String, Level)]) -> Result<Vec<TrashEntry>> {
    let roots: Vec<VPath> = grants.iter().map(|(p, _)| VPath::parse(p)).collect();
    Ok(view
        .trash_list()?
        .into_iter()
        .filter(|e| !roots.contains(&e.path))
        .collect())
}

/// The user's view and the trash entries it owns, read off the async threads.
async fn with_trash<T: Send + 'static>(
    app: &App,
    user: &crate::auth::User,
    f: impl FnOnce(&View, Vec<TrashEntry>) -> Result<T> + Send + 'static,
) -> Result<T> {
    let view = user_view(&app.pool, &app.backend, user.id, &user.username).await?;
    let grants = user_grants(&app.pool, user.id, &user.username).await?;
    blocking(move || {
        let own = own_trash(&view, &grants)?;
        f(&view, own)
    })
    .await
}

async fn trash(State(app): State<Arc<App>>, Authed(user): Authed) -> Result<Json<Value>> {
    let items = with_trash(&app, &user, |_, own| {
        Ok(own
            .iter()
            .map(|e| json!({"id": e.id, "path": e.path.to_string()}))
            .collect::<Vec<_>>())
    })
    .await?;
    Ok(Json(json!({"items": items})))
}

async fn restore(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    let (path, view) = with_trash(&app, &user, move |view, own| {
        if !own.iter().any(|e| e.id == id) {
            return Err(harness_fs::Error::NotInTrash(id).into());
        }
        Ok((
            harness_fs::tools::restore(view, &id)?.to_string(),
            view.clone(),
        ))
    })
    .await?;
    crate::verbs::files_changed(&app, &view, std::slice::from_ref(&path)).await;
    Ok(Json(json!({"path": path})))
}

async fn empty_trash(State(app): State<Arc<App>>, Authed(user): Authed) -> Result<Json<Value>> {
    let deleted = with_trash(&app, &user, |view, own| {
        for e in &own {
            view.purge(&e.id)?;
        }
        Ok(own.len())
    })
    .await?;
    Ok(Json(json!({"deleted": deleted})))
}

async fn view(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Query(q): Query<PathQuery>,
) -> Result<Json<Value>> {
    let view = user_view(&app.pool, &app.backend, user.id, &user.username).await?;
    let grants = user_grants(&app.pool, user.id, &user.username).await?;
    let roots: Vec<Value> = grants
        .iter()
        .filter(|(_, level)| *level != Level::None)
        .map(|(path, level)| {
            let p = VPath::parse(path);
            json!({
                "path": p.to_string(),
                "level": level.as_str(),
                "mount": view.access().is_mount(&p),
                "read_only": *level == Level::Ro,
            })
        })
        .collect();
    let home = view.cwd().to_string();
    let given = q.checked()?;
    let tree = app.tree.clone();
    let answer = blocking(move || -> Result<Value> {
        // A mount's git state (issue 32): its branch, HEAD and what is staged.
        let mut roots = roots;
        for r in &mut roots {
            if r["mount"] == json!(true)
                && let Some(p) = r["path"].as_str()
            {
                r["git"] = crate::mounts::summary(&tree, p);
            }
        }
        let path = given.map_or_else(|| home.clone(), |g| g.on(&view));
        let listing = view.list(&path)?;
        let dir = listing.path.clone();
        let (level, passage) = view.level(&dir.to_string());
        let entries: Vec<Value> = listing
            .entries
            .iter()
            .map(|e| {
                let child = dir.join(&e.name);
                let (level, passage) = view.level(&child.to_string());
                let size = (e.kind == Kind::File)
                    .then(|| view.stat(&child).map(|m| m.size).ok())
                    .flatten();
                let mut entry = json!({
                    "size": size,
                    "name": e.name,
                    "kind": if e.kind == Kind::Dir { "dir" } else { "file" },
                    "mount": e.mount,
                    "read_only": e.read_only,
                    "level": level.as_str(),
                    "passage": passage,
                });
                if e.mount {
                    entry["git"] = crate::mounts::summary(&tree, child.as_str());
                }
                entry
            })
            .collect();
        Ok(json!({
            "path": dir.to_string(),
            "level": level.as_str(),
            "passage": passage,
            "home": home,
            "roots": roots,
            "entries": entries,
            "truncated": listing.truncated,
        }))
    })
    .await?;
    Ok(Json(answer))
}
