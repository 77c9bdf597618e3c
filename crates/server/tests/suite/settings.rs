//! A user's settings (personality, the mode and model of a new chat), a chat's model and its
//! context use, and a long chat's history a page at a time — each with two users.

use harness_test_support::ScriptedServer;
use serde_json::{Value, json};

use super::{Server, run_end, text};

/// The system message of the model's request `n`.
fn system_of(model: &ScriptedServer, n: usize) -> String {
    let bodies = model.bodies();
    bodies[n]["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

const PAIR: &str = "Work as a pair programmer beside the person.";
const TEACHER: &str = include_str!("../../../../spec/prompts/personality/teacher.md");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_are_each_users_own_and_a_chat_takes_its_users_mode_and_personality() {
    let model = ScriptedServer::start(vec![
        text(&["Hello ", "alice."]),
        text(&["Hello ", "bob."]),
        text(&["Again."]),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;

    let (status, s) = alice.get("/api/settings").await;
    assert_eq!(status, 200, "{s}");
    assert_eq!(s["personality"], "default");
    assert_eq!(s["mode"], "manual");
    assert_eq!(s["model"], Value::Null);
    assert_eq!(s["models"], json!(["scripted"]));
    let names: Vec<&str> = s["personalities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 6, "{names:?}");
    for n in [
        "default",
        "concise",
        "teacher",
        "pair",
        "pragmatic",
        "cheerful",
    ] {
        assert!(names.contains(&n), "{names:?}");
    }

    // What is refused, and why.
    let (status, body) = alice
        .put_json("/api/settings", json!({"personality": "pirate"}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("pirate"), "{body}");
    let (status, _) = alice
        .put_json("/api/settings", json!({"mode": "yolo"}))
        .await;
    assert_eq!(status, 400);
    let (status, body) = alice
        .put_json("/api/settings", json!({"model": "not-allowed"}))
        .await;
    assert_eq!(status, 403, "{body}");

    let (status, s) = alice
        .put_json(
            "/api/settings",
            json!({"personality": "pair", "mode": "edit", "model": "scripted"}),
        )
        .await;
    assert_eq!(status, 200, "{s}");
    assert_eq!(
        (&s["personality"], &s["mode"], &s["model"]),
        (&json!("pair"), &json!("edit"), &json!("scripted"))
    );
    // Bob's are his own.
    let (_, b) = bob.get("/api/settings").await;
    assert_eq!(
        (&b["personality"], &b["mode"]),
        (&json!("default"), &json!("manual"))
    );

    // A chat that names no mode takes its user's; the personality reaches the system prompt.
    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;
    assert_eq!(
        alice.get(&format!("/api/chats/{chat}")).await.1["mode"],
        "edit"
    );
    let run = alice.say(&chat, "hello").await;
    stream.until(run_end(&run)).await;
    assert!(
        system_of(&model, 0).contains(PAIR),
        "{}",
        system_of(&model, 0)
    );

    let mut bob_stream = bob.events(None).await;
    let bobs = bob.chat().await;
    assert_eq!(
        bob.get(&format!("/api/chats/{bobs}")).await.1["mode"],
        "manual"
    );
    let run = bob.say(&bobs, "hello").await;
    bob_stream.until(run_end(&run)).await;
    assert!(!system_of(&model, 1).contains(PAIR));

    // A changed preset reaches the chat's next message (its idle session is built again).
    let (status, _) = alice
        .put_json("/api/settings", json!({"personality": "teacher"}))
        .await;
    assert_eq!(status, 200);
    let run = alice.say(&chat, "again").await;
    stream.until(run_end(&run)).await;
    let system = system_of(&model, 2);
    assert!(
        system.contains(TEACHER.trim().lines().next().unwrap()),
        "{system}"
    );
    assert!(!system.contains(PAIR));

    // The admin's routes the settings page calls are an admin's only.
    assert_eq!(alice.get("/api/admin/users").await.0, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chats_model_is_chosen_among_the_allowed_by_its_owner_and_its_context_use_is_told() {
    let model = ScriptedServer::start(vec![
        text(&["One ", "two."]),
        text(&["Three."]),
        text(&["Thinking ", "long"]).stalling(),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &model.base_url(), |c| {
        if let Some(m) = c.model.as_mut() {
            m.context = Some(32_768);
        }
    });
    let mut root = server.admin().await;
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;
    let (status, _) = root
        .put_json(
            "/api/admin/models",
            json!({"allowed": ["scripted", "other"]}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, m) = alice.get("/api/models").await;
    assert_eq!(status, 200, "{m}");
    assert_eq!(
        m,
        json!({"models": ["scripted", "other"], "default": "scripted"})
    );

    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;
    let path = format!("/api/chats/{chat}");
    let (_, got) = alice.get(&path).await;
    assert_eq!(got["context"], json!({"used": null, "window": 32_768}));
    let run = alice.say(&chat, "count").await;
    stream.until(run_end(&run)).await;
    // The scripted answer's usage: 42 prompt tokens and one a piece.
    let (_, got) = alice.get(&path).await;
    assert_eq!(
        got["context"],
        json!({"used": 44, "window": 32_768}),
        "{got}"
    );

    let to = format!("{path}/model");
    let (status, body) = bob.post(&to, json!({"model": "other"})).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(alice.post(&to, json!({"model": " "})).await.0, 400);
    let (status, body) = alice.post(&to, json!({"model": "forbidden"})).await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = alice.post(&to, json!({"model": "other"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"id": chat, "model": "other", "window": 32_768})
    );
    assert_eq!(alice.get(&path).await.1["model"], "other");
    assert_eq!(bob.get(&path).await.0, 404);

    // The next message goes to the model chosen.
    let run = alice.say(&chat, "more").await;
    stream.until(run_end(&run)).await;
    let bodies = model.bodies();
    assert_eq!(bodies[0]["model"], "scripted");
    assert_eq!(bodies[1]["model"], "other");

    // Not while a run goes on.
    alice.say(&chat, "think").await;
    stream.until(|e| e.kind() == "text_delta").await;
    let (status, body) = alice.post(&to, json!({"model": "scripted"})).await;
    assert_eq!(status, 409, "{body}");
}

/// Appends `n` whole runs to `chat` (each: started, the user's words, an answer, ended) through
/// the event log, as runs would; the words are `message K`.
pub async fn long_history(server: &Server, user_id: i64, chat: &str, n: usize) {
    let hub = &server.app.hub;
    let runs: Vec<String> = (0..n).map(|k| format!("run{k:04}")).collect();
    for chunk in (0..n).collect::<Vec<_>>().chunks(250) {
        let mut pending = Vec::new();
        for &k in chunk {
            let run = &runs[k];
            for event in [
                json!({"type": "run_started", "run": run}),
                json!({"type": "user_input", "text": format!("message {k}"), "origin": "person"}),
                json!({"type": "text_delta", "text": format!("answer {k}")}),
                json!({"type": "turn_ended", "reason": {"kind": "completed"}}),
                json!({"type": "run_ended", "run": run, "status": "completed"}),
            ] {
                pending.push(hub.append(user_id, chat, Some(run), event));
            }
        }
        for r in futures_util::future::join_all(pending).await {
            r.unwrap();
        }
    }
}

fn said(events: &Value) -> Vec<String> {
    events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"]["type"] == "user_input")
        .map(|e| e["event"]["text"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_chat_opens_with_its_last_runs_and_older_pages_follow_to_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;
    let chat = alice.chat().await;
    let id = alice.get("/api/auth/me").await.1["id"].as_i64().unwrap();
    long_history(&server, id, &chat, 1000).await;
    let path = format!("/api/chats/{chat}");

    let (status, first) = alice.get(&format!("{path}?messages=0")).await;
    assert_eq!(status, 200, "{first}");
    assert!(first.get("messages").is_none());
    let page = llembas_server::history::PAGE_RUNS as usize;
    let words = said(&first["events"]);
    assert_eq!(words.len(), page, "the first page is bounded");
    assert_eq!(words.last().unwrap(), "message 999");
    assert!(first["events"].as_array().unwrap().len() <= page * 5);
    // Every page begins with a run's start: no turn is cut.
    assert_eq!(first["events"][0]["event"]["type"], "run_started");

    // Older pages, walked to the first: every message once, in order.
    let mut all = words;
    let mut before = first["before"].clone();
    let mut pages = 1;
    while let Some(b) = before.as_i64() {
        let (status, older) = alice.get(&format!("{path}?before={b}")).await;
        assert_eq!(status, 200, "{older}");
        let mut w = said(&older["events"]);
        assert!(!w.is_empty() && w.len() <= page);
        w.extend(all);
        all = w;
        before = older["before"].clone();
        pages += 1;
        // Bob gets nothing of it.
        if pages == 2 {
            assert_eq!(bob.get(&format!("{path}?before={b}")).await.0, 404);
        }
    }
    let expected: Vec<String> = (0..1000).map(|k| format!("message {k}")).collect();
    assert_eq!(all, expected);
    assert_eq!(pages, 1000 / page);
}

/// A database failure is a 500 whose text names neither the query nor the database's message
/// (the detail is in the log).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_failure_is_a_500_with_the_generic_text_alone() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    assert_eq!(alice.get("/api/settings").await.0, 200);
    sqlx::query("DROP TABLE user_settings")
        .execute(&server.app.pool)
        .await
        .unwrap();
    let (status, body) = alice.get("/api/settings").await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(
        body,
        json!({"error": "Internal error: the server could not do this; the detail is in its log."})
    );
}
