//! The harness as a chat sees it, from the runtime itself, so the page and any client read
//! what the model gets:
//!
//! - `GET /api/spec` — the spec's version and SHA-256 (what a pinned copy is checked against;
//!   no sign-in needed: it holds no user's data);
//! - `GET /api/tools?chat=ID` — the tools that chat is offered now (its mode, its grants, whether
//!   a page of it is open), each exactly as the model is sent it; `GET /api/tools?mode=MODE`
//!   — those a new chat of the signed-in user in that mode would be offered (no page yet).
//!
//! It holds no harness logic: the offering is `harness-agent`'s, over the chat's own world.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, State};
use axum::response::Json;
use axum::routing::get;
use harness_core::protocol::{Mode, SessionKind};
use harness_spec::{Project, Spec};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::App;
use crate::auth::Authed;
use crate::error::{Error, Result};

/// The routes.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/spec", get(spec_info))
        .route("/api/tools", get(tools))
}

async fn spec_info() -> Json<Value> {
    let spec = Spec::embedded();
    Json(json!({ "version": spec.version().to_string(), "sha256": spec.sha256() }))
}

/// The query of `/api/tools`.
#[derive(Debug, Deserialize)]
struct ToolsQuery {
    /// One of the user's chats.
    #[serde(default)]
    chat: Option<String>,
    /// The mode of a new chat (default manual), when no chat is named.
    #[serde(default)]
    mode: Option<String>,
}

async fn tools(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Query(q): Query<ToolsQuery>,
) -> Result<Json<Value>> {
    let (mode, narrower) = match &q.chat {
        Some(id) => {
            let row = crate::chats::chat_row(&app.pool, &user, id).await?;
            let mode = row.mode.parse::<Mode>().unwrap_or(Mode::Manual);
            (mode, crate::world::chat_grants(&app.pool, id).await?)
        }
        None => {
            let mode = q
                .mode
                .as_deref()
                .unwrap_or("manual")
                .parse::<Mode>()
                .map_err(|e| Error::BadRequest(e.to_string()))?;
            (mode, Vec::new())
        }
    };
    let page = q.chat.as_deref().is_some_and(|c| app.pages.attached(c));
    let link = crate::python::PageLink::new(&app, user.id, q.chat.as_deref(), page);
    let world = crate::chats::chat_world(&app, &user, link, &narrower).await?;
    // A chat's front end answers questions, shows files while a page is open, and its store
    // searches the user's chats.
    let offered = harness_agent::offered_tools(
        &world,
        (Project::Llembas, SessionKind::Chat, mode),
        (true, page, true),
    )?;
    let tools: Vec<Value> = offered
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
        .collect();
    Ok(Json(
        json!({"mode": mode.as_str(), "page": page, "tools": tools}),
    ))
}
