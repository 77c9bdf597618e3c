//! What a device says of its session (ACP `session/update`), as the chat's events.

use super::*;

/// The text of ACP content: a block's text, or the texts of a tool call's content.
pub fn text_of(content: &Value) -> String {
    match content {
        Value::Array(items) => items.iter().map(text_of).collect::<Vec<_>>().join(""),
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some("text") => o
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            Some("content") => o.get("content").map(text_of).unwrap_or_default(),
            _ => String::new(),
        },
        _ => String::new(),
    }
}

/// The device's `session/update`s of a running chat as the events a local run gives.
fn events_of(u: &Value) -> Vec<Value> {
    let lembas = u.pointer("/_meta/lembas").cloned().unwrap_or(Value::Null);
    let call_id = u
        .get("toolCallId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let call = || {
        json!({"id": call_id, "name": lembas.get("tool").cloned().unwrap_or_else(|| u.get("title").cloned().unwrap_or(Value::Null)),
            "arguments": u.get("rawInput").cloned().unwrap_or(json!({}))})
    };
    let block = lembas.get("block").cloned().unwrap_or(json!("tool"));
    match u.get("sessionUpdate").and_then(Value::as_str) {
        Some("agent_message_chunk") => {
            vec![json!({"type": "text_delta", "text": text_of(&u["content"])})]
        }
        Some("agent_thought_chunk") => match lembas.get("notice") {
            Some(level) => vec![json!({"type": "notice", "level": level,
                "text": text_of(&u["content"]).trim_end()})],
            None => vec![json!({"type": "reasoning_delta", "text": text_of(&u["content"])})],
        },
        Some("tool_call") if lembas.get("subagent") == Some(&json!(true)) => {
            vec![
                json!({"type": "subagent_call", "task_call_id": lembas.get("parent"),
                "job_id": lembas.get("job"), "call": call(), "block": block, "status": "started"}),
            ]
        }
        Some("tool_call") => {
            vec![json!({"type": "tool_call_started", "call": call(), "block": block})]
        }
        Some("tool_call_update") => {
            let status = u.get("status").and_then(Value::as_str);
            if lembas.get("subagent") == Some(&json!(true)) {
                let done = match status {
                    Some("completed") => json!({"status": "done"}),
                    Some("failed") => json!({"status": "failed", "reason": text_of(&u["content"])}),
                    _ => return Vec::new(),
                };
                let mut e = json!({"type": "subagent_call", "task_call_id": lembas.get("parent"),
                    "job_id": lembas.get("job"), "call": call(), "block": block});
                if let (Some(e), Some(d)) = (e.as_object_mut(), done.as_object()) {
                    e.extend(d.clone());
                }
                return vec![e];
            }
            let content = u
                .get("content")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            match status {
                Some("completed") | Some("failed") => {
                    let mut out = Vec::new();
                    let mut said = Vec::new();
                    for d in content.iter().filter(|c| c["type"] == "diff") {
                        let path = d["path"].as_str().unwrap_or_default();
                        said.push(format!("Changed {path}."));
                        out.push(json!({"type": "edit", "call_id": call_id, "path": path,
                            "before": d.get("oldText").and_then(Value::as_str).unwrap_or_default(),
                            "after": d.get("newText").and_then(Value::as_str).unwrap_or_default()}));
                    }
                    let text = text_of(&Value::Array(content.clone()));
                    let body = if text.is_empty() {
                        said.join("\n")
                    } else {
                        text
                    };
                    out.push(json!({"type": "tool_call_finished", "result": {
                        "call_id": call_id,
                        "result_id": lembas.get("result").cloned().unwrap_or(json!("#0")),
                        "content": body, "is_error": status == Some("failed")}}));
                    out
                }
                // A running command's new output (a diff before the question is its preview:
                // the question carries the change).
                Some("in_progress") => {
                    let text = text_of(&Value::Array(content));
                    if text.is_empty() {
                        Vec::new()
                    } else {
                        vec![json!({"type": "tool_output", "call_id": call_id, "text": text})]
                    }
                }
                _ => Vec::new(),
            }
        }
        Some("current_mode_update") => u
            .get("currentModeId")
            .map(|m| vec![json!({"type": "mode_changed", "mode": m})])
            .unwrap_or_default(),
        Some("plan") => {
            use harness_core::plan::{Plan, TaskStatus};
            let tasks: Vec<(String, TaskStatus)> = u
                .get("entries")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|e| {
                    let status = match e["status"].as_str() {
                        Some("in_progress") => TaskStatus::Doing,
                        Some("completed") => TaskStatus::Done,
                        _ => TaskStatus::Todo,
                    };
                    (e["content"].as_str().unwrap_or_default().to_owned(), status)
                })
                .collect();
            let plan = if tasks.is_empty() {
                Value::Null
            } else {
                serde_json::to_value(Plan::of_entries(tasks)).unwrap_or(Value::Null)
            };
            vec![json!({"type": "plan_changed", "plan": plan})]
        }
        _ => Vec::new(),
    }
}

/// A `session/update` of the device: stored and streamed as the chat's events while a run goes
/// on in its session (what a `session/load` replays is history the chat has already).
pub async fn update(app: &App, device: &str, n: SessionNotification) {
    let session = n.session_id.to_string();
    let Some((chat, run, user_id)) = app.device_chats.running_in(device, &session) else {
        return;
    };
    let u = serde_json::to_value(&n.update).unwrap_or(Value::Null);
    for e in events_of(&u) {
        if e["type"] == "mode_changed"
            && let Some(m) = e["mode"].as_str()
            && let Err(err) = sqlx::query("UPDATE chats SET mode = $1 WHERE id = $2")
                .bind(m)
                .bind(&chat)
                .execute(&app.pool)
                .await
        {
            tracing::error!("chat {chat}: {err}");
        }
        if let Err(err) = app.hub.append(user_id, &chat, Some(&run), e).await {
            tracing::error!("chat {chat}: {err}");
        }
    }
}
