//! A turn a dead process cut short (kill -9, a power cut) keeps what the person saw of the
//! model's answer: its streamed text, stored as events, is put in the transcript as what the
//! model said before the turn is closed — as a stop or a SIGTERM keeps it.

use harness_core::protocol::Event;
use harness_loop::transcript::Entry;
use serde_json::Value;

use crate::db::Db;
use crate::error::{Error, Result};

/// The text of the answer the model was streaming when `run` of `chat` was cut: the
/// `text_delta`s after its last step began, unless that step's answer was complete (then it is
/// in the transcript already). Empty when there is none.
pub async fn shown_answer(pool: &Db, chat: &str, run: &str) -> Result<String> {
    let rows: Vec<(i64, String)> = sqlx::query_as(
        "SELECT id, data FROM events WHERE chat_id = $1 AND run_id = $2 ORDER BY seq",
    )
    .bind(chat)
    .bind(run)
    .fetch_all(pool)
    .await?;
    let mut shown = String::new();
    for (id, data) in rows {
        let value: Value =
            serde_json::from_str(&data).map_err(|e| Error::Stored(format!("event {id}: {e}")))?;
        // The server's own events (`run_started`, a `python` ask, ...) are not the core's.
        let Ok(event) = serde_json::from_value::<Event>(value) else {
            continue;
        };
        match event {
            Event::TextDelta { text } => shown.push_str(&text),
            Event::StepStarted { .. }
            | Event::ModelAnswered { .. }
            | Event::ToolCallStarted { .. }
            | Event::TurnEnded { .. } => shown.clear(),
            _ => {}
        }
    }
    Ok(shown)
}

/// The entry that keeps `shown` in a transcript whose last turn was cut while the model
/// answered (its last entry the person's turn or a call's result), if there is one to keep.
pub fn kept_answer(entries: &[Entry], shown: &str) -> Option<Entry> {
    if shown.trim().is_empty() {
        return None;
    }
    let answering = entries.iter().rev().find_map(|e| match e {
        Entry::TurnStarted { .. } | Entry::User { .. } | Entry::ToolResult { .. } => Some(true),
        Entry::Assistant { .. } | Entry::TurnEnded { .. } => Some(false),
        _ => None,
    });
    answering.unwrap_or(false).then(|| Entry::Assistant {
        text: shown.to_owned(),
        reasoning: String::new(),
        tool_calls: Vec::new(),
    })
}
