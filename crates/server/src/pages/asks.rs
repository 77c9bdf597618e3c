//! What a chat's page answers for a run ([`crate::page`]): each route takes the id the event
//! gave (`ask`), authorises through the signed-in user (another user's ask is "no such") and
//! answers 404 for an ask answered already or whose run ended.
//!
//! - `POST /api/questions/{id}` `{"answer": "…"}` → `{"question": id}`: the person's answer to
//!   a `question` call (one of its options, or their own words); 400 for an empty answer.
//! - `POST /api/shows/{id}` `{"opened": true|false}` → `{"show": id}`: whether the page's
//!   viewer opened a `show` call's file (false: the call answers that the viewer is gone).
//! - `POST /api/python/{id}` `{"stdout", "stderr", "result", "error", "saved": {PATH: BASE64},
//!   "duration_ms"}` → `{"python": id}`: a `python` call's run ([`crate::python`]).

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::post;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::App;
use crate::auth::{Authed, Body};
use crate::chats::answer_ask;
use crate::error::{Error, Result};
use crate::page::AskKind;

/// The routes.
///
/// A `python` result carries the files the run saved (base64): its body may hold twice the
/// server's largest file and a little more.
pub fn routes(max_file_bytes: usize) -> Router<Arc<App>> {
    let python_body = max_file_bytes
        .saturating_mul(2)
        .saturating_add(crate::auth::MAX_JSON_BODY);
    Router::new()
        .route("/api/questions/{id}", post(question))
        .route("/api/shows/{id}", post(show))
        .route(
            "/api/python/{id}",
            post(python).layer(axum::extract::DefaultBodyLimit::max(python_body)),
        )
}

#[derive(Deserialize)]
struct QuestionBody {
    answer: String,
}

async fn question(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<String>,
    Body(body): Body<QuestionBody>,
) -> Result<Json<Value>> {
    let answer = body.answer.trim();
    if answer.is_empty() {
        return Err(Error::BadRequest("the answer is empty".into()));
    }
    answer_ask(
        &app,
        user.id,
        &id,
        AskKind::Question,
        Some(Value::String(answer.to_owned())),
    )
    .await?;
    Ok(Json(json!({"question": id})))
}

#[derive(Deserialize)]
struct ShowBody {
    opened: bool,
}

async fn show(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<String>,
    Body(body): Body<ShowBody>,
) -> Result<Json<Value>> {
    let value = body.opened.then(|| Value::String("opened".into()));
    answer_ask(&app, user.id, &id, AskKind::Show, value).await?;
    Ok(Json(json!({"show": id})))
}

async fn python(
    State(app): State<Arc<App>>,
    Authed(user): Authed,
    Path(id): Path<String>,
    Body(body): Body<Value>,
) -> Result<Json<Value>> {
    if !body.is_object() {
        return Err(Error::BadRequest(
            "the run's result must be a JSON object".into(),
        ));
    }
    answer_ask(&app, user.id, &id, AskKind::Python, Some(body)).await?;
    Ok(Json(json!({"python": id})))
}
