//! The web UI: sign-in, the chat list and the chat, served by the binary itself.
//!
//! The pages are one HTML shell, hand-written JavaScript modules and one style sheet
//! (`crates/server/ui/`), embedded at build time: no CDN, no Node build, nothing fetched from
//! elsewhere. The entry module (`app.js`, the chat) imports the others by relative paths (the
//! sign-in, the side bar, the files, settings and devices pages, the Markdown renderer, the DOM
//! and API helpers); they draw every page from the HTTP API (the `api` module) and the SSE stream
//! and never parse what a model or a tool wrote as HTML (see `ui/app.js`).
//!
//! - `GET /login`, `GET /chats`, `GET /chats/{id}`, `GET /files`, `GET /shared/{token}` — the shell (the module reads the path); it
//!   holds no user's data, so it is the same for everyone: authorisation stays in the API, and
//!   another user's chat URL shows "No such chat".
//! - `GET /ui/{tag}/app.js` (and each module it imports), `GET /ui/{tag}/app.css` — the assets,
//!   under a tag that is the hash of their bytes, cached for a year as immutable; the shell is revalidated by its `ETag`.
//! - `PATCH /api/chats/{id}` `{"title"}` (rename) and `DELETE /api/chats/{id}` — what the chat
//!   list needs besides the core API ([`chats`]); `GET /api/view?path=` — a directory of the
//!   user's view with each entry's level, for the files page ([`files`]).
//!
//! The server's answers are gzipped for a client that accepts it ([`compression`]), but for the
//! SSE stream and what is compressed already.
//!
//! Every answer here carries a strict Content-Security-Policy (`default-src 'self'`, no inline
//! script or style, no frames) and `X-Content-Type-Options: nosniff`.

use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest as _, Sha256};
use tower_http::compression::predicate::{DefaultPredicate, NotForContentType, Predicate};

use crate::App;

mod asks;
mod chats;
pub mod files;
pub mod pyodide;
mod show;

/// The page shell, with `{{css}}` and `{{js}}` where the assets' paths go.
const SHELL: &str = include_str!("../ui/index.html");
/// The page's modules by file name, the entry (`app.js`) first.
const MODULES: &[(&str, &str)] = &[
    ("app.js", include_str!("../ui/app.js")),
    ("dom.js", include_str!("../ui/dom.js")),
    ("render.js", include_str!("../ui/render.js")),
    ("signin.js", include_str!("../ui/signin.js")),
    ("sidebar.js", include_str!("../ui/sidebar.js")),
    ("files.js", include_str!("../ui/files.js")),
    ("settings.js", include_str!("../ui/settings.js")),
    ("devices.js", include_str!("../ui/devices.js")),
    ("shared.js", include_str!("../ui/shared.js")),
    ("images.js", include_str!("../ui/images.js")),
    ("messages.js", include_str!("../ui/messages.js")),
];
/// The page's style sheet.
const APP_CSS: &str = include_str!("../ui/app.css");

/// What the pages may load: their own origin only, no inline script or style, no plugins; forms
/// and the base URL stay on this server. The only frames are the viewer's and Python's, from
/// this server, each sandboxed into an origin of its own ([`show`], [`crate::python`]).
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; object-src 'none'; frame-src 'self'; frame-ancestors 'none'; \
     base-uri 'none'; form-action 'self'";

/// The assets' tag and the shell filled in with it.
struct Built {
    tag: String,
    shell: String,
    etag: String,
}

fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let mut h = Sha256::new();
        for (name, text) in MODULES {
            h.update(name.as_bytes());
            h.update([0]);
            h.update(text.as_bytes());
            h.update([0]);
        }
        h.update(APP_CSS.as_bytes());
        let tag = hex::encode(h.finalize())[..16].to_owned();
        let shell = SHELL
            .replace("{{css}}", &format!("/ui/{tag}/app.css"))
            .replace("{{js}}", &format!("/ui/{tag}/app.js"));
        let etag = format!(
            "\"{}\"",
            &hex::encode(Sha256::digest(shell.as_bytes()))[..16]
        );
        Built { tag, shell, etag }
    })
}

/// The pages' routes (with the API routes they add; `max_file_bytes` bounds what a `python` run
/// may send back).
pub fn routes(max_file_bytes: usize) -> Router<Arc<App>> {
    Router::new()
        .route("/", get(shell))
        .route("/login", get(shell))
        .route("/chats", get(shell))
        .route("/chats/{id}", get(shell))
        .route("/files", get(shell))
        .route("/settings", get(shell))
        .route("/devices", get(shell))
        .route("/shared/{token}", get(shell))
        .route("/ui/{tag}/{file}", get(asset))
        .merge(chats::routes())
        .merge(files::routes())
        .merge(asks::routes(max_file_bytes))
        .merge(show::routes())
        .merge(pyodide::routes())
        .merge(crate::settings::routes())
}

/// What the server gzips, for a client that accepts it: the pages, their assets and the API's
/// JSON, Pyodide's wasm and scripts. Never the SSE stream (`text/event-stream`: each event must
/// leave as it is written, not wait in a compressor's buffer), nor what is compressed already
/// (images, zip archives such as Pyodide's `python_stdlib.zip` and wheels), nor a body of a few
/// bytes (tower-http's default predicate, and zips).
pub fn compression() -> tower_http::compression::CompressionLayer<impl Predicate> {
    tower_http::compression::CompressionLayer::new()
        .gzip(true)
        .compress_when(DefaultPredicate::new().and(NotForContentType::const_new("application/zip")))
}

fn secure(response: &mut Response) {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

async fn shell(headers: HeaderMap) -> Response {
    let b = built();
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == b.etag));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            b.shell.clone(),
        )
            .into_response()
    };
    let h = response.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(&b.etag) {
        h.insert(header::ETAG, v);
    }
    secure(&mut response);
    response
}

async fn asset(Path((tag, file)): Path<(String, String)>) -> Response {
    let b = built();
    let found = match file.as_str() {
        "app.css" => Some(("text/css; charset=utf-8", APP_CSS)),
        name => MODULES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, text)| ("text/javascript; charset=utf-8", *text)),
    };
    let mut response = match found {
        Some((kind, body)) if tag == b.tag => {
            let mut r = ([(header::CONTENT_TYPE, kind)], body).into_response();
            r.headers_mut().insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=31536000, immutable"),
            );
            r
        }
        // An old tag (a page from before an upgrade): send it where the current one is.
        Some(_) => {
            let mut r = StatusCode::MOVED_PERMANENTLY.into_response();
            if let Ok(v) = HeaderValue::from_str(&format!("/ui/{}/{file}", b.tag)) {
                r.headers_mut().insert(header::LOCATION, v);
            }
            r
        }
        None => (
            StatusCode::NOT_FOUND,
            axum::Json(serde_json::json!({"error": format!("no page asset {file}")})),
        )
            .into_response(),
    };
    secure(&mut response);
    response
}
