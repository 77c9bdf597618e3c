//! The HTTP API (a contract for outside checks: keep these stable, add what is needed). Every
//! handler authorises through the signed-in user and that user's view; errors are
//! `{"error": "…"}` with their status. See the crate's README for the whole list.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::Stream;
use harness_core::protocol::Mode;
use harness_fs::{Kind, VPath};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::App;
use crate::auth::{
    self, Authed, AuthedBy, Body, Credential, Raw, check_origin, cookie, cookie_token,
};
use crate::chats::{self, Stored, events_after};
use crate::error::{Error, Result};
use crate::paths::PathQuery;
use crate::world::user_view;

pub use crate::auth::MAX_JSON_BODY;

/// How many stored events a stream reads from the database at a time.
const REPLAY_PAGE: i64 = 500;

/// How often an idle stream sends a keep-alive comment (shorter than proxies' idle limits).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The API's routes.
pub fn routes(max_file_bytes: usize) -> Router<Arc<App>> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/api/auth/login", post(login))
        .route("/api/auth/logout", post(logout))
        .route("/api/auth/me", get(me))
        .route("/api/tokens", post(new_token).get(list_tokens))
        .route("/api/tokens/{id}", axum::routing::delete(revoke_token))
        .route("/api/chats", get(list_chats).post(create_chat))
        .route("/api/chats/{id}", get(get_chat))
        .route("/api/chats/{id}/messages", post(send_message))
        .route("/api/runs/{id}/stop", post(stop_run))
        .route("/api/approvals/{id}", post(answer_approval))
        .route("/api/events", get(events))
        .route(
            "/api/files",
            get(list_files).delete(crate::pages::files::remove),
        )
        .route(
            "/api/files/content",
            get(read_file)
                .put(write_file)
                .layer(DefaultBodyLimit::max(max_file_bytes)),
        )
        .merge(crate::admin::routes())
        .merge(crate::password::routes())
        .merge(crate::removal::routes())
        .merge(crate::memory::routes())
        .merge(crate::slots::routes())
        .layer(DefaultBodyLimit::max(MAX_JSON_BODY))
}

async fn healthz(State(app): State<Arc<App>>) -> Result<Json<Value>> {
    sqlx::query("SELECT 1").execute(&app.pool).await?;
    Ok(Json(json!({"status": "ok"})))
}

#[derive(Deserialize)]
struct Login {
    username: String,
    password: String,
    /// The page the sign-in page was sent from (its `?next=`).
    #[serde(default)]
    next: Option<String>,
}

async fn login(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    method: Method,
    headers: HeaderMap,
    Body(body): Body<Login>,
) -> Result<Response> {
    check_origin(&method, &headers)?;
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let old = cookie_token(&headers);
    let (token, user) = auth::login(
        &app,
        &body.username,
        &body.password,
        Some(peer.ip()),
        old.as_deref(),
        agent,
    )
    .await?;
    let mut response = Json(json!({
        "username": user.username,
        "role": user.role.as_str(),
        "next": crate::redirect::after_sign_in(body.next.as_deref()),
    }))
    .into_response();
    set_cookie(&mut response, &cookie(Some(&token), app.secure_cookie))?;
    Ok(response)
}

fn set_cookie(response: &mut Response, value: &str) -> Result<()> {
    let v = HeaderValue::from_str(value)
        .map_err(|e| Error::BadRequest(format!("cannot set the cookie: {e}")))?;
    response.headers_mut().insert(header::SET_COOKIE, v);
    Ok(())
}

async fn logout(
    State(app): State<Arc<App>>,
    method: Method,
    headers: HeaderMap,
) -> Result<Response> {
    check_origin(&method, &headers)?;
    if let Some(token) = cookie_token(&headers) {
        auth::logout(&app, &token).await?;
    }
    let mut response = Json(json!({"signed_out": true})).into_response();
    set_cookie(&mut response, &cookie(None, app.secure_cookie))?;
    Ok(response)
}

