//! Python's runner and the Pyodide files it loads, for the chat page's `python` frame.
//!
//! - `GET /python/runner.html`, `GET /python/runner.js` — the runner (`ui/runner.*`), a page
//!   served with `Content-Security-Policy: sandbox allow-scripts` and no network but for the
//!   Pyodide files: it runs in an origin of its own, without the app's cookies or API, and the
//!   code it runs sends nothing anywhere.
//! - `GET /pyodide/314.0.7/{file}` — the files of npm's `pyodide` 314.0.7 as unpacked under the
//!   data directory (`DATA/pyodide/314.0.7/`, see the README), never fetched from elsewhere;
//!   with their MIME types (`application/wasm`), `Access-Control-Allow-Origin: *` (the runner's
//!   origin is opaque: its module import and wasm fetch are CORS requests) and cached for a year
//!   as immutable (the path holds the version). 404 for a file that is not there.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::App;

pub use crate::python::{
    PYODIDE_VERSION as VERSION, pyodide_dir as dir, pyodide_installed as installed,
};

/// The runner's page.
const RUNNER_HTML: &str = include_str!("../../ui/runner.html");
/// The runner's script.
const RUNNER_JS: &str = include_str!("../../ui/runner.js");

/// What the runner's page may do: run its scripts and Pyodide's (WebAssembly compiled), in an
/// origin of its own, framed only here; nothing else loads and no request leaves but for the
/// Pyodide files (`connect-src`: the code it runs reaches no other host, nor the app's API).
/// `{pyodide}` is where those files are: the server's own host and the versioned path.
fn runner_csp(host: Option<&str>) -> String {
    // A source list holds the host as the browser sent it; anything else than a plain host
    // and port falls back to the whole origin (`'self'`).
    let plain = host.filter(|h| {
        !h.is_empty()
            && h.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b))
    });
    let pyodide = match plain {
        Some(h) => format!("{h}/pyodide/{VERSION}/"),
        None => "'self'".to_owned(),
    };
    format!(
        "sandbox allow-scripts; frame-ancestors 'self'; default-src 'none'; \
         script-src 'self' 'wasm-unsafe-eval'; connect-src {pyodide}; \
         form-action 'none'; base-uri 'none'"
    )
}

/// The routes.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/python/{file}", get(runner))
        .route("/pyodide/{version}/{file}", get(asset))
}

async fn runner(Path(file): Path<String>, headers: axum::http::HeaderMap) -> Response {
    let (kind, body) = match file.as_str() {
        "runner.html" => ("text/html; charset=utf-8", RUNNER_HTML),
        "runner.js" => ("text/javascript; charset=utf-8", RUNNER_JS),
        _ => return (StatusCode::NOT_FOUND, format!("no runner file {file}")).into_response(),
    };
    let mut r = ([(header::CONTENT_TYPE, kind)], body).into_response();
    let h = r.headers_mut();
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    if let Ok(csp) = HeaderValue::from_str(&runner_csp(host)) {
        h.insert(header::CONTENT_SECURITY_POLICY, csp);
    } else {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("sandbox allow-scripts; default-src 'none'"),
        );
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// The MIME type of a Pyodide file, by its name.
fn mime(name: &str) -> &'static str {
    let ext = name.rsplit('.').next().unwrap_or_default();
    match ext {
        "wasm" => "application/wasm",
        "mjs" | "js" => "text/javascript; charset=utf-8",
        "json" => "application/json",
        "zip" | "whl" => "application/zip",
        "ts" | "map" | "txt" | "md" => "text/plain; charset=utf-8",
        "html" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

async fn asset(
    State(app): State<Arc<App>>,
    Path((version, file)): Path<(String, String)>,
) -> Response {
    let safe = !file.is_empty()
        && !file.starts_with('.')
        && file
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+'));
    let missing = |what: String| (StatusCode::NOT_FOUND, what).into_response();
    if version != VERSION || !safe {
        return missing(format!("no Pyodide file {version}/{file} here"));
    }
    let path = dir(&app.data).join(&file);
    let bytes = match tokio::fs::read(&path).await {
        Ok(b) => b,
        Err(_) => return missing(format!("no Pyodide file {version}/{file} here")),
    };
    let mut r = ([(header::CONTENT_TYPE, mime(&file))], bytes).into_response();
    let h = r.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}
