//! Test helpers for the harness (a dev-dependency only).
//!
//! [`ScriptedServer`] is a real HTTP server on `127.0.0.1` that speaks the OpenAI chat-completions
//! wire: each `POST /v1/chat/completions` gets the next scripted [`Reply`] (SSE chunks with any
//! quirk, a JSON answer, an error status with headers, or a stream that stalls), `GET /v1/models`
//! lists the scripted model ids, and every request body is recorded so a test asserts on the
//! exact JSON the harness sent. [`browser`] is the browser suites' one headless Chromium.

// A library says nothing on stdout or stderr of its own: it returns what happened.

pub mod browser;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt;
use futures_util::stream;
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// What can go wrong starting the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The listening socket could not be opened.
    #[error("cannot listen on 127.0.0.1: {0}")]
    Bind(std::io::Error),
    /// No browser for the page tests (what is missing, and how to install it).
    #[error("no browser for the page tests: {0}")]
    Browser(String),
}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One scripted answer to a chat-completions request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A 200 `text/event-stream` body sent as these pieces, in order, each flushed on its own
    /// (a piece is sent as is: include the `data: ` prefix and the line ends you want).
    Sse {
        /// The body pieces.
        pieces: Vec<String>,
        /// After the pieces, keep the connection open without sending more (for cancellation).
        stall: bool,
    },
    /// A JSON body with this status.
    Json {
        /// The HTTP status.
        status: u16,
        /// The body.
        body: Value,
    },
    /// A 200 `text/event-stream` body that never ends: one byte every `every` (an SSE comment
    /// line that grows without end), as a server that trickles its answer.
    Trickle {
        /// The time between two bytes.
        every: Duration,
    },
    /// A raw body with this status and these headers (error answers, `Retry-After`).
    Raw {
        /// The HTTP status.
        status: u16,
        /// Extra headers.
        headers: Vec<(String, String)>,
        /// The body.
        body: String,
    },
}

impl Reply {
    /// A well-formed stream: each chunk as `data: {json}` and a blank line, then `data: [DONE]`.
    pub fn sse_chunks(chunks: &[Value]) -> Reply {
        let mut pieces: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        pieces.push("data: [DONE]\n\n".into());
        Reply::Sse {
            pieces,
            stall: false,
        }
    }

    /// A stream of raw lines as a server wrote them (each sent with a line end after it, in its
    /// own piece; blank lines are not added, so framing quirks survive).
    pub fn sse_lines<S: AsRef<str>>(lines: &[S]) -> Reply {
        Reply::Sse {
            pieces: lines.iter().map(|l| format!("{}\n", l.as_ref())).collect(),
            stall: false,
        }
    }

    /// Streamed text: a role chunk, one chunk per piece of text, a `stop` chunk, a usage chunk
    /// with no choices, `[DONE]` — as llama-server streams.
    pub fn text_stream(pieces: &[&str]) -> Reply {
        let mut chunks = vec![chunk(json!({"role": "assistant", "content": null}), None)];
        chunks.extend(pieces.iter().map(|p| chunk(json!({"content": p}), None)));
        chunks.push(chunk(json!({}), Some("stop")));
        chunks.push(json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "choices": [],
            "usage": {"prompt_tokens": 42, "completion_tokens": pieces.len(), "total_tokens": 42 + pieces.len()}}));
        Reply::sse_chunks(&chunks)
    }

    /// A whole (unstreamed) answer with this text.
    pub fn text_json(text: &str) -> Reply {
        Reply::Json {
            status: 200,
            body: json!({"id": "chatcmpl-scripted", "object": "chat.completion", "model": "scripted",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 42, "completion_tokens": 3, "total_tokens": 45}}),
        }
    }

    /// An error answer with a JSON body `{"error": {"message", "type", "code"}}`.
    pub fn error(status: u16, message: &str) -> Reply {
        Reply::Raw {
            status,
            headers: Vec::new(),
            body: json!({"error": {"message": message, "type": "error", "code": status}})
                .to_string(),
        }
    }

    /// Adds a header to a [`Reply::Raw`] (other replies are left as they are).
    pub fn with_header(mut self, name: &str, value: &str) -> Reply {
        if let Reply::Raw { headers, .. } = &mut self {
            headers.push((name.to_string(), value.to_string()));
        }
        self
    }

    /// Makes an SSE reply stall after its pieces.
    pub fn stalling(mut self) -> Reply {
        if let Reply::Sse { stall, .. } = &mut self {
            *stall = true;
        }
        self
    }
}

/// One chunk of a streamed answer with this delta and finish reason.
pub fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0, "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})
}

/// A request the server got.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// The path (`/v1/chat/completions`).
    pub path: String,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    /// The body as JSON (`Value::Null` when it was not JSON).
    pub body: Value,
}

#[derive(Debug, Default)]
struct Script {
    replies: VecDeque<Reply>,
    requests: Vec<Recorded>,
    models: Vec<String>,
}

type Shared = Arc<Mutex<Script>>;

fn lock(shared: &Shared) -> MutexGuard<'_, Script> {
    // A test that panicked while holding the lock leaves the data usable.
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A scripted OpenAI-compatible model server on `127.0.0.1`, stopped when dropped.
#[derive(Debug)]
pub struct ScriptedServer {
    addr: SocketAddr,
    shared: Shared,
    stop: Option<oneshot::Sender<()>>,
}

impl ScriptedServer {
    /// Starts a server (inside a tokio runtime) that answers with `replies`, in order.
    pub async fn start(replies: Vec<Reply>) -> Result<ScriptedServer> {
        let shared: Shared = Arc::new(Mutex::new(Script {
            replies: replies.into(),
            requests: Vec::new(),
            models: vec!["scripted".into()],
        }));
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/models", get(models))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(Error::Bind)?;
        let addr = listener.local_addr().map_err(Error::Bind)?;
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(ScriptedServer {
            addr,
            shared,
            stop: Some(stop),
        })
    }