async fn me(Authed(user): Authed) -> Json<Value> {
    Json(json!({"id": user.id, "username": user.username, "role": user.role.as_str()}))
}

#[derive(Deserialize, Default)]
struct NewToken {
    #[serde(default)]
    label: String,
}

async fn new_token(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    body: Raw,
) -> Result<Json<Value>> {
    let label = body.json_or_default::<NewToken>()?.label;
    let token = auth::new_api_token(&app.pool, &user, &label).await?;
    Ok(Json(json!({"token": token})))
}

async fn list_tokens(State(app): State<Arc<App>>, Authed(user): Authed) -> Result<Json<Value>> {
    Ok(Json(json!(auth::list_api_tokens(&app.pool, &user).await?)))
}

async fn revoke_token(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Result<Json<Value>> {
    auth::revoke_api_token(&app, &user, &id).await?;
    Ok(Json(json!({"revoked": id})))
}

async fn list_chats(State(app): State<Arc<App>>, Authed(user): Authed) -> Result<Json<Value>> {
    Ok(Json(json!(chats::list(&app.pool, &user).await?)))
}

#[derive(Deserialize, Default)]
struct NewChat {
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    model: Option<String>,
    /// Narrower than the user's view: the chat reaches only these, each at most at its level.
    #[serde(default)]
    grants: Vec<crate::admin::Grant>,
    /// An agent chat on this linked device of the user's ([`crate::device_chats`]) …
    #[serde(default)]
    device: Option<String>,
    /// … in this directory on its disk (within the roots it shares).
    #[serde(default)]
    dir: Option<String>,
}

async fn create_chat(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    body: Raw,
) -> Result<Response> {
    let body: NewChat = body.json_or_default()?;
    let mode = body
        .mode
        .as_deref()
        .map(|m| {
            m.parse::<Mode>()
                .map_err(|e| Error::BadRequest(e.to_string()))
        })
        .transpose()?;
    let narrower = crate::admin::checked_grants(&body.grants)?;
    if let Some(device) = &body.device {
        let dir = body.dir.as_deref().ok_or_else(|| {
            Error::BadRequest("a chat on a device needs `dir`, a directory it shares".into())
        })?;
        let mode = match mode {
            Some(m) => m,
            None => crate::settings::new_chat(&app, &user, None, None).await?.0,
        };
        let id = crate::device_chats::create(&app, &user, device, dir, mode, body.model).await?;
        return Ok((StatusCode::CREATED, Json(json!({"id": id}))).into_response());
    }
    // What the request leaves out, the user's settings give.
    let (mode, model) = crate::settings::new_chat(&app, &user, mode, body.model).await?;
    let id = chats::create(&app, &user, mode, model.as_deref(), &narrower).await?;
    Ok((StatusCode::CREATED, Json(json!({"id": id}))).into_response())
}

#[derive(Deserialize)]
struct ChatQuery {
    /// The page of history before this event (`seq`): only `events` and `before` are answered.
    #[serde(default)]
    before: Option<i64>,
    /// `0`: leave the transcript out (the page draws from the events alone).
    #[serde(default)]
    messages: Option<u8>,
}

async fn get_chat(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<String>,
    Query(q): Query<ChatQuery>,
) -> Result<Json<Value>> {
    let row = chats::chat_row(&app.pool, &user, &id).await?;
    // Every event given so far is read (on SQLite they reach the streams before the database);
    // the page's stream goes on after the newest.
    let newest = chats::newest_event(&app, user.id).await?;
    let page =
        crate::history::page(&app.pool, user.id, &id, q.before, crate::history::PAGE_RUNS).await?;
    if q.before.is_some() {
        return Ok(Json(json!({"events": page.events, "before": page.before})));
    }
    let context =
        crate::history::context(&app.pool, app.model.as_ref(), user.id, &id, &row.model).await?;
    let mut v = json!(row);
    if let Some(o) = v.as_object_mut() {
        if q.messages != Some(0) {
            let messages =
                crate::store::load_entries(&app.pool, &app.transcripts, user.id, &id).await?;
            o.insert("messages".into(), json!(messages));
        }
        o.insert("events".into(), json!(page.events));
        o.insert("before".into(), json!(page.before));
        o.insert("stream_after".into(), json!(newest));
        o.insert("context".into(), context);
        if let Some(d) = crate::device_chats::describe(&app, &user, &id).await? {
            o.insert("device".into(), d);
            o.insert("running".into(), json!(app.device_chats.run_of(&id)));
        }
    }
    Ok(Json(v))
}

#[derive(Deserialize)]
struct Message {
    text: String,
    /// Images of the person's view sent with the text ([`crate::images`]).
    #[serde(default)]
    images: Vec<String>,
    /// The run of an earlier message of the person this one replaces (the page's edit-and-send
    /// and regenerate): the chat goes back to before it first ([`chats::Back`]).
    #[serde(default)]
    from: Option<String>,
    /// With `from`: whether the files the chat changed from that message on are put back
    /// (default yes).
    #[serde(default)]
    code: Option<bool>,
}

async fn send_message(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<String>,
    Body(body): Body<Message>,
) -> Result<Response> {
    let run = match crate::device_chats::of(&app, &id).await? {
        Some(_) if body.from.is_some() => {
            return Err(Error::BadRequest(format!(
                "the chat {id} runs on a device: it cannot go back to an earlier message here (its files are the device's)"
            )));
        }
        Some(row) => {
            crate::device_chats::send(&app, &user, &id, &row, &body.text, &body.images).await?
        }
        None => {
            let back = body.from.as_deref().map(|run| chats::Back {
                run,
                code: body.code.unwrap_or(true),
            });
            chats::send(&app, &user, &id, &body.text, &body.images, back).await?
        }
    };
    Ok((StatusCode::ACCEPTED, Json(json!({"run": run}))).into_response())
}

async fn stop_run(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<String>,
) -> Result<Response> {
    let status = match crate::device_chats::stop(&app, &user, &id).await? {
        Some(s) => s,
        None => chats::stop(&app, &user, &id).await?,
    };
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"run": id, "status": status})),
    )
        .into_response())
}

