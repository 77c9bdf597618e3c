//! A device chat's approvals: the device's permission requests shown in the page as a local
//! chat's, and the person's answers sent back to the device.

use super::*;

/// Answers the user's approval `id` when a device waits for it: `yes`, `always` or `no` (with
/// a note for the model, sent as `_meta.lembas.note`); `false` when no device waits for it (a
/// local chat's, or one that ended).
pub async fn approve(
    app: &App,
    user: &User,
    id: &str,
    answer: &str,
    note: Option<&str>,
) -> Result<bool> {
    let option = match answer {
        "yes" => "once",
        "always" => "always",
        "no" => "no",
        other => {
            return Err(Error::BadRequest(format!(
                "unknown answer {other:?}: use yes, always or no"
            )));
        }
    };
    let owner: Option<i64> = sqlx::query_scalar("SELECT user_id FROM approvals WHERE id = $1")
        .bind(id)
        .fetch_optional(&app.pool)
        .await?;
    if owner.is_some_and(|o| o != user.id) {
        return Err(Error::NotFound(format!("no approval {id}")));
    }
    let Some(asked) = app.device_chats.lock().asks.remove(id) else {
        return Ok(false);
    };
    let option = if option == "always" && !asked.always {
        "once"
    } else {
        option
    };
    sqlx::query("UPDATE approvals SET answered = 1 WHERE id = $1")
        .bind(id)
        .execute(&app.pool)
        .await?;
    let note = note.filter(|n| option == "no" && !n.trim().is_empty());
    let mut response = RequestPermissionResponse::new(RequestPermissionOutcome::Selected(
        SelectedPermissionOutcome::new(option),
    ));
    if let Some(n) = note {
        let mut meta = Meta::new();
        meta.insert("lembas".into(), json!({"note": n}));
        response = response.meta(meta);
    }
    asked
        .responder
        .respond(response)
        .map_err(|_| Error::Conflict(format!("the run the approval {id} belongs to has ended")))?;
    let answered = match (option, note) {
        ("once", _) => json!({"answer": "once"}),
        ("always", _) => json!({"answer": "always"}),
        (_, Some(n)) => json!({"answer": "deny", "feedback": n}),
        _ => json!({"answer": "deny"}),
    };
    app.hub
        .append(
            user.id,
            &asked.chat,
            Some(&asked.run),
            json!({"type": "tool_call_answered", "call_id": asked.call_id, "answer": answered}),
        )
        .await?;
    Ok(true)
}

/// The device asks the person before a call runs: an approval the page answers. Nothing runs
/// in the session: refused.
pub async fn permission(
    app: &App,
    device: &str,
    req: RequestPermissionRequest,
    responder: Responder,
) {
    let session = req.session_id.to_string();
    let Some((chat, run, user_id)) = app.device_chats.running_in(device, &session) else {
        let _ = responder.respond(RequestPermissionResponse::new(
            RequestPermissionOutcome::Cancelled,
        ));
        return;
    };
    let v = serde_json::to_value(&req).unwrap_or(Value::Null);
    let lembas = v.pointer("/_meta/lembas").cloned().unwrap_or(Value::Null);
    let call_id = v
        .pointer("/toolCall/toolCallId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let always = v
        .get("options")
        .and_then(Value::as_array)
        .is_some_and(|o| o.iter().any(|o| o["optionId"] == "always"));
    let mut question = json!({
        "tool": lembas.get("tool").cloned().unwrap_or(Value::Null),
        "risk": lembas.get("risk").cloned().unwrap_or(Value::Null),
        "subject": lembas.get("subject").cloned().unwrap_or_else(|| v.pointer("/toolCall/title").cloned().unwrap_or(Value::Null)),
    });
    for (from, to) in [
        ("always", "pattern"),
        ("reason", "reason"),
        ("change", "change"),
    ] {
        if let Some(x) = lembas.get(from) {
            question[to] = x.clone();
        }
    }
    let asked = crate::chats::record_approval(app, user_id, &chat, Some(run.as_str()), &call_id);
    let id = match asked.await {
        Ok(id) => id,
        Err(e) => {
            tracing::error!("chat {chat}: {e}");
            let _ = responder.respond(RequestPermissionResponse::new(
                RequestPermissionOutcome::Cancelled,
            ));
            return;
        }
    };
    app.device_chats.lock().asks.insert(
        id.clone(),
        Asked {
            chat: chat.clone(),
            run: run.clone(),
            call_id: call_id.clone(),
            always,
            responder,
        },
    );
    let event = json!({"type": "tool_call_asked", "call_id": call_id, "question": question, "approval": id});
    if let Err(e) = app.hub.append(user_id, &chat, Some(&run), event).await {
        tracing::error!("chat {chat}: {e}");
    }
}
