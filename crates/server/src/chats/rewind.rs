//! Going back to an earlier message of a chat (the page's edit-and-send and regenerate): the
//! conversation goes back to before that message's turn, the files its chat changed from that
//! turn on are put back (unless the person keeps them), and the runs from it on leave the chat's
//! history. The rule of which files go back and how is the core's checkpoints
//! ([`harness_agent::checkpoint`]), fed the chat's stored events; the files are reached through
//! the chat's own view.

use std::sync::Arc;

use harness_agent::checkpoint::{CheckpointFiles, Checkpoints};
use harness_agent::{Event, SeamError};
use harness_fs::View;
use serde_json::json;

use super::Live;
use crate::App;
use crate::auth::User;
use crate::error::{Error, Result};
use crate::events::Stored;

/// The chat's checkpoints as its events tell them, the turn the person's message of `run`
/// started, and the runs from it on (in order).
fn replay(events: &[Stored], run: &str) -> Option<(Checkpoints, u32, Vec<String>)> {
    let mut checkpoints = Checkpoints::new();
    let mut turn = None;
    let mut runs: Vec<String> = Vec::new();
    for Stored { run: r, event, .. } in events {
        // The server's own events (`run_started`, a `python` ask, ...) are not the session's.
        let Ok(event) = serde_json::from_value::<Event>(event.clone()) else {
            continue;
        };
        if turn.is_none()
            && r.as_deref() == Some(run)
            && let Event::Core(harness_agent::CoreEvent::UserInput {
                origin: harness_core::protocol::Origin::Person,
                ..
            }) = &event
        {
            turn = Some(checkpoints.list().len() as u32 + 1);
        }
        checkpoints.observe(&event);
        if turn.is_some()
            && let Some(r) = r
            && !runs.contains(r)
        {
            runs.push(r.clone());
        }
    }
    turn.map(|t| (checkpoints, t, runs))
}

/// The chat's files as the checkpoints reach them: through the chat's view, by the paths its
/// file tools' edits name. A file the chat made goes to the trash, not away.
struct ViewFiles<'a>(&'a View);

impl CheckpointFiles for ViewFiles<'_> {
    fn read(&self, path: &str) -> Option<Vec<u8>> {
        self.0.read_bytes(&self.0.resolve(path)).ok()
    }

    fn write(&self, path: &str, bytes: &[u8]) -> std::result::Result<(), SeamError> {
        self.0
            .write(path, bytes)
            .map_err(|e| SeamError::file(path, e.to_string()))
    }

    fn remove(&self, path: &str) -> std::result::Result<(), SeamError> {
        self.0
            .rm(path)
            .map(drop)
            .map_err(|e| SeamError::file(path, e.to_string()))
    }
}

/// Takes the user's chat back to before the person's message of `run`, its session `live`
/// (idle, its run slot taken by the caller for the run `new_run`): the conversation first
/// (refused when that turn was compacted away, before anything changed), then the files when
/// `code`, then the runs from it on leave the history. What went back is told as the new run's
/// first event (so going back past that run takes the notice away with it).
pub(super) async fn back(
    app: &Arc<App>,
    user: &User,
    chat: &str,
    live: &Live,
    (run, new_run): (&str, &str),
    code: bool,
) -> Result<()> {
    app.hub.flush().await;
    let events = crate::events::chat_events(&app.pool, user.id, chat).await?;
    let (mut checkpoints, turn, runs) = replay(&events, run).ok_or_else(|| {
        Error::BadRequest(format!(
            "the chat {chat} has no message of the person in run {run} to go back to"
        ))
    })?;
    match live.ctl.keep(turn - 1).await {
        Ok(Ok(_)) => {}
        Ok(Err(why)) => return Err(Error::Conflict(why)),
        Err(e) => return Err(Error::Conflict(e.to_string())),
    }
    let said = if code {
        let files = restore_files(app, user, chat, &mut checkpoints, turn).await?;
        if files.is_empty() {
            "No file to put back.".to_owned()
        } else {
            format!("Files put back:\n{}", files.join("\n"))
        }
    } else {
        "The files were kept as they are.".to_owned()
    };
    forget_runs(app, chat, &runs).await?;
    app.hub
        .append(
            user.id,
            chat,
            Some(new_run),
            json!({"type": "rewound", "run": run, "turn": turn, "said": said}),
        )
        .await?;
    Ok(())
}

/// Puts back the files the chat changed from `turn` on, through its view; a line for each.
/// (What Python saved is not among them: only the file tools' edits are known.)
async fn restore_files(
    app: &Arc<App>,
    user: &User,
    chat: &str,
    checkpoints: &mut Checkpoints,
    turn: u32,
) -> Result<Vec<String>> {
    let view = crate::world::user_view(&app.pool, &app.backend, user.id, &user.username).await?;
    let narrower = crate::world::chat_grants(&app.pool, chat).await?;
    let view = crate::world::narrowed(view, &narrower);
    let restored = checkpoints
        .restore(turn, &ViewFiles(&view), None)
        .map_err(Error::BadRequest)?;
    crate::verbs::files_changed(app, &view, &restored.restored).await;
    Ok(restored.files)
}

/// The runs leave the chat's history (their events; the transcript keeps the turns, marked
/// rewound).
async fn forget_runs(app: &App, chat: &str, runs: &[String]) -> Result<()> {
    for r in runs {
        crate::db::execute(
            &app.pool,
            sqlx::query("DELETE FROM events WHERE chat_id = $1 AND run_id = $2")
                .bind(chat)
                .bind(r),
        )
        .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(run: &str, event: serde_json::Value) -> Stored {
        Stored {
            id: 0,
            user_id: 1,
            chat: "c".into(),
            run: Some(run.to_owned()),
            seq: 0,
            event,
        }
    }

    #[test]
    fn a_runs_turn_counts_the_turns_before_it_machine_ones_too() {
        let events = vec![
            ev("r1", json!({"type": "run_started", "run": "r1"})),
            ev(
                "r1",
                json!({"type": "user_input", "text": "one", "origin": "person"}),
            ),
            ev(
                "r1",
                json!({"type": "turn_ended", "reason": {"kind": "finished"}}),
            ),
            ev(
                "r1",
                json!({"type": "user_input", "text": "<job>", "origin": "machine"}),
            ),
            ev(
                "r1",
                json!({"type": "turn_ended", "reason": {"kind": "finished"}}),
            ),
            ev(
                "r2",
                json!({"type": "user_input", "text": "two", "origin": "person"}),
            ),
            ev(
                "r3",
                json!({"type": "user_input", "text": "three", "origin": "person"}),
            ),
        ];
        let (_, turn, runs) = replay(&events, "r2").unwrap();
        assert_eq!(turn, 3);
        assert_eq!(runs, ["r2", "r3"]);
        assert!(replay(&events, "r9").is_none());
    }
}
