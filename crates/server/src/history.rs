//! A chat's history a page at a time, and its context use: a long chat opens with its last runs
//! only, and the page asks for older ones as it is scrolled up.
//!
//! A page is whole runs (from a `run_started` to the run's last event), so no turn is drawn
//! from its middle: the last [`PAGE_RUNS`] runs before a cursor (`?before=SEQ`, the `seq` of the
//! first event of the page shown so far), with the cursor of the next older page (`null`: none
//! is older). The first page carries the chat's latest plan when it is older than the page, so
//! the plan card is whole at once.

use serde_json::{Value, json};

use crate::db::Db;
use crate::error::{Error, Result};
use crate::events::{Row, Stored, stored};

/// The runs of one page of a chat's history (neither the spec nor issue 17 names a page size).
pub const PAGE_RUNS: i64 = 20;

/// One page of a chat's history.
pub struct Page {
    /// Its events, in order.
    pub events: Vec<Stored>,
    /// The cursor of the page before it (`None`: this one is the first).
    pub before: Option<i64>,
}

/// The pattern of a stored event of `kind` (events are stored as compact JSON).
fn of_kind(kind: &str) -> String {
    format!("%\"type\":\"{kind}\"%")
}

/// The last `runs` runs of the user's chat before the event `before` (`None`: the newest).
pub async fn page(
    pool: &Db,
    user_id: i64,
    chat: &str,
    before: Option<i64>,
    runs: i64,
) -> Result<Page> {
    let before = before.unwrap_or(i64::MAX);
    let start: Option<i64> = sqlx::query_scalar(
        "SELECT seq FROM events WHERE user_id = $1 AND chat_id = $2 AND seq < $3 AND data LIKE $4 ORDER BY seq DESC LIMIT 1 OFFSET $5",
    )
    .bind(user_id)
    .bind(chat)
    .bind(before)
    .bind(of_kind("run_started"))
    .bind(runs.max(1) - 1)
    .fetch_optional(pool)
    .await?;
    // Fewer runs than a page: everything before the cursor.
    let start = start.unwrap_or(i64::MIN);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, chat_id, run_id, seq, data FROM events WHERE user_id = $1 AND chat_id = $2 AND seq >= $3 AND seq < $4 ORDER BY seq",
    )
    .bind(user_id)
    .bind(chat)
    .bind(start)
    .bind(before)
    .fetch_all(pool)
    .await?;
    let older: Option<i64> = sqlx::query_scalar(
        "SELECT seq FROM events WHERE user_id = $1 AND chat_id = $2 AND seq < $3 ORDER BY seq DESC LIMIT 1",
    )
    .bind(user_id)
    .bind(chat)
    .bind(start)
    .fetch_optional(pool)
    .await?;
    let mut events = rows
        .into_iter()
        .map(|r| stored(user_id, r))
        .collect::<Result<Vec<_>>>()?;
    let cursor = older.and(events.first().map(|e| e.seq));
    // The newest page has the plan as it is now, even when it was written long before.
    if before == i64::MAX
        && cursor.is_some()
        && let Some(plan) = latest(pool, user_id, chat, "plan_changed").await?
        && events.first().is_none_or(|e| e.seq > plan.seq)
    {
        events.insert(0, plan);
    }
    Ok(Page {
        events,
        before: cursor,
    })
}

/// The chat's plan as it is now (its latest `plan_changed`), `None` when it never had one.
pub async fn latest_plan(pool: &Db, user_id: i64, chat: &str) -> Result<Option<Value>> {
    Ok(latest(pool, user_id, chat, "plan_changed")
        .await?
        .map(|s| s.event["plan"].clone())
        .filter(|p| !p.is_null()))
}

/// The content a device sent for its `show` call `call` in the user's chat (the event carries
/// it: the server cannot read the device's disk).
pub async fn shown_content(
    pool: &Db,
    user_id: i64,
    chat: &str,
    call: &str,
) -> Result<Option<String>> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT data FROM events WHERE user_id = $1 AND chat_id = $2 AND data LIKE $3 ORDER BY seq DESC",
    )
    .bind(user_id)
    .bind(chat)
    .bind(of_kind("show"))
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().find_map(|(data,)| {
        let e: Value = serde_json::from_str(&data).ok()?;
        (e["call_id"] == call && e.get("device").is_some())
            .then(|| e["content"].as_str().map(str::to_owned))
            .flatten()
    }))
}

/// The chat's latest event of `kind`.
async fn latest(pool: &Db, user_id: i64, chat: &str, kind: &str) -> Result<Option<Stored>> {
    let row: Option<Row> = sqlx::query_as(
        "SELECT id, chat_id, run_id, seq, data FROM events WHERE user_id = $1 AND chat_id = $2 AND data LIKE $3 ORDER BY seq DESC LIMIT 1",
    )
    .bind(user_id)
    .bind(chat)
    .bind(of_kind(kind))
    .fetch_optional(pool)
    .await?;
    row.map(|r| stored(user_id, r)).transpose()
}

/// How many tokens an event says the context holds: a model answer's usage (its prompt and
/// its answer), or a compaction's result.
pub fn context_used(event: &Value) -> Option<u64> {
    match event["type"].as_str()? {
        "model_answered" => {
            let u = &event["usage"];
            Some(u["input_tokens"].as_u64()? + u["output_tokens"].as_u64().unwrap_or(0))
        }
        "compacted" => event["after_tokens"].as_u64(),
        _ => None,
    }
}

/// The chat's context use: `{"used", "window"}` (each `null` when unknown): the tokens its last
/// model answer or compaction said, of model `model`'s window.
pub async fn context(
    pool: &Db,
    settings: Option<&harness_model::settings::ModelSettings>,
    user_id: i64,
    chat: &str,
    model: &str,
) -> Result<Value> {
    let row: Option<String> = sqlx::query_scalar(
        "SELECT data FROM events WHERE user_id = $1 AND chat_id = $2 AND (data LIKE $3 OR data LIKE $4) ORDER BY seq DESC LIMIT 1",
    )
    .bind(user_id)
    .bind(chat)
    .bind(of_kind("model_answered"))
    .bind(of_kind("compacted"))
    .fetch_optional(pool)
    .await?;
    let used = row
        .and_then(|d| serde_json::from_str::<Value>(&d).ok())
        .and_then(|v| context_used(&v));
    Ok(json!({"used": used, "window": window(settings, model)?}))
}

/// Model `model`'s context window, when the catalogue or the configuration says it.
pub fn window(
    settings: Option<&harness_model::settings::ModelSettings>,
    model: &str,
) -> Result<Option<u64>> {
    let Some(s) = settings else {
        return Ok(None);
    };
    let catalogue =
        harness_model::Catalogue::embedded().map_err(|e| Error::Model(e.to_string()))?;
    Ok(harness_model::ModelInfo::resolve(catalogue, model, &s.overrides()).context)
}
