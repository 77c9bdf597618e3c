//! The pages over plain HTTP: their security headers and caching, and the chat list's routes
//! (rename, delete) with two users.

use harness_test_support::ScriptedServer;
use serde_json::json;

use super::{Client, Server, run_end, text, tool_call};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_are_served_with_a_strict_csp_nosniff_and_cached_assets() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "http://127.0.0.1:9/v1");
    let c = Client::anonymous(&server.base);
    let mut assets = Vec::new();
    for path in ["/login", "/chats", "/chats/some-id"] {
        let r = c
            .http
            .get(format!("{}{path}", server.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
        let h = r.headers().clone();
        let csp = h["content-security-policy"].to_str().unwrap().to_owned();
        assert!(csp.starts_with("default-src 'self'"), "{csp}");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert_eq!(h["x-content-type-options"], "nosniff");
        assert_eq!(h["cache-control"], "no-cache");
        let etag = h["etag"].to_str().unwrap().to_owned();
        let body = r.text().await.unwrap();
        assert!(body.contains("<div id=\"app\">"), "{body}");
        // The shell names its assets by a tag; nothing is loaded from elsewhere.
        for piece in body.split('"') {
            if piece.starts_with("/ui/") {
                assets.push(piece.to_owned());
            }
            assert!(!piece.starts_with("http"), "{piece}");
        }
        // A warm reload revalidates the shell: 304, no body.
        let again = c
            .http
            .get(format!("{}{path}", server.base))
            .header("if-none-match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status().as_u16(), 304);
        assert_eq!(again.headers()["x-content-type-options"], "nosniff");
    }
    assets.sort();
    assets.dedup();
    assert_eq!(assets.len(), 2, "{assets:?}");
    for asset in &assets {
        let r = c
            .http
            .get(format!("{}{asset}", server.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{asset}");
        let h = r.headers();
        assert_eq!(h["cache-control"], "public, max-age=31536000, immutable");
        assert_eq!(h["x-content-type-options"], "nosniff");
        let kind = h["content-type"].to_str().unwrap();
        if asset.ends_with(".js") {
            assert!(kind.starts_with("text/javascript"), "{kind}");
        } else {
            assert!(kind.starts_with("text/css"), "{kind}");
        }
    }
    // An old tag points to the current one; an unknown file is a JSON 404.
    let old = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}/ui/0000/app.js", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(old.status().as_u16(), 301);
    assert!(assets.contains(&old.headers()["location"].to_str().unwrap().to_owned()));
    let mut c = c;
    let (status, body) = c.get("/ui/0000/secret.txt").await;
    assert_eq!(status, 404, "{body}");
    // The server's front page is the app.
    let (status, front) = c.get("/").await;
    assert_eq!(status, 200);
    assert!(
        front.as_str().unwrap().contains("<script type=\"module\""),
        "{front}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chats_title_is_its_first_messages_first_line_with_words_trimmed_to_80_characters() {
    let model = ScriptedServer::start(vec![text(&["One."]), text(&["Two."])])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;
    let run = alice.say(&chat, "\n   sow the seeds   \nthen water").await;
    stream.until(run_end(&run)).await;
    let (_, got) = alice.get(&format!("/api/chats/{chat}")).await;
    assert_eq!(got["title"], "sow the seeds");
    let long = chat_with(&mut alice, &mut stream, &"é".repeat(100)).await;
    assert_eq!(long.chars().count(), 80);
}

async fn chat_with(c: &mut Client, stream: &mut super::Events, text: &str) -> String {
    let chat = c.chat().await;
    let run = c.say(&chat, text).await;
    stream.until(run_end(&run)).await;
    let (_, got) = c.get(&format!("/api/chats/{chat}")).await;
    got["title"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_is_renamed_and_deleted_by_its_owner_only_and_the_name_stays() {
    let model = ScriptedServer::start(vec![
        text(&["First ", "answer."]),
        text(&["Second ", "answer."]),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;
    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;
    let run = alice.say(&chat, "plan the garden\nwith details").await;
    stream.until(run_end(&run)).await;
    let (_, got) = alice.get(&format!("/api/chats/{chat}")).await;
    assert_eq!(got["title"], "plan the garden");

    let path = format!("/api/chats/{chat}");
    let rename = |title: &str| {
        let r = alice
            .http
            .patch(format!("{}{path}", alice.base))
            .header(
                "cookie",
                format!("llembas_session={}", alice.cookie.clone().unwrap()),
            )
            .json(&json!({"title": title}));
        (r, alice.clone())
    };
    // Bob can neither rename nor delete it: to him it does not exist.
    let (status, body) = bob
        .send(
            bob.http
                .patch(format!("{}{path}", bob.base))
                .header(
                    "cookie",
                    format!("llembas_session={}", bob.cookie.clone().unwrap()),
                )
                .json(&json!({"title": "mine now"})),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"], format!("no chat {chat}"));
    let (status, _) = bob
        .send(bob.http.delete(format!("{}{path}", bob.base)).header(
            "cookie",
            format!("llembas_session={}", bob.cookie.clone().unwrap()),
        ))
        .await;
    assert_eq!(status, 404);

    let (r, mut a) = rename("   ");
    assert_eq!(a.send(r).await.0, 400, "an empty title");
    let (r, mut a) = rename(&"x".repeat(81));
    assert_eq!(a.send(r).await.0, 400, "a title too long");
    // Another site's page cannot rename it through alice's cookie.
    let (r, mut a) = rename("from elsewhere");
    let (status, _) = a.send(r.header("origin", "http://evil.example")).await;
    assert_eq!(status, 403);
    let (r, mut a) = rename("Garden plan");
    let (status, body) = a.send(r).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["title"], "Garden plan");

    // The name the person gave stays when the chat goes on (the session saves its meta again).
    let run2 = alice.say(&chat, "and the roses?").await;
    stream.until(run_end(&run2)).await;
    let (_, list) = alice.get("/api/chats").await;
    assert_eq!(list[0]["title"], "Garden plan");
    let (_, list) = bob.get("/api/chats").await;
    assert_eq!(list, json!([]));

    let (status, body) = alice
        .send(alice.http.delete(format!("{}{path}", alice.base)).header(
            "cookie",
            format!("llembas_session={}", alice.cookie.clone().unwrap()),
        ))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(alice.get(&path).await.0, 404);
    assert_eq!(alice.get("/api/chats").await.1, json!([]));
    // Stored a moment after they were sent: read once the log's writer has caught up.
    llembas_server::chats::flush(&server.app.pool).await;
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM events WHERE chat_id = $1")
        .bind(&chat)
        .fetch_one(&server.app.pool)
        .await
        .unwrap();
    assert_eq!(left, 0, "its events went with it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_whose_run_goes_on_is_neither_renamed_nor_deleted() {
    let model = ScriptedServer::start(vec![text(&["Thinking ", "a lot"]).stalling()])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;
    let run = alice.say(&chat, "think").await;
    stream.until(|e| e.kind() == "text_delta").await;
    let cookie = format!("llembas_session={}", alice.cookie.clone().unwrap());
    let path = format!("{}/api/chats/{chat}", alice.base);
    let (status, body) = alice
        .send(
            alice
                .http
                .patch(&path)
                .header("cookie", &cookie)
                .json(&json!({"title": "t"})),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    let (status, body) = alice
        .send(alice.http.delete(&path).header("cookie", &cookie))
        .await;
    assert_eq!(status, 409, "{body}");
    let (status, _) = alice
        .post(&format!("/api/runs/{run}/stop"), json!({}))
        .await;
    assert_eq!(status, 202);
    stream.until(run_end(&run)).await;
    let (status, _) = alice
        .send(alice.http.delete(&path).header("cookie", &cookie))
        .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chats_mode_is_changed_by_its_owner_and_a_live_session_switches_at_once() {
    mode_changed(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_a_chats_mode_is_changed_once_by_its_owner_not_again_by_its_own_notice() {
    mode_changed(Some(
        super::postgres::Postgres::get()
            .database("mode_changed")
            .await,
    ))
    .await;
}

async fn mode_changed(db: Option<String>) {
    let model = ScriptedServer::start(vec![
        text(&["Hello."]),
        tool_call("c1", "write", json!({"path": "a.txt", "content": "a\n"})),
        text(&["Wrote a.txt."]),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_on(dir.path(), &model.base_url(), db.as_deref());
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;
    let mut stream = alice.events(None).await;
    let chat = alice.chat().await;
    // The session runs in this process from now on, kept while a page shows the chat (manual
    // mode: a write would ask).
    let _page = page_stream(&alice, &chat).await;
    let run = alice.say(&chat, "hi").await;
    stream.until(run_end(&run)).await;

    let path = format!("/api/chats/{chat}/mode");
    let (status, body) = bob.post(&path, json!({"mode": "auto"})).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = alice.post(&path, json!({"mode": "reckless"})).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = alice.post(&path, json!({"mode": "edit"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["mode"], "edit");
    // (A guard against a hang: the stream's keep-alives would keep it waiting for ever.)
    let changed = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        stream.until(|e| e.kind() == "mode_changed"),
    )
    .await
    .expect("no mode_changed event: the running session did not switch");
    assert_eq!(changed.last().unwrap().data["event"]["mode"], "edit");
    let (_, got) = alice.get(&format!("/api/chats/{chat}")).await;
    assert_eq!(got["mode"], "edit");

    // Edit mode writes in the user's home without asking.
    let run = alice.say(&chat, "write a.txt").await;
    let events = stream.until(run_end(&run)).await;
    assert!(
        !events.iter().any(|e| e.kind() == "tool_call_asked"),
        "{events:?}"
    );
    assert_eq!(
        std::fs::read_to_string(server.tree().join("home/alice/a.txt")).unwrap(),
        "a\n"
    );
    // Switched once: on PostgreSQL the process's own notice of the act is not carried out again.
    let switched: Vec<_> = changed
        .iter()
        .chain(&events)
        .filter(|e| e.kind() == "mode_changed")
        .collect();
    assert_eq!(switched.len(), 1, "{switched:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_view_route_gives_levels_of_the_users_own_view_only() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), "http://127.0.0.1:9/v1");
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;
    std::fs::write(server.tree().join("home/alice/notes.txt"), "mine\n").unwrap();

    let (status, v) = alice.get("/api/view").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["path"], "/home/alice");
    assert_eq!(v["home"], "/home/alice");
    assert_eq!(v["level"], "stage");
    assert_eq!(
        v["roots"],
        json!([
            {"path": "/home/alice", "level": "stage", "mount": false, "read_only": false},
            {"path": "/shared", "level": "ro", "mount": false, "read_only": true},
        ])
    );
    assert_eq!(
        v["entries"],
        json!([{"name": "notes.txt", "kind": "file", "mount": false, "read_only": false,
            "level": "stage", "passage": false, "size": 5}])
    );
    let (status, v) = alice.get("/api/view?path=/shared").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["level"], "ro");

    // Bob's view does not hold alice's home: the view's own refusal.
    let (status, v) = bob.get("/api/view?path=/home/alice").await;
    assert_eq!(status, 403, "{v}");
    assert!(
        v["error"].as_str().unwrap().starts_with("Access denied"),
        "{v}"
    );
    let (_, v) = bob.get("/api/view").await;
    assert_eq!(v["home"], "/home/bob");
    assert_eq!(v["entries"], json!([]));
    // Not signed in: 401.
    let (status, _) = Client::anonymous(&server.base).get("/api/view").await;
    assert_eq!(status, 401);
}

/// The event stream of a page showing `chat` (it holds the chat's page while it is open).
pub(super) async fn page_stream(c: &Client, chat: &str) -> super::Events {
    let resp = c
        .http
        .get(format!("{}/api/events?chat={chat}", c.base))
        .header(
            "cookie",
            format!("llembas_session={}", c.cookie.as_deref().unwrap()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    super::Events {
        body: Box::pin(resp.bytes_stream()),
        buf: String::new(),
    }
}

/// The tool names a model request offered, and its loader's description (deferred tools).
fn offered(body: &serde_json::Value) -> (Vec<String>, String) {
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let names = tools
        .iter()
        .map(|t| {
            t["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    let loader = tools
        .iter()
        .filter(|t| t["function"]["name"] == "load_tools")
        .map(|t| t["function"]["description"].as_str().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("");
    (names, loader)
}

async fn wait_detached(server: &Server, chat: &str) {
    let start = std::time::Instant::now();
    while server.app.pages.attached(chat) {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "the page stayed attached"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_answered_by_its_owner_only_and_the_answer_reaches_the_run() {
    let model = ScriptedServer::start(vec![
        tool_call(
            "q1",
            "question",
            json!({"question": "Which colour?", "options": ["red", "green"]}),
        ),
        text(&["Green it is."]),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let mut bob = server.user("bob").await;
    let chat = alice.chat().await;
    let mut events = alice.events(None).await;
    let run = alice.say(&chat, "pick a colour").await;
    let asked = within(events.until(|e| e.kind() == "question")).await;
    let q = &asked.last().unwrap().data["event"];
    assert_eq!(q["question"], "Which colour?");
    assert_eq!(q["options"], json!(["red", "green"]));
    let ask = q["ask"].as_str().unwrap().to_owned();
    // The question tool was offered (the page answers it).
    let (_, loader) = offered(&model.bodies()[0]);
    assert!(loader.contains("- question:"), "{loader}");

    // Another user cannot answer it: it is no question of theirs.
    let (status, v) = bob
        .post(&format!("/api/questions/{ask}"), json!({"answer": "red"}))
        .await;
    assert_eq!(status, 404, "{v}");
    // An empty answer is refused; the owner's answer goes to the run.
    let (status, v) = alice
        .post(&format!("/api/questions/{ask}"), json!({"answer": "  "}))
        .await;
    assert_eq!(status, 400, "{v}");
    let (status, v) = alice
        .post(&format!("/api/questions/{ask}"), json!({"answer": "green"}))
        .await;
    assert_eq!(status, 200, "{v}");
    within(events.until(run_end(&run))).await;
    let second = model.bodies()[1].to_string();
    assert!(second.contains("green"), "{second}");
    assert!(!second.contains("\"red\\\"\""), "{second}");
    // Answered once: a second answer finds nothing waiting.
    let (status, _) = alice
        .post(&format!("/api/questions/{ask}"), json!({"answer": "red"}))
        .await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_and_python_are_offered_while_a_page_of_the_chat_is_open_only() {
    let model = ScriptedServer::start(vec![
        text(&["no page"]),
        text(&["a page"]),
        tool_call("q1", "question", json!({"question": "Ready?"})),
        tool_call("p1", "python", json!({"code": "print(6 * 7)"})),
        text(&["It could not run."]),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let chat = alice.chat().await;
    let mut events = alice.events(None).await;

    // No page of the chat is open: neither is offered.
    let run = alice.say(&chat, "hello").await;
    within(events.until(run_end(&run))).await;
    let (names, loader) = offered(&model.bodies()[0]);
    assert!(!names.contains(&"python".to_owned()), "{names:?}");
    assert!(!loader.contains("- show:"), "{loader}");

    // A page of the chat opens: the next run offers both.
    let page = page_stream(&alice, &chat).await;
    assert!(server.app.pages.attached(&chat));
    let run = alice.say(&chat, "hello again").await;
    within(events.until(run_end(&run))).await;
    let (names, loader) = offered(&model.bodies()[1]);
    assert!(names.contains(&"python".to_owned()), "{names:?}");
    assert!(loader.contains("- show:"), "{names:?}");

    // The page goes while the run waits (on a question): the python call after answers the
    // spec's `unavailable` text, word for word.
    let run = alice.say(&chat, "compute").await;
    let asked = within(events.until(|e| e.kind() == "question")).await;
    let ask = asked.last().unwrap().data["event"]["ask"]
        .as_str()
        .unwrap()
        .to_owned();
    drop(page);
    wait_detached(&server, &chat).await;
    let (status, v) = alice
        .post(&format!("/api/questions/{ask}"), json!({"answer": "yes"}))
        .await;
    assert_eq!(status, 200, "{v}");
    let got = within(events.until(run_end(&run))).await;
    let finished = got
        .iter()
        .rfind(|e| e.kind() == "tool_call_finished")
        .unwrap();
    let result = &finished.data["event"]["result"];
    assert_eq!(result["is_error"], true);
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .ends_with("\nPython cannot run now: no open browser page is attached to this chat."),
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_is_asked_in_manual_mode_and_keeps_only_its_listed_saves_through_the_write_path() {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let code = "open('notes.md', 'w').write('new')";
    let model = ScriptedServer::start(vec![
        // Saves over a file the chat has not read: refused before anyone is asked.
        tool_call("p1", "python", json!({"code": code, "save": ["notes.md"]})),
        text(&["It was not read."]),
        // Reads it (`files`) and saves it and one more.
        tool_call(
            "p2",
            "python",
            json!({"code": code, "files": ["notes.md"], "save": ["notes.md", "out.txt"]}),
        ),
        text(&["Done."]),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("pyodide/314.0.7")).unwrap();
    std::fs::write(dir.path().join("pyodide/314.0.7/pyodide.mjs"), "").unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let notes = server.tree().join("home/alice/notes.md");
    std::fs::write(&notes, "old").unwrap();
    let chat = alice.chat().await;
    let mut events = alice.events(None).await;
    let _page = page_stream(&alice, &chat).await;

    let run = alice.say(&chat, "overwrite it").await;
    let got = within(events.until(run_end(&run))).await;
    assert!(!got.iter().any(|e| e.kind() == "tool_call_asked"));
    assert!(!got.iter().any(|e| e.kind() == "python"));
    let result = &got
        .iter()
        .rfind(|e| e.kind() == "tool_call_finished")
        .unwrap()
        .data["event"]["result"];
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        result["content"].as_str().unwrap().contains("Not read"),
        "{result}"
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "old");

    // Manual mode asks, showing the code and the files it saves.
    let run = alice.say(&chat, "now properly").await;
    let asked = within(events.until(|e| e.kind() == "tool_call_asked")).await;
    let ask = &asked.last().unwrap().data["event"];
    let subject = ask["question"]["subject"].as_str().unwrap();
    assert!(subject.starts_with(code), "{ask}");
    assert!(
        subject.ends_with("# saves /home/alice/notes.md, /home/alice/out.txt"),
        "{ask}"
    );
    assert!(!asked.iter().any(|e| e.kind() == "python"));
    let approval = ask["approval"].as_str().unwrap().to_owned();
    let (status, body) = alice
        .post(
            &format!("/api/approvals/{approval}"),
            json!({"answer": "yes"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let asked = within(events.until(|e| e.kind() == "python")).await;
    let py = &asked.last().unwrap().data["event"];
    assert_eq!(py["files"], json!(["/home/alice/notes.md"]));
    assert_eq!(
        py["save"],
        json!(["/home/alice/notes.md", "/home/alice/out.txt"])
    );
    // A page (or the code in its frame) claims more than the call listed: only the listed
    // path is kept, through the write path.
    let (status, body) = alice
        .post(
            &format!("/api/python/{}", py["ask"].as_str().unwrap()),
            json!({
                "stdout": "hi\n",
                "saved": {
                    "/home/alice/notes.md": b64("new"),
                    "/home/alice/evil.txt": b64("x"),
                    "../alice/.bashrc": b64("x"),
                },
                "written": [{"path": "/home/alice/evil.txt", "bytes": 1}],
                "duration_ms": 5
            }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let got = within(events.until(run_end(&run))).await;
    let result = &got
        .iter()
        .rfind(|e| e.kind() == "tool_call_finished")
        .unwrap()
        .data["event"]["result"];
    let content = result["content"].as_str().unwrap();
    assert!(
        content.contains("hi\nSaved /home/alice/notes.md (3 bytes)\n"),
        "{content}"
    );
    assert!(
        content.contains("Not saved /home/alice/evil.txt: not in the call's `save` list"),
        "{content}"
    );
    assert!(
        content.contains("Not saved /home/alice/.bashrc: not in the call's `save` list"),
        "{content}"
    );
    assert!(
        content.contains("Not saved /home/alice/out.txt: the code did not write it"),
        "{content}"
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "new");
    assert!(!server.tree().join("home/alice/evil.txt").exists());
    assert!(!server.tree().join("home/alice/.bashrc").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shown_html_file_is_sandboxed_and_the_pyodide_files_are_served_for_an_opaque_origin() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("pyodide/314.0.7")).unwrap();
    std::fs::write(
        dir.path().join("pyodide/314.0.7/pyodide.asm.wasm"),
        b"\0asm",
    )
    .unwrap();
    let server = Server::start(dir.path(), "http://127.0.0.1:9/v1");
    let alice = server.user("alice").await;
    let mut bob = server.user("bob").await;
    std::fs::write(
        server.tree().join("home/alice/page.html"),
        "<script>document.title = 'x'</script>",
    )
    .unwrap();
    let get = |c: &Client, path: &str| {
        let mut r = c.http.get(format!("{}{path}", c.base));
        if let Some(k) = &c.cookie {
            r = r.header("cookie", format!("llembas_session={k}"));
        }
        r.send()
    };
    let r = get(&alice, "/show?path=page.html").await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let h = r.headers().clone();
    assert!(
        h["content-security-policy"]
            .to_str()
            .unwrap()
            .starts_with("sandbox allow-scripts"),
        "{h:?}"
    );
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["content-type"], "text/html; charset=utf-8");
    assert!(h.get("x-frame-options").is_none());
    assert_eq!(
        r.text().await.unwrap(),
        "<script>document.title = 'x'</script>"
    );
    // Another user's file is the view's refusal; no user, no file.
    let (status, _) = bob.get("/show?path=/home/alice/page.html").await;
    assert_eq!(status, 403);
    let anon = Client::anonymous(&server.base);
    assert_eq!(
        get(&anon, "/show?path=/home/alice/page.html")
            .await
            .unwrap()
            .status()
            .as_u16(),
        401
    );
    // The chat page may frame this server's pages only.
    let r = get(&alice, "/chats").await.unwrap();
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("frame-src 'self'"), "{csp}");

    // Pyodide's files: wasm as wasm, readable from an opaque origin, cached as immutable.
    let r = get(&anon, "/pyodide/314.0.7/pyodide.asm.wasm")
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let h = r.headers().clone();
    assert_eq!(h["content-type"], "application/wasm");
    assert_eq!(h["access-control-allow-origin"], "*");
    assert_eq!(h["cache-control"], "public, max-age=31536000, immutable");
    assert_eq!(h["x-content-type-options"], "nosniff");
    for missing in [
        "/pyodide/314.0.7/pyodide.mjs",
        "/pyodide/0.1.0/pyodide.asm.wasm",
        "/pyodide/314.0.7/..%2Fllembas.db",
    ] {
        let r = get(&anon, missing).await.unwrap();
        assert_eq!(r.status().as_u16(), 404, "{missing}");
    }
    // The runner is a sandboxed page too, with no network but for the Pyodide files.
    let r = get(&anon, "/python/runner.html").await.unwrap();
    let csp = r.headers()["content-security-policy"].to_str().unwrap();
    let host = server.base.trim_start_matches("http://");
    assert!(csp.starts_with("sandbox allow-scripts"), "{csp}");
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert!(
        csp.contains(&format!("connect-src {host}/pyodide/314.0.7/;")),
        "{csp}"
    );
}

/// `f`, or a failure after a minute (a stream's keep-alives would keep a wait for an event
/// that never comes going for ever).
async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(60), f)
        .await
        .expect("the awaited event did not come within a minute")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_assets_json_and_wasm_are_gzipped_but_not_zips_and_the_event_stream_still_streams() {
    let model = ScriptedServer::start(vec![text(&["one ", "two ", "three"]).stalling()])
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pyodide = dir.path().join("pyodide/314.0.7");
    std::fs::create_dir_all(&pyodide).unwrap();
    let wasm: Vec<u8> = b"\0asm"
        .iter()
        .copied()
        .chain((0..20_000u32).flat_map(|i| (i % 7).to_le_bytes()))
        .collect();
    std::fs::write(pyodide.join("pyodide.asm.wasm"), &wasm).unwrap();
    std::fs::write(pyodide.join("python_stdlib.zip"), vec![b'z'; 4096]).unwrap();
    let server = Server::start(dir.path(), &model.base_url());
    let mut alice = server.user("alice").await;
    let chat = alice.chat().await;
    let cookie = format!("llembas_session={}", alice.cookie.clone().unwrap());
    let get = |path: &str| {
        alice
            .http
            .get(format!("{}{path}", server.base))
            .header("cookie", &cookie)
            .header("accept-encoding", "gzip")
            .send()
    };
    let gzipped = |h: &reqwest::header::HeaderMap| {
        h.get("content-encoding").and_then(|v| v.to_str().ok()) == Some("gzip")
    };

    // The shell, its assets, the API's JSON and the wasm are sent gzipped, and smaller.
    let r = get(&format!("/chats/{chat}")).await.unwrap();
    assert!(gzipped(r.headers()), "{:?}", r.headers());
    let shell = reqwest::get(format!("{}/chats", server.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let assets: Vec<String> = shell
        .split('"')
        .filter(|p| p.starts_with("/ui/"))
        .map(str::to_owned)
        .collect();
    assert_eq!(assets.len(), 2, "{shell}");
    let mut paths = assets.clone();
    paths.push(format!("/api/chats/{chat}"));
    paths.push("/pyodide/314.0.7/pyodide.asm.wasm".into());
    for path in &paths {
        let plain = reqwest::Client::new()
            .get(format!("{}{path}", server.base))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert!(!gzipped(plain.headers()), "{path} unasked");
        let plain = plain.bytes().await.unwrap().len();
        let r = get(path).await.unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
        let h = r.headers().clone();
        assert!(gzipped(&h), "{path}: {h:?}");
        assert!(
            h["vary"].to_str().unwrap().contains("accept-encoding"),
            "{path}: {h:?}"
        );
        let body = r.bytes().await.unwrap();
        assert_eq!(&body[..2], &[0x1f, 0x8b], "{path}");
        assert!(
            body.len() < plain,
            "{path}: {} of {plain} bytes",
            body.len()
        );
    }
    // A zip is compressed already: sent as it is.
    let r = get("/pyodide/314.0.7/python_stdlib.zip").await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(!gzipped(r.headers()), "{:?}", r.headers());
    assert_eq!(r.bytes().await.unwrap().len(), 4096);

    // The event stream is never gzipped, so each event leaves as it comes: the answer's pieces
    // arrive while the model still holds the stream open.
    let resp = get("/api/events").await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert!(!gzipped(resp.headers()), "{:?}", resp.headers());
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut events = super::Events {
        body: Box::pin(resp.bytes_stream()),
        buf: String::new(),
    };
    let run = alice.say(&chat, "count").await;
    let got =
        within(events.until(|e| e.kind() == "text_delta" && e.data["event"]["text"] == "three"))
            .await;
    let pieces: Vec<&str> = got
        .iter()
        .filter(|e| e.kind() == "text_delta")
        .filter_map(|e| e.data["event"]["text"].as_str())
        .collect();
    assert_eq!(pieces, ["one ", "two ", "three"]);
    assert!(!got.iter().any(|e| e.kind() == "run_ended"));
    let (status, v) = alice
        .post(&format!("/api/runs/{run}/stop"), json!({}))
        .await;
    assert_eq!(status, 202, "{v}");
    within(events.until(run_end(&run))).await;
}