    /// The base URL, with `/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Adds replies at the end of the script.
    pub fn push(&self, reply: Reply) {
        lock(&self.shared).replies.push_back(reply);
    }

    /// Sets the ids `/v1/models` lists.
    pub fn set_models(&self, ids: &[&str]) {
        lock(&self.shared).models = ids.iter().map(|s| s.to_string()).collect();
    }

    /// Every chat-completions request so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared).requests.clone()
    }

    /// The bodies of every chat-completions request so far.
    pub fn bodies(&self) -> Vec<Value> {
        self.requests().into_iter().map(|r| r.body).collect()
    }

    /// How many replies are still scripted.
    pub fn replies_left(&self) -> usize {
        lock(&self.shared).replies.len()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn models(State(shared): State<Shared>) -> Response {
    let ids = lock(&shared).models.clone();
    let data: Vec<Value> = ids
        .iter()
        .map(|id| json!({"id": id, "object": "model", "owned_by": "scripted"}))
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

async fn chat(
    State(shared): State<Shared>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let reply = {
        let mut script = lock(&shared);
        script.requests.push(Recorded {
            path: "/v1/chat/completions".into(),
            authorization: headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        });
        script.replies.pop_front()
    };
    match reply {
        None => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "scripted server: no reply left in the script",
        )
            .into_response(),
        Some(Reply::Json { status, body }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, axum::Json(body)).into_response()
        }
        Some(Reply::Raw {
            status,
            headers,
            body,
        }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = (status, body).into_response();
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            for (name, value) in headers {
                if let (Ok(n), Ok(v)) = (
                    HeaderName::from_bytes(name.as_bytes()),
                    HeaderValue::from_str(&value),
                ) {
                    response.headers_mut().insert(n, v);
                }
            }
            response
        }
        Some(Reply::Trickle { every }) => {
            let bytes = stream::unfold(true, move |first| async move {
                if !first {
                    tokio::time::sleep(every).await;
                }
                let byte = if first { ":" } else { "." };
                Some((Ok::<Bytes, Infallible>(Bytes::from(byte)), false))
            });
            let mut response = Response::new(Body::from_stream(bytes));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            response
        }
        Some(Reply::Sse { pieces, stall }) => {
            let frames = stream::iter(pieces).then(|p| async move {
                // Let each piece leave as a chunk of its own.
                tokio::time::sleep(Duration::from_millis(1)).await;
                Ok::<Bytes, Infallible>(Bytes::from(p))
            });
            let body = if stall {
                Body::from_stream(frames.chain(stream::pending()))
            } else {
                Body::from_stream(frames)
            };
            let mut response = Response::new(body);
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            response
        }
    }
}

/// Notes for `cargo xtask test` that a real-model test ran to its end: a line `WHAT` appended
/// to the file `LLEMBAS_REAL_MODEL_REPORT` names (nothing when it is not set).
pub fn report_real_model_ran(what: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let Ok(path) = std::env::var("LLEMBAS_REAL_MODEL_REPORT") else {
        return Ok(());
    };
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    f.write_all(format!("{what}\n").as_bytes())
}

/// The version of npm's `@modelcontextprotocol/server-everything` that `cargo xtask test`
/// installs (xtask's `mcp_servers::EVERYTHING`).
pub const MCP_EVERYTHING_VERSION: &str = "2026.8.31";

/// The version of npm's `@modelcontextprotocol/server-filesystem` that `cargo xtask test`
/// installs beside it (xtask's `mcp_servers::FILESYSTEM`).
pub const MCP_FILESYSTEM_VERSION: &str = "2026.8.31";

/// The folder, under `~/.cache/llembas-test` (or `XDG_CACHE_HOME`'s), where `cargo xtask test`
/// installs both MCP servers with one `npm install`; named by both versions.
pub fn mcp_servers_folder() -> String {
    format!("mcp-servers-everything-{MCP_EVERYTHING_VERSION}-filesystem-{MCP_FILESYSTEM_VERSION}")
}

/// The real MCP everything server's program as installed for the tests
/// (`LLEMBAS_TEST_MCP_EVERYTHING`, else in [`mcp_servers_folder`]), or `None` with a line
/// saying the test is skipped.
pub fn mcp_everything() -> Option<std::path::PathBuf> {
    mcp_server("LLEMBAS_TEST_MCP_EVERYTHING", "mcp-server-everything")
}

/// The real MCP filesystem server's program as installed for the tests
/// (`LLEMBAS_TEST_MCP_FILESYSTEM`, else in [`mcp_servers_folder`]), or `None` with a line
/// saying the test is skipped.
pub fn mcp_filesystem() -> Option<std::path::PathBuf> {
    mcp_server("LLEMBAS_TEST_MCP_FILESYSTEM", "mcp-server-filesystem")
}

#[allow(
    clippy::print_stdout,
    reason = "the line is the calling test's own output (cargo test shows it with the test): a skip said"
)]
fn mcp_server(var: &str, program: &str) -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    let bin = match std::env::var_os(var) {
        Some(p) => PathBuf::from(p),
        None => std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?
            .join("llembas-test")
            .join(mcp_servers_folder())
            .join("node_modules/.bin")
            .join(program),
    };
    if bin.exists() {
        Some(bin)
    } else {
        println!(
            "skipped: {} is not installed (cargo xtask test installs it)",
            bin.display()
        );
        None
    }
}