#[derive(Deserialize)]
struct Approval {
    answer: String,
    #[serde(default)]
    note: Option<String>,
}

async fn answer_approval(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<String>,
    Body(body): Body<Approval>,
) -> Result<Json<Value>> {
    if !crate::device_chats::approve(&app, &user, &id, &body.answer, body.note.as_deref()).await? {
        chats::approve(&app, &user, &id, &body.answer, body.note).await?;
    }
    Ok(Json(json!({"approval": id, "answer": body.answer})))
}

#[derive(Deserialize)]
struct After {
    #[serde(default)]
    after: Option<i64>,
    /// The chat the page shows: while this stream is open, a page of it is ([`crate::page`]).
    #[serde(default)]
    chat: Option<String>,
}

/// What a stream holds between two events it sends.
struct Follow {
    app: Arc<App>,
    user_id: i64,
    last: i64,
    rx: tokio::sync::broadcast::Receiver<Arc<Stored>>,
    queued: VecDeque<Stored>,
    replay: bool,
    /// True once the server's shutdown has ended the runs: the stream ends.
    closed: tokio::sync::watch::Receiver<bool>,
    /// The page of a chat this stream keeps open, if it said one.
    _page: Option<crate::page::Attached>,
    /// What the stream was opened with: once it no longer signs in, the stream ends.
    credential: Credential,
    /// Its place among the user's streams: when the user's sign-ins change, the credential is
    /// checked again.
    opened: crate::streams::Opened,
    /// Ticks every [`crate::streams::RECHECK`]: the credential is checked again.
    recheck: tokio::time::Interval,
    /// Set once the stream said why it closes: it ends.
    done: bool,
    /// The stream asked for more than it replays: it says so first, with this id (the newest).
    reset: Option<i64>,
}

