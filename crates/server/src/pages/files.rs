//! What the files page needs besides the files API: a directory of the user's view with the
//! level of each entry (the page marks levels, mounts and read-only entries).
//!
//! - `GET /api/view?path=DIR` (default the user's home) → `{"path", "level", "passage",
//!   "home", "roots": [{"path", "level", "mount", "read_only"}], "entries": [{"name", "kind",
//!   "mount", "read_only", "level", "passage"}], "truncated"}`: `roots` are the places the
//!   user's grants open (the tree's top: `/` and `/home` are passages, not listed); the view's
//!   refusals as the files API gives them (403 `Access denied: …`, 404 `No such file or
//!   directory: …`).

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Query, State};
use axum::routing::get;
use harness_fs::{Kind, Level, VPath};
use serde_json::{Value, json};

use crate::App;
use crate::auth::Authed;
use crate::error::{Error, Result};
use crate::paths::PathQuery;
use crate::world::{user_grants, user_view};

/// The routes.
pub fn routes() -> Router<Arc<App>> {
    Router::new().route("/api/view", get(view))
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
    let answer = tokio::task::spawn_blocking(move || -> Result<Value> {
        let path = given.map_or_else(|| home.clone(), |g| g.on(&view));
        let listing = view.list(&path)?;
        let dir = listing.path.clone();
        let (level, passage) = view.level(&dir.to_string());
        let entries: Vec<Value> = listing
            .entries
            .iter()
            .map(|e| {
                let (level, passage) = view.level(&dir.join(&e.name).to_string());
                json!({
                    "name": e.name,
                    "kind": if e.kind == Kind::Dir { "dir" } else { "file" },
                    "mount": e.mount,
                    "read_only": e.read_only,
                    "level": level.as_str(),
                    "passage": passage,
                })
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
    .await
    .map_err(|e| Error::Stored(format!("a file operation failed: {e}")))??;
    Ok(Json(answer))
}
