//! The harness as a chat sees it, straight from the core crates, so the page and any client
//! read the same answers the model would get:
//!
//! - `GET /` — a page naming the spec version and the tools a chat is offered in each mode;
//! - `GET /api/spec` — the spec's version and SHA-256 (what a pinned copy is checked against);
//! - `GET /api/tools?mode=manual&page=true&display=true&forge=false` — the tools a chat is
//!   offered, each exactly as the model is sent it.
//!
//! It holds no harness logic: offering, filling and narrowing are `harness-core`'s.

use axum::Router;
use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Json, Response};
use axum::routing::get;
use harness_core::offer::{Holds, OfferContext, offer};
use harness_core::protocol::{Mode, SessionKind};
use harness_spec::{Project, Spec};
use serde::Deserialize;
use serde_json::json;

/// The routes that show the harness as a chat sees it (no sign-in needed: they hold no user's
/// data).
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/api/spec", get(spec_info))
        .route("/api/tools", get(tools))
}

async fn spec_info() -> Json<serde_json::Value> {
    let spec = Spec::embedded();
    Json(json!({ "version": spec.version().to_string(), "sha256": spec.sha256() }))
}

/// The query of `/api/tools`.
#[derive(Debug, Deserialize)]
pub struct ToolsQuery {
    /// The chat's mode (default manual).
    #[serde(default)]
    pub mode: Option<String>,
    /// A page is attached.
    #[serde(default)]
    pub page: bool,
    /// The chat is displayed.
    #[serde(default)]
    pub display: bool,
    /// A forge repository is mounted.
    #[serde(default)]
    pub forge: bool,
}

/// A chat's offering context: the project's run-time tool values filled in.
///
/// This server serves no Pyodide distribution yet, so no page it serves can run Python: `page`
/// never holds, and `python` (which `requires: page`) is not offered.
fn chat_context(mode: Mode, holds: Holds) -> OfferContext {
    let mut cx = OfferContext::new(Project::Llembas, SessionKind::Chat, mode);
    cx.holds = Holds {
        page: false,
        ..holds
    };
    cx.values.insert(
        "memory_limit".into(),
        harness_fs::memory::limit_words(&[(
            harness_fs::memory::Target::Memory,
            harness_fs::memory::DEFAULT_LIMIT,
        )]),
    );
    cx
}

fn offered(mode: Mode, holds: Holds) -> Result<serde_json::Value, harness_core::Error> {
    let spec = Spec::embedded();
    let tools = offer(spec, &chat_context(mode, holds))?;
    Ok(json!(tools))
}

async fn tools(Query(q): Query<ToolsQuery>) -> Response {
    let mode = match q.mode.as_deref().unwrap_or("manual").parse::<Mode>() {
        Ok(m) => m,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({ "error": e.to_string() })),
            )
                .into_response();
        }
    };
    let holds = Holds {
        page: q.page,
        display: q.display,
        forge: q.forge,
    };
    match offered(mode, holds) {
        Ok(v) => Json(v).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({ "error": e.to_string() })),
        )
            .into_response(),
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

async fn index() -> Response {
    let spec = Spec::embedded();
    let mut body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>LLeMbas</title></head><body>\
         <h1>LLeMbas</h1><p><a href=\"/chats\">Open the chats</a> · <a href=\"/files\">Files</a></p>\
         <p>Harness spec {} (sha256 <code>{}</code>)</p>",
        escape(&spec.version().to_string()),
        spec.sha256()
    );
    for mode in [Mode::Manual, Mode::Edit, Mode::Auto, Mode::Plan] {
        let holds = Holds {
            page: true,
            display: true,
            forge: true,
        };
        match offer(spec, &chat_context(mode, holds)) {
            Ok(tools) => {
                let names: Vec<String> = tools.iter().map(|t| escape(&t.name)).collect();
                body.push_str(&format!(
                    "<h2>A chat in {} mode is offered</h2><p>{}</p>",
                    mode.as_str(),
                    names.join(", ")
                ));
            }
            Err(e) => {
                return (StatusCode::INTERNAL_SERVER_ERROR, escape(&e.to_string())).into_response();
            }
        }
    }
    body.push_str("</body></html>");
    Html(body).into_response()
}