/// The event telling a page that its stream asked for more than it replays: the page reads its
/// state again (its id is the newest event's: a reconnect goes on from there).
fn reset_event(newest: i64) -> SseEvent {
    let text = format!(
        "the stream replays at most {} events: read the chat again",
        chats::REPLAY_MAX
    );
    SseEvent::default().id(newest.to_string()).data(
        json!({"id": newest, "chat": null, "run": null, "seq": null,
            "event": {"type": "stream_reset", "text": text}})
        .to_string(),
    )
}

/// The stream's last event when it closes for a reason the page should know: no id (the
/// page's next stream resumes after the last event it had), `event` says why.
fn closing_event(reason: &str, text: &str) -> SseEvent {
    SseEvent::default()
        .event("closed")
        .data(json!({"reason": reason, "text": text}).to_string())
}

/// Whether the stream's credential still signs in (a database error keeps the stream: the next
/// check decides).
async fn still_signed_in(f: &Follow) -> bool {
    match auth::still_signs_in(&f.app, &f.credential).await {
        Ok(holds) => holds,
        Err(e) => {
            tracing::warn!("stream of user {}: {e}", f.user_id);
            true
        }
    }
}

fn sse_event(s: &Stored) -> SseEvent {
    SseEvent::default()
        .id(s.id.to_string())
        .data(json!(s).to_string())
}

/// What woke a stream waiting for its next event.
enum Wake {
    /// The user's sign-ins changed, or it is time to look: the credential is checked.
    Check,
    /// A newer stream of the user took this one's place.
    Evicted,
    /// An event of the log (or the log's news that the stream fell behind).
    Event(std::result::Result<Arc<Stored>, tokio::sync::broadcast::error::RecvError>),
}

/// The next event of a stream: the stored ones after the last sent first, then the live ones;
/// a stream that fell behind the live ones reads them from the database again.
async fn next(mut f: Follow) -> Option<(Result<SseEvent, Infallible>, Follow)> {
    use tokio::sync::broadcast::error::RecvError;
    if f.done {
        return None;
    }
    if let Some(newest) = f.reset.take() {
        return Some((Ok(reset_event(newest)), f));
    }
    loop {
        if let Some(s) = f.queued.pop_front() {
            f.last = s.id;
            return Some((Ok(sse_event(&s)), f));
        }
        if f.replay {
            f.app.hub.flush().await;
            match events_after(&f.app.pool, f.user_id, f.last, REPLAY_PAGE).await {
                Ok(page) if !page.is_empty() => f.queued.extend(page),
                Ok(_) => f.replay = false,
                Err(e) => {
                    tracing::warn!("stream of user {}: {e}", f.user_id);
                    return None;
                }
            }
            continue;
        }
        // A revocation is heard before any event; what was sent before the close is sent
        // first (`biased`).
        let wake = tokio::select! {
            biased;
            Ok(()) = f.opened.revocations.changed() => Wake::Check,
            _ = f.recheck.tick() => Wake::Check,
            () = f.opened.evicted.notified() => Wake::Evicted,
            got = f.rx.recv() => Wake::Event(got),
            _ = f.closed.wait_for(|c| *c) => return None,
        };
        let got = match wake {
            Wake::Event(got) => got,
            Wake::Check if still_signed_in(&f).await => continue,
            Wake::Check => {
                f.done = true;
                let text = "signed out: the session or token this stream was opened with no longer signs in";
                return Some((Ok(closing_event("signed_out", text)), f));
            }
            Wake::Evicted => {
                f.done = true;
                let text = format!(
                    "closed: more than {} streams of this user were open, and this was the oldest",
                    crate::streams::MAX_STREAMS
                );
                return Some((Ok(closing_event("too_many_streams", &text)), f));
            }
        };
        match got {
            // On a shared database an event of another process may commit before this one and
            // arrive after it: the stream reads from the database, in the order of the ids.
            Ok(s) if s.user_id == f.user_id && s.id > f.last && f.app.hub.shared() => {
                f.replay = true;
            }
            Ok(s) if s.user_id == f.user_id && s.id > f.last => {
                f.last = s.id;
                return Some((Ok(sse_event(&s)), f));
            }
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => f.replay = true,
            Err(RecvError::Closed) => return None,
        }
    }
}

