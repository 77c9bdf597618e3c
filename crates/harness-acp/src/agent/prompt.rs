//! `session/prompt`: a slash command the session advertised is done here, one of the person's
//! prompt commands is expanded, anything else goes to the model.

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentChunk, CurrentModeUpdate, PromptRequest, PromptResponse, SessionNotification,
    SessionUpdate, StopReason,
};
use harness_agent::Op;
use harness_core::protocol::{Mode, Origin};
use serde_json::json;

use super::{Responder, State};
use crate::commands::{person_command, slash_command};
use crate::ext::unknown_session;
use crate::map::{prompt_input, text_block};

pub(super) fn prompt(
    state: &State,
    req: PromptRequest,
    responder: Responder<PromptResponse>,
    cx: ConnectionTo<Client>,
) -> Result<(), agent_client_protocol::Error> {
    let id = req.session_id.to_string();
    let sessions = match state.sessions.lock() {
        Ok(s) => s,
        Err(_) => return responder.respond_with_internal_error("the session table is poisoned"),
    };
    let Some(open) = sessions.get(&id) else {
        return responder.respond_with_error(unknown_session(&id));
    };
    let (mut text, images) = prompt_input(&req.prompt);
    // A slash command the session advertised: done here, not sent to the model.
    let mode = open.mode.lock().map(|m| *m).unwrap_or(Mode::Manual);
    if let Some(command) = slash_command(&text, mode) {
        // `/mode NAME` is told as `current_mode_update` before the prompt is answered (the
        // client did not ask through `session/set_mode`, so it would not know); the pump then
        // leaves the runtime's own news of it out, the mode being already the one it holds.
        if let Ok(Ok(mode)) = &command {
            if let Ok(mut m) = open.mode.lock() {
                *m = *mode;
            }
            let _ = cx.send_notification(SessionNotification::new(
                req.session_id.clone(),
                SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode.as_str())),
            ));
        }
        let ops = open.ops.clone();
        let session = req.session_id.clone();
        drop(sessions);
        let _ = cx.clone().spawn(async move {
            let said = match command {
                Err(line) => Some(line),
                Ok(Ok(mode)) => {
                    ops.submit(Op::SetMode { mode });
                    None
                }
                Ok(Err(query)) => ops.query(query).await.ok(),
            };
            if let Some(text) = said {
                let _ = cx.send_notification(SessionNotification::new(
                    session,
                    SessionUpdate::AgentMessageChunk(ContentChunk::new(text_block(text))),
                ));
            }
            responder.respond(PromptResponse::new(StopReason::EndTurn))
        });
        return Ok(());
    }
    // One of the person's prompt commands: its prompt is what the model gets.
    match person_command(&text, &open.commands) {
        Some(Ok(expanded)) => text = expanded,
        Some(Err(line)) => {
            drop(sessions);
            let _ = cx.send_notification(SessionNotification::new(
                req.session_id.clone(),
                SessionUpdate::AgentMessageChunk(ContentChunk::new(text_block(line))),
            ));
            return responder.respond(PromptResponse::new(StopReason::EndTurn));
        }
        None => {}
    }
    let Ok(mut pending) = open.pending.lock() else {
        return responder.respond_with_internal_error("the session is poisoned");
    };
    if pending.is_some() {
        return responder.respond_with_error(
            agent_client_protocol::Error::invalid_request()
                .data(json!("a prompt is already running in this session")),
        );
    }
    *pending = Some(responder);
    open.ops.submit(Op::Prompt {
        text,
        origin: Origin::Person,
        images,
    });
    Ok(())
}
