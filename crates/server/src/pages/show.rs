//! The viewer's HTML: a file of the user's view served as a page that runs in a sandbox.
//!
//! - `GET /show?path=FILE` → the file as `text/html`, with `Content-Security-Policy: sandbox
//!   allow-scripts` (the document gets an opaque origin even when its address is opened
//!   directly: its scripts run, but cannot read the app's cookies, pages or API), `nosniff`, and
//!   framed only by the app's own pages. The chat page shows it in an `<iframe
//!   sandbox="allow-scripts">` (never `allow-same-origin`). The view's refusals as the files API
//!   gives them (403, 404).
//! - `GET /show/device?chat=ID&call=CALL` → the same for an HTML file a linked device sent for
//!   its `show` call in the user's chat (the content travels in the chat's event).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::App;
use crate::auth::Authed;
use crate::error::{Error, Result};
use crate::paths::PathQuery;
use crate::world::user_view;

/// What a shown page may do: run its own scripts, in an origin of its own.
pub const SHOW_CSP: &str = "sandbox allow-scripts; frame-ancestors 'self'";

/// The routes.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/show", get(show))
        .route("/show/device", get(device_show))
}

#[derive(serde::Deserialize)]
struct DeviceShow {
    chat: String,
    call: String,
}

async fn device_show(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Query(q): Query<DeviceShow>,
) -> Result<Response> {
    crate::chats::chat_row(&app.pool, &user, &q.chat).await?;
    let content = crate::history::shown_content(&app.pool, user.id, &q.chat, &q.call)
        .await?
        .ok_or_else(|| {
            Error::NotFound(format!("no file shown by the call {} in this chat", q.call))
        })?;
    Ok(sandboxed(content.into_bytes()))
}

async fn show(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Query(q): Query<PathQuery>,
) -> Result<Response> {
    let given = q.required()?;
    let view = user_view(&app.pool, &app.backend, user.id, &user.username).await?;
    let bytes = tokio::task::spawn_blocking(move || -> Result<Vec<u8>> {
        let p = view.resolve(&given.on(&view));
        Ok(view.read_bytes(&p)?)
    })
    .await
    .map_err(|e| Error::Stored(format!("a file operation failed: {e}")))??;
    Ok(sandboxed(bytes))
}

/// HTML served to run in a sandbox of its own.
fn sandboxed(bytes: Vec<u8>) -> Response {
    let mut response =
        ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], bytes).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(SHOW_CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("inline"),
    );
    response
}