async fn events(
    State(app): State<Arc<App>>,
    AuthedBy(user, credential): AuthedBy,
    headers: HeaderMap,
    Query(q): Query<After>,
) -> Result<Response> {
    let asked = match headers.get("last-event-id") {
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<i64>().ok())
                .ok_or_else(|| Error::BadRequest("Last-Event-ID must be an event id".into()))?,
        ),
        None => q.after,
    };
    let page = match q.chat.as_deref().filter(|c| !c.is_empty()) {
        Some(chat) => {
            chats::chat_row(&app.pool, &user, chat).await?;
            Some(app.pages.attach(chat))
        }
        None => None,
    };
    let every = crate::streams::RECHECK;
    let mut recheck = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Subscribe before reading what is stored, so nothing falls between the two; and to the
    // revocations before the credential is used (it was checked a moment ago).
    let opened = app.streams.open(user.id);
    let rx = app.hub.subscribe(user.id);
    let start = chats::stream_start(&app, user.id, asked).await?;
    let follow = Follow {
        opened,
        credential,
        recheck,
        done: false,
        reset: start.reset.then_some(start.after),
        _page: page,
        rx,
        app: app.clone(),
        user_id: user.id,
        last: start.after,
        queued: VecDeque::new(),
        replay: true,
        closed: app.closed.subscribe(),
    };
    let stream: std::pin::Pin<Box<dyn Stream<Item = Result<SseEvent, Infallible>> + Send>> =
        Box::pin(futures_util::stream::unfold(follow, next));
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response();
    let h = response.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

async fn view_of(app: &App, user: &auth::User) -> Result<harness_fs::View> {
    user_view(&app.pool, &app.backend, user.id, &user.username).await
}

/// Runs a file operation of the view off the async threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Stored(format!("a file operation failed: {e}")))?
}

async fn list_files(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Query(q): Query<PathQuery>,
) -> Result<Json<Value>> {
    let view = view_of(&app, &user).await?;
    let given = q.checked()?;
    let listing = blocking(move || {
        let path = given.map_or_else(|| view.cwd().to_string(), |g| g.on(&view));
        Ok(view.list(&path)?)
    })
    .await?;
    let entries: Vec<Value> = listing
        .entries
        .iter()
        .map(|e| {
            json!({
                "name": e.name,
                "kind": if e.kind == Kind::Dir { "dir" } else { "file" },
                "mount": e.mount,
                "read_only": e.read_only,
                "line": e.line(),
            })
        })
        .collect();
    Ok(Json(json!({
        "path": listing.path.to_string(),
        "entries": entries,
        "truncated": listing.truncated,
    })))
}

async fn read_file(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Query(q): Query<PathQuery>,
) -> Result<Json<Value>> {
    let view = view_of(&app, &user).await?;
    let given = q.required()?;
    let (path, text) = blocking(move || {
        let p: VPath = view.resolve(&given.on(&view));
        let bytes = view.read_bytes(&p)?;
        if bytes.iter().take(8192).any(|b| *b == 0) {
            return Err(harness_fs::Error::Binary(p).into());
        }
        let text = String::from_utf8(bytes).map_err(|_| harness_fs::Error::NotUtf8(p.clone()))?;
        Ok((p.to_string(), text))
    })
    .await?;
    Ok(Json(json!({"path": path, "content": text})))
}

async fn write_file(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Query(q): Query<PathQuery>,
    Raw(body): Raw,
) -> Result<Json<Value>> {
    let view = view_of(&app, &user).await?;
    let given = q.required()?;
    let n = body.len();
    let v = view.clone();
    let path = blocking(move || {
        let input = given.on(&v);
        let p = v.resolve(&input);
        v.write(&input, &body)?;
        Ok(p.to_string())
    })
    .await?;
    // The search index learns of the upload, staged inside a mount.
    crate::verbs::files_changed(&app, &view, std::slice::from_ref(&path)).await;
    Ok(Json(json!({"path": path, "bytes": n})))
}
