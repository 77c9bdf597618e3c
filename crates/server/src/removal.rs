//! An account removed by an admin (`DELETE /api/admin/users/{id}`): it is disabled and signed out
//! first (nothing new starts), its running chats are stopped, its home goes to the tree's trash
//! (restorable by whoever may reach the trash on the host; what the account had trashed from
//! below it is deleted for good), its memory and skills are removed, and
//! its row goes with everything the database keeps of it (chats, their transcripts and events,
//! sessions, tokens, grants, settings: `ON DELETE CASCADE`).

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::delete as delete_route;
use harness_fs::{Access, Level, View};
use serde_json::{Value, json};

use crate::App;
use crate::auth::{Authed, Role, User, require_admin, username_of};
use crate::error::{Error, Result};

/// The route of this module (the account's other routes are the admin's).
pub fn routes() -> Router<Arc<App>> {
    Router::new().route("/api/admin/users/{id}", delete_route(delete))
}

/// How long a removal waits for the account's stopped runs to end.
const RUNS_END_WITHIN: Duration = Duration::from_secs(30);

/// `DELETE /api/admin/users/{id}` → `{"deleted": id, "username", "trash"}` (`trash`: the trash
/// entry of the home, `null` when there was none); 403 for a user who is not an admin, 404 for no
/// such account, 409 on one's own.
pub async fn delete(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<i64>,
) -> Result<Json<Value>> {
    require_admin(&user)?;
    let username = username_of(&app.pool, id).await?;
    if id == user.id {
        return Err(Error::Conflict(
            "an admin cannot delete their own account: another admin can".into(),
        ));
    }
    sign_out(&app, id).await?;
    let gone = User {
        id,
        username: username.clone(),
        role: Role::User,
    };
    stop_runs(&app, &gone).await?;
    let trash = trash_home(&app, &username).await?;
    remove_personal(&app, id)?;
    sqlx::query("DELETE FROM users WHERE id = $1")
        .bind(id)
        .execute(&app.pool)
        .await?;
    Ok(Json(
        json!({"deleted": id, "username": username, "trash": trash}),
    ))
}

/// Disables the account and ends its sessions and tokens: nothing new starts while it goes.
async fn sign_out(app: &App, id: i64) -> Result<()> {
    for sql in [
        "UPDATE users SET disabled = 1 WHERE id = $1",
        "DELETE FROM sessions WHERE user_id = $1",
        "DELETE FROM api_tokens WHERE user_id = $1",
        "DELETE FROM chat_tokens WHERE user_id = $1",
    ] {
        sqlx::query(sql).bind(id).execute(&app.pool).await?;
    }
    // Its open event streams end at once, here and in the other processes.
    crate::streams::revoked(app, id).await;
    Ok(())
}

async fn running_runs(app: &App, id: i64) -> Result<Vec<String>> {
    Ok(
        sqlx::query_scalar("SELECT id FROM runs WHERE user_id = $1 AND status = 'running'")
            .bind(id)
            .fetch_all(&app.pool)
            .await?,
    )
}

/// Stops the account's running runs, wherever they run, and waits for them to end.
async fn stop_runs(app: &Arc<App>, user: &User) -> Result<()> {
    for run in running_runs(app, user.id).await? {
        match crate::chats::stop(app, user, &run).await {
            Ok(_) | Err(Error::Conflict(_) | Error::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    let start = tokio::time::Instant::now();
    while !running_runs(app, user.id).await?.is_empty() {
        if start.elapsed() > RUNS_END_WITHIN {
            return Err(Error::Conflict(format!(
                "the runs of {} are still ending: try again in a moment",
                user.username
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        app.hub.flush().await;
    }
    // What the ended runs wrote is stored before their rows go.
    app.hub.flush().await;
    app.transcripts.flush().await;
    Ok(())
}

/// Moves `/home/NAME` to the tree's trash: its entry there, `None` when there was no home.
async fn trash_home(app: &App, username: &str) -> Result<Option<String>> {
    let view = View::new(
        app.backend.clone(),
        Access::new().grant("/home", Level::Stage),
    );
    let home = crate::world::home(username);
    let moved = tokio::task::spawn_blocking(move || {
        purge_below(&view, &home)?;
        view.rm(&home)
    })
    .await
    .map_err(|e| Error::Stored(format!("a file operation failed: {e}")))?;
    match moved {
        Ok(entry) => Ok(Some(entry)),
        Err(harness_fs::Error::NotFound(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Deletes for good what the account had put in the trash from below its home: a next account
/// of the name, whose trash is the entries from its home's places, never sees them.
fn purge_below(view: &View, home: &str) -> harness_fs::Result<()> {
    let home = harness_fs::VPath::parse(home);
    for e in view.trash_list()? {
        if e.path != home && e.path.starts_with(&home) {
            view.purge(&e.id)?;
        }
    }
    Ok(())
}

/// Removes the account's memory file and skills directory (outside the tree).
fn remove_personal(app: &App, id: i64) -> Result<()> {
    let memory = crate::memory::path(&app.data, id);
    let skills = app.data.join("skills").join(id.to_string());
    let gone = |path: &std::path::Path, e: std::io::Error| {
        Error::Fs(harness_fs::Error::io(path.display(), e))
    };
    match std::fs::remove_file(&memory) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(gone(&memory, e)),
        _ => {}
    }
    match std::fs::remove_dir_all(&skills) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(gone(&skills, e)),
        _ => Ok(()),
    }
}
